"""SQLAlchemy 2 declarative models of simdb's tables.

The tables are created only by the Alembic migrations in ``migrations/``; these
models describe them (for the ORM, for host applications' metadata and for the
autogenerate drift test, which checks that models and migrations agree).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Computed,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from simdb.store import sql

__all__ = ["Base", "Collection", "FingerprintRow", "SparkCluster", "SparkPair", "metadata"]

metadata = MetaData()


class Base(DeclarativeBase):
    metadata = metadata


class Collection(Base):
    """A named set of fingerprints (posts, comments, products ...) and the config they were made with."""

    __tablename__ = sql.COLLECTIONS

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(Text, nullable=False)
    config: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    __table_args__ = (UniqueConstraint("name", name="simdb_collections_name_key"),)

    fingerprints: Mapped[list[FingerprintRow]] = relationship(
        back_populates="collection", passive_deletes=True, lazy="raise"
    )

    def __repr__(self) -> str:
        return f"Collection(id={self.id!r}, name={self.name!r})"


def _block(i: int) -> Computed:
    return Computed(sql.block_sql("fp", i), persisted=True)


class FingerprintRow(Base):
    """One stored fingerprint. ``fp`` is the signed two's complement of the unsigned SimHash;
    NULL means the text had no features. ``b0..b3`` are derived by PostgreSQL."""

    __tablename__ = sql.FINGERPRINTS

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    collection_id: Mapped[int] = mapped_column(
        Integer, ForeignKey(f"{sql.COLLECTIONS}.id", ondelete="CASCADE"), nullable=False
    )
    # C collation: keys compare byte-wise (= code point order, like Python's str),
    # and the unique index is cheaper to maintain than with a linguistic collation.
    key: Mapped[str] = mapped_column(Text(collation="C"), nullable=False)
    fp: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    b0: Mapped[int | None] = mapped_column(Integer, _block(0))
    b1: Mapped[int | None] = mapped_column(Integer, _block(1))
    b2: Mapped[int | None] = mapped_column(Integer, _block(2))
    b3: Mapped[int | None] = mapped_column(Integer, _block(3))
    shingles: Mapped[list[int] | None] = mapped_column(ARRAY(Integer), nullable=True)
    #: LSH band keys of a row of a banded verified collection (simdb.core.sketch.bands; migration 0008)
    bands: Mapped[list[int] | None] = mapped_column(ARRAY(Integer), nullable=True)
    meta: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    #: the row's text, zlib-compressed UTF-8, in a collection that keeps texts (simdb.core.kept_texts; migration 0010)
    text_z: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    collection: Mapped[Collection] = relationship(back_populates="fingerprints", lazy="raise")

    __table_args__ = (
        UniqueConstraint("collection_id", "key", name=sql.UNIQUE_KEY),
        *(Index(name, *cols) for name, cols in sql.BLOCK_INDEXES.items()),
        *(
            Index(name, "collection_id", text(expr), postgresql_where=text("bands IS NOT NULL"))
            for name, (_, expr) in sql.BANDS_INDEXES.items()
        ),
        Index(sql.SKETCHLESS_INDEX, "collection_id", postgresql_where=text(sql.SKETCHLESS_WHERE)),
    )

    def __repr__(self) -> str:
        return f"FingerprintRow(collection_id={self.collection_id!r}, key={self.key!r}, fp={self.fp!r})"


class SparkPair(Base):
    """A near-duplicate pair computed by ``simdb.spark.pairs`` and written back with ``write_pairs``."""

    __tablename__ = "simdb_spark_pairs"

    collection_id: Mapped[int] = mapped_column(
        Integer, ForeignKey(f"{sql.COLLECTIONS}.id", ondelete="CASCADE"), primary_key=True
    )
    key_a: Mapped[str] = mapped_column(Text(collation="C"), primary_key=True)
    key_b: Mapped[str] = mapped_column(Text(collation="C"), primary_key=True)
    distance: Mapped[int | None] = mapped_column(Integer, nullable=True)
    jaccard: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )

    __table_args__ = (CheckConstraint("key_a < key_b", name="simdb_spark_pairs_order"),)


class SparkCluster(Base):
    """A key's cluster (``cluster_key`` = smallest key) computed by ``simdb.spark.clusters``."""

    __tablename__ = "simdb_spark_clusters"

    collection_id: Mapped[int] = mapped_column(
        Integer, ForeignKey(f"{sql.COLLECTIONS}.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(Text(collation="C"), primary_key=True)
    cluster_key: Mapped[str] = mapped_column(Text(collation="C"), nullable=False)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
