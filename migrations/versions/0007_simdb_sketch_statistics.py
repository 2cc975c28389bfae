"""Sketch column without planner statistics

Revision ID: simdb_0007_sketch_stats
Revises: simdb_0006_verified
Create Date: 2026-11-23

``simdb_fingerprints.shingles`` (a verified row's bottom-256 sketch, up to 1 kB) is never
filtered, joined or sorted on by any statement, so its planner statistics are pure cost:
``ANALYZE`` (run after every bulk load) spent about 0.3 s per 20,000 verified rows sampling
and sorting those arrays, about as long as building the five indexes. A statistics target
of 0 makes ANALYZE skip the column; downgrade restores the default (-1).
"""
from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "simdb_0007_sketch_stats"
down_revision: str | Sequence[str] | None = "simdb_0006_verified"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE simdb_fingerprints ALTER COLUMN shingles SET STATISTICS 0")


def downgrade() -> None:
    op.execute("ALTER TABLE simdb_fingerprints ALTER COLUMN shingles SET STATISTICS -1")
