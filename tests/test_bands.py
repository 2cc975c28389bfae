"""simdb.core.sketch.bands: LSH band keys of shingle sets (issue 26), pure; no database."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdb.core.sketch import bands as B
from simdb.errors import InvalidArgumentError

int4 = st.integers(-(1 << 31), (1 << 31) - 1)
sets = st.lists(int4, min_size=1, max_size=300)


@settings(max_examples=60, deadline=None)
@given(sets, st.sampled_from(B.SCHEMES))
def test_keys_deterministic_and_of_the_set_only(values, scheme):
    """Same set -> same keys, whatever the order and repetitions (a set, not a sequence)."""
    keys = B.band_keys(values, scheme)
    assert keys is not None and keys.dtype == np.int32 and keys.shape == (B.BANDS,)
    shuffled = list(reversed(values)) + values[: len(values) // 2]
    assert np.array_equal(B.band_keys(shuffled, scheme), keys)
    assert np.array_equal(B.band_keys(np.asarray(values, dtype=np.int64), scheme), keys)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.lists(st.one_of(st.none(), st.integers(0, 40), st.integers(4000, 9000)), max_size=8),
       st.sampled_from(B.SCHEMES))
def test_batch_equals_one_at_a_time(seed, sizes, scheme):
    """band_keys_many blocks sets together (and long ones apart): the same keys as one by one."""
    rng = np.random.default_rng(seed)
    batch = [None if n is None else rng.integers(-(1 << 31), 1 << 31, size=n).astype(np.int32) for n in sizes]
    got = B.band_keys_many(batch, scheme)
    for s, k in zip(batch, got):
        want = B.band_keys(s, scheme) if s is not None and len(s) else None
        assert (k is None) == (want is None)
        if k is not None:
            assert np.array_equal(k, want)


def test_empty_set_has_no_keys():
    assert B.band_keys([]) is None
    assert B.band_keys_many([None, [], [5]])[:2] == [None, None]


def test_values_outside_int4_are_refused():
    with pytest.raises(InvalidArgumentError, match="32-bit"):
        B.band_keys([1 << 31])


def _pair(rng, n: int, s: float) -> tuple[np.ndarray, np.ndarray]:
    """Two random sets of n values each with Jaccard exactly s (n shared * ... rounded)."""
    shared = round(2 * n * s / (1 + s))
    vals = rng.choice(np.arange(-(1 << 31), (1 << 31) - 1, 7919, dtype=np.int64), size=2 * n - shared, replace=False)
    a = vals[:n]
    b = np.concatenate([vals[:shared], vals[n:]])
    return a.astype(np.int32), b.astype(np.int32)


@pytest.mark.parametrize("s", [0.3, 0.6, 0.8, 0.9])
def test_band_collision_rate_is_s_to_the_r(s):
    """Measured on random sets: a band matches with probability J^r, as the S-curve assumes
    (each MinHash value agrees with probability J; 600 pairs x 14 bands, fixed seed). One-
    permutation hashing samples the r values of a band without replacement, so on sets of a few
    dozen values a band matches a little less often (the S-curve itself is checked at every size in
    tests/test_bands_oph.py); here the sets are large enough for the formula."""
    rng = np.random.default_rng(26)
    n = 400
    hits = total = 0
    want = 0.0
    for _ in range(600):
        a, b = _pair(rng, n, s)
        j = len(set(a.tolist()) & set(b.tolist())) / len(set(a.tolist()) | set(b.tolist()))
        assert abs(j - s) < 0.02
        ka, kb = B.band_keys(a), B.band_keys(b)
        hits += int((ka == kb).sum())
        total += B.BANDS
        want += B.BANDS * j**B.ROWS
    rate, want = hits / total, want / total
    sd = (want * (1 - want) / total) ** 0.5
    assert abs(rate - want) < 5 * sd + 0.005, (rate, want)


def test_unrelated_sets_share_no_key():
    """Disjoint sets: a shared key would be a 2^-32 accident per pair of keys."""
    rng = np.random.default_rng(7)
    keys = B.band_keys_many([rng.integers(-(1 << 31), 1 << 31, size=50).astype(np.int32) for _ in range(2000)])
    flat = np.concatenate([k for k in keys if k is not None])
    assert len(np.unique(flat)) == len(flat)


def test_s_curve():
    assert B.s_curve(0.8) >= 0.995
    assert B.s_curve(0.05) < 1e-5
    assert B.s_curve(1.0) == 1.0 and B.s_curve(0.0) == 0.0
    with pytest.raises(InvalidArgumentError):
        B.s_curve(1.5)


def test_keys_as_int4_array_text():
    assert B.band_keys_text(None) is None
    assert B.band_keys_text(np.array([1, -2], dtype=np.int32)) == "{1,-2}"


def test_s_curve_of_two_shared_keys():
    """Scheme v3's candidates share two of the 14 keys: 1 - P(none) - P(exactly one) of a binomial."""
    for s in (0.3, 0.75, 0.8, 0.85, 0.9):
        p = s**B.ROWS
        none, one = (1 - p) ** B.BANDS, B.BANDS * p * (1 - p) ** (B.BANDS - 1)
        assert B.s_curve(s, shared=2) == pytest.approx(1 - none - one)
        assert B.s_curve(s, shared=1) == pytest.approx(B.s_curve(s)) and B.s_curve(s, shared=2) < B.s_curve(s)
    assert 0.96 < B.s_curve(0.8, shared=2) < 0.98 and B.s_curve(0.9, shared=2) > 0.9999
    assert B.s_curve(0.1, shared=2) < 1e-8 < B.s_curve(0.1)
