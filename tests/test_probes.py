"""Generalized pigeonhole probes (:mod:`simdb.core.bits`): radii, probe counts, exactness (pure Python)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdb.core import bits
from simdb.core.bits import blocks, hamming, to_signed
from simdb.core.validate import check_k

EXPECTED_PROBES = {0: 1, 1: 2, 2: 3, 3: 4, 4: 20, 5: 36, 6: 52, 7: 68, 8: 188, 9: 308, 10: 428, 11: 548}


@pytest.mark.parametrize("k", range(12))
def test_even_radii_sum_and_counts(k):
    r = bits.even_radii(k)
    assert len(r) == 4 and sum(r) == k - 3
    assert all(-1 <= t <= 2 for t in r)
    assert max(r) - min(r) <= 1 or k < 3
    assert bits.probe_count(r) == EXPECTED_PROBES[k]
    assert sum(len(p) for p in bits.probes(0x0123456789ABCDEF, k)) == EXPECTED_PROBES[k]


@pytest.mark.parametrize("k", range(12))
def test_radii_options_all_exact(k):
    opts = bits.radii_options(k)
    assert bits.even_radii(k) in opts
    assert all(sum(o) == k - 3 and all(-1 <= t <= 2 for t in o) for o in opts)


@pytest.mark.parametrize("bad", [-1, 12, 64])
def test_check_k_range(bad):
    """The blocks answer k up to MAX_K: the one check of k says so, and the block functions (given a
    checked k) fail plainly on any other."""
    with pytest.raises(ValueError) as e:
        check_k(bad, default=None)
    if bad > 11:
        assert f"up to {bits.MAX_K}" in str(e.value) and "simdb_hamming" in str(e.value)
    with pytest.raises(KeyError):
        bits.even_radii(bad)
    with pytest.raises(KeyError):
        bits.probes(0, bad)


@pytest.mark.parametrize("bad", [True, 3.0, "3", None])
def test_check_k_type(bad):
    with pytest.raises(TypeError):
        check_k(bad, default=None)


def test_ball():
    assert bits.ball(5, -1) == []
    assert bits.ball(5, 0) == [5]
    b1 = bits.ball(0xFFFF, 1)
    assert len(b1) == 17 == len(set(b1))
    b2 = bits.ball(0x1234, 2)
    assert len(b2) == 137 == len(set(b2))
    assert all(bin(v ^ 0x1234).count("1") <= 2 for v in b2)


def _found(q: int, x: int, k: int, radii) -> bool:
    ps = bits.probes(q, k, radii)
    xb = blocks(x)
    return any(xb[i] in set(ps[i]) for i in range(4))


def _flip(x: int, n: int, rng: random.Random) -> int:
    for b in rng.sample(range(64), n):
        x ^= 1 << b
    return x


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**64 - 1), st.integers(0, 11), st.randoms(use_true_random=False))
def test_every_row_within_k_is_probed(q, k, rng):
    """Pigeonhole: any fingerprint within distance k shares a probed block value,
    for the even radii and for every other exact assignment."""
    opts = bits.radii_options(k)
    for _ in range(20):
        x = _flip(q, rng.randint(0, k), rng)
        assert hamming(q, x) <= k
        assert _found(q, x, k, None)
        assert _found(q, x, k, rng.choice(opts))


def test_choose_radii_skips_heavy_bucket():
    q = 0xAAAA_BBBB_CCCC_DDDD
    heavy = [{0xAAAA: 100000.0}, {}, {}, {}]
    r = bits.choose_radii(q, 3, heavy, default_size=15)
    assert r[0] == -1 and sum(r) == 0
    # without heavy values: the even spread
    assert bits.choose_radii(q, 3, [{}, {}, {}, {}], default_size=15) == (0, 0, 0, 0)
    assert bits.choose_radii(q, 6, None) == bits.even_radii(6)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**64 - 1), st.integers(0, 11), st.randoms(use_true_random=False))
def test_chosen_radii_stay_exact(q, k, rng):
    qb = blocks(q)
    sizes = [{qb[i] ^ rng.choice([0, 1, 3]): float(rng.randint(1, 10**6))} for i in range(4)]
    r = bits.choose_radii(q, k, sizes, default_size=15)
    assert r in bits.radii_options(k)
    for _ in range(20):
        x = _flip(q, rng.randint(0, k), rng)
        assert _found(q, x, k, r)


def test_probes_rejects_inexact_radii():
    with pytest.raises(ValueError):
        bits.probes(0, 3, (0, 0, 0, -1))


def _ref_cost(q, radii, sizes, default, descent):
    """Expected candidates of an assignment, the obvious way: every probed value's bucket size
    (``default`` when not listed) plus ``descent`` per probe."""
    total = 0.0
    for i, t in enumerate(radii):
        qb = (q >> (48 - 16 * i)) & 0xFFFF
        for v in _within(qb, t):
            total += sizes[i].get(v, default) + descent
    return total


def _within(value, t):
    if t < 0:
        return []
    out = [value]
    if t >= 1:
        out += [value ^ (1 << a) for a in range(16)]
    if t >= 2:
        out += [value ^ (1 << a) ^ (1 << b) for a in range(16) for b in range(a + 1, 16)]
    return out


def test_choose_radii_hand_example():
    # block 0's own value holds 1000 rows, every other value 1: probing block 0 costs 1000+,
    # so k=3 (radii sum to 0) skips it: (-1, 0, 0, 1) costs 1 + 1 + 17 + 2 * 19 = 57
    q = 0x1234_5678_9ABC_DEF0
    sizes = [{0x1234: 1000}, {}, {}, {}]
    assert bits.choose_radii(q, 3, sizes) == (-1, 0, 0, 1)
    assert _ref_cost(q, (-1, 0, 0, 1), sizes, 1.0, 2.0) == 57
    assert bits.choose_radii(q, 3, [{0x9999: 1000}, {}, {}, {}]) == bits.even_radii(3)  # not near q
    assert bits.choose_radii(q, 5, None) == bits.choose_radii(q, 5, [{}, {}, {}, {}]) == bits.even_radii(5)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**64 - 1), st.integers(0, 11), st.randoms(use_true_random=False),
       st.sampled_from([0.0, 0.5, 1.0, 3.0]), st.sampled_from([0.0, 2.0, 10.0]))
def test_choose_radii_is_the_cheapest_assignment(q, k, rng, default, descent):
    sizes = []
    for i in range(4):
        qb = (q >> (48 - 16 * i)) & 0xFFFF
        near = _within(qb, 2)
        # the query's own value often listed: it is counted once, at radius 0, however large the radius
        sizes.append({rng.choice([qb, qb, rng.choice(near)]): rng.choice([0, 1, 5, 40, 300])
                      for _ in range(rng.randint(0, 6))})
    chosen = bits.choose_radii(q, k, sizes, default_size=default, descent_cost=descent)
    assert chosen in bits.radii_options(k)
    best = min(_ref_cost(q, t, sizes, default, descent) for t in bits.radii_options(k))
    assert _ref_cost(q, chosen, sizes, default, descent) <= best + 1e-6


def test_choose_radii_counts_each_bucket_once():
    # found by mutation testing: counting the radius-0 bucket again at radius 1 picks (1, 2, 1, 1)
    q = 0x4155_D7EF_28DD_37EB
    sizes = [{16725: 5}, {55279: 0}, {10461: 40, 10965: 0}, {14315: 1, 14059: 1, 30443: 1}]
    chosen = bits.choose_radii(q, 8, sizes, default_size=1.0, descent_cost=0.0)
    costs = {t: _ref_cost(q, t, sizes, 1.0, 0.0) for t in bits.radii_options(8)}
    assert costs[chosen] == min(costs.values()) < costs[(1, 2, 1, 1)]


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_radius_zero_probes_are_the_fingerprints_blocks(fp):
    """At radius 0 in every block (k = 3) each probe list is exactly that block of ``bits.blocks``, and
    a :class:`BlockQuery` carries the same blocks and the stored (signed) form."""
    assert bits.probes(fp, 3, (0, 0, 0, 0)) == tuple([b] for b in blocks(fp))
    query = bits.block_query(fp, 3)
    assert query == (to_signed(fp), blocks(fp), bits.probes(fp, 3))
