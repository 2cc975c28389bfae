"""Reading a file named by untrusted data (a key) only from inside a directory the user chose.

Why: keys are data, possibly from someone else (a record ``{"id": "/etc/passwd"}``
must not put that file into a report); only the user running the report decides
which files may be shown, by naming a directory (``--texts-from DIR``). A key is
then a path *inside* it: relative to it, or absolute and under it. ``..``,
symbolic links that lead out of it, and anything that is not a regular file
(FIFOs, devices, sockets: never opened for reading where opening could block or
never end) are refused.

The same rule holds for the files ``simdb add``/``check`` find in a folder the user named
(``notes2.txt -> /etc/shadow`` planted in a shared folder must not end up in a report):
:func:`open_inside` reaches a file from the folder one component at a time with
``O_NOFOLLOW`` (``openat``-style, from an open directory), so a link swapped in after a check
cannot lead out of it, whoever runs simdb (root too). A link that stays inside the folder is
read through its target; hard links are the file system's business (Linux's
``fs.protected_hardlinks``, on by default, stops users linking files they do not own).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from simdb.errors import InputError, InvalidArgumentError, InvalidTypeError

__all__ = ["NotInsideError", "check_directory", "open_inside", "read_confined", "read_recorded"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class NotInsideError(InputError):
    """A file that is not read: outside its folder (a symbolic link out, ``..``) or not a regular file."""


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


class _LinkOnTheWay(Exception):
    """A component of the path is a symbolic link (or not a directory): it was not followed."""


def _open_from(root: Path, parts: tuple[str, ...]) -> int:
    """``root``/``parts`` opened one component at a time, none followed if it is a symbolic link."""
    try:
        fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except OSError as exc:
        raise NotInsideError(f"cannot open the folder {str(root)!r}: {exc.strerror or exc}") from None
    try:
        for part in parts[:-1]:
            step = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = step
        step = os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NOCTTY", 0),
                       dir_fd=fd)
        os.close(fd)
        fd = step
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotInsideError("not a regular file (devices, FIFOs and sockets are not read)")
        os.set_blocking(fd, True)
        return fd
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _LinkOnTheWay() from None
        raise NotInsideError(exc.strerror or str(exc)) from None
    except NotInsideError:
        os.close(fd)
        raise


def _parts(path: str, root: Path) -> tuple[str, ...]:
    parts = Path(path).relative_to(root).parts
    if not parts:
        raise NotInsideError("a directory, not a file")
    return parts


def open_inside(root: Path, path: str | os.PathLike[str]) -> int:
    """A blocking read-only descriptor of the regular file ``path`` (relative to ``root``, or under it).

    ``root`` must be a real path (:func:`check_directory`). The path is opened from ``root`` one
    component at a time, none of them followed if it is a symbolic link, and the file must be
    regular (checked on the open descriptor: FIFOs and devices are never read, and opening one
    does not block). Where a link is met, it is resolved once to learn where it leads: outside
    ``root`` is refused; inside, the resolved path is opened the same way, so a link swapped in
    after that look is still not followed. Raises :class:`NotInsideError` saying why.
    """
    candidate = os.path.normpath(os.path.join(root, path))  # an absolute path replaces root: checked alike
    if "\x00" in candidate:
        raise NotInsideError("a NUL in the file name")
    if _inside(candidate, root):
        try:
            return _open_from(root, _parts(candidate, root))
        except _LinkOnTheWay:
            pass  # resolve it, then decide
    real = os.path.realpath(candidate)
    if not _inside(real, root):
        why = "symbolic link" if os.path.islink(candidate) else "path"
        raise NotInsideError(f"{why} leads outside the folder {str(root)!r} (not followed)")
    try:
        return _open_from(root, _parts(real, root))
    except _LinkOnTheWay:
        raise NotInsideError("a symbolic link appeared in its path while it was opened (not followed)") from None


def read_confined(root: Path, key: str, limit: int) -> str | None:
    """At most ``limit + 1`` characters of the regular file ``key`` names inside ``root``, or None.

    ``root`` must come from :func:`check_directory`. None for anything else: a key
    outside ``root`` (absolute elsewhere, ``..``, a symlink out), a missing or
    non-regular file, an unreadable one.
    """
    if not key or "\x00" in key:
        return None
    try:  # an absolute key replaces root in open_inside's join: checked there like any other
        fd = open_inside(root, key)
    except NotInsideError:
        return None
    try:
        with os.fdopen(fd, encoding="utf-8", errors="replace", closefd=True) as f:
            return f.read(limit + 1)
    except (OSError, ValueError):
        return None


def read_recorded(roots: list[str], path: str, limit: int) -> tuple[str | None, str]:
    """(At most ``limit + 1`` characters of the file ``path``, or None; why not) where ``path`` is one
    of the recorded ``roots`` (a file named on the command line of ``simdb add``) or inside one (a
    folder it was given), read with :func:`read_confined`'s rules from there. ``roots`` are real paths
    recorded by the user who added the files: a path anywhere else is never opened."""
    if not isinstance(path, str) or not path or "\x00" in path:
        return None, "no file path recorded for it"
    for root in roots:
        if path == root:  # a file named by itself: read from its folder, that file only
            folder, name = os.path.split(root)
            text = read_confined(Path(folder), name, limit)
        elif _inside(path, Path(root)) and os.path.isdir(root):
            text = read_confined(Path(root), path, limit)
        else:
            continue
        if text is not None:
            return text, ""
        return None, (f"its file {path!r} could not be read (moved, removed, or not a regular file inside "
                      f"{root!r})")
    return None, f"its file {path!r} is not inside a folder recorded by 'simdb add' (not read)"
