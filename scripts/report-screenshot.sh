#!/usr/bin/env bash
# Refresh docs/report-screenshot.png, the picture docs/report.md shows: the report `simdb report` writes
# of the sample collection (examples/sample, by the default rule), as docs/report.md's commands make it,
# taken by headless Chromium. A private embedded server in a temporary home, stopped and removed after.
# Skipped, saying why, where Chromium is missing (scripts/ensure-browser.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${SIMDB_VENV:-.venv}"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
    echo "report-screenshot: no $CHROMIUM; docs/report-screenshot.png left as it is" >&2
    exit 0
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/simdb-shot-XXXXXX")"
export SIMDB_HOME="$WORK/home"
unset SIMDB_DATABASE_URL
# never fails the run (set -e applies inside the trap too): the server's last processes may still write in
# the home for a moment after "server stop" returns, so the removal is tried again, then left to the OS
cleanup() {
    "$VENV/bin/simdb" server stop >/dev/null 2>&1 || true
    for _ in 1 2 3 4 5; do rm -rf "$WORK" 2>/dev/null && return 0; sleep 1; done
    return 0
}
trap cleanup EXIT
"$VENV/bin/simdb" add -c fables -q --glob '*.txt' examples/sample
"$VENV/bin/simdb" report -c fables --output "$WORK/fables-report.html" >/dev/null
# --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start; the page is our own file
timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1500 \
    --user-data-dir="$WORK/profile" --screenshot="$WORK/shot.png" "file://$WORK/fables-report.html" >/dev/null 2>&1
[ "$(stat -c %s "$WORK/shot.png")" -gt 10000 ] || { echo "report-screenshot: the screenshot is empty" >&2; exit 1; }
cp "$WORK/shot.png" docs/report-screenshot.png
echo "report-screenshot: docs/report-screenshot.png taken of simdb report -c fables" >&2
