"""Concurrent bulk loads (add_many): no deadlock, all succeed, other collections are not stalled.

Issue 15, item 3: each load read the shared table and then asked for ACCESS
EXCLUSIVE, so two loads into different collections deadlocked. The locking now
lives in :mod:`simdb.store.bulk`. Every test starts from an empty
database (the case where the fast path is taken), with the rebuild threshold
lowered so that small loads exercise it.
"""

from __future__ import annotations

import json
import random
import subprocess
import threading

import psycopg
import pytest
from cli_support import base_env, simdb_argv

import simdb.store.bulk as bulk_mod
from simdb import SimhashIndex
from simdb.embedded import libpq_url

pytestmark = pytest.mark.slow


def _items(prefix: str, n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"key": f"{prefix}{i}", "fp": rng.getrandbits(64)} for i in range(n)]


def _load_all(url: str, loads: list[tuple[str, list[dict]]]) -> list[BaseException | None]:
    """Run the loads at once (one thread and one SimhashIndex each); the exception of each, or None."""
    errors: list[BaseException | None] = [None] * len(loads)
    # a timeout (as tests/test_concurrency.py's BARRIER_TIMEOUT): a thread whose index fails to open never
    # arrives, and without one the others wait for good; non-daemon threads, they then keep pytest from exiting
    barrier = threading.Barrier(len(loads), timeout=300)

    def work(i: int, collection: str, items: list[dict]) -> None:
        try:
            with SimhashIndex(url, collection) as ix:
                barrier.wait()
                ix.add_many(iter(items), chunk_rows=200)  # a one-shot iterator: no retry can hide a deadlock
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors[i] = exc

    threads = [threading.Thread(target=work, args=(i, c, items)) for i, (c, items) in enumerate(loads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return errors


@pytest.mark.parametrize("round_", range(3))
def test_loads_into_different_collections_all_succeed(fresh_database_url, monkeypatch, round_):
    monkeypatch.setattr(bulk_mod, "BULK_MIN_ROWS", 300)
    loads = [(f"c{j}", _items(f"c{j}-", 3000, 10 * round_ + j)) for j in range(4)]
    errors = _load_all(fresh_database_url, loads)
    assert errors == [None] * 4, errors
    for name, items in loads:
        with SimhashIndex(fresh_database_url, name) as ix:
            assert len(ix) == len(items)
            probe = items[len(items) // 2]
            assert [m.key for m in ix.near(probe["fp"], k=0)] == [probe["key"]]


def test_loads_into_the_same_collection_all_succeed(fresh_database_url, monkeypatch):
    monkeypatch.setattr(bulk_mod, "BULK_MIN_ROWS", 300)
    loads = [("shared", _items(f"w{j}-", 2000, 100 + j)) for j in range(3)]
    errors = _load_all(fresh_database_url, loads)
    assert errors == [None] * 3, errors
    with SimhashIndex(fresh_database_url, "shared") as ix:
        assert len(ix) == 6000
        for _, items in loads:
            assert [m.key for m in ix.near(items[7]["fp"], k=0)] == [items[7]["key"]]


def test_a_load_in_progress_does_not_stall_another_collection(fresh_database_url, monkeypatch):
    """A reader and a writer of a populated collection go on while a big load into another is half done."""
    monkeypatch.setattr(bulk_mod, "BULK_MIN_ROWS", 300)
    with SimhashIndex(fresh_database_url, "established") as ix:
        ix.add_many(_items("e", 500, 1))
        probe = ix.get("e5").fp
    half_way = threading.Event()
    resume = threading.Event()
    errors: list[BaseException] = []

    def items():
        for i, item in enumerate(_items("b", 4000, 2)):
            if i == 2000:
                half_way.set()
                assert resume.wait(120)
            yield item

    def load():
        try:
            with SimhashIndex(fresh_database_url, "big") as big:
                big.add_many(items(), chunk_rows=200)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
            half_way.set()

    t = threading.Thread(target=load)
    t.start()
    try:
        assert half_way.wait(120)
        # a stall would hit the statement timeout (a lock wait), not merely be slow
        with psycopg.connect(libpq_url(fresh_database_url), options="-c lock_timeout=5000") as conn:
            n = conn.execute("SELECT count(*) FROM simdb_fingerprints f JOIN simdb_collections c "
                             "ON c.id = f.collection_id WHERE c.name = 'established'").fetchone()[0]
            assert n == 500
        with SimhashIndex(fresh_database_url, "established") as ix:
            ix.connection().execute("SET lock_timeout = 5000")
            assert [m.key for m in ix.near(probe, k=0)] == ["e5"]
            ix.add("late", fp=12345)
            assert ix.get("late").fp == 12345
    finally:
        resume.set()
        t.join(300)
    assert not errors, errors
    with SimhashIndex(fresh_database_url, "big") as big:
        assert len(big) == 4000


def test_two_cli_adds_into_different_collections(fresh_database_url, tmp_path):
    """Issue 15: two ``simdb add`` of JSONL records at once into two collections both succeed."""
    files = []
    for j in range(2):
        path = tmp_path / f"part{j}.jsonl"
        rng = random.Random(j)
        words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]
        path.write_text("".join(
            json.dumps({"id": f"{j}-{i}", "text": " ".join(rng.choice(words) for _ in range(12))}) + "\n"
            for i in range(4000)))
        files.append(path)
    env = base_env(SIMDB_DATABASE_URL=fresh_database_url)
    procs = [subprocess.Popen(simdb_argv() + ["add", "-c", f"cli{j}", str(path)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for j, path in enumerate(files)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "added 4,000 texts" in out
