"""Whole-collection statements of the store: what the public API delegates to (find, create, drop), and
the read-mostly statements of the ``simdb`` command (``stats``, ``collections``, ``drop``, and the "does this
collection exist?" check of its read-only commands), which run before (or instead of) opening a
:class:`simdb.index.SimhashIndex`, which would create the collection and, for some commands, migrate the
schema. Those take an open psycopg connection or a SQLAlchemy one, whose psycopg connection they use
(:func:`simdb.store.connect.driver_connection`); the caller owns the transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from simdb.core.kept_texts import FILE_ROOTS_KEY, TEXTS_KEY, decompress_text, keeps_texts, texts_config
from simdb.errors import CollectionConfigError, InvalidTypeError
from simdb.store import migrate as _migrate
from simdb.store.bulk import lock_collection
from simdb.store.connect import driver_connection
from simdb.store.sql import COLLECTIONS, FINGERPRINTS

__all__ = [
    "DROP_COLLECTION_SQL", "LEGACY_KEY", "CollectionStats", "CollectionSummary", "collection_exists",
    "collection_stats", "create_collection", "drop_collection", "drop_collection_if_empty", "drop_named_collection",
    "KEPT_TEXT_SQL", "ensure_schema", "find_collection", "identity", "kept_text", "list_collections",
    "open_texts_option", "record_file_root",
]

#: config key that migration simdb_0009 sets on a collection it converted from the retired legacy
#: MinHash-band store (jaccard=True): Hamming-only until ``simdb convert`` rebuilds its sketches
LEGACY_KEY = "legacy_minhash"

#: the collection's rows go with it (foreign key ON DELETE CASCADE)
DROP_COLLECTION_SQL = f"DELETE FROM {COLLECTIONS} WHERE id = %(id)s RETURNING id"


def drop_collection(conn, collection_id: int) -> bool:
    """Delete a collection and all its rows on a psycopg connection; True if it existed."""
    return conn.execute(DROP_COLLECTION_SQL, {"id": int(collection_id)}).fetchone() is not None


_LOCK_ROW_SQL = f"SELECT id FROM {COLLECTIONS} WHERE id = %(id)s FOR UPDATE"
_HAS_ROWS_SQL = f"SELECT EXISTS (SELECT 1 FROM {FINGERPRINTS} WHERE collection_id = %(id)s::int4)"


def drop_collection_if_empty(conn, collection_id: int, *, lock_timeout_ms: int | None = None) -> bool:
    """Delete a collection that holds no row, inside the caller's transaction (READ COMMITTED); True
    if it was deleted. For a writer that created a collection and then failed before adding anything
    (``simdb add`` with a bad first record): a failed command must leave nothing behind.

    Why the locks before the check: a concurrent ``add_many`` of this collection holds its writers'
    advisory lock (:func:`simdb.store.bulk.lock_collection`) and any other insert holds a key-share
    lock on the collection's row (the foreign key) until it commits; taking both waits for them, and
    the check that follows is a new statement (a new snapshot) that sees what they committed, so rows
    stored meanwhile are never deleted with the collection. ``lock_timeout_ms``: wait at most that long
    for them (then PostgreSQL's LockNotAvailable, and the collection stays: someone is filling it)."""
    if lock_timeout_ms is not None:
        conn.execute("SELECT set_config('lock_timeout', %(ms)s, true)", {"ms": f"{int(lock_timeout_ms)}ms"})
    lock_collection(conn, collection_id)
    if conn.execute(_LOCK_ROW_SQL, {"id": int(collection_id)}).fetchone() is None:
        return False
    if conn.execute(_HAS_ROWS_SQL, {"id": int(collection_id)}).fetchone()[0]:
        return False
    return drop_collection(conn, collection_id)


_FIND_SQL = f"SELECT id, config FROM {COLLECTIONS} WHERE name = %(name)s"
_CREATE_SQL = (
    f"INSERT INTO {COLLECTIONS} (name, config) VALUES (%(name)s, %(config)s::jsonb) ON CONFLICT (name) DO NOTHING "
    "RETURNING id"
)


_IDENTITY_SQL = f"SELECT current_database(), id, name, created_at FROM {COLLECTIONS} WHERE id = %s"


def identity(conn, collection_id: int) -> tuple | None:
    """(database name, id, name, creation time) of a collection, which no other collection shares (one
    of the same name on another server, or dropped and created anew); None if it does not exist."""
    return conn.execute(_IDENTITY_SQL, (int(collection_id),)).fetchone()


def find_collection(conn, name: str) -> tuple | None:
    """(id, stored config) of the collection ``name``, or None."""
    return conn.execute(_FIND_SQL, {"name": name}).fetchone()


def create_collection(conn, name: str, config: dict) -> tuple:
    """Create ``name`` with ``config`` unless it exists (a concurrent creator wins); (id, stored config,
    whether this call created it)."""
    created = conn.execute(_CREATE_SQL, {"name": name, "config": json.dumps(config)}).fetchone() is not None
    cid, stored = conn.execute(_FIND_SQL, {"name": name}).fetchone()
    return cid, stored, created


def ensure_schema(conn, engine) -> None:
    """Run the migrations unless the schema is at head already (simdb's own version table, or a
    host application's Alembic history that includes simdb's revisions)."""
    revision, _table = _migrate.schema_revision(lambda sql: conn.execute(sql).fetchall())
    if revision != _migrate.HEAD:
        _migrate.migrate(engine)


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
    return _one(conn, _FIND_SQL, {"name": name}) is not None


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

# ---------------------------------------------------------------------------
# kept texts
# ---------------------------------------------------------------------------
# A collection's kept texts in the store: the ``"texts"`` option and the recorded file roots in
# its config (:mod:`simdb.core.kept_texts` says what they mean), and the texts of rows read back.
#
# Why the option lives in the config and not in each call: a collection that keeps texts must keep
# them whoever writes to it (the API, ``simdb.aio``, the CLI, ``simdb dedup``); a per-call flag is
# forgotten by the next writer.

# jsonb ``||`` on the stored config: a concurrent writer's other keys are kept
_SET_KEY_SQL = f"UPDATE {COLLECTIONS} SET config = config || %s::jsonb WHERE id = %s RETURNING config"

# appends the root unless it is there already (one statement: two concurrent adds do not lose one)
_ADD_ROOT_SQL = (
    f"UPDATE {COLLECTIONS} SET config = jsonb_set(config, ARRAY[%(k)s], "
    "COALESCE(CASE WHEN jsonb_typeof(config -> %(k)s) = 'array' THEN config -> %(k)s END, '[]'::jsonb) "
    "|| to_jsonb(%(root)s::text)) "
    "WHERE id = %(c)s AND NOT COALESCE(config -> %(k)s @> to_jsonb(%(root)s::text), false) RETURNING config"
)

#: one row's kept text (compressed) and meta, by key
KEPT_TEXT_SQL = f"SELECT text_z, meta FROM {FINGERPRINTS} WHERE collection_id = %s::int4 AND key = %s"


def open_texts_option(conn, collection_id: int, name: str, config: Any, want: bool | None) -> Any:
    """The collection's config after applying ``store_texts=want`` (psycopg connection).

    None: as recorded. True: keep texts from now on (recorded in the config, so every later writer
    keeps them; rows written before have none). False on a collection that keeps them: refused,
    since another writer would still keep them (turning the option off is a config change, not a
    per-handle choice)."""
    if want is not None and not isinstance(want, bool):
        raise InvalidTypeError(f"store_texts must be a bool or None, got {type(want).__name__}")
    if want is None or want == keeps_texts(config):
        return config
    if not want:
        raise CollectionConfigError(
            f"collection {name!r} keeps its texts (its config says so, for every writer); open it with "
            "store_texts=None"
        )
    row = conn.execute(_SET_KEY_SQL, (json.dumps({TEXTS_KEY: texts_config()}), int(collection_id))).fetchone()
    return row[0] if row is not None else config


def record_file_root(conn, collection_id: int, root: str) -> Any:
    """Record ``root`` (a real directory path) as a folder this collection's text files were added
    from, unless it is recorded already: the only places a report reads a row's file from. Returns
    the new config (None: it was recorded already)."""
    row = conn.execute(_ADD_ROOT_SQL, {"k": FILE_ROOTS_KEY, "root": root, "c": int(collection_id)}).fetchone()
    return None if row is None else row[0]


def kept_text(conn, collection_id: int, key: str) -> str | None:
    """``key``'s kept text (``text_z``, else an older row's ``meta.text``), or None."""
    row = conn.execute(KEPT_TEXT_SQL, (int(collection_id), key)).fetchone()
    if row is None:
        return None
    text = decompress_text(row[0])
    if text is None and isinstance(row[1], dict) and isinstance(row[1].get("text"), str):
        text = row[1]["text"]
    return text
