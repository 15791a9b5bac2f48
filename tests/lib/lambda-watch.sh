# shellcheck shell=bash
# Sourced by the scripts that run the real function binaries under `cargo lambda watch` over
# DynamoDB Local (tests/lambda/run.sh, tests/tck/run.sh --functions); uses the caller's `log`
# and runs under `set -euo pipefail`.
#
#   lambda_watch_install
#       outside the private namespace (it needs PyPI): cargo-lambda in a venv under .tools/,
#       then every member's binaries built as `cargo lambda watch` runs them (see below).
#   start_lambda_watch <tmp dir> [cargo lambda watch args...]
#       inside the namespace, with DynamoDB Local at $AWS_ENDPOINT_URL_DYNAMODB: the emulator on
#       127.0.0.1:9000 (log <tmp>/watch.log) and the local event source mapping
#       (localstack/stream-poller.py, log <tmp>/poller.log) that feeds the table's stream to
#       push-notifier; exits 1 with the emulator's log when it does not answer.
#   stop_lambda_watch
#       stops both (the emulator with the function processes it started); safe to call twice.

LAMBDA_WATCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CARGO_LAMBDA_VERSION=1.9.2
cargo_lambda_venv=$LAMBDA_WATCH_ROOT/.tools/cargo-lambda/venv-$CARGO_LAMBDA_VERSION
LAMBDA_WATCH_URL=http://127.0.0.1:9000
watch_pid=
poller_pid=

lambda_watch_install() {
  if [[ ! -x $cargo_lambda_venv/bin/cargo-lambda ]]; then
    log "installing cargo-lambda $CARGO_LAMBDA_VERSION from PyPI into $cargo_lambda_venv"
    rm -rf "$cargo_lambda_venv"
    python3 -m venv "$cargo_lambda_venv"
    "$cargo_lambda_venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
      "cargo-lambda==$CARGO_LAMBDA_VERSION"
  fi
  PATH=$cargo_lambda_venv/bin:$PATH cargo lambda --version >&2
  # What `cargo lambda watch` runs is `cargo run --bin <function>` at the workspace root, which
  # resolves features across every member; `-p functions` would resolve them for that crate
  # alone, build differently featured dependencies and leave the first invocation to compile
  # them (minutes on a cold machine). Building every member's binaries matches it exactly.
  (cd "$LAMBDA_WATCH_ROOT" && cargo build --workspace --bins)
}

start_lambda_watch() {
  local tmp=$1 up=0
  shift
  export PATH=$cargo_lambda_venv/bin:$PATH
  export CARGO_NET_OFFLINE=true
  # Its own process group, so that stopping it stops the function processes it started. The
  # functions' environment is the workspace metadata's; the endpoint is the one started.
  set -m
  (cd "$LAMBDA_WATCH_ROOT" && exec cargo lambda watch --invoke-address 127.0.0.1 --invoke-port 9000 \
    --ignore-changes --env-var "AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL_DYNAMODB" "$@") \
    >"$tmp/watch.log" 2>&1 &
  watch_pid=$!
  set +m
  # Listening is enough: each function's process starts on its first invocation.
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
  # Deployed, the table's stream feeds push-notifier through an event source mapping; here
  # the poller does (it waits for the table, so it may start before the table exists).
  python3 "$LAMBDA_WATCH_ROOT/localstack/stream-poller.py" --invoke-url "$LAMBDA_WATCH_URL" \
    >"$tmp/poller.log" 2>&1 &
  poller_pid=$!
}

stop_lambda_watch() {
  if [[ -n ${poller_pid:-} ]]; then
    kill -TERM "$poller_pid" 2>/dev/null || true
    wait "$poller_pid" 2>/dev/null || true
    poller_pid=
  fi
  [[ -n ${watch_pid:-} ]] || return 0
  kill -TERM -- "-$watch_pid" 2>/dev/null || true
  for _ in $(seq 50); do
    if ! kill -0 "$watch_pid" 2>/dev/null; then
      watch_pid=
      return 0
    fi
    sleep 0.1
  done
  kill -KILL -- "-$watch_pid" 2>/dev/null || true
  watch_pid=
}
