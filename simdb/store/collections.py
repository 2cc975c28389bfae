"""Whole-collection statements of the store (the SQL that the public API delegates to)."""

from __future__ import annotations

import json

from simdb.store import migrate as _migrate
from simdb.store.sql import COLLECTIONS

__all__ = ["DROP_COLLECTION_SQL", "LEGACY_KEY", "create_collection", "drop_collection", "ensure_schema", "find_collection"]

#: config key that migration simdb_0009 sets on a collection it converted from the retired legacy
#: MinHash-band store (jaccard=True): Hamming-only until ``simdb convert`` rebuilds its sketches
LEGACY_KEY = "legacy_minhash"

#: the collection's rows go with it (foreign key ON DELETE CASCADE)
DROP_COLLECTION_SQL = f"DELETE FROM {COLLECTIONS} WHERE id = %(id)s RETURNING id"


def drop_collection(conn, collection_id: int) -> bool:
    """Delete a collection and all its rows on a psycopg connection; True if it existed."""
    return conn.execute(DROP_COLLECTION_SQL, {"id": int(collection_id)}).fetchone() is not None


_FIND_SQL = f"SELECT id, config FROM {COLLECTIONS} WHERE name = %(name)s"
_CREATE_SQL = f"INSERT INTO {COLLECTIONS} (name, config) VALUES (%(name)s, %(config)s::jsonb) ON CONFLICT (name) DO NOTHING"


def find_collection(conn, name: str) -> tuple | None:
    """(id, stored config) of the collection ``name``, or None."""
    return conn.execute(_FIND_SQL, {"name": name}).fetchone()


def create_collection(conn, name: str, config: dict) -> tuple:
    """Create ``name`` with ``config`` unless it exists (a concurrent creator wins); (id, stored config)."""
    conn.execute(_CREATE_SQL, {"name": name, "config": json.dumps(config)})
    return conn.execute(_FIND_SQL, {"name": name}).fetchone()


def ensure_schema(conn, engine) -> None:
    """Run the migrations unless the schema is at head already (simdb's own version table, or a
    host application's Alembic history that includes simdb's revisions)."""
    revision, _table = _migrate.schema_revision(lambda sql: conn.execute(sql).fetchall())
    if revision != _migrate.HEAD:
        _migrate.migrate(engine)
