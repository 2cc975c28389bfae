"""Staged writes and ranged reads for writers that hold only a psycopg connection (Spark's executors).

Why in the store: a Spark task opens its own connection (no SQLAlchemy engine, no ``SimhashIndex``)
and writes a partition in one transaction: ``COPY`` into a temporary stage, then one
``INSERT ... ON CONFLICT`` into simdb's table (a partition lands whole or not at all, and re-running
a job adds no duplicates). Those statements are on simdb's tables, so they live here with the others;
:mod:`simdb.spark.postgres` builds the DataFrames and calls these functions. The collection id is an
int from the store's own catalog row, spliced as a literal (the statement is built once per job and
run by every executor); every value travels through COPY or as a bound parameter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from simdb.errors import InvalidArgumentError
from simdb.store.sql import FINGERPRINTS

__all__ = [
    "CLUSTERS_TABLE", "PAIRS_TABLE", "STAGE", "StagedWrite", "clusters_write", "fingerprints_write", "id_bounds",
    "pairs_write", "range_reader_sql", "write_staged",
]

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
