"""``simdb server stop`` and ``server status`` trust nothing in a home someone else controls (issue 33).

The audit: with ``SIMDB_HOME`` owned by another user, root's ``server stop`` signalled
the pid that user wrote in ``.simdb-warm/lock``, removed the socket directory her
``postmaster.pid`` named, followed her ``.embedded-postgres.lock`` link (creating a
root-owned file at its target) and ran ``pg_ctl stop`` on her data directory; ``server
status`` created files in her home and, through a ``.simdb-warm`` link, anywhere. These
tests plant exactly those files and check that both commands are refused (exit 3, one
line) with nothing signalled, created or removed; and, in the caller's own home, that
a lock link is not followed, a pid of another uid is not signalled and a malformed
``postmaster.pid`` is one line naming it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from cli_support import base_env, simdb_argv

from simdb.cli import warm_home
from simdb.embedded import life
from simdb.embedded.guard import server_owner
from simdb.errors import UnsafeHomeError

ALICE = 12345  # a uid no account has: "another local user"
root_only = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                               reason="needs root (to make files owned by another user)")


def run(*args, env) -> subprocess.CompletedProcess:
    return subprocess.run(simdb_argv() + [str(a) for a in args], capture_output=True, text=True, env=env,
                          timeout=180)


def snapshot(top: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``top`` with its owner, mode and size (links not followed)."""
    seen = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            seen[os.path.join(dirpath, name)] = (st.st_uid, st.st_mode, st.st_size)
    return seen


@pytest.fixture
def top():
    path = Path(tempfile.mkdtemp(prefix="simdb-stop-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def victim():
    """A live process of the caller: what the planted pid file names."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()
    proc.wait()


def _chown_tree(path: Path, uid: int) -> None:
    for p in [path, *path.rglob("*")]:
        os.chown(p, uid, uid, follow_symlinks=False)


@pytest.fixture
def socket_top():
    """A ``simdb-pg-*/sock`` directory in /tmp that is no server's: what a planted postmaster.pid names."""
    path = Path(tempfile.mkdtemp(prefix="simdb-pg-", dir="/tmp"))
    (path / "sock").mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@root_only
@pytest.mark.parametrize("action", ["stop", "status"])
def test_a_home_of_another_user_is_refused_by_server_stop_and_status_touching_nothing(top, victim, socket_top,
                                                                                      action):
    home = top / "alice"
    home.mkdir(mode=0o700)
    warm = home / warm_home.WARM_DIR
    warm.mkdir(mode=0o700)
    (warm / warm_home.LOCK).write_text(str(victim.pid))
    pgdata = home / "pgdata"
    pgdata.mkdir(mode=0o700)
    (pgdata / "postmaster.pid").write_text(f"{victim.pid}\n{pgdata}\n1700000000\n5432\n{socket_top / 'sock'}\n"
                                           "\n  1 2\nready\n")
    elsewhere = top / "elsewhere"
    elsewhere.mkdir()
    os.symlink(top / "created-by-root", home / ".embedded-postgres.lock")
    _chown_tree(home, ALICE)
    before = snapshot(top)
    held = os.open(warm / warm_home.LOCK, os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)  # "while holding flock on it": the pid reads as a live warm process
        p = run("server", action, env=base_env(SIMDB_HOME=str(home)))
    finally:
        os.close(held)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 3 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert str(home) in lines[0] and f"uid {ALICE}" in lines[0], lines[0]
    assert victim.poll() is None  # not signalled
    assert snapshot(top) == before  # nothing created, chowned or removed
    assert (socket_top / "sock").is_dir()


@root_only
def test_server_status_follows_no_warm_directory_link_of_another_users_home(top):
    home = top / "alice"
    home.mkdir(mode=0o700)
    elsewhere = top / "anywhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, home / warm_home.WARM_DIR)
    _chown_tree(home, ALICE)
    p = run("server", "status", env=base_env(SIMDB_HOME=str(home)))
    assert p.returncode == 3, p.stderr
    assert list(elsewhere.iterdir()) == [] and not (home / life.REAPER_LOCK).exists()


def test_a_lock_link_in_the_callers_own_home_is_not_followed(top):
    home = top / "home"
    home.mkdir(mode=0o700)
    target = top / "target"
    os.symlink(target, home / life.HOME_LOCK)
    with pytest.raises(UnsafeHomeError, match="link"), life.HomeLock(home):
        pass
    assert not os.path.lexists(target)
    os.symlink(target, home / life.REAPER_LOCK)
    assert life.reaper_pid(home) is None and not os.path.lexists(target)
    warm = top / "warm-target"
    warm.mkdir(mode=0o700)
    os.symlink(warm, home / warm_home.WARM_DIR)
    assert warm_home.warm_pid(home) is None and list(warm.iterdir()) == []


def test_server_status_creates_nothing_in_the_home(top):
    home = top / "home"
    home.mkdir(mode=0o700)
    p = run("server", "status", env=base_env(SIMDB_HOME=str(home)))
    assert p.returncode == 0, p.stderr
    assert list(home.iterdir()) == []


@root_only
def test_server_stop_signals_no_warm_pid_of_another_uid(top):
    home = top / "home"
    (home / warm_home.WARM_DIR).mkdir(parents=True, mode=0o700)
    lock = home / warm_home.WARM_DIR / warm_home.LOCK
    theirs = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "sleep", "120"])
    try:
        # until setpriv has become nobody: a deadline, not 100 spawns of `sleep` (about 5 s, which a
        # loaded machine can pass before setpriv has run; root's pid in the lock is then signalled)
        deadline = time.monotonic() + 60
        while theirs.poll() is None and os.stat(f"/proc/{theirs.pid}").st_uid == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert theirs.poll() is None and os.stat(f"/proc/{theirs.pid}").st_uid != 0, "setpriv never became nobody"
        lock.write_text(str(theirs.pid))
        held = os.open(lock, os.O_RDONLY)
        try:
            fcntl.flock(held, fcntl.LOCK_EX)
            assert warm_home.warm_pid(home) == theirs.pid
            assert warm_home.stop(home) is None
        finally:
            os.close(held)
        assert theirs.poll() is None
    finally:
        theirs.kill()
        theirs.wait()


def test_a_malformed_postmaster_pid_is_one_line_naming_it(top):
    home = top / "home"
    pgdata = home / "pgdata"
    pgdata.mkdir(parents=True, mode=0o700)
    os.chmod(home, 0o700)
    (pgdata / "postmaster.pid").write_text("not a pid file\n")
    owner = server_owner()
    if owner is not None:
        _chown_tree(pgdata, owner[0])
    p = run("server", "stop", env=base_env(SIMDB_HOME=str(home)))
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 3 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert str(pgdata / "postmaster.pid") in lines[0] and "internal error" not in lines[0], lines[0]


def test_a_socket_directory_is_removed_only_where_simdb_makes_them(top):
    planted = top / "simdb-pg-x" / "sock"  # not directly in /tmp: left alone whatever postmaster.pid says
    planted.mkdir(parents=True)
    life.remove_socket_dir(planted, top / "pgdata")
    assert planted.is_dir()
