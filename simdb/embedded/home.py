"""Refusing a SIMDB_HOME, or a data directory, that someone else controls.

Why this module exists: the embedded server runs with ``trust`` logins and, as
root, under the account ``embedded_postgres``. A home inside a directory another
user controls would let that user plant a ``pgdata`` symlink (for root to chown),
prepare a data directory whose ``restore_command`` runs as the server account, or
point root at *her* running home (chowning her ``pgdata`` breaks her server).
The rules, checked before anything is created, chowned or started:

* every directory on the path to the home, as given and as resolved, is owned by
  root or by the caller, and writable by no one else: not by "other", and by the
  group only when it is the owner's private group. A sticky directory owned by
  root or the caller (``/tmp``) is accepted as a *parent*, as OpenSSH and sudo do:
  its sticky bit stops others renaming or removing what we create there, and a
  name someone planted there first fails the owner check of the next component;
* the home itself is owned by the caller (root refuses a home owned by alice);
* ``pgdata`` is never a symlink, is owned by the account the server runs as, and
  a data directory with a cluster in it carries :data:`MARKER`, written by simdb
  right after its own ``initdb`` and owned by the server account: simdb never
  starts a cluster someone else prepared;
* simdb creates what is missing (mode 0700) and chowns only what it has just
  created, never a path that existed before.

Each refusal is one :class:`~simdb.errors.UnsafeHomeError` naming the path and why.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

from simdb.errors import UnsafeHomeError

__all__ = ["MARKER", "check_home", "check_pgdata", "write_marker"]

#: written into pgdata by simdb right after its initdb; a cluster without it is not simdb's
MARKER = "simdb-initdb.marker"


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _private_group(gid: int, owner: int) -> bool:
    """Whether ``gid`` is ``owner``'s own group (user-private groups, umask 002): no one else in it."""
    try:
        group = grp.getgrgid(gid)
        entry = pwd.getpwuid(owner)
    except KeyError:
        return False
    if entry.pw_gid != gid or any(m != entry.pw_name for m in group.gr_mem):
        return False
    return not any(p.pw_gid == gid and p.pw_uid != owner for p in pwd.getpwall())


def _check(path: Path, st: os.stat_result, owners: set[int], *, parent: bool, what: str) -> None:
    if st.st_uid not in owners:
        allowed = " or ".join(_user(u) for u in sorted(owners))
        raise UnsafeHomeError(f"{what} {path} is owned by {_user(st.st_uid)}, not {allowed}: simdb runs its "
                              f"server only under directories no other user controls")
    if stat.S_ISLNK(st.st_mode):
        return  # a link's own mode means nothing; its target is checked on the resolved path
    sticky = bool(st.st_mode & stat.S_ISVTX)
    if st.st_mode & stat.S_IWOTH and not (parent and sticky):
        raise UnsafeHomeError(f"{what} {path} is writable by every user (mode {stat.S_IMODE(st.st_mode):o}): "
                              f"simdb runs its server only under directories no other user controls")
    if st.st_mode & stat.S_IWGRP and not (parent and sticky) and not _private_group(st.st_gid, st.st_uid):
        raise UnsafeHomeError(f"{what} {path} is writable by group {st.st_gid} (mode "
                              f"{stat.S_IMODE(st.st_mode):o}): simdb runs its server only under directories "
                              f"no other user controls (chmod g-w {path})")


def _walk(path: Path, owners: set[int], home_owners: set[int]) -> None:
    """lstat every existing component of ``path`` (not following links) and check it."""
    parts = path.parts
    for i in range(1, len(parts) + 1):
        p = Path(*parts[:i])
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            return  # the rest is created by us, mode 0700
        last = i == len(parts)
        _check(p, st, home_owners if last else owners, parent=not last, what="SIMDB_HOME" if last else "the parent")


def check_home(home: Path, given: str | os.PathLike | None = None) -> None:
    """Refuse a home that another user owns or can write, on the path as given and as resolved."""
    me = os.geteuid()
    owners = {0, me}
    if given is not None:
        _walk(Path(os.path.abspath(os.path.expanduser(given))), owners, {me})
    _walk(Path(home).resolve(), owners, {me})


def check_pgdata(pgdata: Path, server_uid: int) -> None:
    """Refuse a pgdata that is a link, is not the server account's, or holds a cluster simdb did not make."""
    try:
        st = os.lstat(pgdata)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeHomeError(f"data directory {pgdata} is a symbolic link: simdb never follows one (remove it)")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeHomeError(f"data directory {pgdata} is not a directory")
    _check(pgdata, st, {server_uid}, parent=False, what="data directory")
    if not os.path.lexists(pgdata / "PG_VERSION"):
        return  # empty: simdb's initdb fills it (and writes the marker)
    marker = pgdata / MARKER
    try:
        mst = os.lstat(marker)
    except FileNotFoundError:
        raise UnsafeHomeError(f"data directory {pgdata} was not initialised by simdb (no {MARKER}): simdb starts "
                              f"no cluster someone else prepared; move it away to start afresh") from None
    if not stat.S_ISREG(mst.st_mode) or mst.st_uid != server_uid:
        raise UnsafeHomeError(f"data directory {pgdata}: {MARKER} is not a file owned by {_user(server_uid)}: "
                              f"simdb starts no cluster someone else prepared")


def write_marker(pgdata: Path, owner: tuple[int, int] | None) -> None:
    """Record, right after simdb's initdb, that simdb made this cluster (a new file: chowning it is safe)."""
    fd = os.open(pgdata / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, b"initialised by simdb\n")
        if owner is not None:
            os.fchown(fd, *owner)
    finally:
        os.close(fd)
