"""The character-gram scheme of new verified collections (simdb.core.sketch.chars) against a plain-Python
reference written from the rule's statement, pinned values, and its place in simdb.core.sketch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdb.core import sketch as S
from simdb.core.sketch import chars as C
from simdb.errors import InvalidTypeError

MASK = (1 << 64) - 1
MUL = [0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63]
MUL_LEN = 0xD6E8FEB86659FD93


def fmix64(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & MASK
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & MASK
    return x ^ (x >> 33)


def is_wide(c: str) -> bool:
    """Han / kana / Hangul / bopomofo, read from the documented ranges one character at a time."""
    spec, i = S._tok.TOKEN_CJK_RANGES, 0
    while i < len(spec):
        lo = hi = spec[i]
        if i + 2 < len(spec) and spec[i + 1] == "-":
            hi, i = spec[i + 2], i + 3
        else:
            i += 1
        if lo <= c <= hi:
            return True
    return False


def reference_grams(text: str) -> list[str]:
    """From the statement: NFKC + casefold, keep the tokens' characters, then from each character
    the shortest run of width >= 4 (wide characters 2); a text narrower than 4 is one gram."""
    s = "".join(S.tokens(text))  # NFKC + casefold, the characters of the token pattern's tokens
    grams = []
    for i in range(len(s)):
        width, j = 0.0, i
        while j < len(s) and width < C.GRAM_CHARS:
            width += C.WIDE_WIDTH if is_wide(s[j]) else 1
            j += 1
        if width >= C.GRAM_CHARS:
            grams.append(s[i:j])
    if s and not grams:
        grams = [s]
    return grams


def reference_set(text: str) -> list[int]:
    out = set()
    for g in reference_grams(text):
        h = len(g) * MUL_LEN
        for o, ch in enumerate(g):
            h += ord(ch) * MUL[o]
        v = fmix64(h & MASK) >> 32
        out.add(v - (1 << 32) if v >= 1 << 31 else v)
    return sorted(out)


WORDS = ["the", "cat", "Sat", "on", "mat", "foo_bar", "naïve", "Ünïcode", "x1", "2024", "ＡＢＣ", "don't", "Straße"]
CJK = list("中文字词语句数据库") + ["ｶﾅ", "한국", "ひらがな", "𠀀"]
PIECES = st.sampled_from(WORDS + CJK + [" ", " ", ", ", ". ", "\n", "_", "—", "!"])
TEXTS = st.lists(PIECES, min_size=0, max_size=60).map("".join)
FAST = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))


@FAST
@given(TEXTS)
def test_the_set_equals_the_reference(t):
    assert C.char_shingle_set(t).tolist() == reference_set(t)
    assert S.token_shingles(t) == reference_set(t) == S.shingle_set(t).tolist()
    assert S.Verifier().shingle_set(t).tolist() == reference_set(t)
    assert S.sketch(t, 8) == reference_set(t)[:8]


@FAST
@given(st.lists(TEXTS, min_size=1, max_size=10), st.sampled_from([1, 3, 16, 128]), st.integers(1, 80))
def test_blocks_of_any_size_give_the_same_sketches(texts, size, block):
    """Batched sketches (texts joined in blocks, a text longer than a block read in pieces with
    3 characters of overlap) equal each text's bottom-k of the reference set."""
    old = C.BLOCK_CHARS
    C.BLOCK_CHARS = block
    try:
        values, offsets = C.grouped_sketches(texts, size)
        alone = [C.char_sketch(C.char_stream(t), size).tolist() for t in texts]
        full = [C.char_shingle_set(t).tolist() for t in texts]
    finally:
        C.BLOCK_CHARS = old
    assert full == [reference_set(t) for t in texts]
    want = [f[:size] for f in full]
    assert [values[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == want == alone


def test_pinned_values():
    """A release that changes these values must change the scheme's name (collections keep it)."""
    assert S.SCHEME == C.CHAR_SCHEME == "chr4-fmix64-v4"
    assert reference_grams("Hello, World!") == ["hell", "ello", "llow", "lowo", "owor", "worl", "orld"]
    assert reference_grams("中文abc 字x") == ["中文", "文ab", "abc字", "bc字", "c字x"]
    assert reference_grams("ok") == ["ok"] and reference_grams("...") == []
    assert C.char_shingle_set("Hello, World!").tolist()[:3] == [-1180389124, -218385153, 77706861]
    assert C.char_shingle_set("中文字").tolist() == [-1923039321, 213246241]


def test_edits_that_do_not_count():
    """Case, punctuation, spacing and full-width forms are normalised away: the same set."""
    a = "The quick brown fox jumps over the lazy dog."
    assert C.char_shingle_set(a).tolist() == C.char_shingle_set("the QUICK brown-fox, jumps over the  lazy dog!").tolist()
    assert C.char_shingle_set("数据库，中文。").tolist() == C.char_shingle_set("数据库,中文.").tolist()


def test_one_edited_word_of_a_comment_stays_above_the_threshold():
    """Why the scheme exists (issue 26): a 20-word comment with one word replaced or one typo is a
    near-duplicate by the rule (token 3-grams: Jaccard ~0.7, not one)."""
    base = ("I really enjoyed reading this article about database indexing and I will definitely try "
            "these ideas in my own project soon")
    for copy in (base.replace("enjoyed", "loved"), base.replace("article", "artcile")):
        assert S.jaccard(S.token_shingles(copy), S.token_shingles(base)) >= 0.8
        assert S.jaccard(S.token_shingles(copy, S.SCHEME_V3), S.token_shingles(base, S.SCHEME_V3)) < 0.8
    assert S.jaccard(S.token_shingles(base.replace("really ", "")), S.token_shingles(base)) >= 0.8


def test_types_are_checked():
    with pytest.raises(InvalidTypeError, match="text must be a str"):
        C.char_stream(b"bytes")  # type: ignore[arg-type]
    assert C.char_shingle_values("").dtype == np.int32 and len(C.grouped_sketches([], 4)[1]) == 1


@FAST
@given(st.lists(TEXTS, min_size=0, max_size=12), st.sampled_from([S.SCHEME, S.SCHEME_V3]))
def test_batched_full_sets_equal_one_text_at_a_time(texts, scheme):
    """``shingle_sets`` (the band keys' input on loads) is ``shingle_set`` of each text, in order."""
    got = S.shingle_sets(texts, scheme)
    assert len(got) == len(texts)
    for text, values in zip(texts, got):
        assert np.array_equal(values, S.shingle_set(text, scheme))
