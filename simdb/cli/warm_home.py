"""Where the warm command process lives, who may talk to it, and when it is started.

Why a module of its own, with the standard library only: the thin client
(:mod:`simdb.cli.thin`) and the entry point (:mod:`simdb.cli.main`, which leaves a
warm process behind) both need these few facts, and neither may pay for
SQLAlchemy, psycopg or numpy: that import time is what the warm process saves.

The place is ``<SIMDB_HOME>/.simdb-warm/``: a directory of mode 0700 owned by the
user (anything else is refused, and the command runs in-process as before) that
holds the Unix socket ``sock`` and the lock ``lock``, held by the live warm
process (its pid is written in it). Both ends reach the socket through
``/proc/self/fd/N/sock``, ``N`` being the directory opened without following
links and checked with ``fstat``: the path checked is the path used, and a long
``SIMDB_HOME`` never exceeds a socket path's 108 bytes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import simdb
from simdb.util.pid_files import UNREADABLE, locked_pid, open_pid_file, process_uid
from simdb.util.private_dirs import open_private_dir

__all__ = [
    "DISABLE_ENV", "FORWARDED", "HANDSHAKE_S", "LOCK", "SOCKET", "WARM_COMMANDS", "WARM_DIR",
    "code_token", "default_home", "peer_uid", "spawn", "socket_path", "stop", "supported",
    "wanted", "warm_pid",
]

WARM_DIR = ".simdb-warm"
SOCKET = "sock"
LOCK = "lock"
#: ``SIMDB_WARM=0``: no warm process is used or left behind
DISABLE_ENV = "SIMDB_WARM"
#: the commands a warm process runs: those that only read (no worker pools, no terminal of their own)
WARM_COMMANDS = frozenset({"query", "dups", "check", "stats", "collections", "report"})

#: seconds a client waits for the warm process to take its command; past them it runs the command itself
HANDSHAKE_S = 3.0
#: the signals a client passes on to the command's process (the only ones the process raises for it)
FORWARDED = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})

_PACKAGE = Path(simdb.__file__).resolve().parent


def supported() -> bool:
    """Linux with fd passing and peer credentials, and not switched off by ``SIMDB_WARM=0``."""
    return (sys.platform.startswith("linux") and hasattr(socket, "send_fds") and hasattr(socket, "SO_PEERCRED")
            and os.environ.get(DISABLE_ENV, "").strip() != "0")


def wanted() -> bool:
    """Whether a command on the embedded default should leave a warm process behind: not where the
    server stops with its last client (``SIMDB_EMBEDDED_IDLE=0``, as in tests): the warm process
    lives no longer than the server."""
    if not supported():
        return False
    try:
        return float(os.environ.get("SIMDB_EMBEDDED_IDLE", "").strip() or 60) > 0
    except ValueError:
        return False


def default_home() -> Path:
    """The data directory simdb.embedded.data_dir() chooses (``SIMDB_HOME``, else platformdirs' on Linux)."""
    home = os.environ.get("SIMDB_HOME")
    if home:
        return Path(home).expanduser().resolve()
    base = os.environ.get("XDG_DATA_HOME", "").strip() or os.path.expanduser("~/.local/share")
    return Path(base) / "simdb"


def socket_path(dir_fd: int) -> str:
    """The socket inside the checked directory ``dir_fd`` (short, and the very directory checked)."""
    return f"/proc/self/fd/{dir_fd}/{SOCKET}"


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED: pid, uid, gid)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(creds[4:8], sys.byteorder)


def code_token() -> list:
    """What both ends must agree on for the warm process to run a command: the interpreter, its
    flags and warning options, simdb's version and place, and the import path (an upgrade or another tree never runs
    in a process that imported something else). ``sys.path[0]`` (the script's or the current
    directory) and simdb's own directory are left out: they differ between the ends by design."""
    root = str(_PACKAGE.parent)
    path = [p for p in sys.path[1:] if p and os.path.abspath(p) != root]
    return [sys.executable, sys.version, repr(sys.flags), sys.warnoptions, simdb.__version__, str(_PACKAGE), path]


def _lock_fd(warm_dir: Path, *, create: bool) -> int:
    """The lock file, opened inside the directory checked by
    :func:`~simdb.util.private_dirs.open_private_dir` without following a link (a ``.simdb-warm``
    link or a ``lock`` link is never followed, nothing is created elsewhere)."""
    dir_fd = open_private_dir(warm_dir)
    try:
        return open_pid_file(LOCK, dir_fd, create=create)
    finally:
        os.close(dir_fd)


def warm_pid(home: Path) -> int | None:
    """The pid of the warm process of ``home``, None if there is none (nothing is created to find out)."""
    try:
        fd = _lock_fd(home / WARM_DIR, create=False)
    except OSError:
        return None
    pid = locked_pid(fd)
    return None if pid is UNREADABLE else pid


def stop(home: Path) -> int | None:
    """End the warm process of ``home`` (``simdb server stop``); returns its pid, None if there was none.

    Only a process of the caller's own uid is signalled: the pid comes from a file, and a file is
    trusted no further than the checks of :func:`warm_pid`."""
    pid = warm_pid(home)
    if pid is None or process_uid(pid) != os.geteuid():
        return None
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return None
    return pid


def spawn(home: Path) -> bool:
    """Leave a detached warm process for ``home`` unless one runs; True if one was started.

    Like the embedded server's reaper: the lock is taken here and handed over, so two commands
    ending at once start one process; it runs in a session of its own, in ``/``, with no inherited
    stream, and the same interpreter flags and import path as this process (:func:`code_token`)."""
    warm_dir = home / WARM_DIR
    with contextlib.suppress(FileExistsError):
        os.mkdir(warm_dir, 0o700)
    fd = _lock_fd(warm_dir, create=True)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        os.ftruncate(fd, 0)  # the last warm process's pid goes; the new one's is written once spawned
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PACKAGE.parent), env.get("PYTHONPATH")) if p)
        flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]  # as multiprocessing does
        warm = subprocess.Popen([sys.executable, *flags, "-m", "simdb.cli.warm", str(home), str(fd)],
                                pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, cwd="/", env=env,
                                close_fds=True)
        # written at once, not after its imports, so `server stop` finds it while it starts; it writes
        # the same bytes again itself (life.ensure_reaper does the same for the reaper)
        os.pwrite(fd, str(warm.pid).encode(), 0)
        return True
    finally:
        os.close(fd)
