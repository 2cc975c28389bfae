"""Jaccard stage (issue 8): intarray, simdb_jaccard, threshold -> k, near/pairs by exact Jaccard,
MinHash LSH band table

Revision ID: simdb_0002_jaccard
Revises: simdb_0001
Create Date: 2026-11-22

The SQL lives here, frozen, rather than imported from a module, so that this
revision means the same thing forever. The intarray operators and ``icount`` are
schema-qualified with the schema the extension lives in (found at upgrade time),
so the functions work whatever the caller's ``search_path``.
"""
from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqlalchemy import text

revision: str = "simdb_0002_jaccard"
down_revision: str | Sequence[str] | None = "simdb_0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# threshold -> k, as measured (benchmarks/bench_quality.py; simdb.jaccard.THRESHOLD_K)
_K_CASE = """
    CASE WHEN min_jaccard >= 0.95 THEN 7
         WHEN min_jaccard >= 0.9 THEN 9
         ELSE 11 END"""


def _functions(s: str) -> list[str]:
    return [
        # exact Jaccard of two shingle sets (NULL when either is NULL or both are empty)
        f"""
CREATE OR REPLACE FUNCTION simdb_jaccard(a int4[], b int4[]) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN {s}.icount(a OPERATOR({s}.&) b)::float8 / NULLIF({s}.icount(a OPERATOR({s}.|) b), 0)
""",
        # stage-1 Hamming radius for a Jaccard threshold
        f"""
CREATE OR REPLACE FUNCTION simdb_jaccard_k(min_jaccard float8) RETURNS int
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
  IF min_jaccard <= 0 OR min_jaccard > 1 THEN
    RAISE EXCEPTION 'simdb: min_jaccard must be in (0, 1], got %', min_jaccard USING ERRCODE = '22023';
  END IF;
  IF min_jaccard < 0.7 THEN
    RAISE EXCEPTION 'simdb: min_jaccard % is below 0.7: SimHash candidates (k <= 11) miss too many pairs', min_jaccard
      USING ERRCODE = '22023',
            HINT = 'Use the MinHash bands (simdb_near_jaccard_bands) or scan: WHERE simdb_jaccard(shingles, q) >= t.';
  END IF;
  RETURN {_K_CASE};
END $$
""",
        # argument check usable inside SQL functions (IMMUTABLE: folded once per query)
        """
CREATE OR REPLACE FUNCTION simdb_check_min_jaccard(min_jaccard float8) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF min_jaccard IS NULL OR min_jaccard <= 0 OR min_jaccard > 1 THEN
    RAISE EXCEPTION 'simdb: min_jaccard must be in (0, 1], got %', coalesce(min_jaccard::text, 'NULL')
      USING ERRCODE = '22023';
  END IF;
  RETURN true;
END $$
""",
        # the id of a collection, or an error naming it
        """
CREATE OR REPLACE FUNCTION simdb_collection_id(collection text) RETURNS int
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE cid int;
BEGIN
  SELECT c.id INTO cid FROM simdb_collections c WHERE c.name = collection;
  IF cid IS NULL THEN
    RAISE EXCEPTION 'simdb: no collection named %', quote_literal(collection) USING ERRCODE = '42704';
  END IF;
  RETURN cid;
END $$
""",
        # SimHash candidates within k (default: from the threshold), then the exact check.
        # Serial plans: the default GIN / function-scan estimates otherwise pick a
        # parallel Gather whose start-up (~8 ms) dwarfs the lookup (~0.1 ms).
        """
CREATE OR REPLACE FUNCTION simdb_near_jaccard(collection text, fingerprint bigint, shingles int4[],
                                              k int DEFAULT NULL, min_jaccard float8 DEFAULT 0.8)
RETURNS TABLE(key text, fp bigint, distance int, jaccard float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET max_parallel_workers_per_gather = 0
AS $$
  SELECT n.key, n.fp, n.distance, j.v
  FROM simdb_near($1, $2, coalesce($4, simdb_jaccard_k($5))) n
  -- a LATERAL lookup per candidate (simdb_near is estimated at 1000 rows, which
  -- otherwise makes the planner hash-join a scan of the whole table)
  CROSS JOIN LATERAL (
    SELECT simdb_jaccard(f.shingles, $3) AS v FROM simdb_fingerprints f
    WHERE f.collection_id = simdb_collection_id($1) AND f.key = n.key
  ) j
  WHERE simdb_check_min_jaccard($5) AND cardinality($3) > 0 AND j.v >= $5
  ORDER BY j.v DESC, n.key
$$
""",
        # MinHash LSH candidates (a shared band key, GIN), then the exact check
        f"""
CREATE OR REPLACE FUNCTION simdb_near_jaccard_bands(collection text, bands int4[], shingles int4[],
                                                    min_jaccard float8 DEFAULT 0.8)
RETURNS TABLE(key text, fp bigint, jaccard float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET max_parallel_workers_per_gather = 0
AS $$
  SELECT f.key, f.fp, j.v
  FROM simdb_minhash_bands b
  JOIN simdb_fingerprints f ON f.id = b.fingerprint_id
  CROSS JOIN LATERAL (SELECT simdb_jaccard(f.shingles, $3) AS v) j
  WHERE b.bands OPERATOR({s}.&&) $2 AND b.collection_id = simdb_collection_id($1)
    AND simdb_check_min_jaccard($4) AND cardinality($3) > 0 AND j.v >= $4
  ORDER BY j.v DESC, f.key
$$
""",
        # every pair of a collection with Jaccard >= min_jaccard: banded self-join, exact check.
        # Steps through analysed temp tables: one CTE chain was estimated at 7e10
        # candidate pairs and planned as a spilling hash aggregate.
        """
CREATE OR REPLACE FUNCTION simdb_jaccard_pairs(collection text, min_jaccard float8 DEFAULT 0.8)
RETURNS TABLE(key_a text, key_b text, jaccard float8)
LANGUAGE plpgsql VOLATILE
SET max_parallel_workers_per_gather = 0
AS $$
#variable_conflict use_column
DECLARE
  cid int := simdb_collection_id(collection);
  nb int;
BEGIN
  PERFORM simdb_check_min_jaccard(min_jaccard);
  SELECT max(cardinality(b.bands)) INTO nb FROM (
    SELECT bands FROM simdb_minhash_bands WHERE collection_id = cid LIMIT 1) b;
  DROP TABLE IF EXISTS pg_temp.simdb_jp_kv, pg_temp.simdb_jp_cand;
  CREATE TEMP TABLE simdb_jp_kv (id bigint, band int, bk int4) ON COMMIT DROP;
  -- band by band: the rows whose key in that band is shared by another row
  FOR j IN 1..coalesce(nb, 0) LOOP
    INSERT INTO pg_temp.simdb_jp_kv
      SELECT b.fingerprint_id, j, b.bands[j] FROM simdb_minhash_bands b
      WHERE b.collection_id = cid AND b.bands[j] IN (
        SELECT x.bands[j] FROM simdb_minhash_bands x WHERE x.collection_id = cid GROUP BY 1 HAVING count(*) > 1);
  END LOOP;
  ANALYZE pg_temp.simdb_jp_kv;
  CREATE TEMP TABLE simdb_jp_cand ON COMMIT DROP AS
    SELECT DISTINCT x.id AS a, y.id AS b FROM pg_temp.simdb_jp_kv x JOIN pg_temp.simdb_jp_kv y
      ON x.band = y.band AND x.bk = y.bk AND x.id < y.id;
  ANALYZE pg_temp.simdb_jp_cand;
  -- key_a is the row added first (smaller id), as in SimhashIndex.pairs
  RETURN QUERY
    SELECT fa.key, fb.key, simdb_jaccard(fa.shingles, fb.shingles)
    FROM pg_temp.simdb_jp_cand c
    JOIN simdb_fingerprints fa ON fa.id = c.a
    JOIN simdb_fingerprints fb ON fb.id = c.b
    WHERE least(cardinality(fa.shingles), cardinality(fb.shingles))
            >= min_jaccard * greatest(cardinality(fa.shingles), cardinality(fb.shingles)) - 1e-9  -- size bound, O(1)
      AND simdb_jaccard(fa.shingles, fb.shingles) >= min_jaccard;
  DROP TABLE pg_temp.simdb_jp_kv, pg_temp.simdb_jp_cand;
END $$
""",
    ]


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS intarray")
    schema = op.get_bind().execute(
        text(
            "SELECT quote_ident(n.nspname) FROM pg_extension e "
            "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'intarray'"
        )
    ).scalar_one()
    # MinHash LSH band keys of the rows of Jaccard collections (simdb.minhash): one
    # int4[] per row, GIN-indexed with intarray's opclass for `bands && query`.
    op.execute(
        """
CREATE TABLE simdb_minhash_bands (
  fingerprint_id bigint PRIMARY KEY REFERENCES simdb_fingerprints(id) ON DELETE CASCADE,
  collection_id int NOT NULL REFERENCES simdb_collections(id) ON DELETE CASCADE,
  bands int4[] NOT NULL
)"""
    )
    op.execute(
        f"CREATE INDEX simdb_minhash_bands_gin ON simdb_minhash_bands USING gin (bands {schema}.gin__int_ops) "
        "WITH (fastupdate = off)"
    )
    for ddl in _functions(schema):
        op.execute(ddl)


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS simdb_jaccard_pairs(text, float8)")
    op.execute("DROP FUNCTION IF EXISTS simdb_near_jaccard_bands(text, int4[], int4[], float8)")
    op.execute("DROP FUNCTION IF EXISTS simdb_near_jaccard(text, bigint, int4[], int, float8)")
    op.execute("DROP FUNCTION IF EXISTS simdb_collection_id(text)")
    op.execute("DROP FUNCTION IF EXISTS simdb_check_min_jaccard(float8)")
    op.execute("DROP FUNCTION IF EXISTS simdb_jaccard_k(float8)")
    op.execute("DROP FUNCTION IF EXISTS simdb_jaccard(int4[], int4[])")
    op.execute("DROP TABLE IF EXISTS simdb_minhash_bands")
    # intarray stays: other objects of the database may use it
