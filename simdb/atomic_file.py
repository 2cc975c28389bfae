"""Files written whole or not at all: a temporary file beside the target, renamed into place.

Why: a report or a deduplicated dataset that a reader (a browser, the next pipeline step) finds
half-written is worse than none, and Ctrl-C must not leave a partial file under the real name.
``os.replace`` within one directory is atomic on POSIX, so a reader sees the old file or the new
one. The file gets the permissions an ordinary ``open()`` would give (0666 less the umask), not
``mkstemp``'s 0600.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from simdb.errors import InputError

__all__ = ["atomic_file"]


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
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
