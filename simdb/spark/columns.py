"""Fingerprint and shingle columns: the store's values computed by Spark's Python workers.

Each worker rebuilds the Fingerprinter once from its JSON configuration (cached per
process), so the column holds exactly what :class:`simdb.SimhashIndex` would store.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from simdb.core.bits import to_signed
from simdb.core.fingerprint import Fingerprinter
from simdb.core.sketch.shingles import shingles as shingle_set
from simdb.errors import InvalidTypeError
from simdb.index import SimhashIndex
from simdb.spark.session import TEXT_TYPES, check_column, pyspark_functions, series_udf

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

_FP_CACHE: dict[str, Any] = {}


def _coerce_fingerprinter(fingerprinter) -> dict:
    if fingerprinter is None:
        fingerprinter = Fingerprinter()
    elif isinstance(fingerprinter, dict):
        fingerprinter = Fingerprinter.from_dict(fingerprinter)
    elif not isinstance(fingerprinter, Fingerprinter):
        raise InvalidTypeError(
            f"fingerprinter must be a Fingerprinter, its to_dict() or None, got {type(fingerprinter).__name__}"
        )
    return fingerprinter.to_dict()


def _worker_fingerprinter(config_json: str):
    fp = _FP_CACHE.get(config_json)
    if fp is None:
        fp = _FP_CACHE[config_json] = Fingerprinter.from_dict(json.loads(config_json))
    return fp


def fingerprinter_for(database, collection: str):
    """The Fingerprinter a simdb collection was created with (from its stored configuration)."""
    with SimhashIndex(database, collection=collection) as index:
        return index.fingerprinter


def fingerprint(df: DataFrame, column: str, fingerprinter=None, *, output: str = "fp", empty=None) -> DataFrame:
    """``df`` with ``output`` (bigint): the signed SimHash of ``column``.

    The values are ``simdb.core.bits.to_signed(fingerprinter.fingerprint(text))``, exactly what
    the store keeps. A NULL text, or one with no features, gets ``empty`` (NULL by
    default, as in the store: such rows never match anything).
    """
    F = pyspark_functions()
    import pandas as pd

    check_column(df, column, "column", TEXT_TYPES)
    config_json = json.dumps(_coerce_fingerprinter(fingerprinter), sort_keys=True)
    if empty is not None:
        empty = to_signed(empty)

    def _fp(texts):
        fper = _worker_fingerprinter(config_json)
        values = texts.tolist()
        present = [i for i, t in enumerate(values) if isinstance(t, str)]
        out = [empty] * len(values)
        fps = fper.many([values[i] for i in present], workers=1, empty=None)
        for i, value in zip(present, fps):
            out[i] = empty if value is None else to_signed(value)
        return pd.Series(out, dtype="Int64")

    return df.withColumn(output, series_udf(_fp, "long")(F.col(column)))


def shingles(df: DataFrame, column: str, *, output: str = "shingles") -> DataFrame:
    """``df`` with ``output`` (array<int>): the pinned shingle set of :mod:`simdb.core.sketch.shingles`.

    Sorted, unique, signed 32-bit values, as stored in ``simdb_fingerprints.shingles``;
    NULL for a NULL text or one with no shingles (as in the store).
    """
    F = pyspark_functions()
    import pandas as pd

    check_column(df, column, "column", TEXT_TYPES)

    def _sh(texts):
        out = []
        for text in texts:
            if text is None or (isinstance(text, float) and math.isnan(text)):
                out.append(None)
                continue
            values = shingle_set(text)
            out.append(np.asarray(values, dtype=np.int32) if values else None)
        return pd.Series(out, dtype=object)

    return df.withColumn(output, series_udf(_sh, "array<int>")(F.col(column)))

