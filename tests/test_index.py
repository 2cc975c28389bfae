"""SimhashIndex: the Python API against a real PostgreSQL."""

from __future__ import annotations

import random
import threading

import pytest

import simdb
from simdb.core.bits import hamming
from simdb.core.fingerprint import Fingerprinter
from simdb.errors import CollectionConfigError, InvalidArgumentError
from simdb.index import Entry, Match, SimhashIndex
from simdb.store import bulk as bulk_mod
from simdb.store import sql as sql_mod


@pytest.fixture
def ix(database_url, collection_name):
    index = SimhashIndex(database_url, collection_name, verify=False)
    yield index
    index.close()


def test_public_names():
    assert simdb.SimhashIndex is SimhashIndex and simdb.Match is Match
    m = Match("a", 1, 2, 1 - 2 / 64)
    assert m.jaccard is None and m.meta is None
    with pytest.raises(Exception):
        m.key = "b"


def test_add_get_near_remove(ix):
    fp = ix.add("doc1", "the quick brown fox jumps over the lazy dog", meta={"lang": "en"})
    assert fp == Fingerprinter().fingerprint("the quick brown fox jumps over the lazy dog")
    ix.add("doc2", "the quick brown fox jumped over the lazy dog")
    e = ix.get("doc1")
    assert isinstance(e, Entry) and e.fp == fp and e.meta == {"lang": "en"}
    got = ix.near("the quick brown fox jumps over the lazy dog", k=11)
    assert got[0] == Match("doc1", fp, 0, 1.0, None, {"lang": "en"})
    assert [m.key for m in ix.near(fp, k=0)] == ["doc1"]
    assert len(ix) == 2 and "doc1" in ix and "nope" not in ix
    assert ix.remove("doc1") is True and ix.remove("doc1") is False
    assert ix.get("doc1") is None and ix.get("doc1", 5) == 5
    assert len(ix) == 1


def test_remove_many_deletes_in_one_statement(ix):
    """remove_many: the keys that existed are deleted and counted (a repeated or absent key counts
    nothing); a bad key refuses the whole call before anything is deleted."""
    for i in range(6):
        ix.add(f"k{i}", fp=i)
    assert ix.remove_many(["k0", "k1", "k1", "absent"]) == 2
    assert sorted(k for k in (f"k{i}" for i in range(6)) if k in ix) == ["k2", "k3", "k4", "k5"]
    with pytest.raises(InvalidArgumentError, match=r"keys\[1\]"):
        ix.remove_many(["k2", "bad\x00key"])
    assert len(ix) == 4 and ix.remove_many([]) == 0
    with pytest.raises(TypeError, match="keys must be an iterable"):
        ix.remove_many("k2")
    assert ix.remove_many(f"k{i}" for i in range(2, 6)) == 4 and len(ix) == 0


def test_readding_a_key_replaces_it(ix):
    ix.add("k", fp=1, meta={"v": 1})
    ix.add("k", fp=2**64 - 1)
    assert len(ix) == 1
    e = ix.get("k")
    assert e.fp == 2**64 - 1 and e.meta is None
    assert ix.near(1, k=0) == []


def test_update(ix):
    ix.add("k", fp=1, meta={"v": 1})
    assert ix.update("k", fp=3) == 3
    assert ix.get("k").fp == 3 and ix.get("k").meta == {"v": 1}
    ix.update("k", fp=4, meta=None)
    assert ix.get("k").meta is None
    with pytest.raises(KeyError):
        ix.update("missing", fp=1)


def test_featureless_texts_are_stored_but_never_match(ix):
    assert ix.add("e1", "") is None
    assert ix.add("e2", "   ... !!! ") is None
    ix.add("zero", fp=0)
    assert ix.get("e1").fp is None and len(ix) == 3
    assert ix.near("") == []
    assert ix.near(0, k=11) == [Match("zero", 0, 0, 1.0)]
    assert ix.near_many(["", 0], k=3) == [[], [Match("zero", 0, 0, 1.0)]]


@pytest.mark.parametrize("k", [-1, 12, 64])
def test_k_out_of_range_says_why(ix, k):
    with pytest.raises(ValueError) as e:
        ix.near(1, k=k)
    with pytest.raises(ValueError):
        ix.near_many([1], k=k)
    if k > 11:
        assert "up to 11" in str(e.value)


@pytest.mark.parametrize("bad", [1.5, None, b"x", True, -1, 2**64])
def test_bad_queries(ix, bad):
    with pytest.raises((TypeError, ValueError)):
        ix.near(bad)


def test_limit_and_order(ix):
    base = 0x0123_4567_89AB_CDEF
    for i, (key, d) in enumerate([("c", 2), ("a", 2), ("b", 1), ("z", 0), ("y", 3)]):
        fp = base
        for b in range(d):
            fp ^= 1 << (b * 7 + i)
        ix.add(key, fp=fp)
    got = ix.near(base, k=3)
    assert [(m.distance, m.key) for m in got] == [(0, "z"), (1, "b"), (2, "a"), (2, "c"), (3, "y")]
    assert [m.key for m in ix.near(base, k=3, limit=2)] == ["z", "b"]
    with pytest.raises(InvalidArgumentError, match="limit must be None or an int >= 1"):
        ix.near(base, k=3, limit=0)  # refused, as the CLI's --limit 0 is (issue 31)
    assert [[m.key for m in ms] for ms in ix.near_many([base, base], k=3, limit=3)] == [["z", "b", "a"], ["z", "b", "a"]]
    with pytest.raises(ValueError):
        ix.near(base, limit=-1)


def test_keys_stored_faithfully(ix):
    keys = ["it's", 'say "hi"', "back\\slash", "tab\there", "new\nline", "cr\r", "\\N", "ключ", "键值", "emoji 🎉", " ", "x" * 5000, 42]
    ix.add_many([{"key": k, "fp": i + 1, "meta": {"k": str(k), "s": "\\\t\n'\""}} for i, k in enumerate(keys)])
    for i, k in enumerate(keys):
        e = ix.get(k)
        assert e is not None and e.key == str(k) and e.fp == i + 1 and e.meta == {"k": str(k), "s": "\\\t\n'\""}
    ix.add("it's; DROP TABLE simdb_fingerprints; --", fp=99)
    assert ix.get("it's; DROP TABLE simdb_fingerprints; --").fp == 99
    assert len(ix) == len(keys) + 1


@pytest.mark.parametrize("call", ["add", "add_many", "get", "remove"])
def test_nul_in_key_is_a_clear_error(ix, call):
    with pytest.raises(ValueError, match="NUL"):
        if call == "add_many":
            ix.add_many([("a\x00b", "text")])
        else:
            getattr(ix, call)(*(("a\x00b", "t") if call == "add" else ("a\x00b",)))


def test_add_many_pairs_and_dicts(ix):
    n = ix.add_many(
        [("t1", "hello world again"), {"key": "f1", "fp": 7, "meta": [1, 2]}, {"key": "t2", "text": "", "meta": {"a": None}}]
    )
    assert n == 3 and len(ix) == 3
    assert ix.get("t1").fp == Fingerprinter().fingerprint("hello world again")
    assert ix.get("t2").fp is None and ix.get("t2").meta == {"a": None}
    assert ix.get("f1").meta == [1, 2]


def test_add_many_is_all_or_nothing_and_names_the_bad_item(ix):
    ix.add("keep", fp=1)
    bad_items = [
        ([("a", "x"), ("b", 5)], "item 1 (key 'b')"),
        ([("a", "x"), {"key": "c", "fp": -3}], "item 1 (key 'c')"),
        ([("a", "x"), ("a", "y"), {"text": "no key"}], "item 2"),
        ([{"key": "m", "fp": 1, "meta": {1, 2}}], "item 0 (key 'm')"),
        ([{"key": "m", "fp": 1, "meta": "a\x00b"}], "NUL"),
        ([{"key": "m", "fp": 1, "colour": "red"}], "unknown field"),
        ([("a",)], "item 0"),
        ([object()], "item 0"),
        ([{"key": "m"}], "give text or fp"),
    ]
    for items, msg in bad_items:
        with pytest.raises((TypeError, ValueError)) as e:
            ix.add_many(items)
        assert msg in str(e.value)
        assert len(ix) == 1 and ix.get("a") is None


def test_add_many_generator_failure_rolls_back(ix):
    def gen():
        yield ("a", "one")
        yield ("b", "two")
        raise RuntimeError("source broke")

    with pytest.raises(RuntimeError):
        ix.add_many(gen())
    assert len(ix) == 0


@pytest.mark.parametrize("by_keys_max", [bulk_mod.DELETE_BY_KEYS_MAX, 0])
def test_add_many_replaces_and_last_wins(ix, monkeypatch, by_keys_max):
    """Both ways of deleting the replaced rows (the staged keys probed in the unique index, or
    joined: simdb.store.bulk.DELETE_BY_KEYS_MAX) replace exactly the staged keys."""
    monkeypatch.setattr(bulk_mod, "DELETE_BY_KEYS_MAX", by_keys_max)
    ix.add_many([{"key": f"k{i}", "fp": i} for i in range(100)])
    ix.add_many([{"key": "k5", "fp": 500}, {"key": "new", "fp": 1}, {"key": "new", "fp": 2}, {"key": "k5", "fp": 501}])
    assert len(ix) == 101
    assert ix.get("k5").fp == 501 and ix.get("new").fp == 2
    assert [m.key for m in ix.near(501, k=0)] == ["k5"]


@pytest.mark.parametrize("dupes", [False, True])
def test_add_many_bulk_path_rebuilds_indexes(database_url, collection_name, monkeypatch, dupes):
    """Big load into an empty collection: drop indexes + constraints, COPY, rebuild (forced here)."""
    monkeypatch.setattr(bulk_mod, "BULK_MIN_ROWS", 500)
    rng = random.Random(3)
    fps = [rng.getrandbits(64) for _ in range(3000)]
    items = [{"key": f"k{i}", "fp": fp} for i, fp in enumerate(fps)]
    if dupes:
        items.append({"key": "k10", "fp": 12345})  # in the directly-copied part
        items.append({"key": "k2000", "fp": 54321})
    with SimhashIndex(database_url, collection_name, verify=False) as ix:
        ix.add("k0", fp=1)  # not empty: rebuild only because it is forced
        assert ix.add_many(items, chunk_rows=100, rebuild_indexes=True) == len(items)
        assert len(ix) == 3000
        if dupes:
            assert ix.get("k10").fp == 12345 and ix.get("k2000").fp == 54321
        else:
            assert ix.get("k10").fp == fps[10]
        assert ix.get("k0").fp == fps[0]
        conn = ix.connection()
        idx = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'simdb_fingerprints'")}
        assert set(sql_mod.BLOCK_INDEXES) <= idx and sql_mod.UNIQUE_KEY in idx
        fk = conn.execute("SELECT count(*) FROM pg_constraint WHERE conname = %s", (sql_mod.COLLECTION_FK,)).fetchone()[0]
        assert fk == 1
        q = fps[77]
        got = {m.key for m in ix.near(q, k=5)}
        assert got == {f"k{i}" for i, fp in enumerate(fps) if hamming(fp, q) <= 5} - ({"k10", "k2000"} if dupes else set()) | (
            {k for k, f in (("k10", 12345), ("k2000", 54321)) if dupes and hamming(f, q) <= 5}
        )


def test_add_many_bulk_path_rolls_back_on_error(database_url, collection_name, monkeypatch):
    monkeypatch.setattr(bulk_mod, "BULK_MIN_ROWS", 100)
    with SimhashIndex(database_url, collection_name, verify=False) as ix:
        items = [{"key": f"k{i}", "fp": i} for i in range(1000)] + [{"key": "bad", "fp": "x"}]
        with pytest.raises(TypeError, match="item 1000"):
            ix.add_many(items, chunk_rows=50, rebuild_indexes=True)
        assert len(ix) == 0
        conn = ix.connection()
        idx = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'simdb_fingerprints'")}
        assert set(sql_mod.BLOCK_INDEXES) <= idx


def test_config_mismatch_is_an_error(database_url, collection_name):
    with SimhashIndex(database_url, collection_name, Fingerprinter(tokenizer="words")) as a:
        a.add("x", "hello there")
    with pytest.raises(CollectionConfigError, match="different Fingerprinter"):
        SimhashIndex(database_url, collection_name, Fingerprinter())
    with SimhashIndex(database_url, collection_name, verify=False) as b:  # None: the stored config
        assert b.fingerprinter == Fingerprinter(tokenizer="words")
        assert b.near("hello there", k=0)[0].key == "x"
    with SimhashIndex(database_url, collection_name, Fingerprinter(tokenizer="words")) as c:
        assert len(c) == 1



def test_default_collection_is_not_fingerprinter_default(database_url, collection_name):
    """No fingerprinter: a new collection is verified, fingerprinted by the candidate Fingerprinter, so
    Fingerprinter() does not open it, and the error says what to do; a given one makes a Hamming-only one."""
    with SimhashIndex(database_url, collection_name) as a:
        assert a.fingerprinter == Fingerprinter.preset("verified") != Fingerprinter() and a.verifier is not None
    with pytest.raises(CollectionConfigError,
                       match=r"as a verified collection .*preset\('verified'\).*: omit fingerprinter= \(or pass None\) "
                             r"to open it with its stored configuration"):
        SimhashIndex(database_url, collection_name, Fingerprinter())
    with SimhashIndex(database_url, collection_name + "-h", Fingerprinter()) as h:
        assert h.verifier is None

def test_collections_are_separate(database_url, collection_name):
    with SimhashIndex(database_url, collection_name + "-a", verify=False) as a, SimhashIndex(database_url, collection_name + "-b", verify=False) as b:
        a.add("x", fp=5)
        b.add("x", fp=6)
        assert [m.fp for m in a.near(5, k=3)] == [5]
        assert [m.fp for m in b.near(5, k=3)] == [6]
        assert a.collection_id != b.collection_id


def test_engine_is_accepted_and_not_disposed(engine, collection_name):
    with SimhashIndex(engine, collection_name, verify=False) as ix:
        ix.add("a", fp=1)
    # the caller's engine still works (not disposed) and sees what the index wrote
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT 1").scalar() == 1
    with SimhashIndex(engine, collection_name) as again:
        assert [m.key for m in again.near(1, k=0)] == ["a"]
    assert engine.pool.checkedout() == 0  # the index returned every connection it took


def test_threads_share_an_index(ix):
    rng = random.Random(9)
    fps = [rng.getrandbits(64) for _ in range(500)]
    ix.add_many({"key": f"k{i}", "fp": fp} for i, fp in enumerate(fps))
    errors = []

    def work(t):
        try:
            for i in range(t, 500, 4):
                assert ix.near(fps[i], k=3)[0].key == f"k{i}"
        except Exception as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_closed_index(database_url, collection_name):
    ix = SimhashIndex(database_url, collection_name, verify=False)
    ix.close()
    with pytest.raises(RuntimeError, match="closed"):
        ix.near(1)


def test_missing_schema_is_migrated(fresh_database_url, collection_name):
    with SimhashIndex(fresh_database_url, collection_name, verify=False) as ix:
        ix.add("a", fp=1)
        assert len(ix) == 1


def test_adaptive_radii_on_skewed_buckets(ix):
    """Many rows share one b0 value: pg_stats lists it, near() skips that block, answers stay exact."""
    rng = random.Random(4)
    heavy = 0xBEEF
    fps = [(heavy << 48) | rng.getrandbits(48) for _ in range(3000)] + [rng.getrandbits(64) for _ in range(1000)]
    ix.add_many({"key": f"k{i}", "fp": fp} for i, fp in enumerate(fps))
    ix.connection().execute("ANALYZE simdb_fingerprints")
    ix.refresh_stats()
    sizes, _ = ix._radii.bucket_sizes()
    assert sizes is not None and sizes.listed[0, heavy] and sizes.sizes[0, heavy] > 1000
    q = fps[5]
    assert ix._radii(q, 3)[0] == -1
    for k in (1, 3, 6):
        got = sorted((m.distance, m.key) for m in ix.near(q, k=k))
        want = sorted((hamming(q, fp), f"k{i}") for i, fp in enumerate(fps) if hamming(q, fp) <= k)
        assert got == want
        assert [sorted((m.distance, m.key) for m in ms) for ms in ix.near_many([q, fps[-1]], k=k)] == [
            want,
            sorted((hamming(fps[-1], fp), f"k{i}") for i, fp in enumerate(fps) if hamming(fps[-1], fp) <= k),
        ]


def test_add_many_switches_to_rebuild_for_a_first_big_load(fresh_database_url, collection_name, monkeypatch):
    """No flag: a load bigger than the whole (empty) table takes the drop/COPY/rebuild path by itself."""
    monkeypatch.setattr(bulk_mod, "BULK_MIN_ROWS", 300)
    rng = random.Random(8)
    fps = [rng.getrandbits(64) for _ in range(2000)]
    with SimhashIndex(fresh_database_url, collection_name, verify=False) as ix:
        ix.add_many(({"key": f"k{i}", "fp": fp} for i, fp in enumerate(fps)), chunk_rows=100)
        assert ix.last_load["rebuilt"] is True and ix.last_load["frozen"] is True and ix.last_load["rows"] == 2000
        assert len(ix) == 2000 and ix.near(fps[5], k=0)[0].key == "k5"
        # COPY FREEZE left the pages all-visible: index-only scans without heap fetches, no VACUUM
        plan = "\n".join(r[0] for r in ix.connection().execute(
            "EXPLAIN (ANALYZE, COSTS OFF) SELECT fp FROM simdb_fingerprints WHERE collection_id = %s AND b0 = %s",
            (ix.collection_id, fps[5] >> 48)).fetchall())
        assert "Index Only Scan" in plan and "Heap Fetches: 0" in plan, plan
        # a second load into the now populated collection takes the staging path
        ix.add_many(({"key": f"n{i}", "fp": fp} for i, fp in enumerate(fps)), chunk_rows=100)
        assert ix.last_load["rebuilt"] is False and len(ix) == 4000
        assert {m.key for m in ix.near(fps[5], k=0)} == {"k5", "n5"}
    # a new collection's load bigger than the table: another collection has rows, so the fast path
    # (which locks the whole table) is not taken unasked (issue 15: never stall other collections)
    more = [rng.getrandbits(64) for _ in range(6000)] + [fps[7]]
    with SimhashIndex(fresh_database_url, collection_name + "-2", verify=False) as ix2:
        ix2.add_many(({"key": f"m{i}", "fp": fp} for i, fp in enumerate(more)), chunk_rows=100)
        assert ix2.last_load["rebuilt"] is False
        assert len(ix2) == 6001 and [m.key for m in ix2.near(fps[7], k=0)] == ["m6000"]
    # asked for, it is taken: staged, then switches to drop/COPY/rebuild
    with SimhashIndex(fresh_database_url, collection_name + "-3") as ix3:
        ix3.add_many(({"key": f"m{i}", "fp": fp} for i, fp in enumerate(more)), chunk_rows=100, rebuild_indexes=True)
        assert ix3.last_load["rebuilt"] is True and ix3.last_load["frozen"] is False and "move_stage" in ix3.last_load["seconds"]
        assert len(ix3) == 6001 and [m.key for m in ix3.near(fps[7], k=0)] == ["m6000"]


def test_small_edges(ix):
    assert ix.near_many([]) == []
    ix.add(42, fp=5)
    assert ix.get("42").fp == 5 and ix.get(42).key == "42" and 42 in ix
    assert ix.update(42, "some words here") == Fingerprinter().fingerprint("some words here")
    assert ix.add_many([]) == 0
    with pytest.raises(TypeError):
        ix.add(4.5, fp=1)
    with pytest.raises(ValueError, match="give text or fp"):
        ix.add("x")
