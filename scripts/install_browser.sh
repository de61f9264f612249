#!/usr/bin/env bash
# Install Debian's Chromium for the browser test (tests/test_browser.py) unless one is there.
# Playwright drives this system browser; nothing is downloaded by Playwright itself.
# Set FLATBOOK_CHROMIUM to use another Chromium binary instead.
set -euo pipefail
CHROMIUM=${FLATBOOK_CHROMIUM:-/usr/bin/chromium}
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "installing Debian's chromium for the browser test (needs apt and root)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
else
  echo "no Chromium at $CHROMIUM and no apt-get to install it: the browser test will be skipped" \
       "(set FLATBOOK_CHROMIUM to a Chromium binary to run it)" >&2
fi
