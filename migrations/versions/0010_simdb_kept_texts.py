"""Texts a collection keeps, compressed: ``simdb_fingerprints.text_z`` (issue 27)

Revision ID: simdb_0010_kept_texts
Revises: simdb_0009_retire_legacy
Create Date: 2026-11-26

``simdb_fingerprints.text_z`` (bytea, NULL): the row's text, UTF-8 compressed with zlib
(:mod:`simdb.core.kept_texts`), written by every write path of a collection whose config says it
keeps texts (``"texts": {"keep": true, "codec": "zlib"}``; ``SimhashIndex(..., store_texts=True)``,
``simdb add --store-text``). Other rows keep NULL and cost nothing (a NULL is a bit in the row's
null bitmap). Why a column of the row and not a table of its own: a text lives and dies with its
row (replaced by the same upsert, deleted with it, dropped with the collection by the existing
cascade) without a second statement or a trigger. Why compressed in Python and not left to
TOAST's pglz: TOAST compresses only values above its ~2 kB threshold, which most comments are not,
and the work is done by the loader's worker processes rather than the server (storage EXTERNAL:
the server does not try to compress it again).
Older rows' ``meta.text`` (what ``--store-text`` wrote before this revision) stays readable.
"""
from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "simdb_0010_kept_texts"
down_revision: str | Sequence[str] | None = "simdb_0009_retire_legacy"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE simdb_fingerprints ADD COLUMN IF NOT EXISTS text_z bytea")
    # compressed already: pglz would only spend time failing to shrink it; no planner statistics
    op.execute("ALTER TABLE simdb_fingerprints ALTER COLUMN text_z SET STORAGE EXTERNAL")
    op.execute("ALTER TABLE simdb_fingerprints ALTER COLUMN text_z SET STATISTICS 0")


def downgrade() -> None:
    op.execute("ALTER TABLE simdb_fingerprints DROP COLUMN IF EXISTS text_z")
