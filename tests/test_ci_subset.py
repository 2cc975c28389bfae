"""The test run's own settings (tests/conftest.py): which tests the PostgreSQL 15 pass keeps, and the
session server's durability settings.

Why a test: scripts/test.sh runs the suite a second time on PostgreSQL 15 with only the tests that
reach the test server (``SIMDB_TEST_SERVER_ONLY=1``); a selection that dropped a server test would
silently stop checking its SQL on the oldest version, one that kept the pure core would only cost time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

REPO = Path(__file__).resolve().parents[1]


def test_server_only_keeps_exactly_the_tests_that_reach_the_server():
    """test_bits.py is pure; test_verify.py holds both kinds (sketch tests, and tests on a collection)."""
    env = {**os.environ, "SIMDB_TEST_SERVER_ONLY": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # no plugin needed
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "tests/test_bits.py", "tests/test_verify.py"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kept = {line.split("::")[1].split("[")[0] for line in proc.stdout.splitlines() if "::" in line}
    assert not any(line.startswith("tests/test_bits.py") for line in proc.stdout.splitlines())
    assert "test_defaults_and_options" in kept  # asks for database_url
    assert "test_sql_sketch_jaccard_equals_python" in kept  # asks for eng, which asks for database_url
    assert "test_sketch_of_set_and_empty" not in kept and "test_explain_shared_and_differing_words" not in kept
    assert "deselected" in proc.stdout, proc.stdout[-500:]


def test_the_session_server_does_not_flush_to_disk(engine):
    """The throwaway server (embedded or container) runs without fsync (conftest._no_durability;
    scripts/with-pg15.sh on 15); a server of the developer's own keeps its settings."""
    if os.environ.get("SIMDB_TEST_DATABASE_URL") and "simdb-pg15-" not in os.environ["SIMDB_TEST_DATABASE_URL"]:
        pytest.skip("a server given by SIMDB_TEST_DATABASE_URL keeps its own settings")
    with engine.connect() as conn:
        settings = {name: conn.execute(text(f"SHOW {name}")).scalar() for name in
                    ("fsync", "synchronous_commit", "full_page_writes")}
    assert settings == {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
