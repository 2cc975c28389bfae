"""Verified collections (issue 13): sketch maths against brute force, and through PostgreSQL (the banded
candidate stage against brute force: tests/test_bands_store.py)."""

from __future__ import annotations

import heapq
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from simdb.core import sketch as S
from simdb.core.sketch import compare as SC
from simdb.errors import CollectionConfigError, InvalidArgumentError
from simdb.index import SimhashIndex

VOCAB = [f"w{i}" for i in range(24)] + list("中文字词语句")
SLOW = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))

int4 = st.integers(-(2**31), 2**31 - 1)


def brute_bottom_k(a: set[int], b: set[int], k: int) -> float:
    """The definition: of the k smallest values of the union of the FULL sets, the share in both."""
    low = sorted(a | b)[:k]
    return sum(1 for v in low if v in a and v in b) / len(low)


# ------------------------------------------------------------------ pure maths
@given(st.sets(int4, min_size=1, max_size=300), st.sets(int4, min_size=1, max_size=300), st.integers(1, 200))
def test_sketch_jaccard_equals_bottom_k_of_full_sets(a, b, k):
    got = S.sketch_jaccard(S.sketch_of_set(a, k), S.sketch_of_set(b, k), k)
    assert got == pytest.approx(brute_bottom_k(a, b, k), abs=0)
    if len(a | b) <= k:  # small sets: the exact Jaccard
        assert got == len(a & b) / len(a | b)


def test_sketch_of_set_and_empty():
    assert S.sketch_of_set([5, 1, 1, 3, -7], 3) == [-7, 1, 3]
    assert S.sketch_jaccard([], [1]) is None and S.sketch_jaccard(None, [1]) is None
    assert S.jaccard([], []) is None


def test_tokens_mix_han_and_words():
    assert S.tokens("Hello 世界, ＡＢＣ_x 2024年!") == ["hello", "世", "界", "abc", "x", "2024", "年"]


@given(st.lists(st.sampled_from(VOCAB), min_size=0, max_size=50))
def test_sketch_is_bottom_k_of_token_shingles(words):
    t = " ".join(words)
    full = S.token_shingles(t)
    assert full == sorted(set(full))
    assert S.sketch(t, 16) == full[:16] == heapq.nsmallest(16, full)


def test_explain_shared_and_differing_words():
    e = S.explain("the quick brown fox", "the quick red fox")
    assert e["shared"] == ["the", "quick", "fox"] and e["only_a"] == ["brown"] and e["only_b"] == ["red"]
    assert e["jaccard"] == S.jaccard(S.token_shingles("the quick brown fox"), S.token_shingles("the quick red fox")) > 0
    assert S.explain("the quick brown fox", "the quick red fox", S.SCHEME_V3)["jaccard"] == 0.0  # no common token 3-gram


def test_judge_without_sketch_uses_distance():
    v = S.Verifier()
    assert v.judge(None, [1, 2], 3, 0.8, 3) == (True, None)
    assert v.judge(None, [1, 2], 4, 0.8, 3) == (False, None)
    assert v.judge([1, 2], [1, 2], 11, 0.8, 3) == (True, 1.0)


# ------------------------------------------------------------------ through PostgreSQL
@pytest.fixture(scope="module")
def eng(database_url):
    e = create_engine(database_url)
    yield e
    e.dispose()


@SLOW
@given(st.sets(st.integers(-60, 60), max_size=40), st.sets(st.integers(-60, 60), max_size=40), st.integers(1, 50))
def test_sql_sketch_jaccard_equals_python(eng, a, b, k):
    sa, sb = S.sketch_of_set(a, k), S.sketch_of_set(b, k)
    with eng.connect() as c:
        got = c.execute(text("SELECT simdb_sketch_jaccard(CAST(:a AS int4[]), CAST(:b AS int4[]), :k)"),
                        {"a": sa, "b": sb, "k": k}).scalar()
    want = S.sketch_jaccard(sa, sb, k)
    assert got == (None if want is None else pytest.approx(want, abs=1e-12))


def test_defaults_and_options(database_url):
    name = "opts-" + uuid.uuid4().hex[:8]
    with SimhashIndex(database_url, name) as v:
        assert v.config["verify"] == {"scheme": S.SCHEME, "sketch": S.SKETCH_SIZE, "k": 11, "min_jaccard": 0.8}
    with pytest.raises(CollectionConfigError):
        SimhashIndex(database_url, name, verify=False)
    with SimhashIndex(database_url, name + "-h", verify=False) as h:
        assert h.verifier is None
        h.add("a", "one two three four")
        assert [m.jaccard for m in h.near("one two three four")] == [None]
        with pytest.raises(ValueError):
            h.near("one two three four", verify=True)
    with pytest.raises(CollectionConfigError):
        SimhashIndex(database_url, name + "-h", verify=True)
    with pytest.raises(ValueError):
        SimhashIndex(database_url, name + "-x", verify=True, jaccard=True)


def test_jaccard_true_names_the_conversion(database_url, collection_name):
    """jaccard=True asked for the legacy MinHash-band store, retired by issue 28: a typed error naming
    the default that replaced it and the conversion, before any collection is created."""
    for kwargs in ({"jaccard": True}, {"jaccard": True, "verify": True}):
        with pytest.raises(InvalidArgumentError, match=r"jaccard=True.*verified.*simdb convert"):
            SimhashIndex(database_url, collection_name + "-legacy", **kwargs)
    with SimhashIndex(database_url, collection_name + "-legacy", jaccard=False) as ix:  # False: nothing to refuse
        assert ix.verifier is not None
    for name in ("MinHasher", "JaccardPair"):  # the legacy store's public names say what replaced them
        with pytest.raises(ImportError, match="removed with the legacy MinHash-band store"):
            exec(f"from simdb import {name}", {})


@given(st.lists(st.tuples(st.sets(st.integers(-40, 40), max_size=30), st.sets(st.integers(-40, 40), max_size=30)),
                max_size=20), st.integers(1, 40))
def test_sketch_jaccard_many_equals_one_by_one(pairs, k):
    a, _ = SC.sketch_matrix([S.sketch_of_set(x, k) for x, _ in pairs], k)
    b, _ = SC.sketch_matrix([S.sketch_of_set(y, k) for _, y in pairs], k)
    got = SC.sketch_jaccard_many(a, b, k)
    for (x, y), g in zip(pairs, got.tolist()):
        want = S.sketch_jaccard(S.sketch_of_set(x, k), S.sketch_of_set(y, k), k)
        assert (g != g) if want is None else g == pytest.approx(want, abs=1e-12)
