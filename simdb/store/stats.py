"""Read-mostly statements about collections as a whole, for the ``simdb`` command.

The CLI's ``stats``, ``collections``, ``drop`` and the "does this collection exist?"
check of its read-only commands run before (or instead of) opening a
:class:`simdb.index.SimhashIndex`, which would create the collection and, for some
commands, migrate the schema. Their SQL lives here, in the store, with the
other statements. Every function takes an open psycopg connection (or a SQLAlchemy one, whose
psycopg connection it uses: :func:`simdb.store.connect.driver_connection`); the caller owns the
transaction (``drop_named_collection`` must run in one: :func:`simdb.store.connect.in_transaction`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from simdb.store.connect import driver_connection
from simdb.store.sql import COLLECTIONS, FINGERPRINTS

__all__ = [
    "CollectionStats", "CollectionSummary", "collection_exists", "collection_stats", "list_collections",
    "drop_named_collection",
]


@dataclass(frozen=True)
class CollectionStats:
    """One collection's size and configuration, and the server's (``simdb stats``)."""

    texts: int
    texts_without_features: int
    created_at: datetime | None
    last_added_at: datetime | None
    config: Any
    server_version: str
    table_bytes: int
    index_bytes: int


@dataclass(frozen=True)
class CollectionSummary:
    """One line of ``simdb collections``."""

    name: str
    texts: int
    created_at: datetime | None


def _one(conn: Any, sql: str, params: dict | None = None) -> tuple | None:
    """The first row of ``sql`` on ``conn``'s psycopg connection (None: no row)."""
    return driver_connection(conn).execute(sql, params).fetchone()


def collection_exists(conn: Any, name: str) -> bool:
    """Whether collection ``name`` exists; False (not an error) when simdb has no tables yet, so that a
    read-only command can say so without creating them."""
    found = _one(conn, f"SELECT to_regclass('{COLLECTIONS}')")
    if found is None or found[0] is None:
        return False
    return _one(conn, f"SELECT 1 FROM {COLLECTIONS} WHERE name = %(name)s", {"name": name}) is not None


def collection_stats(conn: Any, name: str) -> CollectionStats | None:
    """The stats of collection ``name``, or None if there is none. Table and index sizes are those of
    the fingerprint table, shared by all collections."""
    row = _one(conn, f"SELECT id, config, created_at FROM {COLLECTIONS} WHERE name = %(name)s", {"name": name})
    if row is None:
        return None
    cid, config, created = row
    counts = _one(
        conn,
        f"SELECT count(*), count(*) FILTER (WHERE fp IS NULL), max(created_at), current_setting('server_version'), "
        f"pg_table_size('{FINGERPRINTS}'), pg_indexes_size('{FINGERPRINTS}') "
        f"FROM {FINGERPRINTS} WHERE collection_id = %(cid)s",
        {"cid": cid},
    )
    assert counts is not None  # an aggregate always returns its row
    return CollectionStats(
        texts=counts[0],
        texts_without_features=counts[1],
        created_at=created,
        last_added_at=counts[2],
        config=config,
        server_version=counts[3],
        table_bytes=counts[4],
        index_bytes=counts[5],
    )


def list_collections(conn: Any) -> list[CollectionSummary]:
    """Every collection with its row count, by name."""
    rows = driver_connection(conn).execute(
        f"SELECT c.name, (SELECT count(*) FROM {FINGERPRINTS} f WHERE f.collection_id = c.id), c.created_at "
        f"FROM {COLLECTIONS} c ORDER BY c.name"
    ).fetchall()
    return [CollectionSummary(r[0], r[1], r[2]) for r in rows]


def drop_named_collection(conn: Any, name: str) -> bool:
    """Delete collection ``name`` and its rows (ON DELETE CASCADE); True if it existed."""
    return _one(conn, f"DELETE FROM {COLLECTIONS} WHERE name = %(name)s RETURNING id", {"name": name}) is not None
