#!/usr/bin/env bash
# Installs what building and testing Northwind Ops needs, skipping whatever
# is already there. Safe to run again; `make run` and `make test` call it.
set -euo pipefail

CARGO_LEPTOS_VERSION=0.3.10
# Must equal the exact `wasm-bindgen` version pinned in Cargo.toml.
WASM_BINDGEN_VERSION=0.2.130

root="$(cd "$(dirname "$0")/.." && pwd)"
export PATH="$HOME/.cargo/bin:$PATH"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

step() { printf '\n== %s\n' "$*"; }

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  step "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

if ! cargo leptos --version 2>/dev/null | grep -q "$CARGO_LEPTOS_VERSION"; then
  step "installing cargo-leptos $CARGO_LEPTOS_VERSION (builds from source: about 30 minutes)"
  # no_downloads: take wasm-bindgen and wasm-opt from PATH instead of the internet.
  cargo install --locked cargo-leptos --version "$CARGO_LEPTOS_VERSION" --features no_downloads
fi

if ! wasm-bindgen --version 2>/dev/null | grep -q "$WASM_BINDGEN_VERSION"; then
  step "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION"
  cargo install wasm-bindgen-cli --version "=$WASM_BINDGEN_VERSION"
fi

apt_packages=()
command -v chromium >/dev/null || apt_packages+=(chromium)
command -v java >/dev/null || apt_packages+=(openjdk-17-jre-headless)
if [ "${#apt_packages[@]}" -gt 0 ]; then
  step "installing ${apt_packages[*]} from Debian"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${apt_packages[@]}"
fi

# moto's server: the CloudWatch emulator the capacity tests read DynamoDB's
# metrics from (`python3 -m moto.server`), from PyPI.
MOTO_VERSION=5.2.1
if ! python3 -c "import moto, flask" 2>/dev/null; then
  step "installing moto[server] $MOTO_VERSION (the tests' CloudWatch emulator)"
  python3 -m pip install --quiet "moto[server]==$MOTO_VERSION"
fi

# Playwright, DynamoDB Local and binaryen's wasm-opt, from the committed lock.
stamp="$root/end2end/node_modules/.installed"
if [ ! -f "$stamp" ] || [ "$root/end2end/package-lock.json" -nt "$stamp" ]; then
  step "installing end2end/ npm packages"
  (cd "$root/end2end" && npm ci --no-audit --no-fund)
  touch "$stamp"
fi
