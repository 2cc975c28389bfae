"""All near-duplicate pairs of a collection, in SQL: simdb_pairs(collection, k)

Revision ID: simdb_0003_pairs
Revises: simdb_0002_jaccard
Create Date: 2026-11-22

The SQL lives here, frozen, so that this revision means the same thing forever.

``simdb_pairs`` is the analysts' form of ``SimhashIndex.pairs()``: four block
self-joins, UNION ALL, each pair reported only at the first block the two rows
share (so no DISTINCT), ``key_a`` being the row added first (smaller id). It is
exact for k in 0..3 (two fingerprints within 3 share a whole 16-bit block). Its
cost grows as N^2/65536 candidate pairs per block: fine up to about a million
rows; for larger collections use ``SimhashIndex.pairs()``, which compares the
block groups vectorised on the client (see the README).
"""
from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "simdb_0003_pairs"
down_revision: str | Sequence[str] | None = "simdb_0002_jaccard"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _branch(block: str, earlier: list[str]) -> str:
    cond = "".join(f" AND a.{e} <> b.{e}" for e in earlier)
    return f"""
    SELECT a.key, b.key, bit_count((a.fp # b.fp)::bit(64))::int
    FROM simdb_fingerprints a
    JOIN simdb_fingerprints b
      ON b.collection_id = cid AND b.{block} = a.{block} AND b.id > a.id{cond}
    WHERE a.collection_id = cid AND a.fp IS NOT NULL
      AND bit_count((a.fp # b.fp)::bit(64)) <= k"""


_BLOCKS = ["b0", "b1", "b2", "b3"]
_UNION = "\n    UNION ALL".join(_branch(b, _BLOCKS[:i]) for i, b in enumerate(_BLOCKS))

PAIRS_DDL = f"""
CREATE OR REPLACE FUNCTION simdb_pairs(collection text, k int DEFAULT 3)
RETURNS TABLE(key_a text, key_b text, distance int)
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
#variable_conflict use_column
DECLARE
  cid int;
BEGIN
  IF k IS NULL OR k < 0 OR k > 3 THEN
    RAISE EXCEPTION 'simdb: simdb_pairs needs k between 0 and 3, got %', coalesce(k::text, 'NULL')
      USING ERRCODE = '22023',
            HINT = 'All pairs use the plain pigeonhole on the four 16-bit blocks (two fingerprints within 3 '
                   'share a whole block). For larger k join with simdb_near(collection, fp, k) per row.';
  END IF;
  SELECT c.id INTO cid FROM simdb_collections c WHERE c.name = collection;
  IF cid IS NULL THEN
    RAISE EXCEPTION 'simdb: no collection named %', quote_literal(collection) USING ERRCODE = '42704';
  END IF;
  RETURN QUERY{_UNION};
END $$
"""


def upgrade() -> None:
    op.execute(PAIRS_DDL)


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS simdb_pairs(text, int)")
