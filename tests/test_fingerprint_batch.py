"""The fast fingerprint paths equal the per-text path and the pinned core, bit for bit.

``Fingerprinter.many()`` counts the bits of a batch of texts at once
(simdb.core.fingerprint.bitsum), ``fingerprint()`` counts short texts in
byte lanes, and ASCII texts are cut by a translate table (simdb.core.fingerprint.hashing.ascii_words). Each is
checked here against an independent computation: the features ``Fingerprinter.features``
counts from the ``str`` tokens, hashed by the pinned core (``simhash_features``).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdb import Fingerprinter, simhash_features
from simdb.core import tokenize as T
from simdb.core.fingerprint import bitsum, hashing
from simdb.core.fingerprint.bitsum import (
    LANE_MAX,
    majority_rows,
    segment_bit_counts,
    short_majority,
    short_weighted_majority,
)
from simdb.core.fingerprint.hashing import ascii_table, ascii_words

CONFIGS = [
    {},
    {"stopwords": False},
    {"weighting": "binary"},
    {"weighting": "binary", "stopwords": False},
    {"tokenizer": "tokens", "stopwords": 2 / 3},  # the "verified" preset
    {"stopwords": 1 / 16},
    {"tokenizer": "words"},
    {"tokenizer": "tokens"},
    {"normalize": False, "seed": 2**64 - 1},
    {"weighting": "binary", "tokenizer": "tokens", "normalize": False},
]

STOP = sorted(T.stopwords("en"))[:60] + sorted(T.stopwords("zh"))[:10]
WORDS = ["Cat", "cat", "CAT", "dog_house", "a1", "42", "ﬁsh", "Straße", "ΣΊΣΥΦΟΣ", "中文", "数据库", "x"]
PUNCT = [" ", "  ", "\n", ", ", ". ", "_", "-", "\t", "'", "¡", "\x00", "’", " “", "—", "😀", "・", "\u3000", "，", "\u00a0"]

word = st.one_of(st.sampled_from(STOP), st.sampled_from(WORDS), st.text(min_size=1, max_size=8))
built = st.lists(st.tuples(word, st.sampled_from(PUNCT)), max_size=60).map(lambda ps: "".join(w + p for w, p in ps))
ascii_text = st.text(st.characters(max_codepoint=127), max_size=200)
repeated = st.tuples(word, st.integers(1, 600)).map(lambda t: (t[0] + " ") * t[1])
texts = st.lists(st.one_of(built, ascii_text, repeated, st.text(max_size=40), st.just("")), max_size=12)


def expected(fp: Fingerprinter, text: str):
    return simhash_features(fp.features(text), seed=fp.seed, empty=None)


@pytest.mark.parametrize("cfg", CONFIGS, ids=[str(c) for c in CONFIGS])
@given(batch=texts)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_many_equals_per_text_equals_pinned_core(cfg, batch):
    fp = Fingerprinter(**cfg)
    ref = [expected(fp, t) for t in batch]
    assert [fp.fingerprint(t, None) for t in batch] == ref
    assert fp.many(batch, empty=None) == ref


@pytest.mark.parametrize("cfg", CONFIGS[:6], ids=[str(c) for c in CONFIGS[:6]])
@given(batch=texts)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_small_batches_and_long_texts(cfg, batch):
    """Batches cut every few words and texts sent one by one (the long-text route) give the same answers."""
    fp = Fingerprinter(**cfg)
    ref = [expected(fp, t) for t in batch]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bitsum, "CHUNK_TOKENS", 7)
        mp.setattr(bitsum, "ONE_BY_ONE_CHARS", 30)
        mp.setattr(bitsum, "LOOKUP_NOW", 3)
        assert fp.many(batch, empty=None) == ref


def test_long_texts_and_many_repeats():
    """Segments longer than a byte lane holds (> 255 words), texts past the per-text threshold."""
    texts = [
        "word " * 300,
        ("the cat " * 400) + "dog",
        " ".join(f"w{i}" for i in range(5000)),
        "ab " * (bitsum.ONE_BY_ONE_CHARS // 2),
        "",
        "the of and",  # stopwords only
        "数据库 " * 300,
        "don’t — “quoted” 😀 ok",
        "ab\ud800cd ab",  # a lone surrogate separates words like any other non-word character
    ]
    for cfg in CONFIGS:
        fp = Fingerprinter(**cfg)
        ref = [expected(fp, t) for t in texts]
        assert [fp.fingerprint(t, None) for t in texts] == ref, cfg
        assert fp.many(texts, empty=None) == ref, cfg
        assert fp.many(texts) == [0 if v is None else v for v in ref], cfg


def regex_words(tokenizer, t):
    if tokenizer == "default":
        return T.split(t)
    return re.findall(r"\w+", t) if tokenizer == "words" else T.mixed_tokens(t)


@given(ascii_text)
@settings(max_examples=300, deadline=None)
def test_ascii_words_equal_the_regex_tokenizers(text):
    for tokenizer in ("default", "words", "tokens"):
        for normalize in (True, False):
            t = T.normalize(text) if normalize else text
            got = ascii_words(text, ascii_table(tokenizer, normalize))  # ASCII: normalised by the table
            assert got == [w.encode() for w in regex_words(tokenizer, t)]
    assert ascii_table("chars", True) is None


SEPARATORS = "’“”—…😀\u3000，\u00a0\ud800¡«»©"  # not \w, not Han / kana / Hangul
WORDLIKE = "éßΣσ中文かカ한ﬁ①²・"  # \w, or a "tokens" one-character token (・ is kana punctuation)
mixed_text = st.text(st.one_of(st.characters(max_codepoint=127), st.sampled_from(SEPARATORS + WORDLIKE)), max_size=80)


@given(mixed_text)
@settings(max_examples=400, deadline=None)
def test_non_ascii_text_words_equal_the_regex_tokenizers_or_give_up(text):
    """Non-ASCII separators become spaces; a character that may be in a token sends the text to the regexes."""
    for tokenizer in ("default", "words", "tokens"):
        for normalize in (True, False):
            t = T.normalize(text) if normalize else text
            got = ascii_words(t, ascii_table(tokenizer, normalize))
            plain = all(c.isascii() or c in SEPARATORS for c in t)
            assert (got is not None) == plain, (t, got)  # the fast route whenever it applies
            if got is not None:
                assert got == [w.encode() for w in regex_words(tokenizer, t)]


def test_bytes_tokens_alias_their_str():
    cache = hashing.TokenCache(7, hashing.stopword_set())
    ids = hashing.token_ids(cache, [b"zebra", "zebra", b"the", "the", "zebra"])
    assert ids.tolist()[:2] == [ids[4]] * 2 and ids[0] != 0
    assert ids.tolist()[2:4] == [0, 0]  # stopwords: id 0 whichever form
    assert int(cache.hashes[ids[0]]) == hashing.hash_keys(["zebra"], 7, use_cache=False)[0]
    assert cache.hashes[0] == 0
    kept = hashing.TokenCache(7, None)
    ids = hashing.token_ids(kept, [b"the", "the"])
    assert ids[0] == ids[1] != 0 and kept.is_stop[ids[0]]


# --------------------------------------------------------------------------- the numeric core


hashes_st = st.lists(st.integers(0, 2**64 - 1), max_size=700).map(lambda v: np.array(v, dtype=np.uint64))


def brute_counts(hashes):
    """Column c: the hashes with bit 8 * (c // 8) + 7 - c % 8 set (segment_bit_counts' column order)."""
    return [sum((int(h) >> (8 * (c // 8) + 7 - c % 8)) & 1 for h in hashes) for c in range(64)]


@given(hashes_st, st.lists(st.integers(0, 300), max_size=8), st.data())
@settings(max_examples=150, deadline=None)
def test_segment_bit_counts_and_majority_rows(hashes, cuts, data):
    n = len(hashes)
    bounds = sorted(min(c, n) for c in cuts)
    edges = [0, *bounds, n]
    lengths = np.diff(edges)
    counts = segment_bit_counts(hashes, lengths)
    assert counts.shape == (len(lengths), 64)
    for j, (a, b) in enumerate(zip(edges, edges[1:])):
        assert counts[j].tolist() == brute_counts(hashes[a:b])
    totals = np.array([data.draw(st.integers(0, 2 * int(x) + 1)) for x in lengths], dtype=np.int64)
    fps = majority_rows(counts, totals)
    for j, fp in enumerate(fps):
        assert fp == sum(1 << (8 * (c // 8) + 7 - c % 8) for c in range(64) if 2 * counts[j, c] > totals[j])


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=LANE_MAX), st.data())
@settings(max_examples=200, deadline=None)
def test_short_majorities_equal_the_float32_path(values, data):
    table = np.array([0, *values], dtype=np.uint64)  # id 0: a dropped stopword, hash 0
    ids = np.array(data.draw(st.lists(st.integers(0, len(values)), min_size=1, max_size=LANE_MAX)), dtype=np.intp)
    kept = ids[ids != 0]
    want = bitsum.count_majority(table[kept]) if len(kept) else "empty"
    assert short_majority(table, ids, "empty") == want
    is_stop = np.array(data.draw(st.lists(st.booleans(), min_size=len(table), max_size=len(table))))
    p, q = data.draw(st.sampled_from([(2, 3), (1, 16), (15, 16), (1, 2)]))
    weights = np.where(is_stop[ids], p, q)
    assert short_weighted_majority(table, ids, is_stop, p, q) == bitsum.weighted_count_majority(table[ids], weights)
