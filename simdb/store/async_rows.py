"""The store's statements on an async psycopg connection, for the async front end's reads (``simdb.aio``).

Why a module of its own: the store keeps every SQL string, and each statement is run by one
function, with the same SQL text (:mod:`simdb.store.rows`, :mod:`simdb.store.candidates`) and the same
``%(name)s`` parameters as the sync functions of :mod:`simdb.store.rows`; the async front end passes
a connection and values and gets values back. (Its writes run the sync index's code in a worker thread.)
"""

from __future__ import annotations

from simdb.store import rows as _rows
from simdb.store.candidates import Statement

__all__ = ["count_rows", "delete_row", "get_row", "open_cursor"]


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


async def open_cursor(conn, statement: Statement, binary: bool = False):
    """The cursor of one of the store's statements, sans I/O (:func:`simdb.store.candidates.near_statement`,
    ``near_many_statement``: the sync index runs the same ones with :func:`simdb.store.candidates.fetch_rows`),
    prepared, for the caller to fetch from in chunks; ``binary``: the verified statements' stored
    sketches come as their ``array_send`` bytes."""
    sql, params = statement
    return await conn.execute(sql, params, prepare=True, binary=binary)
