"""The warm command process (issue 29, item 3): same answers, only the user's own, nothing left behind.

A command on the embedded default with an idle time leaves one warm process per
SIMDB_HOME (simdb.cli.warm); the thin client (simdb.cli.thin) hands it read
commands. Here each command runs twice in a new process: through the warm process
(``WARM``: exit 99 if it did not take the command, so a silent fallback cannot
pass for a warm answer) and in-process (``SIMDB_WARM=0``), and the two must agree
on stdout, stderr and exit status. Waits poll for a state with a generous
deadline; nothing asserts how long anything took.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from cli_support import LION, LION_TYPO, SAMPLE, WOLF, base_env, popen_interruptible

from simdb.cli import thin, warm_home
from simdb.cli.warm import _serve_one, _stale
from simdb.embedded import is_running
from simdb.embedded.life import reaper_pid

pytestmark = pytest.mark.skipif(not warm_home.supported(), reason="the warm process needs Linux fd passing")

#: the thin client that never falls back: exit 99 when the warm process did not take the command
WARM = ("import sys; from simdb.cli.thin import run_warm; code = run_warm(sys.argv[1:]); "
        "sys.exit(99 if code is None else code)")
NOT_WARM = 99
ALICE = 12345  # a uid no account has: "another local user"


def wait_for(predicate, deadline_s: float = 90.0) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def cli(env: dict, *args, warm: bool, input: str = "", cwd=None) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", WARM] if warm else [sys.executable, "-m", "simdb.cli"]
    env = dict(env) if warm else {**env, "SIMDB_WARM": "0"}
    return subprocess.run(argv + [str(a) for a in args], input=input, capture_output=True, text=True, env=env,
                          timeout=180, cwd=cwd)


def warm_ready(home: Path) -> bool:
    pid = warm_home.warm_pid(home)
    return pid is not None and (home / warm_home.WARM_DIR / warm_home.SOCKET).exists()


def stop(home: Path, env: dict) -> None:
    pid = warm_home.warm_pid(home)
    subprocess.run([sys.executable, "-m", "simdb.cli", "server", "stop"], env=env, capture_output=True, timeout=180)
    if pid is not None:
        wait_for(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, 30)
        if psutil.pid_exists(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def warm():
    """A home with the sample fables, its server up and its warm process listening: (home, env)."""
    home = Path(tempfile.mkdtemp(prefix="simdb-warm-"))
    env = base_env(SIMDB_HOME=str(home), SIMDB_EMBEDDED_IDLE="300")
    try:
        p = cli(env, "add", "-q", "-c", "fables", SAMPLE / "originals", warm=False)
        assert p.returncode == 0, p.stderr
        assert warm_home.warm_pid(home) is None  # SIMDB_WARM=0: none left behind
        assert cli(env, "stats", "-c", "fables", warm=True).returncode == NOT_WARM
        assert subprocess.run([sys.executable, "-m", "simdb.cli", "stats", "-c", "fables"], env=env,
                              capture_output=True, timeout=180).returncode == 0  # a plain run leaves one
        assert wait_for(lambda: warm_ready(home)), "no warm process"
        yield home, env
    finally:
        stop(home, env)
        shutil.rmtree(home, ignore_errors=True)


CASES = {
    "query by file": (["query", "-c", "fables", "--file", LION_TYPO], ""),
    "query --json from stdin": (["query", "--json", "-c", "fables", "-"], LION_TYPO.read_text()),
    "query, bad k (exit 2)": (["query", "-c", "fables", "-k", "99", "x"], ""),
    "query, no such file (exit 2)": (["query", "-c", "fables", "--file", "/nonexistent/x.txt"], ""),
    "query, no such collection": (["query", "-c", "nosuch", "--file", LION_TYPO], ""),
    "check finds one (exit 1)": (["check", "-c", "fables", LION_TYPO], ""),
    "check finds none": (["check", "-c", "fables", "-"], "nothing like any fable at all, just a line"),
    "dups --json": (["dups", "--json", "-c", "fables"], ""),
    "stats --json": (["stats", "--json", "-c", "fables"], ""),
    "collections": (["collections"], ""),
    "--help of a command": (["query", "--help"], ""),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_warm_process_answers_as_the_command_in_process(warm, case):
    home, env = warm
    args, stdin = CASES[case]
    here = cli(env, *args, warm=False, input=stdin)
    there = cli(env, *args, warm=True, input=stdin)
    assert there.returncode != NOT_WARM, there.stderr
    assert (there.stdout, there.stderr, there.returncode) == (here.stdout, here.stderr, here.returncode)


def test_a_command_given_a_database_url_goes_warm_too(warm, database_url):
    """The warm process holds no connection: the command's child opens one to the URL it is given."""
    home, env = warm
    for args, extra in ((["collections", "--json", "--database-url", database_url], {}),
                        (["query", "-c", "nosuch", "x"], {"SIMDB_DATABASE_URL": database_url})):
        here = cli({**env, **extra}, *args, warm=False)
        there = cli({**env, **extra}, *args, warm=True)
        assert there.returncode != NOT_WARM, there.stderr
        assert (there.stdout, there.stderr, there.returncode) == (here.stdout, here.stderr, here.returncode)


def test_relative_paths_and_the_environment_are_the_clients(warm, tmp_path):
    home, env = warm
    shutil.copy(LION_TYPO, tmp_path / "typo.txt")
    args = ["query", "--json", "-c", "fables", "--file", "typo.txt"]
    there = cli({**env, "SIMDB_MAX_TEXT_BYTES": "10"}, *args, warm=True, cwd=tmp_path)
    here = cli({**env, "SIMDB_MAX_TEXT_BYTES": "10"}, *args, warm=False, cwd=tmp_path)
    assert there.returncode == here.returncode == 2 and there.stderr == here.stderr  # the client's limit
    there = cli(env, *args, warm=True, cwd=tmp_path)
    assert there.returncode == 0 and json.loads(there.stdout)[0]["key"].endswith(LION.name), there.stderr


def test_commands_that_write_or_own_a_terminal_run_in_process(warm):
    home, env = warm
    assert cli(env, "add", "-c", "other", WOLF, warm=True).returncode == NOT_WARM
    assert cli(env, "server", "status", warm=True).returncode == NOT_WARM
    assert thin.command_of(["--database-url", "query", "-c", "x", "stats"]) == "stats"
    assert thin.command_of(["-k", "3", "--json", "query", "x"]) == "query"


def test_server_status_names_the_warm_process(warm):
    home, env = warm
    status = json.loads(cli(env, "server", "status", "--json", warm=False).stdout)
    assert status["warm"] == warm_home.warm_pid(home) and status["warm"]


def test_ctrl_c_reaches_the_command_and_a_killed_client_leaves_no_child(warm):
    home, env = warm
    parent = psutil.Process(warm_home.warm_pid(home))
    for sig, code in ((signal.SIGINT, 130), (signal.SIGKILL, None)):
        stdin, held = os.pipe()  # the command waits for its text on a pipe this test keeps open throughout
        client = popen_interruptible([sys.executable, "-c", WARM, "query", "-c", "fables", "-"], env=env,
                                     stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(stdin)
        try:
            assert wait_for(lambda: len(parent.children()) == 1), "the command never started"
            child = parent.children()[0]
            client.send_signal(sig)
            out, err = client.communicate(timeout=120)  # the child holds the client's streams until it ends
            assert wait_for(lambda: not child.is_running() or child.status() == psutil.STATUS_ZOMBIE)
            assert wait_for(lambda: not parent.children())
            if code is not None:
                assert client.returncode == code and b"interrupted" in err, err
        finally:
            client.kill()
            client.wait()
            os.close(held)


def _private(home: Path) -> Path:
    path = home / warm_home.WARM_DIR
    path.mkdir(mode=0o700)
    return path


def test_a_socket_directory_others_may_enter_is_refused(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    place = _private(home)
    os.chmod(place, 0o755)
    monkeypatch.setenv("SIMDB_HOME", str(home))
    with pytest.raises(PermissionError, match="mode 755"):
        warm_home.spawn(home)
    assert thin.run_warm(["query", "-c", "x", "y"]) is None  # runs in-process
    assert stat.S_IMODE(os.lstat(place).st_mode) == 0o755 and not (place / warm_home.LOCK).exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (to make a directory owned by another user)")
def test_a_socket_directory_of_another_user_is_refused(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    place = _private(home)
    os.chown(place, ALICE, ALICE)
    monkeypatch.setenv("SIMDB_HOME", str(home))
    with pytest.raises(PermissionError, match=f"uid {ALICE}"):
        warm_home.spawn(home)
    assert thin.run_warm(["query", "-c", "x", "y"]) is None
    assert os.lstat(place).st_uid == ALICE and not (place / warm_home.LOCK).exists()


def test_a_peer_of_another_uid_is_refused_at_both_ends(tmp_path, monkeypatch):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "s"))
    listener.listen(1)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(str(tmp_path / "s"))
    assert warm_home.peer_uid(client) == os.geteuid()
    monkeypatch.setattr(warm_home, "peer_uid", lambda sock: ALICE)
    assert _serve_one(listener, {}) is None  # the server: no fork, and the connection closed unanswered
    assert client.recv(16) == b""
    home = tmp_path / "home"
    (home / warm_home.WARM_DIR).mkdir(parents=True, mode=0o700)
    listener.close()
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(str(home / warm_home.WARM_DIR / warm_home.SOCKET))
    other.listen(1)
    monkeypatch.setenv("SIMDB_HOME", str(home))
    assert thin.run_warm(["query", "-c", "x", "y"]) is None  # the client: nothing sent, runs in-process
    conn, _ = other.accept()
    conn.settimeout(5)
    assert conn.recv(16) == b""
    for s in (conn, other, client):
        s.close()


def test_other_code_is_refused_and_the_command_runs_in_process(warm, tmp_path):
    home, env = warm
    shim = tmp_path / "sitecustomize.py"  # the client's simdb reports another version
    shim.write_text("import simdb; simdb.__version__ = '0.0.0-other'\n")
    other = {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH")) if p)}
    pid = warm_home.warm_pid(home)
    assert cli(other, "stats", "-c", "fables", warm=True).returncode == NOT_WARM
    p = cli(other, "stats", "-c", "fables", warm=False)
    assert p.returncode == 0 and "fables" in p.stdout, p.stderr
    # the warm process made way (it imported other code than its clients run); a plain run leaves a new one
    assert wait_for(lambda: warm_home.warm_pid(home) != pid)
    assert subprocess.run([sys.executable, "-m", "simdb.cli", "stats", "-c", "fables"], env=env,
                          capture_output=True, timeout=180).returncode == 0
    assert wait_for(lambda: warm_ready(home))


def test_a_changed_module_file_makes_the_process_stale(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("x = 1\n")
    st = os.stat(module)
    seen = {str(module): (st.st_mtime_ns, st.st_size)}
    assert not _stale(seen)
    module.write_text("x = 22\n")
    assert _stale(seen)


def test_server_stop_ends_the_warm_process():
    home = Path(tempfile.mkdtemp(prefix="simdb-warm-stop-"))
    env = base_env(SIMDB_HOME=str(home), SIMDB_EMBEDDED_IDLE="300")
    try:
        p = subprocess.run([sys.executable, "-m", "simdb.cli", "add", "-q", "-c", "s", LION], env=env,
                           capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, p.stderr
        assert wait_for(lambda: warm_ready(home))
        pid = warm_home.warm_pid(home)
        p = subprocess.run([sys.executable, "-m", "simdb.cli", "server", "stop"], env=env, capture_output=True,
                           text=True, timeout=180)
        assert p.returncode == 0 and "stopped" in p.stdout, p.stderr
        assert wait_for(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
        assert warm_home.warm_pid(home) is None
        assert not (home / warm_home.WARM_DIR / warm_home.SOCKET).exists()
    finally:
        stop(home, env)
        shutil.rmtree(home, ignore_errors=True)


def test_a_client_that_ended_before_the_reapers_first_look_leaves_the_server_up_for_the_idle_time():
    """The reaper takes its spawner's idle time: a warm command ends before the reaper has looked once."""
    home = Path(tempfile.mkdtemp(prefix="simdb-warm-reaper-"))
    env = base_env(SIMDB_HOME=str(home), SIMDB_EMBEDDED_IDLE="300", SIMDB_WARM="0")
    code = "from simdb.embedded import start_server; start_server()"
    try:
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, p.stderr
        assert wait_for(lambda: isinstance(reaper_pid(home), int))
        time.sleep(2)  # several of the reaper's polls, with no client alive
        assert is_running(home / "pgdata")
    finally:
        stop(home, env)
        shutil.rmtree(home, ignore_errors=True)


def test_the_thin_client_imports_only_the_standard_library_and_light_simdb_modules():
    code = (
        "import json, sys; before = set(sys.modules)\n"
        "import simdb.cli.thin\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], env=base_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    new = json.loads(p.stdout)
    assert [m for m in new if m.split(".")[0] not in sys.stdlib_module_names | {"simdb"}] == []
    assert {m for m in new if m.startswith("simdb")} <= {
        "simdb", "simdb.moved_modules", "simdb.cli", "simdb.cli.dispatch", "simdb.cli.status", "simdb.cli.thin",
        "simdb.cli.warm_home", "simdb.util", "simdb.util.pid_files", "simdb.util.private_dirs",
    }, new  # the last three: standard library only
