#!/usr/bin/env bash
# Builds the container image of Northwind Ops with podman, FROM scratch (no
# base image is pulled): the server binary built by cargo-leptos, the shared
# libraries it links (its ldd closure: glibc and libgcc, nothing else), the
# site's files, and the system's CA certificates for TLS to AWS. It runs as
# user 65532, not root; the app listens on 0.0.0.0:3000 and answers
# /healthz for a load balancer's or orchestrator's health check.
#
#   scripts/build-image.sh [release|debug] [TAG]
#
# `make image` builds the release binary first and passes `release`; the
# image test builds from the debug binary `make test` already built.
set -euo pipefail
profile="${1:-release}"
tag="${2:-northwind-ops:latest}"
root="$(cd "$(dirname "$0")/.." && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$root/deploy/containers.conf}"
# Binaries where cargo puts them (CARGO_TARGET_DIR when set); the site where
# cargo-leptos does, under the project whatever that is.
bin="${CARGO_TARGET_DIR:-$root/target}/$profile/northwind-ops"
site="$root/target/site"
for needed in "$bin" "$site/pkg"; do
  [ -e "$needed" ] || { echo "error: $needed is missing: build first (make build, or cargo leptos build --release --split --precompress)" >&2; exit 1; }
done
command -v podman >/dev/null || { echo "error: podman is not installed (scripts/setup.sh installs it)" >&2; exit 1; }

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
cp "$bin" "$context/northwind-ops"
# Leptos reads the hashed asset names from beside the executable.
[ -f "$(dirname "$bin")/hash.txt" ] && cp "$(dirname "$bin")/hash.txt" "$context/hash.txt"
for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
  cp --parents -L "$lib" "$context/"
done
cp -r "$site" "$context/site"
mkdir -p "$context/etc/ssl/certs" "$context/data"
cp /etc/ssl/certs/ca-certificates.crt "$context/etc/ssl/certs/"
cat > "$context/Containerfile" <<'CONTAINERFILE'
FROM scratch
COPY . /
COPY --chown=65532:65532 data /data
ENV LEPTOS_OUTPUT_NAME=northwind-ops \
    LEPTOS_SITE_ROOT=/site \
    LEPTOS_SITE_PKG_DIR=pkg \
    LEPTOS_HASH_FILES=true \
    LEPTOS_SITE_ADDR=0.0.0.0:3000 \
    NORTHWIND_DATA_DIR=/data \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /data
EXPOSE 3000
ENTRYPOINT ["/northwind-ops"]
CMD ["serve"]
CONTAINERFILE
rm -f "$context/data/.keep"
started=$SECONDS
podman build --quiet --format docker --tag "$tag" --file "$context/Containerfile" "$context" >/dev/null
size="$(podman image inspect --format '{{.Size}}' "$tag")"
echo "built $tag from the $profile binary in $((SECONDS - started)) s: $((size / 1024 / 1024)) MiB"
