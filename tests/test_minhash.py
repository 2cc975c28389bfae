"""simdb.minhash against a from-scratch reference of its documented scheme (Python ints, no numpy)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from simdb.minhash import MinHasher, choose_bands, estimate, lsh_probability

M64 = (1 << 64) - 1


def ref_signature(shingles, num_perm, seed):
    """h_i(x) = ((a_i * x + b_i) mod 2**64) >> 32, a_i = xxh64("a<i>", seed) | 1, b_i = xxh64("b<i>", seed)."""
    if not shingles:
        return None
    out = []
    for i in range(num_perm):
        a = xxhash.xxh64_intdigest(f"a{i}".encode(), seed) | 1
        b = xxhash.xxh64_intdigest(f"b{i}".encode(), seed)
        out.append(min((((a * (v % (1 << 32)) + b) & M64) >> 32) for v in shingles))
    return out


def ref_band_keys(sig, bands, rows):
    keys = []
    for j in range(bands):
        raw = struct.pack(f"<{rows}I", *sig[j * rows : (j + 1) * rows])
        v = xxhash.xxh32_intdigest(raw, j)
        keys.append(v - (1 << 32) if v >= 1 << 31 else v)
    return keys


INT4 = st.integers(-(2**31), 2**31 - 1)


@settings(max_examples=60)
@given(st.lists(st.lists(INT4, max_size=40), max_size=8), st.integers(1, 50), st.integers(0, 2**64 - 1),
       st.integers(1, 30))
def test_signatures_and_band_keys_equal_the_reference(sets, num_perm, seed, chunk):
    rows = max(1, num_perm // 4)
    bands = num_perm // rows
    mh = MinHasher(num_perm=num_perm, bands=bands, rows=rows, seed=seed)
    sigs = mh.signatures(sets, chunk=chunk)
    assert len(sigs) == len(sets)
    for s, sig in zip(sets, sigs):
        want = ref_signature(s, num_perm, seed)
        if want is None:
            assert sig is None and mh.signature(s) is None and mh.keys_for(s) == []
            continue
        assert sig.dtype == np.uint32 and sig.tolist() == want
        assert mh.signature(s).tolist() == want
        assert mh.band_keys(sig) == mh.keys_for(s) == ref_band_keys(want, bands, rows)


def test_pinned_signature_of_a_small_set():
    mh = MinHasher(num_perm=4, bands=2, rows=2, seed=1)
    want = ref_signature([1, -1, 2**31 - 1], 4, 1)
    assert mh.signature([1, -1, 2**31 - 1]).tolist() == want
    assert mh.signature([1, -1, 2**31 - 1, 1]).tolist() == want  # repeats change nothing
    assert MinHasher(num_perm=4, bands=2, rows=2, seed=2).signature([1]).tolist() != ref_signature([1], 4, 1)


def test_estimate_is_the_fraction_of_equal_values():
    assert estimate(np.array([1, 2, 3, 4]), np.array([1, 0, 3, 0])) == 0.5
    assert estimate([7, 7, 7], [7, 7, 8]) == pytest.approx(2 / 3)
    assert estimate([1], [2]) == 0.0
    with pytest.raises(ValueError, match="length"):
        estimate([1, 2], [1])


@pytest.mark.parametrize("j, bands, rows, p", [
    (0.5, 2, 2, 1 - (1 - 0.25) ** 2),  # 0.4375
    (0.5, 1, 1, 0.5),
    (0.9, 20, 5, 1 - (1 - 0.9**5) ** 20),
    (0.0, 5, 3, 0.0),
    (1.0, 5, 3, 1.0),
])
def test_lsh_probability_values(j, bands, rows, p):
    assert lsh_probability(j, bands, rows) == pytest.approx(p, abs=1e-15)


@pytest.mark.parametrize("num_perm, threshold, recall", [(128, 0.8, 0.995), (100, 0.5, 0.9), (16, 0.95, 0.99),
                                                         (10, 0.1, 0.999999), (1, 0.5, 0.99)])
def test_choose_bands_is_the_steepest_split_meeting_the_recall(num_perm, threshold, recall):
    ok = [(num_perm // r, r) for r in range(1, num_perm + 1)
          if 1 - (1 - threshold**r) ** (num_perm // r) >= recall]
    want = max(ok, key=lambda br: br[1]) if ok else (num_perm, 1)
    assert choose_bands(num_perm, threshold, recall) == want


def test_config_validation():
    for bad in (dict(num_perm=0), dict(bands=0), dict(rows=0), dict(num_perm=True), dict(rows=2.0)):
        with pytest.raises(ValueError):
            MinHasher(**bad)
    with pytest.raises(ValueError, match="bands\\*rows"):
        MinHasher(num_perm=10, bands=3, rows=4)
    assert MinHasher(num_perm=12, bands=3, rows=4).num_perm == 12  # exactly num_perm is allowed
    mh = MinHasher(num_perm=12, bands=3, rows=4, seed=9)
    assert mh.to_dict() == {"num_perm": 12, "bands": 3, "rows": 4, "seed": 9}
    assert MinHasher.from_dict({"num_perm": 12, "bands": 3, "rows": 4, "seed": 9, "other": 1}) == mh
    assert MinHasher.from_dict({}) == MinHasher()


def test_choose_bands_edges():
    # the largest rows (a single band of all num_perm values) is considered
    assert choose_bands(4, 0.99, 0.9) == (1, 4)  # 0.99**4 = 0.96 >= 0.9
    # a probability exactly equal to the target recall qualifies: 0.5**2 = 0.25
    assert choose_bands(2, 0.5, 0.25) == (1, 2)
    assert choose_bands(2, 0.5, 0.9) == (2, 1)  # nothing qualifies: the most permissive split


def test_defaults_are_pinned_and_any_iterable_works():
    mh = MinHasher()
    assert mh.to_dict() == {"num_perm": 100, "bands": 20, "rows": 5, "seed": 1}
    assert repr(mh) == "MinHasher(num_perm=100, bands=20, rows=5, seed=1)"
    sets = [[1, 2, 3], [], [4]]
    got = mh.signatures(iter(sets))
    assert [None if s is None else s.tolist() for s in got] == [ref_signature(s, 100, 1) for s in sets]
