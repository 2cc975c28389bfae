"""Sharded simdb layouts simulated on one machine with PostgreSQL's own tools.

What a Citus cluster would do (docs/scale-out.md), proven here with two stand-ins
that ship with the PostgreSQL simdb uses:

- ``partitions``: hash-partitioned tables in one database (the planner's and
  executor's per-shard cost without the network).
- ``fdw``: every shard a separate database reached through ``postgres_fdw``
  (partitions of the coordinator's table are foreign tables; ``async_capable``
  lets one query scan the shards concurrently): per-shard remote round trips,
  as a distributed coordinator pays them.

Two layouts, for a k <= 3 near-duplicate lookup of one fingerprint:

- ``by_key``: the fingerprint table distributed by key (``hash(key)``), block
  columns b0..b3 indexed on every shard. A lookup cannot be pruned: it fans out
  to every shard.
- ``by_block``: a block table with one row per (block number, block value) of
  every fingerprint, distributed by ``hash(blk, val)`` (Manku's layout). A
  lookup probes four (blk, val) keys: at most four shards, whatever their number.
  A row found through several blocks is kept only at the first (the probe of
  block i skips rows that also match an earlier block), so no DISTINCT.

Every answer is compared with brute force over the same fingerprints (exact).

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_shards.py --rows 1000000 --queries 200

Uses ``--url`` (a superuser URL; CREATE DATABASE and postgres_fdw) or else starts
a private embedded server in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHARD_COUNTS = (1, 4, 16, 64)
LAYOUTS = ("by_key", "by_block")
MODES = ("partitions", "fdw")
SHIFTS = (48, 32, 16, 0)


# --------------------------------------------------------------------------- data

def signed(u: int) -> int:
    u &= (1 << 64) - 1
    return u - (1 << 64) if u >= 1 << 63 else u


def make_fingerprints(n: int, seed: int = 0, family_share: float = 0.02) -> np.ndarray:
    """``n`` signed fingerprints: uniform, plus planted families within distance 3."""
    rng = np.random.default_rng(seed)
    fps = rng.integers(-(1 << 63), (1 << 63) - 1, size=n, dtype=np.int64, endpoint=True)
    m = int(n * family_share)
    if m and n > 1:
        src = rng.integers(0, n, size=m)
        dst = rng.integers(0, n, size=m)
        flips = np.zeros(m, dtype=np.uint64)
        for _ in range(3):
            bit = rng.integers(0, 64, size=m).astype(np.uint64)
            use = rng.random(m) < 0.7
            flips ^= np.where(use, np.uint64(1) << bit, np.uint64(0))
        fps[dst] = (fps[src].view(np.uint64) ^ flips).view(np.int64)
    return fps


def brute_force(fps: np.ndarray, q: int, k: int = 3) -> dict[str, int]:
    x = np.bitwise_xor(fps, np.int64(q)).view(np.uint64)
    d = np.bitwise_count(x)
    idx = np.flatnonzero(d <= k)
    return {f"k{i}": int(d[i]) for i in idx}


def block(fp: int, shift: int) -> int:
    return (fp >> shift) & 0xFFFF


# --------------------------------------------------------------------------- SQL

def _hamming(col: str) -> str:
    return f"bit_count(({col} # %(q)s::bigint)::bit(64))"


def query_sql(layout: str, table: str) -> str:
    if layout == "by_key":
        return (
            f"SELECT key, {_hamming('fp')}::int AS d FROM {table} "
            "WHERE (b0 = %(b0)s OR b1 = %(b1)s OR b2 = %(b2)s OR b3 = %(b3)s) "
            f"AND {_hamming('fp')} <= %(k)s"
        )
    parts = []
    for i, _shift in enumerate(SHIFTS):
        earlier = "".join(
            f" AND ((fp >> {s}) & 65535) <> %(b{j})s" for j, s in enumerate(SHIFTS[:i])
        )
        parts.append(
            f"SELECT key, fp FROM {table} WHERE blk = {i} AND val = %(b{i})s{earlier}"
        )
    return (
        f"SELECT key, {_hamming('fp')}::int AS d FROM ("
        + " UNION ALL ".join(parts)
        + f") c WHERE {_hamming('fp')} <= %(k)s"
    )


def params(q: int, k: int = 3) -> dict:
    return {"q": q, "k": k, **{f"b{i}": block(q, s) for i, s in enumerate(SHIFTS)}}


def shard_ddl(layout: str, name: str) -> list[str]:
    """Plain table + index for one shard (or the local source of a partition)."""
    if layout == "by_key":
        return [
            f"CREATE TABLE {name} (key text NOT NULL, fp bigint NOT NULL, "
            "b0 int NOT NULL, b1 int NOT NULL, b2 int NOT NULL, b3 int NOT NULL)",
            *[f"CREATE INDEX ON {name} (b{i}) INCLUDE (fp, key)" for i in range(4)],
        ]
    return [
        f"CREATE TABLE {name} (blk smallint NOT NULL, val int NOT NULL, key text NOT NULL, fp bigint NOT NULL)",
        f"CREATE INDEX ON {name} (blk, val) INCLUDE (fp, key)",
    ]


def _columns(layout: str) -> str:
    if layout == "by_key":
        return "key text NOT NULL, fp bigint NOT NULL, b0 int NOT NULL, b1 int NOT NULL, b2 int NOT NULL, b3 int NOT NULL"
    return "blk smallint NOT NULL, val int NOT NULL, key text NOT NULL, fp bigint NOT NULL"


def _partition_key(layout: str) -> str:
    return "key" if layout == "by_key" else "blk, val"


def _source_select(layout: str) -> str:
    if layout == "by_key":
        return (
            "SELECT key, fp, ((fp >> 48) & 65535)::int, ((fp >> 32) & 65535)::int, "
            "((fp >> 16) & 65535)::int, (fp & 65535)::int FROM simdb_shard_src"
        )
    return " UNION ALL ".join(
        f"SELECT {i}::smallint, ((fp >> {s}) & 65535)::int, key, fp FROM simdb_shard_src"
        for i, s in enumerate(SHIFTS)
    )


# --------------------------------------------------------------------------- building

def load_source(conn, fps: np.ndarray) -> None:
    conn.execute("DROP TABLE IF EXISTS simdb_shard_src")
    conn.execute("CREATE TABLE simdb_shard_src (key text NOT NULL, fp bigint NOT NULL)")
    with conn.cursor().copy("COPY simdb_shard_src (key, fp) FROM STDIN") as copy:
        buf = []
        for i, f in enumerate(fps.tolist()):
            buf.append(f"k{i}\t{f}\n")
            if len(buf) >= 100_000:
                copy.write("".join(buf))
                buf = []
        if buf:
            copy.write("".join(buf))
    conn.commit()


def build_partitions(conn, layout: str, shards: int) -> str:
    """A hash-partitioned table of ``shards`` partitions in this database; returns its name."""
    name = f"simdb_{layout}_p{shards}"
    conn.execute(f"DROP TABLE IF EXISTS {name}")
    conn.execute(f"CREATE TABLE {name} ({_columns(layout)}) PARTITION BY HASH ({_partition_key(layout)})")
    for r in range(shards):
        conn.execute(
            f"CREATE TABLE {name}_{r} PARTITION OF {name} FOR VALUES WITH (MODULUS {shards}, REMAINDER {r})"
        )
    if layout == "by_key":
        for i in range(4):
            conn.execute(f"CREATE INDEX ON {name} (b{i}) INCLUDE (fp, key)")
    else:
        conn.execute(f"CREATE INDEX ON {name} (blk, val) INCLUDE (fp, key)")
    conn.execute(f"INSERT INTO {name} {_source_select(layout)}")
    conn.execute(f"ANALYZE {name}")
    conn.commit()
    return name


def _conninfo_parts(url: str) -> dict:
    from psycopg.conninfo import conninfo_to_dict

    return conninfo_to_dict(url)


def build_fdw(conn, admin_url: str, layout: str, shards: int, prefix: str) -> str:
    """``shards`` databases, each holding one hash partition; a coordinator table over them.

    ``conn`` is the coordinator (it has ``simdb_shard_src``); ``admin_url`` a libpq
    URL of the same server used to create the shard databases.
    """
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"simdb_{layout}_f{shards}"
    info = _conninfo_parts(admin_url)
    conn.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
    conn.execute(f"DROP TABLE IF EXISTS {name}")
    # the partitioned parent first: the data is routed by PostgreSQL's own hash
    conn.execute(f"CREATE TABLE {name} ({_columns(layout)}) PARTITION BY HASH ({_partition_key(layout)})")
    conn.commit()
    with psycopg.connect(admin_url, autocommit=True) as admin:
        for r in range(shards):
            db = f"{prefix}_{layout}_{shards}_{r}"
            admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{db}"')
    server_opts = {k: v for k, v in info.items() if k in ("host", "port")}
    user_opts = {k: v for k, v in info.items() if k in ("user", "password")}
    for r in range(shards):
        db = f"{prefix}_{layout}_{shards}_{r}"
        srv = f"{name}_s{r}"
        with psycopg.connect(make_conninfo(admin_url, dbname=db)) as shard:
            for stmt in shard_ddl(layout, "shard"):
                shard.execute(stmt)
        opts = ", ".join(f"{k} '{v}'" for k, v in {**server_opts, "dbname": db}.items())
        conn.execute(f"DROP SERVER IF EXISTS {srv} CASCADE")
        conn.execute(
            f"CREATE SERVER {srv} FOREIGN DATA WRAPPER postgres_fdw OPTIONS ({opts}, "
            "async_capable 'true', fetch_size '10000')"
        )
        uopts = ", ".join(f"{k} '{v}'" for k, v in user_opts.items())
        conn.execute(f"CREATE USER MAPPING FOR CURRENT_USER SERVER {srv}" + (f" OPTIONS ({uopts})" if uopts else ""))
        conn.execute(
            f"CREATE FOREIGN TABLE {name}_{r} PARTITION OF {name} "
            f"FOR VALUES WITH (MODULUS {shards}, REMAINDER {r}) SERVER {srv} "
            "OPTIONS (table_name 'shard', batch_size '10000')"
        )
    conn.commit()
    # Load each shard directly (COPY), with the rows PostgreSQL's hash routes to it.
    for r in range(shards):
        db = f"{prefix}_{layout}_{shards}_{r}"
        sel = (
            f"SELECT * FROM ({_source_select(layout)}) s ("
            + ", ".join(c.split()[0] for c in _columns(layout).split(", "))
            + f") WHERE satisfies_hash_partition('{name}'::regclass, {shards}, {r}, {_partition_key(layout)})"
        )
        with psycopg.connect(make_conninfo(admin_url, dbname=db)) as shard:
            with conn.cursor().copy(f"COPY ({sel}) TO STDOUT") as out, \
                    shard.cursor().copy("COPY shard FROM STDIN") as inp:
                for chunk in out:
                    inp.write(chunk)
            shard.execute("ANALYZE shard")
        conn.commit()
    return name


def drop_fdw(conn, admin_url: str, layout: str, shards: int, prefix: str) -> None:
    import psycopg

    name = f"simdb_{layout}_f{shards}"
    conn.execute(f"DROP TABLE IF EXISTS {name}")
    for r in range(shards):
        conn.execute(f"DROP SERVER IF EXISTS {name}_s{r} CASCADE")
    conn.commit()
    with psycopg.connect(admin_url, autocommit=True) as admin:
        for r in range(shards):
            admin.execute(f'DROP DATABASE IF EXISTS "{prefix}_{layout}_{shards}_{r}" WITH (FORCE)')


# --------------------------------------------------------------------------- querying

def lookup(conn, layout: str, table: str, q: int, k: int = 3) -> dict[str, int]:
    rows = conn.execute(query_sql(layout, table), params(q, k)).fetchall()
    out = {}
    for key, d in rows:
        if key in out:
            raise AssertionError(f"{key} returned twice")
        out[key] = d
    return out


def shards_touched(conn, layout: str, table: str, q: int, k: int = 3) -> int:
    """Partitions (shards) the plan actually scans for one lookup."""
    plan = conn.execute("EXPLAIN (FORMAT JSON) " + query_sql(layout, table), params(q, k)).fetchone()[0]
    found = set()

    def walk(node):
        rel = node.get("Relation Name")
        if rel and rel.startswith(table + "_"):
            found.add(rel)
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return len(found)


def queries(fps: np.ndarray, count: int, seed: int = 1) -> list[int]:
    """Half stored fingerprints (with a few flipped bits), half random."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        if i % 2 == 0:
            f = int(fps[rng.randrange(len(fps))]) & ((1 << 64) - 1)
            for b in rng.sample(range(64), rng.randint(0, 3)):
                f ^= 1 << b
            out.append(signed(f))
        else:
            out.append(signed(rng.getrandbits(64)))
    return out


def measure(conn, layout, table, fps, qs, k=3) -> dict:
    for q in qs[:5]:  # warm caches and connections
        lookup(conn, layout, table, q, k)
    times, found = [], 0
    for q in qs:
        t0 = time.perf_counter()
        got = lookup(conn, layout, table, q, k)
        times.append(time.perf_counter() - t0)
        want = brute_force(fps, q, k)
        if got != want:
            raise AssertionError(f"{table}: wrong answer for {q}: {got} != {want}")
        found += len(got)
    times.sort()
    return {
        "p50_ms": round(1000 * statistics.median(times), 3),
        "p90_ms": round(1000 * times[int(0.9 * (len(times) - 1))], 3),
        "shards_touched": round(statistics.mean(shards_touched(conn, layout, table, q, k) for q in qs[:20]), 2),
        "matches": found,
    }


# --------------------------------------------------------------------------- main

def run(url: str, rows: int, nqueries: int, shard_counts=SHARD_COUNTS, modes=MODES, layouts=LAYOUTS,
        out=sys.stdout) -> list[dict]:
    import psycopg

    fps = make_fingerprints(rows)
    qs = queries(fps, nqueries)
    results = []
    prefix = "simdb_shard"
    with psycopg.connect(url) as conn:
        t0 = time.perf_counter()
        load_source(conn, fps)
        print(f"# {rows} fingerprints loaded in {time.perf_counter() - t0:.1f} s", file=out, flush=True)
        for mode in modes:
            for layout in layouts:
                for s in shard_counts:
                    t0 = time.perf_counter()
                    if mode == "partitions":
                        table = build_partitions(conn, layout, s)
                    else:
                        table = build_fdw(conn, url, layout, s, prefix)
                    build = time.perf_counter() - t0
                    res = {"mode": mode, "layout": layout, "shards": s, "rows": rows, "build_s": round(build, 1)}
                    res.update(measure(conn, layout, table, fps, qs))
                    results.append(res)
                    print(json.dumps(res), file=out, flush=True)
                    if mode == "partitions":
                        conn.execute(f"DROP TABLE {table}")
                        conn.commit()
                    else:
                        drop_fdw(conn, url, layout, s, prefix)
        conn.execute("DROP TABLE IF EXISTS simdb_shard_src")
        conn.commit()
    return results


def table_markdown(results: list[dict]) -> str:
    lines = [
        "| mode | layout | shards | p50 ms | p90 ms | shards touched | per extra shard (ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    base = {}
    for r in results:
        key = (r["mode"], r["layout"])
        base.setdefault(key, r)
        b = base[key]
        extra = ""
        if r["shards_touched"] > b["shards_touched"]:
            extra = f"{(r['p50_ms'] - b['p50_ms']) / (r['shards_touched'] - b['shards_touched']):.3f}"
        lines.append(
            f"| {r['mode']} | {r['layout']} | {r['shards']} | {r['p50_ms']} | {r['p90_ms']} | "
            f"{r['shards_touched']} | {extra} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="libpq/SQLAlchemy URL of a PostgreSQL server (superuser)")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--shards", default=",".join(map(str, SHARD_COUNTS)))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    args = ap.parse_args(argv)
    server = None
    url = args.url
    if url is None:
        from simdb.embedded import start_server

        tmp = Path(tempfile.mkdtemp(prefix="simdb-bench-shards-"))
        server = start_server(tmp / "pgdata", cleanup_mode="delete")
        url = server.get_uri()
    url = url.replace("postgresql+psycopg://", "postgresql://", 1)
    try:
        results = run(
            url, args.rows, args.queries,
            tuple(int(s) for s in args.shards.split(",")),
            tuple(args.modes.split(",")), tuple(args.layouts.split(",")),
        )
        print()
        print(table_markdown(results))
        import plots  # benchmarks/plots.py (scripts run with benchmarks/ on sys.path)
        plots.shards_plot(results, plots.beside(__file__, "shards.png"))  # PNG in benchmarks/results/
    finally:
        if server is not None:
            server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
