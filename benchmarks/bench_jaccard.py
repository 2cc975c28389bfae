"""Latency and storage of exact Jaccard answers at 1M rows (issue 8).

Texts: each is 3-6 sentences drawn at random from the real English paragraphs
that ``bench_quality.py`` collects (so texts share sentences the way boilerplate
does), plus 1% planted near-duplicates (realistic edits of another row, J mostly
>= 0.8). Each row stores the candidate fingerprint (words, TF, stopwords kept),
its shingle set (int4[]) and its MinHash band keys (20 x 5, int4[] + GIN).

Measured, in one run:

* ``near(text, min_jaccard=0.8)`` single-query latency (p50/p99), both candidate
  generators followed by the exact intarray check inside PostgreSQL:
  SimHash within k (``simdb_near_jaccard``) and MinHash bands
  (``simdb_near_jaccard_bands``), from the text (client-side fingerprint +
  shingles + band keys included) and SQL only;
* all pairs with J >= 0.8 through the banded self-join (``simdb_jaccard_pairs``);
* storage per row of the shingle sets and of the band keys (+ GIN index).

    python benchmarks/bench_jaccard.py [--rows 1000000] [--queries 300] [--database URL]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import text as sql  # noqa: E402

from simdb.jaccard import candidate_fingerprinter, k_for_threshold  # noqa: E402
from simdb.minhash import MinHasher  # noqa: E402
from simdb.shingles import shingles  # noqa: E402


def make_texts(n: int, seed: int) -> tuple[list[str], list[int]]:
    import bench_quality as bq

    rng = random.Random(seed)
    paras = bq.dedupe(bq.english_paragraphs()[0])
    sents = sorted({s.strip() for p in paras for s in re.split(r"(?<=[.!?])\s+", " ".join(p.split())) if len(s.split()) >= 5})
    vocab = [w for p in paras[:3000] for w in p.split()]
    texts: list[str] = []
    planted: list[int] = []
    for i in range(n):
        if i > 100 and rng.random() < 0.01:
            src = texts[rng.randrange(i)]
            texts.append(bq.edit_english(src, rng.choice([0.01, 0.02, 0.03]), rng, vocab, paras))
            planted.append(i)
        else:
            texts.append(" ".join(rng.sample(sents, rng.randint(3, 6))))
    return texts, planted


def build(n: int, seed: int, cache: Path, log):
    if cache.exists():
        z = np.load(cache, allow_pickle=False)
        log(f"loaded {cache}")
        return z
    t0 = time.perf_counter()
    texts, planted = make_texts(n, seed)
    log(f"{n} texts in {time.perf_counter() - t0:.0f}s")
    t0 = time.perf_counter()
    fps = candidate_fingerprinter().many(texts, empty=None)
    log(f"fingerprints {time.perf_counter() - t0:.0f}s")
    t0 = time.perf_counter()
    sh = [shingles(t) for t in texts]
    log(f"shingles {time.perf_counter() - t0:.0f}s")
    t0 = time.perf_counter()
    mh = MinHasher()
    bands = [mh.band_keys(s) for s in mh.signatures(sh)]
    log(f"minhash bands {time.perf_counter() - t0:.0f}s")
    lens = np.array([len(s) for s in sh], dtype=np.int64)
    arrays = dict(
        fps=np.array([(f if f is not None else 0) for f in fps], dtype=np.uint64),
        sh_flat=np.concatenate([np.asarray(s, dtype=np.int32) for s in sh]),
        sh_len=lens,
        bands=np.array([b if b else [0] * mh.bands for b in bands], dtype=np.int32),
        planted=np.array(planted, dtype=np.int64),
    )
    # the texts are not cached (a fixed-width str array of 1M texts takes ~16 GB):
    # make_texts is deterministic and quick, so queries regenerate them
    np.savez(cache, **arrays)
    return np.load(cache, allow_pickle=False)


def _arr(v) -> str:
    return "{" + ",".join(str(int(x)) for x in v) + "}"


def load(engine, coll: str, z, log):
    from simdb.index import STORE_OPTIONS
    from simdb.jaccard import collection_config
    from simdb.store import sql as S  # noqa: F401  (store must exist)

    fper = candidate_fingerprinter()
    # the configuration SimhashIndex(..., jaccard=True) records (rows are COPYed directly here)
    cfg = {"fingerprinter": fper.to_dict(), "store": dict(STORE_OPTIONS), "jaccard": collection_config()}
    with engine.begin() as c:
        c.execute(sql("DELETE FROM simdb_collections WHERE name = :n"), {"n": coll})
        cid = c.execute(
            sql("INSERT INTO simdb_collections(name, config) VALUES (:n, CAST(:c AS jsonb)) RETURNING id"),
            {"n": coll, "c": json.dumps(cfg)},
        ).scalar_one()
    fps = z["fps"].astype(np.int64)  # two's complement view
    offs = np.concatenate(([0], np.cumsum(z["sh_len"])))
    flat, bands = z["sh_flat"], z["bands"]
    n = len(fps)
    t0 = time.perf_counter()
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        with cur.copy("COPY simdb_fingerprints (collection_id, key, fp, shingles) FROM STDIN") as cp:
            for i in range(n):
                cp.write_row((cid, f"t{i}", int(fps[i]), _arr(flat[offs[i] : offs[i + 1]])))
        raw.commit()
        t1 = time.perf_counter()
        cur.execute(
            "CREATE TEMP TABLE ids AS SELECT id, key FROM simdb_fingerprints WHERE collection_id = %s", (cid,)
        )
        cur.execute("CREATE TEMP TABLE tb (key text, bands int4[])")
        with cur.copy("COPY tb (key, bands) FROM STDIN") as cp:
            for i in range(n):
                cp.write_row((f"t{i}", _arr(bands[i])))
        cur.execute(
            "INSERT INTO simdb_minhash_bands (fingerprint_id, collection_id, bands) "
            "SELECT ids.id, %s, tb.bands FROM tb JOIN ids USING (key)",
            (cid,),
        )
        raw.commit()
        t2 = time.perf_counter()
        cur.execute("ANALYZE simdb_fingerprints")
        cur.execute("ANALYZE simdb_minhash_bands")
        raw.commit()
    finally:
        raw.close()
    log(f"loaded {n} rows: fingerprints+shingles {t1 - t0:.0f}s, bands {t2 - t1:.0f}s")
    return cid


def storage(engine, cid: int) -> dict:
    with engine.connect() as c:
        q = lambda s, **kw: c.execute(sql(s), kw).scalar()  # noqa: E731
        n = q("SELECT count(*) FROM simdb_fingerprints WHERE collection_id = :c", c=cid)
        return {
            "rows": n,
            "shingles_avg_values": float(q("SELECT avg(cardinality(shingles)) FROM simdb_fingerprints WHERE collection_id = :c", c=cid)),
            "shingles_bytes_per_row": float(q("SELECT avg(pg_column_size(shingles)) FROM simdb_fingerprints WHERE collection_id = :c", c=cid)),
            "fingerprints_table_bytes_per_row": q("SELECT pg_table_size('simdb_fingerprints')") / n,
            "bands_table_bytes_per_row": q("SELECT pg_table_size('simdb_minhash_bands')") / n,
            "bands_gin_bytes_per_row": q("SELECT pg_relation_size('simdb_minhash_bands_gin')") / n,
        }


def pct(xs, p):
    return float(np.percentile(np.array(xs) * 1000, p))


def bench_queries(engine, coll: str, z, nq: int, seed: int, log) -> dict:
    """Single queries through the public API (SimhashIndex.near(text, min_jaccard=0.8)):
    fingerprint + shingles + band keys on the client, one statement, exact check in SQL."""
    from simdb import SimhashIndex

    rng = random.Random(seed)
    texts, _ = make_texts(len(z["fps"]), seed)
    planted = list(z["planted"])
    # half planted variants (have a near-duplicate), half random rows
    qidx = rng.sample(planted, min(nq // 2, len(planted))) + rng.sample(range(len(texts)), nq // 2)
    qtexts = [str(texts[i]) for i in qidx]
    fper = candidate_fingerprinter()
    fps = z["fps"]
    for i in qidx[:50]:  # the regenerated texts are the stored ones
        assert (fper.fingerprint(texts[i], empty=None) or 0) == int(fps[i]), i
    del texts
    mh = MinHasher()
    k_table = k_for_threshold(0.8)
    out = {}
    ix = SimhashIndex(engine, collection=coll)
    assert ix.minhasher == mh
    raw = engine.raw_connection()
    cur = raw.cursor()
    try:

        def run(name, fn):
            lat, found = [], 0
            for t in qtexts * 2:  # the first pass warms the cache
                t0 = time.perf_counter()
                found += len(fn(t))
                lat.append(time.perf_counter() - t0)
            lat = lat[len(qtexts):]
            out[name] = {"p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99), "answers_per_query": found / (2 * len(qtexts))}
            log(f"{name}: {out[name]}")

        run("api near(min_jaccard=0.8) MinHash bands", lambda t: ix.near(t, min_jaccard=0.8))
        for kk in sorted({3, 8, k_table}):
            run(f"api near(min_jaccard=0.8, k={kk}) SimHash", lambda t, kk=kk: ix.near(t, min_jaccard=0.8, k=kk))
        run("api near(k=3) Hamming only", lambda t: ix.near(t, k=3))

        def sql_bands(t):
            sh = shingles(t)
            cur.execute("SELECT key, jaccard FROM simdb_near_jaccard_bands(%s, %s::int4[], %s::int4[], 0.8)",
                        (coll, mh.keys_for(sh) or None, sh))
            return cur.fetchall()

        run("sql simdb_near_jaccard_bands", sql_bands)
    finally:
        raw.close()
        ix.close()
    return out


def bench_pairs(engine, coll: str, log) -> dict:
    """All pairs with exact J >= 0.8 through SimhashIndex.pairs(min_jaccard=0.8) (banded
    self-join over the colliding band keys, exact check in SQL, streamed), and clusters."""
    import resource

    from simdb import SimhashIndex

    out = {}
    with SimhashIndex(engine, collection=coll) as ix:
        t0 = time.perf_counter()
        n = sum(1 for _ in ix.pairs(min_jaccard=0.8))
        out["pairs"] = n
        out["pairs_seconds"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        out["clusters"] = sum(1 for _ in ix.clusters(min_jaccard=0.8))
        out["clusters_seconds"] = time.perf_counter() - t0
    out["client_max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    log(f"pairs: {out}")
    return out


def bench_ingest(engine, n: int, seed: int, log) -> dict:
    """SimhashIndex(jaccard=True).add_many of n texts into a fresh collection, and n/10 more
    into it once populated: rows/s including fingerprints, shingles and band keys."""
    from simdb import SimhashIndex

    texts, _ = make_texts(n + n // 10, seed + 1)
    name = f"bench_jaccard_ingest_{n}"
    with engine.begin() as c:
        c.execute(sql("DELETE FROM simdb_collections WHERE name = :n"), {"n": name})
    out = {}
    with SimhashIndex(engine, collection=name, jaccard=True) as ix:
        t0 = time.perf_counter()
        ix.add_many((f"i{i}", t) for i, t in enumerate(texts[:n]))
        dt = time.perf_counter() - t0
        out["empty_rows_per_s"] = n / dt
        t0 = time.perf_counter()
        ix.add_many((f"j{i}", t) for i, t in enumerate(texts[n:]))
        dt2 = time.perf_counter() - t0
        out["populated_rows_per_s"] = (len(texts) - n) / dt2
    with engine.begin() as c:
        c.execute(sql("DELETE FROM simdb_collections WHERE name = :n"), {"n": name})
    log(f"ingest: {out}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=8)
    ap.add_argument("--database", default=os.environ.get("SIMDB_DATABASE_URL"))
    ap.add_argument("--cache", default=None, help="npz cache of the generated rows")
    ap.add_argument("--skip-load", action="store_true")
    ap.add_argument("--ingest", type=int, default=0, help="also time add_many of this many texts")
    ap.add_argument("--only-ingest", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    from simdb.database import resolve_engine
    from simdb.store.migrate import migrate

    engine, _ = resolve_engine(args.database)
    migrate(engine)
    if args.only_ingest:
        print(json.dumps(bench_ingest(engine, args.ingest, args.seed, log), indent=1))
        return
    cache = Path(args.cache or f"/tmp/simdb-bench-jaccard-{args.rows}-{args.seed}.npz")
    z = build(args.rows, args.seed, cache, log)
    coll = f"bench_jaccard_{args.rows}"
    if not args.skip_load:
        cid = load(engine, coll, z, log)
    else:
        with engine.connect() as c:
            cid = c.execute(sql("SELECT id FROM simdb_collections WHERE name = :n"), {"n": coll}).scalar_one()
    result = {"rows": args.rows, "storage": storage(engine, cid)}
    log(f"storage: {result['storage']}")
    result["queries"] = bench_queries(engine, coll, z, args.queries, args.seed, log)
    result["pairs"] = bench_pairs(engine, coll, log)
    if args.ingest:
        result["ingest"] = bench_ingest(engine, args.ingest, args.seed, log)
    print(json.dumps(result, indent=1))
    import plots  # benchmarks/plots.py (scripts run with benchmarks/ on sys.path)
    plots.jaccard_plot(result, plots.beside(__file__, "jaccard.png"))  # PNG in benchmarks/results/
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
