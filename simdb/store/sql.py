"""SQL text shared by the migrations and the query paths.

Everything here is plain PostgreSQL (14+). Values are always sent as bound
parameters; the only identifiers spliced into statements are the constants of
this module (table, column and index names).

Search is exact for Hamming distance ``k`` in 0..11 with the four 16-bit block
columns (generalized pigeonhole, see ``simdb.core.bits``): the query sends, per
block, the array of block values to probe; a row is a candidate if any block
matches, and the candidates are filtered with ``bit_count((fp # q)::bit(64))``.
"""

from __future__ import annotations

import re

__all__ = [
    "BLOCK_COLUMNS",
    "block_candidates",
    "block_sql",
    "BLOCK_INDEXES",
    "COLLECTIONS",
    "FINGERPRINTS",
    "FUNCTIONS_DDL",
    "DROP_FUNCTIONS_DDL",
    "HAMMING_SQL",
    "HAS_SKETCHLESS",
    "SKETCHLESS_INDEX",
    "SKETCHLESS_WHERE",
    "NEAR_MANY_SQL",
    "NEAR_BITMAP_SQL",
    "NEAR_SQL",
    "NEAR_VERIFY_SQL",
    "NEAR_MANY_VERIFY_SQL",
    "SKETCH_JACCARD_TEMPLATE",
    "render_sketch_jaccard",
]

COLLECTIONS = "simdb_collections"
FINGERPRINTS = "simdb_fingerprints"
BLOCK_COLUMNS = ("b0", "b1", "b2", "b3")
#: one btree per block: (collection_id, b_i, fp). Chosen by measurement (docs/design.md, "Index layout, measured"):
#: the collection first keeps collections apart, and fp as the last key column
#: lets the candidate filter run on an index-only scan (no heap fetch per
#: candidate) and lets a match be fetched back by (collection_id, b0, fp).
BLOCK_INDEXES = {f"ix_simdb_fingerprints_{b}": ("collection_id", b, "fp") for b in BLOCK_COLUMNS}
UNIQUE_KEY = "uq_simdb_fingerprints_collection_key"
#: one btree per band of the band keys of banded verified rows (migration 0008; partial: bands IS NOT NULL):
#: name -> the indexed expressions. Why btrees and not one GIN on the array: measured on 100,000 rows of
#: 14 random int4 keys, GIN 784 B/row (every key is its own entry), 14 btrees 317 B/row (a 16-byte
#: tuple a key; the collection id costs nothing beside an int4 key, both fit the tuple's alignment).
BANDS = 14
BANDS_INDEXES = {f"ix_simdb_fingerprints_band{i}": ("collection_id", f"(bands[{i}])") for i in range(1, BANDS + 1)}
#: the rows stored without a sketch but with a fingerprint (migration 0012): a banded collection answers
#: them by Hamming distance, and looks for them only when this index holds one of its rows
SKETCHLESS_INDEX = "ix_simdb_fingerprints_sketchless"
SKETCHLESS_WHERE = "shingles IS NULL AND fp IS NOT NULL"
#: does collection %(c)s hold a row without a sketch? (one probe of SKETCHLESS_INDEX; uncorrelated,
#: so the planner evaluates it once, as an InitPlan, and skips what it gates when false)
HAS_SKETCHLESS = (
    f"EXISTS (SELECT 1 FROM {FINGERPRINTS} s WHERE s.collection_id = %(c)s::int4 AND s.{SKETCHLESS_WHERE.replace(' AND ', ' AND s.')})"
)


def block_sql(column: str = "fp", i: int = 0) -> str:
    """SQL of block ``i`` (b0 = most significant 16 bits) of a bigint fingerprint column,
    e.g. ``((fp >> 48) & 65535)::int``: the expression of the generated ``b0..b3`` columns,
    shared by the store's models and the SQLAlchemy/Alembic integration."""
    if not 0 <= i < len(BLOCK_COLUMNS):
        raise ValueError(f"block index must be in 0..{len(BLOCK_COLUMNS) - 1}, got {i}")
    shift = 16 * (len(BLOCK_COLUMNS) - 1 - i)
    if shift:
        return f"(({column} >> {shift}) & 65535)::int"
    return f"({column} & 65535)::int"
COLLECTION_FK = "simdb_fingerprints_collection_id_fkey"

#: Hamming distance of two bigint fingerprints, as SQL (``bit_count`` takes bit, not bigint)
HAMMING_SQL = "bit_count(({a} # {b})::bit(64))::int"


# ---------------------------------------------------------------------------
# Functions for analysts (and for simdb_near). Created by migration 0001.
# ---------------------------------------------------------------------------

FUNCTIONS_DDL = [
    # Hamming distance; a one-expression SQL function so the planner inlines it.
    """
CREATE OR REPLACE FUNCTION simdb_hamming(a bigint, b bigint) RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN bit_count((a # b)::bit(64))::int
""",
    # The four 16-bit blocks, most significant first (the values of b0..b3).
    """
CREATE OR REPLACE FUNCTION simdb_blocks(fp bigint) RETURNS int[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN ARRAY[((fp >> 48) & 65535)::int, ((fp >> 32) & 65535)::int,
             ((fp >> 16) & 65535)::int, (fp & 65535)::int]
""",
    # Generalized-pigeonhole radii for k (evenly spread; -1 = do not probe the block).
    """
CREATE OR REPLACE FUNCTION simdb_radii(k int) RETURNS int[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  s int := k - 3;
  r int[] := ARRAY[-1, -1, -1, -1];
BEGIN
  IF k < 0 OR k > 11 THEN
    RAISE EXCEPTION 'simdb: k must be between 0 and 11, got %', k
      USING ERRCODE = '22023',
            HINT = 'The four 16-bit blocks answer Hamming distances up to 11 exactly. For larger k '
                   'scan: WHERE collection_id = ... AND simdb_hamming(fp, q) <= k (a sequential scan).';
  END IF;
  FOR i IN 1..4 LOOP
    IF s < 0 THEN
      r[i] := CASE WHEN i <= k + 1 THEN 0 ELSE -1 END;
    ELSE
      r[i] := s / 4 + CASE WHEN i <= s % 4 THEN 1 ELSE 0 END;
    END IF;
  END LOOP;
  RETURN r;
END $$
""",
    # Every 16-bit value within Hamming distance `radius` (0..2) of `v`; empty for radius -1.
    """
CREATE OR REPLACE FUNCTION simdb_ball(v int, radius int) RETURNS int[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (
  SELECT coalesce(array_agg(v # m ORDER BY m), '{}'::int[]) FROM (
    SELECT 0 AS m WHERE radius >= 0
    UNION ALL SELECT 1 << i FROM generate_series(0, 15) i WHERE radius >= 1
    UNION ALL SELECT (1 << i) | (1 << j)
      FROM generate_series(0, 15) i, generate_series(0, 15) j WHERE radius >= 2 AND i < j
  ) masks
)
""",
    # Exact near-duplicate search inside PostgreSQL, on the block indexes.
    """
CREATE OR REPLACE FUNCTION simdb_near(collection text, fingerprint bigint, k int DEFAULT 3)
RETURNS TABLE(key text, fp bigint, distance int)
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
#variable_conflict use_column
DECLARE
  cid int;
  r int[];
  q bigint := fingerprint;
BEGIN
  IF k IS NULL THEN
    RAISE EXCEPTION 'simdb: k must not be NULL' USING ERRCODE = '22004';
  END IF;
  r := simdb_radii(k);
  SELECT c.id INTO cid FROM simdb_collections c WHERE c.name = collection;
  IF cid IS NULL THEN
    RAISE EXCEPTION 'simdb: no collection named %', quote_literal(collection) USING ERRCODE = '42704';
  END IF;
  IF q IS NULL THEN
    RETURN;  -- a featureless text has no near-duplicates
  END IF;
  RETURN QUERY
    SELECT f.key, f.fp, bit_count((f.fp # q)::bit(64))::int AS distance
    FROM simdb_fingerprints f
    WHERE f.collection_id = cid
      AND (f.b0 = ANY (simdb_ball(((q >> 48) & 65535)::int, r[1]))
        OR f.b1 = ANY (simdb_ball(((q >> 32) & 65535)::int, r[2]))
        OR f.b2 = ANY (simdb_ball(((q >> 16) & 65535)::int, r[3]))
        OR f.b3 = ANY (simdb_ball((q & 65535)::int, r[4])))
      AND bit_count((f.fp # q)::bit(64)) <= k
    ORDER BY 3, 1;
END $$
""",
]

DROP_FUNCTIONS_DDL = [
    "DROP FUNCTION IF EXISTS simdb_near(text, bigint, int)",
    "DROP FUNCTION IF EXISTS simdb_ball(int, int)",
    "DROP FUNCTION IF EXISTS simdb_radii(int)",
    "DROP FUNCTION IF EXISTS simdb_blocks(bigint)",
    "DROP FUNCTION IF EXISTS simdb_hamming(bigint, bigint)",
]


# ---------------------------------------------------------------------------
# Query text used by simdb.index (prepared once per connection).
# Parameters: $1 collection_id, $2..$5 int4[] probe values for b0..b3,
# $6 query fp (signed bigint), $7 k.
# ---------------------------------------------------------------------------

def block_candidates(b: int) -> str:
    """Block ``b``'s candidate probes as SQL text: the single-query search's and the banded search's
    (simdb.store.candidates) Hamming candidates are built on the same probes."""
    return (
        f"SELECT fp FROM {FINGERPRINTS} WHERE collection_id = %(c)s::int4 AND b{b} = ANY(%(p{b})s::int4[]) "
        "AND bit_count((fp # %(q)s::int8)::bit(64)) <= %(k)s::int4"
    )


# Single-query search. Per block, an index-only scan of (collection_id, b_i, fp)
# over the probe values filters the candidates on the fp stored in the index
# (no heap fetch per candidate); the distinct matching fingerprints are then
# fetched back through the b0 index by (collection_id, b0, fp). Measured faster
# than a BitmapOr over the four indexes, which visits the heap for every
# candidate (docs/design.md, "Index layout, measured").
NEAR_SQL = f"""
WITH m AS (
  SELECT DISTINCT fp FROM (
    {block_candidates(0)}
    UNION ALL {block_candidates(1)}
    UNION ALL {block_candidates(2)}
    UNION ALL {block_candidates(3)}
  ) u
)
SELECT f.key, f.fp, bit_count((f.fp # %(q)s::int8)::bit(64))::int AS distance, f.meta
FROM m JOIN {FINGERPRINTS} f
  ON f.collection_id = %(c)s::int4 AND f.b0 = ((m.fp >> 48) & 65535)::int AND f.fp = m.fp
ORDER BY distance, f.key
LIMIT %(limit)s::int8
"""

# The same as one BitmapOr over the four block indexes (heap recheck per candidate);
# kept for the benchmark's comparison.
NEAR_BITMAP_SQL = f"""
SELECT f.key, f.fp, bit_count((f.fp # %(q)s::int8)::bit(64))::int AS distance, f.meta
FROM {FINGERPRINTS} f
WHERE f.collection_id = %(c)s::int4
  AND (f.b0 = ANY(%(p0)s::int4[]) OR f.b1 = ANY(%(p1)s::int4[])
    OR f.b2 = ANY(%(p2)s::int4[]) OR f.b3 = ANY(%(p3)s::int4[]))
  AND bit_count((f.fp # %(q)s::int8)::bit(64)) <= %(k)s::int4
ORDER BY distance, f.key
LIMIT %(limit)s::int8
"""

# Batch search: the probes of all queries arrive as four parallel arrays
# (query number, block number, probe value, query fp), sorted by (block, value)
# so that each block index is walked in order. Per block, a nested loop of
# index-only scans on (collection_id, b_i, fp) filters the candidates without
# touching the heap; only the matches are fetched back by (collection_id, b0, fp).
def _batch_candidates(b: int) -> str:
    """Block ``b``'s candidates of a batch: the probes of that block (``p.blk = b``) joined with its index."""
    return (
        f"""SELECT p.qi, f.fp, p.qfp FROM p JOIN {FINGERPRINTS} f
      ON f.collection_id = %(c)s::int4 AND f.b{b} = p.val AND p.blk = {b}
      WHERE bit_count((f.fp # p.qfp)::bit(64)) <= %(k)s::int4"""
    )


_BATCH_CANDIDATES = "\n    UNION ALL\n    ".join(_batch_candidates(b) for b in range(4))
NEAR_MANY_SQL = f"""
WITH p AS MATERIALIZED (
  SELECT * FROM unnest(%(qi)s::int4[], %(blk)s::int4[], %(val)s::int4[], %(qfp)s::int8[]) AS p(qi, blk, val, qfp)
), hits AS (
  SELECT DISTINCT m.qi, m.fp, m.qfp FROM (
    {_BATCH_CANDIDATES}
  ) m
)
SELECT h.qi, f.key, f.fp, bit_count((f.fp # h.qfp)::bit(64))::int AS distance, f.meta
FROM hits h JOIN {FINGERPRINTS} f
  ON f.collection_id = %(c)s::int4 AND f.b0 = ((h.fp >> 48) & 65535)::int AND f.fp = h.fp
"""

# Verified collections: the same candidate search, returning each candidate's stored sketch
# for the verification stage, as ``array_send`` bytes (decoded by numpy in
# simdb.results.verified_matches: no Python int per value), and no LIMIT (the limit applies
# to the verified answers). Candidates within the collection's radius K are few, so the
# sketches travel cheaply.
NEAR_VERIFY_SQL = NEAR_SQL.replace(
    "f.meta\nFROM m JOIN", "f.meta, array_send(f.shingles)\nFROM m JOIN"
).replace("ORDER BY distance, f.key\nLIMIT %(limit)s::int8\n", "")
NEAR_MANY_VERIFY_SQL = NEAR_MANY_SQL.replace("f.meta\nFROM hits h", "f.meta, array_send(f.shingles)\nFROM hits h")
assert NEAR_VERIFY_SQL.count("f.shingles") == 1 and "LIMIT" not in NEAR_VERIFY_SQL
assert NEAR_MANY_VERIFY_SQL.count("f.shingles") == 1


# ---------------------------------------------------------------------------
# The bottom-k sketch Jaccard as an inline SQL expression, for tables simdb does not own.
# ---------------------------------------------------------------------------
# Why inline and not ``simdb_sketch_jaccard(a, b, k)``: that function is created by simdb's
# own migration ``simdb_0006_verified``, which a host application's database (a Django or
# SQLAlchemy project keeping fingerprints in its own tables) usually never runs. A verified
# model helper (:mod:`simdb.sqlalchemy.verified`, :mod:`simdb.django.verified`) that called the
# function would fail there with "function does not exist", or, worse, silently depend on
# whichever version someone installed by hand. The expression below is the body of that
# function with ``a``, ``b`` and ``k`` substituted, so it is the same maths
# (:func:`simdb.core.sketch.sketch_jaccard`: of the ``k`` smallest values of ``a | b``, the share
# present in both; NULL when either side is NULL or empty), needs nothing installed, and is
# checked against the Python by a property test (tests/test_model_verified.py).
#
# Its cost: a correlated scalar subquery per row it is evaluated on. The helpers evaluate it
# only on candidate rows (those already within the candidate radius by the block indexes),
# a handful per query.
#
# The derived tables are named ``simdb_sj_*`` so that a host table aliased ``t`` or ``u``
# cannot be shadowed by them inside the expression.

#: ``{a}``, ``{b}``: int4[] expressions (sorted or not; duplicates are ignored); ``{k}``: the
#: sketch size. Each placeholder may occur more than once (see :func:`render_sketch_jaccard`).
SKETCH_JACCARD_TEMPLATE = (
    "(SELECT CASE WHEN count(*) = 0 THEN NULL"
    " ELSE (count(*) FILTER (WHERE simdb_sj_t.n = 2))::float8 / count(*) END"
    " FROM (SELECT simdb_sj_u.v, count(*) AS n FROM ("
    "SELECT DISTINCT simdb_sj_x AS v FROM unnest({a}) simdb_sj_x"
    " UNION ALL SELECT DISTINCT simdb_sj_y FROM unnest({b}) simdb_sj_y) simdb_sj_u"
    " GROUP BY simdb_sj_u.v ORDER BY simdb_sj_u.v LIMIT {k}) simdb_sj_t"
    " WHERE cardinality({a}) > 0 AND cardinality({b}) > 0)"
)

_PLACEHOLDER = re.compile(r"\{([abk])\}")


def render_sketch_jaccard(parts: dict[str, tuple[str, list]]) -> tuple[str, list]:
    """The expression with each placeholder replaced by ``parts[name][0]``, and the bound
    parameters in the order they occur in the text (``parts[name][1]`` once per occurrence).

    Why the parameter list: Django compiles to positional ``%s`` placeholders, and ``a`` and
    ``b`` each occur twice, so their parameters must be repeated in text order. SQLAlchemy's
    compiler binds by name and passes empty lists.
    """
    params: list = []

    def sub(m: re.Match) -> str:
        sql, p = parts[m.group(1)]
        params.extend(p)
        return sql

    return _PLACEHOLDER.sub(sub, SKETCH_JACCARD_TEMPLATE), params
