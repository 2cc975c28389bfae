"""The connections of a ``SimhashIndex``: one psycopg connection per thread, taken from the
SQLAlchemy engine's pool and detached from it, in autocommit mode, with serial generic plans.

Why psycopg connections and not SQLAlchemy ones: a near query is ~0.1 ms of server time, and
SQLAlchemy's per-statement overhead is several times that; prepared statements with generic
plans skip the planner on every call. Why per thread: a psycopg connection is not meant to be
shared between threads mid-statement, and each thread keeps its prepared statements.

The server's errors a connection's user meets are said here too: the SQLSTATEs worth a new transaction
(:data:`RETRY_SQLSTATES`, :func:`retried`; a load's tries: :func:`attempts`), and PostgreSQL's size limit on a key, reported as simdb's typed
error naming the key (:func:`key_size_errors`). Why that one is not an up-front check: a key is stored in a
btree (the ``(collection_id, key)`` unique constraint) whose rows are limited to 2,704 bytes *after
compression*, so a 100 kB key of repeated characters fits while a 3 kB random one does not. Only the server
knows; its ``program_limit_exceeded`` (SQLSTATE 54000, "index row size ... exceeds ...") becomes
:class:`~simdb.errors.InputTooLargeError` instead of a raw driver error (which the CLI reported as a
database problem, exit 3).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from typing import Any, TypeVar

import psycopg
import psycopg.errors
import sqlalchemy
from psycopg.pq import TransactionStatus

from simdb.errors import CollectionChangedError, IndexClosedError, InputTooLargeError, InvalidArgumentError
from simdb.store import collection_guard as _guard

__all__ = [
    "LOAD_RETRIES", "PROGRAM_LIMIT_EXCEEDED", "RETRY_SQLSTATES", "TRANSIENT", "ThreadConnections", "attempts",
    "driver_connection", "in_transaction", "key_size_errors", "new_connection", "retried",
]

T = TypeVar("T")

#: SQLSTATEs worth retrying a whole transaction for (deadlock, serialization failure)
RETRY_SQLSTATES = frozenset({"40P01", "40001"})

#: idle lent connections an index keeps for its next reservations (:meth:`ThreadConnections.lend`)
SPARE_CONNECTIONS = 8


def driver_connection(conn: Any) -> psycopg.Connection:
    """The psycopg connection under ``conn``: a psycopg connection itself, or a SQLAlchemy
    ``Connection``'s DBAPI connection (its transaction is the caller's: statements run in it).

    Why both: every store statement is psycopg SQL (``%(name)s``) run on a psycopg connection,
    while users of :mod:`simdb.index.duplicates` hold SQLAlchemy connections from ``engine.begin()``."""
    if isinstance(conn, psycopg.Connection):
        return conn
    if isinstance(conn, sqlalchemy.Connection):
        driver = conn.connection.driver_connection
        if isinstance(driver, psycopg.Connection):
            return driver
        raise InvalidArgumentError(f"conn must be a connection of the psycopg driver, got one of {driver!r}")
    raise InvalidArgumentError(
        f"conn must be a psycopg or SQLAlchemy Connection, got {type(conn).__name__} "
        "(an Engine lends connections: pass engine.begin()'s, or SimhashIndex.connection())"
    )


@contextmanager
def in_transaction(where: Any, isolation: str | None = None) -> Iterator[psycopg.Connection]:
    """A psycopg connection in a transaction of its own, committed on leaving (rolled back on an error).

    ``where``: a SQLAlchemy ``Engine`` (a connection of its pool, with ``isolation``, e.g.
    ``"REPEATABLE READ"``, set and reset by SQLAlchemy), or a psycopg / SQLAlchemy connection
    (``with conn.transaction()``: a transaction block even in autocommit, a savepoint inside one)."""
    if isinstance(where, sqlalchemy.Engine):
        with where.connect() as sa_conn:
            if isolation is not None:
                sa_conn = sa_conn.execution_options(isolation_level=isolation)
            with sa_conn.begin():
                yield driver_connection(sa_conn)
        return
    conn = driver_connection(where)
    with conn.transaction():
        yield conn


def retried(run: Callable[[], T], retries: int) -> T:
    """``run()`` (one whole transaction), again on a deadlock or serialization failure
    (:data:`RETRY_SQLSTATES`), at most ``retries`` more times."""
    for attempt in range(retries + 1):
        try:
            return run()
        except psycopg.Error as exc:
            if exc.sqlstate not in RETRY_SQLSTATES or attempt == retries:
                raise
    raise AssertionError("unreachable")


def new_connection(engine):
    """A psycopg connection of ``engine``, detached from its pool, autocommit, serial generic plans."""
    fairy = engine.raw_connection()
    conn = fairy.driver_connection
    fairy.detach()
    if conn.info.transaction_status != 0:  # IDLE
        conn.rollback()
    conn.autocommit = True
    if conn.info.encoding != "utf-8":  # a caller's engine under PGCLIENTENCODING (see simdb.store.urls.CLIENT_ENCODING)
        conn.execute("SET client_encoding TO 'UTF8'")
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

    def __init__(self, engine, on_rule_change: Callable[[int], None] | None = None):
        self.engine = engine
        #: told the id of a collection whose rule changed (:func:`simdb.store.collection_guard.listen`)
        self.on_rule_change = on_rule_change
        self._local = threading.local()
        self._conns: list[Any] = []
        self._lock = threading.Lock()
        self._pool: tuple[int, int, ThreadPoolExecutor] | None = None
        self._pid = os.getpid()
        self.closed = False
        #: connections given back by :meth:`give_back`, lent again by :meth:`lend`
        self._spare: list[Any] = []

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
        self.check_open()
        conn = getattr(self._local, "conn", None)
        if conn is not None and not conn.closed and self._pid == os.getpid():
            if conn.info.transaction_status != TransactionStatus.ACTIVE:
                return conn
            self._discard(conn)
        if self._pid != os.getpid():  # forked: never touch the parent's sockets
            self._pid = os.getpid()
            with self._lock:
                self._conns = []
        conn = new_connection(self.engine)
        if self.on_rule_change is not None:
            _guard.listen(conn, self.on_rule_change)
        self._local.conn = conn
        with self._lock:
            self._conns.append(conn)
        return conn

    def check_open(self) -> None:
        """Refuse once closed: the index's engine would reopen its pool after dispose, and a
        connection kept by another thread would still answer, so "closed" is this flag."""
        if self.closed:
            raise IndexClosedError("SimhashIndex is closed: open a new one")

    def _discard(self, conn) -> None:
        """Close an interrupted connection and forget it (its thread gets a new one)."""
        try:
            conn.close()
        except Exception:  # noqa: BLE001 (closing a half-used socket: nothing more to do)
            pass
        with self._lock:
            self._conns = [c for c in self._conns if c is not conn]
        self._local.conn = None

    def lend(self):
        """A connection of no thread's, for a transaction held open past the call that began it (a
        reservation: :meth:`simdb.SimhashIndex.reserve`), given back with :meth:`give_back`.

        Why not the thread's connection: the transaction stays open while the app goes on with its
        request, and every other call of the index on that thread would run inside it (and a
        reservation committed from another thread, as an async app does, would cross threads)."""
        self.check_open()
        with self._lock:
            conn = self._spare.pop() if self._spare and self._pid == os.getpid() else None
        if conn is None or conn.closed:
            conn = new_connection(self.engine)
        return conn

    def give_back(self, conn, reusable: bool = True) -> None:
        """Take back a lent connection, idle (committed or rolled back): kept for the next :meth:`lend`
        (a few), else closed; ``reusable=False`` (it failed mid-statement): closed."""
        idle = reusable and not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE
        with self._lock:
            if idle and not self.closed and self._pid == os.getpid() and len(self._spare) < SPARE_CONNECTIONS:
                self._spare.append(conn)
                return
        try:
            conn.close()
        except Exception:  # noqa: BLE001 (closing a broken socket: nothing more to do)
            pass

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
            conns, self._conns = self._conns + self._spare, []
            self._spare = []
            pool, self._pool = self._pool, None
        if pool is not None and pool[1] == os.getpid():
            pool[2].shutdown(wait=True)
        if self._pid == os.getpid():
            for conn in conns:
                try:
                    conn.close()
                except Exception:
                    pass


#: add_many: more tries of a load whose items can be read again, at most (:func:`attempts`)
LOAD_RETRIES = 3
#: worth a new try with the same items: a deadlock, a serialisation failure, or a rule that changed before
#: anything was written (the caller has followed the new one: :meth:`simdb.index.SimhashIndex.add_many`)
TRANSIENT = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure, CollectionChangedError)


def attempts(items: Any) -> Iterator[AbstractContextManager]:
    """The tries of a load of ``items`` (:mod:`simdb.store.bulk`, rule 4), for the caller to run each in, and
    to leave once it succeeds:

        for attempt in attempts(items):
            with attempt:
                ...  # the load
                break

    A try's transient error (:data:`TRANSIENT`) is swallowed and the next try follows, after a short
    sleep, if ``items`` can be read again (a list or tuple), at most :data:`LOAD_RETRIES` more times; a
    one-shot iterator's error, the last try's and any other error are raised."""
    reiterable = isinstance(items, Sequence) and not isinstance(items, (str, bytes))
    for n in range(1, LOAD_RETRIES + 2):
        last = not reiterable or n > LOAD_RETRIES
        yield nullcontext() if last else suppress(*TRANSIENT)
        time.sleep(0.05 * n)  # only after a swallowed error: a try that succeeded left the loop


PROGRAM_LIMIT_EXCEEDED = "54000"
_HINT = "keys of up to about 2,600 bytes of UTF-8 always fit; longer ones only if they compress well"


def _sqlstate(exc: BaseException) -> str | None:
    return getattr(exc, "sqlstate", None) or getattr(getattr(exc, "orig", None), "sqlstate", None)


_NO_KEY: object = object()


@contextmanager
def key_size_errors(where: str = "", *, key: object = _NO_KEY):
    """Re-raise PostgreSQL's 'index row size exceeds' as InputTooLargeError naming ``where``, or ``key``
    (a write's key: ``with key_size_errors(key=key):`` around the facade's single-row writes)."""
    try:
        yield
    except Exception as exc:
        if _sqlstate(exc) != PROGRAM_LIMIT_EXCEEDED:
            raise
        if key is not _NO_KEY:
            where = f"key {_short_repr(key)}"
        detail = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [""])[0]
        raise InputTooLargeError(f"{where} is too large for PostgreSQL's key index ({detail}); {_HINT}") from None


def _short_repr(value: object) -> str:
    r = repr(value)
    return r if len(r) <= 60 else r[:57] + "..."
