#!/usr/bin/env bash
# Makes SoftHSM2 available for the pkcs11 KMS provider tests: installs Debian's softhsm2 when softhsm2-util or the
# module is missing (once; later runs return at once), then prints the PKCS#11 module path as the last stdout line.
# Usage: ensure-softhsm.sh [TOKEN_DIR]  TOKEN_DIR (made when missing, mode 0700) is where the caller's own
# softhsm2.conf will point. Progress goes to stderr. Nothing secret is printed: tokens and PINs are the caller's.
set -euo pipefail

log() { echo "ensure-softhsm: $*" >&2; }

# Debian's path first; the others cover softhsm builds that place the module elsewhere (multiarch, /usr/local).
find_module() {
    local candidate
    for candidate in \
        /usr/lib/softhsm/libsofthsm2.so \
        /usr/lib/"$(uname -m)"-linux-gnu/softhsm/libsofthsm2.so \
        /usr/local/lib/softhsm/libsofthsm2.so; do
        if [ -f "$candidate" ]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

if ! command -v softhsm2-util >/dev/null 2>&1 || ! find_module >/dev/null; then
    # Root in CI has no sudo; a developer's non-root shell needs it.
    if [ "$(id -u)" -eq 0 ]; then
        as_root=()
    elif command -v sudo >/dev/null 2>&1; then
        as_root=(sudo)
    else
        log "softhsm2 is missing and this shell is neither root nor has sudo"
        exit 1
    fi
    log "installing softhsm2 from Debian (apt-get update, then apt-get install -y softhsm2)"
    export DEBIAN_FRONTEND=noninteractive
    "${as_root[@]}" apt-get update -qq >&2
    "${as_root[@]}" apt-get install -y -qq --no-install-recommends softhsm2 >&2
    log "softhsm2 installed"
fi

module=$(find_module) || { log "softhsm2-util is present but libsofthsm2.so was not found"; exit 1; }

if [ $# -ge 1 ] && [ -n "$1" ]; then
    # 0700: SoftHSM keeps key material in this directory.
    mkdir -p "$1"
    chmod 700 "$1"
    log "token directory $1"
fi

echo "$module"
