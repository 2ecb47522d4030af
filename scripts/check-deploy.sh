#!/usr/bin/env bash
# Checks the deployment files: the Prometheus alert rules for the app's own
# /metrics (deploy/prometheus/alerts.yml) are valid, and their unit tests
# (deploy/prometheus/alerts.test.yml: series written by the test, alerts
# expected to fire and not to fire) pass. Needs `promtool` (Debian's
# `prometheus` package). Exits non-zero on the first failure.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
rules_dir="$root/deploy/prometheus"

if ! command -v promtool >/dev/null 2>&1; then
    echo "check-deploy: promtool not found; install it with: apt-get install prometheus" >&2
    exit 1
fi

echo "== promtool $(promtool --version 2>&1 | head -n1 | awk '{print $3}')"
echo "== check rules: deploy/prometheus/alerts.yml"
promtool check rules "$rules_dir/alerts.yml"

echo "== test rules: deploy/prometheus/alerts.test.yml"
# The test file names its rule files relative to itself.
(cd "$rules_dir" && promtool test rules alerts.test.yml)

echo "== deploy checks passed"
