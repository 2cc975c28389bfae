"""Starting Spark for simdb: the lazy PySpark import, the session, shared Spark helpers.

PySpark (with pandas and pyarrow) is an optional extra, so it is imported only when a
Spark function runs, and a missing install says how to get it. The session pins the
workers' Python to this interpreter: the workers must be able to import simdb.
"""

from __future__ import annotations

import math
import os
import sys
from typing import TYPE_CHECKING

from simdb.errors import InvalidArgumentError, InvalidTypeError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

_INSTALL_HINT = (
    "simdb.spark needs PySpark, pandas and pyarrow: install them with "
    "`pip install 'simdb-postgres[spark]'` (PySpark also needs a Java 17+ runtime, e.g. "
    "`apt-get install default-jre-headless`)"
)


def pyspark_functions():
    """``pyspark.sql.functions``, after checking PySpark, pandas and pyarrow are importable."""
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
        from pyspark.sql import functions as F
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return F


def session(master: str = "local[2]", app_name: str = "simdb", config: dict | None = None) -> SparkSession:
    """A SparkSession whose Python workers run this interpreter.

    Sets ``PYSPARK_PYTHON`` (and the driver's) to ``sys.executable`` unless already
    set: without it the workers start the system ``python3``, which has no simdb.
    """
    pyspark_functions()
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.shuffle.partitions": "8",
    }
    for key, value in {**defaults, **(config or {})}.items():
        builder = builder.config(key, str(value))
    return builder.getOrCreate()


def series_udf(func, return_type: str):
    """A pandas UDF of Series (each argument and the result) -> Series (annotations set as objects:
    the callers' modules defer them)."""
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    args = func.__code__.co_varnames[: func.__code__.co_argcount]
    func.__annotations__ = {**dict.fromkeys(args, pd.Series), "return": pd.Series}
    return pandas_udf(func, return_type)  # type: ignore[call-overload]  # the stubs want a literal type


#: Spark type names of a text column (what fingerprint / shingles / rule_pairs read)
TEXT_TYPES = ("string", "varchar", "char")
#: Spark type names of a fingerprint column (read as a signed 64-bit value)
INT_TYPES = ("long", "integer", "short", "byte")


def check_column(df, name, arg: str, types: tuple[str, ...] | None = None) -> None:
    """Refuse a missing column, or one of the wrong type, naming the argument, when the plan is built.

    Why: Spark reports a missing column as an analysis error deep in a later plan, and a column of
    another type than text is worse: the workers see no str, so every row got a NULL fingerprint and
    the job answered "no near-duplicates" without an error."""
    if not isinstance(name, str):
        raise InvalidTypeError(f"{arg} must be a column name (str), got {type(name).__name__}")
    fields = [f for f in df.schema.fields if f.name == name] or [
        f for f in df.schema.fields if f.name.lower() == name.lower()]  # Spark's default: case-insensitive
    if not fields:
        raise InvalidArgumentError(f"{arg}: no column {name!r} in the DataFrame (its columns: {', '.join(df.columns)})")
    kind = fields[0].dataType.typeName()
    if types is not None and kind not in types:
        raise InvalidTypeError(f"{arg}: column {name!r} is {kind}, not {' or '.join(types)}")


def check_count(value, arg: str, low: int, high: int | None = None) -> int:
    """An int argument in low..high (None: unbounded), or a typed error naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"{arg} must be an int, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        raise InvalidArgumentError(f"{arg} must be in {low}..{'' if high is None else high}, got {value}")
    return value


def default_partitions(spark, rows: int | None) -> int:
    """Shuffle partitions for a job of ``rows`` rows: about 1M rows each, at least two per core."""
    par = spark.sparkContext.defaultParallelism
    if rows is None:
        return int(spark.conf.get("spark.sql.shuffle.partitions"))
    return max(2 * par, math.ceil(rows / 1_000_000))

