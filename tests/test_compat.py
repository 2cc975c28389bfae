"""simdb.compat reproduces the PyPI ``simhash`` package (2.x) exactly."""

from __future__ import annotations

import pytest
import simhash as simhash_pkg  # test-only dependency (pyproject [test] extra)
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simdb import Fingerprinter, simhash  # noqa: E402
from simdb.compat import pypi_hash, pypi_simhash, pypi_tokenize  # noqa: E402


def package_value(value):
    return simhash_pkg.Simhash(value).value


def same_outcome(value):
    """Both raise TypeError, or both give the same value; package overflow (NumPy 2) is skipped."""
    try:
        expected = package_value(value)
    except OverflowError:
        assume(False)
    except TypeError:
        with pytest.raises(TypeError):
            pypi_simhash(value)
        return
    assert pypi_simhash(value) == expected


TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8", exclude_categories=("Cs",)),
        st.sampled_from("abcdefghij ABC 中文分词测试，。！ \t\n_-1234"),
    ),
    max_size=300,
)


@given(TEXT)
@settings(max_examples=400, deadline=None)
def test_text_matches_package(text):
    assert pypi_simhash(text) == package_value(text)


@pytest.mark.parametrize(
    "text",
    ["", "a", "ab", "abc", "abcd", "  ", "!!!", "How are you? I Am fine. blar blar blar blar blar Thanks.",
     "你好，世界！今天天气很好", "ÀÉÎ õü ß ǅ", "aaaa" * 60, "x" * 250, "\u9fcc\u9fcd\u4e00"],
)
def test_text_examples(text):
    assert pypi_simhash(text) == package_value(text)
    assert Fingerprinter.preset("simhash-pypi").fingerprint(text) == package_value(text)


def test_quirks():
    # empty text is one feature '' (not 0); short text is one feature
    assert pypi_tokenize("") == [""]
    assert pypi_tokenize("ab") == ["ab"]
    assert pypi_tokenize("Hello, World") == ["hell", "ello", "llow", "lowo", "owor", "worl", "orld"]
    assert pypi_simhash("") == pypi_hash("") != 0
    # no features at all gives 0
    assert pypi_simhash([]) == 0 == package_value([])
    # a str item takes the previous pair's weight
    assert pypi_simhash([("a", 3), "b"]) == pypi_simhash([("a", 3), ("b", 3)]) == package_value([("a", 3), "b"])


FEATURE = st.text(max_size=8)
WEIGHT = st.one_of(
    st.integers(min_value=-60, max_value=255),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    st.sampled_from([0.1, 0.2, 0.3, -0.1, 0.5, 1.5, 50, 51, 0, -1]),
)
ITEM = st.one_of(FEATURE, st.tuples(FEATURE, WEIGHT))


@given(st.lists(ITEM, max_size=40))
@settings(max_examples=400, deadline=None)
def test_feature_lists_match_package(items):
    same_outcome(items)


@given(st.dictionaries(FEATURE, WEIGHT, max_size=40))
@settings(max_examples=300, deadline=None)
def test_feature_dicts_match_package(feats):
    same_outcome(feats)


@given(st.lists(st.tuples(FEATURE, st.integers(min_value=1, max_value=3)), min_size=150, max_size=450))
@settings(max_examples=30, deadline=None)
def test_long_feature_lists_cross_batches(items):
    # more than the package's batch size (200) of batched and large weights
    items = [(f, w * 40) if i % 7 == 0 else (f, w) for i, (f, w) in enumerate(items)]
    same_outcome(items)


@given(st.lists(st.tuples(FEATURE, st.floats(min_value=-10, max_value=10, allow_nan=False)), min_size=190,
                max_size=420))
@settings(max_examples=20, deadline=None)
def test_many_float_weights_same_summation_order(items):
    same_outcome(items)


def test_large_int_weights_use_intended_arithmetic():
    # NumPy 2 makes the package overflow on int weights > 255; NumPy 1 gave this value.
    feats = {"a": 300, "b": 200, "c": 1}
    expected = 0
    for bit in range(64):
        s = sum(w for f, w in feats.items() if (pypi_hash(f) >> bit) & 1)
        if s > sum(feats.values()) / 2:
            expected |= 1 << bit
    assert pypi_simhash(feats) == expected


def test_preset_configuration():
    fp = Fingerprinter.preset("simhash-pypi")
    assert fp == Fingerprinter(algorithm="simhash-pypi")
    assert Fingerprinter.from_json(fp.to_json()) == fp
    texts = ["How are you? I am fine.", "", "中文文本测试一下", "x"]
    assert fp.many(texts) == [package_value(t) for t in texts]
    assert fp.many(texts, workers=2) == [package_value(t) for t in texts]
    assert simhash("How are you?", algorithm="simhash-pypi") == package_value("How are you?")
    assert simhash([("a", 2), "b"], algorithm="simhash-pypi") == package_value([("a", 2), "b"])
    assert fp.fingerprint_features({"x": 1.5, "y": 2}) == package_value({"x": 1.5, "y": 2})


@pytest.mark.parametrize(
    "value, exc",
    [(123, TypeError), (b"x", TypeError), ([("a", "w")], TypeError), ([(1, 2)], TypeError), ([("a",)], TypeError)],
)
def test_bad_input(value, exc):
    with pytest.raises(exc):
        pypi_simhash(value)
