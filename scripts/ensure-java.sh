#!/usr/bin/env bash
# Make sure a Java runtime is present for PySpark (simdb.spark and its tests).
# Idempotent: does nothing when `java` already runs; otherwise installs Debian's
# default-jre-headless (needs root or sudo, as CI has). Never fails the caller:
# without Java the Spark tests skip with that reason.
set -u
if command -v java >/dev/null 2>&1 && java -version >/dev/null 2>&1; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "ensure-java: no java and not root; Spark tests will be skipped" >&2; exit 0
    fi
fi
if command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq >/dev/null 2>&1 || true
    $SUDO apt-get install -y -qq --no-install-recommends default-jre-headless >/dev/null 2>&1 \
        || echo "ensure-java: apt-get install default-jre-headless failed; Spark tests will be skipped" >&2
else
    echo "ensure-java: no apt-get; install a Java 17+ runtime for PySpark" >&2
fi
exit 0
