#!/usr/bin/env bash
# Make sure Debian's PostgreSQL 15 server binaries are present (/usr/lib/postgresql/15/bin),
# for the suite's second pass (scripts/with-pg15.sh). Idempotent: does nothing when initdb is
# there. Installs with apt-get where missing (root or sudo, as CI has), WITHOUT a system
# cluster: postgresql-common is installed first and told not to create "main", so nothing
# listens on the machine's port 5432 afterwards; the tests start a private cluster of their own.
# Exits non-zero when PostgreSQL 15 could not be made available.
set -u
BIN=/usr/lib/postgresql/15/bin
[ -x "$BIN/initdb" ] && exit 0
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "ensure-pg15: PostgreSQL 15 is missing and this is not root: install postgresql-15" >&2; exit 1
    fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-pg15: no apt-get; install PostgreSQL 15 so that $BIN/initdb exists" >&2; exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null 2>&1 || true
$SUDO apt-get install -y -qq --no-install-recommends postgresql-common >/dev/null 2>&1 || true
CONF=/etc/postgresql-common/createcluster.conf
if [ -f "$CONF" ]; then  # no "main" cluster, hence no system service listening
    $SUDO sed -i 's/^#\?\s*create_main_cluster\s*=.*/create_main_cluster = false/' "$CONF"
fi
$SUDO apt-get install -y -qq --no-install-recommends postgresql-15 >/dev/null 2>&1 \
    || { echo "ensure-pg15: apt-get install postgresql-15 failed" >&2; exit 1; }
[ -x "$BIN/initdb" ] || { echo "ensure-pg15: $BIN/initdb still missing" >&2; exit 1; }
