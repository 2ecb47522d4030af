#!/usr/bin/env bash
# The server Playwright tests against: a fresh embedded store under
# end2end/.run, seeded deterministically (today's orders by the real clock,
# and the day E2E_STUCK_DAY by a fixed one), one account per role
# (e2e-<role>, password e2e-password-<role>) and a second viewer
# (e2e-capacity), an admin API token in
# end2end/.run/admin-token, then the app in this same process (exec), so
# Playwright stops it by its own pid. With OIDC_ISSUER set (the test OpenID
# provider's address), the app signs in through it too.
set -euo pipefail
port="${1:?usage: e2e-server.sh PORT}"
stuck_day="${E2E_STUCK_DAY:?the day of stuck orders (end2end/playwright.config.ts sets it)}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
data="$root/end2end/.run"
rm -rf "$data"
export NORTHWIND_DATA_DIR="$data" NORTHWIND_CURSOR_SECRET="e2e-cursor-secret-of-at-least-32-chars" NORTHWIND_LOG="${NORTHWIND_LOG:-warn,dynoxide=error}"
# Every test signs in from 127.0.0.1: more password attempts a minute than a person needs.
export NORTHWIND_SIGN_IN_ATTEMPTS=1000
bin="${CARGO_TARGET_DIR:-target}/debug/northwind-ops"
"$bin" seed --seed 7
# The stuck-orders day: its own clock (--now, that day's evening) and a
# day's worth of orders, most PENDING, spread over a million customer ids
# (today's busiest customer stays the seed's, for the capacity page's hot keys).
"$bin" seed --seed 8 --days 1 --orders 200 --customers 1000000 --now "${stuck_day}T18:00:00Z"
for role in viewer support ops admin; do
  printf 'e2e-password-%s' "$role" | "$bin" user add "e2e-$role" --role "$role" >/dev/null
done
# A second viewer for the capacity page's test: the sign-in tests disable e2e-viewer.
printf 'e2e-password-capacity' | "$bin" user add e2e-capacity --role viewer >/dev/null
"$bin" token create --name e2e --role admin > "$data/admin-token"
if [ -n "${OIDC_ISSUER:-}" ]; then
  export NORTHWIND_OIDC_ISSUER="$OIDC_ISSUER" NORTHWIND_OIDC_CLIENT_ID="northwind-ops" \
    NORTHWIND_OIDC_CLIENT_SECRET="northwind-test-secret"
fi
# The embedded store on a port of its own, written down for the capacity
# test, which writes orders straight into it as another service would.
store_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
echo "http://127.0.0.1:$store_port" > "$data/store-endpoint"
exec "$bin" serve --addr "127.0.0.1:$port" --embedded-addr "127.0.0.1:$store_port"
