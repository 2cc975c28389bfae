"""Near-duplicate pairs by the default rule on Spark: what ``SimhashIndex.pairs()`` answers for the
same texts in a new simdb collection.

Why: :func:`simdb.spark.pairs` answers by Hamming distance on fingerprints, which is a new
collection's rule only when it was made with ``--hamming``; a dedup on Spark (``keep_one``) fed
with it would keep copies the rule calls near-duplicates and drop texts it does not. Here each
stage is the store's, computed by the Python workers with the same code:

1. **features** per text: the candidate fingerprint (:func:`simdb.core.sketch.features.candidate_fingerprinter`,
   for ``distance``), the sketch (``Verifier.sketch``: the bottom 128 values of the character-gram
   set) and the 14 band keys of the full set (:func:`simdb.core.sketch.bands.text_band_keys`);
2. **candidates**: the pairs sharing keys in at least two bands (the default band scheme's
   :func:`simdb.core.sketch.bands.min_shared`; a shuffle on (band, key); one row per band and text,
   14 per text);
3. **verification**: Jaccard of the two sketches (:func:`simdb.core.sketch.sketch_jaccard`) >= the
   threshold.

A text without features (no fingerprint, or no character grams) pairs with nothing, as in the store. Rows stored by fingerprint only, which a collection
pairs by Hamming distance, do not exist here: every row is a text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from simdb.core.sketch import Verifier, check_min_jaccard, sketch_jaccard
from simdb.core.sketch.bands import BAND_SCHEME, min_shared, text_band_keys
from simdb.core.sketch.features import candidate_fingerprinter
from simdb.spark.columns import fingerprint
from simdb.spark.session import TEXT_TYPES, check_column, pyspark_functions, series_udf

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["rule_pairs"]


def _texts(series) -> list[str | None]:
    return [t if isinstance(t, str) else None for t in series.tolist()]


def rule_pairs(df: DataFrame, text_col: str = "text", id_col: str = "id", *,
               min_jaccard: float | None = None) -> DataFrame:
    """(id_a, id_b, distance, jaccard), ``id_a < id_b``: every pair of ``df``'s texts that the default rule
    calls near-duplicates (the stages of the module docstring), each once. ``min_jaccard`` defaults to
    the rule's (0.8). Feed it to :func:`simdb.spark.keep_one` for a dedup by the rule (its log then
    carries ``jaccard``)."""
    F = pyspark_functions()
    import pandas as pd

    check_column(df, text_col, "text_col", TEXT_TYPES)
    check_column(df, id_col, "id_col")
    verifier = Verifier()
    t = verifier.min_jaccard if min_jaccard is None else check_min_jaccard(min_jaccard)
    size, scheme = verifier.size, verifier.scheme

    def _sketch(texts):
        sketches = [None if x is None else verifier.sketch(x) for x in _texts(texts)]
        return pd.Series([None if sk is None else np.asarray(sk, dtype=np.int32) for sk in sketches], dtype=object)

    def _keys(texts):
        values = _texts(texts)
        live = [i for i, x in enumerate(values) if x is not None]
        keys = text_band_keys([values[i] for i in live], scheme)
        out: list = [None] * len(values)
        for i, k in zip(live, keys):
            out[i] = None if k is None else np.asarray(k, dtype=np.int32)
        return pd.Series(out, dtype=object)

    def _jaccard(a, b):
        return pd.Series([sketch_jaccard(list(x), list(y), size) for x, y in zip(a.tolist(), b.tolist())],
                         dtype="float64")

    feats = fingerprint(df.select(F.col(id_col).alias("id"), F.col(text_col).alias("text")), "text",
                        candidate_fingerprinter())
    feats = (feats.withColumn("sketch", series_udf(_sketch, "array<int>")(F.col("text")))
             .withColumn("keys", series_udf(_keys, "array<int>")(F.col("text")))
             .where(F.col("fp").isNotNull() & F.col("sketch").isNotNull() & F.col("keys").isNotNull())
             .select("id", "fp", "sketch", "keys")
             .cache())
    bands = feats.select("id", F.posexplode("keys").alias("band", "key"))
    cand = (bands.alias("a").join(bands.alias("b"), (F.col("a.band") == F.col("b.band"))
                                  & (F.col("a.key") == F.col("b.key")) & (F.col("a.id") < F.col("b.id")))
            .groupBy(F.col("a.id").alias("id_a"), F.col("b.id").alias("id_b")).count()
            .where(F.col("count") >= F.lit(min_shared(BAND_SCHEME))).select("id_a", "id_b"))
    a = feats.select(F.col("id").alias("id_a"), F.col("fp").alias("fp_a"), F.col("sketch").alias("sk_a"))
    b = feats.select(F.col("id").alias("id_b"), F.col("fp").alias("fp_b"), F.col("sketch").alias("sk_b"))
    judged = (cand.join(a, "id_a").join(b, "id_b")
              .withColumn("jaccard", series_udf(_jaccard, "double")(F.col("sk_a"), F.col("sk_b")))
              .withColumn("distance", F.expr("CAST(bit_count(fp_a ^ fp_b) AS INT)")))
    return judged.where(F.col("jaccard") >= F.lit(t)).select("id_a", "id_b", "distance", "jaccard")
