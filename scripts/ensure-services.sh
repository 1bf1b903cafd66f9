#!/usr/bin/env bash
# Starts what the tests need and is missing: the local PostgreSQL cluster.
set -euo pipefail

pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }

if ! pg_up; then
    if command -v pg_ctlcluster >/dev/null 2>&1; then
        version=$(ls /etc/postgresql | sort -V | tail -n 1)
        echo "Starting PostgreSQL $version"
        pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
        for _ in $(seq 1 30); do pg_up && break; sleep 1; done
    fi
fi
pg_up || { echo "PostgreSQL is not reachable on 127.0.0.1:5432" >&2; exit 1; }
bash "$(dirname "$0")/ensure-softhsm.sh" >/dev/null
bash "$(dirname "$0")/ensure-chromium.sh"
