"""add_if_unique semantics (single writer): exact for k 0..11, replace rules, results; the public API."""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simdb
from simdb import SimhashIndex
from simdb.core.bits import hamming
from simdb.results import AddResult
from simdb.store.unique import KEY_LOCK_TAG, LOCK_TAG, key_lock, lock_keys


@pytest.fixture
def index(engine, collection_name):
    idx = SimhashIndex(engine, collection=collection_name, verify=False)
    yield idx
    idx.close()


def test_exported_names():
    assert simdb.SimhashIndex.add_if_unique and simdb.SimhashIndex.pairs and simdb.SimhashIndex.clusters
    r = AddResult(True)
    assert r and r.matches == [] and not AddResult(False, [1])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(0, 11))
def test_decision_matches_brute_force(engine, seed, k):
    """Inserted iff no stored fingerprint is within k; matches are exactly those, sorted."""
    rng = random.Random(seed)
    idx = SimhashIndex(engine, collection=f"dedup-exact-{seed}-{k}-{rng.getrandbits(32)}", verify=False)
    try:
        stored: dict[str, int] = {}
        center = rng.getrandbits(64)
        for i in range(40):
            if rng.random() < 0.3:
                fp = rng.getrandbits(64)
            else:  # near the center: distances around k, so both answers happen
                fp = center
                for b in rng.sample(range(64), rng.randint(0, k + 2)):
                    fp ^= 1 << b
            key = f"x{i}"
            res = idx.add_if_unique(key, fp=fp, k=k, meta={"i": i})
            near = sorted((hamming(fp, v), kk) for kk, v in stored.items() if hamming(fp, v) <= k)
            assert res.inserted == (not near)
            assert [(m.distance, m.key) for m in res.matches] == near
            assert all(m.meta == {"i": int(m.key[1:])} and m.similarity == 1 - m.distance / 64 for m in res.matches)
            if res.inserted:
                stored[key] = fp
        assert len(idx) == len(stored)
        # what is stored has no pair within k (for k <= 3, ask pairs())
        if k <= 3:
            assert list(idx.pairs(k)) == []
    finally:
        idx.close()


def test_an_existing_key_is_replaced_near_or_far_unless_another_key_is_near(index):
    """The key's own stored row is no near-duplicate of it: it is the row a re-add replaces (as add()
    does), near (an edited text) or far. Another key's near row keeps the text out, and then nothing
    changes, the key's old row included."""
    assert index.add_if_unique("a", fp=0xAAAA_0000_0000_0000, meta={"v": 1}).inserted
    res = index.add_if_unique("a", fp=0xAAAA_0000_0000_0000, meta={"v": 1})
    assert res.inserted and res.matches == []  # the same again: stored (unchanged), not "a near-duplicate of a"
    res = index.add_if_unique("a", fp=0xAAAA_0000_0000_0001, meta={"v": 2})
    assert res.inserted and res.matches == []  # an edit near its old version: replaces it
    assert index.get("a").fp == 0xAAAA_0000_0000_0001 and index.get("a").meta == {"v": 2}
    res = index.add_if_unique("a", fp=0x5555_FFFF_FFFF_FFFF, meta={"v": 3})
    assert res.inserted  # far from everything: replaces its own old row, like add()
    entry = index.get("a")
    assert entry.fp == 0x5555_FFFF_FFFF_FFFF and entry.meta == {"v": 3}
    assert index.add_if_unique("b", fp=0xAAAA_0000_0000_0000).inserted
    res = index.add_if_unique("a", fp=0xAAAA_0000_0000_0003, meta={"v": 4})  # near b (and not its own row)
    assert not res.inserted and [(m.key, m.distance) for m in res.matches] == [("b", 2)]
    assert index.get("a").fp == 0x5555_FFFF_FFFF_FFFF and index.get("a").meta == {"v": 3}
    assert len(index) == 2


LION = ("The Lion and the Mouse: a lion was awakened from sleep by a mouse running over his face; "
        "rising up angrily, he caught him and was about to kill him")
LION_EDITED = LION + ". The mouse piteously entreated, saying: if you would only spare my life"


def test_verified_re_add_of_an_edited_text_replaces_its_row(engine, collection_name):
    """A verified collection: a key's edited text is judged against the other keys' rows only."""
    with SimhashIndex(engine, collection=collection_name) as index:
        assert index.verifier is not None and index.bands
        assert index.add_if_unique("lion", LION).inserted
        assert index.add_if_unique("lion", LION).inserted  # unchanged: stored again, not its own near-duplicate
        res = index.add_if_unique("lion", LION_EDITED, meta={"v": 2})
        assert res.inserted and res.matches == [] and index.get("lion").meta == {"v": 2}
        assert [(m.key, m.jaccard) for m in index.near(LION_EDITED)] == [("lion", 1.0)]
        res = index.add_if_unique("copy", LION_EDITED.upper())
        assert not res.inserted and [m.key for m in res.matches] == ["lion"]
        assert len(index) == 1


@pytest.mark.parametrize("verified", [True, False])
def test_async_re_add_replaces_its_own_row(database_url, collection_name, verified):
    """simdb.aio's add_if_unique (Hamming; verified) follows the same rule."""
    from simdb.aio import AsyncSimhashIndex

    SimhashIndex(database_url, collection_name, verify=None if verified else False).close()

    async def run():
        async with AsyncSimhashIndex(database_url, collection_name) as ix:
            assert (await ix.add_if_unique("lion", LION)).inserted
            assert (await ix.add_if_unique("lion", LION)).inserted
            assert (await ix.add_if_unique("lion", LION_EDITED, meta={"v": 2})).inserted
            refused = await ix.add_if_unique("copy", LION_EDITED)
            return refused, await ix.get("lion"), len(await ix.near(LION_EDITED))

    refused, entry, found = asyncio.run(run())
    assert not refused.inserted and [m.key for m in refused.matches] == ["lion"]
    assert entry.meta == {"v": 2} and found == 1


def test_texts_and_featureless(index):
    t = "The Lion and the Mouse: a lion was awakened from sleep by a mouse running over his face"
    assert index.add_if_unique("lion", t).inserted
    res = index.add_if_unique("lion-copy", t.upper())
    assert not res.inserted and res.matches[0].key == "lion" and res.matches[0].distance == 0
    assert isinstance(res.matches[0], simdb.Match)
    for i in range(3):  # no features: stored with fp NULL, never a near-duplicate of anything
        assert index.add_if_unique(f"empty-{i}", "  ...  ").inserted
    assert index.get("empty-0").fp is None
    assert [c.keys for c in index.clusters()] == []


def test_argument_errors(index):
    with pytest.raises(ValueError, match="k=12"):
        index.add_if_unique("a", fp=1, k=12)
    with pytest.raises(ValueError):
        index.add_if_unique("a", fp=-1)
    with pytest.raises(TypeError):
        index.add_if_unique("a", fp="1")
    with pytest.raises(ValueError, match="give text or fp"):
        index.add_if_unique("a")
    with pytest.raises(ValueError, match="JSON"):
        index.add_if_unique("a", fp=1, meta={"x": object()})
    with pytest.raises(ValueError, match="NUL"):
        index.add_if_unique("a\x00b", fp=1)
    with pytest.raises(ValueError, match="surrogate"):
        index.add_if_unique("a\udcffb", fp=1)
    assert len(index) == 0


def test_pairs_and_clusters_through_the_index(index):
    base = 0x0123_4567_89AB_CDEF
    index.add_many([{"key": "a", "fp": base}, {"key": "b", "fp": base ^ 1}, {"key": "c", "fp": base ^ 0b11},
                    {"key": "far", "fp": ~base & (2**64 - 1)}, ("empty", "")])
    assert sorted(index.pairs()) == [("a", "b", 1), ("a", "c", 2), ("b", "c", 1)]
    assert sorted(index.pairs(k=1)) == [("a", "b", 1), ("b", "c", 1)]
    clusters = list(index.clusters())
    assert [(c.representative, c.keys) for c in clusters] == [("a", ["a", "b", "c"])]
    every = list(index.clusters(include_singletons=True))
    assert [c.keys for c in every] == [["a", "b", "c"], ["far"], ["empty"]]
    # k = 4..11 (the radius join): the same pairs here, "far" is 64 bits away
    assert sorted(index.pairs(k=11)) == [("a", "b", 1), ("a", "c", 2), ("b", "c", 1)]
    assert [c.keys for c in index.clusters(k=7)] == [["a", "b", "c"]]
    with pytest.raises(ValueError, match="too large"):
        index.pairs(k=12)
    with pytest.raises(ValueError, match="too large"):
        index.clusters(k=12)


def test_lock_keys_layout():
    keys = lock_keys(7, 0x0001_0002_0003_0004, 3)
    assert keys == sorted(keys) and len(keys) == 4
    assert len(lock_keys(7, 0x0001_0002_0003_0004, 0)) == 4  # own blocks always locked
    assert len(lock_keys(7, 0, 7)) == 4 * 17
    assert len(lock_keys(7, 0, 11)) == 4 * 137
    assert all(-(2**63) <= x < 2**63 for x in lock_keys(2**31 - 1, 2**64 - 1, 11))


def test_key_lock_layout():
    """One lock per (collection, key), apart from the block locks; a positive bigint."""
    a = key_lock(7, "a")
    assert a == key_lock(7, "a") and a != key_lock(7, "b") and a != key_lock(8, "a")
    assert a >> 52 == KEY_LOCK_TAG != LOCK_TAG and 0 < key_lock(2**31 - 1, "\U0010ffff" * 100) < 2**63
