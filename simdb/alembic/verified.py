"""Alembic helpers turning a host table into one a :class:`simdb.sqlalchemy.verified.VerifiedSimhashMixin`
model maps: ``fp`` and ``b0..b3`` (if missing), the ``simdb_sketch int4[]`` and ``simdb_rule
smallint`` columns, the 14 band-key columns ``simdb_band0..13`` (``int4``, one btree each, named
``ix_<table>_simdb_band<i>`` as the mixin's ``index=True`` names them, so ``alembic check`` finds
nothing), and their values computed from a text column; and :func:`add_rule_column`, the upgrade
of a table made verified before model rules were versioned.

Why the band keys (:mod:`simdb.sqlalchemy.verified`): rule-2 rows sharing 2 of 14 keys with a query are
candidates whatever their distance, which ``K = 11`` alone is not for ~7 % of the one-typo copies of
short comments. They cost about 300 bytes a row (14 ``int4`` and their index entries).

Why ``simdb_rule`` is added without a default: the rows already there hold rule 1's sketches
(token 3-grams), and NULL is what says so (:func:`simdb.core.model_verifier.stored_rule`). They
keep answering, under rule 1, until their sketches are recomputed (``add_rule_column(...,
source=...)`` now, or ``Model.recompute_sketches`` later); a default of 2 would make every old row
compared under a rule its sketch was not computed with, and its near-duplicates lost silently.

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
from typing import Any

from alembic import op
from sqlalchemy import Column, Integer, SmallInteger, column, inspect, select, text, update
from sqlalchemy import table as sa_table
from sqlalchemy.dialects.postgresql import ARRAY

from simdb.alembic.ops import (
    KeysetScan,
    add_simhash_columns,
    backfill_fingerprints,
    drop_simhash_columns,
    index_name,
    qualified_table,
)
from simdb.core.bits import to_signed
from simdb.core.model_verifier import (
    BAND_COLUMNS,
    MODEL_RULE,
    RULE_COLUMN,
    check_model_verifier,
    model_band_keys,
    model_fingerprinter,
    model_verifier,
    rule_of,
)
from simdb.core.sketch import Verifier
from simdb.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "BAND_COLUMNS",
    "RULE_COLUMN",
    "SKETCH_COLUMN",
    "add_rule_column",
    "add_verified_columns",
    "backfill_verified",
    "drop_rule_column",
    "drop_verified_columns",
]

#: the column names :class:`simdb.sqlalchemy.verified.VerifiedSimhashMixin` declares
SKETCH_COLUMN = "simdb_sketch"


def _check_args(table: object, source: object, batch_size: object) -> None:
    if not isinstance(table, str) or not table:
        raise InvalidTypeError(f"table must be a table name (str), got {table!r}")
    if source is not None and (not isinstance(source, str) or not source):
        raise InvalidTypeError(f"source must be the name of a text column (str) or None, got {source!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be an int >= 1, got {batch_size!r}")


def _add_band_columns(table: str, schema: str | None) -> None:
    for name in BAND_COLUMNS:
        op.add_column(table, Column(name, Integer, nullable=True), schema=schema)


def _index_band_columns(table: str, schema: str | None, concurrently: bool) -> None:
    """The 14 btrees, after the backfill (one sorted build each, not 14 indexes maintained per
    updated row); ``concurrently``: ``CREATE INDEX CONCURRENTLY`` outside the migration's transaction."""
    if concurrently:
        with op.get_context().autocommit_block():
            for name in BAND_COLUMNS:
                op.create_index(index_name(table, name), table, [name], schema=schema, postgresql_concurrently=True)
    else:
        for name in BAND_COLUMNS:
            op.create_index(index_name(table, name), table, [name], schema=schema)


def _drop_band_columns(table: str, schema: str | None) -> None:
    """Drop the band columns if there (their indexes go with them), in one ``ALTER TABLE``."""
    preparer = op.get_context().dialect.identifier_preparer
    drops = ", ".join(f"DROP COLUMN IF EXISTS {preparer.quote(name)}" for name in BAND_COLUMNS)
    op.execute(f"ALTER TABLE {qualified_table(preparer, table, schema)} {drops}")


def backfill_verified(
    connection,
    table: str,
    source: str,
    *,
    verifier: Verifier | None = None,
    batch_size: int = 5000,
    schema: str | None = None,
    on_batch: Callable[[int], None] | None = None,
    fingerprints: bool = True,
) -> int:
    """Set ``fp`` (candidate Fingerprinter), ``simdb_sketch`` (``verifier``'s, default the current
    model rule's), ``simdb_rule`` (:func:`~simdb.core.model_verifier.rule_of` ``verifier``: what
    the model with that verifier writes) and the band keys (rule 2's; NULL under any other rule, as
    the model writes them) from the text column ``source`` for every row,
    ``batch_size`` rows at a time in primary-key order (keyset pagination); texts with no features
    get NULL. ``fingerprints=False`` leaves ``fp`` as it is (the same under every rule: only the
    sketches change). Returns the number of rows visited; runs in the caller's transaction."""
    _check_args(table, source, batch_size)
    verifier = model_verifier() if verifier is None else check_model_verifier(verifier, "verifier")
    fpr = model_fingerprinter()
    scan = KeysetScan(connection, table, source, schema=schema)
    sets = [f"{scan.quote(SKETCH_COLUMN)} = CAST(:sk AS int4[])", f"{scan.quote(RULE_COLUMN)} = :rule"]
    sets += [f"{scan.quote(name)} = CAST(:{name} AS int4)" for name in BAND_COLUMNS]
    if fingerprints:
        sets.insert(0, "fp = :fp")
    update = text(f"UPDATE {scan.table_sql} SET {', '.join(sets)} WHERE {scan.pk_sql} = :id")
    rule = rule_of(verifier)
    no_keys = [None] * len(BAND_COLUMNS)
    total = 0
    for rows in scan.batches(batch_size):
        values = []
        for pk, body in rows:
            row = {"id": pk, "sk": None if body is None else verifier.sketch(body), "rule": rule}
            row.update(zip(BAND_COLUMNS, (model_band_keys(body) if rule == MODEL_RULE else None) or no_keys))
            if fingerprints:
                fp = None if body is None else fpr.fingerprint(body, empty=None)
                row["fp"] = None if fp is None else to_signed(fp)
            values.append(row)
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
    ``simdb_rule smallint`` and ``simdb_band0..13 int4``, then (with ``source``) computes ``fp``,
    the sketches (current model rule), the rule and the band keys from that text column in
    batches, then builds the band indexes (``concurrently``: as for the block indexes). A table
    that already has ``fp`` needs ``source``: its fingerprints must be recomputed (see the module).
    """
    _check_args(table, source, batch_size)

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
    op.add_column(table, Column(RULE_COLUMN, SmallInteger, nullable=True), schema=schema)
    _add_band_columns(table, schema)
    if source is not None:
        backfill_verified(op.get_bind(), table, source, batch_size=batch_size, schema=schema, on_batch=on_batch)
    _index_band_columns(table, schema, concurrently)


def add_rule_column(
    table: str,
    *,
    schema: str | None = None,
    source: str | None = None,
    batch_size: int = 5000,
    verifier: Verifier | None = None,
    on_batch: Callable[[int], None] | None = None,
    concurrently: bool = False,
) -> None:
    """Migration step upgrading a table made verified before model rules were versioned (it has
    ``simdb_sketch`` but no ``simdb_rule``): adds the nullable ``simdb_rule smallint`` and the
    band-key columns ``simdb_band0..13`` with their indexes (``concurrently``: built with
    ``CREATE INDEX CONCURRENTLY`` outside the migration's transaction, for a table in use).

    Without ``source`` nothing else changes: every row stays NULL (rule 1, no keys) and keeps
    answering under rule 1, while new rows are written under rule 2; ``Model.recompute_sketches(session)``
    moves the old ones whenever suits. With ``source`` (the text column) the sketches of every row
    are recomputed now under ``verifier`` (default: the current model rule; pass the model's own
    ``__simdb_verifier__`` if it has one), ``simdb_rule`` and the keys set, in batches (``fp`` is kept).
    """
    _check_args(table, source, batch_size)
    if verifier is not None:
        check_model_verifier(verifier, "verifier")
    if source is not None and op.get_context().as_sql:
        raise RuntimeError("add_rule_column(source=...) recomputes rows and cannot run in --sql (offline) mode")
    op.add_column(table, Column(RULE_COLUMN, SmallInteger, nullable=True), schema=schema)
    _add_band_columns(table, schema)
    if source is not None:
        bind = op.get_bind()
        backfill_verified(
            bind, table, source, verifier=verifier, batch_size=batch_size, schema=schema, on_batch=on_batch, fingerprints=False
        )
    _index_band_columns(table, schema, concurrently)


def drop_rule_column(table: str, *, schema: str | None = None) -> None:
    """Migration step reversing :func:`add_rule_column`: drops ``simdb_rule`` and the band keys
    (with their indexes). Rows recomputed
    under rule 2 keep those sketches, which then read as rule 1 (NULL): recompute them under
    ``model_verifier(1)`` (``backfill_verified(..., verifier=model_verifier(1))``) before an
    older simdb maps the table again, or their near-duplicates are not found."""
    _drop_band_columns(table, schema)
    op.drop_column(table, RULE_COLUMN, schema=schema)


def drop_verified_columns(
    table: str,
    *,
    schema: str | None = None,
    drop_simhash: bool = False,
    source: str | None = None,
    fingerprinter: Any = None,
    batch_size: int = 5000,
) -> None:
    """Migration step reversing :func:`add_verified_columns`: drops the band keys and ``simdb_rule``
    (if there: a migration written before them runs this after :func:`drop_rule_column`) and
    ``simdb_sketch`` (and with ``drop_simhash`` also ``fp``, ``b0..b3`` and their indexes).

    Kept ``fp`` values (``drop_simhash=False``: the table was a plain ``SimhashMixin`` one) are the
    candidate Fingerprinter's, which the plain model misreads: its near-duplicates went unfound,
    silently (0 of 19 exact copies in an audit). So ``source`` (the text column) recomputes them with
    ``fingerprinter`` (default ``Fingerprinter()``, the plain mixin's), in primary-key batches; a
    table that keeps fingerprints without ``source`` is refused (``InvalidArgumentError``), an
    empty one is not."""
    _check_args(table, source, batch_size)
    ctx = op.get_context()
    fp_table = sa_table(table, column("fp"), schema=schema)
    if not drop_simhash and source is not None and ctx.as_sql:
        raise RuntimeError("drop_verified_columns(source=...) recomputes fp and cannot run in --sql (offline) mode")
    if not drop_simhash and source is None and not ctx.as_sql:
        kept = op.get_bind().execute(select(fp_table.c.fp).where(fp_table.c.fp.isnot(None)).limit(1)).first()
        if kept is not None:
            raise InvalidArgumentError(
                f"drop_verified_columns({table!r}) keeps fp, which holds the candidate Fingerprinter's values: pass "
                "source= (the text column) to recompute them for a plain SimhashMixin model, or drop_simhash=True"
            )
    preparer = ctx.dialect.identifier_preparer
    _drop_band_columns(table, schema)
    op.execute(f"ALTER TABLE {qualified_table(preparer, table, schema)} DROP COLUMN IF EXISTS {preparer.quote(RULE_COLUMN)}")
    op.drop_column(table, SKETCH_COLUMN, schema=schema)
    if drop_simhash:
        drop_simhash_columns(table, schema=schema)
    elif source is not None:  # NULL first: a text featureless under the plain Fingerprinter keeps no stale fp
        op.get_bind().execute(update(fp_table).values(fp=None))
        backfill_fingerprints(op.get_bind(), table, source, fingerprinter=fingerprinter, batch_size=batch_size,
                              schema=schema)
