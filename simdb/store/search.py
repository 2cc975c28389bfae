"""Search in the store: the bound parameters of the near queries (``simdb.store.sql.NEAR_SQL`` /
``NEAR_MANY_SQL`` and their verified twins) and the verification stage over their rows.

Shared by every front end that searches (``SimhashIndex``, ``simdb.aio``, ``add_if_unique`` in
:mod:`simdb.index.duplicates`, the legacy Jaccard collections), so that probes are built one way only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from simdb.core import probes as _probes
from simdb.core.bits import BITS, to_signed, to_unsigned
from simdb.core.sketch.compare import SketchRows, sketch_jaccard_pairs, sketch_jaccard_sorted
from simdb.results import Match, match
from simdb.store import sql as _sql

__all__ = [
    "array_text_params", "bucket_stats", "near_many_params", "near_many_rows", "near_params", "near_rows", "sketch_values",
    "hamming_answers", "verified_matches",
]



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
#: (:func:`simdb.core.sketch.compare.sketch_jaccard_sorted`, a few numpy calls a pair); more go
#: through one batched :func:`simdb.core.sketch.compare.sketch_jaccard_pairs` call
FEW_CANDIDATES = 8


def verified_matches(
    rows: Iterable[tuple], query_sketch, verifier, min_jaccard: float, hamming_k: int, exclude: str | None = None,
) -> list[Match]:
    """The verification stage over candidate rows (key, fp signed, distance, meta, sketch):
    the kept ones as Matches, by Jaccard (highest first; rows judged by distance last), distance, key.
    ``exclude``: a key never kept (``near_key``'s own row; the row ``add_if_unique`` would replace).

    :meth:`simdb.core.sketch.Verifier.judge` for every row, vectorised: all the candidates' sketches
    against the query's in one :func:`simdb.core.sketch.compare.sketch_jaccard_pairs` call (a query may have
    thousands of candidates in a collection full of partly overlapping texts)."""
    rows = [r for r in rows if r[0] != exclude] if exclude is not None else list(rows)
    stored = [sketch_values(r[4]) for r in rows]
    q = sketch_values(query_sketch)
    size = verifier.size
    jac: list[float | None] = [None] * len(rows)
    with_sketch = [i for i, s in enumerate(stored) if s is not None] if q is not None else []
    if q is not None and len(with_sketch) <= FEW_CANDIDATES:  # a text query's usual one or two
        for i in with_sketch:
            s_i = stored[i]
            assert s_i is not None
            jac[i] = sketch_jaccard_sorted(s_i[:size], q[:size], size)
    elif with_sketch:
        sketches = SketchRows([stored[i] for i in with_sketch] + [q], size)
        n = len(with_sketch)
        j = sketch_jaccard_pairs(sketches, np.arange(n), np.full(n, n), min_jaccard, size)
        for row, i in enumerate(with_sketch):
            jac[i] = float(j[row])
    out = []
    for i, (key, f, d, meta, _) in enumerate(rows):
        j_i = jac[i]
        if j_i is None:  # nothing to verify with: the Hamming distance decides
            if d <= hamming_k:
                out.append(match(key, f, d, meta, None))
        elif j_i >= min_jaccard:
            out.append(match(key, f, d, meta, j_i))
    out.sort(key=lambda m: (m.jaccard is None, -(m.jaccard or 0.0), m.distance, m.key))
    return out





def near_params(collection_id: int, fp: int, k: int, radii: Sequence[int] | None = None, limit: int | None = None) -> dict:
    """Bound parameters of ``NEAR_SQL`` for unsigned ``fp`` (k already checked)."""
    p = _probes.probes(fp, k, radii)
    return {
        "c": collection_id,
        "p0": p[0],
        "p1": p[1],
        "p2": p[2],
        "p3": p[3],
        "q": to_signed(fp),
        "k": k,
        "limit": limit,
    }


_MASKS_NP = {t: np.array(m, dtype=np.int64) for t, m in _probes.MASKS.items() if t >= 0}


def near_many_params(
    collection_id: int, fps: Sequence[int], k: int, radii: Sequence[Sequence[int]] | None = None
) -> dict:
    """Bound parameters of ``NEAR_MANY_SQL`` for unsigned ``fps`` (query number = position).

    ``radii`` gives one radius assignment per query (default: even radii for all).
    Probes are sorted by (block, value) so each block index is walked in order.
    """
    n = len(fps)
    u = np.array(fps, dtype=np.uint64)
    signed = u.view(np.int64)
    shifts = np.array([48, 32, 16, 0], dtype=np.uint64)
    qb = ((u[:, None] >> shifts[None, :]) & np.uint64(0xFFFF)).astype(np.int64)  # n x 4
    qidx = np.arange(n, dtype=np.int64)
    groups: dict[tuple[int, ...], np.ndarray] = {}
    if radii is None:
        groups[tuple(_probes.even_radii(k))] = qidx
    else:
        keys = [tuple(r) for r in radii]
        for r in set(keys):
            groups[r] = np.array([i for i, kk in enumerate(keys) if kk == r], dtype=np.int64)
    parts_blk, parts_val, parts_qi = [], [], []
    for r, members in groups.items():
        for b, t in enumerate(r):
            if t < 0:
                continue
            masks = _MASKS_NP[t]
            vals = (qb[members, b][:, None] ^ masks[None, :]).ravel()
            parts_val.append(vals)
            parts_qi.append(np.repeat(members, len(masks)))
            parts_blk.append(np.full(vals.shape[0], b, dtype=np.int64))
    if parts_val:
        blk = np.concatenate(parts_blk)
        val = np.concatenate(parts_val)
        qi = np.concatenate(parts_qi)
        order = np.lexsort((qi, val, blk))
        blk, val, qi = blk[order], val[order], qi[order]
        qfp = signed[qi]
    else:
        blk = val = qi = qfp = np.zeros(0, dtype=np.int64)
    return {
        "c": collection_id,
        "k": k,
        "qi": qi.tolist(),
        "blk": blk.tolist(),
        "val": val.tolist(),
        "qfp": qfp.tolist(),
    }


def array_text_params(params: dict) -> dict:
    """``params`` with each list of ints as PostgreSQL array text (``'{1,2,3}'``); the statements
    cast them (``%(p0)s::int4[]``), so the SQL is unchanged.

    Why: psycopg dumps a Python list element by element, checking each with a regular
    expression (~0.5 us an element); a text query at K = 11 sends 548 probes, which cost more
    than the rest of the Python side of ``near``. ``str`` of each int and one join is ~10x less."""
    return {
        name: "{" + ",".join(map(str, value)) + "}" if isinstance(value, list) else value
        for name, value in params.items()
    }


def near_rows(conn, params: dict, verified: bool = False) -> list[tuple]:
    """Rows of one near query (``params`` from :func:`near_params`): (key, fp signed, distance,
    meta), and the stored sketch too when ``verified`` (the verification stage's input)."""
    statement = _sql.NEAR_VERIFY_SQL if verified else _sql.NEAR_SQL
    return conn.execute(statement, array_text_params(params), prepare=True).fetchall()


def near_many_rows(conn, params: dict, verified: bool = False) -> list[tuple]:
    """Rows of one batched near query (``params`` from :func:`near_many_params`), each led by
    the query's position in the batch."""
    statement = _sql.NEAR_MANY_VERIFY_SQL if verified else _sql.NEAR_MANY_SQL
    return conn.execute(statement, array_text_params(params), prepare=True).fetchall()


def bucket_stats(conn) -> tuple[float, list[tuple]]:
    """(rows in the table, the planner's estimate; per block column: (column, most common
    values, their frequencies)) from pg_class / pg_stats, for the adaptive probe radii."""
    reltuples = conn.execute(
        "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", (_sql.FINGERPRINTS,)
    ).fetchone()
    n = max(float(reltuples[0]) if reltuples else 0.0, 0.0)
    rows = conn.execute(
        "SELECT attname, most_common_vals::text::int[], most_common_freqs FROM pg_stats "
        "WHERE tablename = %s AND attname = ANY(%s) AND schemaname = ANY(current_schemas(false))",
        (_sql.FINGERPRINTS, list(_sql.BLOCK_COLUMNS)),
    ).fetchall()
    return n, rows


def hamming_answers(
    n: int, live: list[int], pieces: list[list[int]], results: Iterable[list[tuple]], limit: int | None
) -> list[list[Match]]:
    """Hamming answers of near_many: each query's rows (``NEAR_MANY_SQL``'s, per piece of queries, ``qi``
    the position in the piece) by distance then key, cut at ``limit``."""
    out: list[list[Match]] = [[] for _ in range(n)]
    for piece, rows in zip(pieces, results):
        for qi, key, f, d, meta in rows:
            out[piece[qi]].append(Match(key, to_unsigned(f), d, 1.0 - d / BITS, None, meta))
    for i in live:
        if out[i]:
            out[i].sort(key=lambda m: (m.distance, m.key))
            if limit is not None:
                del out[i][limit:]
    return out
