"""simdb initial schema: collections, fingerprints with generated block columns, SQL functions

Revision ID: simdb_0001
Revises:
Create Date: 2026-11-22
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "simdb_0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = ("simdb",)
depends_on: str | Sequence[str] | None = None

# Frozen copies (this revision must mean the same thing forever; simdb.store.sql may move on).
COLLECTIONS = "simdb_collections"
FINGERPRINTS = "simdb_fingerprints"
UNIQUE_KEY = "uq_simdb_fingerprints_collection_key"
BLOCK_INDEXES = {f"ix_simdb_fingerprints_b{i}": ("collection_id", f"b{i}", "fp") for i in range(4)}

_FUNCTIONS = [
    """
CREATE OR REPLACE FUNCTION simdb_hamming(a bigint, b bigint) RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN bit_count((a # b)::bit(64))::int
""",
    """
CREATE OR REPLACE FUNCTION simdb_blocks(fp bigint) RETURNS int[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN ARRAY[((fp >> 48) & 65535)::int, ((fp >> 32) & 65535)::int,
             ((fp >> 16) & 65535)::int, (fp & 65535)::int]
""",
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

_DROP_FUNCTIONS = [
    'DROP FUNCTION IF EXISTS simdb_near(text, bigint, int)',
    'DROP FUNCTION IF EXISTS simdb_ball(int, int)',
    'DROP FUNCTION IF EXISTS simdb_radii(int)',
    'DROP FUNCTION IF EXISTS simdb_blocks(bigint)',
    'DROP FUNCTION IF EXISTS simdb_hamming(bigint, bigint)',
]


def upgrade() -> None:
    op.create_table(
        COLLECTIONS,
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("config", postgresql.JSONB(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.UniqueConstraint("name", name="simdb_collections_name_key"),
    )
    op.create_table(
        FINGERPRINTS,
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), primary_key=True),
        sa.Column(
            "collection_id",
            sa.Integer(),
            sa.ForeignKey(f"{COLLECTIONS}.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("key", sa.Text(collation="C"), nullable=False),
        sa.Column("fp", sa.BigInteger(), nullable=True),
        sa.Column("b0", sa.Integer(), sa.Computed("((fp >> 48) & 65535)::integer", persisted=True)),
        sa.Column("b1", sa.Integer(), sa.Computed("((fp >> 32) & 65535)::integer", persisted=True)),
        sa.Column("b2", sa.Integer(), sa.Computed("((fp >> 16) & 65535)::integer", persisted=True)),
        sa.Column("b3", sa.Integer(), sa.Computed("(fp & 65535)::integer", persisted=True)),
        sa.Column("shingles", postgresql.ARRAY(sa.Integer()), nullable=True),
        sa.Column("meta", postgresql.JSONB(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.UniqueConstraint("collection_id", "key", name=UNIQUE_KEY),
    )
    for name, cols in BLOCK_INDEXES.items():
        op.create_index(name, FINGERPRINTS, list(cols))
    for ddl in _FUNCTIONS:
        op.execute(ddl)


def downgrade() -> None:
    for ddl in _DROP_FUNCTIONS:
        op.execute(ddl)
    op.drop_table(FINGERPRINTS)
    op.drop_table(COLLECTIONS)
