"""The configuration version a writer computed its rows by, checked in the write's own transaction.

Why: a collection's rows are only findable by the rule they were computed under (its fingerprinter,
sketch scheme, band keys, whether texts are kept). ``simdb convert`` changes that rule and rewrites
every row, but a process that opened the collection before kept the old rule, and its later writes
stored rows the new rule cannot find, silently and for good. Now every write carries the version of
the configuration it read (``simdb_collection_rule(config)``, a digest of all of it but the folders
recorded for the report, which no row depends on) and the database refuses it, with SQLSTATE ``SDB01``, once the version is no longer current (the function
``simdb_collection_unchanged``, migration ``simdb_0015_collection_guard``, which says why it is exact).
The facade then reads the new configuration and writes again (:meth:`simdb.SimhashIndex.add`).

Readers are not refused: a trigger announces the change on :data:`RULE_CHANNEL` to every listening
connection (:func:`listen`), and the index answers again by the new rule a query that saw it.

Values in, values out: :func:`current` reads (config, version) in one statement, :data:`GUARD` is the
SQL condition a write statement includes (parameters ``c`` and ``v``), :func:`check` is the
statement for a transaction of several (a bulk load), :func:`refused` maps the server's refusal to
:class:`~simdb.errors.CollectionChangedError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from simdb.errors import CollectionChangedError
from simdb.store.sql import COLLECTIONS

__all__ = ["CHANGED_SQLSTATE", "GUARD", "LISTEN_SQL", "RULE_CHANNEL", "check", "current", "is_refusal", "listen",
           "notice_handler", "refused"]

#: the SQLSTATE ``simdb_collection_unchanged`` raises (a class of simdb's own)
CHANGED_SQLSTATE = "SDB01"

#: the condition a write statement adds: true, or the statement fails with ``CHANGED_SQLSTATE``
GUARD = "simdb_collection_unchanged(%(c)s::int4, %(v)s::text)"

#: the channel a change of a collection's rule is announced on (payload: its id), by a trigger
RULE_CHANNEL = "simdb_rule_changes"

_CURRENT_SQL = f"SELECT config, simdb_collection_rule(config) FROM {COLLECTIONS} WHERE id = %s"
_CHECK_SQL = f"SELECT {GUARD}"


def current(conn: Any, collection_id: int) -> tuple[Any, str] | None:
    """(stored config, its version) of the collection, read together; None if it no longer exists."""
    row = conn.execute(_CURRENT_SQL, (collection_id,)).fetchone()
    return None if row is None else (row[0], row[1])


def check(conn: Any, collection_id: int, version: str) -> None:
    """Within a transaction: refuse (:class:`CollectionChangedError`) unless the collection's
    configuration is still ``version``, and keep it so until the transaction ends."""
    with refused(collection_id):
        conn.execute(_CHECK_SQL, {"c": collection_id, "v": version})


#: what a connection runs to hear of changes of rule (after adding :func:`notice_handler`)
LISTEN_SQL = f"LISTEN {RULE_CHANNEL}"


def notice_handler(on_change: Callable[[int], None]) -> Callable[[Any], None]:
    """A psycopg notify handler calling ``on_change(collection id)`` for the announcements of
    :data:`RULE_CHANNEL` (sync and async connections alike: ``add_notify_handler``)."""

    def notice(note: Any) -> None:
        if note.channel == RULE_CHANNEL and note.payload.isdigit():
            on_change(int(note.payload))

    return notice


def listen(conn: Any, on_change: Callable[[int], None]) -> bool:
    """Have ``on_change(collection id)`` called when a collection's rule changes (another process's
    ``simdb convert``): the announcement arrives with the connection's next statement, before its
    result, so a reader can tell that the statement already saw the new rule (an autocommit
    connection: ``LISTEN`` takes effect at once). False where the server refuses ``LISTEN`` (a hot
    standby, which no one converts through): the connection is used as it is."""
    handler = notice_handler(on_change)
    conn.add_notify_handler(handler)
    try:
        conn.execute(LISTEN_SQL)
    except psycopg.Error:  # autocommit: the failed statement leaves the connection usable
        conn.remove_notify_handler(handler)
        return False
    return True


def is_refusal(exc: BaseException) -> bool:
    """Is ``exc`` the server's refusal of a write computed under an older configuration?"""
    return isinstance(exc, psycopg.Error) and getattr(exc, "sqlstate", None) == CHANGED_SQLSTATE


@contextmanager
def refused(collection_id: int) -> Iterator[None]:
    """Turn the server's refusal (SQLSTATE ``SDB01``) into :class:`CollectionChangedError`."""
    try:
        yield
    except psycopg.Error as exc:
        if not is_refusal(exc):
            raise
        raise CollectionChangedError(
            f"collection id {collection_id} changed its configuration (simdb convert, or texts kept from now on) "
            "after this index opened it: nothing of this write (its transaction) was stored; writes committed "
            "before it are kept"
        ) from exc
