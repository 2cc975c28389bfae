"""A text admitted by ``add_if_unique`` whose transaction is still open: :meth:`SimhashIndex.reserve`.

Why a reservation and not a committed row: the web validators (:mod:`simdb.validators` and its
adapters) admit a text while a request is being validated, and only the framework knows later whether
the request succeeded. The row is inserted inside a transaction that the reservation keeps open, with
the advisory locks of :mod:`simdb.store.unique` still held, so a concurrent near-identical text waits
and then sees the committed row (refused) or no row at all (admitted): the guarantee of
``add_if_unique`` holds, and a failed request leaves nothing behind.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from psycopg.pq import TransactionStatus

from simdb.results import AddResult
from simdb.store.connect import ThreadConnections

__all__ = ["Reservation", "reserve", "rolled_back"]


def rolled_back(conn: Any) -> bool:
    """Roll back whatever ``conn`` holds; False when the connection is broken (then it is closed, not reused)."""
    try:
        if not conn.closed and conn.info.transaction_status != TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
        return not conn.closed
    except Exception:  # noqa: BLE001 (a connection that cannot roll back is closed by the caller)
        return False


class Reservation:
    """An admitted text, stored once :meth:`commit` is called and never if :meth:`rollback` is.

    ``key``, ``result`` (:class:`simdb.results.AddResult`), ``inserted`` and ``matches`` as from
    ``add_if_unique``. A refused text (``inserted`` False) holds nothing: its ``commit`` and
    ``rollback`` do nothing. ``held`` is True until the reservation is finished. Thread-safe: an async
    app commits from another thread than the one that reserved. As a context manager it commits when
    the block succeeds and rolls back when it raises."""

    def __init__(self, key: str, result: AddResult, conn: Any, give_back: Callable[..., None]):
        self.key = key
        self.result = result
        self._conn = conn
        self._give_back = give_back
        self._lock = threading.Lock()

    @property
    def inserted(self) -> bool:
        return self.result.inserted

    @property
    def matches(self) -> list:
        return self.result.matches

    @property
    def held(self) -> bool:
        return self._conn is not None

    def _finish(self, sql: str) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.execute(sql)
        except BaseException:
            self._give_back(conn, reusable=False)  # closed: the server rolls its transaction back
            raise
        self._give_back(conn)

    def commit(self) -> None:
        """Store the text (commit its transaction; its locks are released)."""
        self._finish("COMMIT")

    def rollback(self) -> None:
        """Give the text back: nothing of it is stored."""
        self._finish("ROLLBACK")

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.rollback()

    def __del__(self) -> None:
        # a reservation forgotten unfinished would hold its locks (and block near texts) for as long
        # as the process lives: rolled back when collected
        conn = getattr(self, "_conn", None)
        if conn is not None:
            self._conn = None
            try:
                conn.close()
            except Exception:  # noqa: BLE001 (at collection: nothing more to do)
                pass

    def __repr__(self) -> str:
        state = "held" if self.held else ("refused" if not self.inserted else "finished")
        return f"Reservation(key={self.key!r}, {state})"


def reserve(connections: ThreadConnections, key: str, admit: Callable[[Any], AddResult]) -> Reservation:
    """``admit(conn)`` (an ``add_if_unique``) in a transaction of its own, on a connection lent by
    ``connections`` (:meth:`~simdb.store.connect.ThreadConnections.lend`), held open by the
    :class:`Reservation` when the text was inserted; a refused text's is rolled back at once."""
    conn = connections.lend()
    try:
        conn.execute("BEGIN")  # the reservation's transaction: add_if_unique's own is a savepoint in it
        result = admit(conn)
    except BaseException:
        connections.give_back(conn, reusable=rolled_back(conn))
        raise
    if not result.inserted:  # refused: nothing to hold
        connections.give_back(conn, reusable=rolled_back(conn))
        conn = None
    return Reservation(key, result, conn, connections.give_back)
