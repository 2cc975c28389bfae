#!/usr/bin/env bash
# The distribution as users get it: build the sdist and the wheel, `twine check` them, install the
# WHEEL (not an editable checkout) into a fresh virtual environment, and smoke-test it from a temp
# directory (no source tree on sys.path) on the embedded default in a temp SIMDB_HOME: `simdb add` /
# `simdb query`, and the README's "Python" example run verbatim. Run by scripts/test.sh.
#   bash scripts/check-wheel.sh             # uses .venv (or $SIMDB_VENV) for build + twine
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
TOOLS="${SIMDB_VENV:-.venv}/bin/python"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/simdb-wheel-XXXXXX")"
cleanup() {
  [ -x "$WORK/venv/bin/simdb" ] && SIMDB_HOME="$WORK/home" "$WORK/venv/bin/simdb" server stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

"$TOOLS" -m build --outdir "$WORK/dist" . >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
"$TOOLS" -m twine check --strict "$WORK/dist"/*
WHEEL="$(ls "$WORK"/dist/*.whl)"
echo "built: $(cd "$WORK/dist" && ls)"
# the wheel carries the migrations and data files, and no tests or benchmarks
"$TOOLS" - "$WHEEL" <<'PY'
import pathlib, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
# every module of the source tree (a subpackage missing from pyproject's list would be left out)
need = sorted(str(p) for p in pathlib.Path("simdb").rglob("*.py")) + [
    "simdb/migrations/env.py", "simdb/migrations/script.py.mako", "simdb/migrations/versions/0001_simdb_initial.py",
    "simdb/report/report.css", "simdb/report/report.js", "simdb/data/en.txt", "simdb/data/zh.txt", "simdb/py.typed"]
missing = [n for n in need if n not in names]
extra = [n for n in names if n.startswith(("tests/", "benchmarks/", "examples/"))]
assert not missing and not extra, f"wheel: missing {missing}, unexpected {extra}"
PY

python3 -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q "$WHEEL"   # dependencies from the index (pip's cache makes it quick)

# the README's Python example, verbatim
awk '/^## Python$/{p=1} p&&/^```python$/{q=1;next} q&&/^```$/{exit} q{print}' README.md > "$WORK/readme_python.py"
[ -s "$WORK/readme_python.py" ] || { echo "README.md has no '## Python' code block"; exit 1; }

cd "$WORK"
unset SIMDB_DATABASE_URL
export SIMDB_HOME="$WORK/home"
printf 'A LION was awakened from sleep by a Mouse running over his face.\n' > lion.txt
printf 'The Tortoise and the Hare argued over which was faster.\n' > hare.txt
"$WORK/venv/bin/simdb" add -c smoke lion.txt hare.txt
out="$("$WORK/venv/bin/simdb" query -c smoke --json "a lion was awakened from sleep by a mouse, running over his face!")"
echo "simdb query: $out"
"$WORK/venv/bin/python" - "$out" <<'PY'
import json, sys
hits = json.loads(sys.argv[1])
assert [h["key"] for h in hits] == ["lion.txt"] and hits[0]["distance"] == 0, hits
PY
"$WORK/venv/bin/simdb" report -c smoke -o report.html && test -s report.html   # package data (CSS, JS) present
"$WORK/venv/bin/python" readme_python.py
"$WORK/venv/bin/python" - <<'PY'
import importlib.metadata, sys, sysconfig
import simdb
from simdb import SimhashIndex

site = sysconfig.get_paths()["purelib"]
assert simdb.__file__.startswith(site), f"simdb imported from {simdb.__file__}, not the installed wheel"
assert importlib.metadata.version("simdb-postgres") == simdb.__version__
with SimhashIndex(collection="smoke") as index:  # the collection the CLI filled, on the embedded default
    assert [m.key for m in index.near("A lion was awakened from sleep by a mouse running over his face")] == ["lion.txt"]
print(f"wheel OK: simdb-postgres {simdb.__version__} from {simdb.__file__}")
PY
