"""A collection's rows one at a time: the SQL text of the single-row statements, and the functions that
run them on a psycopg connection.

``simdb.index.SimhashIndex`` (these functions), ``simdb.aio.AsyncSimhashIndex`` (the same strings on an
async connection: :mod:`simdb.store.async_rows`) and ``simdb.compat.simhash`` run these same statements,
so a change to the table reaches all of them at once (the search statements are in :mod:`simdb.store.sql`);
the public API validates and fingerprints, these only run them. Named ``%(name)s`` parameters, the
psycopg style; values always travel as bound parameters. Parameters: ``c`` the collection id,
``key``, ``fp`` (signed bigint or NULL: a featureless text), ``meta`` (JSON text or NULL), ``sh``
(the row's verification sketch, ``int4[]`` or NULL: see :mod:`simdb.core.sketch`), ``bk`` (its band keys,
``int4[]`` or NULL: only rows of banded verified collections have them, :mod:`simdb.core.sketch.bands`), ``tz``
(its text compressed, ``bytea`` or NULL: only in a collection that keeps texts, :mod:`simdb.core.kept_texts`),
``v`` in the writes (the version of the collection's configuration the row was computed by: the
write is refused once it is not current, :mod:`simdb.store.collection_guard`).
"""

from __future__ import annotations

from typing import Any

from simdb.store import collection_guard as _guard
from simdb.store.collection_guard import GUARD
from simdb.store.sql import FINGERPRINTS

__all__ = [
    "COUNT_SQL", "DELETE_SQL", "FPS_SQL", "GET_SQL", "GUARDED_UPSERT_SQL", "clear_rows", "count_rows", "delete_row",
    "get_row", "has_key", "update_row", "update_sql", "upsert_row", "upsert_sql",
]


def upsert_sql(condition: str) -> str:
    """The one upsert of a row: insert it if ``condition`` (SQL) holds, or replace the fingerprint, metadata,
    sketch, band keys and kept text of the key's existing row."""
    return (
        f"INSERT INTO {FINGERPRINTS} (collection_id, key, fp, meta, shingles, bands, text_z) "
        "SELECT %(c)s::int4, %(key)s, %(fp)s::int8, %(meta)s::jsonb, %(sh)s::int4[], %(bk)s::int4[], %(tz)s::bytea "
        f"WHERE {condition} "
        "ON CONFLICT (collection_id, key) DO UPDATE "
        "SET fp = EXCLUDED.fp, meta = EXCLUDED.meta, shingles = EXCLUDED.shingles, bands = EXCLUDED.bands, "
        "text_z = EXCLUDED.text_z, created_at = now()"
    )


#: add(): the upsert, refused by the guard once the configuration the row was computed by is not current
#: (add_if_unique's, under its locks, is :data:`simdb.store.unique.LOCKED_UPSERT_SQL`)
GUARDED_UPSERT_SQL = upsert_sql(GUARD)

GET_SQL = f"SELECT key, fp, meta, created_at FROM {FINGERPRINTS} WHERE collection_id = %(c)s::int4 AND key = %(key)s"

DELETE_SQL = f"DELETE FROM {FINGERPRINTS} WHERE collection_id = %(c)s::int4 AND key = %(key)s"

COUNT_SQL = f"SELECT count(*) FROM {FINGERPRINTS} WHERE collection_id = %(c)s::int4"

#: every fingerprint of a collection (featureless rows left out)
FPS_SQL = f"SELECT fp FROM {FINGERPRINTS} WHERE collection_id = %(c)s::int4 AND fp IS NOT NULL"

_HAS_KEY = f"SELECT 1 FROM {FINGERPRINTS} WHERE collection_id = %(c)s::int4 AND key = %(key)s"
_CLEAR = f"DELETE FROM {FINGERPRINTS} WHERE collection_id = %(c)s::int4"


def update_sql(with_meta: bool) -> str:
    """update(): change an existing key's fingerprint, sketch, band keys and kept text (and its metadata
    when ``with_meta``)."""
    sets = "fp = %(fp)s::int8, shingles = %(sh)s::int4[], bands = %(bk)s::int4[], text_z = %(tz)s::bytea, created_at = now()"
    if with_meta:
        sets += ", meta = %(meta)s::jsonb"
    return f"UPDATE {FINGERPRINTS} SET {sets} WHERE collection_id = %(c)s::int4 AND key = %(key)s AND {GUARD}"


def upsert_row(
    conn, collection_id: int, key: str, fp: int | None, meta_json: str | None, sketch, bands=None,
    text_z: bytes | None = None, *, version: str,
) -> None:
    """Insert or replace ``key`` (``fp`` signed bigint or None; ``sketch``: a verified row's shingles;
    ``bands``: its band keys, a list of int4 (or their int4[] text), in a banded collection; ``text_z``: its
    kept text, compressed), computed under the configuration ``version`` (:class:`~simdb.errors.CollectionChangedError` if it
    is no longer the collection's: nothing is written)."""
    with _guard.refused(collection_id):
        conn.execute(
            GUARDED_UPSERT_SQL,
            {"c": collection_id, "key": key, "fp": fp, "meta": meta_json, "sh": sketch, "bk": bands, "tz": text_z,
             "v": version},
            prepare=True,
        )


def update_row(
    conn, collection_id: int, key: str, fp: int | None, sketch, meta_json: Any, with_meta: bool, bands=None,
    text_z: bytes | None = None, *, version: str,
) -> bool:
    """Change an existing row (its meta too if ``with_meta``); False if ``key`` is absent. ``version``
    as for :func:`upsert_row`."""
    params = {"c": collection_id, "key": key, "fp": fp, "sh": sketch, "bk": bands, "tz": text_z, "v": version}
    if with_meta:
        params["meta"] = meta_json
    with _guard.refused(collection_id):
        return conn.execute(update_sql(with_meta), params).rowcount > 0


def get_row(conn, collection_id: int, key: str) -> tuple | None:
    """(key, fp signed, meta, created_at) of ``key``, or None."""
    return conn.execute(GET_SQL, {"c": collection_id, "key": key}, prepare=True).fetchone()


def delete_row(conn, collection_id: int, key: str) -> bool:
    """Delete ``key``; True if it existed."""
    return conn.execute(DELETE_SQL, {"c": collection_id, "key": key}).rowcount > 0


def has_key(conn, collection_id: int, key: str) -> bool:
    return conn.execute(_HAS_KEY, {"c": collection_id, "key": key}).fetchone() is not None


def count_rows(conn, collection_id: int) -> int:
    return conn.execute(COUNT_SQL, {"c": collection_id}).fetchone()[0]


def clear_rows(conn, collection_id: int) -> int:
    """Delete every row of the collection; the count."""
    return conn.execute(_CLEAR, {"c": collection_id}).rowcount
