"""The pinned SimHash core, the Fingerprinter configuration and its options."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from fractions import Fraction

import pytest
import xxhash
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import simdb
from simdb import Fingerprinter, IdfTable, hamming, simhash, simhash_features
from simdb.core import tokenize as T
from simdb.core.fingerprint import bitsum, hashing

# --------------------------------------------------------------------------- slow reference


def reference(features, seed=0):
    """The definition in docs/design.md, written the slow obvious way with exact arithmetic."""
    if isinstance(features, dict):
        items = list(features.items())
    else:
        items = [(f, 1) if isinstance(f, str) else tuple(f) for f in features]
    if not items:
        return 0
    all_int = all(isinstance(w, int) for _, w in items)
    v = [Fraction(0)] * 64
    for f, w in items:
        w = Fraction(w) if all_int else Fraction(float(w))
        h = xxhash.xxh64_intdigest(f.encode("utf-8"), seed=seed)
        for i in range(64):
            v[i] += w if (h >> i) & 1 else -w
    return sum(1 << i for i in range(64) if v[i] > 0)


WORDS = st.text(min_size=0, max_size=12)
INT_W = st.integers(min_value=-(10**6), max_value=10**6)
BIG_W = st.integers(min_value=-(2**80), max_value=2**80)
FLOAT_W = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)
TINY_W = st.sampled_from([0.1, 0.2, 0.3, -0.1, -0.2, -0.3, 0.5, -0.5, 1e-300, -1e-300, 2.0**-1074, 1e300])


@given(st.lists(WORDS, max_size=30), st.integers(min_value=0, max_value=2**64 - 1))
@settings(max_examples=150, deadline=None)
def test_core_equals_reference_unweighted(feats, seed):
    assert simhash_features(feats, seed=seed) == reference(feats, seed)


@given(st.dictionaries(WORDS, st.one_of(INT_W, BIG_W), max_size=30))
@settings(max_examples=150, deadline=None)
def test_core_equals_reference_int_weights(feats):
    assert simhash_features(feats) == reference(feats)


@given(st.lists(st.tuples(WORDS, st.one_of(FLOAT_W, TINY_W, INT_W)), max_size=25))
@settings(max_examples=200, deadline=None)
def test_core_equals_reference_float_weights(feats):
    assert simhash_features(feats) == reference(feats)


def test_float_ties_are_exact():
    # 0.1 + 0.2 - 0.3 is not 0 in doubles but rounds to tiny values in float sums:
    # every bit is decided by the exact sum of the given doubles.
    for feats in (
        [("a", 0.1), ("b", 0.2), ("c", 0.3)],
        [("a", 1e300), ("b", 1e300), ("c", -1e300), ("d", 1e-300)],
        [("x", 1.0), ("x", -1.0), ("y", 2.0**-1074)],
        [("a", 1e308), ("b", 1e308), ("c", 1e308)],
    ):
        assert simhash_features(feats) == reference(feats)


def test_single_feature_is_its_hash():
    # one feature with positive weight: v[i] = +-w, so the fingerprint is xxh64 itself
    for f in ("a", "hello", "公园", ""):
        assert simhash_features([f]) == xxhash.xxh64_intdigest(f.encode("utf-8"))
        assert simhash_features({f: 7}, seed=99) == xxhash.xxh64_intdigest(f.encode("utf-8"), seed=99)
    assert simhash_features({"a": -1}) == xxhash.xxh64_intdigest(b"a") ^ (2**64 - 1)
    assert simhash(["a"]) == 0xD24EC4F1A98C6E5B  # the check value in docs/design.md


def test_pinned_values():
    # Regression pins of the documented pipeline (recompute only with a version bump).
    assert simhash("The quick brown fox jumps over the lazy dog") == simhash_features(
        {"quick": 1, "brown": 1, "fox": 1, "jumps": 1, "lazy": 1, "dog": 1}
    )
    assert simhash("") == 0 and simhash("the and of") == 0
    assert simhash(["a", "b", ("c", 2)]) == reference(["a", "b", ("c", 2)])
    assert simhash("The quick brown fox jumps over the lazy dog") == PINNED_FOX


PINNED_FOX = 0x193001045216A488  # xxh64 majority of quick brown fox jumps lazy dog


@given(st.binary(max_size=80), st.integers(min_value=1, max_value=31), st.sampled_from([0, 1, 2**64 - 1, 987654321]))
@settings(max_examples=200, deadline=None)
def test_vectorised_xxh64_windows(data, width, seed):
    assume(len(data) >= width)
    expected = [xxhash.xxh64_intdigest(data[i : i + width], seed=seed) for i in range(len(data) - width + 1)]
    assert bitsum.xxh64_windows(data, width, seed).tolist() == expected


@given(st.text(alphabet=st.sampled_from("abcdefghij XYZ.,0123456789_é中"), max_size=120),
       st.integers(min_value=1, max_value=12), st.sampled_from(["tf", "binary"]))
@settings(max_examples=200, deadline=None)
def test_char_ngrams_fast_path_equals_reference(text, n, weighting):
    fp = Fingerprinter(tokenizer="chars", ngram=n, weighting=weighting)
    feats = fp.features(text)
    assert fp.fingerprint(text) == (reference(feats) if feats else 0)


def test_repeated_features_add_up():
    assert simhash_features(["a", "a", "b"]) == simhash_features({"a": 2, "b": 1})
    assert simhash_features([("a", 1.5), ("a", 1.5), ("b", 2.0)]) == simhash_features({"a": 3.0, "b": 2.0})


def test_fingerprints_are_64_bit_ints():
    for text in ("hello world", "我们今天去公园散步", "x" * 10000):
        fp = simhash(text)
        assert isinstance(fp, int) and 0 <= fp < 2**64


# --------------------------------------------------------------------------- default pipeline

TEXTS = [
    "The quick brown fox jumps over the lazy dog. The dog sleeps.",
    "Python is a programming language that lets you work quickly and integrate systems effectively.",
    "我们今天去公园散步，公园里的花开了，天气很好。",
    "Mixed 文本 with English words 和中文词语 in one line, version 3.11 发布了。",
    "Ｆｕｌｌ－ｗｉｄｔｈ ＡＳＣＩＩ and ﬁ ligatures, Straße and STRASSE",
    "",
    "the of and",
    "   ...!!! ",
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize(
    "config",
    [
        {},
        {"weighting": "binary"},
        {"weighting": "logtf"},
        {"ngram": 2},
        {"ngram": 3, "stopwords": False},
        {"tokenizer": "words"},
        {"tokenizer": "chars"},
        {"tokenizer": "chars", "ngram": 2},
        {"tokenizer": "chars", "weighting": "binary"},
        {"ngram": 2, "weighting": "binary"},
        {"tokenizer": "words", "weighting": "binary", "stopwords": False},
        {"stopwords": False},
        {"normalize": False},
        {"seed": 12345},
        {"tokenizer": "keywords"},
    ],
)
def test_fingerprint_equals_core_of_its_features(text, config):
    """Consistency: the fast paths equal the core applied to ``features()``. This is blind to
    tokenising and weighting mistakes (it takes the features from the code under test); the
    independent expected values are in tests/test_pinned.py."""
    fp = Fingerprinter(**config)
    feats = fp.features(text)
    expected = reference(feats, fp.seed) if feats else 0
    assert fp.fingerprint(text) == expected
    assert fp.fingerprint(text, empty=None) == (expected if feats else None)
    assert fp.many([text, text], empty=-1) == [expected if feats else -1] * 2


def test_default_features():
    fp = Fingerprinter()
    assert fp.features("The cat and the hat, the CAT!") == {"cat": 2, "hat": 1}
    assert fp.features("我们的公园，我们的公园") == {"公园": 2}
    assert Fingerprinter(weighting="binary").features("cat cat hat") == {"cat": 1, "hat": 1}
    lt = Fingerprinter(weighting="logtf").features("cat cat hat")
    assert lt == {"cat": 1.0 + math.log(2), "hat": 1.0}
    assert Fingerprinter(ngram=2).features("the cat sat on the mat") == {"cat sat": 1, "sat mat": 1}


def test_empty_and_stopword_only_text_gives_empty():
    fp = Fingerprinter()
    for text in ("", "   ", "the and of", "的 了 是", "!!!"):
        assert fp.fingerprint(text) == 0
        assert fp.fingerprint(text, empty=None) is None
        assert simhash(text, empty=None) is None
    assert fp.many(["", "cat"], empty=None)[0] is None
    assert simhash([]) == 0 and simhash({}, empty=None) is None


# --------------------------------------------------------------------------- properties

VOCAB = [f"w{i}x" for i in range(2000)]
DOC = st.lists(st.sampled_from(VOCAB), min_size=40, max_size=120, unique=True)


@given(DOC, DOC, st.data())
@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
def test_one_word_edit_is_closer_than_unrelated_text(doc, other, data):
    i = data.draw(st.integers(min_value=0, max_value=len(doc) - 1))
    edited = list(doc)
    edited[i] = data.draw(st.sampled_from(VOCAB))
    assume(len(set(doc) & set(other)) < len(doc) // 4)
    a, b, c = (simhash(" ".join(d)) for d in (doc, edited, other))
    assert hamming(a, b) < hamming(a, c)


HAN = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FA5)
CHINESE = st.text(alphabet=HAN, min_size=30, max_size=80)
MIXED = st.text(alphabet=st.one_of(HAN, st.sampled_from("abcdefg xyz 123,.，。！")), max_size=120)


@given(CHINESE, CHINESE, st.data())
@settings(max_examples=50, deadline=None, derandomize=True)
def test_chinese_one_char_edit_is_closer_than_unrelated(doc, other, data):
    # a longer document (repeated sentence) with one character changed in one copy
    text = "，".join([doc, doc[::-1], doc[1:] + doc[:1]])
    i = data.draw(st.integers(min_value=0, max_value=len(doc) - 1))
    edited = text[:i] + ("中" if text[i] != "中" else "国") + text[i + 1 :]
    unrelated = "，".join([other, other[::-1], other[1:] + other[:1]])
    assume(len(set(doc) & set(other)) < len(set(doc)) // 2)
    a, b, c = simhash(text), simhash(edited), simhash(unrelated)
    assert hamming(a, b) < hamming(a, c)


@given(MIXED)
@settings(max_examples=100, deadline=None)
def test_chinese_and_mixed_text(text):
    fp = Fingerprinter()
    v = fp.fingerprint(text)
    feats = fp.features(text)
    assert v == (reference(feats) if feats else 0)
    assert 0 <= v < 2**64
    assert simhash(text) == v


def test_near_duplicates_on_real_sentences():
    a = (
        "SimHash maps a document to a 64-bit fingerprint such that similar documents get "
        "fingerprints that differ in few bits, which makes near-duplicate detection cheap."
    )
    b = a.replace("cheap", "inexpensive")
    c = "PostgreSQL stores tables in heap files and indexes them with B-trees by default."
    assert hamming(simhash(a), simhash(b)) < hamming(simhash(a), simhash(c))
    zh1 = "今天天气很好，我们一起去公园散步，看到了很多美丽的花，心情非常愉快。"
    zh2 = "今天天气很好，我们一起去公园散步，看到了许多美丽的花，心情非常愉快。"
    zh3 = "数据库系统使用索引来加速查询，常见的索引结构包括B树和哈希表。"
    assert hamming(simhash(zh1), simhash(zh2)) < hamming(simhash(zh1), simhash(zh3))


DETERMINISM_TEXTS = TEXTS + ["Some more text with Ümlauts and ñ", "日本語のテキストと中文混合"]


def test_deterministic_across_processes():
    code = (
        "import json, sys, simdb\n"
        "texts = json.loads(sys.stdin.read())\n"
        "configs = [{}, {'ngram': 2}, {'tokenizer': 'chars'}, {'weighting': 'logtf'}, {'seed': 7}]\n"
        "print(json.dumps([simdb.Fingerprinter(**c).many(texts) for c in configs] +"
        " [simdb.simhash({'a': 1.5, 'b': -2})]))\n"
    )
    outs = []
    for hashseed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=hashseed)
        r = subprocess.run(
            [sys.executable, "-c", code], input=json.dumps(DETERMINISM_TEXTS), capture_output=True, text=True,
            env=env, timeout=120,
        )
        assert r.returncode == 0, r.stderr
        outs.append(json.loads(r.stdout))
    assert outs[0] == outs[1]
    configs = [{}, {"ngram": 2}, {"tokenizer": "chars"}, {"weighting": "logtf"}, {"seed": 7}]
    here = [Fingerprinter(**c).many(DETERMINISM_TEXTS) for c in configs] + [simhash({"a": 1.5, "b": -2})]
    assert outs[0] == here


def test_threads_agree_with_serial():
    texts = [f"document number {i} about topic {i % 7} with words {i * 3} 中文{i}" for i in range(300)]
    expected = Fingerprinter().many(texts)
    hashing.CACHES.clear()
    results = {}

    def work(k):
        results[k] = [Fingerprinter().fingerprint(t) for t in texts]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == expected for r in results.values())


def test_cache_replacement_does_not_change_results(monkeypatch):
    texts = [f"alpha{i} beta{i} gamma{i % 5} the delta" for i in range(200)]
    expected = [reference(Fingerprinter().features(t)) for t in texts]
    monkeypatch.setattr(hashing, "HASH_CACHE_MAX", 16)
    hashing.CACHES.clear()
    assert Fingerprinter().many(texts) == expected
    assert Fingerprinter(weighting="binary").many(texts) == [
        reference(Fingerprinter(weighting="binary").features(t)) for t in texts
    ]
    hashing.CACHES.clear()


def test_many_with_workers_matches_serial():
    texts = TEXTS * 5 + [f"text {i} 文本{i}" for i in range(50)]
    fp = Fingerprinter()
    assert fp.many(texts, workers=2, empty=None) == fp.many(texts, empty=None)
    assert Fingerprinter(ngram=2).many(texts, workers=2) == Fingerprinter(ngram=2).many(texts)
    assert fp.many([], workers=2) == [] and fp.many(["cat"], workers=2) == [fp.fingerprint("cat")]


# --------------------------------------------------------------------------- configuration


def test_config_defaults_resolve_and_compare_equal():
    assert Fingerprinter() == Fingerprinter(ngram=1, stopwords=True, weighting="tf", seed=0)
    assert hash(Fingerprinter()) == hash(Fingerprinter(ngram=1))
    assert Fingerprinter(tokenizer="chars") == Fingerprinter(tokenizer="chars", ngram=4, stopwords=False)
    assert Fingerprinter(tokenizer="keywords").top_k == 20
    assert Fingerprinter() != Fingerprinter(ngram=2)
    assert Fingerprinter.preset("default") == Fingerprinter()
    assert Fingerprinter.preset("shingles").ngram == 3


@pytest.mark.parametrize(
    "config",
    [{}, {"ngram": 3}, {"tokenizer": "chars", "ngram": 5}, {"tokenizer": "keywords", "top_k": 5},
     {"weighting": "binary", "seed": 2**64 - 1}, {"algorithm": "simhash-pypi"}, {"normalize": False}],
)
def test_serialisation_round_trip(config):
    fp = Fingerprinter(**config)
    d = fp.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert Fingerprinter.from_dict(d) == fp
    assert Fingerprinter.from_json(fp.to_json()) == fp
    assert Fingerprinter.from_json(fp.to_json()).to_json() == fp.to_json()
    assert Fingerprinter(**config).to_json() == fp.to_json()


def test_tfidf_with_fitted_table():
    corpus = [
        "the cat sat on the mat",
        "the dog sat on the log",
        "cats and dogs are pets",
        "a cat is a small animal",
    ]
    table = IdfTable.fit(corpus)
    assert table.n_docs == 4 and table.df("cat") == 2 and table.df("sat") == 2 and table.df("zebra") == 0
    assert table.idf("cat") == math.log(5 / 3) + 1.0
    assert table.idf("zebra") == math.log(5) + 1.0
    fp = Fingerprinter().fit_idf(corpus)
    assert fp.weighting == "tfidf" and fp.idf == table
    assert fp == Fingerprinter(weighting="tfidf", idf=IdfTable.fit(corpus))
    assert hash(fp) == hash(Fingerprinter(weighting="tfidf", idf=IdfTable.fit(corpus)))
    feats = fp.features("cat cat zebra")
    assert feats == {"cat": 2 * table.idf("cat"), "zebra": table.idf("zebra")}
    assert fp.fingerprint("cat cat zebra") == reference(feats)
    again = Fingerprinter.from_json(fp.to_json())
    assert again == fp and again.fingerprint("cat cat zebra") == fp.fingerprint("cat cat zebra")
    assert IdfTable.from_json(table.to_json()) == table
    assert Fingerprinter.from_dict(json.loads(fp.to_json())).idf == table
    assert set(IdfTable.fit(corpus, min_df=2).to_dict()["df"]) == {"cat", "sat"}
    shingled = Fingerprinter(ngram=2).fit_idf(corpus)
    assert "cat sat" in shingled.idf


def test_keyword_mode_is_deterministic():
    fp = Fingerprinter(tokenizer="keywords", top_k=5)
    text = "我们今天去公园散步，公园里的花开了，天气很好，公园很大。"
    feats = fp.features(text)
    assert 0 < len(feats) <= 5 and all(isinstance(w, float) for w in feats.values())
    assert fp.fingerprint(text) == reference(feats) == fp.fingerprint(text)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "call, exc, name",
    [
        (lambda: simhash(123), TypeError, "text_or_features"),
        (lambda: simhash(None), TypeError, "text_or_features"),
        (lambda: simhash(b"bytes"), TypeError, "text_or_features"),
        (lambda: simhash({"a": "x"}), TypeError, "features"),
        (lambda: simhash({"a": float("nan")}), ValueError, "features"),
        (lambda: simhash({"a": float("inf")}), ValueError, "features"),
        (lambda: simhash({"a": True}), TypeError, "features"),
        (lambda: simhash({1: 1}), TypeError, "features"),
        (lambda: simhash([("a",)]), TypeError, r"features\[0\]"),
        (lambda: simhash([("a", 1), 5]), TypeError, r"features\[1\]"),
        (lambda: simhash(["\ud800"]), ValueError, "features"),
        (lambda: simhash("x", seed=-1), ValueError, "seed"),
        (lambda: simhash("x", seed=2**64), ValueError, "seed"),
        (lambda: simhash("x", seed="1"), TypeError, "seed"),
        (lambda: simhash({"a": 1}, seed=-1), ValueError, "seed"),
        (lambda: simhash("x", bogus=1), TypeError, "bogus"),
        (lambda: simhash({"a": 1}, ngram=2), ValueError, "ngram"),
        (lambda: simhash_features("text"), TypeError, "features"),
        (lambda: Fingerprinter(bogus=1), TypeError, "bogus"),
        (lambda: Fingerprinter(tokenizer="nope"), ValueError, "tokenizer"),
        (lambda: Fingerprinter(tokenizer=1), TypeError, "tokenizer"),
        (lambda: Fingerprinter(ngram=0), ValueError, "ngram"),
        (lambda: Fingerprinter(ngram=2.0), TypeError, "ngram"),
        (lambda: Fingerprinter(ngram=True), TypeError, "ngram"),
        (lambda: Fingerprinter(stopwords="yes"), TypeError, "stopwords"),
        (lambda: Fingerprinter(tokenizer="chars", stopwords=True), ValueError, "stopwords"),
        (lambda: Fingerprinter(weighting="bm25"), ValueError, "weighting"),
        (lambda: Fingerprinter(weighting="tfidf"), ValueError, "idf"),
        (lambda: Fingerprinter(idf=IdfTable({}, 0)), ValueError, "idf"),
        (lambda: Fingerprinter(weighting="tfidf", idf=[1]), TypeError, "idf"),
        (lambda: Fingerprinter(top_k=3), ValueError, "top_k"),
        (lambda: Fingerprinter(tokenizer="keywords", top_k=0), ValueError, "top_k"),
        (lambda: Fingerprinter(normalize=1), TypeError, "normalize"),
        (lambda: Fingerprinter(version=2), ValueError, "version"),
        (lambda: Fingerprinter(algorithm="md5"), ValueError, "algorithm"),
        (lambda: Fingerprinter(algorithm="simhash-pypi", ngram=2), ValueError, "ngram"),
        (lambda: Fingerprinter.from_dict({"tokenizer": "default", "colour": "red"}), ValueError, "colour"),
        (lambda: Fingerprinter.from_dict([1]), TypeError, "data"),
        (lambda: Fingerprinter.preset("nope"), ValueError, "name"),
        (lambda: Fingerprinter().fingerprint(b"x"), TypeError, "text"),
        (lambda: Fingerprinter().fingerprint(None), TypeError, "text"),
        (lambda: Fingerprinter().many("abc"), TypeError, "texts"),
        (lambda: Fingerprinter().many(["a", 1]), TypeError, r"texts\[1\]"),
        (lambda: Fingerprinter().many(["a"], workers=0), ValueError, "workers"),
        (lambda: Fingerprinter().many(["a"], workers="2"), TypeError, "workers"),
        (lambda: IdfTable({"a": 5}, 2), ValueError, "df"),
        (lambda: IdfTable({"a": 1}, -1), ValueError, "n_docs"),
        (lambda: IdfTable.fit("abc"), TypeError, "texts"),
        (lambda: IdfTable.from_dict({"n_docs": 1, "df": {}, "x": 1}), ValueError, "x"),
    ],
)
def test_bad_input(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


def test_exports():
    assert simdb.simhash is simhash and simdb.Fingerprinter is Fingerprinter
    assert simdb.simhash_features is simhash_features and simdb.IdfTable is IdfTable
    assert T.normalize("A") == "a"
