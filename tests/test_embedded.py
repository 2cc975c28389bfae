"""The embedded default: no URL -> a private PostgreSQL in $SIMDB_HOME, migrated on first use.

Every test gets a fresh SIMDB_HOME (a temporary directory whose parents the
``embedded_postgres`` system user can traverse when the tests run as root).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cli_support import LION, LION_TYPO, WOLF, base_env, simdb_argv

from simdb.dataset.records import file_key


def run(*args, env=None, timeout=180) -> subprocess.CompletedProcess:
    return subprocess.run(simdb_argv() + [str(a) for a in args], capture_output=True, text=True,
                          env=env or base_env(), timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and lines[0].startswith("simdb: error: ")
    return lines[0]


def _postmaster_alive(home: Path) -> bool:
    from simdb.embedded import is_running

    return is_running(home / "pgdata")


@pytest.fixture
def home():
    path = Path(tempfile.mkdtemp(prefix="simdb-home-"))
    yield path
    if (path / "pgdata").exists() and _postmaster_alive(path):
        run("server", "stop", env=base_env(SIMDB_HOME=str(path)))
    shutil.rmtree(path, ignore_errors=True)


def test_two_processes_at_once_on_a_fresh_home(home):
    env = base_env(SIMDB_HOME=str(home))
    procs = [
        subprocess.Popen(simdb_argv() + ["add", "-c", "fables", str(path)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for path in (LION, WOLF)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        assert "added 1 text to" in out
    # persistent: a later process sees both, on the schema the first run created
    p = run("stats", "--json", "-c", "fables", env=env)
    assert p.returncode == 0, p.stderr
    stats = json.loads(p.stdout)
    assert stats["texts"] == 2 and stats["database"] == "embedded"
    p = run("query", "--json", "-c", "fables", "--file", LION_TYPO, env=env)
    assert [m["key"] for m in json.loads(p.stdout)] == [file_key(LION)]  # relative to the current directory
    assert (home / "pgdata" / "PG_VERSION").exists()
    # the last process out stopped the server
    assert not _postmaster_alive(home)


def test_url_keeps_the_server_for_psql_until_stop(home):
    env = base_env(SIMDB_HOME=str(home))
    p = run("url", "--json", env=env)
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    assert info["embedded"] is True and str(home) in info["url"]
    assert _postmaster_alive(home)  # still up after simdb exited
    # a client that is not simdb can use it, e.g. the bundled psql
    out = subprocess.run(info["psql"] + ["-tA", "-c", "SELECT count(*) FROM simdb_alembic_version"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
    # other simdb commands leave it running too
    assert run("collections", env=env).returncode == 0
    assert _postmaster_alive(home)
    p = run("server", "stop", env=env)
    assert p.returncode == 0 and "stopped" in p.stdout
    assert not _postmaster_alive(home)
    p = run("server", "stop", env=env)
    assert "not running" in p.stdout


def test_a_crashed_process_does_not_keep_the_server_forever(home):
    env = base_env(SIMDB_HOME=str(home))
    assert run("url", env=env).returncode == 0
    handles = home / "pgdata" / ".handle_pids.json"
    handles.write_text(json.dumps([2**22 + 12345]))  # a pid that is not running
    p = run("server", "stop", env=env)
    assert p.returncode == 0 and "stopped" in p.stdout, p.stdout + p.stderr


def test_simhash_index_defaults_to_the_embedded_server(home):
    env = base_env(SIMDB_HOME=str(home))
    code = (
        "import sys; from simdb import SimhashIndex\n"
        "with SimhashIndex(collection='py') as ix:\n"
        "    ix.add('lion', open(sys.argv[1], encoding='utf-8').read())\n"
        "    print(len(ix))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(LION)], env=env, capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
    p = run("query", "--json", "-c", "py", "--file", LION_TYPO, env=env)
    assert [m["key"] for m in json.loads(p.stdout)] == ["lion"]


def test_unusable_home_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    p = run("stats", env=base_env(SIMDB_HOME=str(blocker / "home")))
    assert p.returncode != 0
    one_line_error(p)
