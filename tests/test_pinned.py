"""Pinned features and fingerprints per tokenizer mode and weighting, and threshold boundaries.

The expected values are written out literally. They were computed once by the
from-scratch reference below (``re``, ``unicodedata``, ``xxhash`` and exact
``Fraction`` sums, reading the stopword files directly), never by simdb, and the
reference is re-checked against the literals here, so a change to the
fingerprint definition (which must stay stable: stored fingerprints depend on
it) fails loudly whichever side moved.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest
import xxhash

from simdb import Fingerprinter, IdfTable
from simdb.core import fingerprint as F
from simdb.core import tokenize as T
from simdb.core.fingerprint import query_fingerprint
from simdb.core.sketch import shingles as S

DATA = Path(__file__).resolve().parents[1] / "simdb" / "data"

TEXT = "The quick brown fox jumps over the lazy dog; the dog sleeps, and the FOX would run."


# --------------------------------------------------------------------------- the reference


def ref_stopwords() -> set[str]:
    words = set()
    for name in ("en.txt", "zh.txt"):
        for line in (DATA / name).read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                words.add(unicodedata.normalize("NFKC", line).casefold())
    return words


def ref_words(text: str) -> list[str]:
    return re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold())


def ref_simhash(weights: dict, seed: int = 0) -> int:
    v = [Fraction(0)] * 64
    for f, w in weights.items():
        h = xxhash.xxh64_intdigest(f.encode("utf-8"), seed)
        for i in range(64):
            v[i] += Fraction(w) if (h >> i) & 1 else -Fraction(w)
    return sum(1 << i for i in range(64) if v[i] > 0)


STOP = ref_stopwords()
KEPT = [w for w in ref_words(TEXT) if w not in STOP]
TF = Counter(KEPT)
IDF = IdfTable({"dog": 1, "fox": 2}, n_docs=3)

PINNED_TF = {"quick": 1, "brown": 1, "fox": 2, "jumps": 1, "lazy": 1, "dog": 2, "sleeps": 1, "run": 1}
PINNED_BIGRAMS = {"quick brown": 1, "brown fox": 1, "fox jumps": 1, "jumps lazy": 1, "lazy dog": 1, "dog dog": 1,
                  "dog sleeps": 1, "sleeps fox": 1, "fox run": 1}
# tf-idf weights: tf * (log((1 + 3) / (1 + df)) + 1), df(dog) = 1, df(fox) = 2, others unseen (df = 0)
PINNED_TFIDF = {k: v * (math.log(4 / (1 + {"dog": 1, "fox": 2}.get(k, 0))) + 1.0) for k, v in PINNED_TF.items()}

PINNED_FP = {
    "tf": 0x19B0C04C5114B4B8,
    "binary": 0x1930814C5014A4A0,
    "logtf": 0x19B0C14C5114B4B8,
    "tfidf": 0x19B0D15CD514B4BD,
    "bigrams": 0x01A5FB1238F3B5D1,
    "chars4": 0x536F3FBD6661E406,
    "no_stopwords_removed": 0x193B032617875426,
}


def test_reference_reproduces_the_pinned_values():
    assert dict(TF) == PINNED_TF
    assert ref_simhash(TF) == PINNED_FP["tf"]
    assert ref_simhash(dict.fromkeys(TF, 1)) == PINNED_FP["binary"]
    assert ref_simhash({k: 1.0 + math.log(v) for k, v in TF.items()}) == PINNED_FP["logtf"]
    assert ref_simhash(PINNED_TFIDF) == PINNED_FP["tfidf"]
    assert ref_simhash(Counter(" ".join(KEPT[i : i + 2]) for i in range(len(KEPT) - 1))) == PINNED_FP["bigrams"]
    chars = "".join(ref_words(TEXT))
    assert ref_simhash(Counter(chars[i : i + 4] for i in range(len(chars) - 3))) == PINNED_FP["chars4"]
    assert ref_simhash(Counter(ref_words(TEXT))) == PINNED_FP["no_stopwords_removed"]


# --------------------------------------------------------------------------- simdb against the pins


@pytest.mark.parametrize("tokenizer", ["default", "words"])
def test_pinned_features_and_fingerprints_per_weighting(tokenizer):
    fp = Fingerprinter(tokenizer=tokenizer)
    assert fp.features(TEXT) == PINNED_TF and fp.fingerprint(TEXT) == PINNED_FP["tf"]
    fp = Fingerprinter(tokenizer=tokenizer, weighting="binary")
    assert fp.features(TEXT) == dict.fromkeys(PINNED_TF, 1) and fp.fingerprint(TEXT) == PINNED_FP["binary"]
    fp = Fingerprinter(tokenizer=tokenizer, weighting="logtf")
    assert fp.features(TEXT) == {k: 1.0 + math.log(v) for k, v in PINNED_TF.items()}
    assert fp.features(TEXT)["dog"] == 1.0 + math.log(2) and fp.features(TEXT)["run"] == 1.0
    assert fp.fingerprint(TEXT) == PINNED_FP["logtf"]
    fp = Fingerprinter(tokenizer=tokenizer, weighting="tfidf", idf=IDF)
    assert fp.features(TEXT) == PINNED_TFIDF and fp.fingerprint(TEXT) == PINNED_FP["tfidf"]
    fp = Fingerprinter(tokenizer=tokenizer, ngram=2)
    assert fp.features(TEXT) == PINNED_BIGRAMS and fp.fingerprint(TEXT) == PINNED_FP["bigrams"]
    fp = Fingerprinter(tokenizer=tokenizer, ngram=2, weighting="binary")
    assert fp.fingerprint(TEXT) == ref_simhash(dict.fromkeys(PINNED_BIGRAMS, 1))
    fp = Fingerprinter(tokenizer=tokenizer, stopwords=False)
    assert fp.fingerprint(TEXT) == PINNED_FP["no_stopwords_removed"]
    assert fp.features(TEXT)["the"] == 4


@pytest.mark.parametrize("weighting", ["tf", "binary"])
def test_pinned_char_ngrams(weighting):
    fp = Fingerprinter(tokenizer="chars", weighting=weighting)
    chars = "".join(ref_words(TEXT))
    grams = Counter(chars[i : i + 4] for i in range(len(chars) - 3))
    assert fp.features(TEXT) == (dict(grams) if weighting == "tf" else dict.fromkeys(grams, 1))
    assert grams["foxj"] == 1 and len(grams) == 61  # 64 word characters, no 4-gram repeats
    if weighting == "tf":
        assert fp.fingerprint(TEXT) == PINNED_FP["chars4"]
    want = ref_simhash(grams if weighting == "tf" else dict.fromkeys(grams, 1))
    assert fp.fingerprint(TEXT) == want
    # non-ASCII characters go through the general (cached) path, short texts are one n-gram
    assert fp.fingerprint("Ça va é") == ref_simhash(Counter(["çava", "avaé"]) if weighting == "tf"
                                                   else {"çava": 1, "avaé": 1})
    assert fp.fingerprint("abc") == ref_simhash({"abc": 1}) and fp.fingerprint("  .. ") == 0


def test_words_tokenizer_keeps_han_runs_whole_and_removes_stopwords():
    text = "我们喜欢猫 and 狗, would you?"
    assert ref_words(text) == ["我们喜欢猫", "and", "狗", "would", "you"]
    kept = [w for w in ref_words(text) if w not in STOP]
    assert kept == ["我们喜欢猫", "狗"]
    fp = Fingerprinter(tokenizer="words")
    assert fp.features(text) == {"我们喜欢猫": 1, "狗": 1}
    assert fp.fingerprint(text) == ref_simhash({"我们喜欢猫": 1, "狗": 1})
    # the default tokenizer segments the run with jieba instead
    assert "我们喜欢猫" not in Fingerprinter().features(text)


def test_seed_changes_the_hash():
    fp = Fingerprinter(seed=12345)
    assert fp.fingerprint(TEXT) == ref_simhash(TF, seed=12345) != PINNED_FP["tf"]


# --------------------------------------------------------------------------- float exactness guards


def test_int_weights_only_for_integer_weightings():
    assert Fingerprinter().int_weights is True
    assert Fingerprinter(weighting="binary").int_weights is True
    assert Fingerprinter(weighting="logtf").int_weights is False
    assert Fingerprinter(weighting="tfidf", idf=IDF).int_weights is False


def _keys_with_bit(bit: int, on: bool, n: int, seed: int = 0) -> list[str]:
    out, i = [], 0
    while len(out) < n:
        k = f"f{i}"
        if ((xxhash.xxh64_intdigest(k.encode(), seed) >> bit) & 1) == on:
            out.append(k)
        i += 1
    return out


@pytest.mark.parametrize("big", [(1 << 24) - 1, 1 << 24, (1 << 24) + 1, (1 << 53) - 1, 1 << 53, (1 << 53) + 1])
def test_int_weights_near_the_float_exact_bounds(big):
    """Integer weights around 2**24 (float32) and 2**53 (float64): a margin of one decides bits."""
    (a,) = _keys_with_bit(0, True, 1)
    (b,) = _keys_with_bit(0, False, 1)
    for wa, wb in [(big, big - 1), (big - 1, big), (big, big)]:
        feats = {a: wa, b: wb}
        assert F.simhash_features(feats) == ref_simhash(feats), (wa, wb)


def test_int_weights_at_the_float32_bound_with_many_small_ones():
    # the bit sums of many small weights beside one huge one: float32 would lose the small ones
    (a,) = _keys_with_bit(3, True, 1)
    small = _keys_with_bit(3, True, 6)
    (b,) = _keys_with_bit(3, False, 1)
    for total in ((1 << 24) - 8, (1 << 24) - 2, 1 << 24, (1 << 24) + 6):
        feats = {a: total // 2 - 3, **dict.fromkeys(small, 1), b: total // 2 + 2}
        got, want = F.simhash_features(feats), ref_simhash(feats)
        assert (got >> 3) & 1 == (want >> 3) & 1 and got == want, total


def test_float_weights_near_ties_are_decided_exactly():
    on = _keys_with_bit(5, True, 2)
    (off,) = _keys_with_bit(5, False, 1)
    # 0.1 + 0.2 - 0.3 is 2**-54.6 > 0 in exact arithmetic on these doubles, 5.5e-17 in float
    feats = {on[0]: 0.1, on[1]: 0.2, off: 0.3}
    assert F.simhash_features(feats) == ref_simhash(feats)
    assert (F.simhash_features(feats) >> 5) & 1 == 1
    # an exact tie is a 0 bit; a tie plus the smallest double is a 1 bit
    feats = {on[0]: 0.5, on[1]: 0.25, off: 0.75}
    assert (F.simhash_features(feats) >> 5) & 1 == 0 == (ref_simhash(feats) >> 5) & 1
    feats = {on[0]: 0.5, on[1]: 0.25 + 2**-54, off: 0.75}
    assert F.simhash_features(feats) == ref_simhash(feats)
    feats = {on[0]: 1e300, on[1]: 1e-300, off: 1e300}
    assert F.simhash_features(feats) == ref_simhash(feats)
    assert (F.simhash_features(feats) >> 5) & 1 == 1


# --------------------------------------------------------------------------- thresholds and stopwords


@pytest.mark.parametrize(
    "text, mostly",
    [
        ("中", True),  # the only word character
        ("中a", False),  # 1 of 2 word characters: exactly half is not more than half
        ("中中a", True),  # 2 of 3
        ("中aa", False),
        ("中中aa", False),  # 2 of 4: half
        ("中中中aa", True),  # 3 of 5
        ("中, a!", False),  # punctuation does not count
        ("中中, a!", True),
        ("あa", False),
        ("ああa", True),  # kana
        ("한국a", True),  # Hangul
        ("é", False),  # non-ASCII, no CJK
        ("——", False),  # non-ASCII, no word characters at all
        ("", False),
        ("abc", False),
    ],
)
def test_mostly_cjk_boundary(text, mostly):
    assert S.is_mostly_cjk(text) is mostly


@pytest.mark.parametrize(
    "text, strings",
    [
        ("中文字符串", ["中文字符串"]),  # exactly CHAR_N characters: one shingle
        ("中文字符串啊", ["中文字符串", "文字符串啊"]),  # CHAR_N + 1: two
        ("中文 字", ["中文 字"]),
        ("中文  \n 字符串", ["中文 字符", "文 字符串"]),  # whitespace runs collapse to one space
        ("one two three", ["one two three"]),  # exactly WORD_N words
        ("one two three four", ["one two three", "two three four"]),
        ("one, two", ["one two"]),
        ("...", []),
    ],
)
def test_shingle_length_boundaries(text, strings):
    assert S.shingle_strings(text) == strings
    want = sorted({(v - (1 << 32)) if v >= 1 << 31 else v
                   for v in (xxhash.xxh32_intdigest(s.encode("utf-8"), 0) for s in strings)})
    assert S.shingles(text) == want


@pytest.mark.parametrize("unsigned, signed", [(0, 0), (0x7FFFFFFF, 2**31 - 1), (0x80000000, -(2**31)),
                                             (0xFFFFFFFF, -1)])
def test_int4_conversion_at_the_sign_boundary(monkeypatch, unsigned, signed):
    # no known text hashes to exactly 2**31, so the conversion is checked on a stand-in hash
    monkeypatch.setattr(S, "_xxh32", lambda data, seed: unsigned)
    assert S.hash32("x") == signed
    assert S.shingles("one two three") == [signed]


def test_shingles_many_is_shingles_of_each_in_order():
    texts = ["one two three four", "", "中文字符串啊", "one two three four", "x"]
    got = S.shingles_many(texts)
    assert got == [S.shingles(t) for t in texts]
    assert got[1] == [] and got[0] == got[3] and len(got[0]) == 2 and len(got[4]) == 1
    assert S.shingles_many(iter(texts[:2])) == got[:2]  # any iterable
    assert S.shingles_many([]) == []


def test_hash32_is_signed_xxh32():
    for s in ("a", "one two three", "中文字符串", ""):
        v = xxhash.xxh32_intdigest(s.encode("utf-8"), 0)
        assert S.hash32(s) == (v - (1 << 32) if v >= 1 << 31 else v)
    # both sides of the sign boundary occur
    signs = {S.hash32(f"w{i}") < 0 for i in range(50)}
    assert signs == {True, False}


def test_keyword_mode_removes_the_shipped_stopwords_too():
    """jieba's own stopword list lacks "would", "very" and most Chinese function words; ours adds them."""
    text = "very very would would would 数据库 数据库 数据库 的 的 的 的 我们 我们 我们 postgresql"
    with_ours = {w for w, _ in T.jieba_keywords(text, 0)}
    jieba_only = {w for w, _ in T.jieba_keywords(text, 0, stopwords_=False)}
    assert {"very", "would"} <= jieba_only and not {"very", "would"} & with_ours
    assert not (STOP & with_ours)
    assert "数据库" in with_ours and "postgresql" in with_ours
    fp = Fingerprinter(tokenizer="keywords")
    assert set(fp.features(text)) == with_ours
    assert set(Fingerprinter(tokenizer="keywords", stopwords=False).features(text)) == jieba_only


def test_keyword_top_k_and_normalisation():
    text = "Alpha alpha BETA beta beta gamma"
    tags = T.jieba_keywords(text, 2)
    assert [w for w, _ in tags] == ["beta", "alpha"]  # most frequent first, lower-cased
    assert len(T.jieba_keywords(text, 0)) == 3
    assert [w for w, _ in T.jieba_keywords(text, 1, normalize_text=False)] == ["beta"]
    assert all(isinstance(s, float) and s > 0 for _, s in tags)


def test_tokenize_stopword_options():
    text = "The cat and the 我们 dog"
    assert T.tokenize(text) == ["cat", "dog"]
    assert T.tokenize(text, stopwords_=False) == ["the", "cat", "and", "the", "我们", "dog"]
    assert T.tokenize(text, stopwords_=None) == T.tokenize(text, stopwords_=False)
    assert T.tokenize(text, stopwords_={"cat"}) == ["the", "and", "the", "我们", "dog"]
    assert T.tokenize("The CAT", normalize_text=False, stopwords_=False) == ["The", "CAT"]
    assert T.stopwords() == T.stopwords("en") | T.stopwords("zh") == frozenset(STOP)
    assert "would" in T.stopwords("en") and "我们" in T.stopwords("zh") and "我们" not in T.stopwords("en")


def test_normalize_ascii_and_unicode_paths():
    assert T.normalize("ABC def") == "abc def"
    assert T.normalize("ＡＢＣ Straße") == "abc strasse"  # NFKC (fullwidth) then casefold (ß)
    assert T.normalize("Ǆ") == "dž"
    assert T.normalize("ﬁ") == "fi"  # the ligature decomposes under NFKC


def test_ngram_helpers_boundaries():
    assert T.word_ngrams(["a", "b", "c"], 3) == ["a b c"]
    assert T.word_ngrams(["a", "b", "c", "d"], 3) == ["a b c", "b c d"]
    assert T.word_ngrams(["a", "b"], 3) == ["a b"]
    assert T.word_ngrams([], 3) == [] and T.word_ngrams([], 1) == []
    assert T.word_ngrams(["a", "b"], 1) == ["a", "b"]
    assert T.char_ngrams("abcd", 4) == ["abcd"] and T.char_ngrams("abcde", 4) == ["abcd", "bcde"]
    assert T.char_ngrams("ab", 4) == ["ab"] and T.char_ngrams("!!", 4) == []
    assert T.char_ngrams("A b", 2, normalize_text=False) == ["Ab"]
    assert T.char_stream("Ａ b!", normalize_text=False) == "Ａb"


def test_stopwords_argument_checks():
    with pytest.raises(TypeError, match="lang must be str"):
        T.stopwords(1)
    with pytest.raises(ValueError, match="'en' or 'zh'"):
        T.stopwords("fr")


def test_keywords_default_top_k_is_twenty():
    text = " ".join(f"word{i} " * (i + 1) for i in range(30))
    assert len(T.jieba_keywords(text)) == 20 and len(T.jieba_keywords(text, 0)) == 30
    assert len(Fingerprinter(tokenizer="keywords").features(text)) == 20


def test_fingerprint_features_rejects_text_in_both_algorithms():
    for fp in (Fingerprinter(), Fingerprinter(algorithm="simhash-pypi")):
        for bad in ("a text", b"bytes", bytearray(b"x")):
            with pytest.raises(TypeError):
                fp.fingerprint_features(bad)
    assert Fingerprinter().fingerprint_features(PINNED_TF) == PINNED_FP["tf"]


def test_query_fingerprint_reads_ints_and_texts_not_bools():
    assert query_fingerprint(5) == 5 and query_fingerprint(TEXT) == PINNED_FP["tf"]
    assert query_fingerprint("the and") is None  # stopwords only: no features, matches nothing
    for bad in (True, False):
        with pytest.raises(TypeError, match="bool"):
            query_fingerprint(bad)
    with pytest.raises(ValueError):
        query_fingerprint(1 << 64)
    with pytest.raises(TypeError):
        query_fingerprint(1.0)
