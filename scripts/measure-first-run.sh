#!/usr/bin/env bash
# Measures a fresh machine's first run (BENCHMARKS.md, "The first run"): a fresh
# clone of this repository, an empty target directory, cargo-leptos and
# wasm-bindgen-cli built from source into an empty install root, then
# `make run` until its first page answers. What a fresh machine has already
# (rustup's toolchain, the crates.io index and downloads in ~/.cargo, Debian
# packages, npm's cache) is used as it is: the figures are compile time.
#
# Usage: scripts/measure-first-run.sh [work-dir]   (default: a new temp dir)
# Measure on a quiet machine: `uptime` under 0.5 before starting.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
mkdir -p "$work"
log="$work/first-run.log"
port="${PORT:-3291}"
echo "measuring in $work (log: $log); load now: $(cut -d' ' -f1-3 /proc/loadavg)"

git clone -q "$repo" "$work/clone"
cd "$work/clone"
export CARGO_TARGET_DIR="$work/target" CARGO_INSTALL_ROOT="$work/tools"
export PATH="$CARGO_INSTALL_ROOT/bin:$PATH"
# The clone's own copy of the npm packages, as on a fresh machine.
rm -rf end2end/node_modules

t0=$SECONDS
make setup >>"$log" 2>&1
t_setup=$((SECONDS - t0))
t1=$SECONDS
cargo leptos build --split >>"$log" 2>&1
t_build=$((SECONDS - t1))
t2=$SECONDS
bin="$CARGO_TARGET_DIR/debug/northwind-ops"
NORTHWIND_DATA_DIR="$work/data" "$bin" seed --demo-accounts >>"$log" 2>&1
NORTHWIND_DATA_DIR="$work/data" "$bin" serve --addr "127.0.0.1:$port" >>"$log" 2>&1 &
server=$!
until curl -sf "http://127.0.0.1:$port/login" >/dev/null; do sleep 0.5; done
t_page=$((SECONDS - t2))
kill "$server"
wait "$server" 2>/dev/null || true

mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
echo
echo "| step | took |"
echo "|---|---|"
grep -E '^== |^   done in' "$log" | paste - - | sed -E 's/^== ([^(]*)[^\t]*\t *done in (.*)$/| \1| \2 |/' || true
echo "| setup (all of the above) | $(mmss "$t_setup") |"
echo "| the app: \`cargo leptos build --split\` (server and wasm bundle) | $(mmss "$t_build") |"
echo "| seed, serve, first page | $(mmss "$t_page") |"
echo "| **first page, from a fresh clone** | **$(mmss $((SECONDS - t0)))** |"
# The CPU time of all of it (every compiler process, waited for): on two
# cores no order of the same work ends in less than half of it.
# (`times` in this shell itself: in a pipeline it would time only a subshell.)
times >"$work/times"
cpu=$(tail -1 "$work/times" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); t += p[1] * 60 + p[2] } print int(t) }')
echo "CPU time: $(mmss "$cpu") (user and system, all processes), so at least $(mmss $((cpu / $(nproc)))) on $(nproc) cores"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
