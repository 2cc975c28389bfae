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

from simdb.store import sql

revision: str = "simdb_0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = ("simdb",)
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        sql.COLLECTIONS,
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("config", postgresql.JSONB(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.UniqueConstraint("name", name="simdb_collections_name_key"),
    )
    op.create_table(
        sql.FINGERPRINTS,
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), primary_key=True),
        sa.Column(
            "collection_id",
            sa.Integer(),
            sa.ForeignKey(f"{sql.COLLECTIONS}.id", ondelete="CASCADE"),
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
        sa.UniqueConstraint("collection_id", "key", name=sql.UNIQUE_KEY),
    )
    for name, cols in sql.BLOCK_INDEXES.items():
        op.create_index(name, sql.FINGERPRINTS, list(cols))
    for ddl in sql.FUNCTIONS_DDL:
        op.execute(ddl)


def downgrade() -> None:
    for ddl in sql.DROP_FUNCTIONS_DDL:
        op.execute(ddl)
    op.drop_table(sql.FINGERPRINTS)
    op.drop_table(sql.COLLECTIONS)
