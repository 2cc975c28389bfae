"""The candidate stage of banded verified collections (issue 26): rows sharing an LSH band key.

A banded collection's row stores the :mod:`simdb.core.sketch.bands` keys of its full shingle set in
``simdb_fingerprints.bands`` (a btree per band, migration 0008). A text query's candidates are

* the rows that share its keys in at least two of the 14 bands (one in collections banded before
  scheme v3: :func:`simdb.core.sketch.bands.min_shared`; ``bands[i] = keys[i]``: one probe of each
  band's btree, the same number of index probes whatever the collection's size), and
* the rows without a sketch (hence without band keys) within Hamming distance ``hamming_k`` (default 3) of its
  fingerprint, by the four block indexes at that small radius: how a row without a sketch
  (added by fingerprint) is answered, as before; four probes at k = 3, not the 548 of K = 11.

Then the verification stage as for every verified collection
(:func:`simdb.store.search.verified_matches`): a row with a sketch is kept when its Jaccard with
the query is >= the threshold, a row without one when its distance is <= ``hamming_k``. One
pipeline, candidates then verification; the only approximation is the S-curve's
(:func:`simdb.core.sketch.bands.s_curve`: a rule pair at Jaccard 0.8 is a candidate with probability 0.970,
at 0.85 0.9967, at 0.9 0.99995).

``add_if_unique`` keeps its contract (:mod:`simdb.store.unique`): a writer takes transaction-scoped
advisory locks on its band keys (and on the band keys of the row it replaces) besides the block
locks of the Hamming part, sorted, before it searches; two writers that would be candidates of
each other share a band key, hence a lock, and the second sees the first's row.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simdb.core.bits import to_signed
from simdb.core.sketch.compare import SketchRows, sketch_jaccard_pairs
from simdb.results import AddResult, Match, match
from simdb.store import collection_guard as _guard
from simdb.store import sql as _sql
from simdb.store.connect import driver_connection, in_transaction, retried
from simdb.store.search import array_text_params, near_params, sketch_values, verified_matches
from simdb.store.unique import LOCK_TAG, key_lock_statement, lock_keys

__all__ = [
    "BAND_LOCK_TAG",
    "BAND_NEAR_MANY_SQL",
    "BAND_NEAR_SQL",
    "add_if_unique_banded",
    "band_lock_keys",
    "band_near_params",
    "band_near_rows",
    "band_rows_many",
    "run_add_if_unique_banded",
    "sketchless_rows_many",
    "verified_matches_many",
]

F = _sql.FINGERPRINTS
#: high 12 bits of a band lock key (simdb.store.unique.LOCK_TAG + 1: apart from the block locks)
BAND_LOCK_TAG = 0x5D9
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
    ``near_many`` and ``pairs()`` too (:mod:`simdb.store.band_pairs`), so that all answer the same.

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


def band_near_rows(conn, params: dict) -> list[tuple]:
    """The candidates of one text query (psycopg connection): rows for ``verified_matches``."""
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


def verified_matches_many(
    rows: list[tuple], query_sketches: list, verifier: Any, min_jaccard: float, hamming_k: int
) -> dict[int, list[Match]]:
    """:func:`simdb.store.search.verified_matches` of many queries at once: ``rows`` are
    (query number, key, fp signed, distance, meta, sketch), ``query_sketches`` the queries' sketches
    by number; the kept Matches per query number, in verified_matches' order.

    Why: near_many used to call verified_matches once per query, and that per-call overhead (a
    SketchRows and a sketch_jaccard_pairs call for two or three candidates) cost more than the
    comparisons; here every (candidate, query) pair of a batch is compared in one call. The
    pairs and the arithmetic are the same, so the answers are identical."""
    qs = [sketch_values(q) for q in query_sketches]
    stored = [sketch_values(r[5]) for r in rows]
    pair_rows = [i for i, s in enumerate(stored) if s is not None and qs[rows[i][0]] is not None]
    jac: list[float | None] = [None] * len(rows)
    if pair_rows:
        used = sorted({rows[i][0] for i in pair_rows})
        at = {qi: len(pair_rows) + n for n, qi in enumerate(used)}
        sketches = SketchRows([stored[i] for i in pair_rows] + [qs[qi] for qi in used], verifier.size)
        ib = np.fromiter((at[rows[i][0]] for i in pair_rows), dtype=np.int64, count=len(pair_rows))
        j = sketch_jaccard_pairs(sketches, np.arange(len(pair_rows)), ib, min_jaccard, verifier.size)
        for row, i in enumerate(pair_rows):
            jac[i] = float(j[row])
    out: dict[int, list[Match]] = {}
    for i, (qi, key, f, d, meta, _) in enumerate(rows):
        j_i = jac[i]
        if j_i is None:  # nothing to verify with: the Hamming distance decides
            if d <= hamming_k:
                out.setdefault(qi, []).append(match(key, f, d, meta, None))
        elif j_i >= min_jaccard:
            out.setdefault(qi, []).append(match(key, f, d, meta, j_i))
    for found in out.values():
        found.sort(key=lambda m: (m.jaccard is None, -(m.jaccard or 0.0), m.distance, m.key))
    return out


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
    :func:`simdb.store.search.near_many_params`), led by the query number."""
    return conn.execute(SKETCHLESS_MANY_SQL, array_text_params(params), prepare=True).fetchall()


def band_lock_keys(collection_id: int, keys: np.ndarray) -> list[int]:
    """Advisory-lock keys of a writer's band keys: 12-bit tag | 20 bits of the collection id |
    the 32-bit band key (two collections 2^20 ids apart share locks: more waiting, never less)."""
    base = (BAND_LOCK_TAG << 52) | ((int(collection_id) & 0xFFFFF) << 32)
    return [base | (int(k) & 0xFFFFFFFF) for k in keys.tolist()]


# The advisory locks of a banded writer, in one sorted statement: its own (block locks of the
# Hamming part, band locks), plus the block values and band keys of the row it would replace.
_LOCK_BANDED = f"""
SELECT count(*) FROM (
  SELECT pg_advisory_xact_lock(l.k) FROM (
    SELECT unnest(CAST(%(keys)s AS int8[])) AS k
    UNION
    SELECT CAST(%(base)s AS int8) + (i.i::int8 << 18) + (ARRAY[o.b0, o.b1, o.b2, o.b3])[i.i + 1]
    FROM (SELECT b0, b1, b2, b3 FROM {F} WHERE collection_id = %(c)s AND key = %(key)s FOR UPDATE) o
    CROSS JOIN generate_series(0, 3) AS i(i)
    UNION
    SELECT CAST(%(bbase)s AS int8) + (b.v::int8 & 4294967295)
    FROM {F} o CROSS JOIN unnest(o.bands) AS b(v) WHERE o.collection_id = %(c)s AND o.key = %(key)s
  ) l WHERE l.k IS NOT NULL ORDER BY l.k
) s"""

_UPSERT_BANDED = f"""
INSERT INTO {F} (collection_id, key, fp, meta, shingles, bands, text_z)
VALUES (%(c)s, %(key)s, %(fp)s, CAST(%(meta)s AS jsonb), CAST(%(shingles)s AS int4[]), CAST(%(bands)s AS int4[]),
        CAST(%(tz)s AS bytea))
ON CONFLICT (collection_id, key) DO UPDATE
  SET fp = EXCLUDED.fp, meta = EXCLUDED.meta, shingles = EXCLUDED.shingles, bands = EXCLUDED.bands,
      text_z = EXCLUDED.text_z, created_at = now()
"""


def add_if_unique_banded(
    conn: Any, collection_id: int, key: str, fp: int | None, meta_json: str | None,
    shingles: list[int] | None, keys: np.ndarray | None, verify: tuple[Any, float, int],
    text_z: bytes | None = None, *, shared: int, version: str | None = None,
) -> AddResult:
    """``add_if_unique`` of a text in a banded collection, inside the caller's transaction
    (``fp`` unsigned or None: featureless, always inserted; ``keys``: the text's band keys;
    ``verify`` = (verifier, min_jaccard, hamming_k)). Locks, then (a new snapshot) candidates and
    verification, then the upsert only if nothing passed: :func:`simdb.store.unique.add_if_unique`'s
    contract, on this collection's candidate stage (``text_z``: the kept text, stored with the row;
    ``shared``: the keys a candidate shares; ``conn``: a psycopg connection, or a SQLAlchemy one's, in a
    transaction). The locks stay on every band key: two writers sharing one key take one lock, a
    superset of the pairs that could be candidates of each other."""
    conn = driver_connection(conn)
    verifier, t, hk = verify
    own = [] if fp is None else lock_keys(collection_id, fp, hk)
    if keys is not None:
        own += band_lock_keys(collection_id, keys)
    with _guard.refused(collection_id):  # first: writers of one key one at a time; the configuration still current
        conn.execute(*key_lock_statement(collection_id, key, version))
    conn.execute(_LOCK_BANDED, {
        "keys": sorted(own), "base": (LOCK_TAG << 52) | ((int(collection_id) & 0xFFFFFFFF) << 20),
        "bbase": (BAND_LOCK_TAG << 52) | ((int(collection_id) & 0xFFFFF) << 32), "c": collection_id, "key": key,
    })
    bands = None if keys is None else "{" + ",".join(map(str, keys.tolist())) + "}"
    row = {"c": collection_id, "key": key, "fp": None if fp is None else to_signed(fp), "meta": meta_json,
           "shingles": shingles, "bands": bands, "tz": text_z}
    if fp is not None:
        params = band_near_params(collection_id, fp, bands or "{}", hk, shared)
        found = verified_matches(conn.execute(BAND_NEAR_SQL, params).fetchall(), shingles, verifier, t, hk,
                                 exclude=key)  # the key's own row is replaced, not a match (simdb.store.unique)
        if found:
            return AddResult(False, found)
    conn.execute(_UPSERT_BANDED, row)
    return AddResult(True, [])


def run_add_if_unique_banded(engine: Any, *args: Any, retries: int = 5, shared: int,
                             version: str | None = None) -> AddResult:
    """:func:`add_if_unique_banded` in a transaction of its own (``engine``: an Engine or a psycopg
    connection, as :func:`simdb.store.unique.run_add_if_unique`), retried on deadlock or
    serialization failure (:data:`simdb.store.connect.RETRY_SQLSTATES`) as the Hamming one is."""

    def run() -> AddResult:
        with in_transaction(engine) as conn:
            return add_if_unique_banded(conn, *args, shared=shared, version=version)

    return retried(run, retries)
