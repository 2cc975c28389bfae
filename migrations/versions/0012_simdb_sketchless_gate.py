"""A banded collection looks for rows without a sketch only when it has some (issue 26)

Revision ID: simdb_0012_sketchless_gate
Revises: simdb_0011_sql_rule
Create Date: 2026-11-26

The SQL lives here, frozen, so that this revision means the same thing forever.

Why: a banded collection answers a row stored without a sketch (by fingerprint,
``add_fingerprint``) by Hamming distance, so every text query (``near``, ``add_if_unique``,
``simdb_near_key``) also probed the four block indexes for such rows: about N/65,536 index
entries a probe, ~600 a query at 10M rows, read and dropped in a collection that has none (the
usual case). This revision adds

- ``ix_simdb_fingerprints_sketchless``: a partial btree on ``(collection_id)`` of the rows with a
  fingerprint and no sketch. The queries ask it first (one descent, an uncorrelated EXISTS the
  planner runs once as an InitPlan) and skip the block probes when it holds none of the
  collection's rows. Why an index and not a flag on ``simdb_collections``: it is kept by
  PostgreSQL on every write path (add, COPY loads, Spark, async, convert, deletes), so it cannot be
  forgotten by one, and it is never stale after a delete. Its cost: a banded or verified
  collection has no entries in it; a plain (Hamming-only) collection's rows are all in it, about
  7 bytes a row after btree deduplication (its one key value repeats), beside 279 bytes a row.
- ``simdb_near_key`` gated the same way (revision 0011's function, its Hamming candidates behind
  the same EXISTS).

Existing collections get the right answer at once: the index is built over the existing rows.
Downgrade drops the index and restores revision 0011's ``simdb_near_key``.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from alembic import op

revision: str = "simdb_0012_sketchless_gate"
down_revision: str | Sequence[str] | None = "simdb_0011_sql_rule"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX_DDL = (
    "CREATE INDEX IF NOT EXISTS ix_simdb_fingerprints_sketchless ON simdb_fingerprints (collection_id) "
    "WHERE shingles IS NULL AND fp IS NOT NULL"
)
_GATE = (
    "(NOT banded OR EXISTS (SELECT 1 FROM simdb_fingerprints s WHERE s.collection_id = cid "
    "AND s.shingles IS NULL AND s.fp IS NOT NULL))"
)


def _revision_0011():
    """Revision 0011's module, loaded from its file (its name starts with a digit): its frozen DDL."""
    path = Path(__file__).with_name("0011_simdb_sql_rule.py")
    spec = importlib.util.spec_from_file_location("simdb_migration_0011", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def near_key_ddl() -> str:
    """Revision 0011's ``simdb_near_key`` with its Hamming candidates gated (CREATE OR REPLACE)."""
    ddl = _revision_0011().NEAR_KEY_DDL
    old = "      WHERE NOT banded OR f.shingles IS NULL\n"
    assert ddl.count(old) == 1 and ddl.count("CREATE FUNCTION simdb_near_key(") == 1
    ddl = ddl.replace(old, f"      WHERE (NOT banded OR f.shingles IS NULL) AND {_GATE}\n")
    return ddl.replace("CREATE FUNCTION simdb_near_key(", "CREATE OR REPLACE FUNCTION simdb_near_key(")


def upgrade() -> None:
    op.execute(INDEX_DDL)
    op.execute(near_key_ddl())


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_simdb_fingerprints_sketchless")
    op.execute(_revision_0011().NEAR_KEY_DDL.replace(
        "CREATE FUNCTION simdb_near_key(", "CREATE OR REPLACE FUNCTION simdb_near_key("))
