"""The ``tok3-xxh64-v3`` shingle scheme and the one-pass fingerprint + sketch of verified loads.

The scheme is pinned by a from-scratch reference (plain Python integers, no numpy); the fast
paths (shared tokenization, the batched sketches) must equal the two computations done apart,
for every kind of text; collections created with the v2 scheme keep it.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text as sql

from simdb.core import sketch as S
from simdb.core.fingerprint import Fingerprinter
from simdb.core.sketch import compare as SC
from simdb.core.sketch import features as VF
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
#: a second candidate configuration to cover (stopwords kept, TF weights: the options of the
#: retired legacy MinHash-band collections' candidate fingerprint)
def candidate_fingerprinter() -> Fingerprinter:
    return Fingerprinter(stopwords=False, weighting="tf")


FAST = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


@FAST
@given(TEXTS)
def test_v3_equals_the_reference(t):
    assert S.token_shingles(t, S.SCHEME_V3) == reference_v3(t)
    assert S.sketch(t, 8, S.SCHEME_V3) == reference_v3(t)[:8]


def test_v3_is_order_sensitive_and_v2_is_kept():
    assert S.sketch("a b c", scheme=S.SCHEME_V3) != S.sketch("c b a", scheme=S.SCHEME_V3)
    assert S.SCHEME_V3 == "tok3-xxh64-v3" and {S.SCHEME_V3, S.SCHEME_V2} < set(S.SCHEMES)
    # the two schemes hash the same 3-grams differently, but agree on the sets' Jaccard
    a, b = "one two three four five six", "one two three four five seven"
    j3 = S.jaccard(S.token_shingles(a, S.SCHEME_V3), S.token_shingles(b, S.SCHEME_V3))
    j2 = S.jaccard(S.token_shingles(a, S.SCHEME_V2), S.token_shingles(b, S.SCHEME_V2))
    assert j3 == j2 == 3 / 5
    with pytest.raises(ValueError, match="scheme"):
        S.sketch(a, scheme="tok3-nope")


@FAST
@given(st.lists(TEXTS, min_size=1, max_size=12), st.sampled_from([4, 16, 256]), st.sampled_from(S.SCHEMES))
def test_one_pass_equals_two_computations(texts, size, scheme):
    """Whatever the text (ASCII or not, "_" or not, 0-2 tokens), the shared and batched paths give
    Fingerprinter.fingerprint and Verifier.sketch exactly, for both schemes and any sketch size."""
    verifier = S.Verifier(size=size, scheme=scheme)
    for fingerprinter in (VF.candidate_fingerprinter(), candidate_fingerprinter(), Fingerprinter()):
        want_fps = [fingerprinter.fingerprint(t, empty=None) for t in texts]
        want_sketches = [verifier.sketch(t) for t in texts]
        fps, sketches = VF.fingerprints_and_sketches(texts, fingerprinter, verifier)
        assert fps == want_fps
        assert [sketches.row(i).tolist() or None for i in range(len(texts))] == want_sketches
        assert VF.sketch_texts(sketches) == [VF.sketch_text(s) for s in want_sketches]
        for t, fp, sk in zip(texts, want_fps, want_sketches):
            got_fp, got_sk = VF.fingerprint_and_sketch(t, fingerprinter, verifier)
            assert got_fp == fp and (list(got_sk) if got_sk is not None and len(got_sk) else None) == sk


@FAST
@given(st.lists(TEXTS, min_size=1, max_size=12), st.integers(1, 40), st.integers(1, 40))
def test_token_batches_of_any_size_give_the_same_answers(texts, chunk_tokens, sketch_block_tokens):
    """The batched lookup of the candidate fingerprint's tokens (``_tokens_together``) and the
    batched sketches (``_blocked_sketches``), each cut into batches of any size (a text larger
    than a batch is a batch of its own), give Fingerprinter.fingerprint and Verifier.sketch exactly."""
    verifier = S.Verifier(size=16, scheme=S.SCHEME_V3)
    fingerprinter = candidate_fingerprinter()
    old = VF.CHUNK_TOKENS, VF.SKETCH_BLOCK_TOKENS
    VF.CHUNK_TOKENS, VF.SKETCH_BLOCK_TOKENS = chunk_tokens, sketch_block_tokens
    try:
        fps, sketches = VF.fingerprints_and_sketches(texts, fingerprinter, verifier)
    finally:
        VF.CHUNK_TOKENS, VF.SKETCH_BLOCK_TOKENS = old
    assert fps == [fingerprinter.fingerprint(t, empty=None) for t in texts]
    assert [sketches.row(i).tolist() or None for i in range(len(texts))] == [verifier.sketch(t) for t in texts]


def test_long_texts_leave_the_batch(monkeypatch):
    monkeypatch.setattr(VF, "BATCH_MAX_TOKENS", 5)
    texts = ["w " * 3, " ".join(f"w{i}" for i in range(40)), "中文" * 30, ""]
    verifier = S.Verifier(size=16, scheme=S.SCHEME_V3)
    fps, sketches = VF.fingerprints_and_sketches(texts, candidate_fingerprinter(), verifier)
    assert [sketches.row(i).tolist() or None for i in range(len(texts))] == [verifier.sketch(t) for t in texts]
    assert len(sketches.row(len(texts) - 1)) == 0 and fps[-1] is None


def test_a_v2_collection_keeps_its_scheme(database_url):
    """A verified collection created before v3 (its config says tok3-xxh32-v2) stores and
    compares v2 sketches after the upgrade: its stored rows still match."""
    name = "v2-" + uuid.uuid4().hex[:8]
    base = " ".join(f"word{i}" for i in range(90))
    with SimhashIndex(database_url, name) as ix:
        with ix.engine.begin() as c:
            c.execute(
                sql("UPDATE simdb_collections SET config = jsonb_set(config, '{verify,scheme}', to_jsonb(CAST(:s AS text))) WHERE name = :n"),
                {"s": S.SCHEME_V2, "n": name},
            )
    with SimhashIndex(database_url, name) as ix:
        assert ix.verifier is not None and ix.verifier.scheme == S.SCHEME_V2
        ix.add_many([("a", base), ("b", base.replace("word40", "other"))])
        with ix.engine.connect() as c:
            stored = c.execute(sql("SELECT shingles FROM simdb_fingerprints f JOIN simdb_collections c ON "
                                   "c.id = f.collection_id WHERE c.name = :n AND f.key = 'a'"), {"n": name}).scalar()
        assert stored == S.sketch(base, scheme=S.SCHEME_V2)
        got = ix.near(base.replace("word10", "other"))
        assert [m.key for m in got] == ["a", "b"]
        want = S.sketch_jaccard(S.sketch(base, scheme=S.SCHEME_V2), S.sketch(base.replace("word10", "other"), scheme=S.SCHEME_V2))
        assert got[0].jaccard == pytest.approx(want)
        ix.drop()


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
