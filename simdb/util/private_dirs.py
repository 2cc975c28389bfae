"""Directories only this user can reach: created mode 0700, refused when another user could reach them.

Why one module: the dedup journals (:mod:`simdb.dataset.undo`), the warm process's socket and lock
(:mod:`simdb.cli.warm_home`), jieba's dictionary cache (:mod:`simdb.core.segment`) and the embedded
server's home (:mod:`simdb.embedded`) each keep files there that another user must neither read nor
plant (a journal holds a collection's rows, a socket answers commands, a cache file changes a
Chinese text's words). The one check for all of them:

- opened without following a link (``O_NOFOLLOW | O_DIRECTORY``) and checked on the open
  descriptor (``fstat``), so the directory checked is the directory used: a link, or a directory
  swapped in after a look, is never followed;
- owned by the caller (its effective uid) with no permission bit for the group or others (mode
  700, or stricter): one that anyone else could enter, read or write is refused, never repaired
  (its owner chose that mode; simdb does not chmod what it did not create);
- created mode 0700, every missing component (``os.makedirs`` gives the parents it creates the
  umask's mode, 0755 under the usual umask).

Standard library only, and light: the thin ``simdb`` client imports it (:mod:`simdb.cli.thin`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["PRIVATE_DIR_MODE", "make_private_dirs", "open_private_dir", "private_cache_dir"]

#: the mode of a directory simdb creates for itself
PRIVATE_DIR_MODE = 0o700

_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def make_private_dirs(path: Path) -> list[Path]:
    """Create ``path`` and its missing parents with mode 0700; returns those created (by us).

    Nothing that exists is checked or changed here: a caller that needs the result private opens
    it with :func:`open_private_dir` (the embedded home checks its whole path itself)."""
    created: list[Path] = []
    missing = [p for p in [path, *path.parents] if not os.path.lexists(p)]
    for p in reversed(missing):
        try:
            os.mkdir(p, PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # another process made it first: checked like anything that exists
        created.append(p)
    return created


def open_private_dir(path: str | os.PathLike[str], dir_fd: int | None = None, *, create: bool = False) -> int:
    """``path`` (in the directory ``dir_fd``) opened as a directory without following a link, if the
    caller owns it and no one else may enter it (see the module doc); created so first if ``create``
    (with its missing parents when ``dir_fd`` is None, else only ``path`` inside ``dir_fd``).

    Returns the open descriptor (the caller closes it). Raises ``PermissionError`` naming the path,
    its owner and mode when another user could reach it, ``FileNotFoundError`` when absent and not
    created, another ``OSError`` (``ELOOP``, ``ENOTDIR``) for a link or a file in its place."""
    if create:
        if dir_fd is None:
            make_private_dirs(Path(path))
        else:
            try:
                os.mkdir(path, PRIVATE_DIR_MODE, dir_fd=dir_fd)
            except FileExistsError:
                pass
    fd = os.open(path, _OPEN_DIR, dir_fd=dir_fd)
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077:
        os.close(fd)
        raise PermissionError(f"{os.fspath(path)}: owned by uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):o}, "
                              f"not uid {os.geteuid()} with mode 700")
    return fd


def _open_cache_home(home: str) -> int | None:
    """The cache home opened without following a link, if it is a directory of this user or root that
    no one else may write (it need not be private: ``~/.cache`` is often 0755), else None."""
    try:
        os.mkdir(home, PRIVATE_DIR_MODE)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        fd = os.open(home, _OPEN_DIR)
    except OSError:
        return None
    st = os.fstat(fd)
    if st.st_uid not in (os.geteuid(), 0) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        os.close(fd)
        return None
    return fd


def private_cache_dir(name: str) -> str | None:
    """The path of simdb's private cache directory ``name``: ``$XDG_CACHE_HOME/simdb/<name>`` (the
    variable when it is absolute), else ``~/.cache/simdb/<name>``, created mode 0700; None when there
    is no safe one. Safe: the cache home is a directory (not a link) of this user or root that no one
    else may write, and its ``simdb`` and ``simdb/<name>`` are private directories
    (:func:`open_private_dir`), each opened from the one above without following a link.

    Why a path, not a descriptor: what the cache is for (jieba) opens its files by name; every
    directory on the way from the cache home down is writable by this user alone, so no one else
    can swap one of them afterwards."""
    home = os.environ.get("XDG_CACHE_HOME", "").strip()
    if not os.path.isabs(home):
        home = os.path.expanduser(os.path.join("~", ".cache"))
    if not os.path.isabs(home):
        return None  # no home directory
    fd = _open_cache_home(home)
    if fd is None:
        return None
    try:
        for part in ("simdb", name):
            step = open_private_dir(part, fd, create=True)
            os.close(fd)
            fd = step
    except OSError:
        return None
    finally:
        os.close(fd)
    return os.path.join(home, "simdb", name)
