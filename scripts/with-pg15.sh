#!/usr/bin/env bash
# Run a command against a private, throwaway PostgreSQL 15 cluster (Debian's postgresql-15):
#   bash scripts/with-pg15.sh .venv/bin/python -m pytest -q
# initdb + pg_ctl in a new temporary directory (mode 0700, owned by the server's user: `postgres`
# when run as root, since PostgreSQL refuses to run as root), listening on NO TCP address, only on
# a Unix socket inside that private directory (trust authentication is safe there: only its owner
# and root can reach the socket). The command gets SIMDB_TEST_DATABASE_URL (socket directory and
# port as query parameters, as libpq takes them); the cluster is stopped and deleted afterwards,
# whatever the command's outcome. Never a system service. Exit status: the command's.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
VERSION=15
BIN=/usr/lib/postgresql/$VERSION/bin
PORT="${SIMDB_PG15_PORT:-55432}"  # only names the socket file (no TCP listener)
bash "$HERE/ensure-pg15.sh"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/simdb-pg$VERSION-XXXXXX")"
RUN=()
if [ "$(id -u)" = "0" ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/false postgres
    chown postgres: "$TMP"
    RUN=(runuser -u postgres --)
fi
chmod 700 "$TMP"
stop() {
    "${RUN[@]}" "$BIN/pg_ctl" -D "$TMP/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$TMP"
}
trap stop EXIT
"${RUN[@]}" mkdir -m 700 "$TMP/sock"
"${RUN[@]}" "$BIN/initdb" -D "$TMP/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$TMP/initdb.log" 2>&1 \
    || { cat "$TMP/initdb.log" >&2; exit 1; }
# a test cluster: no durability needed (it is deleted afterwards), enough connections for the suite
"${RUN[@]}" "$BIN/pg_ctl" -D "$TMP/data" -l "$TMP/server.log" -w -t 60 start -o \
    "-c listen_addresses='' -k $TMP/sock -p $PORT -c max_connections=200 -c fsync=off \
     -c synchronous_commit=off -c full_page_writes=off" >/dev/null \
    || { cat "$TMP/server.log" >&2; exit 1; }
export SIMDB_TEST_DATABASE_URL="postgresql://postgres@/postgres?host=$TMP/sock&port=$PORT"
echo "with-pg$VERSION: $("$BIN/postgres" --version) at $SIMDB_TEST_DATABASE_URL" >&2
set +e
"$@"
status=$?
set -e
exit $status
