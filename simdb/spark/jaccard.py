"""Every pair with Jaccard >= a threshold, exactly: prefix filtering, then the exact check."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from simdb.spark.scan import chunked, run_pairs, scan_partition
from simdb.spark.session import default_partitions, pyspark_functions

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

def _prefix_len(size: int, threshold: float) -> int:
    return size - math.ceil(threshold * size - 1e-9) + 1


def _prefix_scanner(threshold: float):
    import pandas as pd

    def process(a):
        key, ids, sizes = a["key"], a["id"], a["size"]
        for i, j in run_pairs(key):
            si, sj = sizes[i], sizes[j]
            ok = np.minimum(si, sj) >= threshold * np.maximum(si, sj) - 1e-9
            if not ok.any():
                continue
            ia, ib = ids[i[ok]], ids[j[ok]]
            keep = ia != ib
            ia, ib = ia[keep], ib[keep]
            lo = ia < ib
            yield (np.where(lo, ia, ib), np.where(lo, ib, ia))

    def make(buf):
        return pd.DataFrame(
            {"id_a": np.concatenate([b[0] for b in buf]), "id_b": np.concatenate([b[1] for b in buf])}
        )

    def scan(batches):
        yield from chunked(scan_partition(batches, ("key", "id", "size"), process), make)

    return scan


def jaccard_pairs(
    df: DataFrame,
    threshold: float = 0.8,
    id_col: str = "id",
    *,
    shingles_col: str = "shingles",
    partitions: int | None = None,
) -> DataFrame:
    """Every pair whose shingle sets have Jaccard >= ``threshold``: (id_a, id_b, jaccard), exact.

    Prefix filtering (Vernica et al., SIGMOD 2010): order each set's elements by
    global frequency (rarest first); two sets with Jaccard >= t share an element
    among the first ``|x| - ceil(t |x|) + 1`` of each, so the prefixes' equal-element
    runs give every true pair as a candidate. Candidates passing the length filter
    are de-duplicated and checked exactly. NULL or empty sets never match.
    """
    F = pyspark_functions()
    from pyspark.sql import types as T

    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise TypeError(f"threshold must be a number, got {type(threshold).__name__}")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    threshold = float(threshold)
    spark = df.sparkSession
    if partitions is None:
        partitions = default_partitions(spark, None)
    sets = df.select(
        F.col(id_col).alias("id"), F.array_distinct(F.col(shingles_col)).alias("s")
    ).where(F.col("id").isNotNull() & F.col("s").isNotNull() & (F.size("s") > 0))
    tokens = sets.select("id", F.explode("s").alias("tok"))
    freq = tokens.groupBy("tok").agg(F.count(F.lit(1)).alias("cnt"))
    ordered = (
        tokens.join(freq, "tok")
        .groupBy("id")
        .agg(F.sort_array(F.collect_list(F.struct("cnt", "tok"))).alias("o"))
        .withColumn("size", F.size("o"))
    )
    plen = (F.col("size") - F.ceil(F.col("size") * F.lit(threshold) - F.lit(1e-9)) + F.lit(1)).cast("int")
    prefixes = ordered.select(
        "id", "size", F.explode(F.slice("o", F.lit(1), plen)).alias("e")
    ).select(F.col("e.tok").cast("long").alias("key"), "id", "size")
    id_type = df.schema[id_col].dataType
    cand_schema = T.StructType(
        [T.StructField("id_a", id_type, False), T.StructField("id_b", id_type, False)]
    )
    candidates = (
        prefixes.repartition(partitions, "key")
        .mapInPandas(_prefix_scanner(threshold), cand_schema)
        .distinct()
    )
    a = sets.select(F.col("id").alias("id_a"), F.col("s").alias("sa"))
    b = sets.select(F.col("id").alias("id_b"), F.col("s").alias("sb"))
    inter = F.size(F.array_intersect("sa", "sb"))
    union = F.size("sa") + F.size("sb") - inter
    return (
        candidates.join(a, "id_a")
        .join(b, "id_b")
        .select("id_a", "id_b", (inter / union).alias("jaccard"))
        .where(F.col("jaccard") >= F.lit(threshold) - F.lit(1e-12))
    )

