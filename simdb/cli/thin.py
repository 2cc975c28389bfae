"""The ``simdb`` entry point: hand the command to the warm process if there is one, else run it here.

Why: a ``simdb query`` spends about a second importing SQLAlchemy, psycopg and
numpy before it asks anything. A warm process
(:mod:`simdb.cli.warm`) has them imported; this client imports only the standard
library and the light part of the CLI, sends its argv, working directory,
environment, umask and its three standard streams (the descriptors themselves,
``SCM_RIGHTS``) over a Unix socket, and waits for the exit status. A forked child
of the warm process runs the very same :func:`simdb.cli.main.main` on those
streams, so the answer is the one the in-process run gives.

Never a wrong answer, never a hang: whatever fails before the command starts (no
socket, a stale one, a directory or peer not the user's own, other code, no reply
within :data:`~simdb.cli.warm_home.HANDSHAKE_S`) runs the command in this process as before. The
command starts only when this client says ``go``; from then on Ctrl-C, SIGTERM,
SIGHUP and SIGQUIT are forwarded to the child, and a client that dies closes the
connection, which the child takes as SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys

from simdb.cli import warm_home
from simdb.cli.dispatch import lazy_module
from simdb.cli.status import EXIT_INTERNAL, EXIT_INTERRUPTED, PROG
from simdb.util.private_dirs import open_private_dir

__all__ = ["command_of", "main", "run_warm"]

#: options of the parser's common group that take a value (simdb.cli.parser.common_options)
_VALUED = frozenset({"--database-url", "-c", "--collection", "-k", "--max-text-bytes"})


def command_of(argv: list[str]) -> str | None:
    """The subcommand named in ``argv`` (skipping the common options and their values), if any."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _VALUED:
            skip = True
        elif arg == "--":
            return None
        elif not arg.startswith("-"):
            return arg
    return None


def _stream(f) -> list | None:
    try:
        return [f.encoding, f.errors, f.line_buffering, f.write_through]
    except AttributeError:
        return None


def _request(argv: list[str]) -> bytes:
    return json.dumps({
        "token": warm_home.code_token(), "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ),
        "umask": _umask(), "streams": [_stream(sys.stdin), _stream(sys.stdout), _stream(sys.stderr)],
    }).encode()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _readline(sock: socket.socket, buf: bytearray) -> str | None:
    """One line from the warm process (None at end of stream)."""
    while b"\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            return None
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line.decode()


def _connect(home) -> socket.socket:
    """A connection to ``home``'s warm process, checked to be the user's own (OSError if there is none)."""
    dir_fd = open_private_dir(home / warm_home.WARM_DIR)
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(warm_home.HANDSHAKE_S)
            sock.connect(warm_home.socket_path(dir_fd))
            if warm_home.peer_uid(sock) != os.geteuid():
                raise PermissionError("the warm process's socket is held by another user")
        except BaseException:
            sock.close()
            raise
        return sock
    finally:
        os.close(dir_fd)


def _started(sock: socket.socket, argv: list[str]) -> bool:
    """Send the command; True once the warm process's child has it and was told to go."""
    for fd in (0, 1, 2):
        os.fstat(fd)  # a closed standard stream: run here, as before
    payload = _request(argv)
    message = len(payload).to_bytes(8, "big") + payload
    sent = socket.send_fds(sock, [message], [0, 1, 2])
    sock.sendall(message[sent:])
    buf = bytearray()
    reply = _readline(sock, buf)
    if reply is None or not reply.startswith("ready "):
        return False
    sock.sendall(b"go\n")
    return True


def _wait(sock: socket.socket) -> int:
    """Forward signals to the running command until its exit status arrives."""

    def forward(signum, frame):
        with contextlib.suppress(OSError):
            sock.sendall(f"sig {signum}\n".encode())

    for signum in warm_home.FORWARDED:
        signal.signal(signum, forward)
    sock.settimeout(None)
    buf = bytearray()
    line = _readline(sock, buf)
    while line is not None and not line.startswith("exit "):
        line = _readline(sock, buf)
    if line is None:
        os.write(2, f"{PROG}: error: the command's process ended without an exit status\n".encode())
        return EXIT_INTERNAL
    return int(line.split()[1])


def run_warm(argv: list[str]) -> int | None:
    """The exit status of ``argv`` run by the warm process, or None when it did not start there."""
    if not warm_home.supported() or command_of(argv) not in warm_home.WARM_COMMANDS:
        return None
    try:
        sock = _connect(warm_home.default_home())
    except (OSError, ValueError):
        return None
    with sock:
        try:
            if not _started(sock, argv):
                return None
        except (OSError, ValueError):
            return None
        return _wait(sock)


def main() -> int:
    """``simdb``: the warm process's answer when it takes the command, else :func:`simdb.cli.main.main`'s."""
    argv = sys.argv[1:]
    try:
        code = run_warm(argv)
    except KeyboardInterrupt:  # Ctrl-C before the handshake ended: the command did not start, or it
        os.write(2, f"{PROG}: interrupted\n".encode())  # saw the connection close and stops
        return EXIT_INTERRUPTED
    if code is None:  # the in-process run: simdb.cli.main imported only now (simdb.cli.dispatch)
        code = lazy_module("simdb.cli.main").main(argv)
    return code
