"""simdb_pairs(collection, k) answers k = 0..11 (generalized pigeonhole), not only 0..3

Revision ID: simdb_0005_pairs_k11
Revises: simdb_0004_spark_results
Create Date: 2026-11-22

The SQL lives here, frozen, so that this revision means the same thing forever.

For k <= 3 nothing changes: four block self-joins on equal block values, a
pair reported at the first block the two rows share. For k = 4..11 block i
gets the radius ``simdb_radii(k)[i]`` (the radii sum to k - 3, so two rows
within k differ in at most t_i bits of some block i); each branch joins a row
with the rows whose block value lies in ``simdb_ball(a.b_i, t_i)``, and drops
pairs an earlier block already covers (their block differs in at most t_e
bits there), so each pair still comes out once. Exact, but every row probes up
to 137 values per block: meant for collections up to about 100k rows; for
larger ones ``SimhashIndex.pairs(k=...)`` joins the block groups in numpy.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "simdb_0005_pairs_k11"
down_revision: str | Sequence[str] | None = "simdb_0004_spark_results"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BLOCKS = ["b0", "b1", "b2", "b3"]
_DISTANCE = "bit_count((a.fp # b.fp)::bit(64))"


def _equal_branch(i: int) -> str:
    block = _BLOCKS[i]
    cond = "".join(f" AND a.{e} <> b.{e}" for e in _BLOCKS[:i])
    return f"""
      SELECT a.key, b.key, {_DISTANCE}::int
      FROM simdb_fingerprints a
      JOIN simdb_fingerprints b
        ON b.collection_id = cid AND b.{block} = a.{block} AND b.id > a.id{cond}
      WHERE a.collection_id = cid AND a.fp IS NOT NULL
        AND {_DISTANCE} <= k"""


def _radius_branch(i: int) -> str:
    block = _BLOCKS[i]
    cond = "".join(f" AND bit_count((a.{e} # b.{e})::bit(16)) > r[{n + 1}]" for n, e in enumerate(_BLOCKS[:i]))
    return f"""
      SELECT a.key, b.key, {_DISTANCE}::int
      FROM simdb_fingerprints a
      JOIN simdb_fingerprints b
        ON b.collection_id = cid AND b.{block} = ANY (simdb_ball(a.{block}, r[{i + 1}])) AND b.id > a.id{cond}
      WHERE a.collection_id = cid AND a.fp IS NOT NULL AND r[{i + 1}] >= 0
        AND {_DISTANCE} <= k"""


PAIRS_DDL = f"""
CREATE OR REPLACE FUNCTION simdb_pairs(collection text, k int DEFAULT 3)
RETURNS TABLE(key_a text, key_b text, distance int)
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
#variable_conflict use_column
DECLARE
  cid int;
  r int[];
BEGIN
  IF k IS NULL THEN
    RAISE EXCEPTION 'simdb: k must not be NULL' USING ERRCODE = '22004';
  END IF;
  r := simdb_radii(k);  -- raises for k outside 0..11, with a hint
  SELECT c.id INTO cid FROM simdb_collections c WHERE c.name = collection;
  IF cid IS NULL THEN
    RAISE EXCEPTION 'simdb: no collection named %', quote_literal(collection) USING ERRCODE = '42704';
  END IF;
  IF k <= 3 THEN
    RETURN QUERY{"    UNION ALL".join(_equal_branch(i) for i in range(4))};
  ELSE
    RETURN QUERY{"    UNION ALL".join(_radius_branch(i) for i in range(4))};
  END IF;
END $$
"""


def upgrade() -> None:
    op.execute(PAIRS_DDL)


def downgrade() -> None:
    # back to revision 0003's definition (k 0..3), read from that revision's own file
    path = Path(__file__).with_name("0003_simdb_pairs.py")
    spec = importlib.util.spec_from_file_location("simdb_migration_0003", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    op.execute(module.PAIRS_DDL)
