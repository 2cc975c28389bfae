"""Spark <-> PostgreSQL: bulk write-back to a simdb collection and reading one back.

No SQL here: each Spark task opens its own psycopg connection (no SQLAlchemy engine) and
calls the store's staged writes and ranged reads (:mod:`simdb.store.rows`); the
collection itself is found by the store (:func:`simdb.store.collections.find_collection`) or
opened or created through :class:`simdb.SimhashIndex`, so its configuration is checked exactly
as the store does. Each partition is one transaction: written whole or not at all, and re-running
a job adds no duplicates.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from simdb.core.kept_texts import compress_text, keeps_texts
from simdb.database import resolve_url
from simdb.embedded.socket_only import pin_to_socket
from simdb.errors import CollectionChangedError, InvalidArgumentError, KeyNotFoundError
from simdb.index import SimhashIndex
from simdb.spark.session import INT_TYPES, check_column, pyspark_functions
from simdb.store import collection_guard as _guard
from simdb.store import rows as _rows
from simdb.store.collections import find_collection
from simdb.store.urls import CLIENT_ENCODING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession


def libpq_url(database) -> str:
    """A libpq URL for psycopg from a SQLAlchemy URL/Engine (or None: the configured default)."""
    if isinstance(database, Engine):
        url = database.url
    else:
        url = make_url(resolve_url(database)[0])
    return pin_to_socket(url.set(drivername="postgresql").render_as_string(hide_password=False))


def _collection(conninfo: str, collection: str, fingerprinter=None, create: bool = True) -> tuple[int, dict, str]:
    """(id, config, its rule version) of a collection; created by the store (with ``fingerprinter``'s
    configuration) if missing."""
    import psycopg

    with psycopg.connect(conninfo, client_encoding=CLIENT_ENCODING) as conn:
        row = find_collection(conn, collection)
        now = None if row is None else _guard.current(conn, row[0])
    if row is not None and now is not None and fingerprinter is None:
        return row[0], now[0], now[1]
    if row is None and not create:
        raise KeyNotFoundError(f"no simdb collection named {collection!r}")  # a LookupError
    # opens (and checks the configuration of) or creates the collection, as the store does; one created
    # here is Hamming-only (verify=False): Spark writes fingerprints, not the sketches verification needs
    verify = False if row is None else None
    with SimhashIndex(conninfo, collection=collection, fingerprinter=fingerprinter, verify=verify) as index:
        return index.collection_id, index.config, index.config_version


def _staged_writer(conninfo: str, staged: _rows.StagedWrite, convert=None, keys: tuple[str, ...] = ()):
    """mapInPandas function: one transaction per partition (the store's :func:`~simdb.store.rows.write_staged`).

    ``keys`` names (by the caller's argument) the leading columns that are keys: a NULL there is an
    :class:`InvalidArgumentError` naming it, raised in the executor and re-raised typed on the driver
    by :func:`_run_writer` (the partition's transaction rolls back)."""
    import pandas as pd

    def write(batches):
        import psycopg

        def rows():
            for pdf in batches:
                cols = [pdf[c].tolist() for c in staged.columns]
                for values in zip(*cols):
                    values = values if convert is None else convert(values)
                    for label, value in zip(keys, values):
                        if value is None:
                            raise InvalidArgumentError(f"{label}: a row has a NULL key; every row needs one")
                    yield values

        with psycopg.connect(conninfo, client_encoding=CLIENT_ENCODING) as conn:
            try:
                n = _rows.write_staged(conn, staged, rows())
            except psycopg.Error as exc:
                if not _guard.is_refusal(exc):
                    raise
                raise CollectionChangedError(  # one line: re-raised typed on the driver (_run_writer)
                    "the collection's rule changed (simdb convert, or texts kept from now on) after this job read "
                    "it: this partition was rolled back; a partition committed before the change was converted "
                    "with the collection; compute the fingerprints by the new rule (fingerprinter_for) and run "
                    "the job again (it upserts: safe to repeat)") from None
        yield pd.DataFrame({"rows": [n]})

    return write


def _run_writer(df: DataFrame, writer, partitions: int | None) -> int:
    F = pyspark_functions()
    if partitions is not None:
        df = df.repartition(partitions)
    out = df.mapInPandas(writer, "rows long")
    try:
        row = out.agg(F.sum("rows")).first()
    except Exception as exc:  # Spark wraps an executor's exception in its own, with the traceback's text
        typed = _EXECUTOR_ERROR.search(str(exc))
        if typed:
            raise _TYPED[typed.group(1)](typed.group(2)) from exc
        raise
    return int((row[0] if row is not None else 0) or 0)


#: the last line of an executor's traceback for simdb's own refusals (_staged_writer)
_EXECUTOR_ERROR = re.compile(r"simdb\.errors\.(InvalidArgumentError|CollectionChangedError): ([^\n]+)")
_TYPED: dict[str, type[Exception]] = {"InvalidArgumentError": InvalidArgumentError,
                                      "CollectionChangedError": CollectionChangedError}


def _none(v):
    """None for pandas' missing values (None, NaN, NA, NaT); the value otherwise."""
    if v is None:
        return None
    if isinstance(v, (list, tuple, np.ndarray)):
        return v
    try:
        import pandas as pd

        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return v


def write_fingerprints(
    df: DataFrame,
    database,
    collection: str,
    *,
    key_col: str = "key",
    fp_col: str = "fp",
    shingles_col: str | None = None,
    meta_col: str | None = None,
    fingerprinter=None,
    partitions: int | None = None,
    text_col: str | None = None,
) -> int:
    """Upsert rows (key, fp, optionally shingles, meta and text) into a simdb collection; returns rows sent.

    Its ``fp`` should come from the collection's own Fingerprinter (``fingerprinter_for``).

    Each partition is one transaction: ``COPY`` into a temporary staging table, then
    ``INSERT ... ON CONFLICT (collection_id, key) DO UPDATE``, so a partition lands
    whole or not at all and re-running the job leaves one row per key. Keys should be
    unique in ``df`` (within a partition the last duplicate wins). The collection is
    created (with ``fingerprinter``'s configuration) if it does not exist. ``meta_col``
    holds JSON text or a dict/struct converted with ``json.dumps``.

    A collection that keeps texts (:mod:`simdb.core.kept_texts`) keeps them from Spark too: ``text_col``
    names the texts, compressed by the executors into ``text_z``; without it each written row's kept
    text is cleared (NULL: no stale text beside a new fingerprint). ``text_col`` for a collection that
    does not keep texts is an :class:`~simdb.errors.InvalidArgumentError` (nothing would keep them),
    and so is a row whose key is NULL (its partition rolls back).
    """
    check_column(df, key_col, "key_col")
    check_column(df, fp_col, "fp_col", INT_TYPES)
    conninfo = libpq_url(database)
    cid, config, version = _collection(conninfo, collection, fingerprinter)
    if shingles_col is not None and isinstance(config, dict) and "verify" in config:
        raise InvalidArgumentError(
            f"shingles_col: collection {collection!r} is a verified collection, whose rows keep "
            "simdb.core.sketch sketches, not simdb.core.sketch.shingles sets; write fingerprints only (answered by Hamming distance)"
        )
    keep = keeps_texts(config)
    if text_col is not None and not keep:
        raise InvalidArgumentError(
            f"text_col: collection {collection!r} does not keep texts; create it with "
            "SimhashIndex(..., store_texts=True) (or simdb add --store-text) to keep them"
        )
    F = pyspark_functions()
    cols = [F.col(key_col).cast("string").alias("key"), F.col(fp_col).cast("long").alias("fp")]
    names = ["key", "fp"]
    if shingles_col:
        cols.append(F.col(shingles_col).cast("array<int>").alias("shingles"))
        names.append("shingles")
    if meta_col:
        mt = df.schema[meta_col].dataType.simpleString()
        cols.append((F.col(meta_col) if mt == "string" else F.to_json(F.col(meta_col))).alias("meta"))
        names.append("meta")
    if keep:
        cols.append((F.col(text_col).cast("string") if text_col else F.lit(None).cast("string")).alias("text_z"))
        names.append("text_z")
    sel = df.select(*cols)

    def convert(values):
        out = [_none(v) for v in values]
        if out[1] is not None:
            out[1] = int(out[1])
        if shingles_col and out[2] is not None:
            out[2] = [int(x) for x in out[2]] or None
        if keep and out[-1] is not None:
            out[-1] = compress_text(str(out[-1]))
        return tuple(out)

    writer = _staged_writer(conninfo, _rows.fingerprints_write(cid, names[1:], version), convert, keys=("key_col",))
    return _run_writer(sel, writer, partitions)


def write_pairs(pairs_df: DataFrame, database, collection: str, *, id_a: str = "id_a", id_b: str = "id_b",
                partitions: int | None = None) -> int:
    """Upsert pairs (keys of the collection; ``distance`` and/or ``jaccard`` if present) into
    ``simdb_spark_pairs``; one transaction per partition, re-runnable without duplicates."""
    F = pyspark_functions()
    conninfo = libpq_url(database)
    cid = _collection(conninfo, collection)[0]
    a, b = F.col(id_a).cast("string"), F.col(id_b).cast("string")
    fields = set(pairs_df.columns)
    dist = F.col("distance").cast("int") if "distance" in fields else F.lit(None).cast("int")
    jac = F.col("jaccard").cast("double") if "jaccard" in fields else F.lit(None).cast("double")
    # Spark's least/greatest skip NULLs: a pair with a NULL id would become a self-pair and vanish;
    # it goes to the writer as NULLs instead, which names the column
    null = a.isNull() | b.isNull()
    key_a = F.when(null, F.lit(None).cast("string")).otherwise(F.least(a, b))
    key_b = F.when(null, F.lit(None).cast("string")).otherwise(F.greatest(a, b))
    sel = pairs_df.select(
        key_a.alias("key_a"), key_b.alias("key_b"), dist.alias("distance"), jac.alias("jaccard")
    ).where(F.col("key_a").isNull() | (F.col("key_a") != F.col("key_b")))
    writer = _staged_writer(conninfo, _rows.pairs_write(cid), lambda v: tuple(map(_none, v)), keys=(f"{id_a}/{id_b}",))
    return _run_writer(sel, writer, partitions)


def write_clusters(clusters_df: DataFrame, database, collection: str, *, partitions: int | None = None) -> int:
    """Upsert (id -> cluster_id) as (key, cluster_key) into ``simdb_spark_clusters``; re-runnable."""
    F = pyspark_functions()
    conninfo = libpq_url(database)
    cid = _collection(conninfo, collection)[0]
    sel = clusters_df.select(
        F.col("id").cast("string").alias("key"), F.col("cluster_id").cast("string").alias("cluster_key")
    )
    return _run_writer(sel, _staged_writer(conninfo, _rows.clusters_write(cid), keys=("id", "cluster_id")), partitions)


def read_collection(spark: SparkSession, database, collection: str, *, partitions: int = 4,
                    shingles: bool = False, meta: bool = False) -> DataFrame:
    """A simdb collection as a DataFrame (id, key, fp, optionally shingles and meta as JSON text).

    Each of ``partitions`` Spark tasks reads one range of row ids with its own
    connection (no JDBC driver needed); ``fp`` is the signed value, NULL for texts
    without features.
    """
    pyspark_functions()
    import pandas as pd
    import psycopg

    conninfo = libpq_url(database)
    cid = _collection(conninfo, collection, create=False)[0]
    with psycopg.connect(conninfo, client_encoding=CLIENT_ENCODING) as conn:
        lo, hi = _rows.id_bounds(conn, cid)
    cols = ["id bigint", "key string", "fp bigint"]
    if shingles:
        cols.append("shingles array<int>")
    if meta:
        cols.append("meta string")
    schema = ", ".join(cols)
    names = [c.split()[0] for c in cols]
    if lo is None or hi is None:
        return spark.createDataFrame([], schema)
    partitions = max(1, min(int(partitions), hi - lo + 1))
    step = math.ceil((hi - lo + 1) / partitions)
    query = _rows.range_reader_sql(names)

    def read(batches):
        for pdf in batches:
            for part in pdf["part"].tolist():
                start = lo + int(part) * step
                with psycopg.connect(conninfo, client_encoding=CLIENT_ENCODING) as conn:
                    with conn.cursor(name="simdb_read") as cur:
                        cur.itersize = 50_000
                        cur.execute(query, {"c": cid, "lo": start, "hi": start + step})
                        while True:
                            rows = cur.fetchmany(50_000)
                            if not rows:
                                break
                            cols = list(zip(*rows))
                            data = {name: list(col) for name, col in zip(names, cols)}
                            data["id"] = pd.array(data["id"], dtype="int64")
                            data["fp"] = pd.array(data["fp"], dtype="Int64")  # exact: no float detour
                            yield pd.DataFrame(data)

    parts = spark.range(0, partitions, numPartitions=partitions).withColumnRenamed("id", "part")
    return parts.mapInPandas(read, schema)

