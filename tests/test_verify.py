"""Verified collections (issue 13): sketch maths and every answer against brute force, through PostgreSQL."""

from __future__ import annotations

import heapq
import random
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from simdb.core import sketch as S
from simdb.core.bits import hamming, to_signed
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


def _corpus(rng: random.Random) -> list[str]:
    """Short texts (<= 40 tokens, so a sketch is the whole set and Jaccard is exact) with
    planted light and heavy edits of a few bases."""
    bases = [[rng.choice(VOCAB) for _ in range(rng.randint(1, 40))] for _ in range(4)]
    texts = [" ".join(b) for b in bases]
    for b in bases:
        for _ in range(rng.randint(0, 4)):
            w = list(b)
            for _ in range(rng.randint(0, 3)):
                if w:
                    w[rng.randrange(len(w))] = rng.choice(VOCAB)
            texts.append(" ".join(w))
    texts.append("")  # no words: never verified
    return texts


def _brute(ix: SimhashIndex, stored: dict[str, str], query: str, t: float, hk: int) -> list[tuple]:
    qfp = ix.fingerprinter.fingerprint(query, empty=None)
    qs = set(S.token_shingles(query))
    out = []
    if qfp is None:
        return out
    for key, txt in stored.items():
        fp = ix.fingerprinter.fingerprint(txt, empty=None)
        if fp is None:
            continue
        d = hamming(fp, qfp)
        if d > max(ix.verifier.k, hk):
            continue
        ss = set(S.token_shingles(txt))
        if not ss or not qs:
            if d <= hk:
                out.append((key, d, None))
            continue
        # the definition: the bottom-k Jaccard of the two sketches (the exact Jaccard when the two sets
        # have at most ``size`` values together, as most of these short texts do)
        size = ix.verifier.size
        j = S.sketch_jaccard(sorted(ss)[:size], sorted(qs)[:size], size)
        assert j is not None
        if j >= t:
            out.append((key, d, j))
    out.sort(key=lambda r: (r[2] is None, -(r[2] or 0), r[1], r[0]))
    return out


@pytest.fixture(scope="module")
def vix(database_url):
    """A verified collection with the Hamming candidates of K = 11 (one created before band keys,
    issue 26: its config has no "bands"); banded ones are tested in tests/test_bands_store.py."""
    name = "verified-" + uuid.uuid4().hex[:8]
    with SimhashIndex(database_url, name) as new:
        with new.engine.begin() as c:
            c.execute(text("UPDATE simdb_collections SET config = config - 'bands' WHERE id = :c"), {"c": new.collection_id})
    ix = SimhashIndex(database_url, name)
    assert not ix.bands
    yield ix
    ix.close()


@SLOW
@given(st.randoms(use_true_random=False), st.sampled_from([0.2, 0.5, 0.8, 0.9, 1.0]), st.integers(0, 11))
def test_near_add_if_unique_and_sql_equal_brute_force(vix, database_url, rng, t, hk):
    assert vix.verifier is not None and vix.verifier.k == S.DEFAULT_K
    vix.clear()
    texts = _corpus(rng)
    stored = {f"k{i}": x for i, x in enumerate(texts)}
    if rng.random() < 0.5:
        vix.add_many(stored.items())
    else:
        for k, x in stored.items():
            vix.add(k, x)
    queries = [texts[0], texts[-2], " ".join(rng.choice(VOCAB) for _ in range(rng.randint(1, 30)))]
    many = vix.near_many(queries, k=hk, min_jaccard=t)
    for q, got_many in zip(queries, many):
        want = _brute(vix, stored, q, t, hk)
        got = [(m.key, m.distance, m.jaccard) for m in vix.near(q, k=hk, min_jaccard=t)]
        assert got == [(k, d, pytest.approx(j) if j is not None else None) for k, d, j in want]
        assert [(m.key, m.distance, m.jaccard) for m in got_many] == got
        fp = vix.fingerprinter.fingerprint(q, empty=None)
        if fp is not None:
            with vix.engine.connect() as c:
                rows = c.execute(text("SELECT key, distance, jaccard FROM simdb_near_verified(:n, :fp, :s, :t, :hk)"),
                                 {"n": vix.collection, "fp": to_signed(fp), "s": vix.verifier.sketch(q), "t": t,
                                  "hk": hk}).all()
            assert [tuple(r) for r in rows] == got
        res = vix.add_if_unique("probe", q, k=hk, min_jaccard=t)
        assert res.inserted == (not want)
        assert [(m.key, m.distance, m.jaccard) for m in res.matches] == got
        vix.remove("probe")
    # fingerprint queries mixed in: answered by Hamming distance <= k, like near(fp, k)
    fps = [f for f in (vix.fingerprinter.fingerprint(q, empty=None) for q in queries) if f is not None]
    mixed = [x for pair in zip(queries, fps) for x in pair]
    for q, got_many in zip(mixed, vix.near_many(mixed, k=hk, min_jaccard=t)):
        want_one = vix.near(q, k=hk, min_jaccard=None if isinstance(q, int) else t)
        assert [(m.key, m.distance, m.jaccard) for m in got_many] == [(m.key, m.distance, m.jaccard) for m in want_one]
        if isinstance(q, int):
            assert all(m.distance <= hk and m.jaccard is None for m in got_many)


@SLOW
@given(st.randoms(use_true_random=False), st.sampled_from([0.3, 0.8, 1.0]), st.integers(0, 11))
def test_pairs_and_clusters_equal_brute_force(vix, rng, t, hk):
    vix.clear()
    texts = _corpus(rng)
    stored = {f"k{i}": x for i, x in enumerate(texts)}
    vix.add_many(stored.items())
    vix.add("fp-only", fp=vix.fingerprinter.fingerprint(texts[0], empty=None) or 0)
    order = list(stored) + ["fp-only"]
    want = set()
    for i, a in enumerate(order):
        for b in order[i + 1:]:
            if a == "fp-only" or b == "fp-only":
                fa = vix.get(a).fp
                fb = vix.get(b).fp
                if fa is not None and fb is not None and hamming(fa, fb) <= hk:
                    want.add((a, b))
                continue
            for _key, _, _ in _brute(vix, {b: stored[b]}, stored[a], t, hk):
                want.add((a, b))
    got = {(p.key_a, p.key_b) for p in vix.pairs(k=hk, min_jaccard=t)}
    assert got == want
    members = {k for c in vix.clusters(k=hk, min_jaccard=t) for k in c.keys}
    assert members == {k for p in want for k in p}


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


def test_fingerprint_rows_and_queries_answer_by_hamming(vix):
    vix.clear()
    base = 0x0123_4567_89AB_CDEF
    vix.add("a", fp=base)
    vix.add("b", fp=base ^ 0b1111)
    assert [(m.key, m.distance, m.jaccard) for m in vix.near(base, k=3)] == [("a", 0, None)]
    assert [m.key for m in vix.near(base, k=4)] == ["a", "b"]
    assert [(p.key_a, p.key_b) for p in vix.pairs(k=4)] == [("a", "b")]
    assert list(vix.pairs(k=3)) == []


@given(st.lists(st.tuples(st.sets(st.integers(-40, 40), max_size=30), st.sets(st.integers(-40, 40), max_size=30)),
                max_size=20), st.integers(1, 40))
def test_sketch_jaccard_many_equals_one_by_one(pairs, k):
    a, _ = SC.sketch_matrix([S.sketch_of_set(x, k) for x, _ in pairs], k)
    b, _ = SC.sketch_matrix([S.sketch_of_set(y, k) for _, y in pairs], k)
    got = SC.sketch_jaccard_many(a, b, k)
    for (x, y), g in zip(pairs, got.tolist()):
        want = S.sketch_jaccard(S.sketch_of_set(x, k), S.sketch_of_set(y, k), k)
        assert (g != g) if want is None else g == pytest.approx(want, abs=1e-12)
