"""Shingle sets (simdb.core.sketch.shingles): pinned, deterministic."""

from __future__ import annotations

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from simdb.core.sketch.shingles import SCHEME, hash32, is_mostly_cjk, shingle_strings, shingles


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
