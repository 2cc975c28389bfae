"""LSH band keys of verified rows: the default's candidate stage (issue 26)

Revision ID: simdb_0008_bands
Revises: simdb_0007_sketch_stats
Create Date: 2026-11-26

``simdb_fingerprints.bands`` (int4[], NULL): the ``simdb.core.sketch.bands`` keys (14 MinHash bands of the
row's full shingle set) of a row of a verified collection created with band keys (its config
names the band scheme under ``"bands"``). A row is a candidate for a query when they share a
key in the same band: ``bands[i] = query_keys[i]`` for some i, on one btree per band,
``(collection_id, (bands[i]))``: 14 index probes whatever the collection's size, where the Hamming
candidates of K = 11 took 548 probes of about N/65,536 rows each. Rows of other collections
(Hamming-only, and verified collections created before this revision) keep NULL and their Hamming
candidates: nothing about them changes.

Why 14 btrees and not one GIN index on the array: measured on 100,000 rows of 14 random int4
keys, GIN took 784 bytes a row (each key its own entry with its own posting list), the 14 btrees
317 (a 16-byte index tuple a key; the collection id fits beside the int4 key in the same aligned
tuple). The indexes are partial (``WHERE bands IS NOT NULL``: plain rows cost them nothing).
No planner statistics on the column itself (as for ``shingles``, revision 0007); the expression
indexes keep their own.
"""
from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "simdb_0008_bands"
down_revision: str | Sequence[str] | None = "simdb_0007_sketch_stats"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BANDS = 14
INDEXES = [f"ix_simdb_fingerprints_band{i}" for i in range(1, BANDS + 1)]


def upgrade() -> None:
    op.execute("ALTER TABLE simdb_fingerprints ADD COLUMN IF NOT EXISTS bands int4[]")
    op.execute("ALTER TABLE simdb_fingerprints ALTER COLUMN bands SET STATISTICS 0")
    for i, name in enumerate(INDEXES, 1):
        op.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON simdb_fingerprints (collection_id, (bands[{i}])) "
            "WHERE bands IS NOT NULL"
        )


def downgrade() -> None:
    for name in INDEXES:
        op.execute(f"DROP INDEX IF EXISTS {name}")
    op.execute("ALTER TABLE simdb_fingerprints DROP COLUMN IF EXISTS bands")
