#!/usr/bin/env bash
# Chromium and its WebDriver from Debian's packages, for the browser test of `kfjob ui`
# (tests/e2e/test_kfjob_ui_browser.py), installed when missing. Needs root and apt-get; one
# install at a time (test workers may ask together). Prints the chromedriver's path last.
set -euo pipefail
log() { printf '[ensure-browser %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

driver() { command -v chromedriver || { [ -x /usr/bin/chromedriver ] && echo /usr/bin/chromedriver; }; }
have() { dpkg-query -W -f='${Status}' chromium chromium-driver 2>/dev/null | grep -c "install ok installed" | grep -qx 2; }
if have && driver >/dev/null; then driver; exit 0; fi

[ "$(id -u)" = 0 ] || { echo "installing Chromium needs root (apt-get)" >&2; exit 2; }
command -v apt-get >/dev/null || { echo "no apt-get: install chromium and chromium-driver yourself" >&2; exit 2; }

cache=${JOBCONTROLLER_CACHE:-$HOME/.cache/jobcontroller}
mkdir -p "$cache"
if command -v flock >/dev/null; then
  exec 9>"$cache/.browser.lock"; flock 9
  if have && driver >/dev/null; then driver; exit 0; fi
fi
log "installing Debian packages: chromium chromium-driver"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null \
  || { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null; }
driver
