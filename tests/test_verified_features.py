"""The verified features: the ``tok3-xxh64-v3`` scheme (the sketches of the verified models' rule 1),
the batched fingerprints and sketches of verified loads, the verified candidate fingerprint, and the
vectorised verification.

The scheme is pinned by a from-scratch reference (plain Python integers, no numpy); the batched
paths must equal the per-text computations, for every kind of text.
"""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine
from sqlalchemy import text as sql

from simdb.core import sketch as S
from simdb.core.fingerprint import Fingerprinter
from simdb.core.sketch import compare as SC
from simdb.core.sketch import features as VF
from simdb.errors import CollectionConfigError
from simdb.index import SimhashIndex

MASK = (1 << 64) - 1
MUL = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9)


def fmix64(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & MASK
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & MASK
    return x ^ (x >> 33)


def reference_v3(text: str) -> list[int]:
    """The scheme as documented: xxh64 (seed 0) per token, each 3-gram's hashes times odd
    multipliers summed mod 2**64, fmix64, high 32 bits as a signed int; 1-2 tokens: one gram."""
    hs = [xxhash.xxh64_intdigest(t.encode("utf-8"), 0) for t in S.tokens(text)]
    if not hs:
        return []
    grams = [hs] if len(hs) < 3 else [hs[i : i + 3] for i in range(len(hs) - 2)]
    out = set()
    for g in grams:
        v = fmix64(sum(h * m for h, m in zip(g, MUL)) & MASK) >> 32
        out.add(v - (1 << 32) if v >= 1 << 31 else v)
    return sorted(out)


WORDS = ["the", "cat", "Sat", "on", "mat", "foo_bar", "naïve", "Ünïcode", "x1", "2024", "ＡＢＣ", "don't"]
HAN = list("中文字词语句数据库")
PIECES = st.sampled_from(WORDS + HAN + [" ", " ", ", ", ". ", "\n", "_", "—", "!", "ｶﾅ", "한국"])
TEXTS = st.lists(PIECES, min_size=0, max_size=60).map("".join)

FAST = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


@FAST
@given(TEXTS)
def test_v3_equals_the_reference(t):
    assert S.token_shingles(t, S.SCHEME_V3) == reference_v3(t)
    assert S.sketch(t, 8, S.SCHEME_V3) == reference_v3(t)[:8]


def test_v3_is_order_sensitive_and_unknown_schemes_are_refused():
    assert S.sketch("a b c", scheme=S.SCHEME_V3) != S.sketch("c b a", scheme=S.SCHEME_V3)
    assert S.SCHEMES == (S.SCHEME, S.SCHEME_V3)
    for retired in ("tok3-xxh32-v2", "tok3-nope"):
        with pytest.raises(ValueError, match="scheme"):
            S.sketch("one two three", scheme=retired)


@FAST
@given(st.lists(TEXTS, min_size=1, max_size=12), st.sampled_from([4, 16, 256]))
def test_batched_features_equal_the_per_text_ones(texts, size):
    """Whatever the text (ASCII or not, "_" or not, no word characters), the batched fingerprints and
    sketches of a load are Fingerprinter.fingerprint and Verifier.sketch exactly, at any sketch size."""
    verifier = S.Verifier(size=size)
    for fingerprinter in (VF.candidate_fingerprinter(), Fingerprinter()):
        fps, sketches = VF.fingerprints_and_sketches(texts, fingerprinter, verifier)
        assert fps == [fingerprinter.fingerprint(t, empty=None) for t in texts]
        want = [verifier.sketch(t) for t in texts]
        assert [sketches.row(i).tolist() or None for i in range(len(texts))] == want
        assert VF.sketch_texts(sketches) == [None if s is None else "{" + ",".join(map(str, s)) + "}" for s in want]
    with pytest.raises(ValueError, match="tok3-xxh64-v3"):
        VF.fingerprints_and_sketches(texts, Fingerprinter(), S.Verifier(scheme=S.SCHEME_V3))


@pytest.mark.parametrize(
    ("verify", "bands", "named"),
    [({"scheme": "tok3-xxh64-v3", "sketch": 384, "k": 9, "min_jaccard": 0.8}, None, "tok3-xxh64-v3"),
     ({"scheme": "tok3-xxh32-v2", "sketch": 384, "k": 11, "min_jaccard": 0.8}, "oph-b14r5-v2", "tok3-xxh32-v2"),
     (None, "minhash-b14r5-v1", "minhash-b14r5-v1"),
     (None, "oph-b14r5-v2", "oph-b14r5-v2")],
)
def test_a_collection_of_a_retired_scheme_is_refused(database_url, verify, bands, named):
    """Schemes only development builds after 0.1.0 wrote: opening such a collection names it, its scheme,
    and the way out (re-create it; simdb convert, which opens it first, cannot)."""
    name = "retired-" + uuid.uuid4().hex[:8]
    with SimhashIndex(database_url, name) as ix, ix.engine.begin() as c:
        config = dict(ix.config)
        config["verify"] = verify or config["verify"]
        config["bands"] = bands or config["bands"]
        c.execute(sql("UPDATE simdb_collections SET config = CAST(:c AS jsonb) WHERE name = :n"),
                  {"c": json.dumps(config), "n": name})
    with pytest.raises(CollectionConfigError, match=rf"{name}.*{named}.*Re-create.*simdb drop -c {name}"):
        SimhashIndex(database_url, name)
    engine = create_engine(database_url)
    with engine.begin() as c:
        c.execute(sql("DELETE FROM simdb_collections WHERE name = :n"), {"n": name})
    engine.dispose()


# ------------------------------------------------------------------ the verified candidate fingerprint
def reference_fingerprint(t: str, p: int, q: int) -> int:
    """From scratch: the sketch's tokens, xxh64 each, weight p for a shipped stopword occurrence
    and q for any other, bit i set iff the weights with bit i set are more than half the total."""
    from simdb.core.tokenize import stopwords

    stop = stopwords()
    toks = S.tokens(t)
    total = sum(p if w in stop else q for w in toks)
    fp = 0
    for i in range(64):
        on = sum((p if w in stop else q) for w in toks if xxhash.xxh64_intdigest(w.encode("utf-8"), 0) >> i & 1)
        if 2 * on > total:
            fp |= 1 << i
    return fp


@FAST
@given(TEXTS.filter(lambda t: bool(S.tokens(t))), st.sampled_from([(2, 3), (1, 2), (3, 16)]))
def test_stopword_weight_fingerprint_equals_the_reference(t, pq):
    p, q = pq
    f = Fingerprinter(tokenizer="tokens", stopwords=p / q)
    assert f.stopword_weights == (p, q)
    want = reference_fingerprint(t, p, q)
    assert f.fingerprint(t) == want
    assert f.fingerprint_features(f.features(t)) == want  # the feature path: integer weights p, q


def test_verified_preset_and_long_texts(monkeypatch):
    f = Fingerprinter.preset("verified")
    assert f == VF.candidate_fingerprinter() and f.tokenizer == "tokens" and f.stopwords == 2 / 3
    assert Fingerprinter.from_json(f.to_json()) == f
    text = ("The quick brown fox and the lazy dog, 中文的句子 mixed. " * 40).strip()
    whole = f.fingerprint(text)
    from simdb.core.fingerprint import long_texts

    monkeypatch.setattr(long_texts, "SEGMENT_CHARS", 64)  # the bounded-memory path, piece by piece
    assert f.fingerprint(text) == whole == reference_fingerprint(text, 2, 3)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"tokenizer": "tokens", "stopwords": 0.123456}, ValueError, "fraction p/q"),
        ({"tokenizer": "tokens", "stopwords": 1.5}, ValueError, "fraction p/q"),
        ({"tokenizer": "tokens", "stopwords": float("nan")}, ValueError, "fraction p/q"),
        ({"tokenizer": "tokens", "stopwords": "2/3"}, TypeError, "stopwords"),
        ({"tokenizer": "chars", "stopwords": 0.5}, ValueError, "single words"),
        ({"tokenizer": "tokens", "ngram": 2, "stopwords": 0.5}, ValueError, "single words"),
        ({"tokenizer": "tokens", "stopwords": 0.5, "weighting": "binary"}, ValueError, "weighting='tf'"),
    ],
)
def test_stopword_weight_is_checked(options, error, match):
    with pytest.raises(error, match=match):
        Fingerprinter(**options)


def test_tokens_tokenizer_reads_the_sketch_stream():
    f = Fingerprinter(tokenizer="tokens", stopwords=False)
    t = "Hello 世界, ＡＢＣ_x 2024年! naïve"
    assert list(f.counts(t)) == list(dict.fromkeys(S.tokens(t)))
    assert set(Fingerprinter(tokenizer="tokens").counts("the cat 的 中")) == {"cat", "中"}  # stopwords dropped


def test_new_verified_collections_use_the_verified_candidate(database_url):
    with SimhashIndex(database_url, "vc-" + uuid.uuid4().hex[:8]) as ix:
        assert ix.fingerprinter == VF.candidate_fingerprinter() and ix.verifier.scheme == S.SCHEME
        t = "学习中文 and English together in one mixed sentence, " + " ".join(f"w{i} 字" for i in range(60))
        ix.add("a", t)
        (m,) = ix.near(t.replace("English", "French"))
        assert m.key == "a" and m.jaccard >= 0.8
        ix.drop()


# ------------------------------------------------------------------ the vectorised verification
int4 = st.integers(-(2**31), 2**31 - 1)


@FAST
@given(
    st.lists(st.one_of(st.none(), st.sets(int4, max_size=60)), min_size=2, max_size=12),
    st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), min_size=1, max_size=30),
    st.sampled_from([0.0, 0.3, 0.8, 1.0]),
    st.sampled_from([8, 40, 384]),
)
def test_sketch_jaccard_pairs_equals_sketch_jaccard(sets, pairs, t, size):
    """Every pair that can reach t gets exactly sketch_jaccard's value; one skipped by the length
    bound is below t; an empty side gives NaN."""
    sketches = [S.sketch_of_set(x, size) if x is not None else None for x in sets]
    pairs = [(a % len(sets), b % len(sets)) for a, b in pairs]
    rows = SC.SketchRows(sketches, size)
    got = SC.sketch_jaccard_pairs(rows, np.array([a for a, _ in pairs]), np.array([b for _, b in pairs]), t, size)
    for (a, b), g in zip(pairs, got.tolist()):
        want = S.sketch_jaccard(sketches[a], sketches[b], size)
        if want is None:
            assert g != g  # NaN
        elif want >= t:
            assert g == want
        else:
            assert g == want or g == 0.0
