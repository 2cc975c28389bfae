"""Turning what the caller gave (a URL, an Engine, or nothing) into an Engine.

Precedence: an explicit Engine or URL, then ``SIMDB_DATABASE_URL``, then the
embedded PostgreSQL server (see ``simdb.embedded``: started on demand, and
migrated to simdb's newest schema on first use in each process). Plain ``postgresql://``
URLs are routed to the psycopg 3 driver, which simdb is written and tested for.

This module is the orchestration on top: ``simdb.embedded`` only runs the server,
``simdb.store.migrate`` only migrates (it finds its engine through
``simdb.store.urls``), and the first-use migration that joins them lives here,
so no module below imports one above.
"""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
from sqlalchemy import Engine, create_engine

from simdb.embedded import libpq_url, pgdata_dir, server_url
from simdb.store.migrate import HEAD, schema_revision
from simdb.store.migrate import migrate as run_migrations
from simdb.store.urls import (
    CLIENT_ENCODING,
    ENV_URL,
    check_engine,
    configured_url,
    display_url,
    normalize_url,
    utf8_engine_kwargs,
)

__all__ = ["ENV_URL", "display_url", "embedded_url", "normalize_url", "resolve_engine", "resolve_url"]

_migrated: set[Path] = set()
_lock = threading.RLock()


def embedded_url(pgdata: Path | None = None, *, migrate: bool = True) -> str:
    """A SQLAlchemy URL (psycopg driver) for the embedded server, starting it if needed.

    The first call in a process also migrates the database to the newest
    schema (``migrate=False`` skips that).
    """
    pgdata = pgdata_dir(pgdata)
    url = server_url(pgdata)
    if migrate:
        with _lock:
            if pgdata not in _migrated:
                _migrated.add(pgdata)  # first, so a migration that asks for the URL does not recurse
                try:
                    if not _at_head(url):
                        run_migrations(url)
                except BaseException:
                    _migrated.discard(pgdata)
                    raise
    return url


def _at_head(url: str) -> bool:
    """Whether the database already has simdb's newest schema (a cheap check that spares importing Alembic)."""
    try:
        with psycopg.connect(libpq_url(url), connect_timeout=10, client_encoding=CLIENT_ENCODING) as conn:
            revision, _table = schema_revision(lambda sql: conn.execute(sql).fetchall())
            return revision == HEAD
    except Exception:
        return False  # let the migration itself report what is wrong


def resolve_url(database: str | None = None, *, migrate: bool = True) -> tuple[str, bool]:
    """The URL to use and whether it is the embedded default.

    ``migrate=False``: do not create simdb's own tables in the embedded database
    (an application that only puts ``SimhashMixin`` columns on its own tables
    needs none of them).
    """
    url = configured_url(database)
    if url is not None:
        return url, False
    return embedded_url(migrate=migrate), True


def resolve_engine(database: str | Engine | None = None, **engine_kwargs) -> tuple[Engine, bool]:
    """An Engine for ``database`` and whether simdb created it (and so should dispose of it)."""
    if isinstance(database, Engine):
        return check_engine(database), False
    url, _ = resolve_url(database)
    return create_engine(url, **utf8_engine_kwargs(engine_kwargs)), True
