#!/usr/bin/env bash
# Makes Debian's Chromium available for the console's browser tests (test/console/*.ts drive it with playwright-core,
# which never downloads a browser of its own): installs the chromium package when /usr/bin/chromium is missing (once;
# later runs return at once). Quiet on success; progress of an install goes to stderr.
set -euo pipefail

log() { echo "ensure-chromium: $*" >&2; }

if [ -x /usr/bin/chromium ]; then
    exit 0
fi

# Root in CI has no sudo; a developer's non-root shell needs it.
if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
else
    log "chromium is missing and this shell is neither root nor has sudo"
    exit 1
fi
log "installing chromium from Debian (apt-get update, then apt-get install -y chromium)"
export DEBIAN_FRONTEND=noninteractive
# apt's progress is kept in a log shown only when the install fails.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# chromium-driver is not needed by playwright-core (it speaks the DevTools protocol) but keeps the pair consistent
# for anyone who drives the same browser with WebDriver; fonts-dejavu-core gives the pages a font to render with.
if ! { "${as_root[@]}" apt-get update -qq && "${as_root[@]}" apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core; } >"$out" 2>&1; then
    cat "$out" >&2
    log "apt-get failed"
    exit 1
fi
[ -x /usr/bin/chromium ] || { log "apt-get finished but /usr/bin/chromium is missing"; exit 1; }
log "chromium installed: $(/usr/bin/chromium --version 2>/dev/null || echo unknown version)"
