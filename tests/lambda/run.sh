#!/usr/bin/env bash
# End to end through the real Lambda function binaries: `cargo lambda watch` (cargo-lambda
# from PyPI, in a venv under .tools/) serves them over DynamoDB Local, the local event source
# mapping (localstack/stream-poller.py) feeds the table's stream to the push notifier, and
# functions/tests/watch.rs drives them through their function URLs and receives the push
# notifications at a loopback webhook.
#
#   tests/lambda/run.sh
#
# Runs the poller's unit tests and builds the function binaries first, then runs DynamoDB
# Local, the emulator, the poller and the test together in a private network namespace that
# reaches only loopback (localstack/dynamodb-local.sh run), where every process started is
# stopped at the end.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
log() { printf 'lambda-e2e: %s\n' "$*" >&2; }
# shellcheck source=tests/lib/lambda-watch.sh
. tests/lib/lambda-watch.sh

outside() {
  local t0
  t0=$(date +%s)
  log "the stream poller's unit tests"
  python3 tests/lambda/stream_poller_test.py
  log "building the function binaries and the test"
  lambda_watch_install
  cargo test -p functions --test watch --no-run
  log "built in $(($(date +%s) - t0))s"
  exec localstack/dynamodb-local.sh run -- "$0" --inside
}

# Inside the private namespace, with DynamoDB Local at $AWS_ENDPOINT_URL_DYNAMODB.
inside() {
  local t0 tmp rc
  t0=$(date +%s)
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/lambda-e2e.XXXXXX")
  # shellcheck disable=SC2064 # expand $tmp now
  trap "stop_lambda_watch; rm -rf '$tmp'" EXIT
  start_lambda_watch "$tmp" --env-var TH_ALLOW_PRIVATE_WEBHOOKS=true

  set +e
  LAMBDA_WATCH_URL=$LAMBDA_WATCH_URL LAMBDA_WATCH_LOG=$tmp/watch.log \
    cargo test -p functions --test watch -- --ignored --nocapture
  rc=$?
  set -e
  if [[ $rc != 0 ]]; then
    log "the emulator's log (last 80 lines):"
    tail -n 80 "$tmp/watch.log" >&2
    log "the stream poller's log (last 40 lines):"
    tail -n 40 "$tmp/poller.log" >&2
  fi
  log "done in $(($(date +%s) - t0))s (rc $rc)"
  exit "$rc"
}

if [[ ${1:-} == --inside ]]; then
  inside
else
  outside
fi
