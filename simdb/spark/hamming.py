"""Every pair within Hamming distance ``k``, exactly, without collecting anything on the driver.

Each fingerprint is exploded into one row per table of the layout, rows are shuffled
by key and scanned per partition; a pair is kept only at the *first* table on which
its keys agree, so no ``DISTINCT`` (a second shuffle) is needed.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

from simdb.core.bits import to_unsigned
from simdb.spark.layouts import choose_scheme, layout, table_keys
from simdb.spark.scan import arrow_type, chunked, popcount64, run_pairs, scan_partition
from simdb.spark.session import INT_TYPES, check_column, check_count, default_partitions, pyspark_functions

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

def _hamming_scanner(k: int, masks: list[int], keybits: int, tbits: int, id_arrow=None):
    import pandas as pd

    masks_arr = np.array(masks, dtype=np.int64)

    def process(a):
        key, ids, fps = a["key"], a["id"], a["fp"]
        for i, j in run_pairs(key):
            x = np.bitwise_xor(fps[i], fps[j])
            dist = popcount64(x)
            ok = dist <= k
            if not ok.any():
                continue
            i, j, x, dist = i[ok], j[ok], x[ok], dist[ok]
            if tbits:
                t = (key[i] >> keybits).astype(np.int64)
                keep = np.ones(len(i), dtype=bool)
                for tt in range(int(t.max())):
                    keep &= ~((t > tt) & ((x & masks_arr[tt]) == 0))
                i, j, dist = i[keep], j[keep], dist[keep]
            if len(i) == 0:
                continue
            ia, ib = ids[i], ids[j]
            if not (ia != ib).all():  # a repeated id is not a pair with itself
                same = ia == ib
                ia, ib, dist = ia[~same], ib[~same], dist[~same]
            lo = ia < ib
            yield (np.where(lo, ia, ib), np.where(lo, ib, ia), dist.astype(np.int32))

    def make(buf):
        cols = {
            "id_a": np.concatenate([b[0] for b in buf]),
            "id_b": np.concatenate([b[1] for b in buf]),
            "distance": np.concatenate([b[2] for b in buf]),
        }
        if id_arrow is None:
            return pd.DataFrame(cols)
        import pyarrow as pa

        return pa.RecordBatch.from_arrays(
            [pa.array(cols["id_a"], type=id_arrow), pa.array(cols["id_b"], type=id_arrow),
             pa.array(cols["distance"], type=pa.int32())],
            names=["id_a", "id_b", "distance"],
        )

    def scan(batches):
        yield from chunked(scan_partition(batches, ("key", "id", "fp"), process), make)

    return scan


def pairs(
    df: DataFrame,
    k: int = 3,
    id_col: str = "id",
    *,
    fp_col: str = "fp",
    tables: str = "auto",
    n: int | None = None,
    partitions: int | None = None,
) -> DataFrame:
    """Every pair within Hamming distance ``k``: (id_a, id_b, distance), id_a < id_b, each once.

    ``df`` has a unique, orderable ``id_col`` and a signed 64-bit ``fp_col`` (NULLs are
    skipped). ``tables`` is ``"blocks"`` (k+1 tables), ``"manku"`` (C(k+2, 2) tables)
    or ``"auto"``: the cheaper for ``n`` rows by the measured cost model (``n`` is
    counted when not given). Nothing is collected on the driver.
    """
    F = pyspark_functions()
    from pyspark.sql import types as T

    check_count(k, "k", 0, 62)
    check_column(df, id_col, "id_col")
    check_column(df, fp_col, "fp_col", INT_TYPES)
    if n is not None:
        check_count(n, "n", 0)
    if partitions is not None:
        check_count(partitions, "partitions", 1)
    if tables == "auto":
        if n is None:
            n = df.where(F.col(fp_col).isNotNull()).count()
        tables = choose_scheme(n, k) if k >= 1 else "blocks"
    tabs = layout(k, tables)
    exprs, masks, keybits, tbits = table_keys(tabs)
    spark = df.sparkSession
    if partitions is None:
        partitions = default_partitions(spark, None if n is None else n * len(tabs))
    id_type = df.schema[id_col].dataType
    schema = T.StructType(
        [
            T.StructField("id_a", id_type, False),
            T.StructField("id_b", id_type, False),
            T.StructField("distance", T.IntegerType(), False),
        ]
    )
    base = df.select(F.col(id_col).alias("id"), F.col(fp_col).cast("long").alias("fp")).where(
        F.col("fp").isNotNull() & F.col("id").isNotNull()
    )
    exploded = base.select("id", "fp", F.explode(F.array(*exprs)).alias("key"))
    id_arrow = arrow_type(id_type)
    scan = _hamming_scanner(k, masks, keybits, tbits, id_arrow)
    shuffled = exploded.repartition(partitions, "key").select("key", "id", "fp")
    if id_arrow is not None:  # Arrow batches straight to numpy: no pandas in between
        return shuffled.mapInArrow(scan, schema)
    return shuffled.mapInPandas(scan, schema)


def brute_force_pairs(items, k: int = 3) -> set[tuple]:
    """(id_a, id_b, distance) for every pair within ``k`` of an iterable of (id, signed fp): the reference."""
    rows = [(i, to_unsigned(f)) for i, f in items if f is not None]
    out = set()
    for (ia, fa), (ib, fb) in itertools.combinations(rows, 2):
        d = (fa ^ fb).bit_count()
        if d <= k:
            out.add((min(ia, ib), max(ia, ib), d))
    return out

