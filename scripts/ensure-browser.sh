#!/usr/bin/env bash
# Make sure a headless browser is available for tests/test_report_browser.py:
# Debian's `chromium` and `chromium-driver` packages (/usr/bin/chromium, /usr/bin/chromedriver).
# Idempotent: does nothing when both are already installed. Never downloads a browser any
# other way (Selenium Manager is disabled in the test by giving the driver path explicitly).
# When it cannot install (not root, no apt-get, no network) it says so and exits 0: the
# browser test then skips with that reason.
set -uo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-browser: apt-get not found; browser tests will be skipped" >&2
    exit 0
fi

SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "ensure-browser: not root and no passwordless sudo; browser tests will be skipped" >&2
        exit 0
    fi
fi

export DEBIAN_FRONTEND=noninteractive
if $SUDO apt-get update -qq && \
   $SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null; then
    echo "ensure-browser: installed $(/usr/bin/chromium --version 2>/dev/null)" >&2
else
    echo "ensure-browser: could not install chromium/chromium-driver; browser tests will be skipped" >&2
fi
exit 0
