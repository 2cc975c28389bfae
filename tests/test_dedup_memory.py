"""A dedup without a collection, decided in memory (simdb.dataset.memory), against the same dedup in a
temporary collection on the database (``in_memory=False``): the same kept records, the same removal log,
record for record, for every keep order, batch size and rule option; and the band-key lookup against
brute force."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdb.dataset.dedup import dedup_records
from simdb.dataset.memory import BandRuns

WORDS = ("the parcel order arrived late box dented corner item inside fine committee met day agenda agreed "
         "publish minutes review member river stone light house garden").split()


def _records(seed: int, n: int) -> list[dict]:
    """``n`` records from a few originals (short ones verified exactly, long ones by their sketch
    estimate), most of them one-word edits of another; some without features or without a sketch."""
    rnd = random.Random(seed)
    originals = [" ".join(rnd.choice(WORDS) for _ in range(rnd.choice([rnd.randint(0, 30), rnd.randint(120, 300)])))
                 for _ in range(max(n // 3, 1))]
    out = []
    for i in range(n):
        text = rnd.choice(originals)
        if text and rnd.random() < 0.6:
            words = text.split()
            words[rnd.randrange(len(words))] = rnd.choice(WORDS)
            text = " ".join(words)
        if rnd.random() < 0.05:
            text = rnd.choice(["", "ab", "ab c", "x"])  # no features; a fingerprint without a sketch
        out.append({"id": f"r{i % (n - 2) if n > 2 else i}", "text": text})  # keys may repeat
    return out


def _run(records, database_url, in_memory, **kw) -> tuple[list, list]:
    log: list = []
    kept = list(dedup_records(records, database=database_url, on_removed=log.append, in_memory=in_memory, **kw))
    return kept, [r.to_dict() for r in log]


@settings(max_examples=24, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n=st.integers(1, 160), keep=st.sampled_from(["first", "last", "longest"]),
       batch_size=st.sampled_from([1, 7, 50, 5000]),
       options=st.sampled_from([{}, {"min_jaccard": 0.9}, {"k": 5, "min_jaccard": 0.85}, {"k": 3}, {"k": 0}, {"k": 11}]))
def test_in_memory_decides_as_the_temporary_collection(database_url, seed, n, keep, batch_size, options):
    records = _records(seed, n)
    memory = _run(records, database_url, True, keep=keep, batch_size=batch_size, **options)
    stored = _run(records, database_url, False, keep=keep, batch_size=batch_size, **options)
    assert memory == stored
    assert len(memory[0]) + len(memory[1]) == n


def test_in_memory_dedup_never_opens_the_database():
    records = _records(7, 60)
    unreachable = "postgresql+psycopg://nobody@127.0.0.1:9/none?connect_timeout=1"
    kept, log = _run(records, unreachable, True)
    assert log and len(kept) + len(log) == 60


@settings(max_examples=60, deadline=None)
@given(stored=st.lists(st.lists(st.integers(0, 3), min_size=3, max_size=3), max_size=40),
       queries=st.lists(st.lists(st.integers(0, 3), min_size=3, max_size=3), min_size=1, max_size=10),
       at_least=st.integers(1, 3), splits=st.lists(st.integers(0, 40), max_size=4))
def test_band_runs_find_what_brute_force_finds(stored, queries, at_least, splits):
    runs = BandRuns()
    cuts = sorted({0, len(stored), *(s for s in splits if s < len(stored))})
    for a, b in zip(cuts, cuts[1:]):  # added in several runs (merged as they grow)
        runs.add(np.array(stored[a:b], dtype=np.int64).reshape(-1, 3), np.arange(a, b, dtype=np.int64))
    q, ids = runs.shared(np.array(queries, dtype=np.int64), at_least)
    want = [(i, j) for i, qk in enumerate(queries) for j, sk in enumerate(stored)
            if sum(x == y for x, y in zip(qk, sk)) >= at_least]
    assert list(zip(q.tolist(), ids.tolist())) == want


@pytest.mark.parametrize("keep", ["first", "longest"])
def test_a_removal_names_the_best_kept_match_and_its_input_key(keep):
    text = "the committee met on day four to discuss the agenda and agreed to publish the minutes after review"
    records = [{"id": "a", "text": text}, {"id": "b", "text": text.replace("four", "five")},
               {"id": "c", "text": text}, {"id": "d", "text": "something else entirely, with no relation"}]
    kept, log = _run(records, None, True, keep=keep)
    assert [r["id"] for r in kept] == ["a", "d"]
    assert [(r["removed"], r["kept"], r["jaccard"]) for r in log] == [("b", "a", pytest.approx(log[0]["jaccard"])),
                                                                     ("c", "a", 1.0)]
    assert 0.8 <= log[0]["jaccard"] < 1.0


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), n_old=st.integers(0, 60), n_new=st.integers(1, 80),
       batch_size=st.sampled_from([1, 9, 5000]), options=st.sampled_from([{}, {"k": 3}]))
def test_against_a_collection_decides_as_one_run_over_its_records_and_the_new(database_url, seed, n_old, n_new,
                                                                              batch_size, options):
    """dedup_records(new, against=ix): the decisions of one run over the collection's (deduplicated) records
    followed by the new ones; the log names the stored key; the collection is only read."""
    from simdb import SimhashIndex

    records = _records(seed, n_old + n_new)
    old = [{"id": f"a{i:05d}", "text": r["text"]} for i, r in enumerate(records[:n_old])]
    new = [{"id": f"n{i:05d}", "text": r["text"]} for i, r in enumerate(records[n_old:])]
    with SimhashIndex(database_url, f"against_{seed}_{n_old}", verify=False if options else None) as ix:
        try:
            stored = list(dedup_records(old, index=ix, **options))
            before = sorted((e.key, e.fp) for e in map(ix.get, [r["id"] for r in stored]))
            got = _run(new, database_url, True, against=ix, batch_size=batch_size, **options)
            assert sorted((e.key, e.fp) for e in map(ix.get, [r["id"] for r in stored])) == before
            assert len(ix) == len(stored)
        finally:
            ix.drop()
    kept, log = _run(stored + new, database_url, True, **options)
    assert kept[:len(stored)] == stored
    assert kept[len(stored):] == got[0]
    assert [{**r, "where": None} for r in log] == [{**r, "where": None} for r in got[1]]  # positions differ
