"""Whole-collection statements of the store (the SQL that the public API delegates to)."""

from __future__ import annotations

from simdb.store.sql import COLLECTIONS

__all__ = ["DROP_COLLECTION_SQL", "drop_collection"]

#: the collection's rows go with it (foreign key ON DELETE CASCADE)
DROP_COLLECTION_SQL = f"DELETE FROM {COLLECTIONS} WHERE id = %s RETURNING id"


def drop_collection(conn, collection_id: int) -> bool:
    """Delete a collection and all its rows on a psycopg connection; True if it existed."""
    return conn.execute(DROP_COLLECTION_SQL, (int(collection_id),)).fetchone() is not None
