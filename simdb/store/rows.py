"""A collection's rows: the single-row statements and the functions that run them on a psycopg connection,
rows by key in batches, and the staged writes and ranged reads of writers that hold only a connection.

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

import re
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from simdb.core.bits import to_unsigned
from simdb.errors import InvalidArgumentError
from simdb.store import collection_guard as _guard
from simdb.store.collection_guard import GUARD
from simdb.store.connect import driver_connection
from simdb.store.sql import FINGERPRINTS

__all__ = [
    "CLUSTERS_TABLE", "COUNT_SQL", "DELETE_MANY_SQL", "DELETE_SQL", "FPS_SQL", "GET_SQL", "GUARDED_UPSERT_SQL", "KEYS_BY_PATH_SQL",
    "KEY_QUERY_SQL", "LOOKUP_BATCH", "PAIRS_TABLE", "ROWS_FOR_KEYS_SQL", "STAGE", "StagedWrite", "clear_rows",
    "clusters_write", "count_rows", "delete_row", "fingerprints_write", "get_row", "has_key", "id_bounds",
    "key_query_row", "keys_by_path", "pairs_write", "range_reader_sql", "rows_for_keys", "update_row", "update_sql",
    "upsert_row", "upsert_sql", "write_staged",
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
#: many keys in one statement: the primary key's index, probed once a key, one commit
DELETE_MANY_SQL = f"DELETE FROM {FINGERPRINTS} WHERE collection_id = %(c)s::int4 AND key = ANY(%(keys)s::text[])"

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


def delete_rows(conn, collection_id: int, keys: list[str]) -> int:
    """Delete ``keys`` in one statement; how many of them existed."""
    return conn.execute(DELETE_MANY_SQL, {"c": collection_id, "keys": keys}).rowcount


def has_key(conn, collection_id: int, key: str) -> bool:
    return conn.execute(_HAS_KEY, {"c": collection_id, "key": key}).fetchone() is not None


def count_rows(conn, collection_id: int) -> int:
    return conn.execute(COUNT_SQL, {"c": collection_id}).fetchone()[0]


def clear_rows(conn, collection_id: int) -> int:
    """Delete every row of the collection; the count."""
    return conn.execute(_CLEAR, {"c": collection_id}).rowcount


# ---------------------------------------------------------------------------
# rows by key, in batches: what reports (and other readers of many known keys) need
# ---------------------------------------------------------------------------
# ``SimhashIndex.get`` answers one key per round trip; a report of thousands of clusters would pay thousands
# of them. One ``key = ANY(...)`` statement per batch of keys is one round trip per ``LOOKUP_BATCH`` keys, on
# the btree of (collection_id, key).

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


# ---------------------------------------------------------------------------
# staged writes and ranged reads, for writers that hold only a psycopg connection (Spark's executors)
# ---------------------------------------------------------------------------
# Why in the store: a Spark task opens its own connection (no SQLAlchemy engine, no ``SimhashIndex``) and
# writes a partition in one transaction: ``COPY`` into a temporary stage, then one ``INSERT ... ON CONFLICT``
# into simdb's table (a partition lands whole or not at all, and re-running a job adds no duplicates);
# :mod:`simdb.spark.postgres` builds the DataFrames and calls these functions. The collection id is an int
# from the store's own catalog row, spliced as a literal (the statement is built once per job and run by
# every executor); every value travels through COPY or as a bound parameter.

# Created by simdb's migration simdb_0004_spark_results (models: simdb.store.models.SparkPair/SparkCluster).
PAIRS_TABLE = "simdb_spark_pairs"
CLUSTERS_TABLE = "simdb_spark_clusters"
#: the temporary stage of one partition's transaction (dropped on commit)
STAGE = "_simdb_stage"


class StagedWrite(NamedTuple):
    """One staged write: the stage's DDL, the COPY columns (in row order), the statements that merge
    the stage into the table."""

    stage_ddl: str
    columns: list[str]
    merge: list[str]


def fingerprints_write(collection_id: int, columns: Sequence[str], version: str | None = None) -> StagedWrite:
    """Upsert (key, and ``columns`` of fp, shingles, meta, text_z) into ``simdb_fingerprints``: the last
    duplicate key of a partition wins, a row that would not change is left alone.

    ``version``: the collection's rule version the rows were computed by
    (:mod:`simdb.store.collection_guard`); the merge then first checks it, locking the collection's row
    before any row it replaces (the order ``simdb convert`` keeps), and refuses (SQLSTATE ``SDB01``) a
    partition computed by a rule the collection no longer has. A digest from the database (32 hex
    digits), spliced as a literal like the id."""
    names = ["key", *columns]
    stage = (
        f"CREATE TEMP TABLE {STAGE} (ord bigserial, key text NOT NULL, fp bigint, "
        "shingles int4[], meta jsonb, text_z bytea) ON COMMIT DROP"
    )
    sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns)
    target = ", ".join(columns)
    merge = (
        f"INSERT INTO {FINGERPRINTS} (collection_id, key, {target}) "
        f"SELECT DISTINCT ON (key) {int(collection_id)}, key, {target} FROM {STAGE} ORDER BY key, ord DESC "
        f"ON CONFLICT (collection_id, key) DO UPDATE SET {sets} "
        f"WHERE ({', '.join(f'{FINGERPRINTS}.' + c for c in columns)}) "
        f"IS DISTINCT FROM ({', '.join('EXCLUDED.' + c for c in columns)})"
    )
    if version is None:
        return StagedWrite(stage, names, [merge])
    if not isinstance(version, str) or not re.fullmatch(r"[0-9a-f]{32}", version):
        raise InvalidArgumentError(f"version must be a rule version (32 hex digits), got {version!r}")
    return StagedWrite(stage, names, [f"SELECT simdb_collection_unchanged({int(collection_id)}, '{version}')", merge])


def pairs_write(collection_id: int) -> StagedWrite:
    """Upsert pairs (key_a, key_b, distance, jaccard) into ``simdb_spark_pairs``."""
    names = ["key_a", "key_b", "distance", "jaccard"]
    stage = (
        f"CREATE TEMP TABLE {STAGE} (ord bigserial, key_a text, key_b text, distance int, jaccard float8) "
        "ON COMMIT DROP"
    )
    merge = (
        f"INSERT INTO {PAIRS_TABLE} (collection_id, key_a, key_b, distance, jaccard) "
        f"SELECT DISTINCT ON (key_a, key_b) {int(collection_id)}, key_a, key_b, distance, jaccard FROM {STAGE} "
        "ORDER BY key_a, key_b, ord DESC "
        "ON CONFLICT (collection_id, key_a, key_b) DO UPDATE SET distance = EXCLUDED.distance, "
        "jaccard = EXCLUDED.jaccard"
    )
    return StagedWrite(stage, names, [merge])


def clusters_write(collection_id: int) -> StagedWrite:
    """Upsert (key, cluster_key) into ``simdb_spark_clusters``."""
    names = ["key", "cluster_key"]
    stage = f"CREATE TEMP TABLE {STAGE} (ord bigserial, key text, cluster_key text) ON COMMIT DROP"
    merge = (
        f"INSERT INTO {CLUSTERS_TABLE} (collection_id, key, cluster_key) "
        f"SELECT DISTINCT ON (key) {int(collection_id)}, key, cluster_key FROM {STAGE} ORDER BY key, ord DESC "
        "ON CONFLICT (collection_id, key) DO UPDATE SET cluster_key = EXCLUDED.cluster_key"
    )
    return StagedWrite(stage, names, [merge])


def write_staged(conn: Any, write: StagedWrite, rows: Iterable[Sequence[Any]]) -> int:
    """One partition: ``rows`` COPYed into the stage and merged, in one transaction on ``conn``
    (a psycopg connection); the number of rows sent."""
    n = 0
    with conn.transaction():
        conn.execute(write.stage_ddl)
        with conn.cursor() as cur:
            with cur.copy(f"COPY {STAGE} ({', '.join(write.columns)}) FROM STDIN") as copy:
                for values in rows:
                    copy.write_row(values)
                    n += 1
            for statement in write.merge:
                cur.execute(statement)
    return n


def id_bounds(conn: Any, collection_id: int) -> tuple[int | None, int | None]:
    """(smallest, largest) row id of the collection; (None, None) when it is empty."""
    row = conn.execute(
        f"SELECT min(id), max(id) FROM {FINGERPRINTS} WHERE collection_id = %(c)s", {"c": collection_id}
    ).fetchone()
    return (row[0], row[1]) if row is not None else (None, None)  # an aggregate always returns one row


#: the columns a range read may select: name -> its SQL
_READ_COLUMNS = {"id": "id", "key": "key", "fp": "fp", "shingles": "shingles", "meta": "meta::text"}


def range_reader_sql(columns: Sequence[str]) -> str:
    """The statement that reads ``columns`` (of id, key, fp, shingles, meta as JSON text) of one id
    range of a collection, in id order; parameters ``c``, ``lo`` (inclusive), ``hi`` (exclusive)."""
    cols = ", ".join(_READ_COLUMNS[c] for c in columns)
    return (
        f"SELECT {cols} FROM {FINGERPRINTS} "
        "WHERE collection_id = %(c)s AND id >= %(lo)s AND id < %(hi)s ORDER BY id"
    )
