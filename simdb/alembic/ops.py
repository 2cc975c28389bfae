"""Alembic helpers for an application's own tables (named so it never shadows ``alembic``).

- :func:`render_item`: pass as ``context.configure(render_item=...)`` in the host
  app's ``env.py`` so autogenerate writes ``simdb.sqlalchemy.Fingerprint()`` and
  adds ``import simdb.sqlalchemy`` to the migration (the alternative is adding that
  import to ``script.py.mako``). The block columns render as ``sa.Computed(...)``
  and their indexes as ``op.create_index(...)`` without help.
- :func:`add_simhash_columns` / :func:`drop_simhash_columns`: inside a migration,
  add (or remove) ``fp``, ``b0..b3`` and the block indexes on an existing,
  populated table, backfilling fingerprints from a text column in batches.
- :func:`backfill_fingerprints`: the batch backfill on its own (any Connection).
- :func:`include_object` / :func:`include_name` (autogenerate never touches simdb's
  tables) and :func:`upgrade_simdb` / :func:`downgrade_simdb` (simdb's migrations from
  one revision of a linear host history): see :mod:`simdb.alembic.host` and docs/alembic.md.

The columns and index names are the ones :class:`simdb.sqlalchemy.SimhashMixin`
declares, so a model using the mixin and a table migrated with
:func:`add_simhash_columns` do not drift (autogenerate finds nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import MetaData, Table, text

from simdb.alembic.host import combine, downgrade_simdb, include_name, include_object, upgrade_simdb
from simdb.core.bits import to_signed
from simdb.core.fingerprint import Fingerprinter
from simdb.errors import InvalidArgumentError, InvalidTypeError
from simdb.sqlalchemy import BLOCK_NAMES, Fingerprint, block_sql, fingerprint_column

__all__ = [
    "KeysetScan",
    "add_simhash_columns",
    "backfill_fingerprints",
    "combine",
    "downgrade_simdb",
    "drop_simhash_columns",
    "include_name",
    "include_object",
    "index_name",
    "qualified_table",
    "render_item",
    "upgrade_simdb",
]


def render_item(type_: str, obj: Any, autogen_context: Any):
    """Alembic ``render_item`` hook: render :class:`Fingerprint` with its import."""
    if type_ == "type" and isinstance(obj, Fingerprint):
        autogen_context.imports.add("import simdb.sqlalchemy")
        return "simdb.sqlalchemy.Fingerprint()"
    return False


def index_name(table: str, block: str) -> str:
    """SQLAlchemy's default name for the mixin's index on ``block``: ``ix_<table>_<block>``."""
    return f"ix_{table}_{block}"


def qualified_table(preparer, table: str, schema: str | None) -> str:
    """``table`` (in ``schema``) quoted for SQL text, as the host migration steps name it."""
    q = preparer.quote(table)
    return f"{preparer.quote_schema(schema)}.{q}" if schema else q


def _default_fingerprinter():
    return Fingerprinter()


def _fingerprint_batch(fingerprinter, texts: list) -> list[int | None]:
    present = [t for t in texts if t is not None]
    if hasattr(fingerprinter, "many"):
        fps = iter(fingerprinter.many(present, empty=None))
    else:
        fps = iter([fingerprinter.fingerprint(t, empty=None) for t in present])
    return [None if t is None else next(fps) for t in texts]


def backfill_fingerprints(
    connection,
    table: str,
    source: str,
    *,
    fingerprinter: Any = None,
    batch_size: int = 5000,
    schema: str | None = None,
    fp_column: str = "fp",
    only_missing: bool = True,
    on_batch: Callable[[int], None] | None = None,
) -> int:
    """Compute ``fp`` from the text column ``source`` for every row, ``batch_size`` rows at a time.

    Walks the table in primary-key order (keyset pagination, so each batch is an
    index range scan) and writes each batch with one ``UPDATE ... FROM unnest(...)``.
    With ``only_missing`` rows whose ``fp`` is already set are skipped. Texts with no
    features keep ``fp = NULL``. Returns the number of rows fingerprinted;
    ``on_batch(n)`` is called after each batch. Runs in the caller's transaction.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise InvalidTypeError(f"batch_size must be an int, got {type(batch_size).__name__}")
    if batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be >= 1, got {batch_size}")
    fingerprinter = fingerprinter or _default_fingerprinter()
    scan = KeysetScan(connection, table, source, schema=schema, unset=fp_column if only_missing else None)
    update = text(
        f"UPDATE {scan.table_sql} AS t SET {scan.quote(fp_column)} = u.fp "
        f"FROM unnest(CAST(:ids AS {scan.pk_type}[]), CAST(:fps AS bigint[])) AS u(id, fp) "
        f"WHERE t.{scan.pk_sql} = u.id"
    )
    total = 0
    for rows in scan.batches(batch_size):
        fps = _fingerprint_batch(fingerprinter, [r[1] for r in rows])
        ids = [r[0] for r, fp in zip(rows, fps) if fp is not None]
        signed = [to_signed(fp) for fp in fps if fp is not None]
        if ids:
            connection.execute(update, {"ids": ids, "fps": signed})
        total += len(rows)
        if on_batch is not None:
            on_batch(len(rows))
    return total


class KeysetScan:
    """A table's rows as (primary key, text of ``source``), in primary-key order, a batch at a time.

    Keyset pagination (``WHERE pk > :last ORDER BY pk LIMIT :n``): each batch is an index range
    scan, whatever the table's size, and rows updated by the caller between batches do not move
    the walk. ``unset``: only rows where that column is NULL. Shared by the backfills of
    :func:`backfill_fingerprints` and :func:`simdb.alembic.verified.backfill_verified`."""

    def __init__(self, connection, table: str, source: str, *, schema: str | None = None, unset: str | None = None):
        tbl = Table(table, MetaData(), autoload_with=connection, schema=schema)
        pk_cols = list(tbl.primary_key.columns)
        if len(pk_cols) != 1:
            raise InvalidArgumentError(
                f"table {table!r} needs a single-column primary key for the backfill, has {len(pk_cols)}"
            )
        if source not in tbl.c:
            raise InvalidArgumentError(f"source: table {table!r} has no column {source!r}")
        self.connection = connection
        self.quote = connection.dialect.identifier_preparer.quote
        self.table_sql = qualified_table(connection.dialect.identifier_preparer, table, schema)
        self.pk_sql = self.quote(pk_cols[0].name)
        self.pk_type = pk_cols[0].type.compile(connection.dialect)
        only = f" AND {self.quote(unset)} IS NULL" if unset else ""
        head = f"SELECT {self.pk_sql}, {self.quote(source)} FROM {self.table_sql}"
        self._first = text(f"{head} WHERE TRUE{only} ORDER BY {self.pk_sql} LIMIT :n")
        self._next = text(f"{head} WHERE {self.pk_sql} > :last{only} ORDER BY {self.pk_sql} LIMIT :n")

    def batches(self, batch_size: int) -> Iterator[list]:
        last = None
        while True:
            params = {"n": batch_size} if last is None else {"n": batch_size, "last": last}
            rows = self.connection.execute(self._first if last is None else self._next, params).all()
            if not rows:
                return
            yield rows
            if len(rows) < batch_size:
                return
            last = rows[-1][0]


def add_simhash_columns(
    table: str,
    *,
    source: str | None = None,
    fingerprinter: Any = None,
    batch_size: int = 5000,
    schema: str | None = None,
    concurrently: bool = False,
    on_batch: Callable[[int], None] | None = None,
) -> None:
    """Migration step: add ``fp``, generated ``b0..b3`` and their indexes to ``table``.

    Order chosen for a populated table: add the nullable ``fp`` (no rewrite),
    backfill it from ``source`` in batches (if given), add the four generated
    columns in one ``ALTER TABLE`` (one table rewrite, not four), then build the
    block indexes (``CREATE INDEX CONCURRENTLY`` outside the migration's
    transaction when ``concurrently=True``). Backfilling needs an online migration
    (not ``--sql``).
    """
    from alembic import op

    ctx = op.get_context()
    op.add_column(table, fingerprint_column("fp"), schema=schema)
    if source is not None:
        if ctx.as_sql:
            raise RuntimeError("add_simhash_columns(source=...) backfills rows and cannot run in --sql (offline) mode")
        backfill_fingerprints(
            op.get_bind(),
            table,
            source,
            fingerprinter=fingerprinter,
            batch_size=batch_size,
            schema=schema,
            on_batch=on_batch,
        )
    prep = ctx.dialect.identifier_preparer
    adds = ", ".join(
        f"ADD COLUMN {prep.quote(name)} integer GENERATED ALWAYS AS ({block_sql('fp', i)}) STORED"
        for i, name in enumerate(BLOCK_NAMES)
    )
    op.execute(f"ALTER TABLE {qualified_table(prep, table, schema)} {adds}")
    if concurrently:
        with ctx.autocommit_block():
            for name in BLOCK_NAMES:
                op.create_index(index_name(table, name), table, [name], schema=schema, postgresql_concurrently=True)
    else:
        for name in BLOCK_NAMES:
            op.create_index(index_name(table, name), table, [name], schema=schema)


def drop_simhash_columns(table: str, *, schema: str | None = None) -> None:
    """Migration step reversing :func:`add_simhash_columns` (indexes, blocks, then ``fp``)."""
    from alembic import op

    for name in BLOCK_NAMES:
        op.drop_index(index_name(table, name), table_name=table, schema=schema)
    for name in BLOCK_NAMES:
        op.drop_column(table, name, schema=schema)
    op.drop_column(table, "fp", schema=schema)
