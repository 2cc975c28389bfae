"""Connected components of the pair graph, and keeping one record per component by simdb's rule.

Both work on DataFrames only (nothing but one count per round reaches the driver), so
they scale with the cluster; :func:`keep_one` decides each component on one executor
with the greedy rule of :func:`simdb.dedup_records`, so the answers equal ``simdb dedup``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simdb.errors import InvalidArgumentError
from simdb.spark.session import check_column, pyspark_functions

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

def _large_star(edges):
    F = pyspark_functions()
    sym = edges.union(edges.select(F.col("v").alias("u"), F.col("u").alias("v")))
    mins = sym.groupBy("u").agg(F.min("v").alias("mv"))
    mins = mins.select("u", F.least("u", "mv").alias("m"))
    return (
        sym.join(mins, "u")
        .where(F.col("v") > F.col("u"))
        .select(F.col("v").alias("u"), F.col("m").alias("v"))
        .distinct()
    )


def _small_star(edges):
    F = pyspark_functions()
    oriented = edges.select(F.greatest("u", "v").alias("u"), F.least("u", "v").alias("v")).distinct()
    mins = oriented.groupBy("u").agg(F.min("v").alias("m"))
    out = (
        oriented.join(mins, "u")
        .select(F.col("v").alias("u"), F.col("m").alias("v"))
        .where(F.col("u") != F.col("v"))
        .union(mins.select("u", F.col("m").alias("v")))
    )
    return out.distinct()


def clusters(pairs_df: DataFrame, *, id_a: str = "id_a", id_b: str = "id_b", max_rounds: int = 64) -> DataFrame:
    """Connected components of the pair graph: (id, cluster_id), cluster_id = the smallest id.

    Every id that appears in a pair gets a row (singletons have no pairs and no row).
    Alternates large-star and small-star (Kiveris et al., "Connected Components in
    MapReduce and Beyond", SoCC 2014; O(log^2 n) rounds) until the graph is a set of
    stars around each component's minimum; lineage is cut every round
    (``localCheckpoint``) and nothing is collected but one count per round.
    """
    F = pyspark_functions()
    check_column(pairs_df, id_a, "id_a")
    check_column(pairs_df, id_b, "id_b")
    edges = (
        pairs_df.select(F.col(id_a).alias("u"), F.col(id_b).alias("v"))
        .where(F.col("u") != F.col("v"))
        .select(F.greatest("u", "v").alias("u"), F.least("u", "v").alias("v"))
        .distinct()
        .localCheckpoint()
    )
    for _ in range(max_rounds):
        nxt = _small_star(_large_star(edges)).localCheckpoint()
        multi = nxt.groupBy("u").agg(F.countDistinct("v").alias("c")).where(F.col("c") > 1).select("u")
        chained = nxt.select(F.col("v").alias("u")).distinct().join(nxt.select("u").distinct(), "u")
        edges = nxt
        if multi.union(chained).limit(1).count() == 0:
            break
    else:  # pragma: no cover - the algorithm converges in O(log^2 n) rounds
        raise RuntimeError(f"clusters did not converge in {max_rounds} rounds")
    leaves = edges.select(F.col("u").alias("id"), F.col("v").alias("cluster_id"))
    centers = edges.select(F.col("v").alias("id"), F.col("v").alias("cluster_id")).distinct()
    return leaves.union(centers)


KEEP = ("first", "last", "longest")


def _greedy_component(measure: str, keep: str):
    """pandas: one component's edges (with both ends' lengths and order values) -> (removed, kept, measure).

    Members are decided in priority order: kept unless a kept member is a neighbour;
    a removed member names its best kept neighbour (highest Jaccard / lowest distance,
    then the earliest in input order), as :func:`simdb.dedup_records` does."""
    import pandas as pd

    higher_is_better = measure == "jaccard"

    def run(pdf):
        length, order, nbrs = {}, {}, {}
        for a, b, m, la, lb, oa, ob in zip(pdf["a"], pdf["b"], pdf["m"], pdf["la"], pdf["lb"], pdf["oa"], pdf["ob"]):
            length[a], length[b], order[a], order[b] = la, lb, oa, ob
            nbrs.setdefault(a, []).append((b, m))
            nbrs.setdefault(b, []).append((a, m))
        if keep == "first":
            members = sorted(order, key=order.__getitem__)
        elif keep == "last":
            members = sorted(order, key=order.__getitem__, reverse=True)
        else:  # longest first, ties in input order
            members = sorted(order, key=lambda v: (-length[v], order[v]))
        kept, rows = set(), []
        for v in members:
            best = None
            for u, m in nbrs[v]:
                if u in kept:
                    rank = (-m if higher_is_better else m, order[u])
                    if best is None or rank < best[0]:
                        best = (rank, u, m)
            if best is None:
                kept.add(v)
            else:
                rows.append((v, best[1], best[2]))
        return pd.DataFrame(rows, columns=["removed", "kept", measure])

    return run


def keep_one(
    df: DataFrame,
    pairs_df: DataFrame,
    *,
    id_col: str = "id",
    order_col: str | None = None,
    keep: str = "first",
    text_col: str = "text",
) -> tuple[DataFrame, DataFrame]:
    """(kept rows of ``df``, removal log): one record per group of near-duplicates.

    ``pairs_df`` is the near-duplicate graph, from :func:`pairs` ((id_a, id_b, distance))
    or :func:`simdb.spark.rule_pairs` ((id_a, id_b, distance, jaccard): the default rule; the log
    then carries jaccard). The rule is :func:`simdb.dedup_records`'s:
    records in priority order (``keep="first"``: ``order_col`` ascending, default ``id_col``;
    ``"last"``: descending; ``"longest"``: ``text_col``'s length descending, then ``order_col``)
    are kept unless a kept record is a near-duplicate; the log has one row per removed
    record: (removed, kept, distance|jaccard). Give ``order_col`` the input position to
    get ``simdb dedup``'s answers. Records in no pair are kept without any work; each
    connected component is decided on one executor (its edges must fit there).
    """
    F = pyspark_functions()
    from pyspark.sql import types as T

    if keep not in KEEP:
        raise InvalidArgumentError(f"keep must be one of {', '.join(KEEP)}, got {keep!r}")
    order_col = order_col or id_col
    check_column(df, id_col, "id_col")
    check_column(df, order_col, "order_col")
    if keep == "longest":
        check_column(df, text_col, "text_col")
    measure = "jaccard" if "jaccard" in pairs_df.columns else "distance"
    length = F.length(F.col(text_col)) if keep == "longest" else F.lit(0)
    ranks = df.select(F.col(id_col).alias("id"), F.coalesce(length, F.lit(0)).alias("len"),
                      F.col(order_col).alias("o"))
    comps = clusters(pairs_df)
    edges = (
        pairs_df.select(F.col("id_a").alias("a"), F.col("id_b").alias("b"), F.col(measure).cast("double").alias("m"))
        .join(comps.select(F.col("id").alias("a"), "cluster_id"), "a")
        .join(ranks.select(F.col("id").alias("a"), F.col("len").alias("la"), F.col("o").alias("oa")), "a")
        .join(ranks.select(F.col("id").alias("b"), F.col("len").alias("lb"), F.col("o").alias("ob")), "b")
    )
    id_type = df.schema[id_col].dataType
    schema = T.StructType([
        T.StructField("removed", id_type, False),
        T.StructField("kept", id_type, False),
        T.StructField(measure, T.DoubleType(), False),
    ])
    removed = edges.groupBy("cluster_id").applyInPandas(_greedy_component(measure, keep), schema)
    if measure == "distance":
        removed = removed.withColumn("distance", F.col("distance").cast("int"))
    kept = df.join(removed.select(F.col("removed").alias(id_col)), id_col, "left_anti")
    return kept, removed

