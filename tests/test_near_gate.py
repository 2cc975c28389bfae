"""A text query of a banded collection (issue 26): the block probes for rows without a sketch run
only in a collection that has such rows (migration simdb_0012_sketchless_gate), and the client's
verification of a query's few candidates (one pair at a time) gives the batched path's answers."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from simdb.core import sketch as S
from simdb.core.bits import BucketTable
from simdb.core.sketch import bands as B
from simdb.core.sketch import chars as C
from simdb.core.sketch import compare as SC
from simdb.index import SimhashIndex
from simdb.results import verified_matches
from simdb.store import candidates as CAND
from simdb.store import sql as _sql

A = "thunder57 music0 summer81 window26 gamma51 stone89 light91 shadow95 summer24 winter67 silver38 orange40"
B_COPY = "thunder57 music0 summer81 window26 gamma51 stone89 light91 shadow95 summer24 winter67 silver38 zz492"
int4 = st.integers(-(2**31), 2**31 - 1)


def _hamming_part_ran(ix: SimhashIndex, query: str) -> bool:
    """Did BAND_NEAR_SQL run its block probes (the Hamming part) for ``query``?"""
    keys = B.band_keys_text(B.text_band_keys([query])[0])
    params = CAND.band_near_params(ix.collection_id, ix.fingerprinter.fingerprint(query), keys, 3, ix.rule.shared)
    plan = [r[0] for r in ix.connection().execute("EXPLAIN (ANALYZE, COSTS OFF) " + CAND.BAND_NEAR_SQL, params).fetchall()]
    probes = [i for i, line in enumerate(plan) if "b1 = ANY" in line]  # the probe of block 1, and its scan node above
    assert probes, plan
    return not all("never executed" in plan[i - 1] for i in probes)


def test_the_hamming_part_runs_only_in_a_collection_with_sketchless_rows(database_url):
    with SimhashIndex(database_url, "gate-" + uuid.uuid4().hex[:8]) as ix:
        ix.add_many([("a", A), *((f"r{i}", f"some other text number {i} here") for i in range(50))])
        assert not _hamming_part_ran(ix, B_COPY)
        assert [m.key for m in ix.near(B_COPY)] == ["a"]
        fp = ix.fingerprinter.fingerprint(B_COPY)
        ix.add("by-fp", fp=fp ^ 0b11)  # a row without a sketch: answered by distance <= 3
        assert _hamming_part_ran(ix, B_COPY)
        assert [(m.key, m.jaccard is None) for m in ix.near(B_COPY)] == [("a", False), ("by-fp", True)]
        assert ix.add_if_unique("c", fp=fp ^ 0b1).inserted is False  # by fingerprint: Hamming, as before
        ix.remove("by-fp")
        assert not _hamming_part_ran(ix, B_COPY)  # a delete leaves no stale flag
        assert [m.key for m in ix.near(B_COPY)] == ["a"]


def test_simdb_near_key_finds_sketchless_rows_behind_the_gate(database_url):
    with SimhashIndex(database_url, "gate-" + uuid.uuid4().hex[:8]) as ix:
        ix.add_many([("a", A), ("b", B_COPY), ("x", "nothing alike at all in this one")])
        q = text("SELECT key FROM simdb_near_key(:c, :k) ORDER BY key")
        with ix.engine.connect() as c:
            assert [r[0] for r in c.execute(q, {"c": ix.collection, "k": "a"})] == ["b"]
        ix.add("by-fp", fp=ix.fingerprinter.fingerprint(A) ^ 0b101)
        with ix.engine.connect() as c:
            assert [r[0] for r in c.execute(q, {"c": ix.collection, "k": "a"})] == ["b", "by-fp"]


def test_a_fresh_bulk_load_rebuilds_the_sketchless_index(fresh_database_url):
    from simdb.store.migrate import migrate

    migrate(fresh_database_url)
    with SimhashIndex(fresh_database_url, "bulk") as ix:
        ix.add_many([("a", A), ("x", "other words entirely here")], rebuild_indexes=True)
        assert ix.last_load["rebuilt"]
        with ix.engine.connect() as c:
            assert c.execute(text("SELECT to_regclass(:n)"), {"n": _sql.SKETCHLESS_INDEX}).scalar() is not None
        assert not _hamming_part_ran(ix, B_COPY)


@settings(max_examples=300, deadline=None)
@given(st.sets(int4, min_size=1, max_size=300), st.sets(int4, min_size=1, max_size=300), st.integers(1, 260))
def test_one_pair_jaccard_is_the_batched_one(a, b, size):
    sa, sb = np.array(sorted(a)[:size]), np.array(sorted(b)[:size])
    rows = SC.SketchRows([sa, sb], size)
    batched = SC.sketch_jaccard_pairs(rows, np.array([0]), np.array([1]), 0.0, size)[0]
    assert SC.sketch_jaccard_sorted(sa, sb, size) == batched == pytest.approx(S.sketch_jaccard(list(sa), list(sb), size))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sets(st.integers(-50, 50), max_size=40), min_size=1, max_size=12), st.sets(st.integers(-50, 50), min_size=1, max_size=40),
       st.sampled_from([0.3, 0.8, 1.0]))
def test_verified_matches_few_candidates_equal_the_batched_path(stored, query, t):
    """The one-pair path (up to FEW_CANDIDATES) and the batched path keep the same rows, same Jaccard."""
    rows = [(f"k{i}", i, i % 5, None, sorted(s) or None) for i, s in enumerate(stored)]
    verifier = S.Verifier(size=32)
    few = verified_matches(rows, sorted(query), verifier, t, 3)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(SC, "FEW_CANDIDATES", -1)
        assert verified_matches(rows, sorted(query), verifier, t, 3) == few


@given(st.lists(int4, max_size=400))
def test_sorted_unique_is_np_unique(values):
    a = np.array(values, dtype=np.int32)
    assert np.array_equal(C.sorted_unique(a), np.unique(a))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sets(st.integers(0, 2**32 - 1), min_size=1, max_size=120), min_size=1, max_size=4))
def test_densify_of_few_empty_bins_is_the_vectorised_one(sets):
    x = np.concatenate([np.array(sorted(s), dtype=np.uint64) for s in sets])
    owner = np.repeat(np.arange(len(sets)), [len(s) for s in sets])
    few = B.oph_values(x, owner, len(sets), 70)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(B, "_FEW_EMPTY", -1)
        assert np.array_equal(B.oph_values(x, owner, len(sets), 70), few)


def _batched_hamming_part_ran(ix: SimhashIndex, queries: list[str]) -> bool:
    """Did the batched look-up of sketchless rows (near_many, simdb dedup) run its block probes?"""
    params = CAND.near_many_params(ix.collection_id, [ix.fingerprinter.fingerprint(q) for q in queries], 3)
    sql = "EXPLAIN (ANALYZE, COSTS OFF) " + CAND.SKETCHLESS_MANY_SQL
    plan = [r[0] for r in ix.connection().execute(sql, CAND.array_text_params(params)).fetchall()]
    cte = plan.index("  CTE p")  # the probes: the gated Result node that makes them is the next line
    assert "One-Time Filter" in plan[cte + 2], plan
    return "never executed" not in plan[cte + 1]


def test_near_many_probes_blocks_only_in_a_collection_with_sketchless_rows(database_url):
    with SimhashIndex(database_url, "gate-" + uuid.uuid4().hex[:8]) as ix:
        ix.add_many([("a", A), *((f"r{i}", f"some other text number {i} here") for i in range(50))])
        assert not _batched_hamming_part_ran(ix, [B_COPY, "some other text number 7 here"])
        assert [[m.key for m in ms] for ms in ix.near_many([B_COPY, "unrelated words only"])] == [["a"], []]
        fp = ix.fingerprinter.fingerprint(B_COPY)
        ix.add("by-fp", fp=fp ^ 0b11)
        assert _batched_hamming_part_ran(ix, [B_COPY])
        got = ix.near_many([B_COPY, "unrelated words only"])
        assert [sorted((m.key, m.jaccard is None) for m in ms) for ms in got] == [[("a", False), ("by-fp", True)], []]


def test_banded_text_look_ups_plan_no_radii(database_url, monkeypatch):
    """A banded collection's batched text look-ups probe the blocks only for sketchless rows (gated by
    the server): they plan no adaptive radii, a per-query cost that bought nothing; its Hamming
    answers by name (verify=False) still do, and both answer as near()."""
    with SimhashIndex(database_url, "gate-" + uuid.uuid4().hex[:8]) as ix:
        ix.add_many([("a", A), *((f"r{i}", f"some other text number {i} here") for i in range(50))])
        table = BucketTable([{0: 100.0}, {}, {}, {}], 1.0)
        monkeypatch.setattr(ix._radii, "bucket_sizes", lambda: (table, 1.0))
        planned = []
        monkeypatch.setattr(type(ix._radii), "__call__", lambda self, fp, k: planned.append(fp))
        queries = [B_COPY, "some other text number 7 here"]
        got = ix.near_many(queries)
        assert not planned
        assert [[m.key for m in ms] for ms in got] == [[m.key for m in ix.near(q)] for q in queries]
        by_fp = ix.near_many(queries, verify=False)
        assert len(planned) == len(queries)
        assert [[m.key for m in ms] for ms in by_fp] == [[m.key for m in ix.near(q, verify=False)] for q in queries]
