"""The locks of a bulk load (``SimhashIndex.add_many``): never a deadlock, never a long wait for others.

Why: the fast path of ``add_many`` (drop the block indexes and constraints,
COPY straight into the table, rebuild) needs ``ACCESS EXCLUSIVE`` on the one
table every collection shares. Taken *after* the load had read the table
(``ACCESS SHARE``), two loads into different collections each held the weak lock
and waited for the strong one: ``DeadlockDetected`` (issue 15, item 3). Held for
the whole load, it also stalled every reader and writer of every other collection.

The rules here:

1. Writers of one collection serialise on a transaction advisory lock
   ``(ADD_LOCK, collection_id)`` (same-collection loads wait for each other,
   then both succeed; other collections are not involved).
2. The exclusive lock is asked for *first*, before the load touches the table,
   so the load holds nothing on the table while it waits (no lock-upgrade cycle),
   and with ``NOWAIT`` unless the caller forced the fast path: if anyone else
   uses the table at that moment, the load takes the plain path (staged COPY +
   INSERT, row locks only) instead of waiting.
3. Even when granted, the lock is kept only if the table has no rows at all
   (the first import into a fresh database): otherwise it is released at once
   (rolling back the savepoint that took it) and the plain path is used, so an
   established collection's readers and writers are never stalled by someone
   else's bulk load. Rows of the load's own collection release it too: the fast
   path is only taken into an empty collection, and a load that may replace rows
   must lock the collection's row before the table's rows (rule 5), which a holder
   of the table lock cannot do without deadlocking with ``simdb convert`` (that
   locks the collection's row, then reads the table). ``rebuild_indexes=True``
   still forces the fast path.
4. Should PostgreSQL still report a deadlock or a serialisation failure (e.g. a
   caller's own locks), a load whose items can be read again (a list or tuple)
   is retried, at most :data:`RETRIES` times; a one-shot iterator is not (its
   items are gone), and the error is raised. So is a load refused because the
   collection's rule changed meanwhile (:func:`check_rule`), once the caller has
   followed the new rule.
5. The rule check (the collection's row, ``FOR KEY SHARE``) comes before the load deletes
   any row it replaces, right after the load's first read of the table, and again just
   before the commit (:func:`check_rule` says why both).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext, suppress
from typing import Any

import psycopg.errors

from simdb.errors import CollectionChangedError
from simdb.store import collection_guard as _guard

__all__ = ["ADD_LOCK", "RETRIES", "TRANSIENT", "attempts", "check_rule", "lock_collection", "lock_for_load", "try_exclusive"]

#: advisory-lock namespace (first int4 key) for writers of one collection in add_many ("simd")
ADD_LOCK = 0x73696D64
RETRIES = 3


class _Release(Exception):
    """Raised inside the savepoint to roll it back, which releases the table lock taken in it."""


def lock_for_load(conn, table: str, collection_id: int, rebuild: bool | None) -> bool:
    """The first statements of a load's transaction (rules 1 to 3): serialise the writers of the collection,
    then ask for ``ACCESS EXCLUSIVE`` on ``table`` for the drop-and-rebuild fast path unless ``rebuild`` is
    False (:func:`try_exclusive`; ``rebuild=True`` forces it). Returns whether the table lock is held."""
    lock_collection(conn, collection_id)
    return rebuild is not False and try_exclusive(conn, table, collection_id, force=rebuild is True)


def lock_collection(conn, collection_id: int) -> None:
    """Serialise writers of one collection (transaction-scoped: released at commit or rollback)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s::int4, %s::int4)", (ADD_LOCK, collection_id))


def check_rule(conn, collection_id: int, version: str | None) -> None:
    """Refuse (:class:`~simdb.errors.CollectionChangedError`) a load computed under a rule the collection
    no longer has, and keep its rule until the load commits (:mod:`simdb.store.collection_guard`).

    Not first in the load's transaction (rules 2 and 5): the check locks the collection's row, and a
    loader holding it while waiting for another's ``ACCESS EXCLUSIVE`` on the table deadlocks with
    that one, whose drop of the foreign key needs ``simdb_collections`` (seen in
    tests/test_bulk_concurrency.py). A staged load therefore checks right after its first read of
    the table (it then holds ``ACCESS SHARE``: no one holds or takes the table's exclusive lock until
    it ends), before it deletes the rows it replaces: ``simdb convert`` locks the collection's row and
    then rewrites its rows, and a loader holding some of those rows while waiting for the collection's
    row was a deadlock (tests/test_convert_races.py); a collection dropped meanwhile is then said so,
    not met as a foreign-key violation. A load holding the table's exclusive lock (into an empty
    table) checks right after taking it: no other loader waits for the table while holding a
    collection's row then. Every load checks again just before its commit. Anywhere before the commit
    is as exact: the rows are stored only if the rule they were computed by is still the
    collection's when they are."""
    if version is not None:
        _guard.check(conn, collection_id, version)


def try_exclusive(conn, table: str, collection_id: int, *, force: bool) -> bool:
    """Take ``ACCESS EXCLUSIVE`` on ``table`` for the drop-and-rebuild fast path, if it blocks nobody.

    Must be the transaction's first use of ``table`` (rule 2). ``force``: wait for the lock
    (safe: nothing held on the table meanwhile) and keep it whatever the table holds.
    Returns whether the lock is held (until the transaction ends).
    """
    try:
        with conn.transaction():  # a savepoint: rolling it back releases the lock
            conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE" + ("" if force else " NOWAIT"))
            if not force and conn.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()[0]:
                raise _Release
    except (_Release, psycopg.errors.LockNotAvailable):
        return False
    return True


#: worth a new try with the same items: a deadlock, a serialisation failure, or a rule that changed before
#: anything was written (the caller has followed the new one: :meth:`simdb.index.SimhashIndex.add_many`)
TRANSIENT = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure, CollectionChangedError)


def attempts(items: Any) -> Iterator[AbstractContextManager]:
    """The tries of a load of ``items``, for the caller to run each in, and to leave once it succeeds (rule 4)::

        for attempt in attempts(items):
            with attempt:
                ...  # the load
                break

    A try's transient error (:data:`TRANSIENT`) is swallowed and the next try follows, after a short
    sleep, if ``items`` can be read again (a list or tuple), at most :data:`RETRIES` more times; a
    one-shot iterator's error, the last try's and any other error are raised."""
    reiterable = isinstance(items, Sequence) and not isinstance(items, (str, bytes))
    for n in range(1, RETRIES + 2):
        last = not reiterable or n > RETRIES
        yield nullcontext() if last else suppress(*TRANSIENT)
        time.sleep(0.05 * n)  # only after a swallowed error: a try that succeeded left the loop
