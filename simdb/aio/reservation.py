""":meth:`AsyncSimhashIndex.reserve`: the sync index's reservation, reserved and finished off the event loop.

Why the sync one in threads: the reservation's transaction must stay open while the app's request goes
on (:mod:`simdb.index.reservation` says why), with every search mode's own ``add_if_unique`` (a banded
collection's runs only on the sync index). Why two executors of their own and not the loop's default
one: a reservation waits, in its thread, for the advisory locks of a near-identical text's reservation,
which is released only by that one's commit; were the waiting and the commits in one pool, a burst of
near-identical posts could fill it with waiters and leave no thread for the commit they wait for (and
the app's own ``run_in_executor`` calls would queue behind them). A commit never waits for a lock, so
its small pool always drains.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from simdb.index.reservation import Reservation

__all__ = ["AsyncReservation", "reserve"]

#: threads that reserve (each may wait for a near-identical text's reservation to end)
_RESERVING = ThreadPoolExecutor(32, thread_name_prefix="simdb-reserve")
#: threads that commit or roll back (never wait for a lock)
_FINISHING = ThreadPoolExecutor(4, thread_name_prefix="simdb-reservation-end")


class AsyncReservation:
    """:class:`simdb.index.reservation.Reservation` with coroutine ``commit()`` and ``rollback()``
    (``key``, ``result``, ``inserted``, ``matches``, ``held`` as there); ``async with`` commits when
    the block succeeds and rolls back when it raises."""

    def __init__(self, sync: Reservation):
        self.sync = sync

    key = property(lambda self: self.sync.key)
    result = property(lambda self: self.sync.result)
    inserted = property(lambda self: self.sync.inserted)
    matches = property(lambda self: self.sync.matches)
    held = property(lambda self: self.sync.held)

    async def commit(self) -> None:
        if self.sync.held:
            await asyncio.get_running_loop().run_in_executor(_FINISHING, self.sync.commit)

    async def rollback(self) -> None:
        if self.sync.held:
            await asyncio.get_running_loop().run_in_executor(_FINISHING, self.sync.rollback)

    async def __aenter__(self) -> AsyncReservation:
        return self

    async def __aexit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:
            await self.commit()
        else:
            await self.rollback()

    def __repr__(self) -> str:
        return f"Async{self.sync!r}"


def _roll_back_when_done(work: asyncio.Future) -> None:
    """A reservation whose caller was cancelled while it was being made: rolled back once made."""
    if not work.cancelled() and work.exception() is None:
        _FINISHING.submit(work.result().rollback)


async def reserve(sync: Any, key: Any, text: Any, **options: Any) -> AsyncReservation:
    """``sync.reserve(key, text, **options)`` (a :class:`simdb.SimhashIndex`) in a reserving thread. A
    cancelled caller leaves nothing held: the reservation is rolled back as soon as the thread has made it."""
    loop = asyncio.get_running_loop()
    work = loop.run_in_executor(_RESERVING, lambda: sync.reserve(key, text, **options))
    try:
        return AsyncReservation(await asyncio.shield(work))
    except asyncio.CancelledError:
        work.add_done_callback(_roll_back_when_done)
        raise
