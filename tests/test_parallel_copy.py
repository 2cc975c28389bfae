"""A fresh load through several COPY streams (simdb.store.parallel_copy): the same rows as one
stream, the last item of a key wins across streams, all or nothing, no stage table left behind;
its index builds ask for parallel maintenance workers."""

from __future__ import annotations

import psycopg
import pytest
from test_parallel_ingest import items, rows

from simdb import SimhashIndex
from simdb.store import parallel_copy
from simdb.store.connect import new_connection
from simdb.store.sql import BLOCK_INDEXES, UNIQUE_KEY


def stage_tables(ix: SimhashIndex) -> list[str]:
    return [r[0] for r in ix.connection().execute(
        "SELECT relname FROM pg_class WHERE relname LIKE 'simdb\\_load\\_%' AND relkind = 'r'"
    ).fetchall()]


@pytest.fixture
def two_streams(monkeypatch):
    """Two workers make two streams (by default one stream whatever the workers)."""
    monkeypatch.setattr(parallel_copy, "WORKERS_PER_STREAM", 1)


def test_stream_count_grows_with_workers_when_set_and_is_one_by_default(monkeypatch):
    assert {parallel_copy.stream_count(w) for w in (1, 2, 8, 64)} == {1}
    monkeypatch.setattr(parallel_copy, "WORKERS_PER_STREAM", 4)
    assert [parallel_copy.stream_count(w) for w in (1, 2, 3, 4, 8, 14, 64)] == [1, 1, 1, 1, 2, 3, 8]


@pytest.mark.parametrize("verify", [False, True])
def test_several_streams_store_the_rows_of_one_stream_and_the_last_item_wins(
    fresh_database_url, two_streams, verify
):
    data = items(1500)
    data += [(f"k{i}", f"repeated later {i}") for i in range(0, 1500, 13)]  # keys again, in other chunks
    with SimhashIndex(fresh_database_url, "one", verify=verify) as one:
        one.add_many(data, chunk_rows=100, workers=1)
        expected = rows(one)
        sketches = one.connection().execute(
            "SELECT key, shingles, bands FROM simdb_fingerprints ORDER BY key"
        ).fetchall()
        assert verify == any(r[1] is not None and r[2] is not None for r in sketches)  # sketches and band keys
        one.connection().execute("TRUNCATE simdb_fingerprints")
        one.add_many(iter(data), chunk_rows=100, workers=2)
        assert one.last_load["rebuilt"] is True and one.last_load["streams"] == 2
        assert rows(one) == expected and len(expected) == 1500
        assert one.connection().execute(
            "SELECT key, shingles, bands FROM simdb_fingerprints ORDER BY key"
        ).fetchall() == sketches
        assert one.get("k13").fp == one.fingerprinter.fingerprint("repeated later 13")
        assert stage_tables(one) == []
        # the constraints and indexes are back: a repeated add replaces, near() finds
        one.add("k13", "the cat sat on a mat")
        assert one.get("k13").fp == one.fingerprinter.fingerprint("the cat sat on a mat")


def test_an_error_in_a_late_chunk_leaves_nothing_of_the_load(fresh_database_url, two_streams):
    data = items(1000)
    data[888] = ("k888", 5)
    with SimhashIndex(fresh_database_url, "err") as ix:
        with pytest.raises(TypeError, match=r"item 888 \(key 'k888'\)"):
            ix.add_many(data, chunk_rows=100, workers=2)
        assert len(ix) == 0 and stage_tables(ix) == []
        assert ix.add_many(items(300), chunk_rows=100, workers=2) == 301  # and the next load works


def test_a_failure_after_the_streams_committed_rolls_back_and_drops_their_tables(
    fresh_database_url, two_streams, monkeypatch
):
    def fail(self, conn, collection_id, add_unique):
        raise RuntimeError("after the streams")

    monkeypatch.setattr(parallel_copy.StageStreams, "move", fail)
    with SimhashIndex(fresh_database_url, "late") as ix:
        with pytest.raises(RuntimeError, match="after the streams"):
            ix.add_many(items(1000), chunk_rows=100, workers=2)
        assert len(ix) == 0 and stage_tables(ix) == []


def test_a_killed_loaders_stage_tables_are_dropped_and_a_live_ones_kept(database_url):
    with SimhashIndex(database_url, "orphans") as ix:
        conn = ix.connection()
        live = conn.info.backend_pid
        dead = max(r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity").fetchall()) + 100_000
        conn.execute(f"CREATE UNLOGGED TABLE simdb_load_{dead}_0 (key text)")
        conn.execute(f"CREATE UNLOGGED TABLE simdb_load_{live}_0 (key text)")
        try:
            assert parallel_copy.drop_orphans(conn) == 1
            assert stage_tables(ix) == [f"simdb_load_{live}_0"]
        finally:
            conn.execute(f"DROP TABLE IF EXISTS simdb_load_{dead}_0, simdb_load_{live}_0")


def test_index_builds_of_a_load_with_workers_ask_for_parallel_workers(fresh_database_url, monkeypatch):
    """PostgreSQL logs (DEBUG1) how many workers each index build requests; a tiny table plans
    none unless min_parallel_table_scan_size is 0, which this test's sessions set."""
    notices: list[str] = []

    def connection(engine):
        conn = new_connection(engine)
        conn.execute("SET min_parallel_table_scan_size = 0")
        conn.execute("SET client_min_messages = debug1")
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        return conn

    monkeypatch.setattr("simdb.store.connect.new_connection", connection)
    with SimhashIndex(fresh_database_url, "builds", verify=False) as ix:
        notices.clear()  # not the builds of the migrations
        ix.add_many(items(600), chunk_rows=100, workers=4, rebuild_indexes=True)
        assert ix.last_load["rebuilt"] is True
    # the last build of each index is the load's (TRUNCATE logs the empty ones it makes too); the server's
    # default here (64 MB of maintenance_work_mem) allows 1 worker, the table's size at most 3
    asked = {m.split('"')[1]: int(m.split("request for ")[1].split()[0]) for m in notices if "request for" in m}
    rebuilt = {UNIQUE_KEY, *BLOCK_INDEXES}  # a plain load leaves the band indexes in place (bulk.drop_for_bulk)
    assert all(asked[name] >= 2 for name in rebuilt), {name: asked.get(name) for name in rebuilt}


def test_parallel_builds_are_set_for_the_transaction_only_and_never_lowered(database_url):
    with SimhashIndex(database_url, "setting") as ix:
        conn = ix.connection()
        before = conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0]
        with conn.transaction():
            conn.execute("SET LOCAL max_parallel_maintenance_workers = 6")
            parallel_copy.parallel_builds(conn, 5)
            assert conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0] == "6"
        with conn.transaction():  # a small machine's load: the server's settings
            parallel_copy.parallel_builds(conn, parallel_copy.PARALLEL_BUILD_MIN_WORKERS - 1)
            assert conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0] == before
        with conn.transaction():
            parallel_copy.parallel_builds(conn, 5)
            assert conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0] == "4"
            mem = conn.execute("SELECT setting::int FROM pg_settings WHERE name = 'maintenance_work_mem'").fetchone()[0]
            assert mem >= 5 * parallel_copy.BUILD_MEM_PER_PARTICIPANT_MB * 1024
        assert conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0] == before
        assert isinstance(conn, psycopg.Connection)
