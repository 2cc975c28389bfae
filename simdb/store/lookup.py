"""Rows of a collection by key, in batches: what reports (and other readers of many known keys) need.

``SimhashIndex.get`` answers one key per round trip; a report of thousands of clusters
would pay thousands of them. One ``key = ANY(...)`` statement per batch of keys is one
round trip per ``LOOKUP_BATCH`` keys, on the btree of (collection_id, key).
"""

from __future__ import annotations

from typing import Any

from simdb.core.bits import to_unsigned
from simdb.store.connect import driver_connection
from simdb.store.sql import FINGERPRINTS

__all__ = ["KEY_QUERY_SQL", "KEYS_BY_PATH_SQL", "LOOKUP_BATCH", "ROWS_FOR_KEYS_SQL", "key_query_row", "keys_by_path",
           "rows_for_keys"]

#: keys per statement (a bound array parameter; small enough to keep each statement quick)
LOOKUP_BATCH = 5000

ROWS_FOR_KEYS_SQL = (
    f"SELECT key, fp, meta, shingles, bands, text_z FROM {FINGERPRINTS} "
    "WHERE collection_id = %(cid)s AND key = ANY(%(keys)s)"
)

#: the keys under which files (``meta.path``, a text file's absolute path, as ``simdb add`` stores it) are stored
KEYS_BY_PATH_SQL = (
    f"SELECT meta->>'path', key FROM {FINGERPRINTS} "
    "WHERE collection_id = %(cid)s AND meta->>'path' = ANY(%(paths)s)"
)

#: what a query by stored key needs of its row: (fp signed, array_send(sketch), band keys as int4[] text);
#: the sketch in the form the candidate statements return it, so one verification stage reads both
KEY_QUERY_SQL = (
    f"SELECT fp, array_send(shingles), bands::text FROM {FINGERPRINTS} "
    "WHERE collection_id = %(c)s::int4 AND key = %(key)s"
)


def key_query_row(conn, collection_id: int, key: str) -> tuple | None:
    """(fp unsigned | None, sketch bytes | None, band keys text | None) of ``key`` (psycopg
    connection), or None when the collection has no such key. Unsigned, as every fingerprint the
    store hands up: the signed form is the column's, and stays in SQL."""
    row = conn.execute(KEY_QUERY_SQL, {"c": int(collection_id), "key": key}, prepare=True).fetchone()
    if row is None or row[0] is None:
        return row
    return (to_unsigned(row[0]), *row[1:])


def rows_for_keys(conn: Any, collection_id: int, keys: list[str]) -> dict[str, dict[str, Any]]:
    """key -> {"fp": unsigned int | None, "meta": ..., "shingles": list | None, "bands": list | None,
    "text_z": the kept text, compressed, bytes | None} for the stored keys among ``keys`` (missing
    keys are absent from the answer); ``conn``: a psycopg connection (``SimhashIndex.connection()``)."""
    out: dict[str, dict[str, Any]] = {}
    pg = driver_connection(conn)
    for i in range(0, len(keys), LOOKUP_BATCH):
        params = {"cid": int(collection_id), "keys": keys[i : i + LOOKUP_BATCH]}
        for key, fp, meta, shingles, bands, text_z in pg.execute(ROWS_FOR_KEYS_SQL, params).fetchall():
            out[key] = {"fp": None if fp is None else to_unsigned(fp), "meta": meta, "shingles": shingles,
                        "bands": bands, "text_z": None if text_z is None else bytes(text_z)}
    return out


def keys_by_path(conn: Any, collection_id: int, paths: list[str]) -> dict[str, list[str]]:
    """The keys each of ``paths`` (absolute file paths) is stored under in the collection, by ``meta.path``
    (paths stored under no key are left out). One statement per ``LOOKUP_BATCH`` paths; each reads the
    collection's rows (there is no index on ``meta.path``): ``simdb add`` asks once per run."""
    conn = driver_connection(conn)
    found: dict[str, list[str]] = {}
    for i in range(0, len(paths), LOOKUP_BATCH):
        for path, key in conn.execute(KEYS_BY_PATH_SQL, {"cid": collection_id, "paths": paths[i:i + LOOKUP_BATCH]}):
            found.setdefault(path, []).append(key)
    return found
