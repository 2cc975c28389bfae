"""A bulk load (drop indexes, COPY, rebuild) drops and rebuilds only the indexes its rows enter:
a plain load leaves the partial band indexes in place (its rows have no band keys), a banded one
the partial sketchless index (its text rows have sketches). The answers stay those of a full
rebuild: an index left in place is maintained by PostgreSQL, so a row that does enter it is
indexed; the rebuild asks for parallel maintenance workers when the load has several; and the fast
encodings of fingerprint items give the row-by-row loop's bytes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from test_parallel_ingest import items as ingest_items

from simdb.index import SimhashIndex
from simdb.store import bulk
from simdb.store import encode as CB
from simdb.store import encode as E
from simdb.store import sql as _sql
from simdb.store.connect import new_connection
from simdb.store.migrate import migrate

A = "thunder57 music0 summer81 window26 gamma51 stone89 light91 shadow95 summer24 winter67 silver38 orange40"
B_COPY = "thunder57 music0 summer81 window26 gamma51 stone89 light91 shadow95 summer24 winter67 silver38 zz492"


def _oids(ix: SimhashIndex, names) -> dict[str, int | None]:
    with ix.engine.connect() as c:
        return {n: c.execute(text("SELECT to_regclass(:n)::oid"), {"n": n}).scalar() for n in names}


def test_a_plain_bulk_load_leaves_the_band_indexes_in_place(fresh_database_url):
    migrate(fresh_database_url)
    with SimhashIndex(fresh_database_url, "plain", verify=False) as ix:
        before = _oids(ix, _sql.BANDS_INDEXES)
        assert all(before.values())
        ix.add_many([(f"k{i}", f"plain text number {i} with some words") for i in range(50)], rebuild_indexes=True)
        assert ix.last_load["rebuilt"]
        assert _oids(ix, _sql.BANDS_INDEXES) == before  # the same indexes: not dropped and built again
        assert not any("band" in phase for phase in ix.last_load["seconds"])
        assert all(_oids(ix, [*_sql.BLOCK_INDEXES, _sql.SKETCHLESS_INDEX]).values())
        assert [m.key for m in ix.near("plain text number 7 with some words", k=0)] == ["k7"]
    with SimhashIndex(fresh_database_url, "banded") as bx:  # band search beside it, on those indexes
        bx.add_many([("a", A), ("x", "nothing alike at all in this one")])
        assert [m.key for m in bx.near(B_COPY)] == ["a"]


def test_a_banded_bulk_load_keeps_the_sketchless_index_and_indexes_its_fp_items(fresh_database_url):
    migrate(fresh_database_url)
    with SimhashIndex(fresh_database_url, "banded") as ix:
        before = _oids(ix, [_sql.SKETCHLESS_INDEX])
        fp = ix.fingerprinter.fingerprint(B_COPY)
        items = [("a", A), {"key": "by-fp", "fp": fp ^ 0b11}, *((f"r{i}", f"some other text number {i} here") for i in range(30))]
        ix.add_many(items, rebuild_indexes=True)
        assert ix.last_load["rebuilt"]
        assert _oids(ix, [_sql.SKETCHLESS_INDEX]) == before  # kept, and maintained row by row
        assert all(_oids(ix, _sql.BANDS_INDEXES).values())  # the band indexes, built again
        with ix.engine.connect() as c:  # the fp item is in the gate's index, read by an index-only scan
            c.execute(text("SET enable_seqscan = off"))
            c.execute(text("SET enable_bitmapscan = off"))
            q = f"SELECT count(*) FROM {_sql.FINGERPRINTS} WHERE collection_id = :c AND {_sql.SKETCHLESS_WHERE}"
            plan = " ".join(r[0] for r in c.execute(text("EXPLAIN " + q), {"c": ix.collection_id}))
            assert _sql.SKETCHLESS_INDEX in plan
            assert c.execute(text(q), {"c": ix.collection_id}).scalar() == 1
        assert [(m.key, m.jaccard is None) for m in ix.near(B_COPY)] == [("a", False), ("by-fp", True)]



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
        ix.add_many(ingest_items(600), chunk_rows=100, workers=4, rebuild_indexes=True)
        assert ix.last_load["rebuilt"] is True
    # the last build of each index is the load's (TRUNCATE logs the empty ones it makes too); the server's
    # default here (64 MB of maintenance_work_mem) allows 1 worker, the table's size at most 3
    asked = {m.split('"')[1]: int(m.split("request for ")[1].split()[0]) for m in notices if "request for" in m}
    rebuilt = {_sql.UNIQUE_KEY, *_sql.BLOCK_INDEXES}  # a plain load leaves the band indexes in place
    assert all(asked[name] >= 2 for name in rebuilt), {name: asked.get(name) for name in rebuilt}


def test_parallel_builds_are_set_for_the_transaction_only_and_never_lowered(database_url):
    with SimhashIndex(database_url, "setting") as ix:
        conn = ix.connection()
        before = conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0]
        with conn.transaction():
            conn.execute("SET LOCAL max_parallel_maintenance_workers = 6")
            bulk.parallel_builds(conn, 5)
            assert conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0] == "6"
        with conn.transaction():  # a small machine's load: the server's settings
            bulk.parallel_builds(conn, bulk.PARALLEL_BUILD_MIN_WORKERS - 1)
            assert conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0] == before
        with conn.transaction():
            bulk.parallel_builds(conn, 5)
            assert conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0] == "4"
            mem = conn.execute("SELECT setting::int FROM pg_settings WHERE name = 'maintenance_work_mem'").fetchone()[0]
            assert mem >= 5 * bulk.BUILD_MEM_PER_PARTICIPANT_MB * 1024
        assert conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0] == before


_ascii_key = st.text(st.characters(min_codepoint=1, max_codepoint=127), min_size=1, max_size=20)
_any_key = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=20)
_fp = st.integers(-(2**63), 2**63 - 1)


def _row_by_row(*args) -> bytes:
    fast = CB._keys_and_fps
    CB._keys_and_fps = lambda *a: None
    try:
        return CB.encode_rows(*args)
    finally:
        CB._keys_and_fps = fast


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_ascii_key | _any_key, st.none() | _fp), max_size=30), st.booleans())
def test_keys_and_fps_rows_are_the_row_by_row_bytes(rows, with_meta):
    keys, fps = [k for k, _ in rows], [f for _, f in rows]
    none = [None] * len(rows)
    metas = ["{}"] * len(rows) if with_meta and rows else none
    args = (keys, fps, metas, none, none, none)
    assert CB.encode_rows(*args) == _row_by_row(*args)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_any_key, st.integers(0, 2**64 - 1)), max_size=30))
def test_fingerprint_items_inline_are_the_general_parse(rows):
    inline = [{"key": k, "fp": f} for k, f in rows]  # the two-field shape the parse takes inline
    general = [{"key": k, "fp": f, "meta": None} for k, f in rows]  # three fields: the general parse
    assert E.encode_chunk(inline, 0, None) == E.encode_chunk(general, 0, None)


def test_an_inline_fingerprint_item_out_of_range_is_named():
    import pytest

    from simdb.errors import InvalidArgumentError

    for bad in (2**64, -1):
        with pytest.raises(InvalidArgumentError, match=r"item 1 \(key 'b'\)"):
            E.encode_chunk([{"key": "a", "fp": 1}, {"key": "b", "fp": bad}], 0, None)
