"""add_if_unique semantics (single writer): exact for k 0..11, replace rules, results; the public API."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simdb
from simdb import SimhashIndex
from simdb.core.bits import hamming
from simdb.results import AddResult
from simdb.store.dedup import lock_keys


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


def test_existing_key_near_is_a_match_far_is_replaced(index):
    assert index.add_if_unique("a", fp=0xAAAA_0000_0000_0000, meta={"v": 1}).inserted
    res = index.add_if_unique("a", fp=0xAAAA_0000_0000_0001, meta={"v": 2})
    assert not res.inserted and [(m.key, m.distance) for m in res.matches] == [("a", 1)]
    assert index.get("a").meta == {"v": 1}
    res = index.add_if_unique("a", fp=0x5555_FFFF_FFFF_FFFF, meta={"v": 3})
    assert res.inserted  # far from everything: replaces its own old row, like add()
    entry = index.get("a")
    assert entry.fp == 0x5555_FFFF_FFFF_FFFF and entry.meta == {"v": 3}
    assert len(index) == 1


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
