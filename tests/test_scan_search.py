"""Thresholds below the band keys' reach: ``near`` compares every row (exact), whole-collection and
per-insert operations refuse (simdb.store.candidates, BandedRule.scans / check_reach)."""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdb.core import sketch as S
from simdb.core.sketch import bands as B
from simdb.errors import InvalidArgumentError
from simdb.index import SimhashIndex
from simdb.index.rules import HammingRule
from simdb.store.candidates import scan_bounds

WORDS = ("the a of cat dog runs jumps over under quick lazy brown fox river stone light dark "
         "opens closes reads writes small large early late green blue red table window").split()


def _texts(seed: int, n: int) -> list[str]:
    """Families of texts: a base and copies with a third to half of their words changed (Jaccard 0.3-0.8)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        base = [rng.choice(WORDS) for _ in range(rng.randint(8, 40))]
        out.append(" ".join(base))
        for _ in range(2):
            copy = [w if rng.random() > rng.uniform(0.05, 0.4) else rng.choice(WORDS) for w in base]
            out.append(" ".join(copy))
    return out


def test_reliable_threshold_is_where_the_s_curve_reaches_the_bar():
    for scheme in B.SCHEMES:
        t = B.reliable_threshold(scheme)
        shared = B.min_shared(scheme)
        assert B.s_curve(t, shared=shared) >= B.RELIABLE_REACH > B.s_curve(round(t - 0.01, 2), shared=shared)
    assert B.reliable_threshold(B.BAND_SCHEME) == 0.79


values = st.sets(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=300)


@settings(max_examples=300, deadline=None)
@given(values, values, st.floats(0.05, 1.0), st.sampled_from([16, 64, 256]))
def test_scan_bounds_never_leave_out_a_sketch_at_the_threshold(a, b, t, size):
    """Whatever two sets, if their sketches are at Jaccard >= t, the stored one's size is within the bounds."""
    qa, sb = sorted(a)[:size], sorted(b)
    j = S.sketch_jaccard(qa, sb[:size], size)
    lo, hi = scan_bounds(len(qa), t, size)
    if j is not None and j >= t:
        assert lo <= len(sb) <= hi


@pytest.fixture(scope="module")
def stored(database_url):
    """A default (banded) collection of families of short texts."""
    url = database_url
    texts = _texts(7, 40)
    name = "scan-" + uuid.uuid4().hex[:8]
    with SimhashIndex(url, name) as ix:
        ix.add_many([(f"t{i}", t) for i, t in enumerate(texts)])
    return url, name, texts


def _brute(texts: list[str], query: str, t: float, verifier: S.Verifier) -> dict[str, float]:
    q = verifier.sketch(query)
    out = {}
    for i, text in enumerate(texts):
        j = S.sketch_jaccard(verifier.sketch(text), q, verifier.size)
        if j is not None and j >= t:
            out[f"t{i}"] = j
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 119), st.floats(0.2, 0.78), st.booleans())
def test_near_below_the_reach_is_the_brute_force_answer(stored, i, t, edit):
    url, name, texts = stored
    with SimhashIndex(url, name) as ix:
        assert ix.rule.scans(t)
        query = texts[i] + (" river" if edit else "")
        got = {m.key: m.jaccard for m in ix.near(query, min_jaccard=t)}
        assert got == pytest.approx(_brute(texts, query, t, ix.rule.verifier))
        assert [[m.key for m in ms] for ms in ix.near_many([query, "zzz qqq"], min_jaccard=t)] == [
            [m.key for m in ix.near(query, min_jaccard=t)], []]
        assert {m.key for m in ix.near_key(f"t{i}", min_jaccard=t)} == set(_brute(texts, texts[i], t, ix.rule.verifier)) - {f"t{i}"}


def test_the_band_keys_miss_what_the_scan_finds(stored):
    """Why the scan: at 0.5 the keys alone find a fraction of the brute-force answer (so it must not be them)."""
    url, name, texts = stored
    with SimhashIndex(url, name) as ix:
        verifier = ix.rule.verifier
        want = sum(len(_brute(texts, q, 0.5, verifier)) for q in texts[:60])
        by_keys = 0
        for q in texts[:60]:  # the band candidates' answer at 0.5 (the stage the scan replaces there)
            feats = ix.rule.text_features(ix.fingerprinter, q)
            by_keys += len(HammingRule.verified_near(ix.rule, ix.connection(), ix.collection_id, feats,
                                                    (11, 3, 0.5), ix._radii))
        assert by_keys < want


def test_whole_collection_and_insert_operations_refuse_below_the_reach(stored):
    url, name, texts = stored
    with SimhashIndex(url, name) as ix:
        for call in (lambda: ix.pairs(min_jaccard=0.5), lambda: ix.clusters(min_jaccard=0.7),
                     lambda: ix.add_if_unique("new", "a new text about rivers", min_jaccard=0.6)):
            with pytest.raises(InvalidArgumentError, match=r"min_jaccard=0\.\d+ is below 0\.79"):
                call()
        assert ix.get("new") is None
        assert isinstance(list(ix.pairs(min_jaccard=0.79)), list)  # at the reach: answered by the keys


def test_sql_functions_refuse_below_the_reach(stored):
    """simdb_near_key and simdb_pairs (migration simdb_0014_band_reach) raise below the reach, answer at it."""
    import psycopg
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    url, name, _ = stored
    with SimhashIndex(url, name) as ix, ix.engine.connect() as c:
        for sql in ("SELECT * FROM simdb_pairs(:n, 3, 0.5)", "SELECT * FROM simdb_near_key(:n, 't0', 3, 0.7)"):
            with pytest.raises(DBAPIError) as err, c.begin():
                c.execute(text(sql), {"n": name}).all()
            assert isinstance(err.value.orig, psycopg.errors.InvalidParameterValue)
            assert "is below 0.79" in str(err.value.orig)
        with c.begin():
            at_reach = c.execute(text("SELECT key_a, key_b FROM simdb_pairs(:n, 3, 0.79)"), {"n": name}).all()
        assert {(p.key_a, p.key_b) for p in ix.pairs(min_jaccard=0.79)} == {tuple(r) for r in at_reach}
