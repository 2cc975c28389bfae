"""Run simdb's Alembic migrations from Python, safely from several processes at once."""

from __future__ import annotations

import functools
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from sqlalchemy import Engine, text

__all__ = ["HEAD", "LOCK_KEY", "head_revision", "VERSION_TABLE", "alembic_config", "current_revision", "migrate", "script_location"]

VERSION_TABLE = "simdb_alembic_version"
#: revision of the newest migration shipped with this version of simdb
HEAD = "simdb_0006_verified"
#: pg_advisory_lock key held while migrating (ASCII "simdbMIG")
LOCK_KEY = 0x73696D64624D4947


def script_location() -> str:
    """Directory of simdb's migration scripts (``migrations/`` in a checkout, ``simdb/migrations`` in a wheel)."""
    return str(Path(str(resources.files("simdb.migrations"))))


@functools.cache
def head_revision() -> str:
    """Revision id of the newest migration shipped with this version of simdb."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


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


def migrate(database: str | Engine | None = None, revision: str = "head") -> None:
    """Upgrade simdb's tables to ``revision`` (``alembic upgrade head``).

    ``database`` is a URL or an Engine (None: ``SIMDB_DATABASE_URL``, then the embedded
    server). A session-level advisory lock serialises concurrent callers: the second
    process waits, then finds the schema at head and does nothing.
    """
    from alembic import command

    with _locked_connection(database) as conn:
        if revision == "head" and current_revision(conn) == HEAD:
            conn.commit()
            return
        conn.commit()
        command.upgrade(alembic_config(conn), revision)
        conn.commit()


def downgrade(database: str | Engine | None = None, revision: str = "base") -> None:
    """Downgrade simdb's tables (``base`` drops them). Same locking as :func:`migrate`."""
    from alembic import command

    with _locked_connection(database) as conn:
        command.downgrade(alembic_config(conn), revision)
        conn.commit()


@contextmanager
def _locked_connection(database: str | Engine | None):
    """A connection holding simdb's migration advisory lock (session level) for the block."""
    from simdb.database import resolve_engine

    engine, owned = resolve_engine(database)
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
