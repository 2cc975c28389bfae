"""The :class:`AsyncSimhashIndex` class: ``SimhashIndex``'s methods on async psycopg connections.

See :mod:`simdb.aio` for why it is thin and how concurrent ``near`` calls are batched.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import psycopg

from simdb import dedup as _dedup
from simdb import probes as _probes
from simdb.aio.pool import (
    CHUNK,
    INLINE_PARAMS_QUERIES,
    STREAM_CHUNK,
    Pool,
    fingerprint_politely,
    libpq_url,
    to_match,
)
from simdb.bits import MASK64, to_signed
from simdb.index import (
    Entry,
    Match,
    SimhashIndex,
    check_fp,
    check_key,
    check_limit,
    dump_meta,
    near_many_params,
    near_params,
)
from simdb.store import rows as _rows
from simdb.store import sql as _sql

__all__ = ["AsyncSimhashIndex"]

_UNSET: Any = object()


class AsyncSimhashIndex:
    """An asyncio front end to one collection; the arguments are :class:`SimhashIndex`'s.

    ``async with AsyncSimhashIndex(url, "posts") as index:`` (or ``index = await
    AsyncSimhashIndex.open(...)`` ... ``await index.close()``). Methods mirror
    ``SimhashIndex``: ``add``, ``add_many``, ``update``, ``get``, ``remove``, ``near``,
    ``near_many``, ``add_if_unique`` are coroutines; ``pairs`` and ``clusters`` are async
    iterators. Use one instance per event loop.
    """

    def __init__(
        self, database=None, collection: str = "default", fingerprinter=None, *,
        migrate: bool = True, jaccard: bool | None = None, pool_size: int = 4,
    ):
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError(f"pool_size must be an int >= 1, got {pool_size!r}")
        self._args = (database, collection, fingerprinter)
        self._kwargs: dict[str, Any] = {"migrate": migrate, "jaccard": jaccard}
        self.pool_size = pool_size
        self.sync: SimhashIndex | None = None
        self._pool: Pool | None = None
        self._pending: list[tuple[int, int, asyncio.Future]] = []
        self._flush_scheduled = False
        self._fp_pending: list[tuple[str, asyncio.Future]] = []
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
        self._pool = Pool(libpq_url(self.sync.engine), self.pool_size)

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
        if self.sync is None:
            raise RuntimeError("AsyncSimhashIndex is not open: use `async with` or `await AsyncSimhashIndex.open(...)`")
        return self.sync

    def _connection(self):
        if self._pool is None:
            raise RuntimeError("AsyncSimhashIndex is not open: use `async with` or `await AsyncSimhashIndex.open(...)`")
        return self._pool.connection()

    def _delegated(self) -> bool:
        """Jaccard and verified collections run on the sync index in a worker thread: their
        answers need the verification stage (sketches, Jaccard), which lives there once."""
        sync = self._ready()
        return sync.minhasher is not None or sync.verifier is not None

    async def _in_thread(self, fn: Callable, *args, **kwargs) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(*args, **kwargs))

    async def _text_fp(self, text: str) -> int | None:
        """Unsigned fingerprint (None: no features), never computed on the event loop.

        Why batched: 100 concurrent calls each fingerprinting a short text inline would run
        back to back in one loop iteration (tens of ms of blocking in all). Instead the texts
        of all concurrent callers are fingerprinted together (``Fingerprinter.many``) in the
        executor: one thread hop per batch, and the loop stays free meanwhile."""
        fper = self._ready().fingerprinter
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._fp_pending.append((text, fut))
        if not self._fp_scheduled:
            self._fp_scheduled = True
            loop.call_soon(self._spawn, self._fp_flush(fper))
        return await fut

    def _spawn(self, coro) -> None:
        if coro.__name__ == "_fp_flush":
            self._fp_scheduled = False
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _fp_flush(self, fper) -> None:
        batch, self._fp_pending = self._fp_pending, []
        try:
            fps = await self._in_thread(fingerprint_politely, fper, [text for text, _ in batch])
        except BaseException as exc:
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, fut), fp in zip(batch, fps):
            if not fut.done():
                fut.set_result(fp)

    async def _query_fp(self, query: Any) -> int | None:
        if isinstance(query, str):
            return await self._text_fp(query)
        return check_fp(query, "query fingerprint") & MASK64

    async def _store_fp(self, text: Any, fp: Any) -> int | None:
        """Signed bigint for add/update (None: featureless), as SimhashIndex does it."""
        if fp is not None:
            return check_fp(fp)
        if text is None:
            raise ValueError("give text or fp")
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        u = await self._text_fp(text)
        return None if u is None else to_signed(u)

    # ------------------------------------------------------------ single rows
    async def add(self, key: str, text: str | None = None, *, fp: int | None = None, meta: Any = None) -> int | None:
        """:meth:`SimhashIndex.add`: store (or replace) ``key``; returns the unsigned fingerprint."""
        if self._delegated():
            return await self._in_thread(self._ready().add, key, text, fp=fp, meta=meta)
        key = check_key(key)
        signed = await self._store_fp(text, fp)
        params = {"c": self.collection_id, "key": key, "fp": signed, "meta": dump_meta(meta), "sh": None}
        async with self._connection() as conn:
            await conn.execute(_rows.UPSERT_SQL, params, prepare=True)
        return None if signed is None else signed & MASK64

    async def update(self, key: str, text: str | None = None, *, fp: int | None = None, meta: Any = _UNSET) -> int | None:
        """:meth:`SimhashIndex.update`: KeyError if ``key`` is absent."""
        if self._delegated():
            kw = {} if meta is _UNSET else {"meta": meta}
            return await self._in_thread(self._ready().update, key, text, fp=fp, **kw)
        key = check_key(key)
        signed = await self._store_fp(text, fp)
        params = {"c": self.collection_id, "key": key, "fp": signed, "sh": None}
        if meta is not _UNSET:
            params["meta"] = dump_meta(meta)
        async with self._connection() as conn:
            cur = await conn.execute(_rows.update_sql(meta is not _UNSET), params)
        if cur.rowcount == 0:
            raise KeyError(key)
        return None if signed is None else signed & MASK64

    async def get(self, key: str, default: Any = None) -> Entry | Any:
        self._ready()
        key = check_key(key)
        async with self._connection() as conn:
            cur = await conn.execute(_rows.GET_SQL, {"c": self.collection_id, "key": key}, prepare=True)
            row = await cur.fetchone()
        if row is None:
            return default
        return Entry(row[0], None if row[1] is None else row[1] & MASK64, row[2], row[3])

    async def remove(self, key: str) -> bool:
        self._ready()
        key = check_key(key)
        async with self._connection() as conn:
            cur = await conn.execute(_rows.DELETE_SQL, {"c": self.collection_id, "key": key})
        return cur.rowcount > 0

    async def count(self) -> int:
        """Rows in the collection (``len(SimhashIndex)``)."""
        self._ready()
        async with self._connection() as conn:
            cur = await conn.execute(_rows.COUNT_SQL, {"c": self.collection_id})
            return (await cur.fetchone())[0]

    async def add_many(self, items: Iterable[Any], **options) -> int:
        """:meth:`SimhashIndex.add_many` (COPY, all or nothing) in a worker thread."""
        return await self._in_thread(self._ready().add_many, items, **options)

    # ------------------------------------------------------------ search
    async def near(self, query: str | int, k: int | None = None, limit: int | None = None, *,
                   min_jaccard: float | None = None) -> list[Match]:
        """:meth:`SimhashIndex.near`. Concurrent calls share statements (see the module docs)."""
        self._ready()
        if min_jaccard is not None or self._delegated():
            return await self._in_thread(self._ready().near, query, k, limit, min_jaccard=min_jaccard)
        k = _probes.check_k(3 if k is None else k)
        limit = check_limit(limit)
        fp = await self._query_fp(query)
        if fp is None:
            return []
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pending.append((fp, k, fut))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._schedule_flush)
        matches = await fut
        return matches if limit is None else matches[:limit]

    def _schedule_flush(self) -> None:
        self._flush_scheduled = False
        self._spawn(self._flush())

    async def _flush(self) -> None:
        """Answer every queued near() once a connection is free (the queue grows while we wait).
        Whatever goes wrong reaches every waiting caller: no future is left pending."""
        batch: list[tuple[int, int, asyncio.Future]] = []
        try:
            async with self._connection() as conn:
                batch, self._pending = self._pending, []
                by_k: dict[int, list[tuple[int, asyncio.Future]]] = {}
                for fp, k, fut in batch:
                    by_k.setdefault(k, []).append((fp, fut))
                for k, group in by_k.items():
                    for s in range(0, len(group), CHUNK):
                        piece = group[s : s + CHUNK]
                        answers = await self._lookup(conn, [fp for fp, _ in piece], k)
                        for (_, fut), matches in zip(piece, answers):
                            if not fut.done():
                                fut.set_result(matches)
        except BaseException as exc:
            if not batch:  # failed before taking the queue (no connection): fail the queue
                batch, self._pending = self._pending, []
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise

    async def _lookup(self, conn, fps: list[int], k: int) -> list[list[Match]]:
        """Exact matches of each unsigned fp, sorted by (distance, key): one NEAR_MANY_SQL."""
        if len(fps) == 1:
            params = near_params(self.collection_id, fps[0], k)
            cur = await conn.execute(_sql.NEAR_SQL, params, prepare=True)
            return [[to_match(key, f, d, meta) for key, f, d, meta in await cur.fetchall()]]
        if len(fps) > INLINE_PARAMS_QUERIES:
            params = await self._in_thread(near_many_params, self.collection_id, fps, k)
        else:
            params = near_many_params(self.collection_id, fps, k)
        cur = await conn.execute(_sql.NEAR_MANY_SQL, params, prepare=True)
        out: list[list[Match]] = [[] for _ in fps]
        for qi, key, f, d, meta in await cur.fetchall():
            out[qi].append(to_match(key, f, d, meta))
        for matches in out:
            matches.sort(key=lambda m: (m.distance, m.key))
        return out

    async def near_many(self, queries: Iterable[str | int], k: int = 3, limit: int | None = None) -> list[list[Match]]:
        """:meth:`SimhashIndex.near_many`: answers in the order of ``queries``; statements of up to
        20,000 queries run concurrently on the pool's connections."""
        if self._delegated():
            return await self._in_thread(self._ready().near_many, list(queries), k, limit)
        k = _probes.check_k(k)
        limit = check_limit(limit)
        queries = list(queries)
        texts = [q for q in queries if isinstance(q, str)]
        fper = self._ready().fingerprinter
        got = iter(await self._in_thread(fingerprint_politely, fper, texts) if texts else [])
        fps = [next(got) if isinstance(q, str) else check_fp(q, "query fingerprint") & MASK64 for q in queries]
        live = [i for i, fp in enumerate(fps) if fp is not None]
        out: list[list[Match]] = [[] for _ in queries]

        async def piece(idx: list[int]) -> None:
            async with self._connection() as conn:
                answers = await self._lookup(conn, [fps[i] for i in idx], k)
            for i, matches in zip(idx, answers):
                out[i] = matches if limit is None else matches[:limit]

        await asyncio.gather(*(piece(live[s : s + CHUNK]) for s in range(0, len(live), CHUNK)))
        return out

    # ------------------------------------------------------------ deduplication
    async def add_if_unique(self, key: str, text: str | None = None, *, fp: int | None = None, k: int = 3,
                            meta: Any = None, min_jaccard: float | None = None):
        """:meth:`SimhashIndex.add_if_unique`: atomic under concurrency (also against sync writers);
        returns :class:`simdb.dedup.AddResult`."""
        if min_jaccard is not None or self._delegated():
            return await self._in_thread(self._ready().add_if_unique, key, text, fp=fp, k=k, meta=meta,
                                         min_jaccard=min_jaccard)
        key = check_key(key)
        k = _probes.check_k(k)
        signed = await self._store_fp(text, fp)
        statements = _dedup.add_if_unique_statements(
            self.collection_id, key, None if signed is None else signed & MASK64, k, dump_meta(meta)
        )
        for attempt in itertools.count():
            try:
                async with self._connection() as conn:
                    async with conn.transaction():
                        for sql, params in statements:
                            cur = await conn.execute(sql, params)
                        rows = await cur.fetchall() if cur.description else []
                break
            except psycopg.Error as exc:
                if exc.sqlstate not in _dedup.RETRY_SQLSTATES or attempt >= 5:
                    raise
        if rows:
            return _dedup.AddResult(False, [to_match(r[0], r[1], r[2], r[3]) for r in rows])
        return _dedup.AddResult(True, [])

    def pairs(self, k: int = 3, *, min_jaccard: float | None = None) -> AsyncIterator:
        """:meth:`SimhashIndex.pairs` as an async iterator (streamed from a worker thread)."""
        return self._stream(lambda: self._ready().pairs(k, min_jaccard=min_jaccard))

    def clusters(self, k: int = 3, *, include_singletons: bool = False, min_jaccard: float | None = None) -> AsyncIterator:
        """:meth:`SimhashIndex.clusters` as an async iterator (streamed from a worker thread)."""
        return self._stream(
            lambda: self._ready().clusters(k, include_singletons=include_singletons, min_jaccard=min_jaccard)
        )

    async def _stream(self, make: Callable[[], Any]) -> AsyncIterator:
        it = iter(await self._in_thread(make))
        try:
            while True:
                chunk = await self._in_thread(lambda: list(itertools.islice(it, STREAM_CHUNK)))
                if not chunk:
                    return
                for item in chunk:
                    yield item
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                await self._in_thread(close)
