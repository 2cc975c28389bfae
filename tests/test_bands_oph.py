"""Band keys by one-permutation hashing with optimal densification (simdb.core.sketch.bands), pure."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdb.core.sketch import bands as B
from simdb.core.sketch import chars as SC

BINS = B.BANDS * B.ROWS


def _reference(values: list[int], bins: int) -> list[int]:
    """Plain-Python OPH + optimal densification of one set: what oph_values must compute."""
    mask = (1 << 64) - 1
    hs = [int(B._hash64(np.array([v % (1 << 32)], dtype=np.uint64))[0]) for v in set(values)]
    mins: dict[int, int] = {}
    for h in hs:
        b = ((h >> 32) * bins) >> 32
        mins[b] = min(mins.get(b, mask), h)
    table = B._probe_table(bins)
    out = []
    for i in range(bins):
        if i in mins:
            out.append(mins[i])
            continue
        donor = next((int(d) for d in table[i] if int(d) in mins), None)
        if donor is None:  # the fallback: the next non-empty bin, in order
            full = sorted(mins)
            donor = next((b for b in full if b > i), full[0])
        out.append(mins[donor])
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(-(1 << 31), (1 << 31) - 1), min_size=1, max_size=150), min_size=1, max_size=6))
def test_batched_values_equal_the_plain_python_reference(sets):
    x = np.concatenate([np.asarray(s, dtype=np.int64) for s in sets]).astype(np.int32).view(np.uint32).astype(np.uint64)
    owner = np.repeat(np.arange(len(sets)), [len(s) for s in sets])
    got = B.oph_values(x, owner, len(sets), BINS)
    for row, s in zip(got, sets):
        assert row.tolist() == _reference(s, BINS)


def test_a_set_of_one_value_fills_every_bin_with_it():
    got = B.oph_values(np.array([12345], dtype=np.uint64), np.zeros(1, dtype=np.int64), 1, BINS)
    assert len(set(got[0].tolist())) == 1


def test_probe_tables_never_name_the_bin_itself():
    table = B._probe_table(BINS)
    assert table.shape == (BINS, B.PROBES) and table.min() >= 0 and table.max() < BINS
    assert not (table == np.arange(BINS)[:, None]).any()


def _pair(rng: np.random.Generator, n: int, s: float) -> tuple[np.ndarray, np.ndarray]:
    """Two sets of ``n`` distinct int4 values sharing round(2ns/(1+s)) (Jaccard about ``s``)."""
    shared = min(n, round(2 * n * s / (1 + s)))
    vals = rng.choice(1 << 32, size=2 * n - shared, replace=False).astype(np.uint32).view(np.int32)
    return vals[:n], np.concatenate([vals[:shared], vals[n:]])


def _measured(seed: int, n: int, s: float, pairs: int) -> tuple[float, float, float]:
    """(pairs sharing a band key, the S-curve's expectation at each pair's brute-force Jaccard,
    its binomial variance) over ``pairs`` random pairs."""
    rng = np.random.default_rng(seed)
    made = [_pair(rng, n, s) for _ in range(pairs)]
    ka = B.band_keys_many([a for a, _ in made])
    kb = B.band_keys_many([b for _, b in made])
    found = expected = var = 0.0
    for (a, b), x, y in zip(made, ka, kb):
        sa, sb = set(a.tolist()), set(b.tolist())
        p = B.s_curve(len(sa & sb) / len(sa | sb))  # brute-force Jaccard of the pair
        expected += p
        var += p * (1 - p)
        found += bool(np.intersect1d(x, y).size)
    return found, expected, var


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(12, 600), st.floats(0.8, 0.95))
def test_rule_pairs_share_a_band_as_the_s_curve_says(seed, n, s):
    """Pairs at Jaccard >= 0.8 (synthetic sets of every size, short ones with most bins
    densified) share a band key at least as often as 1 - (1 - J^r)^b predicts, less 4 sd."""
    found, expected, var = _measured(seed, n, s, 300)
    assert found >= expected - 4 * var**0.5 - 1


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(30, 600), st.sampled_from([0.3, 0.5, 0.6]))
def test_dissimilar_pairs_share_a_band_no_more_than_the_s_curve_says(seed, n, s):
    """The other side of the S-curve: below the rule, no more candidates than predicted (+ 4 sd)."""
    found, expected, var = _measured(seed, n, s, 300)
    assert found <= expected + 4 * var**0.5 + 1


def test_unknown_scheme_is_refused():
    for retired in ("minhash-b14r5-v1", "oph-b14r5-v2", "minhash-v9"):
        with pytest.raises(ValueError, match=retired):
            B.band_keys([1, 2], retired)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(alphabet="abcde fghij中文字", max_size=300), min_size=1, max_size=8), st.booleans())
def test_keys_from_the_sketch_pass_equal_the_full_sets_keys(texts, long):
    """A load makes the keys from the (not deduplicated) gram blocks its sketches hash, even for a
    text longer than a block (cut in blocks): the keys of the full shingle sets."""
    if long:
        texts = [*texts, "abcdefghij " * (SC.BLOCK_CHARS // 8)]
    hook = B.BlockBandKeys(len(texts))
    SC.grouped_sketches(texts, 16, hook)
    for got, w in zip(hook.keys(), B.text_band_keys(texts)):
        assert (got is None) == (w is None)
        assert got is None or np.array_equal(got, w)
