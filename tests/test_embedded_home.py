"""A SIMDB_HOME someone else controls is refused, in one line, before anything is created or chowned.

Issue 31, item 1: root with SIMDB_HOME inside a directory another user controls
followed a planted ``pgdata`` symlink and chowned its target, started a data
directory that user prepared, and chowned a running ``pgdata`` of hers. These
tests play "the other user" with a uid nobody has (os.chown as root) and check
the refusal, its exit status (3, the embedded database cannot be used), and that
ownership and modes of everything that existed are unchanged.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from cli_support import base_env, simdb_argv

from simdb.embedded.guard import ensure_server_user

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="needs root (to make directories owned by another user)")

ALICE = 12345  # a uid no account has: "another local user"


def run(*args, env) -> subprocess.CompletedProcess:
    return subprocess.run(simdb_argv() + [str(a) for a in args], capture_output=True, text=True, env=env,
                          timeout=180)


def refused(home: Path, *words: str) -> str:
    p = run("stats", env=base_env(SIMDB_HOME=str(home)))
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 3 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def owner_and_mode(path: Path) -> tuple[int, int, int]:
    st = os.lstat(path)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


@pytest.fixture
def top():
    path = Path(tempfile.mkdtemp(prefix="simdb-hostile-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_root_refuses_a_home_another_user_owns(top):
    home = top / "alice"
    home.mkdir(mode=0o700)
    os.chown(home, ALICE, ALICE)
    before = owner_and_mode(home)
    refused(home, str(home), f"uid {ALICE}")
    assert owner_and_mode(home) == before and not (home / "pgdata").exists()


def test_root_refuses_a_home_inside_a_directory_another_user_owns(top):
    theirs = top / "alice"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, ALICE, ALICE)
    home = theirs / "root-simdb"  # made by root, but alice can rename it and plant her own
    home.mkdir(mode=0o700)
    refused(home, str(theirs), "owned by")
    assert not (home / "pgdata").exists()


def test_a_home_under_a_world_writable_directory_is_refused_unless_it_is_sticky(top):
    shared = top / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    refused(shared / "simdb", str(shared), "writable by every user")
    assert not (shared / "simdb").exists()


def test_a_sticky_parent_owned_by_another_user_is_refused(top):
    tmp = top / "tmp"
    tmp.mkdir()
    os.chmod(tmp, 0o1777)
    os.chown(tmp, ALICE, ALICE)  # the /tmp rule holds for root's (or your own) sticky directory only
    refused(tmp / "simdb", str(tmp), "owned by")


def test_a_group_writable_home_is_refused(top):
    home = top / "h"
    home.mkdir()
    os.chmod(home, 0o770)
    os.chown(home, 0, ALICE)  # a group that is not root's own
    refused(home, "writable by group")


def test_a_planted_pgdata_link_is_neither_followed_nor_chowned(top):
    secret = top / "root-only"
    secret.mkdir(mode=0o700)
    home = top / "h"
    home.mkdir(mode=0o700)
    (home / "pgdata").symlink_to(secret)
    before = owner_and_mode(secret)
    refused(home, "symbolic link")
    assert owner_and_mode(secret) == before and list(secret.iterdir()) == []


def test_a_data_directory_simdb_did_not_initialise_is_not_started(top):
    account = ensure_server_user()
    home = top / "h"
    pgdata = home / "pgdata"
    pgdata.mkdir(parents=True, mode=0o700)
    (pgdata / "PG_VERSION").write_text("18\n")  # someone's prepared cluster (restore_command and all)
    (pgdata / "postgresql.auto.conf").write_text("restore_command = 'id > /tmp/pwned'\n")
    for path in (pgdata, pgdata / "PG_VERSION", pgdata / "postgresql.auto.conf"):
        os.chown(path, account.pw_uid, account.pw_gid)
    refused(home, "not initialised by simdb")
    assert not (pgdata / "postmaster.pid").exists()


def test_a_data_directory_of_another_user_is_not_chowned(top):
    home = top / "h"
    pgdata = home / "pgdata"
    pgdata.mkdir(parents=True, mode=0o700)
    os.chown(pgdata, ALICE, ALICE)  # e.g. alice's running server, reached through a link or a copy
    before = owner_and_mode(pgdata)
    refused(home, "data directory", f"uid {ALICE}")
    assert owner_and_mode(pgdata) == before


def test_root_keeps_working_in_its_own_home_and_marks_what_it_initialised(top):
    home = top / "mine"
    env = base_env(SIMDB_HOME=str(home))
    p = run("migrate", env=env)
    assert p.returncode == 0, p.stderr
    account = ensure_server_user()
    marker = home / "pgdata" / "simdb-initdb.marker"
    assert os.lstat(marker).st_uid == account.pw_uid
    uid, _, mode = owner_and_mode(home)
    assert uid == 0 and mode & 0o027 == 0  # made 0700 (the group bits show the server account's ACL mask)
    p = run("collections", env=env)  # a second start: its own cluster, accepted
    assert p.returncode == 0, p.stderr
