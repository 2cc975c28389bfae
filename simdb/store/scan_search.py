"""The exhaustive candidate stage: every row of a collection compared with one text query.

Why it exists: a banded collection's candidates are the rows sharing two of the query's 14 band keys
(:mod:`simdb.store.band_search`), a stage made for the collection's rule (Jaccard >= 0.8). For a
looser ``min_jaccard`` the keys reach too few of the pairs (two keys: 0.88 of the pairs at 0.75, 0.30
at 0.6; :func:`simdb.core.sketch.bands.reliable_threshold`), so answering such a query from the keys
would silently miss most of them. Below that threshold ``near(text)`` asks this module instead: the
answer is exact (the same verification stage, :func:`simdb.store.search.verified_matches`, over every
row that could pass it), and its cost grows with the collection, as a sequential scan's does.

What is read: the rows with a sketch whose size could reach the threshold (a pair at Jaccard ``t``
of bottom-``k`` sketches shares at least ``t`` times the larger sketch's values, so the stored
sketch holds between ``t |q|`` and ``|q| / t`` values: a cheap filter on ``cardinality`` in the
server, which leaves out the texts of very different lengths), and the rows without a sketch within
Hamming distance ``hamming_k`` (answered by distance, as everywhere). They stream through a
server-side cursor in chunks, each verified in one batched call, so memory stays bounded.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import numpy as np

from simdb.core.bits import to_signed
from simdb.results import Match
from simdb.store import sql as _sql
from simdb.store.search import sketch_values, verified_matches

__all__ = ["SCAN_SQL", "scan_bounds", "scan_verified"]

F = _sql.FINGERPRINTS
#: rows fetched and verified at a time
SCAN_CHUNK = 20_000

#: every row that could be a near-duplicate of the query (key, fp, distance, meta, sketch); parameters:
#: c, q (signed fp), k (Hamming radius of the rows without a sketch), lo / hi (sketch sizes that can reach t)
SCAN_SQL = f"""
SELECT f.key, f.fp, bit_count((f.fp # %(q)s::int8)::bit(64))::int AS distance, f.meta, array_send(f.shingles)
FROM {F} f
WHERE f.collection_id = %(c)s::int4
  AND CASE WHEN f.shingles IS NULL THEN bit_count((f.fp # %(q)s::int8)::bit(64)) <= %(k)s::int4
           ELSE cardinality(f.shingles) BETWEEN %(lo)s::int4 AND %(hi)s::int4 END
"""


def scan_bounds(query_values: int, min_jaccard: float, size: int) -> tuple[int, int]:
    """(fewest, most) values a stored sketch can hold and still be at ``min_jaccard`` of a query sketch
    of ``query_values`` values, sketches of ``size`` (a bound, never tighter than the maths: one value
    of slack each way; a stored array may hold more than ``size`` values, compared by its first ``size``)."""
    if min_jaccard <= 0.0 or query_values == 0:
        return 0, _ANY
    lo = max(0, math.floor(min_jaccard * query_values) - 1)
    hi = math.ceil(query_values / min_jaccard) + 1
    return lo, (_ANY if hi >= size else hi)


_ANY = 2**31 - 1


def _may_reach(rows: list[tuple], q: np.ndarray, size: int, min_jaccard: float) -> np.ndarray:
    """Indexes of the rows that may be at ``min_jaccard`` of the query sketch ``q``: the rows without a
    sketch (judged by distance), and those whose sketch shares at least ``min_jaccard`` times the larger
    sketch's size of values with ``q`` (necessary: the estimate counts shared values among the union's
    bottom ``size``, at least as many as the larger sketch holds).

    Why: a scan's chunk is ~20,000 rows; this decodes their ``array_send`` bytes (a header of 5 int4,
    then a length and a value per element) in one buffer and counts shared values by one binary search,
    so only the few rows that can pass reach :func:`simdb.store.search.verified_matches`, which is made
    for a query's handful of candidates."""
    blobs = [r[4] for r in rows]
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


def scan_verified(
    conn: Any, collection_id: int, fp: int, sketch: Any, verifier: Any, min_jaccard: float, hamming_k: int,
    exclude: str | None = None,
) -> list[Match]:
    """The verified near-duplicates of a text (unsigned ``fp``, its ``sketch``) among every row of the
    collection: :func:`simdb.store.search.verified_matches` over all of them, chunk by chunk, sorted
    as it sorts; ``exclude``: a key left out (a stored row's own)."""
    q = sketch_values(sketch)
    lo, hi = scan_bounds(0 if q is None else len(q[: verifier.size]), min_jaccard, verifier.size)
    if q is None:
        lo, hi = 1, 0  # no words: only the rows without a sketch, by distance
    params = {"c": collection_id, "q": to_signed(fp), "k": hamming_k, "lo": lo, "hi": hi}
    found: list[Match] = []
    # binary: a sketch comes as its array_send bytes, not as hex text twice their size (1M rows: 20 s, not 32)
    with conn.transaction(), conn.cursor(name=f"simdb_scan_{uuid.uuid4().hex[:12]}", binary=True) as cur:
        cur.execute(SCAN_SQL, params)
        while rows := cur.fetchmany(SCAN_CHUNK):
            if exclude is not None:
                rows = [r for r in rows if r[0] != exclude]
            if q is not None and len(rows) > 1:
                rows = [rows[i] for i in _may_reach(rows, q[: verifier.size], verifier.size, min_jaccard)]
            found += verified_matches(rows, sketch, verifier, min_jaccard, hamming_k)
    found.sort(key=lambda m: (m.jaccard is None, -(m.jaccard or 0.0), m.distance, m.key))
    return found
