"""simdb.aio.AsyncSimhashIndex against a real PostgreSQL: the same answers as SimhashIndex and as
brute force, atomic add_if_unique under concurrency, all-or-nothing batches.

Plain ``asyncio.run`` per test (no async test plugin needed).
"""

from __future__ import annotations

import asyncio
import random
import threading
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simdb import SimhashIndex
from simdb.aio import AsyncSimhashIndex
from simdb.aio.pool import fingerprints_politely
from simdb.core.bits import hamming
from simdb.core.fingerprint import Fingerprinter
from simdb.core.sketch.features import candidate_fingerprinter

WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma "
         "tau upsilon phi chi psi omega river mountain table window garden market").split()


def _run(coro):
    return asyncio.run(coro)


def _planted(seed: int, n: int = 400):
    rng = random.Random(seed)
    base = [rng.getrandbits(64) for _ in range(n)]
    rows = {f"r{i}": fp for i, fp in enumerate(base)}
    for j in range(100):
        fp = base[j]
        for b in rng.sample(range(64), j % 8):
            fp ^= 1 << b
        rows[f"d{j}"] = fp
    return rows


def _brute(rows: dict, q: int, k: int):
    return sorted((hamming(q, fp), key) for key, fp in rows.items() if hamming(q, fp) <= k)


@pytest.mark.parametrize("k", [0, 3, 7, 11])
def test_concurrent_near_equals_brute_force_and_sync(database_url, collection_name, k):
    rows = _planted(k)
    rng = random.Random(100 + k)
    queries = [rows[f"r{i}"] ^ (1 << rng.randrange(64)) for i in range(120)] + [rng.getrandbits(64) for _ in range(30)]

    async def main():
        async with AsyncSimhashIndex(database_url, collection_name) as ix:
            assert await ix.add_many([{"key": key, "fp": fp} for key, fp in rows.items()]) == len(rows)
            singles = await asyncio.gather(*(ix.near(q, k=k) for q in queries))  # one batch or a few
            many = await ix.near_many(queries, k=k)
            limited = await asyncio.gather(*(ix.near(q, k=k, limit=2) for q in queries[:20]))
            return singles, many, limited

    singles, many, limited = _run(main())
    with SimhashIndex(database_url, collection_name) as sync:
        want_sync = sync.near_many(queries, k=k, workers=1)
    for q, got, got_many, want in zip(queries, singles, many, want_sync):
        assert [(m.distance, m.key) for m in got] == _brute(rows, q, k)
        assert got == got_many == want
    for got, want in zip(limited, singles[:20]):
        assert got == want[:2]


def test_rows_api_mirrors_the_sync_index(database_url, collection_name):
    text = "The quick brown fox jumps over the lazy dog near the river bank today"
    long_text = "a long text with many words " * 100

    async def main():
        async with AsyncSimhashIndex(database_url, collection_name) as ix:
            fp = await ix.add("a", text, meta={"n": 1})
            fp_long = await ix.add("long", long_text)  # a long text
            assert await ix.add("empty", "") is None  # no features: stored, never matched
            got = await ix.get("a")
            assert (got.key, got.fp, got.meta) == ("a", fp, {"n": 1})
            assert await ix.get("nope", "default") == "default"
            assert await ix.update("a", fp=fp ^ 1) == fp ^ 1
            assert (await ix.get("a")).meta == {"n": 1}
            with pytest.raises(KeyError):
                await ix.update("nope", fp=1)
            near = await ix.near(text, k=1)
            assert [(m.key, m.distance) for m in near] == [("a", 1)]
            assert await ix.near("") == []
            assert await ix.count() == 3
            assert await ix.remove("a") is True and await ix.remove("a") is False
            await ix.add("b", fp=5)
            assert await ix.remove_many(["b", "absent"]) == 1
            return fp, fp_long

    fp, fp_long = _run(main())
    with SimhashIndex(database_url, collection_name) as sync:
        assert sync.fingerprinter.fingerprint("The quick brown fox jumps over the lazy dog near the river bank today") == fp
        assert sync.get("long").fp == fp_long == sync.fingerprinter.fingerprint(
            "a long text with many words " * 100)
        assert "a" not in sync and len(sync) == 2 == sync.count()


#: SimhashIndex's public names the async index has no counterpart of, and why (issue 42: one
#: implementation, two calling conventions, the same method names)
SYNC_ONLY = {
    "connection", "transaction",  # a thread's psycopg connection and transaction
    "prepare", "text_features", "record_file_root", "refresh_stats", "last_load_committed",  # dedup / CLI plumbing
    "convert_to_verified", "verifier", "bands", "band_scheme", "store_texts", "rule", "adaptive", "config",
}


def test_both_facades_have_the_same_method_names():
    """Every public method of the async index is the sync index's (same name, same meaning), and
    the sync index's are the async one's except the few listed with their reason."""
    sync_names = {n for n in dir(SimhashIndex) if not n.startswith("_")}
    async_names = {n for n in dir(AsyncSimhashIndex) if not n.startswith("_")}
    assert async_names - sync_names <= {"open", "collection", "collection_id", "fingerprinter"}  # attributes there
    assert sync_names - async_names <= SYNC_ONLY


def test_clear_and_drop(database_url, collection_name):
    async def main():
        async with AsyncSimhashIndex(database_url, collection_name) as ix:
            await ix.add("a", "some text to clear away")
            await ix.add("b", fp=5)
            assert await ix.clear() == 2
            assert await ix.count() == 0
            assert await ix.drop() is True

    _run(main())


def test_bad_input_is_refused_before_any_write(database_url, collection_name):
    async def main():
        async with AsyncSimhashIndex(database_url, collection_name) as ix:
            with pytest.raises(ValueError, match="k=12 is too large"):
                await ix.near(1, k=12)
            with pytest.raises(TypeError):
                await ix.add(None, "x")
            with pytest.raises(ValueError, match="give text or fp"):
                await ix.add("x")
            with pytest.raises(ValueError, match="unsigned 64-bit"):
                await ix.add_if_unique("x", fp=-1)
            with pytest.raises(ValueError, match="item 1"):  # all or nothing
                await ix.add_many([("ok", "fine text here"), {"key": "bad", "fp": 2**64}])
            assert await ix.count() == 0

    _run(main())
    with pytest.raises(RuntimeError, match="not open"):
        _run(AsyncSimhashIndex(database_url, collection_name).near(1))
    with pytest.raises(ValueError, match="pool_size"):
        AsyncSimhashIndex(database_url, collection_name, pool_size=0)


@pytest.mark.slow
def test_add_if_unique_is_atomic_under_concurrency(database_url, collection_name):
    """Families of near-duplicate fingerprints written by many tasks at once: one per family."""
    rng = random.Random(5)
    k = 3
    families = []
    for _ in range(25):
        base = rng.getrandbits(64)
        members = [base]
        for _ in range(7):
            fp = base
            for b in rng.sample(range(64), rng.randint(1, 1)):
                fp ^= 1 << b
            members.append(fp)
        families.append(members)
    jobs = [(f"f{i}-{j}", fp) for i, fam in enumerate(families) for j, fp in enumerate(fam)]
    rng.shuffle(jobs)

    async def main():
        async with AsyncSimhashIndex(database_url, collection_name, pool_size=8) as ix:
            results = await asyncio.gather(*(ix.add_if_unique(key, fp=fp, k=k) for key, fp in jobs))
            return results

    results = _run(main())
    inserted = [key for (key, _), r in zip(jobs, results) if r.inserted]
    for (_key, fp), r in zip(jobs, results):
        if not r.inserted:
            assert r.matches and all(m.distance <= k for m in r.matches)
    with SimhashIndex(database_url, collection_name) as sync:
        stored = {key: sync.get(key).fp for key in inserted}
        assert len(sync) == len(inserted)
    keys = sorted(stored)
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            assert hamming(stored[a], stored[b]) > k, (a, b)
    # members of one family are within 2 of each other: exactly one per family got in
    assert sorted(int(key.split("-")[0][1:]) for key in inserted) == list(range(len(families)))


def test_pairs_and_clusters_stream_like_the_sync_index(database_url, collection_name):
    rows = _planted(9, n=200)

    async def main():
        async with AsyncSimhashIndex(database_url, collection_name) as ix:
            await ix.add_many([{"key": key, "fp": fp} for key, fp in rows.items()])
            pairs = [p async for p in ix.pairs(k=5)]
            clusters = [c async for c in ix.clusters(k=5)]
            first = None
            async for p in ix.pairs(k=5):  # leaving early closes the stream
                first = p
                break
            return pairs, clusters, first

    pairs, clusters, first = _run(main())
    with SimhashIndex(database_url, collection_name) as sync:
        assert pairs == list(sync.pairs(k=5))
        assert clusters == list(sync.clusters(k=5))
    assert first == pairs[0]
    want = {tuple(sorted((a, b))) for a in rows for b in rows if a < b and hamming(rows[a], rows[b]) <= 5}
    assert {tuple(sorted((p.key_a, p.key_b))) for p in pairs} == want


def test_doc_page_example_runs(fresh_database_url, monkeypatch):
    """docs/async.md's example, as written (SIMDB_DATABASE_URL points at a database of its own)."""
    import re
    from pathlib import Path

    monkeypatch.setenv("SIMDB_DATABASE_URL", fresh_database_url)
    doc = Path(__file__).resolve().parents[1] / "docs" / "async.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), re.S)
    assert blocks
    for code in blocks:
        exec(compile(code, str(doc), "exec"), {"__name__": "docs_async"})  # its asserts are the checks


# ---------------------------------------------------------------- verified collections (the default)
VOCAB = [f"w{i}" for i in range(24)] + list("中文字词语句")


def test_add_and_update_store_the_sketch(database_url, collection_name):
    a = "the quick brown fox jumps over the lazy dog near the river bank on a sunny day"
    b = "an entirely different story about databases indexes and the people who tune them"

    async def main():
        async with AsyncSimhashIndex(database_url, collection_name) as ix:
            fp_a = await ix.add("a", a, meta={"n": 1})
            await ix.add("b", a)
            assert await ix.update("b", b) == ix.fingerprinter.fingerprint(b)
            await ix.add("byfp", fp=fp_a)  # a row given by fingerprint keeps no sketch
            got = await ix.near(a)
            return fp_a, got

    fp_a, got = _run(main())
    with SimhashIndex(database_url, collection_name) as sync:
        sketches = dict(sync.connection().execute(
            "SELECT key, shingles FROM simdb_fingerprints WHERE collection_id = %s", (sync.collection_id,)
        ).fetchall())
        assert sketches == {"a": sync.verifier.sketch(a), "b": sync.verifier.sketch(b), "byfp": None}
        want = sync.near(a)
        assert got == want and [m.key for m in want][:1] == ["a"] and want[0].jaccard is not None
        assert "byfp" in [m.key for m in want] and "b" not in [m.key for m in want]
        assert sync.get("a").fp == fp_a
        assert [m.key for m in sync.near(b)] == ["b"]


@pytest.mark.slow
def test_verified_add_if_unique_is_atomic_under_concurrency(database_url, collection_name):
    """Families of near-duplicate texts written by many tasks at once: no two rows kept are
    near-duplicates by the verified rule, and every refusal names a verified match."""
    rng = random.Random(8)
    jobs = []
    for f in range(12):
        base = [rng.choice(WORDS) + str(f) for _ in range(100)]
        for j in range(6):
            w = list(base)
            w[rng.randrange(len(w))] = f"edit{j}"
            jobs.append((f"f{f}-{j}", " ".join(w)))
    rng.shuffle(jobs)

    async def main():
        async with AsyncSimhashIndex(database_url, collection_name, pool_size=6) as ix:
            return await asyncio.gather(*(ix.add_if_unique(key, text) for key, text in jobs))

    results = _run(main())
    texts = dict(jobs)
    with SimhashIndex(database_url, collection_name) as sync:
        kept = sorted(key for (key, _), r in zip(jobs, results) if r.inserted)
        assert len(sync) == len(kept) and {int(key.split("-")[0][1:]) for key in kept} == set(range(12))
        for (_key, _), r in zip(jobs, results):
            assert r.inserted or (r.matches and all(m.jaccard >= 0.8 for m in r.matches))
        fper, verifier = sync.fingerprinter, sync.verifier
        for i, a in enumerate(kept):
            for b in kept[i + 1:]:
                d = hamming(fper.fingerprint(texts[a]), fper.fingerprint(texts[b]))
                j = verifier.similarity(verifier.sketch(texts[a]), verifier.sketch(texts[b]))
                assert not (d <= verifier.k and j >= verifier.min_jaccard), (a, b, d, j)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["verified", "0.13 verified", "plain"]), st.lists(st.text(alphabet=st.sampled_from(list("ab cd_中文字ÜßΣ!x1 ")), max_size=60)
                          | st.lists(st.sampled_from(VOCAB), max_size=300).map(" ".join), max_size=8))
def test_fingerprints_off_the_loop_equal_the_sync_index(which, texts):
    """What the executor computes for a text is what SimhashIndex computes (Fingerprinter.fingerprint),
    for the candidate Fingerprinter of new verified collections, of those made by 0.13, and another."""
    fper = {"verified": candidate_fingerprinter(), "0.13 verified": Fingerprinter(stopwords=False, weighting="tf"),
            "plain": Fingerprinter()}[which]
    assert fingerprints_politely(fper, texts) == [fper.fingerprint(text, empty=None) for text in texts]


def test_cancelling_add_many_leaves_nothing_committed(database_url):
    """Issue 31 item 7: a cancelled add_many raised CancelledError yet committed its rows later.
    The items wait half-way until the task is cancelled; a second load (which takes the
    collection's load lock) then shows what the first one left: nothing."""
    name = "aio_cancel_" + uuid.uuid4().hex[:8]
    halfway, release = threading.Event(), threading.Event()

    def items():
        for i in range(2000):
            if i == 1000:
                halfway.set()
                release.wait(60)
            yield {"key": f"k{i}", "text": f"{WORDS[i % len(WORDS)]} item {i} " + " ".join(WORDS[: i % 20 + 3])}

    async def main():
        async with AsyncSimhashIndex(database_url, name) as ix:
            task = asyncio.create_task(ix.add_many(items(), workers=1))
            await asyncio.to_thread(halfway.wait, 60)
            task.cancel()
            await asyncio.sleep(0)
            release.set()
            with pytest.raises(asyncio.CancelledError, match="rolled back, nothing was stored"):
                await task

    _run(main())
    with SimhashIndex(database_url, name) as ix:
        ix.add_many([{"key": "after", "text": "a later load waits for the first one's transaction"}], workers=1)
        assert len(ix) == 1 and ix.get("k0") is None
