"""Shingle sets (simdb.shingles) and MinHash banding (simdb.minhash): pinned, deterministic."""

from __future__ import annotations

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from simdb.jaccard import jaccard
from simdb.minhash import MinHasher, choose_bands, estimate, lsh_probability
from simdb.shingles import SCHEME, hash32, is_mostly_cjk, shingle_strings, shingles


def test_scheme_is_pinned():
    assert SCHEME == "w3c5-xxh32-v1"
    # xxh32 seed 0 of UTF-8, as signed int4: fixed values, never to change silently
    assert hash32("the quick brown") == _signed(xxhash.xxh32_intdigest(b"the quick brown", 0))
    assert shingles("The quick brown fox") == sorted(
        {hash32("the quick brown"), hash32("quick brown fox")}
    )


def _signed(v):
    return v - 2**32 if v >= 2**31 else v


def test_word_three_shingles_keep_stopwords_and_order():
    assert shingle_strings("The cat, the hat; and THE bat.") == [
        "the cat the",
        "cat the hat",
        "the hat and",
        "hat and the",
        "and the bat",
    ]
    # word order matters
    assert shingles("a b c d") != shingles("d c b a")


def test_short_and_empty_texts():
    assert shingle_strings("") == []
    assert shingle_strings("  ,;! ") == []
    assert shingle_strings("hello") == ["hello"]
    assert shingle_strings("hello world") == ["hello world"]
    assert shingle_strings("你好") == ["你好"]
    assert shingles("") == []


def test_cjk_char_five_shingles_casefolded_whitespace_collapsed():
    text = "我们今天  去\n公园ＡＢ"
    assert is_mostly_cjk(text)
    s = shingle_strings(text)
    assert s[0] == "我们今天 "
    assert all(len(x) == 5 for x in s)
    assert "公园ab"[-4:] in "".join(s)  # NFKC + casefold: fullwidth AB -> ab
    assert shingle_strings("我们今天去公园") == ["我们今天去", "们今天去公", "今天去公园"]


def test_mostly_cjk_decision():
    assert not is_mostly_cjk("Python 3.12 中文")  # 8 latin/digit chars vs 2 CJK
    assert is_mostly_cjk("这是一个测试 test")
    assert not is_mostly_cjk("")
    assert is_mostly_cjk("日本語のテキスト")
    assert is_mostly_cjk("한국어 텍스트입니다")


def test_sorted_unique_int4():
    s = shingles("to be or not to be that is the question to be or not to be " * 3)
    assert s == sorted(set(s))
    assert all(-(2**31) <= v < 2**31 for v in s)


@given(st.text(max_size=300))
@settings(max_examples=200, deadline=None)
def test_shingles_properties(text):
    s = shingles(text)
    assert s == sorted(set(s))
    assert all(isinstance(v, int) and -(2**31) <= v < 2**31 for v in s)
    assert s == shingles(text)  # deterministic
    assert (len(s) == 0) == (len(shingle_strings(text)) == 0)


def test_bad_input():
    with pytest.raises(TypeError, match="text"):
        shingles(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="text"):
        shingles(None)  # type: ignore[arg-type]


# ------------------------------------------------------------------ MinHash
def test_minhash_deterministic_and_estimates():
    mh = MinHasher(num_perm=128, bands=32, rows=4)
    a = list(range(0, 200))
    b = list(range(40, 240))  # J = 160 / 240
    sa, sb = mh.signature(a), mh.signature(b)
    assert sa.dtype == np.uint32 and len(sa) == 128
    assert np.array_equal(sa, MinHasher(num_perm=128, bands=32, rows=4).signature(a))
    assert abs(estimate(sa, sb) - 160 / 240) < 0.15
    assert estimate(sa, sa) == 1.0
    assert mh.signature([]) is None
    assert mh.band_keys(None) == []
    keys = mh.band_keys(sa)
    assert len(keys) == 32 and all(-(2**31) <= k < 2**31 for k in keys)
    assert keys == mh.keys_for(a)


def test_minhash_batch_equals_single():
    mh = MinHasher(num_perm=64, bands=16, rows=4)
    sets = [shingles(t) for t in ["a b c d e", "", "x y z", "one two three four five six"]]
    batch = mh.signatures(sets, chunk=3)
    for s, sig in zip(sets, batch):
        one = mh.signature(s)
        assert (sig is None and one is None) or np.array_equal(sig, one)


def test_minhash_config_validation_and_roundtrip():
    with pytest.raises(ValueError, match="bands"):
        MinHasher(num_perm=16, bands=8, rows=4)
    with pytest.raises(ValueError, match="num_perm"):
        MinHasher(num_perm=0)
    mh = MinHasher(num_perm=100, bands=20, rows=5, seed=7)
    assert MinHasher.from_dict(mh.to_dict()) == mh
    assert hash(mh) == hash(MinHasher(num_perm=100, bands=20, rows=5, seed=7))


def test_lsh_probability_and_choice():
    assert lsh_probability(1.0, 32, 4) == 1.0
    assert lsh_probability(0.0, 32, 4) == 0.0
    b, r = choose_bands(128, 0.8)
    assert b * r <= 128 and lsh_probability(0.8, b, r) >= 0.995


@given(st.sets(st.integers(-(2**31), 2**31 - 1), max_size=60), st.sets(st.integers(-(2**31), 2**31 - 1), max_size=60))
@settings(max_examples=100, deadline=None)
def test_python_jaccard_is_set_jaccard(a, b):
    j = jaccard(sorted(a), sorted(b))
    if not a and not b:
        assert j is None
    else:
        assert j == len(a & b) / len(a | b)
