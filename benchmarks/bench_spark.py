"""simdb.spark against the single-node paths, in one run.

1. All pairs within k=3 at 1M and 10M fingerprints (uniform, 1% planted
   near-duplicates at distance 0..3): Spark with 4 block tables, with Manku's
   10 tables, a plain Spark SQL self-join (1M only), and simdb's own PostgreSQL
   ``pairs`` (``simdb.index.duplicates.iter_id_pairs``) on the same fingerprints; every
   answer compared with the others (same set of pairs).
2. Fingerprinting real text (standard-library docstrings, benchmarks/corpus.py):
   ``simdb.spark.fingerprint`` on local[N] vs ``Fingerprinter.many`` in one plain
   process; values compared one by one.
   (The Jaccard path, ``jaccard_pairs``, went with the legacy MinHash-band store: issue 28.)

Session start is reported, not counted. Spark runs ``local[2]`` by default (the
machine has 2 cores). Run it alone:

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_spark.py --sizes 1000000,10000000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

FAMILY_EVERY = 100  # ids with id % 100 == 1 are near-duplicates of id - 1
MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix(x: np.ndarray) -> np.ndarray:
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def gen_fps(ids: np.ndarray) -> np.ndarray:
    """Signed fingerprints for row ids: deterministic, 1% near-duplicates (distance 0..3)."""
    ids = ids.astype(np.int64)
    dup = (ids % FAMILY_EVERY) == 1
    fp = _splitmix(np.where(dup, ids - 1, ids))
    h = _splitmix(ids.astype(np.uint64) ^ np.uint64(0x5DEECE66D))
    nflip = (h >> np.uint64(60)) & np.uint64(3)
    flips = np.zeros(len(ids), dtype=np.uint64)
    for j in range(3):
        pos = (h >> np.uint64(6 * j)) & np.uint64(63)
        flips ^= np.where(nflip > j, np.uint64(1) << pos, np.uint64(0))
    fp = np.where(dup, fp ^ flips, fp)
    return fp.view(np.int64)


def _gen_partition(batches):
    import pandas as pd

    for pdf in batches:
        ids = pdf["id"].to_numpy()
        yield pd.DataFrame({"id": ids, "fp": gen_fps(ids)})


def _timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


def _noop(df):
    df.write.format("noop").mode("overwrite").save()


def spark_selfjoin_pairs(df, k=3):
    """Plain Spark SQL: one equi-join per 16-bit block, kept at the first shared block."""
    from pyspark.sql import functions as F

    parts = []
    for i, shift in enumerate((48, 32, 16, 0)):
        blk = lambda c, s=shift: F.shiftrightunsigned(c, s).bitwiseAND(F.lit(0xFFFF))  # noqa: E731
        a = df.select(F.col("id").alias("ia"), F.col("fp").alias("fa"), blk(F.col("fp")).alias("k"))
        b = df.select(F.col("id").alias("ib"), F.col("fp").alias("fb"), blk(F.col("fp")).alias("k"))
        x = F.col("fa").bitwiseXOR(F.col("fb"))
        cond = (F.col("ia") < F.col("ib")) & (F.bit_count(x) <= k)
        for s in (48, 32, 16, 0)[:i]:
            cond &= F.shiftrightunsigned(x, s).bitwiseAND(F.lit(0xFFFF)) != 0
        parts.append(a.join(b, "k").where(cond).select(
            F.col("ia").alias("id_a"), F.col("ib").alias("id_b"), F.bit_count(x).cast("int").alias("distance")))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionAll(p)
    return out


# --------------------------------------------------------------------------- PostgreSQL side

def pg_load(url: str, n: int) -> tuple[int, int]:
    """Load the same n fingerprints into a simdb collection through ``SimhashIndex.add_many``
    (its bulk path: COPY, then the indexes rebuilt); returns (collection_id, id offset)."""
    import psycopg

    from simdb.index import SimhashIndex

    name = f"bench-spark-{n}"
    with psycopg.connect(url) as conn:
        conn.execute("DELETE FROM simdb_collections WHERE name = %s", (name,))
        conn.commit()

    def items():
        step = 1_000_000
        for lo in range(0, n, step):
            ids = np.arange(lo, min(n, lo + step), dtype=np.int64)
            fps = gen_fps(ids).view(np.uint64)
            yield from zip(map(str, ids.tolist()), fps.tolist())

    with SimhashIndex(url.replace("postgresql://", "postgresql+psycopg://", 1), name) as ix:
        ix.add_many({"key": key, "fp": fp} for key, fp in items())
        cid = ix.collection_id
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE simdb_fingerprints")
        lo, bad = conn.execute(
            "SELECT min(id), count(*) FILTER (WHERE key::bigint <> id - (SELECT min(id) FROM simdb_fingerprints "
            "WHERE collection_id = %s)) FROM simdb_fingerprints WHERE collection_id = %s", (cid, cid)
        ).fetchone()
    assert bad == 0, "row ids are not in key order"
    return cid, lo


def pg_pairs(url: str, cid: int, offset: int, k: int = 3) -> set:
    from sqlalchemy import create_engine

    from simdb.index.duplicates import iter_id_pairs

    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    out = set()
    try:
        for a, b, _ in iter_id_pairs(engine, cid, k):
            out.update(zip((a - offset).tolist(), (b - offset).tolist()))
    finally:
        engine.dispose()
    return out


# --------------------------------------------------------------------------- benchmarks

def bench_pairs(spark, sizes, url, partitions_per_m=4, report=print):
    from simdb import spark as sspark

    results = []
    for n in sizes:
        parts = max(4, partitions_per_m * n // 1_000_000)
        base = spark.range(0, n, numPartitions=parts).mapInPandas(_gen_partition, "id long, fp long")
        fps = base.persist()
        _, t_gen = _timed(fps.count)
        row = {"n": n, "generate_s": round(t_gen, 1)}
        sets = {}
        tmp = Path(tempfile.mkdtemp(prefix="simdb-bench-pairs-"))
        for scheme in ("blocks", "manku"):
            df = sspark.pairs(fps, 3, tables=scheme, n=n)  # a fresh plan: no reused shuffle files
            out = str(tmp / scheme)
            _, t = _timed(lambda: df.write.parquet(out))  # the timed run produces the answer
            row[f"spark_{scheme}_s"] = round(t, 1)
            sets[scheme] = {(r.id_a, r.id_b) for r in spark.read.parquet(out).select("id_a", "id_b").collect()}
            report(json.dumps(row), flush=True)
        if n <= 1_000_000:
            df = spark_selfjoin_pairs(fps)
            out = str(tmp / "selfjoin")
            _, t = _timed(lambda: df.write.parquet(out))
            row["spark_selfjoin_s"] = round(t, 1)
            sets["selfjoin"] = {(r.id_a, r.id_b) for r in spark.read.parquet(out).select("id_a", "id_b").collect()}
        shutil.rmtree(tmp, ignore_errors=True)
        fps.unpersist()
        if url:
            (cid, offset), t_load = _timed(lambda: pg_load(url, n))
            row["pg_load_s"] = round(t_load, 1)
            pg, t = _timed(lambda: pg_pairs(url, cid, offset))
            row["pg_pairs_s"] = round(t, 1)
            sets["postgresql"] = pg
        ref = sets["blocks"]
        row["pairs"] = len(ref)
        row["equal"] = all(s == ref for s in sets.values())
        planted = n // FAMILY_EVERY
        row["planted"] = planted
        report(json.dumps(row), flush=True)
        results.append(row)
    return results


def _texts(n: int) -> list[str]:
    from corpus import english_pieces

    pieces = list(english_pieces())
    out = []
    i = 0
    while len(out) < n:  # cycle the corpus; a suffix keeps every text distinct
        out.append(f"{pieces[i % len(pieces)]} ({i // len(pieces)})" if i >= len(pieces) else pieces[i])
        i += 1
    return out


def bench_fingerprint(spark, n_docs: int, report=print):
    from simdb import spark as sspark
    from simdb.core.bits import to_signed
    from simdb.core.fingerprint import Fingerprinter

    texts = _texts(n_docs)
    fper = Fingerprinter()
    fper.many(texts, workers=1)  # both sides timed warm: jieba loaded, token caches filled
    plain, t_plain = _timed(lambda: fper.many(texts, workers=1, empty=None))
    df = spark.createDataFrame(list(enumerate(texts)), "id long, text string").repartition(8).persist()
    df.count()
    _noop(sspark.fingerprint(df, "text"))  # start and warm the Python workers
    out = sspark.fingerprint(df, "text")
    _, t_spark = _timed(lambda: _noop(out))
    got = {r.id: r.fp for r in sspark.fingerprint(df, "text").select("id", "fp").collect()}
    same = all(got[i] == (None if v is None else to_signed(v)) for i, v in enumerate(plain))
    avg_chars = sum(map(len, texts)) / len(texts)
    row = {
        "docs": n_docs,
        "avg_chars": round(avg_chars),
        "plain_docs_per_s": round(n_docs / t_plain),
        "spark_docs_per_s": round(n_docs / t_spark),
        "speedup": round(t_plain / t_spark, 2),
        "identical": same,
    }
    df.unpersist()
    report(json.dumps(row), flush=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--docs", type=int, default=200_000, help="texts for the fingerprinting run")
    ap.add_argument("--url", help="PostgreSQL URL migrated by simdb (default: a private embedded server)")
    ap.add_argument("--no-pg", action="store_true")
    ap.add_argument("--only", default="pairs,fingerprint")
    args = ap.parse_args(argv)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

    from simdb import spark as sspark

    server = None
    url = None
    if not args.no_pg and "pairs" in args.only:
        url = args.url
        if url is None:
            from simdb.embedded import start_server
            from simdb.store.migrate import migrate

            tmp = Path(tempfile.mkdtemp(prefix="simdb-bench-spark-"))
            server = start_server(tmp / "pgdata", cleanup_mode="delete")
            url = server.get_uri()
            migrate(url.replace("postgresql://", "postgresql+psycopg://", 1))
        url = url.replace("postgresql+psycopg://", "postgresql://", 1)

    spark, t_start = _timed(lambda: sspark.session(args.master, "simdb-bench", {
        "spark.driver.memory": "6g",
        "spark.sql.shuffle.partitions": "16",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    }))
    spark.sparkContext.setLogLevel("ERROR")
    print(json.dumps({"spark_session_start_s": round(t_start, 1), "master": args.master}), flush=True)
    try:
        if "fingerprint" in args.only:
            bench_fingerprint(spark, args.docs)
        if "pairs" in args.only:
            import plots  # benchmarks/plots.py (scripts run with benchmarks/ on sys.path)
            plots.spark_pairs_plot(bench_pairs(spark, [int(s) for s in args.sizes.split(",")], url),
                                   plots.beside(__file__, "spark_pairs.png"))  # PNG in benchmarks/results/
    finally:
        spark.stop()
        if server is not None:
            server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
