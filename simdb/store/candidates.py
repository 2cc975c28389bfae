"""The candidate stage of every rule, in SQL: the rows a query could match, before verification.

One module for the stage, whatever the collection's rule (:mod:`simdb.index.rules`) asks of it:

* **Hamming** (and the rows without a sketch of a verified collection): the rows within ``k`` of a
  fingerprint, by the four 16-bit block indexes (``NEAR_SQL`` / ``NEAR_MANY_SQL`` and their verified
  twins in :mod:`simdb.store.sql`; the probes come from :func:`simdb.core.bits.block_query`, built here
  only, for every front end).
* **banded**: the rows sharing at least two of the query's 14 band keys (one in collections
  banded before scheme v3: :func:`simdb.core.sketch.bands.min_shared`; one probe of each band's btree,
  the same number of index probes whatever the collection's size), plus the rows without a sketch
  within the Hamming ``k`` (default 3); four probes at k = 3, not the 548 of K = 11.
* **every row** (:func:`scan_verified`): below the band keys' reach
  (:func:`simdb.core.sketch.bands.reliable_threshold`) the keys would silently miss most pairs, so a
  text query compares every row that could pass (exact, and as slow as a sequential scan).

The verification of the rows (Jaccard of sketches, pure arithmetic) is not here:
:func:`simdb.core.sketch.compare.candidate_jaccards`, made into answers by
:func:`simdb.results.verified_matches`. The only approximation is the S-curve's
(:func:`simdb.core.sketch.bands.s_curve`: a rule pair at Jaccard 0.8 is a candidate with probability
0.970, at 0.85 0.9967, at 0.9 0.99995).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np

from simdb.core.bits import MASKS, block_query, even_radii, to_signed
from simdb.core.sketch.compare import may_reach, sketch_values
from simdb.results import Match, verified_matches, verified_order
from simdb.store import sql as _sql

__all__ = [
    "BAND_NEAR_MANY_SQL", "BAND_NEAR_SQL", "SCAN_SQL", "array_text_params", "band_near", "band_near_params",
    "Statement", "band_rows_many", "bucket_stats", "fetch_rows", "near_many_params",
    "near_many_rows", "near_many_statement", "near_params", "near_statement", "scan_bounds",
    "scan_verified", "sketchless_rows_many",
]

def near_params(collection_id: int, fp: int, k: int, radii: Sequence[int] | None = None, limit: int | None = None) -> dict:
    """Bound parameters of ``NEAR_SQL`` for unsigned ``fp`` (k already checked)."""
    query = block_query(fp, k, radii)
    p = query.probes
    return {
        "c": collection_id,
        "p0": p[0],
        "p1": p[1],
        "p2": p[2],
        "p3": p[3],
        "q": query.signed,
        "k": k,
        "limit": limit,
    }


_MASKS_NP = {t: np.array(m, dtype=np.int64) for t, m in MASKS.items() if t >= 0}


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
        groups[tuple(even_radii(k))] = qidx
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


#: a statement, sans I/O: (SQL, its ``%(name)s`` parameters, lists of ints as Python lists)
Statement = tuple[str, dict]


def near_statement(params: dict) -> Statement:
    """One near query's statement (``params`` from :func:`near_params`): rows (key, fp signed,
    distance, meta).

    Why statements and not only functions that run them: the sync index runs them on a psycopg
    connection (:func:`fetch_rows`), the async one awaits them on an ``AsyncConnection``
    (:mod:`simdb.store.async_rows`); both take the SQL and its parameters from here."""
    return _sql.NEAR_SQL, params


def near_many_statement(params: dict) -> Statement:
    """One batched near query's statement (``params`` from :func:`near_many_params`): the rows of
    :func:`near_statement`, each led by the query's position in the batch."""
    return _sql.NEAR_MANY_SQL, params


def fetch_rows(conn, statement: Statement) -> list[tuple]:
    """The rows of ``statement`` on a psycopg connection, prepared, its int lists sent as array text
    (:func:`array_text_params`)."""
    sql, params = statement
    return conn.execute(sql, array_text_params(params), prepare=True).fetchall()


def near_many_rows(conn, params: dict) -> list[tuple]:
    """Rows of one batched near query (``params`` from :func:`near_many_params`): :func:`near_many_statement`'s."""
    return fetch_rows(conn, near_many_statement(params))


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


F = _sql.FINGERPRINTS
_BANDS = range(1, _sql.BANDS + 1)


def _band_part() -> str:
    """Rows sharing the query's key in some band (%(bk)s: its keys in band order), as ids: one
    probe of each band's btree ``(collection_id, (bands[i]))``."""
    return "\n  UNION ALL ".join(
        f"SELECT f.id FROM {F} f WHERE f.collection_id = %(c)s::int4 AND f.bands IS NOT NULL "
        f"AND f.bands[{i}] = (%(bk)s::int4[])[{i}]"
        for i in _BANDS
    )


def _band_join(i: int) -> str:
    """Band ``i``'s candidates of the batch: one probe of its btree per (query, key) of the band.
    Why LATERAL ... OFFSET 0: as a plain join the planner hash-joined the keys with a sequential
    scan of the whole table per band (14 scans a statement, measured at 17,500 rows), a cost that
    grows with the collection; the fence keeps one index probe per key, whatever the row counts."""
    return (
        f"SELECT p.qi, p.qfp, f.id FROM p CROSS JOIN LATERAL (SELECT f.id FROM {F} f WHERE "
        f"f.collection_id = %(c)s::int4 AND f.bands IS NOT NULL AND f.bands[{i}] = p.bk OFFSET 0) f WHERE p.bi = {i}"
    )


def _hamming_part() -> str:
    """Rows without a sketch within %(k)s of the query by the block indexes (NEAR_SQL's candidate
    part), as ids. Rows with a sketch (and so band keys) are candidates by their keys only, in
    ``near_many`` and ``pairs()`` too (:func:`simdb.store.pairs.band_id_pairs`), so that all answer the same.

    Gated by :data:`simdb.store.sql.HAS_SKETCHLESS` (an uncorrelated EXISTS: a one-time InitPlan,
    one descent of an index that holds only the sketchless rows): a collection without them, the
    usual banded one, skips the four block probes, which read ~N/65,536 index entries each
    (~600 at 10M rows) to find nothing."""
    blocks = "\n    UNION ALL ".join(_sql.block_candidates(b) for b in range(4))
    return f"""SELECT f.id FROM (SELECT DISTINCT fp FROM (
    {blocks}
  ) u) h JOIN {F} f ON f.collection_id = %(c)s::int4 AND f.b0 = ((h.fp >> 48) & 65535)::int AND f.fp = h.fp
  WHERE f.shingles IS NULL AND {_sql.HAS_SKETCHLESS}"""


#: one text query: (key, fp, distance, meta, array_send(sketch)) of its candidates, each fetched by its
#: primary key. Why LATERAL ... OFFSET 0 there: the planner estimates a band probe at
#: DEFAULT_EQ_SEL of the rows (149 of 30,000), so ~2,000 candidates, and joined them by hashing a
#: sequential scan of the whole table: 8 ms at 30,000 rows, 23 ms at 100,000, for the ~1 candidate
#: a query really has (bench_bands.py, a one-collection database); the fence keeps one primary-key
#: probe per candidate, whatever the collection's size. A row is a band candidate when it shares at least
#: ``ms`` of the keys (:func:`simdb.core.sketch.bands.min_shared`: 2 in scheme v3, 1 before). Parameters:
#: c, bk (int4[] band keys, in band order), ms (keys shared), q (signed fp), k (the Hamming radius of
#: sketch-less rows), p0..p3
BAND_NEAR_SQL = f"""
WITH m AS (
  SELECT b.id FROM (
  {_band_part()}
  ) b GROUP BY b.id HAVING count(*) >= %(ms)s::int4
  UNION
  {_hamming_part()}
)
SELECT f.key, f.fp, bit_count((f.fp # %(q)s::int8)::bit(64))::int AS distance, f.meta, array_send(f.shingles)
FROM m CROSS JOIN LATERAL (SELECT f.key, f.fp, f.meta, f.shingles FROM {F} f WHERE f.id = m.id OFFSET 0) f
"""

#: many text queries' band candidates: (query number, key, fp, distance, meta, sketch); parameters:
#: c, qi (int4[]: query number per key), bi (int4[]: the key's band, 1..14), bk (int4[]: the keys),
#: qfp (int8[]: the query's signed fp per key), ms (keys shared). Per band, a nested loop of probes of
#: its btree, one per (query, key) of that band (forced: :func:`_band_join`); the hits counted per
#: query and row (one per band shared) and kept at ``ms`` or more, before any row is fetched; each
#: kept hit fetched by its primary key (forced too: the planner hash-joined them with a scan of the table).
_JOINS = "\n    UNION ALL ".join(_band_join(i) for i in _BANDS)
BAND_NEAR_MANY_SQL = f"""
WITH p AS MATERIALIZED (
  SELECT * FROM unnest(%(qi)s::int4[], %(bi)s::int4[], %(bk)s::int4[], %(qfp)s::int8[]) AS p(qi, bi, bk, qfp)
), hits AS (
  SELECT u.qi, u.qfp, u.id FROM (
    {_JOINS}
  ) u GROUP BY u.qi, u.qfp, u.id HAVING count(*) >= %(ms)s::int4
)
SELECT h.qi, f.key, f.fp, bit_count((f.fp # h.qfp)::bit(64))::int AS distance, f.meta, array_send(f.shingles)
FROM hits h CROSS JOIN LATERAL (SELECT f.key, f.fp, f.meta, f.shingles FROM {F} f WHERE f.id = h.id OFFSET 0) f
"""


def band_near_params(collection_id: int, fp: int, keys: str, hamming_k: int, shared: int) -> dict:
    """Parameters of :data:`BAND_NEAR_SQL`: unsigned ``fp``, ``keys`` as int4[] text, ``shared`` the
    keys a candidate shares (:func:`simdb.core.sketch.bands.min_shared` of the collection's scheme)."""
    params = array_text_params(near_params(collection_id, fp, hamming_k))  # k checked by the caller (the API)
    params["bk"] = keys
    params["ms"] = shared
    return params


def band_near(conn, collection_id: int, fp: int, keys: Any, hamming_k: int, shared: int) -> list[tuple]:
    """The candidates of one text query of a banded collection, in one call: unsigned ``fp``, its
    band keys (an int array, or the int4[] text a memo kept), ``hamming_k`` for the rows without a
    sketch, ``shared`` the keys a candidate shares; rows (key, fp signed, distance, meta, sketch)."""
    keys_text = keys if isinstance(keys, str) else "{}" if keys is None else "{" + ",".join(map(str, keys.tolist())) + "}"
    params = band_near_params(collection_id, fp, keys_text, hamming_k, shared)
    return conn.execute(BAND_NEAR_SQL, params, prepare=True).fetchall()


def band_rows_many(conn, collection_id: int, fps: list[int], keys: list[np.ndarray], shared: int) -> list[tuple]:
    """Band candidates of many text queries (query number = position in ``fps`` / ``keys``): the rows
    sharing at least ``shared`` of a query's keys."""
    n = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    qi = np.repeat(np.arange(len(keys), dtype=np.int64), n)
    bi = np.concatenate([np.arange(1, len(k) + 1) for k in keys]) if keys else np.zeros(0, dtype=np.int64)
    signed = np.array([to_signed(f) for f in fps], dtype=np.int64)
    flat = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int32)
    order = np.lexsort((flat, bi))  # walk each band's index in key order
    params = array_text_params({"c": collection_id, "qi": qi[order].tolist(), "bi": bi[order].tolist(),
                                "bk": flat[order].tolist(), "qfp": signed[qi[order]].tolist(), "ms": shared})
    return conn.execute(BAND_NEAR_MANY_SQL, params, prepare=True).fetchall()


#: near_many's Hamming part in a banded collection (:data:`simdb.store.sql.NEAR_MANY_VERIFY_SQL`'s
#: parameters): only the rows without a sketch, the only ones it answers for. Why: a row with a
#: sketch is a candidate by its band keys; sent here as well, its sketch travelled twice (dedup's
#: second look-up found every survivor itself at distance 0, a kilobyte of sketch each).
# Gated like BAND_NEAR_SQL's Hamming part: the probes (CTE p) are empty unless the collection holds a
# sketchless row (HAS_SKETCHLESS, a one-time filter), so a dedup into a collection without them
# pays one index descent a batch instead of the block probes of every record (10-15 % of a dedup's time).
SKETCHLESS_MANY_SQL = _sql.NEAR_MANY_VERIFY_SQL.replace(
    "AS p(qi, blk, val, qfp)\n", f"AS p(qi, blk, val, qfp)\n  WHERE {_sql.HAS_SKETCHLESS}\n"
) + "WHERE f.shingles IS NULL\n"
assert SKETCHLESS_MANY_SQL.count("EXISTS") == 1


def sketchless_rows_many(conn, params: dict) -> list[tuple]:
    """Rows without a sketch within the Hamming radius of many queries (``params`` from
    :func:`simdb.store.candidates.near_many_params`), led by the query number."""
    return conn.execute(SKETCHLESS_MANY_SQL, array_text_params(params), prepare=True).fetchall()


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


def scan_verified(
    conn: Any, collection_id: int, fp: int, sketch: Any, verifier: Any, min_jaccard: float, hamming_k: int,
    exclude: str | None = None,
) -> list[Match]:
    """The verified near-duplicates of a text (unsigned ``fp``, its ``sketch``) among every row of the
    collection: :func:`simdb.results.verified_matches` over all of them, chunk by chunk, sorted
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
                rows = [rows[i] for i in may_reach([r[4] for r in rows], q[: verifier.size], verifier.size, min_jaccard)]
            found += verified_matches(rows, sketch, verifier, min_jaccard, hamming_k)
    found.sort(key=verified_order)
    return found
