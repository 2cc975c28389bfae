"""The :class:`AsyncSimhashIndex` class: ``SimhashIndex``'s methods on async psycopg connections.

See :mod:`simdb.aio` for why it is thin and how concurrent ``near`` calls are batched.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

import psycopg

from simdb.aio.pool import STREAM_CHUNK, Pool, close_later, libpq_url, outcome, write_in_thread
from simdb.aio.search import AsyncSearch
from simdb.core import validate as _validate
from simdb.core.bits import to_signed, to_unsigned
from simdb.core.validate import check_fp, check_key, check_new_key, dump_meta
from simdb.errors import CollectionChangedError, IndexClosedError, InvalidArgumentError, InvalidTypeError
from simdb.index import Entry, SimhashIndex
from simdb.results import AddResult, Match, match
from simdb.store import async_rows as _async_rows
from simdb.store import collection_guard as _guard
from simdb.store import unique as _store_unique
from simdb.store.connect import RETRY_SQLSTATES

__all__ = ["AsyncSimhashIndex"]

_UNSET: Any = object()


class _LoadCancelled(Exception):
    """Raised by a cancelled add_many's items inside its worker thread: the load rolls back."""


class AsyncSimhashIndex(AsyncSearch):
    """An asyncio front end to one collection; the arguments are :class:`SimhashIndex`'s.

    ``async with AsyncSimhashIndex(url, "posts") as index:`` (or ``index = await
    AsyncSimhashIndex.open(...)`` ... ``await index.close()``). Methods mirror
    ``SimhashIndex``, by the same names: ``add``, ``add_many``, ``update``, ``get``, ``text``, ``remove``,
    ``count`` (``len()``, which cannot be awaited), ``clear``, ``drop``, ``near``, ``near_many``, ``near_key``,
    ``add_if_unique``, ``reserve`` are coroutines; ``pairs`` and ``clusters`` are async iterators. Use
    one instance per event loop.
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
        self._pending: list[tuple[int, int, Any, Any, asyncio.Future]] = []
        self._flush_scheduled = False
        self._fp_pending: list[tuple[str, bool, asyncio.Future]] = []
        self._fp_scheduled = False
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

    def _delegated(self) -> bool:
        """Does this collection's rule run on the sync index in a worker thread? (a banded
        collection: its writes keep band keys, whose code lives there once; the async statements,
        shared between concurrent calls, carry none: :attr:`simdb.index.rules.BandedRule.async_batched`)."""
        return not self._ready().rule.async_batched

    async def _in_thread(self, fn: Callable, *args, **kwargs) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(*args, **kwargs))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _store_features(self, text: Any, fp: Any) -> tuple[int | None, list[int] | None]:
        """(signed bigint or None: featureless, the verification sketch to store) for add/update,
        as ``SimhashIndex`` does it: a text in a verified collection keeps its sketch; a row
        given by ``fp`` has none (it is answered by Hamming distance)."""
        _validate.check_text_or_fp(text, fp)
        if fp is not None:
            return check_fp(fp), None
        if text is None:
            raise InvalidArgumentError("give text or fp")
        sync = self._ready()
        text = _validate.check_text(text, "text", sync.max_text_bytes)
        u, sketch = await self._text_features(text, sync.rule.verifier is not None)
        return (None if u is None else to_signed(u)), sketch

    # ------------------------------------------------------------ single rows
    async def _under_current_rule(self, write: Callable[[], Any]) -> Any:
        """``await write()``, again under the new rule if the store refused it as computed under an
        older one (:mod:`simdb.store.collection_guard`); ``write`` dispatches anew (the rule may be banded)."""
        try:
            return await write()
        except CollectionChangedError:
            await self._in_thread(self._ready()._follow_config)
            return await write()

    async def add(self, key: str, text: str | None = None, *, fp: int | None = None, meta: Any = None) -> int | None:
        """:meth:`SimhashIndex.add`: store (or replace) ``key``; returns the unsigned fingerprint."""
        return await self._under_current_rule(lambda: self._add(key, text, fp, meta))

    async def _add(self, key: Any, text: Any, fp: Any, meta: Any) -> int | None:
        if self._delegated():
            return await write_in_thread(self._ready(), "add", self._ready().add, key, text, fp=fp, meta=meta)
        key = check_new_key(key)
        signed, sketch = await self._store_features(text, fp)
        meta_json = dump_meta(meta)
        text_z = self._ready()._text_z(text, fp)
        async with self._connection() as conn:
            await _async_rows.upsert_row(conn, self.collection_id, key, signed, meta_json, sketch, None, text_z,
                                         version=self._ready().config_version)
        return None if signed is None else to_unsigned(signed)

    async def update(self, key: str, text: str | None = None, *, fp: int | None = None, meta: Any = _UNSET) -> int | None:
        """:meth:`SimhashIndex.update`: KeyNotFoundError (a KeyError) if ``key`` is absent."""
        return await self._under_current_rule(lambda: self._update(key, text, fp, meta))

    async def _update(self, key: Any, text: Any, fp: Any, meta: Any) -> int | None:
        if self._delegated():
            kw = {} if meta is _UNSET else {"meta": meta}
            return await write_in_thread(self._ready(), "update", self._ready().update, key, text, fp=fp, **kw)
        key = check_new_key(key)
        signed, sketch = await self._store_features(text, fp)
        with_meta = meta is not _UNSET
        meta_json = dump_meta(meta) if with_meta else None
        text_z = self._ready()._text_z(text, fp)
        async with self._connection() as conn:
            updated = await _async_rows.update_row(conn, self.collection_id, key, signed, sketch, meta_json, with_meta,
                                                   None, text_z, version=self._ready().config_version)
        if not updated:
            raise _validate.key_not_found(key, self.collection)
        return None if signed is None else to_unsigned(signed)

    async def get(self, key: str, default: Any = None) -> Entry | Any:
        self._ready()
        key = check_key(key)
        async with self._connection() as conn:
            row = await _async_rows.get_row(conn, self.collection_id, key)
        if row is None:
            return default
        return Entry(row[0], None if row[1] is None else to_unsigned(row[1]), row[2], row[3])

    async def text(self, key: str) -> str | None:
        """:meth:`SimhashIndex.text`: the text kept for ``key``, or None."""
        return await self._in_thread(self._ready().text, key)

    async def remove(self, key: str) -> bool:
        self._ready()
        key = check_key(key)
        async with self._connection() as conn:
            return await _async_rows.delete_row(conn, self.collection_id, key)

    async def count(self) -> int:
        """Rows in the collection (``len(SimhashIndex)``)."""
        self._ready()
        async with self._connection() as conn:
            return await _async_rows.count_rows(conn, self.collection_id)

    async def clear(self) -> int:
        """:meth:`SimhashIndex.clear`: every row deleted (the collection and its config stay); the count.
        In a worker thread, cancellation-safe (:func:`simdb.aio.pool.write_in_thread`)."""
        sync = self._ready()
        return await write_in_thread(sync, "clear", sync.clear)

    async def drop(self) -> bool:
        """:meth:`SimhashIndex.drop`: the collection, its configuration and its rows deleted; True if it
        existed. In a worker thread, cancellation-safe; the index cannot be used afterwards."""
        sync = self._ready()
        return await write_in_thread(sync, "drop", sync.drop)

    async def add_many(self, items: Iterable[Any], **options) -> int:
        """:meth:`SimhashIndex.add_many` (COPY, all or nothing) in a worker thread.

        Cancelling it never leaves rows the caller was not told about (issue 31): a thread
        cannot be stopped, so the load is told to stop (its items raise, which rolls the whole
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
        returns :class:`simdb.results.AddResult`. In a verified collection a text is refused when a
        row of another key within the candidate radius K passes the verification stage, as in the sync
        index (the key's own row is replaced, never a match)."""
        _validate.check_text_or_fp(text, fp)
        return await self._under_current_rule(lambda: self._add_if_unique(key, text, fp, k, meta, min_jaccard, verify))

    async def _add_if_unique(self, key: Any, text: Any, fp: Any, k: Any, meta: Any, min_jaccard: Any,
                             verify: Any) -> AddResult:
        if self._delegated():
            return await write_in_thread(self._ready(), "add_if_unique", self._ready().add_if_unique, key, text,
                                         fp=fp, k=k, meta=meta, min_jaccard=min_jaccard, verify=verify)
        if fp is None and self._ready().rule.verifies(text, verify, self.collection):
            return await self._add_if_unique_verified(key, str(text), k, meta, min_jaccard)
        if min_jaccard is not None:  # not a verified collection: the sync index says why not
            return await self._in_thread(self._ready().add_if_unique, key, text, fp=fp, k=k, meta=meta,
                                         min_jaccard=min_jaccard, verify=verify)
        key = check_new_key(key)
        k = _validate.check_k(k)
        signed: int | None
        if fp is not None:
            signed = check_fp(fp)
        elif text is None:
            raise InvalidArgumentError("give text or fp")
        else:
            signed = await self._text_signed(text)
        statements = _store_unique.add_if_unique_statements(
            self.collection_id, key, None if signed is None else to_unsigned(signed), k, dump_meta(meta),
            text_z=self._ready()._text_z(text, fp), version=self._ready().config_version,
        )
        rows = await self._in_transaction(statements)
        if rows:
            return AddResult(False, [match(r[0], r[1], r[2], r[3]) for r in rows])
        return AddResult(True, [])

    async def _text_signed(self, text: Any) -> int | None:
        """A text's signed fingerprint without a sketch (what a Hamming add_if_unique stores)."""
        text = _validate.check_text(text, "text", self._ready().max_text_bytes)
        u = (await self._text_features(text, False))[0]
        return None if u is None else to_signed(u)

    async def _add_if_unique_verified(self, key: Any, text: str, k: Any, meta: Any, min_jaccard: Any):
        """The sync index's verified add_if_unique on an async connection, in one transaction: the
        store's sorted advisory locks for the candidate radius K (:func:`simdb.index.duplicates.add_if_unique_statements`),
        then in a new snapshot the store's candidate search (``NEAR_VERIFY_SQL``), the store's
        verification stage (:func:`simdb.results.verified_matches`), and the store's upsert
        (with the sketch) only if nothing passed; retried on deadlock."""
        key = check_new_key(key)
        ck, hk, t = self._ready().rule.verify_params(k, min_jaccard, self.collection)
        text = _validate.check_text(text, "text", self._ready().max_text_bytes)
        meta_json = dump_meta(meta)
        u, sketch = await self._text_features(text, True)
        text_z = self._ready()._text_z(text, None)
        statements = _store_unique.add_if_unique_statements(self.collection_id, key, u, ck, meta_json, sketch, text_z,
                                                           self._ready().config_version)
        if u is None:  # featureless: never a near-duplicate, always inserted (with its sketch)
            await self._in_transaction(statements)
            return AddResult(True, [])
        locks = statements[:-1]  # the key's lock, then the sorted advisory locks (the last: the Hamming search)
        rule = self._ready().rule
        candidates = rule.lookup_statement(self.collection_id, [u], ck, True)  # the rule's candidate stage

        async def body(conn) -> list:
            return await _async_rows.add_if_unique_verified(conn, locks, candidates, self.collection_id, key, u,
                                                             meta_json, sketch, (rule.verifier, t, hk), text_z,
                                                             version=self._ready().config_version)

        found = await self._in_transaction(body)
        return AddResult(not found, found)

    async def _in_transaction(self, work: Any) -> list:
        """Run ``work`` (statements, the last one's rows returned; or ``async fn(conn)``) in one
        transaction on one pooled connection, retried on deadlock / serialization failure."""
        for attempt in itertools.count():
            try:
                with _guard.refused(self.collection_id):  # a write of an older rule: CollectionChangedError
                    async with self._connection() as conn:
                        async with conn.transaction():
                            if callable(work):
                                return await work(conn)
                            return await _async_rows.run_statements(conn, work)
            except psycopg.Error as exc:
                if exc.sqlstate not in RETRY_SQLSTATES or attempt >= 5:
                    raise
        raise AssertionError("unreachable")

    async def near_key(self, key: str, k: int | None = None, limit: int | None = None, *,
                       min_jaccard: float | None = None, verify: bool | None = None) -> list[Match]:
        """:meth:`SimhashIndex.near_key`: the near-duplicates of the row stored under ``key`` by the
        collection's rule (its stored sketch verified against the candidates'), ``verify=False``
        for the Hamming answer. Run on the sync index in a worker thread: the answer is a few
        statements and the verification stage over a key's candidates, the same code as the
        sync index's (one pipeline, so the two cannot drift apart)."""
        return await self._in_thread(self._ready().near_key, key, k, limit, min_jaccard=min_jaccard, verify=verify)

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
        it = iter(await self._in_thread(make))
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
                    await self._in_thread(close)
