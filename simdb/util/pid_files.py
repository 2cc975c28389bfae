"""Pid files held under an ``flock``: who holds one, read without taking it from them.

Why one function: the embedded server's reaper (:mod:`simdb.embedded.life`) and the CLI's warm
command process (:mod:`simdb.cli.warm_home`) each announce themselves the same way: a file locked
with ``flock`` for as long as the process lives, its pid written inside. A lock held means a live
holder (the kernel drops it when the process dies, however it dies), so a pid read from a file
whose lock we could take is stale and not returned. Standard library only: the thin ``simdb``
client imports it.

A pid file is trusted only as far as its owner: :func:`open_pid_file` opens one without
following a link and refuses one that is not a regular file of the caller, and :func:`process_uid`
lets a caller check that a pid it is about to signal is a process of the expected user, never
whatever a file another user wrote names.
"""

from __future__ import annotations

import enum
import fcntl
import os
import stat
from typing import Literal

__all__ = ["UNREADABLE", "Unreadable", "locked_pid", "open_pid_file", "process_uid"]


class Unreadable(enum.Enum):
    """A holder is alive but its pid file does not (yet) hold a pid.

    Deliberately not an int such as ``-1``: ``os.kill(-1, SIGKILL)`` signals every process the caller
    may signal. An enum member makes ``os.kill`` raise ``TypeError`` instead."""

    UNREADABLE = "unreadable"


#: a holder is alive but its pid file does not (yet) hold a pid
UNREADABLE: Literal[Unreadable.UNREADABLE] = Unreadable.UNREADABLE


def locked_pid(fd: int) -> int | Literal[Unreadable.UNREADABLE] | None:
    """The pid of the process holding the ``flock`` of the open file ``fd``: None if nobody holds it
    (the lock taken to check is released before returning), :data:`UNREADABLE` if the holder's pid
    cannot be read. A returned int is always a positive pid (not ``0``, which ``os.kill`` reads as
    "my process group"). Closes ``fd``."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raw = os.pread(fd, 32, 0).decode(errors="replace").strip()
        return int(raw) if raw.isdigit() and int(raw) > 0 else UNREADABLE
    finally:
        os.close(fd)  # releases the flock if we took it
    return None


def open_pid_file(name: str, dir_fd: int | None = None, *, create: bool = False) -> int:
    """``name`` (in the directory ``dir_fd``) opened read-write without following a link, created
    (mode 0600) only when ``create``; refuses, with ``PermissionError`` naming it, anything but a
    regular file owned by the caller: a link or a file planted by someone else is never used.
    ``FileNotFoundError`` when absent and not created."""
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK | (os.O_CREAT if create else 0)
    fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        os.close(fd)
        raise PermissionError(f"{name}: not a regular file owned by uid {os.geteuid()}: not used as a pid file")
    return fd


def process_uid(pid: int) -> int | None:
    """The (effective) uid of the live process ``pid`` (Linux ``/proc``), None if there is none."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
