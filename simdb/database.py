"""Turning what the caller gave (a URL, an Engine, or nothing) into an Engine.

Precedence: an explicit Engine or URL, then ``SIMDB_DATABASE_URL``, then the
embedded PostgreSQL server (see ``simdb.embedded``: started on demand, and
migrated to simdb's newest schema on first use in each process). Plain ``postgresql://``
URLs are routed to the psycopg 3 driver, which simdb is written and tested for.
"""

from __future__ import annotations

import os

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url

__all__ = ["display_url", "normalize_url", "resolve_engine", "resolve_url"]

ENV_URL = "SIMDB_DATABASE_URL"


def normalize_url(url: str) -> str:
    """Route ``postgres://`` / ``postgresql://`` URLs to the psycopg 3 driver."""
    if not isinstance(url, str):
        raise TypeError(f"database must be a URL string or a SQLAlchemy Engine, got {type(url).__name__}")
    if not url.strip():
        raise ValueError("database URL must not be empty")
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        raise ValueError(f"database must be a PostgreSQL URL, got backend {parsed.get_backend_name()!r}")
    return url


def display_url(url: str) -> str:
    """``url`` with its password masked, for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable database URL>"


def resolve_url(database: str | None = None, *, migrate: bool = True) -> tuple[str, bool]:
    """The URL to use and whether it is the embedded default.

    ``migrate=False``: do not create simdb's own tables in the embedded database
    (an application that only puts ``SimhashMixin`` columns on its own tables
    needs none of them).
    """
    if database is not None:
        return normalize_url(database), False
    env = os.environ.get(ENV_URL)
    if env:
        return normalize_url(env), False
    from simdb.embedded import embedded_url

    return embedded_url(migrate=migrate), True


def resolve_engine(database: str | Engine | None = None, **engine_kwargs) -> tuple[Engine, bool]:
    """An Engine for ``database`` and whether simdb created it (and so should dispose of it)."""
    if isinstance(database, Engine):
        if database.dialect.name != "postgresql":
            raise ValueError(f"database must be a PostgreSQL engine, got dialect {database.dialect.name!r}")
        return database, False
    url, _ = resolve_url(database)
    return create_engine(url, **engine_kwargs), True
