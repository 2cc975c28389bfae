"""Pid files held under an ``flock``: who holds one, read without taking it from them.

Why one function: the embedded server's reaper (:mod:`simdb.embedded.life`) and the CLI's warm
command process (:mod:`simdb.cli.warm_home`) each announce themselves the same way: a file locked
with ``flock`` for as long as the process lives, its pid written inside. A lock held means a live
holder (the kernel drops it when the process dies, however it dies), so a pid read from a file
whose lock we could take is stale and not returned. Standard library only: the thin ``simdb``
client imports it.
"""

from __future__ import annotations

import fcntl
import os

__all__ = ["UNREADABLE", "locked_pid"]

#: a holder is alive but its pid file does not (yet) hold a number
UNREADABLE = -1


def locked_pid(fd: int) -> int | None:
    """The pid of the process holding the ``flock`` of the open file ``fd``: None if nobody holds it
    (the lock taken to check is released before returning), :data:`UNREADABLE` if the holder's pid
    cannot be read. Closes ``fd``."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raw = os.pread(fd, 32, 0).decode(errors="replace").strip()
        return int(raw) if raw.isdigit() else UNREADABLE
    finally:
        os.close(fd)  # releases the flock if we took it
    return None
