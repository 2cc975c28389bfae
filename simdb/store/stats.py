"""Read-mostly statements about collections as a whole, for the ``simdb`` command.

The CLI's ``stats``, ``collections``, ``drop`` and the "does this collection exist?"
check of its read-only commands run before (or instead of) opening a
:class:`simdb.index.SimhashIndex`, which would create the collection and, for some
commands, migrate the schema. Their SQL lives here, in the store, with the
other statements. Every function takes an open SQLAlchemy connection: the caller
owns the transaction (``drop_named_collection`` must run in ``engine.begin()``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

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


def collection_exists(conn: Connection, name: str) -> bool:
    """Whether collection ``name`` exists; False (not an error) when simdb has no tables yet, so that a
    read-only command can say so without creating them."""
    if conn.execute(text(f"SELECT to_regclass('{COLLECTIONS}')")).scalar() is None:
        return False
    return conn.execute(text(f"SELECT 1 FROM {COLLECTIONS} WHERE name = :name"), {"name": name}).first() is not None


def collection_stats(conn: Connection, name: str) -> CollectionStats | None:
    """The stats of collection ``name``, or None if there is none. Table and index sizes are those of
    the fingerprint table, shared by all collections."""
    row = conn.execute(
        text(f"SELECT id, config, created_at FROM {COLLECTIONS} WHERE name = :name"), {"name": name}
    ).first()
    if row is None:
        return None
    cid, config, created = row
    counts = conn.execute(
        text(f"SELECT count(*), count(*) FILTER (WHERE fp IS NULL), max(created_at) "
             f"FROM {FINGERPRINTS} WHERE collection_id = :cid"),
        {"cid": cid},
    ).one()
    return CollectionStats(
        texts=counts[0],
        texts_without_features=counts[1],
        created_at=created,
        last_added_at=counts[2],
        config=config,
        server_version=conn.execute(text("SHOW server_version")).scalar_one(),
        table_bytes=conn.execute(text(f"SELECT pg_table_size('{FINGERPRINTS}')")).scalar_one(),
        index_bytes=conn.execute(text(f"SELECT pg_indexes_size('{FINGERPRINTS}')")).scalar_one(),
    )


def list_collections(conn: Connection) -> list[CollectionSummary]:
    """Every collection with its row count, by name."""
    rows = conn.execute(text(
        f"SELECT c.name, (SELECT count(*) FROM {FINGERPRINTS} f WHERE f.collection_id = c.id), c.created_at "
        f"FROM {COLLECTIONS} c ORDER BY c.name"
    )).all()
    return [CollectionSummary(r[0], r[1], r[2]) for r in rows]


def drop_named_collection(conn: Connection, name: str) -> bool:
    """Delete collection ``name`` and its rows (ON DELETE CASCADE); True if it existed."""
    return conn.execute(text(f"DELETE FROM {COLLECTIONS} WHERE name = :name RETURNING id"),
                        {"name": name}).first() is not None
