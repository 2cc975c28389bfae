"""Files written whole or not at all: a temporary file beside the target, renamed into place.

Why: a report or a deduplicated dataset that a reader (a browser, the next pipeline step) finds
half-written is worse than none, and Ctrl-C must not leave a partial file under the real name.
``os.replace`` within one directory is atomic on POSIX, so a reader sees the old file or the new
one.

Permissions: what simdb writes holds the texts and keys of a collection, so a new file is private
data, mode 0600 (less a stricter umask), whatever a looser umask would give; rewriting an existing
file keeps that file's mode (a report the user made 0644 stays 0644, one made 0600 stays 0600)
only when it is the caller's own regular file: a file
another user planted under the output's name (mode 0666 in a shared sticky folder) or a symbolic
link there (whose target's mode ``stat`` would read) gets 0600 like a new file, so its planter
chooses nothing about who can read the output, not even for the moment between the ``fchmod`` and a
rename the sticky bit then refuses. The temporary file is 0600 (``mkstemp``) while it is written,
and its final mode is set only once it is complete. The mode is set on the open descriptor
(``fchmod``), never by name: a link planted at the temporary name cannot redirect it, and the
rename is refused if the temporary name no longer holds the file written.

Write errors name the output (a full disk's bare "No space left on device" would not say which of
a command's files it was). An output that is a character device or a FIFO of the caller's or
root's, or any existing file named under ``/dev`` or ``/proc`` (``/dev/null``, ``/dev/full``,
``/dev/stdout`` whatever it leads to), is written in place, as ``open(path, "wb")`` would: renaming
a file onto it would replace the device node or the link with a regular file.
"""

from __future__ import annotations

import io
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


class _NamedWrites(io.FileIO):
    """A file whose write errors carry the output's name (``OSError.filename``)."""

    def __init__(self, fd: int, display: str):
        super().__init__(fd, "w")
        self.display = display

    def write(self, b: Any) -> int:
        try:
            return super().write(b)
        except OSError as exc:
            if exc.filename is None:
                raise OSError(exc.errno, exc.strerror, self.display) from None
            raise


def _open_fd(fd: int, mode: str, display: str, open_args: dict) -> IO[Any]:
    """``fd`` opened like ``os.fdopen(fd, mode, **open_args)`` (a write mode), its write errors naming ``display``."""
    try:
        raw = _NamedWrites(fd, display)
    except BaseException:
        os.close(fd)
        raise
    buffered = io.BufferedWriter(raw)
    return buffered if "b" in mode else io.TextIOWrapper(buffered, **open_args)


def _special_fd(target: str) -> int | None:
    """An open descriptor on ``target`` when it is written in place, never replaced (see the module doc):
    a character device or a FIFO, or an existing file named under ``/dev`` or ``/proc``, owned by the
    caller or root; else None."""
    try:
        st = os.stat(target)
    except OSError:
        return None
    system = target.startswith(("/dev/", "/proc/"))
    special = stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)
    if not (special or system) or stat.S_ISDIR(st.st_mode) or st.st_uid not in (0, os.geteuid()):
        return None
    truncate = os.O_TRUNC if stat.S_ISREG(st.st_mode) else 0  # /dev/stdout onto a file: as the shell's ">"
    fd = os.open(target, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC | truncate)
    now = os.fstat(fd)
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):  # swapped since the stat: the usual path decides
        os.close(fd)
        return None
    return fd


@contextmanager
def atomic_file(path: str | os.PathLike[str], mode: str = "wb", **open_args: Any) -> Iterator[IO[Any]]:
    """An open file for ``path``; renamed onto ``path`` only if the block succeeds, removed otherwise.

    Write errors name ``path``; a device or FIFO (see the module doc) is written in place."""
    target = os.path.abspath(os.fspath(path))
    special = _special_fd(target)
    if special is not None:
        with _open_fd(special, mode, os.fspath(path), open_args) as fh:
            yield fh
        return
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise InputError(f"no such directory for {os.fspath(path)}: {folder}")
    if os.path.isdir(target):
        raise InputError(f"is a directory: {os.fspath(path)}")
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".partial", dir=folder)
    try:
        with _open_fd(fd, mode, os.fspath(path), open_args) as fh:
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
