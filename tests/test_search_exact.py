"""Exactness: near / near_many / simdb_near equal a brute-force scan for k = 0..11."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdb.core.bits import hamming, to_signed, to_unsigned
from simdb.index import SimhashIndex

MASK = 2**64 - 1
SIGN_EDGES = [0, 1, 2**63 - 1, 2**63, 2**63 + 1, MASK, MASK - 1, 0xFFFF_0000_FFFF_0000, 0x0000_FFFF_0000_FFFF]


@pytest.fixture(scope="module")
def shared(database_url):
    ix = SimhashIndex(database_url, "exactness-" + random.Random().randbytes(4).hex())
    yield ix
    ix.close()


def _flip(x: int, n: int, rng: random.Random, positions=range(64)) -> int:
    for b in rng.sample(list(positions), n):
        x ^= 1 << b
    return x


def _dataset(rng: random.Random, k: int, shape: str) -> tuple[list[int], list[int]]:
    """Stored fingerprints and queries for one example."""
    queries = [rng.getrandbits(64) for _ in range(4)] + [rng.choice(SIGN_EDGES)]
    stored = [rng.getrandbits(64) for _ in range(rng.randint(0, 60))]
    for q in queries:
        for d in range(0, k + 2):  # planted at every distance 0..k+1
            stored.append(_flip(q, d, rng))
        # equal blocks with the rest far away, and everything concentrated in one block
        blk = rng.randrange(4)
        keep = 0xFFFF << (48 - 16 * blk)
        stored.append((q & keep) | (rng.getrandbits(64) & ~keep & MASK))
        stored.append(_flip(q, min(k + 1, 16), rng, range(16 * blk, 16 * blk + 16)))
        stored.append(_flip(q, min(k, 16), rng, range(16 * blk, 16 * blk + 16)))
        stored.append(q ^ MASK)
    if shape == "skewed":  # many rows in the query's own buckets
        q = queries[0]
        stored += [(q & (0xFFFF << 48)) | rng.getrandbits(48) for _ in range(150)]
        stored += [(q & 0xFFFF) | (rng.getrandbits(48) << 16) for _ in range(150)]
    stored += SIGN_EDGES
    return stored, queries


def _brute(stored: list[int], q: int, k: int) -> list[tuple[int, str]]:
    return sorted((hamming(q, fp), f"r{i}") for i, fp in enumerate(stored) if hamming(q, fp) <= k)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(k=st.integers(0, 11), seed=st.integers(0, 2**32), shape=st.sampled_from(["random", "skewed"]))
def test_near_equals_brute_force(shared, k, seed, shape):
    rng = random.Random(seed)
    stored, queries = _dataset(rng, k, shape)
    shared.clear()
    shared.add_many({"key": f"r{i}", "fp": fp} for i, fp in enumerate(stored))
    if shape == "skewed":
        shared.connection().execute("ANALYZE simdb_fingerprints")
        shared.refresh_stats()
    many = shared.near_many(queries, k=k)
    conn = shared.connection()
    for q, batch in zip(queries, many):
        want = _brute(stored, q, k)
        got = shared.near(q, k=k)
        assert [(m.distance, m.key) for m in got] == want
        assert all(m.fp == stored[int(m.key[1:])] and m.similarity == 1 - m.distance / 64 for m in got)
        assert [(m.distance, m.key) for m in batch] == want
        sql = conn.execute("SELECT key, fp, distance FROM simdb_near(%s, %s, %s)", (shared.collection, to_signed(q), k)).fetchall()
        assert [(d, key) for key, _, d in sql] == want
        assert all(to_unsigned(fp) == stored[int(key[1:])] for key, fp, _ in sql)


@pytest.mark.parametrize("k", range(12))
def test_every_k_on_a_larger_random_set(database_url, collection_name, k):
    rng = random.Random(1000 + k)
    base = [rng.getrandbits(64) for _ in range(3000)]
    stored = base + [_flip(base[i], rng.randint(0, k + 1), rng) for i in range(300)]
    with SimhashIndex(database_url, collection_name) as ix:
        ix.add_many({"key": f"r{i}", "fp": fp} for i, fp in enumerate(stored))
        queries = [stored[i] for i in rng.sample(range(len(stored)), 40)] + [_flip(base[i], k, rng) for i in range(20)]
        many = ix.near_many(queries, k=k)
        for q, batch in zip(queries, many):
            want = _brute(stored, q, k)
            assert [(m.distance, m.key) for m in ix.near(q, k=k)] == want
            assert [(m.distance, m.key) for m in batch] == want


@pytest.mark.parametrize("k", [3, 7])
def test_near_many_split_over_connections_equals_one_connection(database_url, collection_name, monkeypatch, k):
    """A big batch is answered by several connections in parallel: the same answers, in order."""
    import simdb.index as index_module

    monkeypatch.setattr(index_module, "NEAR_MANY_PARALLEL_MIN", 10)
    monkeypatch.setattr(index_module, "NEAR_MANY_CHUNK", 25)  # more pieces than workers
    rng = random.Random(77 + k)
    base = [rng.getrandbits(64) for _ in range(2000)]
    stored = base + [_flip(base[i], rng.randint(0, k + 1), rng) for i in range(200)]
    with SimhashIndex(database_url, collection_name) as ix:
        ix.add_many({"key": f"r{i}", "fp": fp} for i, fp in enumerate(stored))
        queries = [stored[i] for i in rng.sample(range(len(stored)), 120)] + [rng.getrandbits(64) for _ in range(30)]
        want = [[(d, key) for d, key in _brute(stored, q, k)] for q in queries]
        for workers in (None, 1, 3):
            got = ix.near_many(queries, k=k, workers=workers)
            assert [[(m.distance, m.key) for m in ms] for ms in got] == want
        assert ix._connections.pool is not None  # the parallel path ran
        with pytest.raises(ValueError, match="workers"):
            ix.near_many(queries, workers=0)


def test_near_many_inside_a_transaction_sees_its_own_rows(database_url, collection_name, monkeypatch):
    """Inside ix.transaction() the batch stays on that connection: uncommitted rows are found."""
    import simdb.index as index_module

    monkeypatch.setattr(index_module, "NEAR_MANY_PARALLEL_MIN", 1)
    with SimhashIndex(database_url, collection_name) as ix:
        ix.add("committed", fp=0x1111_2222_3333_4444)
        with ix.transaction() as conn:
            conn.execute(
                "INSERT INTO simdb_fingerprints (collection_id, key, fp) VALUES (%s, 'pending', %s)",
                (ix.collection_id, to_signed(0x1111_2222_3333_4445)),
            )
            got = ix.near_many([0x1111_2222_3333_4444] * 5, k=3, workers=4)
            assert all({m.key for m in ms} == {"committed", "pending"} for ms in got)
        assert ix._connections.pool is None


def test_close_shuts_near_many_workers_and_their_connections(database_url, collection_name, monkeypatch):
    import simdb.index as index_module

    monkeypatch.setattr(index_module, "NEAR_MANY_PARALLEL_MIN", 1)
    ix = SimhashIndex(database_url, collection_name)
    ix.add("a", fp=5)
    assert [[m.key for m in ms] for ms in ix.near_many([5, 4, 7], k=1, workers=2)] == [["a"], ["a"], ["a"]]
    conns = ix._connections.connections
    assert len(conns) >= 2  # this thread's and the workers'
    ix.close()
    assert ix._connections.pool is None and all(c.closed for c in conns)
    with pytest.raises(RuntimeError, match="closed"):
        ix.near_many([5], workers=2)
