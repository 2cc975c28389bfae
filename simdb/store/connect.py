"""The connections of a ``SimhashIndex``: one psycopg connection per thread, taken from the
SQLAlchemy engine's pool and detached from it, in autocommit mode, with serial generic plans.

Why psycopg connections and not SQLAlchemy ones: a near query is ~0.1 ms of server time, and
SQLAlchemy's per-statement overhead is several times that; prepared statements with generic
plans skip the planner on every call. Why per thread: a psycopg connection is not meant to be
shared between threads mid-statement, and each thread keeps its prepared statements.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from psycopg.pq import TransactionStatus

__all__ = ["ThreadConnections", "new_connection"]


def new_connection(engine):
    """A psycopg connection of ``engine``, detached from its pool, autocommit, serial generic plans."""
    fairy = engine.raw_connection()
    conn = fairy.driver_connection
    fairy.detach()
    if conn.info.transaction_status != 0:  # IDLE
        conn.rollback()
    conn.autocommit = True
    # Probe lookups must stay serial (parallel Gathers cost milliseconds) and
    # use the generic plan of the prepared statements (no per-call planning).
    conn.execute("SET max_parallel_workers_per_gather = 0")
    conn.execute("SET plan_cache_mode = force_generic_plan")
    # No JIT: these are short look-ups, and a generic plan whose estimate passes jit_above_cost (a
    # one-collection table: collection_id matches every row) would compile on every execution.
    conn.execute("SET jit = off")
    return conn


class ThreadConnections:
    """Each thread's connection of one engine, and the worker threads of batched searches.

    Fork-safe: after a fork the child opens its own connections and never touches the
    parent's sockets (nor closes them)."""

    def __init__(self, engine):
        self.engine = engine
        self._local = threading.local()
        self._conns: list[Any] = []
        self._lock = threading.Lock()
        self._pool: tuple[int, int, ThreadPoolExecutor] | None = None
        self._pid = os.getpid()
        self.closed = False

    @property
    def pool(self) -> ThreadPoolExecutor | None:
        """The worker threads of batched searches, if started (None after :meth:`close`)."""
        return None if self._pool is None else self._pool[2]

    @property
    def connections(self) -> list[Any]:
        """The connections opened so far (of this process), one per thread that asked."""
        with self._lock:
            return list(self._conns)

    def get(self):
        """This thread's connection (opened on first use; replaced when a command was interrupted on it).

        Why replaced: a KeyboardInterrupt (Ctrl-C, SIGTERM) that lands while psycopg waits for a
        result leaves the connection with a command in progress; its transaction's rollback then
        fails ("another command is already in progress"), and so would every later statement on it,
        such as the undo of an interrupted incremental ``simdb dedup``. Closing it ends that command
        and rolls its transaction back on the server; the next statement gets a fresh connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and not conn.closed and self._pid == os.getpid():
            if conn.info.transaction_status != TransactionStatus.ACTIVE:
                return conn
            self._discard(conn)
        if self.closed:
            raise RuntimeError("SimhashIndex is closed")
        if self._pid != os.getpid():  # forked: never touch the parent's sockets
            self._pid = os.getpid()
            with self._lock:
                self._conns = []
        conn = new_connection(self.engine)
        self._local.conn = conn
        with self._lock:
            self._conns.append(conn)
        return conn

    def _discard(self, conn) -> None:
        """Close an interrupted connection and forget it (its thread gets a new one)."""
        try:
            conn.close()
        except Exception:  # noqa: BLE001 (closing a half-used socket: nothing more to do)
            pass
        with self._lock:
            self._conns = [c for c in self._conns if c is not conn]
        self._local.conn = None

    def worker_pool(self, workers: int) -> ThreadPoolExecutor:
        """Threads kept between calls (each keeps its connection; shut down by :meth:`close`)."""
        with self._lock:
            pool = self._pool
            if pool is None or pool[0] != workers or pool[1] != os.getpid():
                if pool is not None and pool[1] == os.getpid():
                    pool[2].shutdown(wait=False)
                pool = (workers, os.getpid(), ThreadPoolExecutor(workers, thread_name_prefix="simdb-near-many"))
                self._pool = pool
        return pool[2]

    def close(self) -> None:
        """Close every connection (of this process) and the worker threads; no new ones after."""
        self.closed = True
        with self._lock:
            conns, self._conns = self._conns, []
            pool, self._pool = self._pool, None
        if pool is not None and pool[1] == os.getpid():
            pool[2].shutdown(wait=True)
        if self._pid == os.getpid():
            for conn in conns:
                try:
                    conn.close()
                except Exception:
                    pass
