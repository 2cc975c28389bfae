"""URLs and Engines without the embedded server's first-use migration.

``simdb.store.migrate`` needs an Engine for "the database the caller meant" (a URL,
an Engine, ``SIMDB_DATABASE_URL`` or the embedded server) while it is itself the
migration, so it must not go through :mod:`simdb.database`, whose default migrates
on first use. Keeping these helpers here makes the arrows run one way:
``embedded`` <- ``store.urls`` <- ``store.migrate`` <- ``database``.
Plain ``postgresql://`` URLs are routed to the psycopg 3 driver, which simdb is
written and tested for.
"""

from __future__ import annotations

import os
import re

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from simdb.embedded import server_url
from simdb.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["CLIENT_ENCODING", "ENV_URL", "display_url", "normalize_url", "plain_engine", "plain_url", "utf8_engine_kwargs"]

ENV_URL = "SIMDB_DATABASE_URL"

#: the ``client_encoding`` every connection simdb opens is given. Why: simdb's texts, keys and
#: statements are Unicode, and libpq takes ``PGCLIENTENCODING`` from the environment otherwise:
#: ``SQL_ASCII`` made psycopg answer bytes (a ``TypeError`` deep inside, "cannot start the embedded
#: PostgreSQL"), ``BIG5`` or ``LATIN1`` a codec error on the first character outside them, naming
#: nothing. An explicit parameter wins over the variable (libpq's rule)
CLIENT_ENCODING = "UTF8"


def utf8_engine_kwargs(engine_kwargs: dict) -> dict:
    """``create_engine`` keyword arguments whose connections speak UTF-8 (:data:`CLIENT_ENCODING`)."""
    return {**engine_kwargs, "connect_args": {**(engine_kwargs.get("connect_args") or {}), "client_encoding": CLIENT_ENCODING}}


def normalize_url(url: str) -> str:
    """Route ``postgres://`` / ``postgresql://`` URLs to the psycopg 3 driver."""
    if not isinstance(url, str):
        raise InvalidTypeError(f"database must be a URL string or a SQLAlchemy Engine, got {type(url).__name__}")
    if not url.strip():
        raise InvalidArgumentError("database URL must not be empty")
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            url = "postgresql+psycopg://" + url[len(prefix):]
            break
    try:  # SQLAlchemy's ArgumentError would quote the URL, password included: say what is expected instead
        parsed = make_url(url)
        parsed.port  # noqa: B018 - a port that is not a number fails here, not at the first connection
    except (ArgumentError, ValueError):
        raise InvalidArgumentError("database is not a valid URL: expected postgresql://USER[:PASSWORD]@HOST[:PORT]"
                                   "/DATABASE") from None
    if parsed.get_backend_name() != "postgresql":
        raise InvalidArgumentError(f"database must be a PostgreSQL URL, got backend {parsed.get_backend_name()!r}")
    return url


#: libpq's secret keywords as they may appear in a URL's query string (``?password=...``): libpq
#: takes a password there as well as in the user part, so a message must mask both
_SECRET_QUERY = re.compile(r"([?&](?:ssl)?password=)[^&]*", re.IGNORECASE)


def display_url(url: str) -> str:
    """``url`` with its password masked, for messages and logs.

    SQLAlchemy masks only the user part's password; ``password`` and ``sslpassword`` in the query
    string are masked here too (a rendered query value has its ``&`` percent-encoded, so the match
    ends where the value does)."""
    try:
        rendered = make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparseable database URL>"
    return _SECRET_QUERY.sub(r"\1***", rendered)


def configured_url(database: str | None = None) -> str | None:
    """The URL the caller or ``SIMDB_DATABASE_URL`` names (normalised), None for the embedded default."""
    if database is not None:
        return normalize_url(database)
    env = os.environ.get(ENV_URL)
    return normalize_url(env) if env else None


def plain_url(database: str | None = None) -> tuple[str, bool]:
    """The URL to use and whether it is the embedded default (started if needed, not migrated)."""
    url = configured_url(database)
    return (url, False) if url is not None else (server_url(), True)


def check_engine(engine: Engine) -> Engine:
    if engine.dialect.name != "postgresql":
        raise ValueError(f"database must be a PostgreSQL engine, got dialect {engine.dialect.name!r}")
    return engine


def plain_engine(database: str | Engine | None = None, **engine_kwargs) -> tuple[Engine, bool]:
    """An Engine for ``database`` and whether it was created here (and so should be disposed of)."""
    if isinstance(database, Engine):
        return check_engine(database), False
    url, _ = plain_url(database)
    return create_engine(url, **utf8_engine_kwargs(engine_kwargs)), True
