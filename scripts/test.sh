#!/usr/bin/env bash
# The whole test suite: type-check, then every test file on SQLite and PostgreSQL.
# Starts the local PostgreSQL cluster when it is not running (CI machines have it installed, maybe stopped).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/ensure-services.sh

echo "== type-check"
npx tsc -p tsconfig.json --noEmit

echo "== tests"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
set +e
npx lab --typescript -l --timeout 60000 --reporter console --verbose "$@" test 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
set -e

# lab exits 0 when it finds no test at all: that must fail. Close with a plain "N passed, N failed" line.
plain=$(sed 's/\x1b\[[0-9;]*m//g' "$out")
total=$(grep -Eo '[0-9]+ tests complete' <<<"$plain" | grep -Eo '^[0-9]+' | tail -n1 || true)
failed=0
if [ -z "$total" ]; then
    line=$(grep -Eo '[0-9]+ of [0-9]+ tests failed' <<<"$plain" | tail -n1 || true)
    failed=$(awk '{print $1}' <<<"$line"); total=$(awk '{print $3}' <<<"$line")
fi
skipped=$(grep -Eo '[0-9]+ skipped' <<<"$plain" | grep -Eo '^[0-9]+' | tail -n1 || true)
if [ -z "$total" ] || [ "$total" = "0" ]; then
    echo "No test ran." >&2
    exit 1
fi
echo "tests: $((total - failed)) passed, ${failed} failed${skipped:+, ${skipped} skipped}"
exit "$status"
