"""SQL text of the store's single-row statements, shared by every caller that talks to the store.

``simdb.index.SimhashIndex`` (sync psycopg), ``simdb.aio.AsyncSimhashIndex`` (async psycopg) and
``simdb.compat.simhash`` run these same strings, so a change to the table reaches all of them at
once (the search statements are in :mod:`simdb.store.sql`). Named ``%(name)s`` parameters, the
psycopg style; values always travel as bound parameters. Parameters: ``c`` the collection id,
``key``, ``fp`` (signed bigint or NULL: a featureless text), ``meta`` (JSON text or NULL), ``sh``
(the row's verification sketch, ``int4[]`` or NULL: see :mod:`simdb.core.sketch`), ``bk`` (its band keys,
``int4[]`` or NULL: only rows of banded verified collections have them, :mod:`simdb.core.sketch.bands`), ``tz``
(its text compressed, ``bytea`` or NULL: only in a collection that keeps texts, :mod:`simdb.core.kept_texts`),
``v`` in the writes (the version of the collection's configuration the row was computed by: the
write is refused once it is not current, :mod:`simdb.store.collection_guard`).
"""

from __future__ import annotations

from simdb.store.collection_guard import GUARD
from simdb.store.sql import COLLECTIONS, FINGERPRINTS

__all__ = ["COLLECTION_SQL", "COUNT_SQL", "DELETE_SQL", "FPS_SQL", "GET_SQL", "GUARDED_UPSERT_SQL", "update_sql"]

#: add(): insert, or replace the fingerprint and metadata of an existing key, refused by the guard once the
#: configuration the row was computed by is not current (add_if_unique's upsert, under its locks, is
#: :data:`simdb.store.unique.LOCKED_UPSERT_SQL`)
GUARDED_UPSERT_SQL = (
    f"INSERT INTO {FINGERPRINTS} (collection_id, key, fp, meta, shingles, bands, text_z) "
    "SELECT %(c)s::int4, %(key)s, %(fp)s::int8, %(meta)s::jsonb, %(sh)s::int4[], %(bk)s::int4[], %(tz)s::bytea "
    f"WHERE {GUARD} "
    "ON CONFLICT (collection_id, key) DO UPDATE "
    "SET fp = EXCLUDED.fp, meta = EXCLUDED.meta, shingles = EXCLUDED.shingles, bands = EXCLUDED.bands, "
    "text_z = EXCLUDED.text_z, created_at = now()"
)

GET_SQL = f"SELECT key, fp, meta, created_at FROM {FINGERPRINTS} WHERE collection_id = %(c)s::int4 AND key = %(key)s"

DELETE_SQL = f"DELETE FROM {FINGERPRINTS} WHERE collection_id = %(c)s::int4 AND key = %(key)s"

COUNT_SQL = f"SELECT count(*) FROM {FINGERPRINTS} WHERE collection_id = %(c)s::int4"

#: every fingerprint of a collection (featureless rows left out)
FPS_SQL = f"SELECT fp FROM {FINGERPRINTS} WHERE collection_id = %(c)s::int4 AND fp IS NOT NULL"

#: a collection's id and config by name (``name``)
COLLECTION_SQL = f"SELECT id, config FROM {COLLECTIONS} WHERE name = %(name)s"


def update_sql(with_meta: bool) -> str:
    """update(): change an existing key's fingerprint, sketch, band keys and kept text (and its metadata
    when ``with_meta``)."""
    sets = "fp = %(fp)s::int8, shingles = %(sh)s::int4[], bands = %(bk)s::int4[], text_z = %(tz)s::bytea, created_at = now()"
    if with_meta:
        sets += ", meta = %(meta)s::jsonb"
    return f"UPDATE {FINGERPRINTS} SET {sets} WHERE collection_id = %(c)s::int4 AND key = %(key)s AND {GUARD}"
