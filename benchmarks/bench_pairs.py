"""All-pairs benchmark: SimhashIndex.pairs() machinery vs the naive SQL UNION of four block self-joins.

Loads N random fingerprints (N/100 planted near-duplicate pairs at distance 1..3)
into a migrated database through COPY (block indexes rebuilt after the load),
then times:

- ``simdb``: :func:`simdb.index.duplicates.iter_pairs` (keys included), client peak RSS growth;
- ``sql``: ``SELECT count(*) FROM simdb_pairs(collection, 3)`` (the analysts' function);
- ``naive``: UNION of four block self-joins (DISTINCT), the baseline of the issue.

With ``--k 4,6,8,11`` it also times pairs() for larger k (the generalized
pigeonhole joins block groups within a radius, :mod:`simdb.core.radius_pairs`) and,
with ``--brute``, the baseline for those: every one of the N(N-1)/2 pairs
XOR-ed and popcounted in numpy (exact; the pair counts must agree).

Usage (run under the shared benchmark lock)::

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_pairs.py --n 1000000 --naive --sql
    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_pairs.py --n 10000000
    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_pairs.py --n 100000 --k 4,6,8,11 --brute

``--database URL`` uses an existing server (default: an embedded server in
``--pgdata``, /tmp/simdb-bench-pairs/pgdata). The data of a given N is kept
between runs (collection ``bench-pairs-<N>``) unless ``--reload``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url


def planted(n: int, seed: int = 42) -> tuple[np.ndarray, int]:
    """n unsigned fingerprints: n/100 planted pairs (second = first with 1..3 random bits flipped)."""
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    fam = n // 100
    base = fps[0: 2 * fam: 2]
    nflip = rng.integers(1, 4, size=fam)
    var = base.copy()
    for t in range(3):
        bit = rng.integers(0, 64, size=fam).astype(np.uint64)
        m = t < nflip
        var[m] ^= np.uint64(1) << bit[m]
    fps[1: 2 * fam: 2] = var
    return fps[rng.permutation(n)], fam


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class PeakRSS:
    """Samples the process RSS every 10 ms; ``peak - start`` is the client's extra memory."""

    def __enter__(self):
        self.start = self.peak = _rss_mb()
        self._stop = False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop:
            self.peak = max(self.peak, _rss_mb())
            time.sleep(0.01)

    def __exit__(self, *exc):
        self._stop = True
        self._t.join()
        self.peak = max(self.peak, _rss_mb())


def load(engine, name: str, n: int) -> tuple[int, int]:
    """Create collection ``name`` with n planted fingerprints (COPY); returns (collection id, planted pairs)."""
    from simdb.store import sql

    fps, fam = planted(n)
    signed = fps.view(np.int64)
    with engine.begin() as conn:
        conn.execute(text(f"DELETE FROM {sql.COLLECTIONS} WHERE name = :n"), {"n": name})
        cid = conn.execute(
            text(f"INSERT INTO {sql.COLLECTIONS} (name, config) VALUES (:n, CAST(:c AS jsonb)) RETURNING id"),
            {"n": name, "c": json.dumps({"bench": True})},
        ).scalar_one()
    raw = engine.raw_connection()
    try:
        pg = raw.driver_connection
        t = time.perf_counter()
        with pg.cursor() as cur:
            # block indexes are rebuilt after the load (much faster than maintaining them row by row)
            for idx in sql.BLOCK_INDEXES:
                cur.execute(f"DROP INDEX IF EXISTS {idx}")
            with cur.copy(f"COPY {sql.FINGERPRINTS} (collection_id, key, fp) FROM STDIN") as cp:
                step = 200_000
                for s in range(0, n, step):
                    cp.write("".join(f"{cid}\tk{s + i}\t{v}\n" for i, v in enumerate(signed[s: s + step].tolist())))
            for idx, cols in sql.BLOCK_INDEXES.items():
                cur.execute(f"CREATE INDEX {idx} ON {sql.FINGERPRINTS} ({', '.join(cols)})")
        pg.commit()
        pg.autocommit = True
        pg.execute(f"VACUUM ANALYZE {sql.FINGERPRINTS}")
        pg.autocommit = False
        print(f"loaded {n:,} rows in {time.perf_counter() - t:.1f} s", flush=True)
    finally:
        raw.close()
    return cid, fam


def naive_sql() -> str:
    parts = [
        f"""SELECT a.id AS ida, b.id AS idb FROM simdb_fingerprints a JOIN simdb_fingerprints b
    ON a.collection_id = b.collection_id AND a.{b} = b.{b} AND a.id < b.id
  WHERE a.collection_id = :c AND bit_count((a.fp # b.fp)::bit(64)) <= 3"""
        for b in ("b0", "b1", "b2", "b3")
    ]
    return "SELECT count(*) FROM (" + "\n UNION \n".join(parts) + ") p"


def bench_unique(engine, cid: int, n: int) -> None:
    """add_if_unique throughput: random fingerprints (all inserted) plus exact copies of stored ones (refused)."""
    from concurrent.futures import ThreadPoolExecutor

    from simdb.index import duplicates

    rng = np.random.default_rng(7)
    with engine.connect() as c:
        stored = [int(x) & (2**64 - 1) for x in c.execute(
            text("SELECT fp FROM simdb_fingerprints WHERE collection_id = :c LIMIT :n"), {"c": cid, "n": n // 2}
        ).scalars()]
    for threads in (1, 4):
        fresh = [int(x) for x in rng.integers(0, 2**64, size=n - len(stored), dtype=np.uint64)]
        items = [(f"u{threads}-{i}", fp) for i, fp in enumerate(fresh + stored)]
        rng.shuffle(items)

        def run(part):
            got = 0
            for key, fp in part:
                got += duplicates.run_add_if_unique(engine, cid, key, fp, 3).inserted
            return got

        t = time.perf_counter()
        with ThreadPoolExecutor(threads) as ex:
            inserted = sum(ex.map(run, [items[i::threads] for i in range(threads)]))
        el = time.perf_counter() - t
        lat = el / n * threads * 1000
        print(f"add_if_unique, {threads} thread(s): {n / el:,.0f} calls/s ({lat:.2f} ms per call), "
              f"{inserted:,} of {n:,} inserted", flush=True)
        with engine.begin() as c:
            c.execute(text("DELETE FROM simdb_fingerprints WHERE collection_id = :c AND key LIKE 'u%'"), {"c": cid})


def brute_force_counts(fps: np.ndarray, ks: list[int], rows: int = 256) -> dict[int, int]:
    """Pairs within each k by comparing every pair (numpy, ``rows`` rows against the rest at a time)."""
    counts = dict.fromkeys(ks, 0)
    for i in range(0, len(fps) - 1, rows):
        block = fps[i: i + rows]
        d = np.bitwise_count(block[:, None] ^ fps[None, i:])
        d = np.where(np.arange(len(fps) - i)[None, :] > np.arange(len(block))[:, None], d, 65)  # j > i only
        for k in ks:
            counts[k] += int((d <= k).sum())
    return counts


def bench_large_k(engine, cid: int, n: int, ks: list[int], brute: bool) -> None:
    from simdb.core.radius_pairs import choose_pair_radii
    from simdb.index import duplicates
    from simdb.store import pairs as store_pairs

    results = {}
    for k in ks:
        with PeakRSS() as mem:
            t = time.perf_counter()
            count = sum(1 for _ in duplicates.iter_pairs(engine, cid, k))
            el = time.perf_counter() - t
        results[k] = (count, el)
        if k > 3:
            import plots  # benchmarks/plots.py (scripts run with benchmarks/ on sys.path)
            plots.pairs_plot(plots.beside(__file__, "pairs.png"), n, f"simdb pairs() k={k}", el)
        print(f"simdb pairs N={n:,} k={k}: {count:,} pairs in {el:.2f} s, "
              f"client peak RSS +{mem.peak - mem.start:.0f} MB", flush=True)
    if brute:
        snap = store_pairs.Snapshot(engine, None)
        try:
            with snap.scan.cursor() as cur:
                _, fps = store_pairs.all_rows(cur, cid)
        finally:
            snap.close()
        t = time.perf_counter()
        counts = brute_force_counts(fps, ks)
        el = time.perf_counter() - t
        print(f"numpy brute force N={n:,} ({n * (n - 1) // 2:,} pairs) for k in {ks}: {el:.2f} s", flush=True)
        for k in ks:
            count, t_k = results[k]
            print(f"  k={k}: simdb {t_k:.2f} s vs brute force {el:.2f} s = {el / t_k:.1f}x faster; "
                  f"radii {choose_pair_radii(fps, k)}; pair counts {'agree' if counts[k] == count else 'DIFFER'} "
                  f"({counts[k]:,})", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--database", help="SQLAlchemy URL of a PostgreSQL server (default: embedded)")
    ap.add_argument("--pgdata", default="/tmp/simdb-bench-pairs/pgdata")
    ap.add_argument("--reload", action="store_true")
    ap.add_argument("--naive", action="store_true", help="also time the naive UNION of four self-joins")
    ap.add_argument("--sql", action="store_true", help="also time SELECT count(*) FROM simdb_pairs(...)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--chunk-rows", type=int, default=None)
    ap.add_argument("--clusters", action="store_true", help="also time clusters()")
    ap.add_argument("--unique", type=int, default=0, metavar="N",
                    help="also time N add_if_unique calls (1 thread and 4 threads) into the collection")
    ap.add_argument("--k", default="", metavar="K,K,...", help="also time pairs() for these k (4..11)")
    ap.add_argument("--brute", action="store_true", help="with --k: also time numpy brute force over all pairs")
    args = ap.parse_args(argv)

    from simdb.index import duplicates
    from simdb.store.migrate import migrate

    if args.database:
        server = args.database
    else:
        from simdb.embedded import start_server

        server = start_server(Path(args.pgdata), cleanup_mode=None).get_uri().replace(
            "postgresql://", "postgresql+psycopg://", 1
        )
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        if not c.execute(text("SELECT 1 FROM pg_database WHERE datname = 'simdb_bench_pairs'")).scalar():
            c.execute(text("CREATE DATABASE simdb_bench_pairs"))
    admin.dispose()
    url = make_url(server).set(database="simdb_bench_pairs").render_as_string(hide_password=False)
    migrate(url)
    engine = create_engine(url)
    name = f"bench-pairs-{args.n}"
    with engine.connect() as c:
        row = c.execute(
            text("SELECT c.id, count(f.id) FROM simdb_collections c LEFT JOIN simdb_fingerprints f "
                 "ON f.collection_id = c.id WHERE c.name = :n GROUP BY c.id"),
            {"n": name},
        ).first()
    if row is None or row[1] != args.n or args.reload:
        cid, fam = load(engine, name, args.n)
    else:
        cid, fam = row[0], args.n // 100
    kw = {"chunk_rows": args.chunk_rows} if args.chunk_rows else {}
    for _ in range(args.repeat):
        with PeakRSS() as mem:
            t = time.perf_counter()
            count = 0
            for _p in duplicates.iter_pairs(engine, cid, 3, **kw):
                count += 1
            el = time.perf_counter() - t
        print(f"simdb pairs N={args.n:,}: {count:,} pairs (planted {fam:,}) in {el:.2f} s, "
              f"client peak RSS +{mem.peak - mem.start:.0f} MB", flush=True)
        import plots  # benchmarks/plots.py (scripts run with benchmarks/ on sys.path)
        plots.pairs_plot(plots.beside(__file__, "pairs.png"), args.n, "simdb pairs()", el)  # PNG in benchmarks/results/
    if args.clusters:
        with PeakRSS() as mem:
            t = time.perf_counter()
            nc = nt = 0
            for c in duplicates.iter_clusters(engine, cid, 3):
                nc += 1
                nt += len(c)
            el = time.perf_counter() - t
        print(f"simdb clusters N={args.n:,}: {nc:,} clusters, {nt:,} texts in {el:.2f} s, "
              f"client peak RSS +{mem.peak - mem.start:.0f} MB", flush=True)
    if args.k:
        bench_large_k(engine, cid, args.n, [int(x) for x in args.k.split(",")], args.brute)
    if args.unique:
        bench_unique(engine, cid, args.unique)
    if args.sql:
        with engine.connect() as c:
            t = time.perf_counter()
            got = c.execute(text("SELECT count(*) FROM simdb_pairs(:n, 3)"), {"n": name}).scalar()
            print(f"simdb_pairs() SQL N={args.n:,}: {got:,} pairs in {time.perf_counter() - t:.2f} s", flush=True)
    if args.naive:
        with engine.connect() as c:
            t = time.perf_counter()
            got = c.execute(text(naive_sql()), {"c": cid}).scalar()
            print(f"naive UNION of four self-joins N={args.n:,}: {got:,} pairs in {time.perf_counter() - t:.2f} s",
                  flush=True)
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
