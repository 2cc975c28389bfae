"""Run simdb's Alembic migrations from Python, safely from several processes at once."""

from __future__ import annotations

import functools
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from sqlalchemy import Engine, text

from simdb.errors import SchemaManagedElsewhereError
from simdb.store.urls import plain_engine

__all__ = [
    "HEAD",
    "HOST_VERSION_TABLE",
    "LOCK_KEY",
    "VERSION_TABLE",
    "alembic_config",
    "current_revision",
    "downgrade",
    "head_revision",
    "migrate",
    "migrate_connection",
    "schema_revision",
    "script_location",
    "versions_location",
]

VERSION_TABLE = "simdb_alembic_version"
#: Alembic's default version table: a host application that put simdb's revisions into its
#: own history (the older recipe) records them there, and simdb recognises that.
HOST_VERSION_TABLE = "alembic_version"
#: revision of the newest migration shipped with this version of simdb
HEAD = "simdb_0015_collection_guard"
#: pg_advisory_lock key held while migrating (ASCII "simdbMIG")
LOCK_KEY = 0x73696D64624D4947


def script_location() -> str:
    """Directory of simdb's migration scripts (``migrations/`` in a checkout, ``simdb/migrations`` in a wheel)."""
    return str(Path(str(resources.files("simdb.migrations"))))


def versions_location() -> str:
    """``version_locations`` entry for simdb's revisions, as a package reference (no machine path).

    Alembic resolves ``package:path`` entries with importlib.resources, so the same
    ``alembic.ini`` line works in every virtual environment, Python version and CI.
    """
    return "simdb.migrations:versions"


@functools.cache
def head_revision() -> str:
    """Revision id of the newest migration shipped with this version of simdb."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:  # only a broken install has no scripts
        raise RuntimeError("simdb's migration scripts have no head revision")
    return head


def alembic_config(connection=None):
    """An Alembic Config for simdb's migrations; pass a Connection to run them on it."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", script_location())
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def current_revision(connection) -> str | None:
    """The revision recorded in ``simdb_alembic_version`` (None if simdb was never migrated)."""
    exists = connection.execute(text("SELECT to_regclass(:t)"), {"t": VERSION_TABLE}).scalar()
    if exists is None:
        return None
    return connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()


def schema_revision(fetch) -> tuple[str | None, str | None]:
    """Where simdb's schema is recorded: ``(revision, version table)``, ``(None, None)`` if nowhere.

    ``fetch(sql)`` runs one parameterless statement and returns its rows (so both a
    SQLAlchemy Connection, via :func:`_fetcher`, and a raw psycopg connection can
    ask). simdb's own ``simdb_alembic_version`` wins; otherwise a ``simdb_*`` revision
    in the host application's ``alembic_version`` means the schema was migrated
    through the host's history, and simdb must recognise it instead of creating its
    tables a second time (which fails with ``DuplicateTable``).
    """
    own, host = fetch(f"SELECT to_regclass('{VERSION_TABLE}') IS NOT NULL, to_regclass('{HOST_VERSION_TABLE}') IS NOT NULL")[0]
    if own:
        rows = fetch(f"SELECT version_num FROM {VERSION_TABLE}")
        if rows:
            return rows[0][0], VERSION_TABLE
    if host:
        rows = fetch(f"SELECT version_num FROM {HOST_VERSION_TABLE} WHERE left(version_num, 6) = 'simdb_'")
        if rows:
            return rows[0][0], HOST_VERSION_TABLE
    return None, None


def _fetcher(connection):
    return lambda sql: connection.execute(text(sql)).all()


def _refuse_host_managed(rev: str | None, table: str | None, revision: str) -> bool:
    """True if there is nothing to do; raises if the host's history owns an out-of-date schema."""
    if table != HOST_VERSION_TABLE:
        return False
    if revision == "head" and rev == HEAD:
        return True
    raise SchemaManagedElsewhereError(
        f"simdb's tables are recorded in your application's Alembic history ({HOST_VERSION_TABLE} holds {rev!r}, "
        f"this simdb needs {HEAD!r}); simdb will not migrate them itself. Upgrade them there: alembic upgrade heads"
    )


def migrate(database: str | Engine | None = None, revision: str = "head") -> None:
    """Upgrade simdb's tables to ``revision`` (``alembic upgrade head``).

    ``database`` is a URL or an Engine (None: ``SIMDB_DATABASE_URL``, then the embedded
    server). A session-level advisory lock serialises concurrent callers: the second
    process waits, then finds the schema at head and does nothing.
    """
    from alembic import command

    with _locked_connection(database) as conn:
        rev, table = schema_revision(_fetcher(conn))
        if (revision == "head" and rev == HEAD) or _refuse_host_managed(rev, table, revision):
            conn.commit()
            return
        conn.commit()
        with _outer_alembic_kept():
            command.upgrade(alembic_config(conn), revision)
        conn.commit()


def migrate_connection(connection, revision: str = "head", *, direction: str = "upgrade") -> None:
    """Run simdb's migrations on ``connection``, inside the caller's transaction.

    For a host application's Alembic migration (:func:`simdb.alembic.upgrade_simdb`):
    the work commits or rolls back with the host's revision, and a transaction-level
    advisory lock (the same key as :func:`migrate`) keeps a concurrent ``simdb.migrate``
    out. simdb's revision stays in ``simdb_alembic_version``, so the host's history
    holds one revision of its own and never gains a second head.
    """
    from alembic import command

    if direction not in ("upgrade", "downgrade"):
        raise ValueError(f"direction must be 'upgrade' or 'downgrade', got {direction!r}")
    connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": LOCK_KEY})
    rev, table = schema_revision(_fetcher(connection))
    cfg = alembic_config(connection)
    if direction == "upgrade":
        if (revision == "head" and rev == HEAD) or _refuse_host_managed(rev, table, revision):
            return
        if rev is not None and revision != "head" and _is_ancestor(cfg, revision, rev):
            return  # already there or beyond (e.g. simdb.migrate ran a newer simdb's migrations)
        with _outer_alembic_kept():
            command.upgrade(cfg, revision)
    else:
        if table == HOST_VERSION_TABLE:
            _refuse_host_managed(rev, table, "")
        with _outer_alembic_kept():
            command.downgrade(cfg, revision)


@contextmanager
def _outer_alembic_kept():
    """Keep a running Alembic environment's ``alembic.op`` / ``alembic.context`` across simdb's own run.

    simdb's migrations can run while another Alembic environment is active: a host
    application's migration calling ``upgrade_simdb()``, or a host ``env.py`` whose
    URL comes from the embedded default (migrated on first use). Alembic binds those
    module-level proxies to the innermost environment and deletes them when it
    ends, which would leave the outer one without ``op``/``context`` (``KeyError:
    'config'`` on its exit). Re-install the outer proxies afterwards.
    """
    from alembic import context, op

    saved = [getattr(module, "_proxy", None) for module in (context, op)]
    try:
        yield
    finally:
        for proxy in saved:
            if proxy is not None:
                proxy._install_proxy()


def _is_ancestor(cfg, revision: str, of: str) -> bool:
    """Whether ``revision`` is ``of`` or one of its ancestors in simdb's scripts."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(cfg)
    target = script.get_revision(revision).revision
    return any(r.revision == target for r in script.iterate_revisions(of, "base"))


def downgrade(database: str | Engine | None = None, revision: str = "base") -> None:
    """Downgrade simdb's tables (``base`` drops them). Same locking as :func:`migrate`."""
    from alembic import command

    with _locked_connection(database) as conn:
        with _outer_alembic_kept():
            command.downgrade(alembic_config(conn), revision)
        conn.commit()


@contextmanager
def _locked_connection(database: str | Engine | None):
    """A connection holding simdb's migration advisory lock (session level) for the block."""
    engine, owned = plain_engine(database)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": LOCK_KEY})
            conn.commit()
            try:
                yield conn
            finally:
                conn.rollback()
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": LOCK_KEY})
                conn.commit()
    finally:
        if owned:
            engine.dispose()
