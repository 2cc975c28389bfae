"""simdb.core.fingerprint.weighting: IdfTable counts and idf values by hand, value semantics, and apply_weighting."""

from __future__ import annotations

import json
import math
import pickle

import pytest

from simdb import Fingerprinter
from simdb.core.fingerprint.weighting import WEIGHTINGS, IdfTable, apply_weighting


def test_fit_counts_documents_not_occurrences():
    texts = ["cat cat dog", "dog bird", "the fish", "cat"]
    t = IdfTable.fit(texts)  # default Fingerprinter: words, stopwords ("the") dropped
    assert t.n_docs == 4 and len(t) == 4
    assert {f: t.df(f) for f in ("cat", "dog", "bird", "fish", "the", "zebra")} == {
        "cat": 2, "dog": 2, "bird": 1, "fish": 1, "the": 0, "zebra": 0}
    assert "cat" in t and "the" not in t and 5 not in t
    assert t.to_dict() == {"n_docs": 4, "df": {"bird": 1, "cat": 2, "dog": 2, "fish": 1}}


def test_fit_min_df_and_fingerprinter_features():
    texts = ["cat cat dog", "dog bird", "cat"]
    assert IdfTable.fit(texts, min_df=2).to_dict() == {"n_docs": 3, "df": {"cat": 2, "dog": 2}}
    assert IdfTable.fit(texts, min_df=3).to_dict() == {"n_docs": 3, "df": {}}
    bigrams = IdfTable.fit(texts, Fingerprinter(ngram=2))
    assert bigrams.to_dict() == {"n_docs": 3, "df": {"cat cat": 1, "cat dog": 1, "dog bird": 1, "cat": 1}}
    assert IdfTable.fit([]).to_dict() == {"n_docs": 0, "df": {}}


def test_idf_values_by_hand():
    t = IdfTable({"a": 1, "b": 3}, n_docs=3)
    assert t.idf("a") == math.log(4 / 2) + 1.0 == pytest.approx(1.6931471805599454, abs=0)
    assert t.idf("b") == 1.0  # in every document: log(1) + 1
    assert t.idf("zzz") == math.log(4) + 1.0 == pytest.approx(2.386294361119891, abs=0)
    assert IdfTable({}, 0).idf("x") == 1.0


def test_apply_weighting_each_scheme():
    counts = {"a": 1, "b": 3, "c": 2}
    t = IdfTable({"a": 1, "b": 3}, n_docs=3)
    assert apply_weighting(dict(counts), "tf") == counts
    assert apply_weighting(dict(counts), "binary") == {"a": 1, "b": 1, "c": 1}
    assert apply_weighting(dict(counts), "logtf") == {"a": 1.0, "b": 1.0 + math.log(3), "c": 1.0 + math.log(2)}
    assert apply_weighting(dict(counts), "tfidf", t) == {
        "a": 1 * (math.log(2) + 1.0), "b": 3 * 1.0, "c": 2 * (math.log(4) + 1.0)}
    with pytest.raises(ValueError, match="idf table"):
        apply_weighting(dict(counts), "tfidf")
    with pytest.raises(ValueError, match="weighting must be one of"):
        apply_weighting(dict(counts), "bm25")
    assert WEIGHTINGS == ("tf", "binary", "logtf", "tfidf")


@pytest.mark.parametrize("df, n, exc", [
    ({"a": 1}, -1, ValueError), ({"a": 1}, True, TypeError), ({"a": 1}, 1.0, TypeError),
    ({"a": 0}, 3, ValueError), ({"a": 4}, 3, ValueError), ({"a": True}, 3, TypeError),
    ({"a": 1.0}, 3, TypeError), ({1: 1}, 3, TypeError), ([("a", 1)], 3, TypeError),
])
def test_bad_tables(df, n, exc):
    with pytest.raises(exc):
        IdfTable(df, n)


def test_boundaries_accepted():
    assert IdfTable({"a": 3}, 3).df("a") == 3 and IdfTable({"a": 1}, 1).df("a") == 1
    assert IdfTable({}, 0).n_docs == 0


def test_fit_rejects_bad_arguments():
    with pytest.raises(TypeError):
        IdfTable.fit("one text")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        IdfTable.fit(["a", 2])
    with pytest.raises(TypeError):
        IdfTable.fit(["a"], fingerprinter="default")
    with pytest.raises(ValueError, match="min_df"):
        IdfTable.fit(["a"], min_df=0)
    with pytest.raises(TypeError, match="min_df"):
        IdfTable.fit(["a"], min_df=True)


def test_value_semantics_and_serialisation():
    a = IdfTable({"x": 1, "y": 2}, 2)
    b = IdfTable({"y": 2, "x": 1}, 2)
    assert a == b and hash(a) == hash(b) and a != IdfTable({"x": 1, "y": 2}, 3)
    assert a != IdfTable({"x": 1}, 2) and (a == "x") is False
    assert repr(a) == "IdfTable(n_docs=2, features=2)"
    assert a.to_json() == '{"df":{"x":1,"y":2},"n_docs":2}'
    assert IdfTable.from_json(a.to_json()) == a == IdfTable.from_dict(json.loads(a.to_json()))
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(AttributeError, match="immutable"):
        a.foo = 1
    with pytest.raises(ValueError, match="unknown"):
        IdfTable.from_dict({"n_docs": 1, "df": {}, "extra": 1})
    with pytest.raises(ValueError, match="both"):
        IdfTable.from_dict({"n_docs": 1})
    with pytest.raises(ValueError, match="both"):
        IdfTable.from_dict({"df": {}})
    with pytest.raises(TypeError):
        IdfTable.from_dict([("n_docs", 1)])
    with pytest.raises(TypeError):
        IdfTable.from_json(1)


def test_numpy_counts_are_stored_as_ints():
    import numpy as np

    t = IdfTable({"a": np.int64(1)}, np.int64(3))
    assert type(t.n_docs) is int and type(t.df("a")) is int
    assert t.to_json() == '{"df":{"a":1},"n_docs":3}'  # numpy ints are not JSON-serialisable
