"""Keeping the store right: update, remove + re-add, all-or-nothing batches, killed writers,
and hostile values (quotes, NULs, long strings, non-UTF-8) that must never be executed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from sqlalchemy import text

import simdb
import simdb.index.duplicates
from simdb import SimhashIndex

A = "The quick brown fox jumps over the lazy dog near the riverbank at dawn"
B = "Completely unrelated sentence about quarterly revenue figures and tax accounting rules"


def _rows(engine, collection):
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT f.key, f.fp, f.meta FROM simdb_fingerprints f JOIN simdb_collections c "
                 "ON c.id = f.collection_id WHERE c.name = :n ORDER BY f.id"),
            {"n": collection},
        ).all()


@pytest.fixture
def index(engine, collection_name):
    idx = SimhashIndex(engine, collection=collection_name, verify=False)  # the Hamming primitive
    yield idx
    idx.close()


def test_update_refingerprints(index, engine, collection_name):
    fpr = simdb.Fingerprinter()
    index.add("a", A)
    assert [m.key for m in index.near(A)] == ["a"]
    index.update("a", B)
    assert index.near(A) == []
    assert [m.key for m in index.near(B)] == ["a"]
    assert [r.fp for r in _rows(engine, collection_name)] == [simdb.to_signed(fpr.fingerprint(B))]
    assert len(index) == 1


def test_remove_and_readd_leaves_no_trace(index, engine, collection_name):
    index.add("a", A, meta={"v": 1})
    index.add("b", A)  # a near-duplicate of a
    assert list(index.pairs()) == [("a", "b", 0)]
    index.remove("a")
    assert len(index) == 1
    assert index.near(A, k=3)[0].key == "b" and len(index.near(A)) == 1
    assert list(index.pairs()) == []
    index.add("a", B)  # re-added: new text, no meta
    rows = _rows(engine, collection_name)
    assert [r.key for r in rows] == ["b", "a"]  # a is now the later-added row
    assert rows[1].meta is None
    assert [m.key for m in index.near(B)] == ["a"]
    assert list(index.pairs()) == []
    index.add("c", B)
    assert list(index.pairs()) == [("a", "c", 0)]
    assert [c.keys for c in index.clusters()] == [["a", "c"]]


def test_add_if_unique_via_index(index):
    r1 = index.add_if_unique("a", A)
    assert r1.inserted and r1.matches == []
    r2 = index.add_if_unique("a2", A.upper() + "!")
    assert not r2.inserted and [m.key for m in r2.matches] == ["a"]
    assert isinstance(r2.matches[0], simdb.Match)
    assert index.add_if_unique("b", B).inserted
    assert index.add_if_unique("e1", "").inserted  # featureless: stored with fp NULL, never a match
    assert index.add_if_unique("e2", "   ").inserted
    assert len(index) == 4
    assert index.add_if_unique("x", fp=simdb.Fingerprinter().fingerprint(B) ^ 0b111, k=3).inserted is False
    assert index.add_if_unique("y", fp=simdb.Fingerprinter().fingerprint(B) ^ 0b111, k=2).inserted is True
    with pytest.raises(ValueError):
        index.add_if_unique("z", fp=1, k=12)


def test_add_many_one_bad_item_fails_whole(index):
    index.add("keep", A)
    items = [("k1", A), ("k2", B), ("k3", 12345), ("k4", "fine text here")]
    with pytest.raises((TypeError, ValueError)) as info:
        index.add_many(items)
    assert "k3" in str(info.value)
    assert len(index) == 1
    with pytest.raises((TypeError, ValueError)) as info:
        index.add_many([("k1", A), (None, B)])
    assert len(index) == 1
    with pytest.raises((TypeError, ValueError)) as info:
        index.add_many([{"key": "k1", "text": A}, {"key": "k2", "fp": 2**64}])
    assert "k2" in str(info.value)
    assert len(index) == 1


_WRITER = textwrap.dedent(
    """
    import sys, time
    from simdb import SimhashIndex
    url, collection, mode = sys.argv[1:4]
    idx = SimhashIndex(url, collection=collection)
    if mode == "staged":
        idx.add("pre", fp=1)  # committed before the batch starts
    def items():
        for i in range(10_000_000):
            if i == 5000:
                print("mid", flush=True)
            if i >= 5000:
                time.sleep(0.001)
            yield {"key": "k%d" % i, "fp": (i * 0x9E3779B97F4A7C15) % 2**64}
    idx.add_many(items(), rebuild_indexes=(mode == "rebuild"))
    print("done", flush=True)
    """
)


def _indexes_and_constraints(engine):
    with engine.connect() as conn:
        idx = conn.execute(text("SELECT indexname FROM pg_indexes WHERE tablename = 'simdb_fingerprints'")).scalars()
        con = conn.execute(text("SELECT conname FROM pg_constraint WHERE conrelid = 'simdb_fingerprints'::regclass"))
        return sorted(idx), sorted(con.scalars())


@pytest.mark.parametrize("mode", ["staged", "rebuild"])
def test_killed_bulk_writer_leaves_no_partial_rows(database_url, collection_name, engine, mode):
    """SIGKILL a process in the middle of add_many's COPY: none of its rows exist afterwards,
    and a load that dropped the block indexes to rebuild them leaves them in place."""
    before = _indexes_and_constraints(engine)
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, database_url, collection_name, mode],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.strip() == "mid", proc.stderr.read()
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    # the server notices the dead client and aborts its transaction
    deadline = time.time() + 30
    while time.time() < deadline:
        with engine.connect() as conn:
            busy = conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE state <> 'idle' "
                                     "AND query ILIKE 'COPY%simdb_fingerprints%'")).scalar()
        if not busy:
            break
        time.sleep(0.2)
    assert [r.key for r in _rows(engine, collection_name)] == (["pre"] if mode == "staged" else [])
    assert _indexes_and_constraints(engine) == before
    idx = SimhashIndex(engine, collection=collection_name)
    try:
        idx.add("after", fp=5)
        assert [m.key for m in idx.near(5, k=0)] == ["after"]
    finally:
        idx.close()


_LOCK_HOLDER = textwrap.dedent(
    """
    import sys, time
    from sqlalchemy import create_engine, text
    from simdb.index import duplicates
    url, cid = sys.argv[1], int(sys.argv[2])
    engine = create_engine(url)
    with engine.begin() as conn:
        assert duplicates.add_if_unique(conn, cid, "victim", 0x0123456789ABCDEF, 3).inserted
        print("inserted", flush=True)
        time.sleep(600)
    """
)


def test_killed_add_if_unique_writer_leaves_nothing_and_releases_locks(database_url, index, engine):
    index.add("other", fp=0xFFFF_0000_FFFF_0000)
    with engine.connect() as conn:
        cid = conn.execute(text("SELECT id FROM simdb_collections WHERE name = :n"),
                           {"n": index.collection}).scalar_one()
    proc = subprocess.Popen([sys.executable, "-c", _LOCK_HOLDER, database_url, str(cid)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "inserted", proc.stderr.read()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    # the near writer gets the locks once the server has aborted the dead transaction
    res = None
    for _ in range(100):
        try:
            with engine.begin() as conn:
                conn.execute(text("SET LOCAL lock_timeout = '500ms'"))
                res = simdb.index.duplicates.add_if_unique(conn, cid, "survivor", 0x0123456789ABCDEE, 3)
            break
        except Exception:
            time.sleep(0.2)
    assert res is not None and res.inserted
    assert sorted(r.key for r in _rows(engine, index.collection)) == ["other", "survivor"]


HOSTILE = [
    "O'Reilly",
    'double "quoted"',
    "'; DROP TABLE simdb_fingerprints; --",
    "back\\slash",
    "$$ dollar $$",
    "%(k)s and %s and :name",
    "tab\tnew\nline",
    "ünïcödé 中文 🎉",
    "x" * 100_000,
    "é" * 1000,
]


def test_long_incompressible_key_stored_or_clear_error(index, engine, collection_name):
    """A key too big for the unique btree: a clear error from PostgreSQL, nothing half-written."""
    import random

    rnd = random.Random(3)
    key = "".join(chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(20_000))  # ~60 kB, does not compress
    try:
        index.add(key, A)
    except Exception as exc:  # the store's choice: reject with PostgreSQL's message
        assert "index row" in str(exc) or "exceeds" in str(exc), str(exc)
        assert _rows(engine, collection_name) == []
    else:
        assert index.get(key).key == key
    with pytest.raises(Exception, match="index row|exceeds"):
        index.add_if_unique(key + "x", B)
    assert all(r.key != key + "x" for r in _rows(engine, collection_name))


@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: repr(v)[:20])
def test_hostile_keys_and_collections_stored_faithfully(engine, value):
    coll = value[:2000]  # collection name is a unique btree key too
    idx = SimhashIndex(engine, collection=coll)
    try:
        key = value
        idx.add(key, A, meta={"m": value})
        idx.add(key + "-2", A)
        assert idx.get(key) is not None
        assert [m.key for m in idx.near(A)] == sorted([key, key + "-2"])
        assert [(p.key_a, p.key_b, p.distance) for p in idx.pairs()] == [(key, key + "-2", 0)]
        assert idx.add_if_unique(key + "-3", A).inserted is False
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM simdb_pairs(:c, 3)"), {"c": coll}).scalar() == 1
            assert conn.execute(text("SELECT to_regclass('simdb_fingerprints') IS NOT NULL")).scalar()
        idx.remove(key)
        assert idx.get(key) is None
    finally:
        idx.close()


@pytest.mark.parametrize("value", ["nul\x00inside", "surrogate \udcff here", "lone \ud800"],
                         ids=["nul", "surrogate", "lone-surrogate"])
def test_unstorable_text_values_rejected_clearly(engine, collection_name, value):
    """PostgreSQL text holds neither NUL nor unpaired surrogates: a clear error, nothing stored."""
    idx = SimhashIndex(engine, collection=collection_name)
    try:
        idx.add("ok", A)
        for call in (
            lambda: idx.add(value, A),
            lambda: idx.add_if_unique(value, B),
            lambda: idx.add_many([("fine", B), (value, B)]),
        ):
            with pytest.raises((ValueError, TypeError, UnicodeError)) as info:
                call()
            msg = str(info.value).lower()
            assert any(w in msg for w in ("nul", "0x00", "surrogate", "utf", "encode", "character")), msg
        assert [r.key for r in _rows(engine, collection_name)] == ["ok"]
    finally:
        idx.close()
    with pytest.raises((ValueError, TypeError, UnicodeError)):
        SimhashIndex(engine, collection="bad\x00name").add("k", A)
