"""simdb.aio.AsyncSimhashIndex against a real PostgreSQL: the same answers as SimhashIndex and as
brute force, atomic add_if_unique under concurrency, all-or-nothing batches.

Plain ``asyncio.run`` per test (no async test plugin needed).
"""

from __future__ import annotations

import asyncio
import random

import pytest

from simdb import SimhashIndex
from simdb.aio import AsyncSimhashIndex
from simdb.bits import hamming


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
            return fp, fp_long

    fp, fp_long = _run(main())
    with SimhashIndex(database_url, collection_name) as sync:
        assert sync.fingerprinter.fingerprint("The quick brown fox jumps over the lazy dog near the river bank today") == fp
        assert sync.get("long").fp == fp_long == sync.fingerprinter.fingerprint(
            "a long text with many words " * 100)
        assert "a" not in sync and len(sync) == 2


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
