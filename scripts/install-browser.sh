#!/usr/bin/env bash
# Debian's Chromium for the real-browser tests (Playwright drives it; it never downloads a
# browser of its own). Needs root for apt-get, as on CI; a no-op when Chromium is installed.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null; then
  echo "ortlab: Chromium is missing and cannot be installed here (needs root and apt-get);" >&2
  echo "        the browser tests will be skipped (and fail under CI=true)." >&2
  exit 0
fi
echo "ortlab: installing Debian's chromium for the browser tests" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
