#!/usr/bin/env bash
# The server Playwright tests against: a fresh embedded store under
# end2end/.run, seeded deterministically, then the app in this same process
# (exec), so Playwright stops it by its own pid.
set -euo pipefail
port="${1:?usage: e2e-server.sh PORT}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
data="$root/end2end/.run"
rm -rf "$data"
export NORTHWIND_DATA_DIR="$data" NORTHWIND_CURSOR_SECRET="e2e-cursor-secret-of-at-least-32-chars" NORTHWIND_LOG="${NORTHWIND_LOG:-warn,dynoxide=error}"
target/debug/northwind-ops seed --seed 7
exec target/debug/northwind-ops serve --addr "127.0.0.1:$port"
