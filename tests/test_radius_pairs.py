"""simdb.core.radius_pairs without a database: the cost model on hand-computed histograms,
the candidate-limit piece sizing, and all pairs against a brute force written here."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdb.core import radius_pairs

# --------------------------------------------------------------------------- cost model


def test_candidate_counts_on_a_hand_computed_histogram():
    # Block 3 (the low 16 bits) holds the values 0, 0, 1, 3; blocks 0..2 are all 0.
    #   radius 0: the pair inside group 0                         -> 1
    #   radius 1: + groups 0~1 (2 x 1 pairs, mask 1) + 1~3 (mask 2) -> 1 + 2 + 1 = 4
    #   radius 2: + groups 0~3 (2 x 1 pairs, mask 3)               -> 6 = all C(4, 2) pairs
    # blocks 0..2: one group of 4 rows, C(4, 2) = 6 at every radius.
    fps = np.array([0, 0, 1, 3], dtype=np.uint64)
    assert radius_pairs.candidate_counts(fps) == [
        {-1: 0, 0: 6, 1: 6, 2: 6},
        {-1: 0, 0: 6, 1: 6, 2: 6},
        {-1: 0, 0: 6, 1: 6, 2: 6},
        {-1: 0, 0: 1, 1: 4, 2: 6},
    ]


def test_candidate_counts_reads_each_block_at_its_own_bits():
    # block 0 = bits 48..63: values 1, 1, 0 -> radius 0: 1 pair; radius 1: + 2 x 1 (mask 1) = 3
    # block 1 = bits 32..47: values 0, 0x8000, 0x8001 -> radius 0: 0; radius 1: 0~0x8000 (mask 0x8000)
    #                         and 0x8000~0x8001 (mask 1) = 2; radius 2: + 0~0x8001 (mask 0x8001) = 3
    fps = np.array([1 << 48, (1 << 48) | (0x8000 << 32), 0x8001 << 32], dtype=np.uint64)
    cost = radius_pairs.candidate_counts(fps)
    assert cost[0] == {-1: 0, 0: 1, 1: 3, 2: 3}
    assert cost[1] == {-1: 0, 0: 0, 1: 2, 2: 3}
    assert cost[2] == cost[3] == {-1: 0, 0: 3, 1: 3, 2: 3}


def _brute_cost(fps, i, t):
    shift = (48, 32, 16, 0)[i]
    vals = [(int(f) >> shift) & 0xFFFF for f in fps]
    if t < 0:
        return 0
    return sum(1 for a, b in itertools.combinations(vals, 2) if (a ^ b).bit_count() <= t)


@settings(max_examples=25)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=30), st.integers(0, 2**64 - 1), st.integers(0, 6))
def test_candidate_counts_equal_pair_counting(fps, base, copies):
    # mixing in near copies of one value gives buckets of several rows and neighbouring groups
    rows = fps + [base ^ (1 << (c * 9 % 64)) for c in range(copies)] + [base] * copies
    arr = np.array(rows, dtype=np.uint64)
    cost = radius_pairs.candidate_counts(arr)
    for i in range(4):
        assert cost[i] == {t: _brute_cost(rows, i, t) for t in (-1, 0, 1, 2)}


def _assignments(k):
    return [t for t in itertools.product(range(-1, 3), repeat=4) if sum(t) == k - 3]


@pytest.mark.parametrize("k", [3, 4, 6, 9, 11])
def test_choose_pair_radii_is_the_cheapest_exact_assignment(k):
    fps = np.array([0, 0, 1, 3, 0x10000, 0x30000, 1 << 40], dtype=np.uint64)
    cost = {t: sum(_brute_cost(fps, i, r) for i, r in enumerate(t)) for t in _assignments(k)}
    chosen = radius_pairs.choose_pair_radii(fps, k)
    assert chosen in cost and cost[chosen] == min(cost.values())


def test_choose_pair_radii_hand_example():
    # k = 3 (radii sum to 0) on values 0, 0, 1, 3 in block 3: the even (0, 0, 0, 0) costs
    # 6 + 6 + 6 + 1 = 19 candidates; radius 2 on block 3 and 0 on one other costs 6 + 1 = 7.
    fps = np.array([0, 0, 1, 3], dtype=np.uint64)
    chosen = radius_pairs.choose_pair_radii(fps, 3)
    assert chosen.count(-1) == 2 and chosen[3] == 0 and 2 in chosen
    # uniform data keeps the even assignment (ties never move away from it)
    assert radius_pairs.choose_pair_radii(np.array([0], dtype=np.uint64), 7) == (1, 1, 1, 1)
    assert radius_pairs.choose_pair_radii(np.array([0], dtype=np.uint64), 8) == (2, 1, 1, 1)


# --------------------------------------------------------------------------- pieces within the limit


def _all_run_pairs(starts, lens):
    return sorted((s + a, s + b) for s, n in zip(starts, lens) for a, b in itertools.combinations(range(n), 2))


@settings(max_examples=150)
@given(st.lists(st.integers(2, 12), max_size=8), st.integers(0, 20))  # callers pass runs of >= 2 rows
def test_expand_runs_pieces_stay_within_the_limit(lens, limit):
    starts, pos = [], 0
    for n in lens:
        starts.append(pos)
        pos += n + 1
    pieces = list(radius_pairs.expand_runs(np.array(starts, dtype=np.int64), np.array(lens, dtype=np.int64), limit))
    got = sorted((int(a), int(b)) for p, q in pieces for a, b in zip(p, q))
    assert got == _all_run_pairs(starts, lens)  # every pair exactly once
    longest_row = max([n - 1 for n in lens] + [0])
    for p, q in pieces:
        assert len(p) == len(q) and 0 < len(p) <= max(limit, longest_row)


def test_expand_runs_splits_a_huge_run_by_rows():
    # one run of 6 rows (15 pairs), limit 5; row r pairs with the 5 - r rows after it, and rows
    # are taken greedily while the piece stays within 5: row 0 (5), row 1 (4; + 3 would exceed),
    # rows 2..3 (3 + 2), row 4 (1)
    pieces = list(radius_pairs.expand_runs(np.array([10]), np.array([6]), 5))
    assert [len(p) for p, _ in pieces] == [5, 4, 5, 1]
    assert sorted(zip(*(np.concatenate(x).tolist() for x in zip(*pieces)))) == _all_run_pairs([10], [6])


def test_expand_runs_defaults_to_the_module_limit(monkeypatch):
    monkeypatch.setattr(radius_pairs, "CANDIDATE_LIMIT", 3)
    pieces = list(radius_pairs.expand_runs(np.array([0, 3, 6]), np.array([3, 3, 3])))
    assert [len(p) for p, _ in pieces] == [3, 3, 3]


def test_candidate_limit_bounds_memory():
    # pieces hold a few int64/uint64 arrays of CANDIDATE_LIMIT entries: tens of MB at most, and
    # large enough that numpy's per-call overhead stays small
    assert 1 << 16 <= radius_pairs.CANDIDATE_LIMIT <= 1 << 20


@settings(max_examples=150)
@given(st.lists(st.tuples(st.integers(1, 9), st.integers(1, 9)), min_size=1, max_size=6), st.integers(1, 20))
def test_expand_cross_pieces_stay_within_the_limit(sizes, limit):
    na = np.array([a for a, _ in sizes], dtype=np.int64)
    nb = np.array([b for _, b in sizes], dtype=np.int64)
    sa = np.cumsum(na) - na
    sb = 1000 + np.cumsum(nb) - nb
    want = sorted((int(s) + i, int(t) + j) for s, a, t, b in zip(sa, na, sb, nb) for i in range(a) for j in range(b))
    mp = pytest.MonkeyPatch()
    mp.setattr(radius_pairs, "CANDIDATE_LIMIT", limit)
    try:
        pieces = list(radius_pairs._expand_cross(sa, na, sb, nb))
    finally:
        mp.undo()
    got = sorted((int(a), int(b)) for p, q in pieces for a, b in zip(p, q))
    assert got == want
    for p, _ in pieces:
        assert 0 < len(p) <= max(limit, int(nb.max()))


# --------------------------------------------------------------------------- all pairs vs brute force


def brute_pairs(fps, k):
    """Every pair (i, j), i < j, within Hamming distance k, written the obvious way."""
    fps = [int(f) for f in fps]
    return sorted(
        (i, j, (fps[i] ^ fps[j]).bit_count())
        for i in range(len(fps)) for j in range(i + 1, len(fps))
        if (fps[i] ^ fps[j]).bit_count() <= k
    )


def _pairs(fps, k, radii=None, threads=1):
    ids = np.arange(len(fps), dtype=np.int64)
    return sorted(
        (a, b, d)
        for x, y, z in radius_pairs.pairs_within(ids, np.array(fps, dtype=np.uint64), k, radii, threads=threads)
        for a, b, d in zip(x.tolist(), y.tolist(), z.tolist())
    )


def _family(rng_vals, center, spread):
    v = center
    for b in rng_vals[:spread]:
        v ^= 1 << b
    return v


@settings(max_examples=12)  # each call sweeps 65,536 groups per mask: about a second
@given(
    st.integers(0, 2**64 - 1),
    st.lists(st.lists(st.integers(0, 63), max_size=6), min_size=1, max_size=25),
    st.lists(st.integers(0, 2**64 - 1), max_size=8),
    st.sampled_from([4, 7, 11]),
    st.integers(1, 40),
)
def test_pairs_within_tiny_limit_matches_brute_force(center, flips, extra, k, limit):
    fps = [_family(f, center, len(f)) for f in flips] + extra
    mp = pytest.MonkeyPatch()
    mp.setattr(radius_pairs, "CANDIDATE_LIMIT", limit)
    try:
        got = _pairs(fps, k)
    finally:
        mp.undo()
    assert got == brute_pairs(fps, k)


@pytest.mark.parametrize("k", [4, 11])
def test_every_exact_assignment_finds_the_same_pairs(k):
    rng = np.random.default_rng(k)
    center = int(rng.integers(0, 2**63))
    fps = [center ^ int(sum(1 << int(b) for b in rng.choice(64, int(rng.integers(0, 7)), replace=False)))
           for _ in range(25)]
    want = brute_pairs(fps, k)
    assert want
    for radii in _assignments(k):
        assert _pairs(fps, k, radii) == want, radii


def test_fewer_than_two_rows_and_bad_radii():
    assert _pairs([], 5) == [] and _pairs([123], 5) == []
    with pytest.raises(ValueError, match="exact search"):
        _pairs([1, 2], 5, (0, 0, 0, 0))
    with pytest.raises(ValueError, match="exact search"):
        _pairs([1, 2], 5, (1, 1, 0))
    with pytest.raises(ValueError, match="exact search"):
        _pairs([1, 2], 5, (3, -1, 0, 0))
