"""Long texts are fingerprinted in memory ~ distinct features, with the same answer (issue 15, item 4)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simdb.core.fingerprint.long_texts as long_texts
from simdb.core.fingerprint import Fingerprinter

WORDS = ["alpha", "beta", "the", "and", "gamma", "Δέλτα", "naïve", "中文", "分词", "测试", "x1", "über", "ÉCOLE"]
SEPS = [" ", "  ", "\n", "\t", ", ", ". ", "\u00a0", "\u3000", "-"]


@st.composite
def texts(draw):
    n = draw(st.integers(0, 300))
    parts = []
    for _ in range(n):
        parts.append(draw(st.sampled_from(WORDS)))
        parts.append(draw(st.sampled_from(SEPS)))
    return "".join(parts)


def _one_shot_majority(hashes: np.ndarray) -> int:
    """The majority by definition: +-1 per occurrence and bit."""
    out = 0
    for bit in range(64):
        ones = int(((hashes >> np.uint64(bit)) & np.uint64(1)).sum())
        if 2 * ones > len(hashes):
            out |= 1 << bit
    return out


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=200), st.integers(1, 5))
@settings(max_examples=200, deadline=None)
def test_majority_over_distinct_hashes_equals_the_definition(values, repeat):
    hashes = np.array(values * repeat + values[: len(values) // 2], dtype=np.uint64)
    assert long_texts.majority(*long_texts.reduce_counts(hashes)) == _one_shot_majority(hashes)


@given(texts(), st.integers(1, 40))
@settings(max_examples=150, deadline=None)
def test_segments_cover_the_text_and_cut_only_after_whitespace(text, size):
    pieces = list(long_texts.segments(text, size))
    assert "".join(pieces) == text
    for piece in pieces[:-1]:
        assert piece[-1].isspace()


@pytest.mark.parametrize("config", [
    {}, {"tokenizer": "words"}, {"weighting": "binary"}, {"stopwords": False}, {"normalize": False},
])
@given(text=texts())
@settings(max_examples=60, deadline=None)
def test_piecewise_fingerprint_equals_the_one_shot_one(config, text):
    fp = Fingerprinter(**config)
    want = fp.fingerprint(text)  # texts this short take the one-shot path
    old = (long_texts.SEGMENT_CHARS, long_texts.LARGE)
    try:
        long_texts.SEGMENT_CHARS, long_texts.LARGE = 7, 3  # force pieces and the distinct-hash majority
        assert fp.fingerprint(text) == want
    finally:
        long_texts.SEGMENT_CHARS, long_texts.LARGE = old
