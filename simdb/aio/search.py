"""``AsyncSimhashIndex``'s search: ``near`` (concurrent calls batched), ``near_many``, and the
off-loop features of query and row texts (fingerprint, and the sketch of a verified collection).

A mixin of :class:`simdb.aio.index.AsyncSimhashIndex`, kept apart so that the class reads as the
mapping of ``SimhashIndex``'s methods and this module as the batching. Every step that decides an
answer is the collection's rule's (:mod:`simdb.index.rules`), as in the sync index: the argument
checks (``near_args`` / ``near_many_args``), the features (``text_features``), the statements
(``lookup_statement``: the store's SQL and parameters, sans I/O) and the answers
(``batch_answers``: the verification stage). Only the awaiting is here: the statements run on
pooled ``AsyncConnection`` s (:func:`simdb.store.async_rows.open_cursor`), many queries at once,
their rows decoded a chunk at a time, the CPU work off the event loop.

Banded collections (``rule.async_batched`` False) are answered by the sync index in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from simdb.aio.pool import (
    CHUNK,
    INLINE_PROBES,
    features_politely,
    hand_over,
    pg_array_params,
)
from simdb.aio.reservation import AsyncReservation
from simdb.aio.reservation import reserve as _reserve
from simdb.core import probes as _probes
from simdb.core import validate as _validate
from simdb.core.sketch.compare import sketch_values
from simdb.index import rules as _rules
from simdb.results import Match, verified_order
from simdb.store import async_rows as _async_rows
from simdb.store.candidates import array_text_params

__all__ = ["FETCH_ROWS", "VERIFY_INLINE_ROWS", "VERIFY_SLICE_ROWS", "AsyncSearch", "probes_per_query",
           "verify_politely"]

#: candidate rows verified on the event loop; a chunk with more is verified in the executor
VERIFY_INLINE_ROWS = 64

#: candidates compared between two GIL handovers of a worker thread (about 2 ms of comparisons: a
#: call of the verification stage costs ~0.4 ms besides its ~20 us a row, measured, so slices of 32
#: rows made a verified batch's CPU a quarter larger, 128 as large as verifying query by query)
VERIFY_SLICE_ROWS = 128

#: candidate rows decoded per loop turn (see :meth:`AsyncSearch._lookup`)
FETCH_ROWS = 500

#: a verified search's checked arguments: (candidate radius, Hamming k, threshold)
Params = tuple[int, int, float]


def verify_politely(rule: Any, rows: list[tuple], n: int, params: Params, sketches: Sequence[Any]) -> list[list[Match]]:
    """``rule.batch_answers`` of a chunk of candidate rows (each led by its query's position), in
    slices of ``VERIFY_SLICE_ROWS`` with a GIL handover between them (run in the executor).

    Why a chunk at a time: at K = 11 a batch of 100 texts can bring thousands of candidates, each
    with a 256-value sketch. Held until the whole batch is in, they outlive the young
    garbage-collector generations and trigger full collections (50-70 ms stop-the-world pauses on
    this machine); verified chunk by chunk, they die young."""
    out: list[list[Match]] = [[] for _ in range(n)]
    for s in range(0, len(rows), VERIFY_SLICE_ROWS):
        for i, found in enumerate(rule.batch_answers(rows[s : s + VERIFY_SLICE_ROWS], n, params, sketches)):
            out[i] += found
        if s + VERIFY_SLICE_ROWS < len(rows):
            hand_over()
    return out


def probes_per_query(k: int) -> int:
    """How many block values one query at radius ``k`` probes (even radii)."""
    return sum(len(_probes.MASKS[t]) for t in _probes.even_radii(k) if t >= 0)


class AsyncSearch:
    """near / near_many of :class:`simdb.aio.index.AsyncSimhashIndex` (see the module docstring)."""

    # provided by AsyncSimhashIndex
    _pending: list[tuple[int, int, Params | None, Any, asyncio.Future]]
    _flush_scheduled: bool
    _fp_pending: list[tuple[str, bool, asyncio.Future]]
    _fp_scheduled: bool

    if TYPE_CHECKING:  # defined by AsyncSimhashIndex

        @property
        def collection(self) -> str: ...

        @property
        def collection_id(self) -> int: ...

        def _ready(self) -> Any: ...

        def _connection(self) -> Any: ...

        async def _in_thread(self, fn: Callable, *args, **kwargs) -> Any: ...

        def _spawn(self, coro) -> None: ...

    # ------------------------------------------------------------ features, off the loop
    async def reserve(self, key: str, text: str | None = None, **options: Any) -> AsyncReservation:
        """:meth:`SimhashIndex.reserve` (same arguments), finished by ``await r.commit()`` / ``rollback()``:
        :class:`~simdb.aio.reservation.AsyncReservation` (:mod:`simdb.aio.reservation` says how). Here
        with the searches: it is the validators' check, and :class:`AsyncSimhashIndex` is a page long."""
        return await _reserve(self._ready(), key, text, **options)

    async def _text_features(self, text: str, sketch: bool) -> tuple[int | None, list[int] | None]:
        """(unsigned fingerprint or None: no features, the verification sketch if ``sketch``),
        never computed on the event loop.

        Why batched: 100 concurrent calls each fingerprinting (and sketching) a short text inline
        would run back to back in one loop iteration (tens of ms of blocking in all). Instead the
        texts of all concurrent callers are done together in the executor: one thread hop per
        batch, in slices that hand the GIL back, and the loop stays free meanwhile."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._fp_pending.append((text, sketch, fut))
        if not self._fp_scheduled:
            self._fp_scheduled = True
            loop.call_soon(self._spawn, self._features_flush())
        return await fut

    async def _features_flush(self) -> None:
        batch, self._fp_pending = self._fp_pending, []
        self._fp_scheduled = False
        sync = self._ready()
        try:
            got = await self._in_thread(
                features_politely, sync.rule, sync.fingerprinter, [t for t, _, _ in batch],
                [s for _, s, _ in batch],
            )
        except BaseException as exc:
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, _, fut), features in zip(batch, got):
            if not fut.done():
                fut.set_result(features)

    async def _query_fp(self, query: Any) -> int | None:
        """The unsigned fingerprint of a checked query answered by Hamming distance (a text's off the
        loop, None: no features; a fingerprint checked by :func:`simdb.index.rules.query_fp`)."""
        if isinstance(query, str):
            return (await self._text_features(query, False))[0]
        return _rules.query_fp(None, query)

    # ------------------------------------------------------------ near
    async def _by_current_rule(self, read: Callable[[], Awaitable[Any]]) -> Any:
        """``await read()`` by the collection's current rule, as the sync index's reads are
        (:func:`simdb.index.by_current_rule`): the pool's connections
        listen too, and a change announced before or during the read is followed (in a worker
        thread: it reads the config) and the read asked again."""
        sync = self._ready()
        if sync._rule_changed.is_set():
            await self._in_thread(sync._follow_config)
        out = await read()
        if sync._rule_changed.is_set():
            await self._in_thread(sync._follow_config)
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
            return await self._in_thread(sync.near, query, k, limit, min_jaccard=min_jaccard, verify=verify)
        query, limit = _validate.check_query(query, limit, sync.max_text_bytes)
        k, params = rule.near_args(query, k, min_jaccard, verify, self.collection)
        sketch = None
        if params is not None:
            fp, sketch = await self._text_features(query, True)
            k = params[0]  # the candidates are looked up at the radius K
        else:
            fp = await self._query_fp(query)
        if fp is None:
            return []
        matches = await self._queued(fp, k, params, sketch)
        return matches if limit is None else matches[:limit]

    async def _queued(self, fp: int, k: int, params: Params | None, sketch: Any) -> list[Match]:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pending.append((fp, k, params, sketch, fut))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._schedule_flush)
        return await fut

    def _schedule_flush(self) -> None:
        self._flush_scheduled = False
        self._spawn(self._flush())

    async def _flush(self) -> None:
        """Answer every queued near() once a connection is free (the queue grows while we wait),
        one statement per (radius, verified arguments). Whatever goes wrong reaches every waiting
        caller: no future is left pending."""
        batch: list[tuple[int, int, Params | None, Any, asyncio.Future]] = []
        try:
            async with self._connection() as conn:
                batch, self._pending = self._pending, []
                groups: dict[tuple[int, Params | None], list[tuple[int, Any, asyncio.Future]]] = {}
                for fp, k, params, sketch, fut in batch:
                    groups.setdefault((k, params), []).append((fp, sketch, fut))
                for (k, params), group in groups.items():
                    for s in range(0, len(group), CHUNK):
                        piece = group[s : s + CHUNK]
                        answers = await self._lookup(conn, [fp for fp, _, _ in piece], k, params,
                                                     [sketch for _, sketch, _ in piece])
                        for (_, _, fut), matches in zip(piece, answers):
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

    async def _lookup(self, conn, fps: list[int], k: int, params: Params | None, sketches: list[Any]) -> list[list[Match]]:
        """Each unsigned fp's answer, in one statement of the rule (:meth:`~simdb.index.rules.HammingRule.lookup_statement`):
        the rows within ``k``, or with ``params`` (verified queries) the candidates, verified against
        ``sketches`` as they arrive (decoded ``FETCH_ROWS`` at a time, each chunk through the rule's
        :meth:`~simdb.index.rules.HammingRule.batch_answers`, in the executor when it is big). Big probe
        arrays are built and encoded in the executor."""
        rule = self._ready().rule
        cur = await _async_rows.open_cursor(conn, await self._statement(fps, k, params is not None),
                                            binary=params is not None)
        n = len(fps)
        if params is not None:  # as arrays once, not once per chunk (each verification call reads them all)
            sketches = [sketch_values(s) for s in sketches]
        hamming: list[tuple] = []
        out: list[list[Match]] = [[] for _ in fps]
        merged = False
        while True:
            chunk = await cur.fetchmany(FETCH_ROWS)
            last = len(chunk) < FETCH_ROWS
            if n == 1:
                chunk = [(0, *row) for row in chunk]
            if params is None:
                hamming += chunk
            elif chunk:
                for i, matches in enumerate(await self._verified(rule, chunk, n, params, sketches)):
                    if matches:
                        merged = merged or bool(out[i])
                        out[i] += matches
            if last:
                break
            await asyncio.sleep(0)
        if params is None:
            return rule.batch_answers(hamming, n, None)
        if merged:  # a query verified in several chunks: its answer in the verification stage's order
            for answer in out:
                answer.sort(key=verified_order)
        return out

    async def _verified(self, rule: Any, chunk: list[tuple], n: int, params: Params, sketches: list) -> list[list[Match]]:
        """A chunk of candidates through the rule's verification stage: on the loop when it is small,
        else in the executor, politely (:func:`verify_politely`)."""
        if len(chunk) > VERIFY_INLINE_ROWS:
            return await self._in_thread(verify_politely, rule, chunk, n, params, sketches)
        return rule.batch_answers(chunk, n, params, sketches)

    async def _statement(self, fps: list[int], k: int, verified: bool) -> tuple[str, dict]:
        """The rule's statement of ``fps`` at ``k``, its int lists as array text: built and encoded in the
        executor when its probes are many (:func:`simdb.aio.pool.pg_array_params`, handing the GIL back)."""
        rule = self._ready().rule
        collection_id = self.collection_id
        if len(fps) * probes_per_query(k) <= INLINE_PROBES:
            sql, params = rule.lookup_statement(collection_id, fps, k, verified)
            return sql, array_text_params(params)

        def encoded() -> tuple[str, dict]:
            sql, params = rule.lookup_statement(collection_id, fps, k, verified)
            return sql, pg_array_params(params)

        return await self._in_thread(encoded)

    # ------------------------------------------------------------ near_many
    async def near_many(self, queries: Iterable[str | int], k: int | None = 3, limit: int | None = None, *,
                        min_jaccard: float | None = None, verify: bool | None = None) -> list[list[Match]]:
        """:meth:`SimhashIndex.near_many`: answers in the order of ``queries``; statements of up to
        20,000 queries run concurrently on the pool's connections. In a verified collection the
        texts are verified (candidates within K) and fingerprint queries answered at ``k``."""
        queries = _validate.check_queries(queries)  # once: an iterator cannot be read by a second try
        return await self._by_current_rule(lambda: self._near_many(queries, k, limit, min_jaccard, verify))

    async def _near_many(self, queries: list, k: Any, limit: Any, min_jaccard: Any, verify: Any) -> list[list[Match]]:
        sync = self._ready()
        rule = sync.rule
        if not rule.async_batched:  # banded collections: the sync index's code
            return await self._in_thread(sync.near_many, list(queries), k, limit, min_jaccard=min_jaccard,
                                         verify=verify)
        limit = _validate.check_limit(limit)
        k, params = rule.near_many_args(k, min_jaccard, verify, self.collection)
        queries = _validate.check_queries(queries, max_bytes=sync.max_text_bytes)  # and each text
        texts = [i for i, q in enumerate(queries) if isinstance(q, str)]
        fps = _rules.query_fps(queries)
        sketches: list[Any] = [None] * len(queries)
        if texts:
            got = await self._in_thread(
                features_politely, rule, sync.fingerprinter, [queries[i] for i in texts], [params is not None] * len(texts),
            )
            for i, (fp, sketch) in zip(texts, got):
                fps[i], sketches[i] = fp, sketch
        out: list[list[Match]] = [[] for _ in queries]

        async def piece(idx: list[int], radius: int, piece_params: Params | None) -> None:
            async with self._connection() as conn:
                answers = await self._lookup(conn, [fps[i] for i in idx], radius, piece_params,  # type: ignore[misc]
                                             [sketches[i] for i in idx])
            for i, matches in zip(idx, answers):
                out[i] = matches if limit is None else matches[:limit]

        live = [i for i, fp in enumerate(fps) if fp is not None]
        text_set = set(texts) if params is not None else set()
        jobs = []
        for radius, piece_params, idx in (
            (k, None, [i for i in live if i not in text_set]),
            (params[0] if params else k, params, [i for i in live if i in text_set]),
        ):
            jobs += [piece(idx[s : s + CHUNK], radius, piece_params) for s in range(0, len(idx), CHUNK)]
        await asyncio.gather(*jobs)
        return out
