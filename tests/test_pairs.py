"""All near-duplicate pairs and clusters: exact against brute force, streamed, each pair once."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from simdb.core import block_pairs, radius_pairs
from simdb.core.bits import MASKS, hamming, radii_options, to_signed
from simdb.index import duplicates
from simdb.results import Pair
from simdb.store.pairs import CHUNK_ROWS


def make_collection(engine, fps, name=None, keys=None):
    """A collection holding ``fps`` (unsigned ints or None) under keys k0, k1, ... in that order."""
    name = name or f"pairs-{uuid.uuid4().hex[:10]}"
    keys = keys or [f"k{i}" for i in range(len(fps))]
    with engine.begin() as conn:
        cid = conn.execute(
            text("INSERT INTO simdb_collections (name, config) VALUES (:n, CAST(:c AS jsonb)) RETURNING id"),
            {"n": name, "c": json.dumps({"test": True})},
        ).scalar_one()
        if fps:
            conn.execute(
                text("INSERT INTO simdb_fingerprints (collection_id, key, fp) "
                     "SELECT :c, k, f FROM unnest(CAST(:keys AS text[]), CAST(:fps AS int8[])) WITH ORDINALITY "
                     "AS t(k, f, n) ORDER BY n"),
                {"c": cid, "keys": keys, "fps": [None if f is None else to_signed(f) for f in fps]},
            )
    return cid, name, keys


def brute_pairs(fps, keys, k):
    out = set()
    for i in range(len(fps)):
        for j in range(i + 1, len(fps)):
            if fps[i] is None or fps[j] is None:
                continue
            d = hamming(fps[i], fps[j])
            if d <= k:
                out.add((keys[i], keys[j], d))
    return out


def families(draw_or_rng, n_fam, size, spread):
    """Random families: members within ``spread`` bits of a random center (so pairwise <= 2*spread)."""
    rng = draw_or_rng
    out = []
    for _ in range(n_fam):
        center = int(rng.integers(0, 2**64, dtype=np.uint64))
        for _ in range(size):
            v = center
            for _ in range(int(rng.integers(0, spread + 1))):
                v ^= 1 << int(rng.integers(0, 64))
            out.append(v)
    return out


# --- pure numpy core, no database ------------------------------------------------------------


def _core_pairs(fps, k, chunk=None):
    arr = np.array(fps, dtype=np.uint64)
    ids = np.arange(len(arr), dtype=np.int64)
    got = []
    for i in range(4):
        b = (arr >> np.uint64(block_pairs.SHIFTS[i])) & np.uint64(0xFFFF)
        order = np.argsort(b, kind="stable")
        for a, bb, d in block_pairs.pairs_in_chunk(ids[order], arr[order], i, k):
            got.extend(zip(a.tolist(), bb.tolist(), d.tolist()))
    return got


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(0, 3),
    n_fam=st.integers(1, 6),
    size=st.integers(1, 12),
    spread=st.integers(0, 3),
    extra=st.lists(st.integers(0, 2**64 - 1), max_size=10),
    edge=st.lists(st.sampled_from([0, 2**64 - 1, 2**63, 2**63 - 1, 1, 0xFFFF, 0xFFFF << 48]), max_size=6),
)
def test_core_matches_brute_force(seed, k, n_fam, size, spread, extra, edge):
    rng = np.random.default_rng(seed)
    fps = families(rng, n_fam, size, spread) + extra + edge
    got = _core_pairs(fps, k)
    assert len(got) == len(set(got)), "a pair came out twice"
    assert all(a < b for a, b, _ in got)
    expect = {(i, j, hamming(fps[i], fps[j])) for i in range(len(fps)) for j in range(i + 1, len(fps))
              if hamming(fps[i], fps[j]) <= k}
    assert set(got) == expect


def _radius_core_pairs(fps, k):
    arr = np.array(fps, dtype=np.uint64)
    got = []
    for a, b, d in radius_pairs.pairs_within(np.arange(len(arr), dtype=np.int64), arr, k):
        got.extend(zip(a.tolist(), b.tolist(), d.tolist()))
    return got


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(0, 11),
    n_fam=st.integers(1, 6),
    size=st.integers(1, 12),
    spread=st.integers(0, 6),
    skew=st.booleans(),
    extra=st.lists(st.integers(0, 2**64 - 1), max_size=10),
    edge=st.lists(st.sampled_from([0, 2**64 - 1, 2**63, 2**63 - 1, 1, 0xFFFF, 0xFFFF << 48]), max_size=6),
    limit=st.sampled_from([1, 7, 100, radius_pairs.CANDIDATE_LIMIT]),
)
def test_radius_core_matches_brute_force(monkeypatch, seed, k, n_fam, size, spread, skew, extra, edge, limit):
    """k = 0..11 on the four blocks with per-collection radii: every pair within k, once."""
    monkeypatch.setattr(radius_pairs, "CANDIDATE_LIMIT", limit)
    rng = np.random.default_rng(seed)
    fps = families(rng, n_fam, size, spread) + extra + edge
    if skew:  # one huge bucket in block 0 and near-equal other blocks: radii move away from it
        fps += [(0xBEEF << 48) | (0x1234_5678_9ABC ^ (1 << int(b))) for b in rng.integers(0, 48, size=30)]
    got = _radius_core_pairs(fps, k)
    assert len(got) == len(set(got)), "a pair came out twice"
    assert all(a < b for a, b, _ in got)
    expect = {(i, j, hamming(fps[i], fps[j])) for i in range(len(fps)) for j in range(i + 1, len(fps))
              if hamming(fps[i], fps[j]) <= k}
    assert set(got) == expect


@pytest.mark.parametrize("k", [4, 7, 11])
def test_radius_core_every_exact_radius_assignment(k):
    """Any radii summing to k - 3 are exact (the chosen ones only do less work)."""
    rng = np.random.default_rng(k)
    fps = families(rng, 5, 8, 5)
    arr = np.array(fps, dtype=np.uint64)
    expect = {(i, j) for i in range(len(fps)) for j in range(i + 1, len(fps)) if hamming(fps[i], fps[j]) <= k}
    for radii in radii_options(k):
        got = [(a, b) for x, y, _ in radius_pairs.pairs_within(np.arange(len(arr)), arr, k, radii)
               for a, b in zip(x.tolist(), y.tolist())]
        assert len(got) == len(set(got)) and set(got) == expect, radii
    with pytest.raises(ValueError, match="radii"):
        list(radius_pairs.pairs_within(np.arange(2), arr[:2], k, (0, 0, 0, 0)))


def test_radii_avoid_a_skewed_block():
    rng = np.random.default_rng(3)
    fps = rng.integers(0, 2**64, size=5000, dtype=np.uint64)
    fps[:2500] = (fps[:2500] & np.uint64(0x0000_FFFF_FFFF_FFFF)) | np.uint64(0xBEEF << 48)  # b0 skewed
    radii = radius_pairs.choose_pair_radii(fps, 7)
    assert radii[0] < max(radii[1:])
    cost = radius_pairs.candidate_counts(fps)
    assert cost[0][0] >= 2500 * 2499 // 2


def test_core_giant_run_is_split(monkeypatch):
    """Hundreds of identical fingerprints: candidates are produced in bounded slices, still exact."""
    monkeypatch.setattr(block_pairs, "CANDIDATE_LIMIT", 500)
    fps = [0x1234_5678_9ABC_DEF0] * 300 + [0x1234_5678_9ABC_DEF1] * 20 + [0x0F0F_0F0F_0F0F_0F0F] * 3
    got = _core_pairs(fps, 3)
    n = len(fps)
    expect = {(i, j, hamming(fps[i], fps[j])) for i in range(n) for j in range(i + 1, n)
              if hamming(fps[i], fps[j]) <= 3}
    assert len(got) == len(set(got)) == len(expect)
    assert set(got) == expect


def test_components_representative_is_smallest_id():
    a = np.array([5, 7, 2, 10, 11], dtype=np.int64)
    b = np.array([7, 9, 9, 11, 12], dtype=np.int64)
    members, roots = block_pairs.components(a, b)
    comp = {}
    for m, r in zip(members.tolist(), roots.tolist()):
        comp.setdefault(r, []).append(m)
    assert comp == {2: [2, 5, 7, 9], 10: [10, 11, 12]}


# --- against PostgreSQL ------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(0, 11),
    spread=st.integers(1, 6),
    nulls=st.integers(0, 3),
    chunk_rows=st.sampled_from([1, 5, 64, CHUNK_ROWS]),
)
def test_pairs_match_brute_force(engine, seed, k, spread, nulls, chunk_rows):
    rng = np.random.default_rng(seed)
    fps = families(rng, int(rng.integers(1, 8)), int(rng.integers(1, 8)), spread)
    fps += [None] * nulls  # featureless texts: never pair, not even with each other
    fps += [int(x) for x in rng.integers(0, 2**64, size=int(rng.integers(0, 10)), dtype=np.uint64)]
    order = rng.permutation(len(fps))
    fps = [fps[i] for i in order]
    cid, name, keys = make_collection(engine, fps)
    expect = brute_pairs(fps, keys, k)

    got = list(duplicates.iter_pairs(engine, cid, k, chunk_rows=chunk_rows, batch=3))
    assert len(got) == len(set(got)), "a pair came out twice"
    assert set(got) == expect  # key_a is the earlier-added row: keys are added in index order

    with engine.connect() as conn:
        sql_rows = conn.execute(text("SELECT key_a, key_b, distance FROM simdb_pairs(:n, :k)"),
                                {"n": name, "k": k}).all()
    assert len(sql_rows) == len(set(sql_rows))
    assert {tuple(r) for r in sql_rows} == expect


def test_pairs_key_a_is_earlier_added(engine):
    fps = [0xABCD_0000_0000_0001, 0xABCD_0000_0000_0000]
    cid, _, _ = make_collection(engine, fps, keys=["zz-first", "aa-second"])
    assert list(duplicates.iter_pairs(engine, cid)) == [Pair("zz-first", "aa-second", 1)]


def test_pairs_null_fingerprints_never_pair(engine):
    cid, name, _ = make_collection(engine, [None, None, None, 7, 7])
    assert list(duplicates.iter_pairs(engine, cid)) == [("k3", "k4", 0)]
    assert [c.keys for c in duplicates.iter_clusters(engine, cid)] == [["k3", "k4"]]


def test_pairs_empty_and_other_collections_apart(engine):
    cid_empty, name_empty, _ = make_collection(engine, [])
    assert list(duplicates.iter_pairs(engine, cid_empty)) == []
    assert list(duplicates.iter_clusters(engine, cid_empty, include_singletons=True)) == []
    a, _, _ = make_collection(engine, [1, 3])
    b, _, _ = make_collection(engine, [1, 3])
    assert list(duplicates.iter_pairs(engine, a)) == [("k0", "k1", 1)]
    assert list(duplicates.iter_pairs(engine, b)) == [("k0", "k1", 1)]


@pytest.mark.parametrize("bad", [-1, 12, 64])
def test_pairs_k_out_of_range(engine, bad):
    cid, name, _ = make_collection(engine, [1])
    with pytest.raises(ValueError, match="k"):
        list(duplicates.iter_pairs(engine, cid, bad))
    with pytest.raises(ValueError, match="k"):
        list(duplicates.iter_clusters(engine, cid, bad))
    with pytest.raises(TypeError):
        list(duplicates.iter_pairs(engine, cid, 2.0))
    with engine.connect() as conn, pytest.raises(Exception, match="between 0 and 11"):
        conn.execute(text("SELECT * FROM simdb_pairs(:n, :k)"), {"n": name, "k": bad}).all()
    with engine.connect() as conn, pytest.raises(Exception, match="must not be NULL"):
        conn.execute(text("SELECT * FROM simdb_pairs(:n, NULL)"), {"n": name}).all()


def test_pairs_k12_error_says_what_to_use(engine):
    cid, _, _ = make_collection(engine, [1])
    with pytest.raises(ValueError, match="min_jaccard"):
        list(duplicates.iter_pairs(engine, cid, 12))


def test_simdb_pairs_unknown_collection(engine):
    with engine.connect() as conn, pytest.raises(Exception, match="no collection named"):
        conn.execute(text("SELECT * FROM simdb_pairs('no such thing')")).all()


def test_pairs_streamed_skewed_bucket(engine, monkeypatch):
    """One block value shared by many rows (a skewed bucket) and many exact duplicates."""
    monkeypatch.setattr(block_pairs, "CANDIDATE_LIMIT", 64)
    rng = np.random.default_rng(7)
    same_b0 = [(0xBEEF << 48) | int(x) for x in rng.integers(0, 2**48, size=150, dtype=np.uint64)]
    dups = [0x1111_2222_3333_4444] * 40
    fps = same_b0 + dups + [0x1111_2222_3333_4445]
    cid, name, keys = make_collection(engine, fps)
    got = list(duplicates.iter_pairs(engine, cid, 3, chunk_rows=16, batch=7))
    assert len(got) == len(set(got))
    assert set(got) == brute_pairs(fps, keys, 3)


def brute_clusters(fps, keys, k):
    parent = list(range(len(fps)))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b, _ in brute_pairs(fps, keys, k):
        ra, rb = find(keys.index(a)), find(keys.index(b))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    comps = {}
    for i in range(len(fps)):
        comps.setdefault(find(i), []).append(keys[i])
    return sorted(comps.values(), key=lambda c: keys.index(c[0]))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(0, 11))
def test_clusters_match_brute_force(engine, seed, k):
    rng = np.random.default_rng(seed)
    fps = families(rng, int(rng.integers(1, 6)), int(rng.integers(1, 6)), 2 if k <= 3 else 5)
    fps += [None, None] + [int(x) for x in rng.integers(0, 2**64, size=3, dtype=np.uint64)]
    fps = [fps[i] for i in rng.permutation(len(fps))]
    cid, _, keys = make_collection(engine, fps)
    expect = brute_clusters(fps, keys, k)
    got = list(duplicates.iter_clusters(engine, cid, k, batch=2))
    assert [c.keys for c in got] == [c for c in expect if len(c) > 1]
    assert all(c.representative == c.keys[0] and len(c) == c.size >= 2 for c in got)
    every = list(duplicates.iter_clusters(engine, cid, k, include_singletons=True, batch=3))
    assert [c.keys for c in every] == expect


def test_clusters_chain_and_representative(engine):
    # a chain 0-1-2-3 (consecutive within 1, ends 3 apart... and far from each other beyond k)
    base = 0xF0F0_F0F0_F0F0_F0F0
    chain = [base, base ^ 1, base ^ 3, base ^ 7, base ^ 15, base ^ 31]
    fps = [0x1234] + chain[::-1]  # representative is the earliest *added*, not the smallest fp
    cid, _, keys = make_collection(engine, fps)
    got = list(duplicates.iter_clusters(engine, cid, 1))
    assert [c.keys for c in got] == [keys[1:]]
    assert got[0].representative == "k1"


def test_abandoned_stream_returns_its_connections(engine):
    fps = [5, 5, 5, 7, 7, 0xFFFF_0000_0000_0000, 0xFFFF_0000_0000_0001]
    cid, _, _ = make_collection(engine, fps)
    it = duplicates.iter_pairs(engine, cid, batch=1, chunk_rows=1)
    assert next(it)
    it.close()
    assert engine.pool.checkedout() == 0
    it = duplicates.iter_clusters(engine, cid, include_singletons=True, batch=1)
    assert next(it)
    it.close()
    assert engine.pool.checkedout() == 0
    assert len(list(duplicates.iter_pairs(engine, cid))) == 10 + 1  # 5 and 7 are 1 bit apart


def test_radius_core_threads_agree_and_abandoning_is_prompt(monkeypatch):
    rng = np.random.default_rng(11)
    fps = np.array(families(rng, 40, 6, 5) + [int(x) for x in rng.integers(0, 2**64, 300, dtype=np.uint64)],
                   dtype=np.uint64)
    ids = np.arange(len(fps), dtype=np.int64)

    def collect(threads):
        return sorted((a, b, d) for x, y, z in radius_pairs.pairs_within(ids, fps, 9, threads=threads)
                      for a, b, d in zip(x.tolist(), y.tolist(), z.tolist()))

    one = collect(1)
    assert one and one == collect(3)
    # abandoning cancels the masks not yet started: count the comparisons that ran
    calls = []
    compare = radius_pairs._Block.compare
    monkeypatch.setattr(radius_pairs._Block, "compare", lambda self, mask: calls.append(mask) or compare(self, mask))
    radii = radius_pairs.choose_pair_radii(fps, 11)
    masks = sum(len(MASKS[t]) for t in radii)
    it = radius_pairs.pairs_within(ids, fps, 11, radii, threads=1)
    next(it)
    started = len(calls)
    it.close()
    assert masks > 100 and started < masks
    assert len(calls) <= started + 1  # at most the comparison already running finished after close()
