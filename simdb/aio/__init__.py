"""``simdb.aio.AsyncSimhashIndex``: :class:`simdb.index.SimhashIndex` for asyncio apps (FastAPI, Starlette ...).

Why it is thin: everything that decides an answer is the collection's rule's
(:mod:`simdb.index.rules`, the object ``SimhashIndex.rule`` holds) and is called, never copied --
the argument checks (``near_args``, ``near_many_args``, ``verify_params``), a text's features
(``text_features``), the statements, sans I/O (``lookup_statement``: the store's SQL and parameters,
:mod:`simdb.store.candidates`) and the answers (``batch_answers``: the verification stage of
:mod:`simdb.results`). The sync index runs those statements on a psycopg connection; this package
awaits them on psycopg 3 ``AsyncConnection`` s (:mod:`simdb.store.async_rows`), so it follows the
rules and the store when they change. One implementation, two calling conventions, the same method
names (``count()`` is ``len()``, which cannot be awaited; ``SimhashIndex.count()`` exists too).

- **Connections**: a small pool (``pool_size``, default 4) of autocommit async connections with
  the same session settings as ``SimhashIndex`` (serial plans, generic prepared plans).
- **near() batches itself**: concurrent ``near`` calls on one event loop are answered together.
  A call queues its fingerprint; whenever a pooled connection is free, every queued query goes
  out as ONE ``NEAR_MANY_SQL`` statement (per k). So 100 concurrent ``near`` tasks cost about
  what one ``near_many`` of the same 100 queries costs (benchmarks/bench_async.py), and each
  answer is exactly the one ``near`` would give (same rows, sorted by distance then key).
- **Verified collections without band keys are native too** (banded ones, the default, run the
  sync index in a worker thread): a text query's candidates within the
  collection's radius K come from the store's ``NEAR_MANY_VERIFY_SQL`` and pass the store's
  verification stage (:func:`simdb.results.verified_matches`); ``add``/``update`` store the
  text's sketch; ``add_if_unique`` takes the store's advisory locks for K, then searches,
  verifies and upserts in the same transaction, as the sync index does.
- **The event loop never waits on CPU work**: texts are fingerprinted (and sketched) in the
  loop's default executor, those of concurrent callers together, big probe arrays are built and
  encoded there, and candidate rows are decoded a chunk at a time and verified there.
- **Delegated to a thread**: opening (schema migration, the collection's configuration), bulk
  ``add_many`` (COPY, all or nothing), ``pairs`` and ``clusters`` (streamed to an async iterator
  in chunks) run the synchronous ``SimhashIndex`` in a worker thread.

Answers are exact as the synchronous ones; ``add_if_unique`` is atomic under concurrency
(the store's advisory locks, in one transaction on one connection, retried on deadlock).

Modules: :mod:`simdb.aio.index` (the class: rows, add_if_unique, streams), :mod:`simdb.aio.search`
(near / near_many and their batching), :mod:`simdb.aio.pool` (the connection pool and off-loop helpers).
"""

from simdb.aio.index import AsyncSimhashIndex

__all__ = ["AsyncSimhashIndex"]
