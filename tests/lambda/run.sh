#!/usr/bin/env bash
# End to end through the real Lambda function binaries: `cargo lambda watch` (cargo-lambda
# from PyPI, in a venv under .tools/) serves them over DynamoDB Local, and
# functions/tests/watch.rs drives them through their function URLs and invokes the push
# notifier with a stream batch built from the table's items.
#
#   tests/lambda/run.sh
#
# Builds the function binaries first, then runs DynamoDB Local, the
# emulator and the test together in a private network namespace that reaches only loopback
# (localstack/dynamodb-local.sh run), where every process started is stopped at the end.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
CARGO_LAMBDA_VERSION=1.9.2
venv=$root/.tools/cargo-lambda/venv-$CARGO_LAMBDA_VERSION
log() { printf 'lambda-e2e: %s\n' "$*" >&2; }

outside() {
  local t0
  t0=$(date +%s)
  if [[ ! -x $venv/bin/cargo-lambda ]]; then
    log "installing cargo-lambda $CARGO_LAMBDA_VERSION from PyPI into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
      "cargo-lambda==$CARGO_LAMBDA_VERSION"
  fi
  PATH=$venv/bin:$PATH cargo lambda --version >&2
  log "building the function binaries and the test"
  # What `cargo lambda watch` runs is `cargo run --bin <function>` at the workspace root, which
  # resolves features across every member; `-p functions` would resolve them for that crate
  # alone, build differently featured dependencies and leave the first invocation to compile
  # them (minutes on a cold machine). Building every member's binaries matches it exactly.
  cargo build --workspace --bins
  cargo test -p functions --test watch --no-run
  log "built in $(($(date +%s) - t0))s"
  exec localstack/dynamodb-local.sh run -- "$0" --inside
}

# Inside the private namespace, with DynamoDB Local at $AWS_ENDPOINT_URL_DYNAMODB.
inside() {
  local t0 tmp rc
  t0=$(date +%s)
  export PATH=$venv/bin:$PATH
  export CARGO_NET_OFFLINE=true
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/lambda-e2e.XXXXXX")
  watch_pid=
  # shellcheck disable=SC2064 # expand $tmp now
  trap "stop_watch; rm -rf '$tmp'" EXIT

  # The functions' environment is the workspace metadata's; the endpoint is the one started.
  set -m
  cargo lambda watch --invoke-address 127.0.0.1 --invoke-port 9000 --ignore-changes \
    --env-var "AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL_DYNAMODB" \
    --env-var TH_ALLOW_PRIVATE_WEBHOOKS=true >"$tmp/watch.log" 2>&1 &
  watch_pid=$!
  set +m
  # Listening is enough: each function's process starts on its first invocation.
  local up=0
  for _ in $(seq 300); do
    if (exec 3<>/dev/tcp/127.0.0.1/9000) 2>/dev/null; then
      up=1
      break
    fi
    kill -0 "$watch_pid" 2>/dev/null || break
    sleep 0.2
  done
  if [[ $up != 1 ]]; then
    log "error: cargo lambda watch did not answer; its log:"
    cat "$tmp/watch.log" >&2
    exit 1
  fi

  set +e
  LAMBDA_WATCH_URL=http://127.0.0.1:9000 LAMBDA_WATCH_LOG=$tmp/watch.log cargo test -p functions --test watch -- --ignored --nocapture
  rc=$?
  set -e
  if [[ $rc != 0 ]]; then
    log "the emulator's log (last 80 lines):"
    tail -n 80 "$tmp/watch.log" >&2
  fi
  log "done in $(($(date +%s) - t0))s (rc $rc)"
  exit "$rc"
}

# Stops the emulator and the function processes it started (its process group).
stop_watch() {
  [[ -n ${watch_pid:-} ]] || return 0
  kill -TERM -- "-$watch_pid" 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 "$watch_pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL -- "-$watch_pid" 2>/dev/null || true
}

if [[ ${1:-} == --inside ]]; then
  inside
else
  outside
fi
