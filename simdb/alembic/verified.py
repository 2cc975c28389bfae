"""Alembic helpers turning a host table into one a :class:`simdb.sqlalchemy.verified.VerifiedSimhashMixin`
model maps: ``fp`` and ``b0..b3`` (if missing), the ``simdb_sketch int4[]`` column, and both
values computed from a text column.

Why ``fp`` is *recomputed* when the table already has one: a plain ``SimhashMixin`` table holds
fingerprints from ``Fingerprinter()``, a verified model compares them with fingerprints from the
candidate Fingerprinter (:func:`simdb.core.model_verifier.model_fingerprinter`, the one the
candidate radius ``K`` was measured for). Keeping the old values would make every candidate
stage answer about the wrong fingerprints, silently; so :func:`add_verified_columns` refuses a
table that has ``fp`` unless it is given ``source`` to recompute from.

Nothing of simdb's own schema is needed in the host database (the verified queries compute the
Jaccard inline, :mod:`simdb.store.sketch_sql`).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Column, Integer, inspect, text
from sqlalchemy.dialects.postgresql import ARRAY

from simdb.alembic.ops import KeysetScan, add_simhash_columns, drop_simhash_columns
from simdb.core.bits import to_signed
from simdb.core.model_verifier import model_fingerprinter, model_verifier
from simdb.core.sketch import Verifier
from simdb.errors import InvalidArgumentError

__all__ = ["SKETCH_COLUMN", "add_verified_columns", "backfill_verified", "drop_verified_columns"]

#: the column name :class:`simdb.sqlalchemy.verified.VerifiedSimhashMixin` declares
SKETCH_COLUMN = "simdb_sketch"


def backfill_verified(
    connection,
    table: str,
    source: str,
    *,
    verifier: Verifier | None = None,
    batch_size: int = 5000,
    schema: str | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> int:
    """Set ``fp`` (candidate Fingerprinter) and ``simdb_sketch`` from the text column ``source`` for
    every row, ``batch_size`` rows at a time in primary-key order (keyset pagination); texts with
    no features get NULL. Returns the number of rows visited; runs in the caller's transaction."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be an int >= 1, got {batch_size!r}")
    verifier = verifier or model_verifier()
    fpr = model_fingerprinter()
    scan = KeysetScan(connection, table, source, schema=schema)
    update = text(
        f"UPDATE {scan.table_sql} SET fp = :fp, {scan.quote(SKETCH_COLUMN)} = CAST(:sk AS int4[]) WHERE {scan.pk_sql} = :id"
    )
    total = 0
    for rows in scan.batches(batch_size):
        values = []
        for pk, body in rows:
            fp = None if body is None else fpr.fingerprint(body, empty=None)
            sk = None if body is None else verifier.sketch(body)
            values.append({"id": pk, "fp": None if fp is None else to_signed(fp), "sk": sk})
        connection.execute(update, values)
        total += len(rows)
        if on_batch is not None:
            on_batch(len(rows))
    return total


def add_verified_columns(
    table: str,
    *,
    source: str | None = None,
    batch_size: int = 5000,
    schema: str | None = None,
    concurrently: bool = False,
    on_batch: Callable[[int], None] | None = None,
) -> None:
    """Migration step: make ``table`` match a ``VerifiedSimhashMixin`` model.

    Adds ``fp``, generated ``b0..b3`` and their indexes if the table has no ``fp``
    (:func:`simdb.alembic.ops.add_simhash_columns`), then the nullable ``simdb_sketch int4[]``,
    then (with ``source``) computes both from that text column in batches. A table that already
    has ``fp`` needs ``source``: its fingerprints must be recomputed (see the module).
    """
    from alembic import op

    ctx = op.get_context()
    if source is not None and ctx.as_sql:
        raise RuntimeError("add_verified_columns(source=...) backfills rows and cannot run in --sql (offline) mode")
    has_fp = not ctx.as_sql and "fp" in {c["name"] for c in inspect(op.get_bind()).get_columns(table, schema=schema)}
    if has_fp and source is None:
        raise InvalidArgumentError(
            f"table {table!r} already has fingerprints (fp) from another Fingerprinter; pass source= (its text "
            "column) so that fp is recomputed with the candidate Fingerprinter together with the sketches"
        )
    if not has_fp:
        add_simhash_columns(table, schema=schema, concurrently=concurrently)
    op.add_column(table, Column(SKETCH_COLUMN, ARRAY(Integer), nullable=True), schema=schema)
    if source is not None:
        backfill_verified(op.get_bind(), table, source, batch_size=batch_size, schema=schema, on_batch=on_batch)


def drop_verified_columns(table: str, *, schema: str | None = None, drop_simhash: bool = False) -> None:
    """Migration step reversing :func:`add_verified_columns`: drops ``simdb_sketch`` (and with
    ``drop_simhash`` also ``fp``, ``b0..b3`` and their indexes). Kept ``fp`` values are the
    candidate Fingerprinter's: recompute them (``backfill_fingerprints(..., only_missing=False)``)
    if a plain ``SimhashMixin`` model maps the table again."""
    from alembic import op

    op.drop_column(table, SKETCH_COLUMN, schema=schema)
    if drop_simhash:
        drop_simhash_columns(table, schema=schema)
