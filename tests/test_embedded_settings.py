"""The embedded server's settings for bulk work (simdb.embedded.settings): what they are, how they reach
the server, and that ``SIMDB_EMBEDDED_SETTINGS=off`` leaves PostgreSQL's defaults."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from cli_support import base_env, simdb_argv

from simdb.embedded import settings

GB = 1024**3


@pytest.mark.parametrize(("memory", "buffers"), [
    (None, "128MB"), (512 * 1024**2, "128MB"), (4 * GB, "512MB"), (24 * GB, "1024MB"), (512 * GB, "1024MB"),
])
def test_shared_buffers_is_an_eighth_of_memory_within_bounds(monkeypatch, memory, buffers):
    monkeypatch.delenv("SIMDB_EMBEDDED_SETTINGS", raising=False)
    monkeypatch.setattr(settings, "_memory_bytes", lambda: memory)
    chosen = settings.server_settings()
    assert chosen["shared_buffers"] == buffers
    assert chosen["max_wal_size"] == "4GB" and chosen["checkpoint_timeout"] == "30min"


@pytest.mark.parametrize("value", ["off", "0", "no", "False", " OFF "])
def test_off_leaves_postgresql_defaults(monkeypatch, value):
    monkeypatch.setenv("SIMDB_EMBEDDED_SETTINGS", value)
    assert settings.server_settings(24 * GB) == {}
    assert settings.start_options({}) == []


def test_only_a_start_gets_the_settings(monkeypatch):
    monkeypatch.delenv("SIMDB_EMBEDDED_SETTINGS", raising=False)
    calls = []

    class Module:
        @staticmethod
        def pg_ctl(args, pgdata=None, **kwargs):
            calls.append(list(args))

    settings.install(Module)
    settings.install(Module)  # idempotent: one wrapper
    Module.pg_ctl(["-w", "-l", "log", "start"], pgdata="x")
    Module.pg_ctl(["-w", "stop"], pgdata="x")
    start, stop = calls
    assert stop == ["-w", "stop"]
    assert start[-4:] == ["-w", "-l", "log", "start"]
    options = [start[i + 1] for i in range(0, len(start) - 4, 2)]
    assert start[:-4:2] == ["-o"] * len(options)
    assert options == [f"-c {k}={v}" for k, v in settings.server_settings().items()]


def _show(env: dict, *names: str) -> list[str]:
    out = subprocess.run(simdb_argv() + ["url", "--json"], capture_output=True, text=True, env=env, timeout=180)
    assert out.returncode == 0, out.stderr
    psql = json.loads(out.stdout)["psql"]
    query = "; ".join(f"SHOW {n}" for n in names)
    shown = subprocess.run(psql + ["-tA", "-c", query], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    return shown.stdout.split()


@pytest.mark.parametrize("mode", ["default", "off"])
def test_the_embedded_server_runs_with_them(mode):
    home = Path(tempfile.mkdtemp(prefix="simdb-home-"))
    env = base_env(SIMDB_HOME=str(home))
    if mode == "off":
        env["SIMDB_EMBEDDED_SETTINGS"] = "off"
    try:
        shown = _show(env, "max_wal_size", "checkpoint_timeout", "fsync", "full_page_writes", "synchronous_commit")
        expected = ["4GB", "30min"] if mode == "default" else ["1GB", "5min"]
        assert shown == expected + ["on", "on", "on"]  # durability untouched
    finally:
        subprocess.run(simdb_argv() + ["server", "stop"], capture_output=True, env=env, timeout=120)
        shutil.rmtree(home, ignore_errors=True)
