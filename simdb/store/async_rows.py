"""The store's statements on an async psycopg connection, for the async front end (``simdb.aio``).

Why a module of its own: ``simdb.aio`` used to run the store's SQL strings itself, so a statement
had one home but two callers that each knew its parameters. Here each statement is run by one
function, with the same SQL text (:mod:`simdb.store.rows`, :mod:`simdb.store.sql`) and the same
``%(name)s`` parameters as the sync functions of :mod:`simdb.store.rows` and
:mod:`simdb.store.candidates`; the async front end passes a connection and values and gets values back.
"""

from __future__ import annotations

from typing import Any

from simdb.core.bits import to_signed
from simdb.results import verified_matches
from simdb.store import collection_guard as _guard
from simdb.store import rows as _rows
from simdb.store.candidates import Statement

__all__ = [
    "add_if_unique_verified", "count_rows", "delete_row", "get_row", "open_cursor", "run_statements", "update_row",
    "upsert_row",
]


def _row_params(
    collection_id: int, key: str, fp: int | None, sketch: Any, bands: Any = None, text_z: bytes | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    return {"c": collection_id, "key": key, "fp": fp, "sh": sketch, "bk": bands, "tz": text_z, "v": version}


async def upsert_row(conn, collection_id: int, key: str, fp: int | None, meta_json: str | None, sketch,
                     bands=None, text_z: bytes | None = None, *, version: str) -> None:
    """Insert or replace ``key`` (:func:`simdb.store.rows.upsert_row`, async; ``text_z``: the kept text;
    ``version``: the configuration it was computed by, refused once not current)."""
    params = _row_params(collection_id, key, fp, sketch, bands, text_z, version)
    params["meta"] = meta_json
    with _guard.refused(collection_id):
        await conn.execute(_rows.GUARDED_UPSERT_SQL, params, prepare=True)


async def update_row(conn, collection_id: int, key: str, fp: int | None, sketch, meta_json: Any, with_meta: bool,
                     bands=None, text_z: bytes | None = None, *, version: str) -> bool:
    """Change an existing row (its meta too if ``with_meta``); False if ``key`` is absent."""
    params = _row_params(collection_id, key, fp, sketch, bands, text_z, version)
    if with_meta:
        params["meta"] = meta_json
    with _guard.refused(collection_id):
        cur = await conn.execute(_rows.update_sql(with_meta), params)
    return cur.rowcount > 0


async def get_row(conn, collection_id: int, key: str) -> tuple | None:
    """(key, fp signed, meta, created_at) of ``key``, or None."""
    cur = await conn.execute(_rows.GET_SQL, {"c": collection_id, "key": key}, prepare=True)
    return await cur.fetchone()


async def delete_row(conn, collection_id: int, key: str) -> bool:
    """Delete ``key``; True if it existed."""
    cur = await conn.execute(_rows.DELETE_SQL, {"c": collection_id, "key": key})
    return cur.rowcount > 0


async def count_rows(conn, collection_id: int) -> int:
    cur = await conn.execute(_rows.COUNT_SQL, {"c": collection_id})
    row = await cur.fetchone()
    return int(row[0])


async def run_statements(conn, statements: list[tuple[str, dict]]) -> list:
    """Run the store's (SQL, parameters) pairs in order (:func:`simdb.store.unique.add_if_unique_statements`);
    the last one's rows. The caller holds the transaction."""
    cur = None
    for sql, params in statements:
        cur = await conn.execute(sql, params)
    return await cur.fetchall() if cur is not None and cur.description else []


async def add_if_unique_verified(
    conn, locks: list[tuple[str, dict]], candidates: Statement, collection_id: int, key: str, fp: int,
    meta_json: str | None, sketch, verify: tuple[Any, float, int], text_z: bytes | None = None, *, version: str,
) -> list:
    """The verified add_if_unique inside the caller's transaction: the ``locks`` (the key's, then the
    sorted advisory locks: :func:`simdb.store.unique.add_if_unique_statements` less its last), then in a
    new snapshot the ``candidates`` (the rule's statement: the rows within the radius K with their
    sketches) through the verification stage, and the upsert (with the sketch) only if nothing passed.
    ``fp`` unsigned; returns the Matches that stopped the insert."""
    verifier, t, hk = verify
    for lock in locks:
        await conn.execute(*lock)
    cur = await conn.execute(*candidates)
    found = verified_matches(await cur.fetchall(), sketch, verifier, t, hk, exclude=key)  # own row: replaced
    if not found:
        params = _row_params(collection_id, key, to_signed(fp), sketch, None, text_z, version)
        params["meta"] = meta_json
        with _guard.refused(collection_id):
            await conn.execute(_rows.GUARDED_UPSERT_SQL, params)
    return found


async def open_cursor(conn, statement: Statement, binary: bool = False):
    """The cursor of one of the store's statements, sans I/O (:func:`simdb.store.candidates.near_statement`,
    ``near_many_statement``: the sync index runs the same ones with :func:`simdb.store.candidates.fetch_rows`),
    prepared, for the caller to fetch from in chunks; ``binary``: the verified statements' stored
    sketches come as their ``array_send`` bytes."""
    sql, params = statement
    return await conn.execute(sql, params, prepare=True, binary=binary)
