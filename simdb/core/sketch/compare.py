"""Comparing many bottom-k sketches at once (numpy): the verification stage's arithmetic.

Why a module of its own: :mod:`simdb.core.sketch` defines a sketch and the Jaccard of two; every
caller that verifies candidates (``near``, ``pairs()``, the async index) compares hundreds to
millions of pairs, where one vectorised call replaces a Python loop per pair. The answers are
:func:`simdb.core.sketch.sketch_jaccard`'s exactly (property-tested).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from simdb.core.sketch import SKETCH_SIZE

__all__ = ["FEW_CANDIDATES", "SKETCH_PAD", "SketchRows", "candidate_jaccards", "candidate_jaccards_many", "may_reach", "sketch_values", "sketch_jaccard_many", "sketch_jaccard_pairs", "sketch_jaccard_sorted", "sketch_matrix"]

_PAD = np.int64(1) << 40  # above every int4: pads short sketches in a matrix
#: the value that pads a sketch's row of a :func:`sketch_matrix` (above every int4)
SKETCH_PAD = _PAD


def sketch_matrix(sketches: Sequence[Sequence[int] | None], size: int = SKETCH_SIZE) -> tuple[np.ndarray, np.ndarray]:
    """(matrix, lengths): one row per sketch, ascending values padded with a sentinel above every
    int4, and each sketch's length (0 for None). The input of :func:`sketch_jaccard_many`."""
    m = np.full((len(sketches), size), _PAD, dtype=np.int64)
    lens = np.zeros(len(sketches), dtype=np.int64)
    for i, sk in enumerate(sketches):
        if sk:
            v = np.asarray(sk[:size], dtype=np.int64)
            m[i, : len(v)] = v
            lens[i] = len(v)
    return m, lens


def sketch_jaccard_many(a: np.ndarray, b: np.ndarray, size: int = SKETCH_SIZE) -> np.ndarray:
    """:func:`sketch_jaccard` of the rows of two :func:`sketch_matrix` matrices, pair by pair,
    vectorised (NaN where either row is empty). Sorting the two rows together puts a value
    present in both next to itself; the first ``size`` distinct values are the union's bottom-k."""
    c = np.sort(np.concatenate([a, b], axis=1), axis=1)
    real = c != _PAD
    first = np.ones(c.shape, dtype=bool)
    first[:, 1:] = c[:, 1:] != c[:, :-1]
    distinct = first & real
    rank = np.cumsum(distinct, axis=1, dtype=np.int32)  # int32: several times faster than the default int64
    in_low = distinct & (rank <= size)
    both = np.zeros(c.shape, dtype=bool)
    both[:, :-1] = in_low[:, :-1] & (c[:, 1:] == c[:, :-1])
    denom = np.minimum(distinct.sum(axis=1), size).astype(np.float64)
    out = np.full(len(c), np.nan)
    ok = ((a[:, 0] != _PAD) & (b[:, 0] != _PAD)) if len(c) else np.zeros(0, dtype=bool)
    out[ok] = both[ok].sum(axis=1) / denom[ok]
    return out


class SketchRows:
    """Many sketches in one compact array (CSR: the values of row ``r`` are
    ``values[offsets[r]:offsets[r + 1]]``, ascending), the input of :func:`sketch_jaccard_pairs`.

    Why not a padded matrix: a batch of candidate pairs may involve a hundred thousand rows;
    at 4 bytes a value and no padding they take the sketches' own size, and the padded int64
    matrices :func:`sketch_jaccard_many` compares are built per block of pairs only."""

    def __init__(self, sketches: Sequence[Sequence[int] | np.ndarray | None], size: int = SKETCH_SIZE):
        parts = [np.asarray(sk, dtype=np.int64)[:size] if sk is not None else np.zeros(0, np.int64) for sk in sketches]
        self.lens = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
        self.offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum(self.lens, out=self.offsets[1:])
        self.values = np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)

    @classmethod
    def from_csr(cls, values: np.ndarray, offsets: np.ndarray) -> SketchRows:
        """Rows already in CSR form (int32 ``values``, ``offsets`` of length rows + 1)."""
        self = cls.__new__(cls)
        self.values = np.asarray(values, dtype=np.int32)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.lens = np.diff(self.offsets)
        return self

    @classmethod
    def from_arrays(cls, parts: Sequence[np.ndarray | None]) -> SketchRows:
        """Rows from one int32 array per row (None: an empty row), without a size cut."""
        arrays = [np.zeros(0, np.int32) if p is None else p.astype(np.int32, copy=False) for p in parts]
        offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays)), out=offsets[1:])
        return cls.from_csr(np.concatenate(arrays) if arrays else np.zeros(0, np.int32), offsets)

    def __len__(self) -> int:
        return len(self.lens)

    def row(self, i: int) -> np.ndarray:
        """Row ``i``'s values (a view)."""
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def matrix(self, rows: np.ndarray, width: int) -> np.ndarray:
        """The sketches of ``rows`` as a (len(rows), width) int64 matrix, padded with :data:`SKETCH_PAD`."""
        cols = np.arange(width)
        if not len(self.values):
            return np.full((len(rows), width), _PAD, dtype=np.int64)
        idx = np.minimum(self.offsets[rows][:, None] + cols[None, :], len(self.values) - 1)
        return np.where(cols[None, :] < self.lens[rows][:, None], self.values.take(idx).astype(np.int64), _PAD)


def sketch_jaccard_pairs(
    rows: SketchRows, ia: np.ndarray, ib: np.ndarray, min_jaccard: float, size: int = SKETCH_SIZE,
    block: int = 4096,
) -> np.ndarray:
    """:func:`sketch_jaccard` of the pairs of sketches (``ia[p]``, ``ib[p]``) of ``rows``, where
    only values >= ``min_jaccard`` matter: a pair whose result cannot reach it gets 0.0 without
    being compared; NaN where either sketch is empty.

    Why it can be skipped: the result is at most ``min(la, lb) / max(la, lb)`` (the shared values
    are at most the smaller sketch; the denominator is at least the larger one, and is ``size``
    once a sketch is full), so unrelated texts of different lengths cost nothing. The rest are
    compared in groups by their longer sketch, on matrices 32 / 64 / 128 / ``size`` wide (the
    padding sorts last): a pair of 50-value sketches sorts 128 values, not ``2 * size``."""
    la, lb = rows.lens[ia], rows.lens[ib]
    small, big = np.minimum(la, lb), np.maximum(la, lb)
    out = np.zeros(len(ia), dtype=np.float64)
    out[(la == 0) | (lb == 0)] = np.nan
    todo = (small > 0) & (small >= min_jaccard * big - 1e-9)
    width_of = np.full(len(ia), size, dtype=np.int64)
    for w in (128, 64, 32):
        width_of[big <= w] = w
    for w in sorted(set(width_of[todo].tolist())):  # not np.unique: ~100 us on numpy >= 2.3 for a handful
        sel = np.flatnonzero(todo & (width_of == w))
        for s in range(0, len(sel), block):
            part = sel[s : s + block]
            out[part] = sketch_jaccard_many(rows.matrix(ia[part], w), rows.matrix(ib[part], w), size)
    return out



def sketch_jaccard_sorted(a: np.ndarray, b: np.ndarray, size: int = SKETCH_SIZE) -> float:
    """:func:`sketch_jaccard` of two non-empty sketches given as ascending distinct int arrays
    (each at most ``size`` values), with the same arithmetic as :func:`sketch_jaccard_many`
    (shared values among the union's bottom ``size``, over ``min(union, size)``).

    Why: a text query has one or two candidates; :func:`sketch_jaccard_pairs` builds padded
    matrices and sorts them (some 30 numpy calls, ~100 us for one pair), where a binary search of
    one sketch in the other and, only when the union overflows ``size``, one merge cost a few."""
    at = np.searchsorted(b, a)
    shared = a[b[np.minimum(at, len(b) - 1)] == a]
    union = len(a) + len(b) - len(shared)
    if union <= size:
        return len(shared) / union
    merged = np.sort(np.concatenate([a, b]), kind="stable")  # two ascending runs: one merge
    keep = np.empty(len(merged), dtype=bool)
    keep[0] = True
    np.not_equal(merged[1:], merged[:-1], out=keep[1:])
    cutoff = merged[keep][size - 1]  # the size-th smallest value of the union
    return int(np.count_nonzero(shared <= cutoff)) / size


def sketch_values(stored: Any) -> np.ndarray | None:
    """A stored sketch as int values: ``array_send`` bytes (the verified statements' output:
    header of 5 int4, then a length and a value per element) or a list; None for NULL / empty."""
    if stored is None:
        return None
    if isinstance(stored, (bytes, bytearray, memoryview)):
        words = np.frombuffer(stored, dtype=">i4")
        if len(words) <= 5 or words[0] != 1:  # no dimension: an empty array
            return None
        return words[6::2].astype(np.int64)
    return np.asarray(stored, dtype=np.int64) if len(stored) else None


#: up to this many candidates with a sketch are compared one pair at a time
#: (:func:`sketch_jaccard_sorted`, a few numpy calls a pair); more go through one batched
#: :func:`sketch_jaccard_pairs` call
FEW_CANDIDATES = 8


def candidate_jaccards(stored: Sequence[Any], query_sketch: Any, size: int, min_jaccard: float) -> np.ndarray:
    """The verification stage's arithmetic for one query: the Jaccard of each candidate's stored
    sketch (``array_send`` bytes, a list or None) with the query's; NaN where either side has no
    sketch (nothing to verify with: the Hamming distance decides, :func:`simdb.results.verified_matches`).

    :meth:`simdb.core.sketch.Verifier.judge` for every row, vectorised: all the candidates' sketches
    against the query's in one :func:`sketch_jaccard_pairs` call (a query may have thousands of
    candidates in a collection full of partly overlapping texts)."""
    values = [sketch_values(s) for s in stored]
    q = sketch_values(query_sketch)
    jac = np.full(len(values), np.nan)
    with_sketch = [i for i, s in enumerate(values) if s is not None] if q is not None else []
    if q is not None and len(with_sketch) <= FEW_CANDIDATES:  # a text query's usual one or two
        for i in with_sketch:
            s_i = values[i]
            assert s_i is not None
            jac[i] = sketch_jaccard_sorted(s_i[:size], q[:size], size)
    elif with_sketch:
        sketches = SketchRows([values[i] for i in with_sketch] + [q], size)
        n = len(with_sketch)
        jac[with_sketch] = sketch_jaccard_pairs(sketches, np.arange(n), np.full(n, n), min_jaccard, size)
    return jac


def candidate_jaccards_many(
    query_numbers: Sequence[int], stored: Sequence[Any], query_sketches: Sequence[Any], size: int, min_jaccard: float,
) -> np.ndarray:
    """:func:`candidate_jaccards` of many queries at once: candidate ``i`` belongs to query
    ``query_numbers[i]`` (a position in ``query_sketches``); NaN where either side has no sketch.

    Why: near_many used to verify once per query, and that per-call overhead (a SketchRows and a
    sketch_jaccard_pairs call for two or three candidates) cost more than the comparisons; here every
    (candidate, query) pair of a batch is compared in one call. The pairs and the arithmetic are the
    same, so the answers are identical."""
    qs = [sketch_values(q) for q in query_sketches]
    values = [sketch_values(s) for s in stored]
    pair_rows = [i for i, s in enumerate(values) if s is not None and qs[query_numbers[i]] is not None]
    jac = np.full(len(values), np.nan)
    if pair_rows:
        used = sorted({query_numbers[i] for i in pair_rows})
        at = {qi: len(pair_rows) + n for n, qi in enumerate(used)}
        sketches = SketchRows([values[i] for i in pair_rows] + [qs[qi] for qi in used], size)
        ib = np.fromiter((at[query_numbers[i]] for i in pair_rows), dtype=np.int64, count=len(pair_rows))
        jac[pair_rows] = sketch_jaccard_pairs(sketches, np.arange(len(pair_rows)), ib, min_jaccard, size)
    return jac


def may_reach(blobs: Sequence[Any], q: np.ndarray, size: int, min_jaccard: float) -> np.ndarray:
    """Indexes of the stored sketches (``array_send`` bytes or None) that may be at ``min_jaccard`` of
    the query sketch ``q``: those without a sketch (judged by distance), and those that share at least
    ``min_jaccard`` times the larger sketch's size of values with ``q`` (necessary: the estimate counts
    shared values among the union's bottom ``size``, at least as many as the larger sketch holds).

    Why: a scan's chunk is ~20,000 rows (:func:`simdb.store.candidates.scan_verified`); this decodes
    their bytes in one buffer and counts shared values by one binary search, so only the few rows that
    can pass reach :func:`candidate_jaccards`, which is made for a query's handful of candidates."""
    lens = np.fromiter((0 if b is None else len(b) for b in blobs), dtype=np.int64, count=len(blobs))
    n = np.where(lens > 20, (lens - 20) // 8, 0)  # elements per sketch (an empty array's header is shorter)
    words = np.frombuffer(b"".join(b for b in blobs if b is not None), dtype=np.int32)  # big-endian: swapped below
    starts = np.zeros(len(blobs), dtype=np.int64)
    np.cumsum(lens[:-1] // 4, out=starts[1:])
    kept = np.minimum(n, size)
    owner = np.repeat(np.arange(len(blobs)), kept)
    first = np.zeros(len(blobs) + 1, dtype=np.int64)
    np.cumsum(kept, out=first[1:])
    within = np.arange(len(owner)) - first[owner]
    values = words[starts[owner] + 6 + 2 * within].byteswap()  # only the values, not the lengths, swapped
    qs = np.sort(q).astype(np.int32)  # membership by binary search: np.isin sorts the whole chunk's values instead
    at = np.minimum(np.searchsorted(qs, values), len(qs) - 1)
    shared = np.bincount(owner[qs[at] == values], minlength=len(blobs))
    need = min_jaccard * np.maximum(kept, len(q)) - 1e-9
    return np.flatnonzero((n == 0) | (shared >= need))
