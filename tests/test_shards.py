"""The sharded layouts of docs/scale-out.md, simulated with hash partitions and
postgres_fdw shards (benchmarks/bench_shards.py), give exact answers."""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_shards.py"
_spec = importlib.util.spec_from_file_location("simdb_bench_shards", _PATH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

ROWS = 4000


@pytest.fixture(scope="module")
def shard_env(server_url):
    """(libpq URL of a fresh coordinator database, admin URL, fingerprints)."""
    import psycopg
    from sqlalchemy.engine import make_url

    admin = make_url(server_url).set(drivername="postgresql").render_as_string(hide_password=False)
    name = "simdb_shards_" + uuid.uuid4().hex[:8]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    coord = make_url(admin).set(database=name).render_as_string(hide_password=False)
    fps = bench.make_fingerprints(ROWS, seed=3, family_share=0.05)
    with psycopg.connect(coord) as conn:
        bench.load_source(conn, fps)
    yield coord, admin, fps
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _check(conn, layout, table, fps, qs):
    total = 0
    for q in qs:
        got = bench.lookup(conn, layout, table, q)
        assert got == bench.brute_force(fps, q), (table, q)
        total += len(got)
    assert total > 0  # the planted families make some lookups hit


@pytest.mark.parametrize("layout", bench.LAYOUTS)
def test_partitioned_tables_exact(shard_env, layout):
    import psycopg

    coord, _, fps = shard_env
    qs = bench.queries(fps, 60, seed=2)
    with psycopg.connect(coord) as conn:
        for shards in (1, 4, 16):
            table = bench.build_partitions(conn, layout, shards)
            _check(conn, layout, table, fps, qs)
            touched = bench.shards_touched(conn, layout, table, qs[0])
            if layout == "by_key":
                assert touched == shards  # fans out to every shard
            else:
                assert touched <= min(4, shards)  # one shard per probed block


@pytest.mark.parametrize("layout", bench.LAYOUTS)
def test_fdw_shards_exact(shard_env, layout):
    import psycopg

    coord, admin, fps = shard_env
    with psycopg.connect(coord) as conn:
        avail = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'postgres_fdw'").fetchone()
        if avail is None:
            pytest.skip("postgres_fdw is not available on this PostgreSQL server")
        prefix = "simdb_t" + uuid.uuid4().hex[:6]
        table = bench.build_fdw(conn, admin, layout, 4, prefix)
        try:
            qs = bench.queries(fps, 40, seed=4)
            _check(conn, layout, table, fps, qs)
            touched = bench.shards_touched(conn, layout, table, qs[0])
            assert touched == 4 if layout == "by_key" else touched <= 4
            # the rows really live in the shard databases, split by PostgreSQL's hash
            n = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            assert n == (ROWS if layout == "by_key" else 4 * ROWS)
            per_shard = [conn.execute(f"SELECT count(*) FROM {table}_{r}").fetchone()[0] for r in range(4)]
            assert sum(per_shard) == n and min(per_shard) > 0
        finally:
            conn.rollback()
            bench.drop_fdw(conn, admin, layout, 4, prefix)
