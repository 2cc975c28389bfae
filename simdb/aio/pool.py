"""The async front end's connections and off-loop helpers: a small psycopg ``AsyncConnection`` pool,
the sync index's writes in cancellation-safe worker threads, the batching limits, and the CPU work
(fingerprints, probe arrays) done in slices that hand the GIL back to the event loop.

Kept apart from :mod:`simdb.aio.index` so the index class reads as the mapping of
``SimhashIndex``'s methods onto async connections, and these mechanics are tested once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from simdb.embedded.socket_only import pin_to_socket
from simdb.store import collection_guard as _guard
from simdb.store.urls import CLIENT_ENCODING

#: near_many / batched near: queries per statement (as SimhashIndex.near_many)
CHUNK = 20_000
#: fingerprinting: characters per slice between GIL handovers (about 1 ms of work)
POLITE_CHARS = 4_000
#: pairs / clusters: items fetched from the worker thread at a time
STREAM_CHUNK = 2_000
SESSION = ("SET max_parallel_workers_per_gather = 0", "SET plan_cache_mode = force_generic_plan")
#: probe arrays longer than this are encoded in the executor (see :func:`pg_array_params`)
INLINE_PROBES = 2_000
#: array elements encoded between GIL handovers
POLITE_ELEMENTS = 5_000


def libpq_url(engine) -> str:
    """libpq URI of a SQLAlchemy engine's URL (password kept: it is ours to connect with)."""
    return pin_to_socket(make_url(engine.url).set(drivername="postgresql").render_as_string(hide_password=False))


class Pool:
    """Up to ``size`` AsyncConnections, opened on demand and reused; a broken one is dropped."""

    def __init__(self, conninfo: str, size: int, on_rule_change: Callable[[int], None]):
        self._conninfo = conninfo
        self._on_rule_change = on_rule_change  # told of changes of a collection's rule (collection_guard)
        self._slots = asyncio.Semaphore(size)
        self._idle: list[psycopg.AsyncConnection] = []
        self._open: set[psycopg.AsyncConnection] = set()

    async def _connect(self) -> psycopg.AsyncConnection:
        conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True, client_encoding=CLIENT_ENCODING)
        for stmt in SESSION:
            await conn.execute(stmt)
        handler = _guard.notice_handler(self._on_rule_change)  # as collection_guard.listen, on an async connection
        conn.add_notify_handler(handler)
        try:
            await conn.execute(_guard.LISTEN_SQL)
        except psycopg.Error:  # a hot standby refuses LISTEN: used as it is
            conn.remove_notify_handler(handler)
        self._open.add(conn)
        return conn

    @asynccontextmanager
    async def connection(self):
        async with self._slots:
            conn = self._idle.pop() if self._idle else await self._connect()
            ok = False
            try:
                yield conn
                ok = True
            finally:
                idle = psycopg.pq.TransactionStatus.IDLE
                if ok or (not conn.closed and conn.info.transaction_status == idle):
                    self._idle.append(conn)
                else:
                    self._open.discard(conn)
                    await conn.close()

    async def close(self) -> None:
        conns, self._open, self._idle = list(self._open), set(), []
        for conn in conns:
            await conn.close()


async def write_in_thread(sync: Any, what: str, *args: Any, **kwargs: Any) -> Any:
    """``sync.what(*args, **kwargs)``, a write of the sync index ``sync``, in a worker thread; cancelling the
    caller (``asyncio.wait_for``'s timeout, ``task.cancel()``) never leaves a write it was not told of.

    Why: a thread cannot be stopped, so an awaited ``run_in_executor`` that is cancelled lets its
    write go on and commit later (seen: ``add_if_unique`` waiting for another writer's lock, timed
    out, then stored its row once that lock was released). Here the cancellation cancels the
    thread's statement on the server (its transaction rolls back) and waits for the thread; the
    ``CancelledError`` then says which: rolled back, nothing stored, or committed (the statement had
    already finished), with the result."""
    loop = asyncio.get_running_loop()
    fn = getattr(sync, what)
    conns: list[Any] = []
    running = threading.Lock()  # held by a cancel request: fn's thread takes no other work meanwhile
    stopped = threading.Event()  # cancelled before fn started: it never starts

    def run() -> Any:
        with running:
            if stopped.is_set():
                raise RuntimeError("cancelled before it started")
            conns.append(sync.connection())  # the connection fn runs on: this thread's
        try:
            return fn(*args, **kwargs)
        finally:
            with running:
                conns.clear()

    def cancel() -> None:  # only while fn runs: a later statement on that connection is another call's
        with running:
            stopped.set()
            if conns:
                try:
                    conns[0].cancel_safe()
                except psycopg.Error:  # the connection is gone: its transaction ended with it
                    pass

    work = loop.run_in_executor(None, run)
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        pass
    threading.Thread(target=cancel, daemon=True).start()  # off the loop: it opens a connection of its own
    result, error = await outcome(work)
    if error is not None:
        raise asyncio.CancelledError(f"{what} cancelled: its transaction was rolled back, nothing was stored") \
            from None
    raise asyncio.CancelledError(f"{what} cancelled after it committed: {result!r}") from None


def close_later(loop: asyncio.AbstractEventLoop, close: Callable[[], Any]) -> None:
    """Call ``close`` (a sync generator's) in a worker thread, or here if the loop takes no more
    work (it is closing): a done-callback of the thread that was still inside the generator."""
    try:
        loop.run_in_executor(None, close)
    except RuntimeError:  # the loop or its executor is shut down
        close()


async def outcome(work: asyncio.Future) -> tuple[Any, Exception | None]:
    """The result of ``work`` or its exception, however often the caller is cancelled meanwhile.

    Why: a cancelled write goes on in its thread until it commits or rolls back, and the
    ``CancelledError`` the caller gets must say which; a second cancellation while waiting for that
    must not lose the answer."""
    while True:
        try:
            return await asyncio.shield(work), None
        except asyncio.CancelledError:
            continue
        except Exception as error:
            return None, error


#: how long a worker thread pauses to hand the GIL to the event loop (see :func:`hand_over`)
HANDOVER_SECONDS = 0.0001


def hand_over() -> None:
    """Let the event loop's thread take the GIL, if it waits for it (called by worker threads
    between slices of about a millisecond of Python work).

    Why a real pause and not ``time.sleep(0)``: a zero sleep releases the GIL and takes it
    straight back, usually before the waiting thread has woken up, so the loop still waits
    for the interpreter's switch interval (5 ms). Measured (a thread doing 1 ms slices, a
    watchdog on the loop): wake-ups later than 5 ms: 39 of 1,787 with ``sleep(0)``, 9 of 2,083
    with a 0.1 ms pause, 339 of 383 with no pause at all."""
    time.sleep(HANDOVER_SECONDS)


def polite_slices(texts: list[str]) -> Iterator[slice]:
    """Consecutive slices of ``texts`` of about ``POLITE_CHARS`` characters (at least one text each), the
    GIL handed back (:func:`hand_over`) after each one's work.

    Why: fingerprinting is mostly Python code holding the GIL. Run in a worker thread
    in one piece, they make the event loop's thread wait for the GIL up to the interpreter's switch
    interval (5 ms) again and again; a handover every ~1 ms of work keeps those waits short."""
    start = 0
    while start < len(texts):
        end, size = start, 0
        while end < len(texts) and (end == start or size + len(texts[end]) <= POLITE_CHARS):
            size += len(texts[end])
            end += 1
        yield slice(start, end)
        hand_over()
        start = end


def fingerprints_politely(fper, texts: list[str]) -> list[int | None]:
    """The unsigned fingerprint of each text (None: no features), ``fper.many`` batched in
    :func:`polite_slices`."""
    out: list[int | None] = []
    for part in polite_slices(texts):
        out += fper.many(texts[part], empty=None)
    return out


def pg_array_params(params: dict) -> dict:
    """``params`` with each list value as PostgreSQL array text (``'{1,2,3}'``): the statements
    cast them (``%(qi)s::int4[]``), so the SQL is the store's, unchanged.

    Why: psycopg encodes a Python list of ints element by element on the thread that executes,
    which is the event loop; a batch at k = 11 has 548 probes a query
    (54,800 for 100 queries: tens of ms of loop time). Built here, in the executor, in slices
    that hand the GIL back, the loop only copies a string."""
    out = dict(params)
    for name, value in params.items():
        if isinstance(value, list):
            parts = []
            for s in range(0, len(value), POLITE_ELEMENTS):
                parts.append(",".join(map(str, value[s : s + POLITE_ELEMENTS])))
                hand_over()
            out[name] = "{" + ",".join(parts) + "}"
    return out
