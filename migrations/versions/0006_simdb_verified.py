"""Verified collections (issue 13): bottom-k sketch Jaccard and verified near search in SQL

Revision ID: simdb_0006_verified
Revises: simdb_0005_pairs_k11
Create Date: 2026-11-23

The SQL lives here, frozen, so that this revision means the same thing forever.

- ``simdb_sketch_jaccard(a int4[], b int4[], k int)``: of the ``k`` smallest values
  of ``a | b``, the share present in both (a value can only be "in both" if each
  array holds it; sketches hold distinct values). Exact Jaccard when the two sets
  together have at most ``k`` values; the bottom-k estimate otherwise. NULL when
  either side is NULL or empty. The same maths as ``simdb.core.sketch.sketch_jaccard``.
- ``simdb_near_verified(collection, fingerprint, sketch, min_jaccard, hamming_k)``:
  what ``SimhashIndex.near(text)`` answers in a verified collection: candidates
  within the collection's candidate radius (``config->'verify'->>'k'``) by the
  block probes of ``simdb_near``, kept when their sketch Jaccard with ``sketch`` is
  at least ``min_jaccard`` (default: the collection's). Rows stored without a
  sketch (added by fingerprint) are answered by Hamming distance <= ``hamming_k``.
"""
from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "simdb_0006_verified"
down_revision: str | Sequence[str] | None = "simdb_0005_pairs_k11"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SKETCH_JACCARD_DDL = """
CREATE OR REPLACE FUNCTION simdb_sketch_jaccard(a int4[], b int4[], k int) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (
  SELECT CASE WHEN count(*) = 0 THEN NULL
              ELSE (count(*) FILTER (WHERE t.n = 2))::float8 / count(*) END
  FROM (
    SELECT u.v, count(*) AS n FROM (
      SELECT DISTINCT x AS v, 1 AS side FROM unnest(a) x
      UNION ALL SELECT DISTINCT y, 2 FROM unnest(b) y
    ) u GROUP BY u.v ORDER BY u.v LIMIT k
  ) t
  WHERE cardinality(a) > 0 AND cardinality(b) > 0
)
"""

NEAR_VERIFIED_DDL = """
CREATE OR REPLACE FUNCTION simdb_near_verified(collection text, fingerprint bigint, sketch int4[],
                                               min_jaccard float8 DEFAULT NULL, hamming_k int DEFAULT 3)
RETURNS TABLE(key text, fp bigint, distance int, jaccard float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
#variable_conflict use_column
DECLARE
  cid int;
  cfg jsonb;
  ck int;
  sz int;
  t float8 := min_jaccard;
BEGIN
  SELECT c.id, c.config -> 'verify' INTO cid, cfg FROM simdb_collections c WHERE c.name = collection;
  IF cid IS NULL THEN
    RAISE EXCEPTION 'simdb: no collection named %', quote_literal(collection) USING ERRCODE = '42704';
  END IF;
  IF cfg IS NULL THEN
    RAISE EXCEPTION 'simdb: collection % is not a verified collection', quote_literal(collection)
      USING ERRCODE = '22023', HINT = 'Use simdb_near(collection, fingerprint, k) (Hamming distance only).';
  END IF;
  ck := (cfg ->> 'k')::int;
  sz := (cfg ->> 'sketch')::int;
  t := coalesce(t, (cfg ->> 'min_jaccard')::float8);
  IF t <= 0 OR t > 1 THEN
    RAISE EXCEPTION 'simdb: min_jaccard must be in (0, 1], got %', t USING ERRCODE = '22023';
  END IF;
  IF hamming_k IS NULL OR hamming_k < 0 OR hamming_k > ck THEN
    RAISE EXCEPTION 'simdb: hamming_k must be between 0 and %, got %', ck, hamming_k USING ERRCODE = '22023';
  END IF;
  RETURN QUERY
    SELECT n.key, n.fp, n.distance, j.v
    FROM simdb_near(collection, fingerprint, ck) n
    JOIN simdb_fingerprints f ON f.collection_id = cid AND f.key = n.key
    CROSS JOIN LATERAL (SELECT simdb_sketch_jaccard(f.shingles, sketch, sz) AS v) j
    WHERE CASE WHEN f.shingles IS NULL OR sketch IS NULL THEN n.distance <= hamming_k
               ELSE j.v >= t END
    ORDER BY j.v DESC NULLS LAST, n.distance, n.key;
END $$
"""


def upgrade() -> None:
    op.execute(SKETCH_JACCARD_DDL)
    op.execute(NEAR_VERIFIED_DDL)


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS simdb_near_verified(text, bigint, int4[], float8, int)")
    op.execute("DROP FUNCTION IF EXISTS simdb_sketch_jaccard(int4[], int4[], int)")
