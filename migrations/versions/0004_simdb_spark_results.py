"""Tables for results computed outside PostgreSQL (simdb.spark): pairs and clusters

Revision ID: simdb_0004_spark_results
Revises: simdb_0003_pairs
Create Date: 2026-11-22

``simdb.spark.write_pairs`` / ``write_clusters`` upsert into these, one
transaction per Spark partition, so re-running a job adds no duplicates.
Keys use collation "C" like ``simdb_fingerprints.key`` (Python's str order).
"""
from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "simdb_0004_spark_results"
down_revision: str | Sequence[str] | None = "simdb_0003_pairs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "simdb_spark_pairs",
        sa.Column("collection_id", sa.Integer(), sa.ForeignKey("simdb_collections.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("key_a", sa.Text(collation="C"), nullable=False),
        sa.Column("key_b", sa.Text(collation="C"), nullable=False),
        sa.Column("distance", sa.Integer(), nullable=True),
        sa.Column("jaccard", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("collection_id", "key_a", "key_b", name="simdb_spark_pairs_pkey"),
        sa.CheckConstraint("key_a < key_b", name="simdb_spark_pairs_order"),
    )
    op.create_table(
        "simdb_spark_clusters",
        sa.Column("collection_id", sa.Integer(), sa.ForeignKey("simdb_collections.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("key", sa.Text(collation="C"), nullable=False),
        sa.Column("cluster_key", sa.Text(collation="C"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("collection_id", "key", name="simdb_spark_clusters_pkey"),
    )


def downgrade() -> None:
    op.drop_table("simdb_spark_clusters")
    op.drop_table("simdb_spark_pairs")
