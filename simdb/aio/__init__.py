"""``simdb.aio.AsyncSimhashIndex``: :class:`simdb.index.SimhashIndex` for asyncio apps (FastAPI, Starlette ...).

Why it is thin: one implementation, two calling conventions, the same method names (``count()`` is
``len()``, which cannot be awaited; ``SimhashIndex.count()`` exists too). Nothing here decides an answer:

- **Writes run the sync index's code** in a worker thread: ``add``, ``update``, ``add_if_unique`` (atomic
  under concurrency, also against sync writers: the store's advisory locks), ``reserve``, ``clear``,
  ``drop``, ``add_many`` (COPY, all or nothing). A cancelled call never leaves a write it was not told
  of (:func:`simdb.aio.pool.write_in_thread`). So do opening (migrations, the collection's
  configuration), ``text``, ``near_key`` and ``pairs`` / ``clusters`` (streamed to an async iterator in chunks).
- **Reads are awaited** on a small pool (``pool_size``, default 4) of autocommit async connections with
  the sync index's session settings (serial plans, generic prepared plans): ``get``, ``remove`` and
  ``count`` (:mod:`simdb.store.async_rows`), and ``near`` / ``near_many`` by the collection's rule
  (:mod:`simdb.index.rules`, the object ``SimhashIndex.rule`` holds), called, never copied: its argument
  checks (``near_args``, ``near_many_args``), its statements, sans I/O (``lookup_statement``: the store's
  SQL and parameters, :mod:`simdb.store.candidates`) and its answers (``hamming_answers``), in a Hamming
  collection. A verified collection (the default) answers them on the sync index in a thread too: its
  band-key candidates are not in the batched statements (:attr:`simdb.index.rules.BandedRule.async_batched`).
- **near() batches itself**: concurrent ``near`` calls on one event loop are answered together.
  A call queues its fingerprint; whenever a pooled connection is free, every queued query goes
  out as ONE ``NEAR_MANY_SQL`` statement (per k). So 100 concurrent ``near`` tasks cost about
  what one ``near_many`` of the same 100 queries costs (benchmarks/bench_async.py), and each
  answer is exactly the one ``near`` would give (same rows, sorted by distance then key).
- **The event loop never waits on CPU work**: texts are fingerprinted in the loop's default
  executor, those of concurrent callers together, big probe arrays are built and encoded there,
  and rows are decoded a chunk at a time.

Modules: :mod:`simdb.aio.index` (the class), :mod:`simdb.aio.pool` (the connection pool, the writes'
threads and the off-loop helpers), :mod:`simdb.aio.reservation` (``reserve``'s reservation).
"""

from simdb.aio.index import AsyncSimhashIndex

__all__ = ["AsyncSimhashIndex"]
