#!/usr/bin/env bash
# Refresh docs/report-screenshot.png (the picture docs/report.md shows of a report of examples/sample)
# by running the browser test with the screenshot path set; the test alone writes to tmp only.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
SIMDB_REPORT_SCREENSHOT="$PWD/docs/report-screenshot.png" exec "$PY" -m pytest -q -p no:cacheprovider \
    tests/test_report_browser.py -k sample_report
