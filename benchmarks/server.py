"""The PostgreSQL a benchmark runs on: ``$SIMDB_DATABASE_URL``'s server, else an embedded one
started in a temporary directory for the run (and deleted after it)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def bench_server() -> Iterator[str]:
    """A SQLAlchemy URL (psycopg driver) of the server to benchmark on."""
    url = os.environ.get("SIMDB_DATABASE_URL")
    if url:
        yield url
        return
    from simdb.embedded import start_server

    server = start_server(Path(tempfile.mkdtemp()) / "pg", cleanup_mode="delete")
    try:
        yield server.get_uri().replace("postgresql://", "postgresql+psycopg://", 1)
    finally:
        server.cleanup()
