"""Files written whole or not at all: a temporary file beside the target, renamed into place.

Why: a report or a deduplicated dataset that a reader (a browser, the next pipeline step) finds
half-written is worse than none, and Ctrl-C must not leave a partial file under the real name.
``os.replace`` within one directory is atomic on POSIX, so a reader sees the old file or the new
one.

Permissions (issue 31, items 2 and 8): what simdb writes holds the texts and keys of a collection,
so a new file is private data, mode 0600 (less a stricter umask), whatever a looser umask would
give; rewriting an existing file keeps that file's mode (a report the user made 0644 stays 0644,
one they made 0600 no longer comes back 0644) only when it is the caller's own regular file: a file
another user planted under the output's name (mode 0666 in a shared sticky folder) or a symbolic
link there (whose target's mode ``stat`` would read) gets 0600 like a new file, so its planter
chooses nothing about who can read the output, not even for the moment between the ``fchmod`` and a
rename the sticky bit then refuses. The temporary file is 0600 (``mkstemp``) while it is written,
and its final mode is set only once it is complete. The mode is set on the open descriptor
(``fchmod``), never by name: a link planted at the temporary name cannot redirect it, and the
rename is refused if the temporary name no longer holds the file written.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from simdb.errors import InputError

__all__ = ["PRIVATE_MODE", "atomic_file"]

#: the mode of a new output file (less the bits the umask removes)
PRIVATE_MODE = 0o600


def _mode_for(target: str) -> int:
    """The existing file's permission bits if it is the caller's own regular file, else
    :data:`PRIVATE_MODE` less the umask.

    ``lstat``, not ``stat``: a link's target is not what is replaced, and whoever planted the link
    chose that target. The owner check: only the caller may have chosen the mode that is kept.
    Set-id and sticky bits are never carried over to an output."""
    try:
        st = os.lstat(target)
    except OSError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
        return stat.S_IMODE(st.st_mode) & 0o777
    return PRIVATE_MODE & ~_umask()


def _umask() -> int:
    """This process's umask: read from /proc where it can be (setting it to read it is not thread-safe)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o077)
    os.umask(umask)
    return umask


@contextmanager
def atomic_file(path: str | os.PathLike[str], mode: str = "wb", **open_args: Any) -> Iterator[IO[Any]]:
    """An open file for ``path``; renamed onto ``path`` only if the block succeeds, removed otherwise."""
    target = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise InputError(f"no such directory for {os.fspath(path)}: {folder}")
    if os.path.isdir(target):
        raise InputError(f"is a directory: {os.fspath(path)}")
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".partial", dir=folder)
    try:
        with os.fdopen(fd, mode, **open_args) as fh:
            yield fh
            fh.flush()
            os.fchmod(fh.fileno(), _mode_for(target))
            written = os.fstat(fh.fileno())
        now = os.lstat(tmp)
        if (now.st_dev, now.st_ino) != (written.st_dev, written.st_ino):
            raise InputError(f"{tmp} was replaced while {os.fspath(path)} was written: not renamed into place")
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
