"""LSH band keys of verified rows: the default's candidate stage (issue 26)

Revision ID: simdb_0008_bands
Revises: simdb_0007_sketch_stats
Create Date: 2026-11-26

``simdb_fingerprints.bands`` (int4[], NULL): the ``simdb.bands`` keys (14 MinHash bands of the
row's full shingle set) of a row of a verified collection created with band keys (its config
names the band scheme under ``"bands"``). A row is a candidate for a query when they share a
key, ``bands && query_keys`` on the GIN index: a fixed number of index probes whatever the
collection's size, where the Hamming candidates of K = 11 took 548 probes of about N/65,536 rows
each. Rows of other collections (Hamming-only, and verified collections created before this
revision) keep NULL and their Hamming candidates: nothing about them changes.

The index is partial (``WHERE bands IS NOT NULL``: plain rows cost it nothing) and uses the
core ``array_ops`` class, so queries name ``OPERATOR(pg_catalog.&&)``: with the ``intarray``
extension on the search path (migration 0002 installs it) a bare ``&&`` on int4[] resolves to
intarray's operator, which this index cannot serve. ``fastupdate = off``: a pending list would be
scanned linearly by every query after a load. No planner statistics on the column (as for
``shingles``, revision 0007): no statement filters on its values' distribution.
"""
from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "simdb_0008_bands"
down_revision: str | Sequence[str] | None = "simdb_0007_sketch_stats"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_simdb_fingerprints_bands"


def upgrade() -> None:
    op.execute("ALTER TABLE simdb_fingerprints ADD COLUMN IF NOT EXISTS bands int4[]")
    op.execute("ALTER TABLE simdb_fingerprints ALTER COLUMN bands SET STATISTICS 0")
    op.execute(
        f"CREATE INDEX IF NOT EXISTS {INDEX} ON simdb_fingerprints USING gin (bands) "
        "WITH (fastupdate = off) WHERE bands IS NOT NULL"
    )


def downgrade() -> None:
    op.execute(f"DROP INDEX IF EXISTS {INDEX}")
    op.execute("ALTER TABLE simdb_fingerprints DROP COLUMN IF EXISTS bands")
