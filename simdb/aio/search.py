"""``AsyncSimhashIndex``'s search: ``near`` (concurrent calls batched), ``near_many``, and the
off-loop features of query and row texts (fingerprint, and the sketch of a verified collection).

A mixin of :class:`simdb.aio.index.AsyncSimhashIndex`, kept apart so that the class reads as the
mapping of ``SimhashIndex``'s methods and this module as the batching. No SQL of its own: the
statements run in the store (:func:`simdb.store.async_rows.near_cursor`), with the store's parameters
(:mod:`simdb.store.candidates`) and the store's verification stage
(:func:`simdb.results.verified_matches`), so answers are the sync index's. Which rule a query
follows is the collection's rule (:mod:`simdb.index.rules`), as in the sync index.

Verified collections (the default): a text query's candidates are the rows within the collection's
radius K, kept by Jaccard of sketches (``SimhashIndex.near`` exactly); fingerprint queries and
``verify=False`` are answered by Hamming distance <= k, as the sync index does.
"""

from __future__ import annotations

import asyncio
import numbers
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from simdb.aio.pool import (
    CHUNK,
    INLINE_PROBES,
    features_politely,
    hand_over,
    pg_array_params,
    to_match,
)
from simdb.aio.reservation import AsyncReservation
from simdb.aio.reservation import reserve as _reserve
from simdb.core import probes as _probes
from simdb.core import validate as _validate
from simdb.core.bits import to_unsigned
from simdb.errors import InvalidArgumentError, InvalidTypeError
from simdb.results import Match, verified_matches
from simdb.store.async_rows import near_cursor
from simdb.store.candidates import near_many_params, near_params

__all__ = ["FETCH_ROWS", "VERIFY_INLINE_ROWS", "VERIFY_SLICE_ROWS", "AsyncSearch", "keep_verified", "probes_per_query"]

#: candidate rows verified on the event loop; a batch with more is verified in the executor
VERIFY_INLINE_ROWS = 64

#: candidates compared between two GIL handovers of a worker thread
VERIFY_SLICE_ROWS = 32

#: candidate rows decoded per loop turn (see :meth:`AsyncSearch._rows`)
FETCH_ROWS = 500

#: what a verified query keeps with its fingerprint: (its sketch, Jaccard threshold, Hamming k)
Spec = tuple[Any, float, int]


def keep_verified(rows: list[tuple], specs: list[Spec | None], verifier) -> list[tuple]:
    """The candidate rows (query position first) that pass the store's verification stage
    (:func:`simdb.results.verified_matches`) for their query, in their order; run in the
    executor with a GIL handover about every ``VERIFY_SLICE_ROWS`` candidates.

    Why filter a chunk at a time: at K = 11 a batch of 100 texts can bring thousands of
    candidates, each with a 256-value sketch. Held until the whole batch is in, they outlive
    the young garbage-collector generations and trigger full collections (50-70 ms stop-the-
    world pauses on this machine); dropped chunk by chunk, they die young."""
    by_query: dict[int, list[tuple]] = {}
    for row in rows:
        by_query.setdefault(row[0], []).append(row)
    kept: set[tuple[int, str]] = set()
    done = 0
    for qi, group in by_query.items():
        spec = specs[qi]
        assert spec is not None
        found = verified_matches([r[1:] for r in group], spec[0], verifier, spec[1], spec[2])
        kept.update((qi, m.key) for m in found)
        done += len(group)
        if done >= VERIFY_SLICE_ROWS:  # about a millisecond of comparisons
            done = 0
            hand_over()
    return [row for row in rows if (row[0], row[1]) in kept]


def probes_per_query(k: int) -> int:
    """How many block values one query at radius ``k`` probes (even radii)."""
    return sum(len(_probes.MASKS[t]) for t in _probes.even_radii(k) if t >= 0)


class AsyncSearch:
    """near / near_many of :class:`simdb.aio.index.AsyncSimhashIndex` (see the module docstring)."""

    # provided by AsyncSimhashIndex
    _pending: list[tuple[int, int, Spec | None, asyncio.Future]]
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

    async def _query_fp(self, query: Any, where: str = "query") -> int | None:
        if isinstance(query, str):
            text = _validate.check_text(query, where, self._ready().max_text_bytes)
            return (await self._text_features(text, False))[0]
        if isinstance(query, bool) or not isinstance(query, numbers.Integral):
            raise InvalidTypeError(f"{where} must be a text (str) or an unsigned fingerprint (int), got {type(query).__name__}")
        return to_unsigned(_validate.check_fp(query, f"{where} fingerprint"))

    # ------------------------------------------------------------ near
    async def _by_current_rule(self, read: Callable[[], Awaitable[Any]]) -> Any:
        """``await read()`` by the collection's current rule, as the sync index's reads are
        (:meth:`simdb.index.config_methods.ConfigMixin._by_current_rule`): the pool's connections
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
        if not sync.rule.async_batched:  # banded collections: the sync index's code
            return await self._in_thread(sync.near, query, k, limit, min_jaccard=min_jaccard, verify=verify)
        rule = sync.rule  # the sync index's rule: the same argument rules, features and verification
        if rule.verifies(query, verify, self.collection):
            ck, hk, t = rule.verify_params(k, min_jaccard, self.collection)
            text, limit = _validate.check_query(query, limit, sync.max_text_bytes)
            fp, sketch = await self._text_features(text, True)
            if fp is None:
                return []
            matches = await self._queued(fp, ck, (sketch, t, hk))
        else:
            if min_jaccard is not None:
                if rule.verifier is not None:
                    raise InvalidArgumentError("min_jaccard needs the query text (a fingerprint has no words to compare)")
                return await self._in_thread(sync.near, query, k, limit, min_jaccard=min_jaccard, verify=verify)
            k = _validate.check_k(k)
            limit = _validate.check_limit(limit)
            fp = await self._query_fp(query)
            if fp is None:
                return []
            matches = await self._queued(fp, k, None)
        return matches if limit is None else matches[:limit]

    async def _queued(self, fp: int, k: int, spec: Spec | None) -> list[Match]:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pending.append((fp, k, spec, fut))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._schedule_flush)
        return await fut

    def _schedule_flush(self) -> None:
        self._flush_scheduled = False
        self._spawn(self._flush())

    async def _flush(self) -> None:
        """Answer every queued near() once a connection is free (the queue grows while we wait),
        one statement per (radius, verified or not). Whatever goes wrong reaches every waiting
        caller: no future is left pending."""
        batch: list[tuple[int, int, Spec | None, asyncio.Future]] = []
        try:
            async with self._connection() as conn:
                batch, self._pending = self._pending, []
                groups: dict[tuple[int, bool], list[tuple[int, Spec | None, asyncio.Future]]] = {}
                for fp, k, spec, fut in batch:
                    groups.setdefault((k, spec is not None), []).append((fp, spec, fut))
                for (k, verified), group in groups.items():
                    for s in range(0, len(group), CHUNK):
                        piece = group[s : s + CHUNK]
                        specs = [spec for _, spec, _ in piece]
                        rows = await self._rows(conn, [fp for fp, _, _ in piece], k, specs if verified else None)
                        answers = await self._answers(rows, specs)
                        for (_, _, fut), matches in zip(piece, answers):
                            if not fut.done():
                                fut.set_result(matches)
        except BaseException as exc:
            if not batch:  # failed before taking the queue (no connection): fail the queue
                batch, self._pending = self._pending, []
            for _, _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise

    async def _rows(self, conn, fps: list[int], k: int, specs: list[Spec | None] | None) -> list[list[tuple]]:
        """Each unsigned fp's rows within ``k``: (key, fp signed, distance, meta), in one statement.
        With ``specs`` (verified queries): the candidates' rows with their stored sketch, only
        those that pass verification (decoded FETCH_ROWS at a time, each chunk filtered in the
        executor by :func:`keep_verified`). Big probe arrays are built and encoded in the executor."""
        verified = specs is not None
        def build() -> dict:
            if len(fps) == 1:
                return near_params(self.collection_id, fps[0], k)
            return near_many_params(self.collection_id, fps, k)

        if len(fps) * probes_per_query(k) > INLINE_PROBES:
            params = await self._in_thread(lambda: pg_array_params(build()))
        else:
            params = build()
        cur = await near_cursor(conn, params, len(fps) > 1, verified)
        out: list[list[tuple]] = [[] for _ in fps]
        verifier = self._ready().rule.verifier
        while True:
            chunk = await cur.fetchmany(FETCH_ROWS)
            last = len(chunk) < FETCH_ROWS
            if len(fps) == 1:
                chunk = [(0, *row) for row in chunk]
            if specs is not None and chunk:
                chunk = await self._in_thread(keep_verified, chunk, specs, verifier)
            for qi, *row in chunk:
                out[qi].append(tuple(row))
            if last:
                return out
            await asyncio.sleep(0)

    async def _answers(self, rows: list[list[tuple]], specs: list[Spec | None]) -> list[list[Match]]:
        """Each query's Matches: Hamming rows by (distance, key); verified ones (the rows that passed
        :func:`keep_verified`) through the store's verification stage again, which computes their
        Jaccard and orders them (in the executor when there are many)."""
        verifier = self._ready().rule.verifier

        def answer(rows_i: list[tuple], spec: Spec | None) -> list[Match]:
            if spec is None:
                return sorted((to_match(key, f, d, meta) for key, f, d, meta in rows_i), key=lambda m: (m.distance, m.key))
            return verified_matches(rows_i, spec[0], verifier, spec[1], spec[2])

        if sum(len(r) for r, spec in zip(rows, specs) if spec is not None) > VERIFY_INLINE_ROWS:

            def politely() -> list[list[Match]]:  # a GIL handover about every VERIFY_SLICE_ROWS candidates
                out, done = [], 0
                for r, spec in zip(rows, specs):
                    out.append(answer(r, spec))
                    done += len(r)
                    if done >= VERIFY_SLICE_ROWS:
                        done = 0
                        hand_over()
                return out

            return await self._in_thread(politely)
        return [answer(r, spec) for r, spec in zip(rows, specs)]

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
        if not sync.rule.async_batched:  # banded collections: the sync index's code
            return await self._in_thread(sync.near_many, list(queries), k, limit, min_jaccard=min_jaccard,
                                         verify=verify)
        k = _validate.check_k(k)
        limit = _validate.check_limit(limit)
        verified = self._ready().rule.verifies("", verify, self.collection)
        if verified:
            ck, hk, t = self._ready().rule.verify_params(k, min_jaccard, self.collection)
        elif min_jaccard is not None:
            raise InvalidArgumentError("near_many(min_jaccard=...) needs a verified collection")
        queries = _validate.check_queries(queries)
        texts = [i for i, q in enumerate(queries) if isinstance(q, str)]
        fps: list[int | None] = [None] * len(queries)
        for i, q in enumerate(queries):
            if isinstance(q, str):
                _validate.check_text(q, f"queries[{i}]", sync.max_text_bytes)
            else:
                fps[i] = await self._query_fp(q, f"queries[{i}]")
        specs: list[Spec | None] = [None] * len(queries)
        if texts:
            got = await self._in_thread(
                features_politely, sync.rule, sync.fingerprinter, [queries[i] for i in texts],
                [verified] * len(texts),
            )
            for i, (fp, sketch) in zip(texts, got):
                fps[i] = fp
                if verified:
                    specs[i] = (sketch, t, hk)
        out: list[list[Match]] = [[] for _ in queries]

        async def piece(idx: list[int], radius: int, verified_piece: bool) -> None:
            async with self._connection() as conn:
                piece_specs = [specs[i] for i in idx]
                rows = await self._rows(conn, [fps[i] for i in idx], radius,  # type: ignore[misc]
                                        piece_specs if verified_piece else None)
            answers = await self._answers(rows, piece_specs)
            for i, matches in zip(idx, answers):
                out[i] = matches if limit is None else matches[:limit]

        live = [i for i, fp in enumerate(fps) if fp is not None]
        jobs = []
        for radius, is_verified, idx in (
            (k, False, [i for i in live if specs[i] is None]),
            (ck if verified else k, True, [i for i in live if specs[i] is not None]),
        ):
            jobs += [piece(idx[s : s + CHUNK], radius, is_verified) for s in range(0, len(idx), CHUNK)]
        await asyncio.gather(*jobs)
        return out
