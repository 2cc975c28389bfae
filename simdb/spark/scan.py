"""Scanning a shuffled partition in numpy: sort by key, then compare within runs of equal keys.

Shared by the Hamming and Jaccard pair searches: both shuffle rows by a key and then
need every pair of rows with equal keys, computed vectorised in the worker.
"""

from __future__ import annotations

import numpy as np


def popcount64(x: np.ndarray) -> np.ndarray:
    """Bits set in each int64/uint64 value."""
    x = np.ascontiguousarray(x).view(np.uint64)  # bitwise_count of int64 counts |x|'s bits
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(x).astype(np.int64)
    b = x.view(np.uint8).reshape(-1, 8)  # pragma: no cover - numpy < 2
    return _POP8[b].sum(axis=1, dtype=np.int64)


_POP8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


def run_pairs(keys: np.ndarray):
    """All (i, j), i < j, with keys[i] == keys[j], for sorted ``keys``; yielded by offset."""
    n = len(keys)
    if n < 2:
        return
    brk = np.empty(n, dtype=bool)
    brk[0] = True
    np.not_equal(keys[1:], keys[:-1], out=brk[1:])
    starts = np.flatnonzero(brk)
    lengths = np.diff(np.append(starts, n))
    run_end = np.repeat(starts + lengths, lengths)
    remaining = run_end - np.arange(n) - 1  # rows after i in its run
    active = np.flatnonzero(remaining > 0)
    d = 1
    while active.size:
        yield active, active + d
        d += 1
        active = active[remaining[active] >= d]


def scan_partition(batches, columns, process):
    """Feed ``process`` one partition's rows sorted by ``key`` (numpy argsort, in the worker).

    Sorting the ~1M rows of a partition in numpy beat Spark's ``sortWithinPartitions``
    by ~1.5x (measured at 300k fingerprints, 4 tables), and runs of equal keys never
    straddle Arrow batches. A partition is held in the worker's memory: ``pairs``
    chooses the partition count for about 1M rows each (~30 MB).
    """
    parts = {c: [] for c in columns}
    for batch in batches:  # pandas DataFrames (mapInPandas) or Arrow RecordBatches (mapInArrow)
        arrow = hasattr(batch, "num_rows")
        if (batch.num_rows if arrow else len(batch)) == 0:
            continue
        for c in columns:
            col = batch.column(c).to_numpy(zero_copy_only=False) if arrow else batch[c].to_numpy()
            parts[c].append(col)
    if not parts["key"]:
        return
    arrays = {c: (np.concatenate(v) if len(v) > 1 else v[0]) for c, v in parts.items()}
    order = np.argsort(arrays["key"], kind="stable")
    yield from process({c: a[order] for c, a in arrays.items()})


def chunked(pieces, make, limit=1 << 20):
    buf, size = [], 0
    for piece in pieces:
        buf.append(piece)
        size += len(piece[0])
        if size >= limit:
            yield make(buf)
            buf, size = [], 0
    if buf:
        yield make(buf)


def arrow_type(spark_type):
    """The Arrow type mapInArrow must produce for a Spark id column (None: use mapInPandas)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    return {T.LongType: pa.int64(), T.IntegerType: pa.int32(), T.StringType: pa.string()}.get(type(spark_type))

