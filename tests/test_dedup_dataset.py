"""simdb.dedup_records: the kept set and the removal log against brute force.

Two oracles, neither taken from the code under test:
- the Hamming definition (k given): distances of the Fingerprinter's fingerprints, pair by pair;
- the collection's own default definition (no option given): the near-duplicate graph read
  from a reference collection holding every record (``near`` per record), so the test
  follows the default when it changes, as dedup does.
From the graph the test computes the expected kept set itself (greedy in priority order).
"""

from __future__ import annotations

import itertools
import json
import random
import threading
from typing import Any

import pytest
from cli_support import SAMPLE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdb import Fingerprinter, SimhashIndex, dedup_records
from simdb.dataset.dedup import KEEP, DedupStats, Removal
from simdb.errors import InputError, InputTooLargeError, InvalidArgumentError

ORIGINALS = sorted((SAMPLE / "originals").glob("*.txt"))
BASES = [p.read_text(encoding="utf-8") for p in ORIGINALS[:6]]
VOCAB = sorted({w for b in BASES for w in b.split()})


def _variant(rng: random.Random, text: str, edits: int) -> str:
    words = text.split()
    for _ in range(edits):
        words[rng.randrange(len(words))] = rng.choice(VOCAB)
    return " ".join(words)


def _dataset(seed: int, n: int) -> list[dict]:
    """Originals, exact copies, lightly and heavily edited variants, and empty texts, shuffled."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        roll = rng.random()
        base = rng.choice(BASES)
        if roll < 0.08:
            text = ""
        elif roll < 0.35:
            text = base
        else:
            text = _variant(rng, base, rng.choice([1, 1, 2, 3, 8, 30]))
        out.append({"id": f"r{i}", "text": text, "n": i})
    return out


def _priority(records: list[dict], keep: str) -> list[int]:
    idx = list(range(len(records)))
    if keep == "last":
        return idx[::-1]
    if keep == "longest":
        return sorted(idx, key=lambda i: (-len(records[i]["text"]), i))
    return idx


def _greedy(n: int, edges: set[frozenset], order: list[int]) -> set[int]:
    kept: set[int] = set()
    for i in order:
        if not any(frozenset((i, j)) in edges for j in kept):
            kept.add(i)
    return kept


def _hamming_distances(records: list[dict], k: int) -> dict[frozenset, int]:
    fper = Fingerprinter()
    fps = [fper.fingerprint(r["text"], empty=None) for r in records]
    return {frozenset((i, j)): (fps[i] ^ fps[j]).bit_count() for i, j in itertools.combinations(range(len(records)), 2)
            if fps[i] is not None and fps[j] is not None and (fps[i] ^ fps[j]).bit_count() <= k}


def _hamming_graph(records: list[dict], k: int) -> set[frozenset]:
    return set(_hamming_distances(records, k))


def _check_nearest(records, log: list[Removal], rank: dict[frozenset, Any], keep: str) -> None:
    """Each removal names the *nearest* kept record before it in priority order (``rank``: smaller is
    nearer), ties the earliest in input order: the documented rule, whatever the batch size."""
    pos = {r["id"]: r["n"] for r in records}
    prio = {i: n for n, i in enumerate(_priority(records, keep))}
    kept = set(range(len(records))) - {pos[r.key] for r in log}
    for r in log:
        a = pos[r.key]
        best = min((rank[frozenset((a, b))], b) for b in kept if prio[b] < prio[a] and frozenset((a, b)) in rank)
        assert pos[r.kept_key] == best[1], (r, best)


def _check(records, kept_records, log: list[Removal], edges, keep):
    pos = {r["id"]: r["n"] for r in records}
    kept = {r["n"] for r in kept_records}
    assert kept == _greedy(len(records), edges, _priority(records, keep))
    assert [r["n"] for r in kept_records] == sorted(kept)  # input order, records unchanged
    assert all(kr == records[kr["n"]] for kr in kept_records)  # unchanged (last/longest: equal copies, spilled)
    removed = {pos[r.key] for r in log}
    assert removed == set(range(len(records))) - kept  # every removed record is logged, once
    assert len(log) == len(removed)
    rank = {i: n for n, i in enumerate(_priority(records, keep))}
    for r in log:
        a, b = pos[r.key], pos[r.kept_key]
        assert b in kept and frozenset((a, b)) in edges, r  # names a kept near-duplicate
        assert rank[b] < rank[a]  # kept before it, in --keep order
        assert 0.0 <= r.similarity <= 1.0 and r.distance >= 0


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 10**6), n=st.integers(0, 70), keep=st.sampled_from(KEEP),
       batch=st.sampled_from([1, 7, 5000]), k=st.sampled_from([0, 3, 6]))
def test_hamming_rule_against_brute_force(database_url, seed, n, keep, batch, k):
    records = _dataset(seed, n)
    log: list[Removal] = []
    stats = DedupStats()
    out = list(dedup_records(records, database=database_url, keep=keep, k=k, batch_size=batch,
                             on_removed=log.append, stats=stats))
    distances = _hamming_distances(records, k)
    _check(records, out, log, set(distances), keep)
    _check_nearest(records, log, distances, keep)
    assert (stats.read, stats.kept, stats.removed) == (n, len(out), len(log))


def _near_triple(k: int) -> tuple[str, str, str]:
    """Texts A, B, C: A and B further apart than k, C within k of both and nearer to B."""
    rng = random.Random(1)
    fper = Fingerprinter()
    texts = [_variant(rng, BASES[0], rng.randint(1, 8)) for _ in range(60)]
    fps = [fper.fingerprint(t) for t in texts]
    for a, b, c in itertools.permutations(range(len(texts)), 3):
        d_ab, d_ac, d_bc = ((fps[x] ^ fps[y]).bit_count() for x, y in ((a, b), (a, c), (b, c)))
        if d_ab > k and d_bc < d_ac <= k:
            return texts[a], texts[b], texts[c]
    raise AssertionError("no such triple in the sample")  # pragma: no cover


@pytest.mark.parametrize("batch", [1, 2, 3, 5000])
def test_removal_names_the_nearest_kept_record_across_batches(database_url, batch):
    """C is near A (kept in an earlier batch) and nearer to B (kept earlier in C's own batch): the log
    names B whatever the batch boundaries, as the rule says (and as Spark's keep_one answers)."""
    a, b, c = _near_triple(6)
    records = [{"id": "A", "text": a}, {"id": "X", "text": BASES[1]}, {"id": "B", "text": b}, {"id": "C", "text": c}]
    fper = Fingerprinter()
    log: list[Removal] = []
    kept = [r["id"] for r in dedup_records(records, database=database_url, k=6, batch_size=batch,
                                           on_removed=log.append)]
    assert kept == ["A", "X", "B"]
    assert [(r.key, r.kept_key, r.distance) for r in log] == [
        ("C", "B", (fper.fingerprint(b) ^ fper.fingerprint(c)).bit_count())]


@pytest.mark.parametrize("keep", KEEP)
def test_default_definition_against_the_collections_own_graph(database_url, collection_name, keep):
    records = _dataset(7, 80)
    with SimhashIndex(database_url, collection=collection_name) as ref:  # default options, like dedup's
        ref.add_many((str(r["n"]), r["text"]) for r in records)
        ranks = {frozenset((r["n"], int(m.key))): (-m.jaccard, m.distance) for r in records
                 for m in ref.near(r["text"]) if int(m.key) != r["n"]}
        ref.drop()
    assert ranks  # the data set has near-duplicates to find
    log: list[Removal] = []
    out = list(dedup_records(records, database=database_url, keep=keep, on_removed=log.append, batch_size=13))
    _check(records, out, log, set(ranks), keep)
    _check_nearest(records, log, ranks, keep)


def test_incremental_against_a_collection(database_url, collection_name):
    records = _dataset(11, 60)
    first, second = records[:30], records[30:]
    with SimhashIndex(database_url, collection=collection_name, verify=False) as ix:  # the Hamming rule
        kept1 = list(dedup_records(first, index=ix, k=3))
        assert sorted(e.key for e in map(ix.get, [r["id"] for r in kept1])) == sorted(r["id"] for r in kept1)
        assert len(ix) == len(kept1)
        log: list[Removal] = []
        kept2 = list(dedup_records(second, index=ix, k=3, on_removed=log.append))
        # the two runs together answer as one run over all the records
        assert [r["n"] for r in kept1 + kept2] == sorted(_greedy(60, _hamming_graph(records, 3), list(range(60))))
        assert len(ix) == len(kept1) + len(kept2)
        # re-running the same records: each matches its own stored copy (or a kept near-duplicate);
        # empty texts match nothing, so they are kept again and replace their own rows
        stats = DedupStats()
        again = list(dedup_records(first, index=ix, k=3, stats=stats))
        empty = [r for r in first if not r["text"]]
        assert again == empty and stats.replaced == len(empty)
    # by name, on the database: the same collection
    assert list(dedup_records(first[:5], collection=collection_name, database=database_url, k=3)) == [
        r for r in first[:5] if not r["text"]]


def test_temporary_collection_is_dropped_also_when_stopped_early(database_url):
    """in_memory=False: the scratch collection is dropped at the end, also when the caller stops early;
    in memory (the default) there is none."""
    records = _dataset(3, 40)
    with SimhashIndex(database_url, collection="probe") as ix:
        before = _temporary_collections(ix)
        it = dedup_records(records, database=database_url, batch_size=5, in_memory=False)
        next(it)
        assert len(_temporary_collections(ix)) == len(before) + 1
        it.close()  # what Ctrl-C does to the CLI's loop
        assert _temporary_collections(ix) == before
        list(dedup_records(records, database=database_url, keep="longest", in_memory=False))
        assert _temporary_collections(ix) == before
        it = dedup_records(records, database=database_url, batch_size=5)
        next(it)
        assert _temporary_collections(ix) == before
        it.close()
        ix.drop()


def _temporary_collections(ix) -> list[str]:
    rows = ix.connection().execute("SELECT name FROM simdb_collections WHERE name LIKE '\\_simdb\\_dedup\\_%'")
    return sorted(r[0] for r in rows)


def test_bad_arguments_and_records(database_url):
    with pytest.raises(InvalidArgumentError, match="keep"):
        dedup_records([], keep="best")
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        dedup_records([], batch_size=0)
    with pytest.raises(InputError, match="record 2: no field 'text'"):
        list(dedup_records([{"text": "a b c"}, {"body": "x"}], database=database_url))
    with pytest.raises(InputError, match="record 1: field 'text' is not a string"):
        list(dedup_records([{"text": 5}], database=database_url))
    # a text over the index's limit is named by its record (as simdb dedup names FILE:LINE), not by a
    # position inside the batch the store was asked about
    with SimhashIndex(database_url, collection="big_texts", max_text_bytes=1000) as ix:
        with pytest.raises(InputTooLargeError, match="record 3: field 'text' is at least 2,000 bytes"):
            list(dedup_records([{"text": "a b c"}, {"text": "d e f"}, {"text": "word " * 400}], index=ix))
        assert len(ix) == 0  # all or nothing
        ix.drop()


def test_a_record_the_spill_cannot_keep_is_named(database_url):
    """keep='last'/'longest' pickle each record to the spill file: one that cannot be pickled is an
    InputError naming it, not a bare TypeError from pickle."""
    records = [{"id": 1, "text": BASES[0]}, {"id": 2, "text": BASES[1], "lock": threading.Lock()}]
    for keep in ("last", "longest"):
        with pytest.raises(InputError, match="record 2: keep='last' and 'longest' spill each record"):
            list(dedup_records(records, database=database_url, keep=keep))
    assert [r["id"] for r in dedup_records(records, database=database_url)] == [1, 2]  # first: no spill


def test_incremental_refuses_a_repeated_key(database_url, collection_name):
    recs = [{"id": "same", "text": BASES[0]}, {"id": "same", "text": BASES[1]}]
    with pytest.raises(InputError, match="key 'same' appears twice"):
        list(dedup_records(recs, collection=collection_name, database=database_url))


def test_records_without_keys_get_positions(database_url):
    log: list[Removal] = []
    out = list(dedup_records([{"text": BASES[0]}, {"text": BASES[0]}], database=database_url, on_removed=log.append))
    assert out == [{"text": BASES[0]}]
    assert [(r.key, r.kept_key, r.distance) for r in log] == [("#2", "#1", 0)]
    assert json.loads(json.dumps(log[0].to_dict()))["removed"] == "#2"


def test_jaccard_definition_against_the_collections_own_graph(database_url, collection_name):
    """--min-jaccard: the index is asked by text (near with min_jaccard); the graph from a verified
    collection of the default rule."""
    records = _dataset(21, 50)
    with SimhashIndex(database_url, collection=collection_name) as ref:
        ref.add_many((str(r["n"]), r["text"]) for r in records)
        edges = {frozenset((r["n"], int(m.key))) for r in records for m in ref.near(r["text"], min_jaccard=0.8)
                 if int(m.key) != r["n"]}
        ref.drop()
    assert edges
    log: list[Removal] = []
    out = list(dedup_records(records, database=database_url, min_jaccard=0.8, on_removed=log.append, batch_size=9))
    _check(records, out, log, edges, "first")
    assert all(r.jaccard is not None and r.jaccard >= 0.8 for r in log)
