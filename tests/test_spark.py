"""simdb.spark in Spark local mode on small data: equal to the single-node answers.

One SparkSession (local[2]) for the whole test session: starting one costs 5-15 s.
Skipped, with the reason, only when a Java runtime is missing.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pyspark  # noqa: F401  (pyspark, pandas and pyarrow are [test] dependencies)
import pytest

from simdb.errors import InvalidArgumentError


def brute_pairs(items, k):
    """The reference, written here (not simdb.spark's own): every pair of (id, signed fp) rows
    within Hamming distance k, as (smaller id, larger id, distance); rows without a fingerprint
    never pair."""
    rows = [(i, f % (1 << 64)) for i, f in items if f is not None]
    return {
        (min(ia, ib), max(ia, ib), bin(fa ^ fb).count("1"))
        for n, (ia, fa) in enumerate(rows)
        for ib, fb in rows[n + 1 :]
        if bin(fa ^ fb).count("1") <= k
    }


def _java_ok() -> bool:
    java = shutil.which("java")
    if java is None and os.environ.get("JAVA_HOME"):
        java = os.path.join(os.environ["JAVA_HOME"], "bin", "java")
    if not java or not os.path.exists(java):
        return False
    try:
        return subprocess.run([java, "-version"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


if not _java_ok():  # pragma: no cover
    pytest.skip("no Java runtime for PySpark (run scripts/ensure-java.sh)", allow_module_level=True)

from simdb import spark as sspark  # noqa: E402
from simdb.core.bits import to_signed  # noqa: E402
from simdb.spark.hamming import run_pairs  # noqa: E402
from simdb.spark.postgres import libpq_url  # noqa: E402
from simdb.spark.session import pyspark_functions  # noqa: E402

MASK = (1 << 64) - 1


@pytest.fixture(scope="module")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = sspark.session("local[2]", "simdb-tests", {"spark.sql.shuffle.partitions": "2",
                                                         "spark.driver.memory": "1g"})
    yield session
    session.stop()


def _flip(fp: int, n: int, rng: random.Random) -> int:
    for b in rng.sample(range(64), n):
        fp ^= 1 << b
    return fp


def planted(n_families=40, size=4, noise=200, seed=1, spread=4):
    """Families of variants (distance up to ``spread`` from a root) plus uniform noise; signed fps."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n_families):
        root = rng.getrandbits(64)
        rows.append(root)
        for _ in range(size - 1):
            rows.append(_flip(root, rng.randint(0, spread), rng))
    # skewed buckets: many rows sharing one block value
    shared = rng.getrandbits(16) << 48
    for _ in range(30):
        rows.append(shared | rng.getrandbits(48))
    rows += [rng.getrandbits(64) for _ in range(noise)]
    rows.append(rows[0])  # an exact duplicate
    rng.shuffle(rows)
    return [(i, to_signed(f)) for i, f in enumerate(rows)]


def test_layouts_cover_pigeonhole():
    for k in range(0, 8):
        for scheme in ("blocks", "manku"):
            tables = sspark.layout(k, scheme)
            masks = []
            for t in tables:
                m = 0
                for shift, width in t:
                    m |= ((1 << width) - 1) << shift
                masks.append(m)
            rng = random.Random(k)
            for _ in range(300):  # any k flipped bits leave one table's key untouched
                x = 0
                for b in rng.sample(range(64), k):
                    x |= 1 << b
                assert any(x & m == 0 for m in masks)
    assert sspark.layout(3, "blocks") == [[(48, 16)], [(32, 16)], [(16, 16)], [(0, 16)]]
    assert len(sspark.layout(3, "manku")) == 10
    assert sspark.choose_scheme(1_000_000) == "blocks"
    assert sspark.choose_scheme(100_000_000) == "manku"
    with pytest.raises(ValueError):
        sspark.layout(3, "other")
    with pytest.raises(ValueError):
        sspark.layout(-1)


def test_missing_pyspark_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(ImportError, match=r"pip install 'simdb-postgres\[spark\]'"):
        pyspark_functions()


def test_run_pairs_scan():
    import numpy as np

    keys = np.array([1, 1, 1, 2, 3, 3, 5, 5, 5, 5], dtype=np.int64)
    got = set()
    for i, j in run_pairs(keys):
        got |= set(zip(i.tolist(), j.tolist()))
    want = {(i, j) for i in range(10) for j in range(i + 1, 10) if keys[i] == keys[j]}
    assert got == want


@pytest.mark.parametrize("k,scheme", [(3, "blocks"), (3, "manku"), (0, "blocks"), (5, "auto")])
def test_pairs_equal_brute_force(spark, k, scheme):
    rows = planted(spread=min(k + 1, 6))
    df = spark.createDataFrame(rows + [(len(rows), None)], "id long, fp long")
    got = sspark.pairs(df, k=k, tables=scheme).collect()
    triples = [(r.id_a, r.id_b, r.distance) for r in got]
    assert len(triples) == len(set(triples)), "each pair once"
    assert all(a < b for a, b, _ in triples)
    assert set(triples) == brute_pairs(rows, k)


def test_pairs_string_ids_and_small_batches(spark):
    rows = planted(n_families=20, noise=50, seed=7)
    srows = [(f"doc-{i:04d}", f) for i, f in rows]
    df = spark.createDataFrame(srows, "key string, fp long")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "7")  # runs cross batches
    try:
        got = {(r.id_a, r.id_b, r.distance) for r in sspark.pairs(df, 3, id_col="key", partitions=3).collect()}
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert got == brute_pairs(srows, 3)


def _components(edges):
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {x: find(x) for x in list(parent)}


def test_clusters_smallest_id(spark):
    rng = random.Random(3)
    edges = [(i, i + 1) for i in range(100, 132)]  # a long chain
    edges += [(rng.randint(0, 99), rng.randint(0, 99)) for _ in range(70)]
    edges += [(500, 400), (400, 300)]
    edges = [(a, b) for a, b in edges if a != b]
    df = spark.createDataFrame([(min(a, b), max(a, b), 1) for a, b in edges], "id_a long, id_b long, distance int")
    got = {r.id: r.cluster_id for r in sspark.clusters(df).collect()}
    assert got == _components(edges)


TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "The quick brown fox jumped over the lazy dog!",
    "Near-duplicate detection with SimHash stored in PostgreSQL.",
    "我们今天去公园散步，天气非常好。",
    "我们今天去公园散步，天气很好。",
    "",
    "...",
    None,
    "the and of",  # stopwords only: no features with the default pipeline
    "Ünïcödé ＦＵＬＬＷＩＤＴＨ text, NFKC folded",
]


def test_fingerprint_and_shingles_equal_single_node(spark):
    from simdb.core.fingerprint import Fingerprinter
    from simdb.core.sketch.shingles import shingles

    rows = list(enumerate(TEXTS))
    df = spark.createDataFrame(rows, "id long, text string")
    for fper in (None, Fingerprinter(stopwords=None, weighting="tf")):
        ref = fper or Fingerprinter()
        out = sspark.shingles(sspark.fingerprint(df, "text", fper), "text").orderBy("id").collect()
        for r in out:
            text = TEXTS[r.id]
            want = None if text is None else ref.fingerprint(text, empty=None)
            assert r.fp == (None if want is None else to_signed(want)), text
            want_sh = None if text is None else (shingles(text) or None)
            assert (None if r.shingles is None else list(r.shingles)) == want_sh, text
    # given as a dict (a collection's stored configuration) too
    d = Fingerprinter().to_dict()
    got = sspark.fingerprint(df.where("id = 0"), "text", d).first().fp
    assert got == to_signed(Fingerprinter().fingerprint(TEXTS[0]))
    with pytest.raises(TypeError):
        sspark.fingerprint(df, "text", "not a fingerprinter")


def test_bad_input_is_a_typed_error_naming_the_argument(spark):
    """Refused when the plan is built: a text column of another type (which used to fingerprint every
    row as NULL and answer "no near-duplicates"), a missing column, bad k / tables / partitions / keep."""
    from simdb.errors import InvalidArgumentError, InvalidTypeError

    numbers = spark.createDataFrame([(1, 12345), (2, 12345)], "id long, text long")
    for call in (lambda: sspark.fingerprint(numbers, "text"), lambda: sspark.shingles(numbers, "text"),
                 lambda: sspark.rule_pairs(numbers)):
        with pytest.raises(InvalidTypeError, match="column 'text' is long, not string"):
            call()
    df = spark.createDataFrame([(1, "a text"), (2, "a text")], "id long, text string")
    with pytest.raises(InvalidArgumentError, match="column: no column 'body'"):
        sspark.fingerprint(df, "body")
    assert "fp" in sspark.fingerprint(df, "TEXT").columns  # Spark's names are case-insensitive
    fps = sspark.fingerprint(df, "text")
    with pytest.raises(InvalidTypeError, match="fp_col: column 'text' is string"):
        sspark.pairs(fps, fp_col="text")
    with pytest.raises(InvalidArgumentError, match="id_col: no column 'key'"):
        sspark.pairs(fps, id_col="key")
    with pytest.raises(InvalidTypeError, match="k must be an int, got str"):
        sspark.pairs(fps, k="3")
    with pytest.raises(InvalidArgumentError, match="k must be in 0..62, got 63"):
        sspark.pairs(fps, k=63)
    with pytest.raises(InvalidArgumentError, match="tables"):
        sspark.pairs(fps, tables="other")
    with pytest.raises(InvalidArgumentError, match="partitions must be in 1.., got 0"):
        sspark.pairs(fps, partitions=0)
    with pytest.raises(InvalidArgumentError, match="id_a: no column 'id_a'"):
        sspark.clusters(fps)
    with pytest.raises(InvalidArgumentError, match="keep must be one of"):
        sspark.keep_one(fps, sspark.pairs(fps), keep="best")
    with pytest.raises(InvalidArgumentError, match="order_col: no column 'pos'"):
        sspark.keep_one(fps, sspark.pairs(fps), order_col="pos")
    with pytest.raises(InvalidArgumentError, match="key_col: no column 'key'"):
        sspark.write_fingerprints(fps, "postgresql://nowhere/x", "c")
    with pytest.raises(InvalidTypeError, match="fingerprinter"):
        sspark.fingerprint(df, "text", "not a fingerprinter")


# --------------------------------------------------------------------------- PostgreSQL


def _family_texts():
    rng = random.Random(11)
    words = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone cloud".split()
    rows = []
    for f in range(12):
        base = [rng.choice(words) for _ in range(60)] + [f"family{f}"] * 3
        rows.append((f"f{f:02d}-0", " ".join(base)))
        variant = list(base)
        variant[rng.randrange(60)] = rng.choice(words)
        rows.append((f"f{f:02d}-1", " ".join(variant)))
    rows.append(("empty", "..."))
    return rows


def test_write_read_collection_and_pairs_equal_store(spark, database_url, collection_name):
    import psycopg

    from simdb.core.fingerprint import Fingerprinter
    from simdb.index import SimhashIndex

    rows = _family_texts()
    df = spark.createDataFrame(rows, "key string, text string").repartition(3)
    fps = sspark.shingles(sspark.fingerprint(df, "text"), "text").persist()
    sent = sspark.write_fingerprints(fps, database_url, collection_name, shingles_col="shingles")
    assert sent == len(rows)
    assert sspark.write_fingerprints(fps, database_url, collection_name, shingles_col="shingles") == len(rows)

    with SimhashIndex(database_url, collection_name) as index:  # created with the default config
        assert index.fingerprinter == Fingerprinter()
        assert sspark.fingerprinter_for(database_url, collection_name) == Fingerprinter()
        assert len(index) == len(rows)  # re-run: no duplicates
        for key, text in rows:
            entry = index.get(key)
            want = Fingerprinter().fingerprint(text, empty=None)
            assert entry.fp == want, key
        store_pairs = {(p.key_a, p.key_b, p.distance) for p in index.pairs(3)}

    back = sspark.read_collection(spark, database_url, collection_name, partitions=3, shingles=True)
    got = {r.key: (r.fp, None if r.shingles is None else list(r.shingles)) for r in back.collect()}
    want = {r.key: (r.fp, None if r.shingles is None else list(r.shingles)) for r in fps.collect()}
    assert got == want
    assert got["empty"] == (None, None)

    spark_pairs = sspark.pairs(back, 3, id_col="key")
    assert {(min(a, b), max(a, b), d) for a, b, d in store_pairs} == {
        (r.id_a, r.id_b, r.distance) for r in spark_pairs.collect()
    }
    assert len(store_pairs) >= 8  # most planted families are within k=3

    # pairs and clusters into the database: re-runnable, one row each
    cl = sspark.clusters(spark_pairs).persist()
    for _ in range(2):
        assert sspark.write_pairs(spark_pairs, database_url, collection_name) == len(store_pairs)
        sspark.write_clusters(cl, database_url, collection_name)
    conninfo = libpq_url(database_url)
    with psycopg.connect(conninfo) as conn:
        cid = conn.execute("SELECT id FROM simdb_collections WHERE name = %s", (collection_name,)).fetchone()[0]
        n_pairs = conn.execute("SELECT count(*) FROM simdb_spark_pairs WHERE collection_id = %s", (cid,)).fetchone()[0]
        clusters_db = dict(conn.execute(
            "SELECT key, cluster_key FROM simdb_spark_clusters WHERE collection_id = %s", (cid,)).fetchall())
    assert n_pairs == len(store_pairs)
    assert clusters_db == {r.id: r.cluster_id for r in cl.collect()}
    assert all(v == min(k for k, c in clusters_db.items() if c == v) for v in clusters_db.values())
    fps.unpersist()
    cl.unpersist()


def test_write_is_all_or_nothing_per_partition(spark, database_url, collection_name):
    from simdb.index import SimhashIndex

    good = [(f"good-{i}", to_signed(random.Random(i).getrandbits(64)), 0) for i in range(50)]
    bad = [(f"bad-{i}", 1, 1) for i in range(49)] + [(None, 2, 1)]  # one NULL key fails the partition
    df = spark.createDataFrame(good + bad, "key string, fp long, part int").repartition(2, "part")
    with pytest.raises(InvalidArgumentError, match="key_col: a row has a NULL key"):
        sspark.write_fingerprints(df.drop("part"), database_url, collection_name)
    with SimhashIndex(database_url, collection_name) as index:
        keys = {k for k in [f"good-{i}" for i in range(50)] + [f"bad-{i}" for i in range(49)] if k in index}
    assert not any(k.startswith("bad-") for k in keys)
    assert len(keys) in (0, 50)  # the other partition landed whole or not at all


def test_a_null_id_in_pairs_or_clusters_is_a_typed_error_not_a_dropped_row(spark, database_url, collection_name):
    """Spark's least/greatest skip NULLs, so a pair (x, NULL) once became the self-pair (x, x) and
    vanished without a word; a NULL cluster id failed on the server's NOT NULL, untyped."""
    from simdb.index import SimhashIndex

    with SimhashIndex(database_url, collection_name) as index:
        index.add("x", "one text")
    pairs = spark.createDataFrame([("x", None, 3)], "id_a string, id_b string, distance int")
    with pytest.raises(InvalidArgumentError, match="id_a/id_b: a row has a NULL key"):
        sspark.write_pairs(pairs, database_url, collection_name)
    clusters = spark.createDataFrame([("x", None)], "id string, cluster_id string")
    with pytest.raises(InvalidArgumentError, match="cluster_id: a row has a NULL key"):
        sspark.write_clusters(clusters, database_url, collection_name)


def test_keep_one_equals_dedup_records(spark, database_url):
    """The Spark job and the CLI's function keep the same records and log the same removals (k=3)."""
    from simdb import dedup_records
    from simdb.dataset.dedup import Removal

    rng = random.Random(3)
    base = [p.read_text(encoding="utf-8") for p in sorted(
        (Path(__file__).resolve().parents[1] / "examples" / "sample").rglob("*.txt"))]
    texts = []
    for _ in range(120):
        words = rng.choice(base).split()
        for _ in range(rng.choice([0, 0, 1, 2, 5])):
            words[rng.randrange(len(words))] = rng.choice(words)
        texts.append(" ".join(words))
    records = [{"id": i, "text": t} for i, t in enumerate(texts)]
    for keep in ("first", "longest"):
        log: list[Removal] = []
        expected = [r["id"] for r in dedup_records(records, database=database_url, k=3, keep=keep,
                                                   on_removed=log.append)]
        df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "id long, text string")
        fp = sspark.fingerprint(df, "text")
        kept, removed = sspark.keep_one(fp, sspark.pairs(fp, k=3), keep=keep)
        assert sorted(r["id"] for r in kept.select("id").collect()) == expected
        assert sorted((r["removed"], r["kept"], r["distance"]) for r in removed.collect()) == sorted(
            (int(x.key), int(x.kept_key), x.distance) for x in log)
        assert log  # there were near-duplicates to remove


def test_write_fingerprints_keeps_texts_of_a_collection_that_keeps_them(spark, database_url, collection_name):
    from simdb.core.fingerprint import Fingerprinter
    from simdb.errors import InvalidArgumentError
    from simdb.index import SimhashIndex

    rows = [("a", "the first text written from spark"), ("b", "第二个文本，来自 Spark"), ("c", None)]
    df = sspark.fingerprint(spark.createDataFrame(rows, "key string, text string"), "text")
    with pytest.raises(InvalidArgumentError, match="does not keep texts"):
        sspark.write_fingerprints(df, database_url, collection_name + "-plain", text_col="text")
    with SimhashIndex(database_url, collection_name, Fingerprinter(), store_texts=True) as index:
        index.add("a", "an older text of a, replaced below")
    assert sspark.write_fingerprints(df, database_url, collection_name, text_col="text") == 3
    with SimhashIndex(database_url, collection_name) as index:
        assert [index.text(k) for k, _ in rows] == [t for _, t in rows]
        assert index.get("a").fp == Fingerprinter().fingerprint(rows[0][1], empty=None)
    sspark.write_fingerprints(df.drop("text"), database_url, collection_name)  # no texts: none stale left
    with SimhashIndex(database_url, collection_name) as index:
        assert index.text("a") is None


def test_a_job_that_read_the_rule_before_a_conversion_is_refused(spark, database_url, collection_name, monkeypatch):
    """A Spark writer computes its fingerprints by the rule it read when the job began; a conversion
    (another process's ``simdb convert``) before its partitions commit makes them rows the new rule cannot
    find. Each partition's merge now checks the rule version first: refused whole, typed, and the rows the
    conversion rewrote stay as it left them."""
    import simdb.spark.postgres as spostgres
    from simdb.core.fingerprint import Fingerprinter
    from simdb.errors import CollectionChangedError
    from simdb.index import SimhashIndex

    with SimhashIndex(database_url, collection_name, Fingerprinter(), verify=False, store_texts=True) as index:
        index.add("a", "the first text, stored before the job began")
    read = spostgres._collection

    def read_then_converted(*args, **kwargs):
        got = read(*args, **kwargs)
        with SimhashIndex(database_url, collection_name) as other:  # converted while the job runs
            assert other.convert_to_verified() == 1 and other.bands
        return got

    monkeypatch.setattr(spostgres, "_collection", read_then_converted)
    df = sspark.fingerprint(spark.createDataFrame([("a", "a new text of a"), ("b", "a text of b")],
                                                  "key string, text string"), "text")
    with pytest.raises(CollectionChangedError, match="rule changed .* this partition was rolled back"):
        sspark.write_fingerprints(df, database_url, collection_name, text_col="text")
    with SimhashIndex(database_url, collection_name) as index:
        assert len(index) == 1 and index.text("a") == "the first text, stored before the job began"
        assert index.near("the first text, stored before the job began")[0].key == "a"
