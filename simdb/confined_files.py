"""Reading a file named by untrusted data (a key) only from inside a directory the user chose.

Why: the HTML report used to read the file whose path was the key, so a record
``{"id": "/etc/passwd"}`` put that file into the page (issue 15, item 2). Keys
are data, possibly from someone else; only the user running the report decides
which files may be shown, by naming a directory (``--texts-from DIR``). A key is
then a path *inside* it: relative to it, or absolute and under it. ``..``,
symbolic links that lead out of it, and anything that is not a regular file
(FIFOs, devices, sockets: never opened for reading where opening could block or
never end) are refused.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from simdb.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["check_directory", "read_confined"]


def check_directory(directory: object, where: str = "texts_from") -> Path:
    """The real path of an existing directory (symlinks resolved once, here, by the user's choice)."""
    if not isinstance(directory, (str, os.PathLike)):
        raise InvalidTypeError(f"{where} must be a directory path, got {type(directory).__name__}")
    path = Path(os.path.realpath(directory))
    if not path.is_dir():
        raise InvalidArgumentError(f"{where} {os.fspath(directory)!r} is not a directory")
    return path


def _inside(path: str, root: Path) -> bool:
    try:
        return os.path.commonpath([path, str(root)]) == str(root)
    except ValueError:
        return False


def read_confined(root: Path, key: str, limit: int) -> str | None:
    """At most ``limit + 1`` characters of the regular file ``key`` names inside ``root``, or None.

    ``root`` must come from :func:`check_directory`. None for anything else: a key
    outside ``root`` (absolute elsewhere, ``..``, a symlink out), a missing or
    non-regular file, an unreadable one.
    """
    if not key or "\x00" in key:
        return None
    candidate = os.path.join(root, key)  # an absolute key replaces root: checked below like any other
    real = os.path.realpath(candidate)
    if not _inside(real, root):
        return None
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOFOLLOW: the last component
        # cannot have been swapped for a symlink since realpath() looked
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        os.set_blocking(fd, True)
        with os.fdopen(fd, encoding="utf-8", errors="replace", closefd=True) as f:
            fd = -1
            return f.read(limit + 1)
    except (OSError, ValueError):
        return None
    finally:
        if fd >= 0:
            os.close(fd)
