"""Fuzzing the public API's arguments: a typed error (a SimdbError) or a correct answer, never anything else.

Issue 15: raw driver errors (``UnicodeEncodeError``, ``ProgramLimitExceeded``, a
COPY buffer offset) leaked from the API. Hypothesis throws arbitrary values at
every argument of ``SimhashIndex``'s methods; a call either raises a
:class:`simdb.errors.SimdbError` or returns what a brute-force model of the
collection says it must (Hamming distances over every stored fingerprint).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdb import SimhashIndex
from simdb.core.bits import hamming
from simdb.errors import SimdbError

texts = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from(["a", "b", " ", "\x00", "\ud800", "\udc80", "é", "中", "\n"]), max_size=20),
    st.sampled_from(["the quick brown fox", "the quick brown fox!", "lazy dogs sleep", ""]),
)
keys = st.one_of(texts, st.integers(-(2**70), 2**70), st.sampled_from(["k1", "k2", "k3"]))
fps = st.one_of(st.integers(-(2**65), 2**65), st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2**64 - 1, 2**63]))
anything = st.one_of(
    st.none(), st.booleans(), st.floats(allow_nan=True), st.binary(max_size=8), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2), st.just(object()), st.just(math.inf),
)
small_ints = st.one_of(st.integers(-3, 14), st.none())
metas = st.one_of(st.none(), st.dictionaries(st.text(max_size=5), st.one_of(texts, st.integers(), st.floats()), max_size=2),
                  texts, st.just({"x": float("nan")}), st.just(object()))

calls = st.one_of(
    st.tuples(st.just("add"), st.one_of(keys, anything), st.one_of(texts, st.none(), anything),
              st.one_of(fps, st.none(), anything), metas),
    st.tuples(st.just("near"), st.one_of(texts, fps, anything), st.one_of(small_ints, anything),
              st.one_of(small_ints, anything)),
    st.tuples(st.just("near_many"), st.one_of(st.lists(st.one_of(texts, fps), max_size=4), texts, anything),
              st.one_of(small_ints, anything)),
    st.tuples(st.just("get"), st.one_of(keys, anything)),
    st.tuples(st.just("remove"), st.one_of(keys, anything)),
    st.tuples(st.just("add_many"), st.lists(st.one_of(
        st.tuples(keys, texts), st.fixed_dictionaries({"key": keys, "fp": fps}),
        st.fixed_dictionaries({"key": keys, "text": texts, "meta": metas}), anything), max_size=4)),
)


def _expected_near(model: dict[str, int | None], q: int, k: int, limit: int | None) -> list[tuple[str, int]]:
    hits = sorted((hamming(fp, q), key) for key, fp in model.items() if fp is not None and hamming(fp, q) <= k)
    hits = [(key, d) for d, key in hits]
    return hits if limit is None else hits[:limit]


@pytest.fixture(scope="module")
def fuzz_index(database_url):
    with SimhashIndex(database_url, "fuzz-api") as ix:
        yield ix


@given(st.lists(calls, min_size=1, max_size=6))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_typed_error_or_correct_answer(fuzz_index, script):
    ix = fuzz_index
    ix.clear()
    model: dict[str, int | None] = {}
    for call in script:
        name, *args = call
        try:
            if name == "add":
                key, text, fp, meta = args
                got = ix.add(key, text, fp=fp, meta=meta)
                model[str(key)] = got
                if fp is not None:
                    assert got == fp
                else:
                    assert got == ix.fingerprinter.fingerprint(text, empty=None)
            elif name == "near":
                query, k, limit = args
                got = ix.near(query, k=k, limit=limit)
                q = query if isinstance(query, int) else ix.fingerprinter.fingerprint(query, empty=None)
                want = [] if q is None else _expected_near(model, q, 3 if k is None else k, limit)
                assert [(m.key, m.distance) for m in got] == want
            elif name == "near_many":
                queries, k = args
                got = ix.near_many(queries, k=k)
                assert len(got) == len(queries)
                for query, matches in zip(queries, got):
                    q = query if isinstance(query, int) else ix.fingerprinter.fingerprint(query, empty=None)
                    want = [] if q is None else _expected_near(model, q, 3 if k is None else k, None)
                    assert [(m.key, m.distance) for m in matches] == want
            elif name == "get":
                (key,) = args
                got = ix.get(key)
                want = model.get(str(key), "missing")
                assert (got is None) == (want == "missing") and (got is None or got.fp == want)
            elif name == "remove":
                (key,) = args
                assert ix.remove(key) == (str(key) in model)
                model.pop(str(key), None)
            elif name == "add_many":
                (items,) = args
                n = ix.add_many(items)
                assert n == len(items)
                for item in items:  # the last item with a key wins
                    key, text, fp = (item[0], item[1], None) if isinstance(item, tuple) else (
                        item["key"], item.get("text"), item.get("fp"))
                    model[str(key)] = fp if fp is not None else ix.fingerprinter.fingerprint(text, empty=None)
        except SimdbError:
            continue  # a typed error is a fine answer to bad input
        assert len(ix) == len(model)
