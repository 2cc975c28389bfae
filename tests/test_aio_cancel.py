"""Cancelling AsyncSimhashIndex's writes, which run on the sync index in a worker thread (add, update,
add_if_unique, whatever the collection's rule): the caller is never told "cancelled" while the write
goes on and commits later. And a cancelled ``pairs()`` / ``clusters()`` stream.

Plain ``asyncio.run`` per test (no async test plugin needed).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from simdb.aio import AsyncSimhashIndex
from simdb.aio.pool import libpq_url
from simdb.store.unique import key_lock

TEXT = "the quick brown fox jumps over the lazy dog near the river bank at dawn"


async def _blocked_by(url: str, blocker: psycopg.Connection, write: asyncio.Future) -> None:
    """Return once some statement waits for a lock ``blocker`` holds (the write's), within 120 s.

    Why not a fixed timeout: on a loaded machine a 0.3 s one could fire between the write's thread
    taking its connection and sending the statement that waits; the cancel request then finds no
    statement to cancel, the write waits for the lock for good, and the test (which releases the
    lock only afterwards) hangs the run. Asked on a connection of its own, in autocommit: pg_locks
    is read afresh by each statement."""
    with psycopg.connect(url, autocommit=True) as watcher:
        deadline = asyncio.get_running_loop().time() + 120
        while asyncio.get_running_loop().time() < deadline and not write.done():
            if watcher.execute("SELECT count(*) FROM pg_locks WHERE NOT granted AND %s = ANY(pg_blocking_pids(pid))",
                               (blocker.info.backend_pid,)).fetchone()[0]:
                return
            await asyncio.sleep(0.05)
    raise AssertionError(f"the write never waited for the blocker's lock (done: {write.done()})")


@pytest.mark.parametrize(("call", "verify"), [("add_if_unique", None), ("add", None), ("update", None),
                                              ("add_if_unique", False)])  # False: a Hamming collection
def test_cancelled_write_waiting_for_a_lock_stores_nothing(database_url, collection_name, call, verify):
    """add_if_unique waiting for another writer's lock on its key, cancelled by wait_for's timeout,
    used to store its row once that lock was released. Now its statement is cancelled on the
    server and rolled back before the CancelledError reaches the caller. (add and update wait for
    a row lock held by another transaction.)"""

    async def main():
        async with AsyncSimhashIndex(database_url, collection_name, verify=verify) as ix:
            await ix.add("x", "an earlier version of the row under key x, about something else")
            before = await ix.get("x")
            blocker = psycopg.connect(libpq_url(ix.sync.engine))
            try:
                if call == "add_if_unique":
                    blocker.execute("SELECT pg_advisory_xact_lock(%s)", (key_lock(ix.collection_id, "x"),))
                    write = ix.add_if_unique("x", TEXT)
                else:
                    blocker.execute("SELECT 1 FROM simdb_fingerprints WHERE collection_id = %s AND key = 'x' "
                                    "FOR UPDATE", (ix.collection_id,))
                    write = getattr(ix, call)("x", TEXT, meta={"v": 2})
                write = asyncio.ensure_future(write)
                await _blocked_by(libpq_url(ix.sync.engine), blocker, write)
                with pytest.raises(asyncio.TimeoutError) as info:  # it cannot finish while the lock is held
                    await asyncio.wait_for(write, 0.1)
                assert "rolled back, nothing was stored" in str(info.value.__cause__)
            finally:
                blocker.rollback()
                blocker.close()
            # the cancelled write's thread has finished: nothing of it comes later
            assert await ix.get("x") == before
            assert (await ix.add_if_unique("y", TEXT)).inserted  # and the index is usable
            assert await ix.count() == 2

    asyncio.run(main())


def test_cancelled_write_that_committed_says_so(database_url, collection_name, monkeypatch):
    """A write whose statement had already committed when the cancellation came is reported as
    committed (with its result), not as cancelled-and-nothing-stored."""
    committed, release = threading.Event(), threading.Event()

    async def main():
        async with AsyncSimhashIndex(database_url, collection_name) as ix:
            real_add = ix.sync.add

            def add_then_wait(*args, **kwargs):
                out = real_add(*args, **kwargs)
                committed.set()
                release.wait(60)
                return out

            monkeypatch.setattr(ix.sync, "add", add_then_wait)
            task = asyncio.create_task(ix.add("x", TEXT))
            await asyncio.to_thread(committed.wait, 60)
            task.cancel()
            await asyncio.sleep(0)
            release.set()
            with pytest.raises(asyncio.CancelledError, match="add cancelled after it committed"):
                await task
            assert (await ix.get("x")) is not None

    asyncio.run(main())


def test_a_write_cancelled_before_its_thread_started_never_runs(database_url, collection_name):
    """With every worker thread busy, a cancelled write would still run once a thread was free
    (and commit, after the caller was told it was cancelled); now it never starts."""
    busy, release = threading.Event(), threading.Event()

    async def main():
        async with AsyncSimhashIndex(database_url, collection_name) as ix:
            loop = asyncio.get_running_loop()
            loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
            blocker = loop.run_in_executor(None, lambda: (busy.set(), release.wait(60)))
            with ThreadPoolExecutor(max_workers=1) as waiter:  # not the busy default executor
                await loop.run_in_executor(waiter, busy.wait, 60)
            task = asyncio.create_task(ix.add("x", TEXT))
            await asyncio.sleep(0)
            task.cancel()
            await asyncio.sleep(0)
            release.set()
            with pytest.raises(asyncio.CancelledError, match="rolled back, nothing was stored"):
                await task
            await blocker
            assert await ix.get("x") is None

    asyncio.run(main())


def test_a_stream_cancelled_while_fetching_is_cancelled_and_its_generator_closed_after(database_url,
                                                                                        collection_name):
    """``asyncio.wait_for`` around an ``async for`` over ``clusters()`` used to end in ``ValueError:
    generator already executing``: the stream closed the sync generator while the worker thread was
    still inside it. Now the caller gets its timeout, and the generator is closed once that thread
    has finished its chunk."""
    release, closed, inside = threading.Event(), threading.Event(), threading.Event()

    def slow_clusters(*args, **kwargs):
        try:
            yield "first"
            inside.set()
            release.wait(30)  # the worker thread is inside the generator when the caller is cancelled
            yield "second"
        finally:
            closed.set()

    async def main():
        async with AsyncSimhashIndex(database_url, collection_name) as ix:
            await ix.add("a", TEXT)
            await ix.add("b", TEXT + " again")
            real = ix.sync.clusters
            ix.sync.clusters = slow_clusters  # type: ignore[method-assign]

            async def consume():
                return [c async for c in ix.clusters()]

            # wait_for's timeout only once the thread is inside the generator: a fixed 2 s timer fired
            # before that on a loaded machine (two thread hops), and then the stream was not mid-fetch
            consuming = asyncio.ensure_future(consume())
            assert await asyncio.to_thread(inside.wait, 60), "the worker thread never entered the generator"
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(consuming, 0.1)  # it cannot end: the thread waits for `release`
            assert inside.is_set() and not closed.is_set()  # it cannot be closed from outside meanwhile
            release.set()
            assert await asyncio.get_running_loop().run_in_executor(None, closed.wait, 30)
            ix.sync.clusters = real  # type: ignore[method-assign]
            assert [sorted(c.keys) async for c in ix.clusters()] == [["a", "b"]]  # and the index is usable

    asyncio.run(main())
