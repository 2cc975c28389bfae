"""Alembic integration: simdb's schema inside a host application's migrations (docs/alembic.md).

**simdb's own tables inside a host application's Alembic setup, safe by construction.** Two things
a host app needs:

- **Autogenerate must never touch simdb's objects.** simdb's tables live in the
  host's database (its own server or the embedded default), and a host
  ``env.py`` whose ``target_metadata`` does not describe them would otherwise get
  ``drop_table simdb_...`` proposals from ``alembic revision --autogenerate`` and a
  failing ``alembic check``. :func:`include_object` / :func:`include_name` leave
  out every ``simdb_*`` table (including ``simdb_alembic_version``) and everything
  on them, whether or not the host also lists ``simdb.store.models.metadata``.
  :func:`combine` adds them to a filter the host already has.
- **simdb's migrations in a linear host history.** :func:`upgrade_simdb` /
  :func:`downgrade_simdb` run simdb's own migrations from one ordinary host
  revision, inside its transaction. simdb keeps recording its revision in
  ``simdb_alembic_version``, so the host's ``alembic_version`` holds one head, a
  database already migrated by ``simdb`` itself (``simdb url``, ``SimhashIndex``)
  is recognised instead of created twice, and simdb's CLI and ``SimhashIndex``
  work on the result unchanged.

**The host application's own tables.**

- :func:`render_item`: pass as ``context.configure(render_item=...)`` in the host
  app's ``env.py`` so autogenerate writes ``simdb.sqlalchemy.Fingerprint()`` and
  adds ``import simdb.sqlalchemy`` to the migration (the alternative is adding that
  import to ``script.py.mako``). The block columns render as ``sa.Computed(...)``
  and their indexes as ``op.create_index(...)`` without help.
- :func:`add_simhash_columns` / :func:`drop_simhash_columns`: inside a migration,
  add (or remove) ``fp``, ``b0..b3`` and the block indexes on an existing,
  populated table, backfilling fingerprints from a text column in batches.
- :func:`backfill_fingerprints`: the batch backfill on its own (any Connection).

The columns and index names are the ones :class:`simdb.sqlalchemy.SimhashMixin`
declares, so a model using the mixin and a table migrated with
:func:`add_simhash_columns` do not drift (autogenerate finds nothing).

**Verified host tables**: helpers turning a host table into one a
:class:`simdb.sqlalchemy.verified.VerifiedSimhashMixin` model maps: ``fp`` and ``b0..b3`` (if
missing), ``simdb_sketch int4[]``, ``simdb_rule smallint`` and the 14 band keys ``simdb_band0..13``
(``int4``, one btree each, named ``ix_<table>_simdb_band<i>`` as the mixin's ``index=True`` names
them, so ``alembic check`` finds nothing; about 300 bytes a row; :mod:`simdb.core.model_verifier`
says why they exist), and their values computed from a text column; and :func:`add_rule_column`,
the upgrade of a table made verified before model rules were versioned.

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
Jaccard inline, :func:`simdb.store.sql.render_sketch_jaccard`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from alembic import op
from sqlalchemy import Column, Integer, MetaData, SmallInteger, Table, column, inspect, select, text, update
from sqlalchemy import table as sa_table
from sqlalchemy.dialects.postgresql import ARRAY

from simdb.core.bits import to_signed
from simdb.core.fingerprint import Fingerprinter
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
from simdb.sqlalchemy import BLOCK_NAMES, Fingerprint, block_sql, fingerprint_column
from simdb.store.migrate import migrate_connection

__all__ = [
    "BAND_COLUMNS",
    "KeysetScan",
    "RULE_COLUMN",
    "SKETCH_COLUMN",
    "add_rule_column",
    "add_simhash_columns",
    "add_verified_columns",
    "backfill_fingerprints",
    "backfill_verified",
    "combine",
    "downgrade_simdb",
    "drop_rule_column",
    "drop_simhash_columns",
    "drop_verified_columns",
    "include_name",
    "include_object",
    "index_name",
    "is_simdb_table",
    "qualified_table",
    "render_item",
    "upgrade_simdb",
]

PREFIX = "simdb_"


def is_simdb_table(name: str | None) -> bool:
    """Whether a table belongs to simdb: every simdb table (and its version table) is ``simdb_*``."""
    return name is not None and name.startswith(PREFIX)


def include_name(name: str | None, type_: str, parent_names: dict[str, Any]) -> bool:
    """Alembic ``include_name`` hook: skip simdb's tables before they are even reflected."""
    if type_ == "table":
        return not is_simdb_table(name)
    if type_ in ("column", "index", "unique_constraint", "foreign_key_constraint"):
        return not is_simdb_table(parent_names.get("table_name"))
    return True


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Alembic ``include_object`` hook: nothing of simdb's is added, altered or dropped.

    Covers simdb's tables whichever side they come from (reflected from the
    database, or present in the host's ``target_metadata``) and the indexes,
    constraints and columns on them.
    """
    if type_ == "table":
        return not is_simdb_table(name)
    table = getattr(obj, "table", None)
    return not is_simdb_table(getattr(table, "name", None))


def combine(*hooks: Callable[..., bool]) -> Callable[..., bool]:
    """One hook that includes an object only if every hook does (e.g. yours and :func:`include_object`)."""
    return lambda *args: all(hook(*args) for hook in hooks)


def upgrade_simdb(revision: str = "head") -> None:
    """Inside a host migration's ``upgrade()``: bring simdb's tables and SQL functions to ``revision``.

    Runs on the migration's own connection and transaction. Does nothing if the
    database is already there (e.g. the embedded database ``simdb url`` migrated).
    Online only: simdb's migrations read the database (``--sql`` is refused).
    """
    migrate_connection(_bind("upgrade_simdb() runs simdb's migrations on the database"), revision, direction="upgrade")


def downgrade_simdb(revision: str = "base") -> None:
    """Inside a host migration's ``downgrade()``: take simdb back to ``revision`` (``base`` drops its tables)."""
    migrate_connection(_bind("downgrade_simdb() runs simdb's migrations on the database"), revision, direction="downgrade")


def _bind(what: str):
    """The migration's connection, for a step that reads or writes rows (``what`` it does, for the error)."""
    if op.get_context().as_sql:
        raise RuntimeError(f"{what} and cannot run in --sql (offline) mode")
    return op.get_bind()


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


def _check_args(table: object, source: object, batch_size: object) -> None:
    if not isinstance(table, str) or not table:
        raise InvalidTypeError(f"table must be a table name (str), got {table!r}")
    if source is not None and (not isinstance(source, str) or not source):
        raise InvalidTypeError(f"source must be the name of a text column (str) or None, got {source!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise InvalidTypeError(f"batch_size must be an int, got {type(batch_size).__name__}")
    if batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be >= 1, got {batch_size}")


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
    _check_args(table, source, batch_size)
    fingerprinter = fingerprinter or Fingerprinter()
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
    :func:`backfill_fingerprints` and :func:`backfill_verified`."""

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
    ctx = op.get_context()
    op.add_column(table, fingerprint_column("fp"), schema=schema)
    if source is not None:
        backfill_fingerprints(
            _bind("add_simhash_columns(source=...) backfills rows"),
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
    _create_indexes(table, BLOCK_NAMES, schema, concurrently)


def drop_simhash_columns(table: str, *, schema: str | None = None) -> None:
    """Migration step reversing :func:`add_simhash_columns` (indexes, blocks, then ``fp``)."""
    for name in BLOCK_NAMES:
        op.drop_index(index_name(table, name), table_name=table, schema=schema)
    for name in BLOCK_NAMES:
        op.drop_column(table, name, schema=schema)
    op.drop_column(table, "fp", schema=schema)


#: the column names :class:`simdb.sqlalchemy.verified.VerifiedSimhashMixin` declares
SKETCH_COLUMN = "simdb_sketch"


def _add_band_columns(table: str, schema: str | None) -> None:
    for name in BAND_COLUMNS:
        op.add_column(table, Column(name, Integer, nullable=True), schema=schema)


def _create_indexes(table: str, columns: tuple[str, ...], schema: str | None, concurrently: bool) -> None:
    """One btree per column, built after any backfill (one sorted build each, not indexes maintained
    per updated row); ``concurrently``: ``CREATE INDEX CONCURRENTLY`` outside the migration's transaction."""
    if concurrently:
        with op.get_context().autocommit_block():
            for name in columns:
                op.create_index(index_name(table, name), table, [name], schema=schema, postgresql_concurrently=True)
    else:
        for name in columns:
            op.create_index(index_name(table, name), table, [name], schema=schema)


def _drop_columns(table: str, schema: str | None, columns: tuple[str, ...] = BAND_COLUMNS) -> None:
    """Drop ``columns`` if there (their indexes go with them), in one ``ALTER TABLE``."""
    preparer = op.get_context().dialect.identifier_preparer
    drops = ", ".join(f"DROP COLUMN IF EXISTS {preparer.quote(name)}" for name in columns)
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
    (:func:`add_simhash_columns`), then the nullable ``simdb_sketch int4[]``,
    ``simdb_rule smallint`` and ``simdb_band0..13 int4``, then (with ``source``) computes ``fp``,
    the sketches (current model rule), the rule and the band keys from that text column in
    batches, then builds the band indexes (``concurrently``: as for the block indexes). A table
    that already has ``fp`` needs ``source``: its fingerprints must be recomputed (see the module).
    """
    _check_args(table, source, batch_size)

    ctx = op.get_context()
    bind = None if source is None else _bind("add_verified_columns(source=...) backfills rows")
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
        backfill_verified(bind, table, source, batch_size=batch_size, schema=schema, on_batch=on_batch)
    _create_indexes(table, BAND_COLUMNS, schema, concurrently)


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
    bind = None if source is None else _bind("add_rule_column(source=...) recomputes rows")
    op.add_column(table, Column(RULE_COLUMN, SmallInteger, nullable=True), schema=schema)
    _add_band_columns(table, schema)
    if source is not None:
        backfill_verified(
            bind, table, source, verifier=verifier, batch_size=batch_size, schema=schema, on_batch=on_batch, fingerprints=False
        )
    _create_indexes(table, BAND_COLUMNS, schema, concurrently)


def drop_rule_column(table: str, *, schema: str | None = None) -> None:
    """Migration step reversing :func:`add_rule_column`: drops ``simdb_rule`` and the band keys
    (with their indexes). Rows recomputed
    under rule 2 keep those sketches, which then read as rule 1 (NULL): recompute them under
    ``model_verifier(1)`` (``backfill_verified(..., verifier=model_verifier(1))``) before an
    older simdb maps the table again, or their near-duplicates are not found."""
    _drop_columns(table, schema)
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
    _drop_columns(table, schema, (*BAND_COLUMNS, RULE_COLUMN))
    op.drop_column(table, SKETCH_COLUMN, schema=schema)
    if drop_simhash:
        drop_simhash_columns(table, schema=schema)
    elif source is not None:  # NULL first: a text featureless under the plain Fingerprinter keeps no stale fp
        op.get_bind().execute(update(fp_table).values(fp=None))
        backfill_fingerprints(op.get_bind(), table, source, fingerprinter=fingerprinter, batch_size=batch_size,
                              schema=schema)
