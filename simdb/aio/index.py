"""The :class:`AsyncSimhashIndex` class: ``SimhashIndex``'s methods, awaited.

See :mod:`simdb.aio` for why it is thin: where each method runs (the sync index in a worker thread, or
the rule's statements on pooled async connections) and how concurrent ``near`` calls are batched.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any

from simdb.aio.pool import (
    CHUNK,
    INLINE_PROBES,
    STREAM_CHUNK,
    Pool,
    close_later,
    fingerprints_politely,
    libpq_url,
    outcome,
    pg_array_params,
    write_in_thread,
)
from simdb.aio.reservation import AsyncReservation
from simdb.aio.reservation import reserve as _reserve
from simdb.core import validate as _validate
from simdb.core.bits import even_radii, probe_count, to_unsigned
from simdb.errors import IndexClosedError, InvalidArgumentError, InvalidTypeError
from simdb.index import Entry, SimhashIndex
from simdb.index import rules as _rules
from simdb.results import Match
from simdb.store import async_rows as _async_rows
from simdb.store.candidates import array_text_params

__all__ = ["AsyncSimhashIndex"]

_UNSET: Any = object()

#: rows decoded per loop turn (see :meth:`AsyncSimhashIndex._lookup`)
FETCH_ROWS = 500


class _LoadCancelled(Exception):
    """Raised by a cancelled add_many's items inside its worker thread: the load rolls back."""


class AsyncSimhashIndex:
    """An asyncio front end to one collection; the arguments are :class:`SimhashIndex`'s (and ``pool_size``).

    ``async with AsyncSimhashIndex(url, "posts") as index:`` (or ``index = await
    AsyncSimhashIndex.open(...)`` ... ``await index.close()``). ``SimhashIndex``'s methods by the same
    names, as coroutines (``count()`` for ``len()``, which cannot be awaited); ``pairs`` and ``clusters``
    are async iterators. Use one instance per event loop.
    """

    def __init__(
        self, database=None, collection: str = "default", fingerprinter=None, *,
        migrate: bool = True, jaccard: bool | None = None, verify: bool | None = None, pool_size: int = 4,
        max_text_bytes: int | None = None, store_texts: bool | None = None,
    ):
        if isinstance(pool_size, bool) or not isinstance(pool_size, int):
            raise InvalidTypeError(f"pool_size must be an int >= 1, got {type(pool_size).__name__} {pool_size!r}")
        if pool_size < 1:
            raise InvalidArgumentError(f"pool_size must be an int >= 1, got {pool_size!r}")
        self._args = (database, collection, fingerprinter)
        self._kwargs: dict[str, Any] = {
            "migrate": migrate, "jaccard": jaccard, "verify": verify, "max_text_bytes": max_text_bytes,
            "store_texts": store_texts,
        }
        self.pool_size = pool_size
        self.sync: SimhashIndex | None = None
        self._pool: Pool | None = None
        self._pending: list[tuple[int, int, asyncio.Future]] = []
        self._flush_scheduled = False
        self._fp_pending: list[tuple[str, asyncio.Future]] = []  # non-empty: a flush is scheduled
        self._tasks: set[asyncio.Task] = set()

    @classmethod
    async def open(cls, *args, **kwargs) -> AsyncSimhashIndex:
        index = cls(*args, **kwargs)
        await index._open()
        return index

    async def _open(self) -> None:
        if self.sync is not None:
            return

        def make() -> SimhashIndex:
            ix = SimhashIndex(*self._args, adaptive=False, **self._kwargs)
            ix.fingerprinter.fingerprint("warm up 预热", empty=None)  # lazy tokenizer set-up off the loop
            return ix

        self.sync = await asyncio.get_running_loop().run_in_executor(None, make)
        self._pool = Pool(libpq_url(self.sync.engine), self.pool_size, self.sync._on_rule_change)

    async def close(self) -> None:
        """Close the pooled connections and the synchronous index (and its engine, if simdb made it)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._pool is not None:
            await self._pool.close()
        if self.sync is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.sync.close)

    async def __aenter__(self) -> AsyncSimhashIndex:
        await self._open()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # ------------------------------------------------------------ helpers
    @property
    def collection(self) -> str:
        return self._args[1]

    @property
    def collection_id(self) -> int:
        return self._ready().collection_id

    @property
    def fingerprinter(self):
        return self._ready().fingerprinter

    def _ready(self) -> SimhashIndex:
        """The open sync index, else IndexClosedError naming this class (not the sync index it wraps):
        every method calls it first, so none answers before open() or after close()."""
        if self.sync is None:
            raise IndexClosedError(
                "AsyncSimhashIndex is not open: use `async with` or `await AsyncSimhashIndex.open(...)`"
            )
        if self.sync._closed:
            raise IndexClosedError("AsyncSimhashIndex is closed: open a new one")
        return self.sync

    def _connection(self):
        self._ready()
        assert self._pool is not None  # set with self.sync by _open()
        return self._pool.connection()

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------ single rows
    async def add(self, key: str, text: str | None = None, *, fp: int | None = None, meta: Any = None) -> int | None:
        """:meth:`SimhashIndex.add`: store (or replace) ``key``; returns the unsigned fingerprint."""
        return await write_in_thread(self._ready(), "add", key, text, fp=fp, meta=meta)

    async def update(self, key: str, text: str | None = None, *, fp: int | None = None, meta: Any = _UNSET) -> int | None:
        """:meth:`SimhashIndex.update`: KeyNotFoundError (a KeyError) if ``key`` is absent."""
        kw = {} if meta is _UNSET else {"meta": meta}
        return await write_in_thread(self._ready(), "update", key, text, fp=fp, **kw)

    async def get(self, key: str, default: Any = None) -> Entry | Any:
        self._ready()
        key = _validate.check_key(key)
        async with self._connection() as conn:
            row = await _async_rows.get_row(conn, self.collection_id, key)
        if row is None:
            return default
        return Entry(row[0], None if row[1] is None else to_unsigned(row[1]), row[2], row[3])

    async def text(self, key: str) -> str | None:
        """:meth:`SimhashIndex.text`: the text kept for ``key``, or None."""
        return await asyncio.to_thread(self._ready().text, key)

    async def remove(self, key: str) -> bool:
        self._ready()
        key = _validate.check_key(key)
        async with self._connection() as conn:
            return await _async_rows.delete_row(conn, self.collection_id, key)

    async def remove_many(self, keys: Iterable[str]) -> int:
        """:meth:`SimhashIndex.remove_many`: every key of ``keys`` deleted in one statement; how many existed."""
        _validate.check_items(keys, "keys", "keys (str)")
        return await write_in_thread(self._ready(), "remove_many", list(keys))

    async def count(self) -> int:
        """Rows in the collection (``len(SimhashIndex)``)."""
        async with self._connection() as conn:
            return await _async_rows.count_rows(conn, self.collection_id)

    async def clear(self) -> int:
        """:meth:`SimhashIndex.clear`: every row deleted (the collection and its config stay); the count."""
        return await write_in_thread(self._ready(), "clear")

    async def drop(self) -> bool:
        """:meth:`SimhashIndex.drop`: the collection, its configuration and its rows deleted; True if it
        existed. The index cannot be used afterwards."""
        return await write_in_thread(self._ready(), "drop")

    async def add_many(self, items: Iterable[Any], **options) -> int:
        """:meth:`SimhashIndex.add_many` (COPY, all or nothing) in a worker thread.

        Cancelling it never leaves rows the caller was not told about: a thread cannot be
        stopped, so the load is told to stop (its items raise, which rolls the whole
        load back) and the cancellation waits for the thread. The ``CancelledError`` then says
        which: rolled back, nothing stored; or, when the load was already past its last item,
        committed, with the number of items stored."""
        sync = self._ready()
        _validate.check_items(items)  # here: the worker thread would raise a bare TypeError
        stop = threading.Event()

        def until_stopped() -> Iterator[Any]:
            for item in items:
                if stop.is_set():
                    raise _LoadCancelled()
                yield item
            if stop.is_set():
                raise _LoadCancelled()

        load = asyncio.get_running_loop().run_in_executor(None, lambda: sync.add_many(until_stopped(), **options))
        try:
            return await asyncio.shield(load)
        except asyncio.CancelledError:
            stop.set()
            stored, error = await outcome(load)
            if isinstance(error, _LoadCancelled):
                raise asyncio.CancelledError("add_many cancelled: its load was rolled back, nothing was stored") \
                    from None
            if error is not None:
                raise asyncio.CancelledError("add_many cancelled: its load failed and was rolled back") from None
            raise asyncio.CancelledError(f"add_many cancelled after its load committed: {stored:,} items are stored") \
                from None

    # ------------------------------------------------------------ deduplication
    async def add_if_unique(self, key: str, text: str | None = None, *, fp: int | None = None, k: int = 3,
                            meta: Any = None, min_jaccard: float | None = None, verify: bool | None = None):
        """:meth:`SimhashIndex.add_if_unique`: atomic under concurrency (also against sync writers);
        returns :class:`simdb.results.AddResult`."""
        return await write_in_thread(self._ready(), "add_if_unique", key, text, fp=fp, k=k, meta=meta,
                                     min_jaccard=min_jaccard, verify=verify)

    async def reserve(self, key: str, text: str | None = None, **options: Any) -> AsyncReservation:
        """:meth:`SimhashIndex.reserve` (same arguments), finished by ``await r.commit()`` / ``rollback()``:
        :class:`~simdb.aio.reservation.AsyncReservation` (:mod:`simdb.aio.reservation` says how)."""
        return await _reserve(self._ready(), key, text, **options)

    async def near_key(self, key: str, k: int | None = None, limit: int | None = None, *,
                       min_jaccard: float | None = None, verify: bool | None = None) -> list[Match]:
        """:meth:`SimhashIndex.near_key`, on the sync index in a worker thread: a few statements and the
        verification stage over a key's candidates, one pipeline for both (they cannot drift apart)."""
        return await asyncio.to_thread(self._ready().near_key, key, k, limit, min_jaccard=min_jaccard, verify=verify)

    def pairs(self, k: int = 3, *, min_jaccard: float | None = None, verify: bool | None = None) -> AsyncIterator:
        """:meth:`SimhashIndex.pairs` as an async iterator (streamed from a worker thread): the
        collection's rule by default, ``verify=False`` for the Hamming pairs within ``k``."""
        return self._stream(lambda: self._ready().pairs(k, min_jaccard=min_jaccard, verify=verify))

    def clusters(self, k: int = 3, *, include_singletons: bool = False, min_jaccard: float | None = None,
                 verify: bool | None = None) -> AsyncIterator:
        """:meth:`SimhashIndex.clusters` as an async iterator (streamed from a worker thread); ``verify``
        as for :meth:`pairs`."""
        return self._stream(
            lambda: self._ready().clusters(k, include_singletons=include_singletons, min_jaccard=min_jaccard,
                                           verify=verify)
        )

    async def _stream(self, make: Callable[[], Any]) -> AsyncIterator:
        """The sync iterator ``make()`` gives, fetched ``STREAM_CHUNK`` items at a time in a worker thread.
        A consumer cancelled mid-fetch cannot stop that thread, still inside the sync generator (closing
        it then raised "generator already executing"): the generator is closed once the thread is done."""
        loop = asyncio.get_running_loop()
        it = iter(await asyncio.to_thread(make))
        fetching: asyncio.Future | None = None
        try:
            while True:
                fetching = loop.run_in_executor(None, lambda: list(itertools.islice(it, STREAM_CHUNK)))
                chunk = await asyncio.shield(fetching)
                if not chunk:
                    return
                for item in chunk:
                    yield item
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                if fetching is not None and not fetching.done():
                    fetching.add_done_callback(lambda _: close_later(loop, close))
                else:
                    await asyncio.to_thread(close)

    # ------------------------------------------------------------ near: features off the loop
    async def _fingerprint(self, text: str) -> int | None:
        """The unsigned fingerprint of a text (None: no features), never computed on the event loop.

        Why batched: 100 concurrent calls each fingerprinting a short text inline
        would run back to back in one loop iteration (tens of ms of blocking in all). Instead the
        texts of all concurrent callers are done together in the executor: one thread hop per
        batch, in slices that hand the GIL back, and the loop stays free meanwhile."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._fp_pending.append((text, fut))
        if len(self._fp_pending) == 1:
            loop.call_soon(self._spawn, self._features_flush())
        return await fut

    async def _features_flush(self) -> None:
        batch, self._fp_pending = self._fp_pending, []
        texts, futures = zip(*batch)
        try:
            got = await asyncio.to_thread(fingerprints_politely, self._ready().fingerprinter, list(texts))
        except BaseException as exc:
            for fut in futures:
                if not fut.done():
                    fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for fut, fp in zip(futures, got):
            if not fut.done():
                fut.set_result(fp)

    # ------------------------------------------------------------ near
    async def _by_current_rule(self, read: Callable[[], Awaitable[Any]]) -> Any:
        """``await read()`` by the collection's current rule, as the sync index's reads are
        (:func:`simdb.index.by_current_rule`): the pool's connections listen too, and a
        change announced before or during the read is followed (in a worker thread: it reads the
        config) and the read asked again."""
        sync = self._ready()
        if sync._rule_changed.is_set():
            await asyncio.to_thread(sync._follow_config)
        out = await read()
        if sync._rule_changed.is_set():
            await asyncio.to_thread(sync._follow_config)
            out = await read()
        return out

    async def near(self, query: str | int, k: int | None = None, limit: int | None = None, *,
                   min_jaccard: float | None = None, verify: bool | None = None) -> list[Match]:
        """:meth:`SimhashIndex.near`. Concurrent calls share statements (see :mod:`simdb.aio`)."""
        return await self._by_current_rule(lambda: self._near(query, k, limit, min_jaccard, verify))

    async def _near(self, query: Any, k: Any, limit: Any, min_jaccard: Any, verify: Any) -> list[Match]:
        sync = self._ready()
        rule = sync.rule  # the sync index's rule: the same argument checks, features, statements, answers
        if not rule.async_batched:  # banded collections: the sync index's code
            return await asyncio.to_thread(sync.near, query, k, limit, min_jaccard=min_jaccard, verify=verify)
        query, limit = _validate.check_query(query, limit, sync.max_text_bytes)
        k, _ = rule.near_args(query, k, min_jaccard, verify, self.collection)  # a Hamming rule: by distance
        fp = await self._fingerprint(query) if isinstance(query, str) else _rules.query_fp(None, query)
        if fp is None:
            return []
        matches = await self._queued(fp, k)
        return matches if limit is None else matches[:limit]

    async def _queued(self, fp: int, k: int) -> list[Match]:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pending.append((fp, k, fut))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._schedule_flush)
        return await fut

    def _schedule_flush(self) -> None:
        self._flush_scheduled = False
        self._spawn(self._flush())

    async def _flush(self) -> None:
        """Answer every queued near() once a connection is free (the queue grows while we wait),
        one statement per radius. Whatever goes wrong reaches every waiting caller: no future is left
        pending."""
        batch: list[tuple[int, int, asyncio.Future]] = []
        try:
            async with self._connection() as conn:
                batch, self._pending = self._pending, []
                groups: dict[int, list[tuple[int, asyncio.Future]]] = {}
                for fp, k, fut in batch:
                    groups.setdefault(k, []).append((fp, fut))
                for k, group in groups.items():
                    for s in range(0, len(group), CHUNK):
                        piece = group[s : s + CHUNK]
                        answers = await self._lookup(conn, [fp for fp, _ in piece], k)
                        for (_, fut), matches in zip(piece, answers):
                            if not fut.done():
                                fut.set_result(matches)
        except BaseException as exc:
            if not batch:  # failed before taking the queue (no connection): fail the queue
                batch, self._pending = self._pending, []
            for *_, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise

    async def _lookup(self, conn, fps: list[int], k: int) -> list[list[Match]]:
        """Each unsigned fp's answer, the rows within ``k``, in one statement of the rule
        (:meth:`~simdb.index.rules.HammingRule.lookup_statement`), decoded ``FETCH_ROWS`` at a time
        and handed to :func:`~simdb.index.rules.hamming_answers`. Big probe arrays are built and
        encoded in the executor."""
        cur = await _async_rows.open_cursor(conn, await self._statement(fps, k), binary=False)
        n = len(fps)
        rows: list[tuple] = []
        while True:
            chunk = await cur.fetchmany(FETCH_ROWS)
            rows += [(0, *row) for row in chunk] if n == 1 else chunk
            if len(chunk) < FETCH_ROWS:
                break
            await asyncio.sleep(0)
        every = list(range(n))
        return _rules.hamming_answers(n, every, [every], [rows], None)

    async def _statement(self, fps: list[int], k: int) -> tuple[str, dict]:
        """The rule's statement of ``fps`` at ``k``, its int lists as array text: built and encoded in the
        executor when its probes are many (:func:`simdb.aio.pool.pg_array_params`, handing the GIL back)."""
        rule = self._ready().rule
        collection_id = self.collection_id

        def encoded(encode: Callable[[dict], dict]) -> tuple[str, dict]:
            sql, params = rule.lookup_statement(collection_id, fps, k)
            return sql, encode(params)

        if len(fps) * probe_count(even_radii(k)) <= INLINE_PROBES:
            return encoded(array_text_params)
        return await asyncio.to_thread(encoded, pg_array_params)

    # ------------------------------------------------------------ near_many
    async def near_many(self, queries: Iterable[str | int], k: int | None = 3, limit: int | None = None, *,
                        min_jaccard: float | None = None, verify: bool | None = None) -> list[list[Match]]:
        """:meth:`SimhashIndex.near_many`: answers in the order of ``queries``; statements of up to
        20,000 queries run concurrently on the pool's connections (a verified collection's: on the sync
        index)."""
        queries = _validate.check_queries(queries)  # once: an iterator cannot be read by a second try
        return await self._by_current_rule(lambda: self._near_many(queries, k, limit, min_jaccard, verify))

    async def _near_many(self, queries: list, k: Any, limit: Any, min_jaccard: Any, verify: Any) -> list[list[Match]]:
        sync = self._ready()
        rule = sync.rule
        if not rule.async_batched:  # banded collections: the sync index's code
            return await asyncio.to_thread(sync.near_many, list(queries), k, limit, min_jaccard=min_jaccard,
                                         verify=verify)
        limit = _validate.check_limit(limit)
        k, _ = rule.near_many_args(k, min_jaccard, verify, self.collection)  # a Hamming rule: by distance
        queries = _validate.check_queries(queries, max_bytes=sync.max_text_bytes)  # and each text
        texts = [i for i, q in enumerate(queries) if isinstance(q, str)]
        fps = _rules.query_fps(queries)
        if texts:
            got = await asyncio.to_thread(fingerprints_politely, sync.fingerprinter, [queries[i] for i in texts])
            for i, fp in zip(texts, got):
                fps[i] = fp
        out: list[list[Match]] = [[] for _ in queries]

        async def piece(idx: list[int]) -> None:
            async with self._connection() as conn:
                answers = await self._lookup(conn, [fps[i] for i in idx], k)  # type: ignore[misc]
            for i, matches in zip(idx, answers):
                out[i] = matches if limit is None else matches[:limit]

        live = [i for i, fp in enumerate(fps) if fp is not None]
        jobs = [piece(live[s : s + CHUNK]) for s in range(0, len(live), CHUNK)]
        await asyncio.gather(*jobs)
        return out
