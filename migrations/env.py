"""Alembic environment for simdb's tables.

Where the database comes from, first match wins:
1. a SQLAlchemy Connection in ``config.attributes["connection"]`` (used by
   ``simdb.migrate()`` and by host applications that run simdb's migrations
   inside their own Alembic setup);
2. ``-x url=...`` on the alembic command line;
3. the ``SIMDB_DATABASE_URL`` environment variable;
4. ``sqlalchemy.url`` in the ini file.

simdb keeps its revision in ``simdb_alembic_version`` (override with
``config.attributes["version_table"]``), so it never collides with the host
application's ``alembic_version``. Autogenerate only looks at simdb's tables.

Concurrent runs: a run on its own connection (``-x url=...``, the documented host
setup) takes the transaction-level advisory lock ``simdb migrate`` takes
(:data:`simdb.store.migrate.LOCK_KEY`) before Alembic reads the version table, so two
``alembic upgrade head`` at once on a fresh database serialise (the second sees the
first's revision) instead of both creating the tables and one failing with an
``IntegrityError``. A connection from ``config.attributes`` is the caller's:
``simdb.migrate`` already holds the lock on it.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import create_engine, pool, text

from simdb.store.migrate import LOCK_KEY
from simdb.store.models import metadata

VERSION_TABLE = "simdb_alembic_version"

config = context.config
target_metadata = metadata


def _include_object(obj, name, type_, reflected, compare_to):
    # Only simdb's own tables: a shared database holds the host application's too.
    if type_ == "table":
        return name in metadata.tables
    return True


def _configure_kwargs() -> dict:
    return dict(
        target_metadata=target_metadata,
        version_table=config.attributes.get("version_table", VERSION_TABLE),
        include_object=_include_object,
        compare_type=True,
        compare_server_default=False,
    )


def _url() -> str:
    from simdb.database import normalize_url

    url = (
        context.get_x_argument(as_dictionary=True).get("url")
        or os.environ.get("SIMDB_DATABASE_URL")
        or config.get_main_option("sqlalchemy.url")
    )
    if not url:
        raise SystemExit(
            "simdb migrations need a database: pass -x url=postgresql://... or set SIMDB_DATABASE_URL"
        )
    return normalize_url(url)


def run_migrations_offline() -> None:
    context.configure(url=_url(), literal_binds=True, **_configure_kwargs())
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, **_configure_kwargs())
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(_url(), poolclass=pool.NullPool, connect_args={"client_encoding": "UTF8"})
    try:
        with engine.connect() as conn:
            context.configure(connection=conn, **_configure_kwargs())
            with context.begin_transaction():
                # held until this transaction ends: one run at a time (see the module doc)
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": LOCK_KEY})
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
