"""Single-row writes and reads of a collection on a psycopg connection (SQL text: :mod:`simdb.store.rows`).

The public API validates and fingerprints; these functions only run the statements, so that each
statement has one home and every front end (``SimhashIndex``, ``simdb.aio``) says it the same way.
"""

from __future__ import annotations

from typing import Any

from simdb.store import collection_guard as _guard
from simdb.store import rows as _rows
from simdb.store.sql import FINGERPRINTS

__all__ = ["clear_rows", "count_rows", "delete_row", "get_row", "has_key", "update_row", "upsert_row"]

_HAS_KEY = f"SELECT 1 FROM {FINGERPRINTS} WHERE collection_id = %(c)s::int4 AND key = %(key)s"
_CLEAR = f"DELETE FROM {FINGERPRINTS} WHERE collection_id = %(c)s::int4"


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
            _rows.GUARDED_UPSERT_SQL,
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
        return conn.execute(_rows.update_sql(with_meta), params).rowcount > 0


def get_row(conn, collection_id: int, key: str) -> tuple | None:
    """(key, fp signed, meta, created_at) of ``key``, or None."""
    return conn.execute(_rows.GET_SQL, {"c": collection_id, "key": key}, prepare=True).fetchone()


def delete_row(conn, collection_id: int, key: str) -> bool:
    """Delete ``key``; True if it existed."""
    return conn.execute(_rows.DELETE_SQL, {"c": collection_id, "key": key}).rowcount > 0


def has_key(conn, collection_id: int, key: str) -> bool:
    return conn.execute(_HAS_KEY, {"c": collection_id, "key": key}).fetchone() is not None


def count_rows(conn, collection_id: int) -> int:
    return conn.execute(_rows.COUNT_SQL, {"c": collection_id}).fetchone()[0]


def clear_rows(conn, collection_id: int) -> int:
    """Delete every row of the collection; the count."""
    return conn.execute(_CLEAR, {"c": collection_id}).rowcount
