#!/usr/bin/env bash
# The A2A TCK (a2aproject/a2a-tck, kept unmodified in ../shared/tools/a2a-tck) against the
# local server, or against the Lambda functions under `cargo lambda watch`, MUST level,
# JSON-RPC and HTTP+JSON.
#
#   tests/tck/run.sh            # needs target/debug/local-server (cargo build -p local-server)
#   TH_BIN=target/release/local-server tests/tck/run.sh
#   tests/tck/run.sh --functions
#   A2A_TCK_DIR=/elsewhere/a2a-tck tests/tck/run.sh     # the TCK somewhere else
#   TCK_PYTEST_ARGS='-k push' tests/tck/run.sh --functions   # some tests only (a partial run)
#
# --functions builds every member's binaries (as tests/lambda/run.sh does, so after it nothing
# is rebuilt), then in a private network namespace with DynamoDB Local creates the table (with
# the local server's --create-table), starts the functions under `cargo lambda watch` with the
# TCK's settings and the stream poller that feeds push-notifier (tests/lib/lambda-watch.sh),
# and runs the TCK against http://127.0.0.1:9000.
#
# Copies the TCK (../shared is read-only) and installs it with its pinned dependencies
# (tests/tck/requirements.txt) into a venv under .tools/, once per TCK commit. Starts the
# server on 127.0.0.1 (port 0, a temporary data dir, the TCK's agent profile), runs the TCK,
# stops the server whatever happens. Passes when the failed requirements are exactly the
# known defects of the TCK (docs/conformance.md): CORE-SEND-003 (a2a-tck issue #202) and
# DM-SERIAL-001 (it scans the extension's keys inside Task.metadata). Any other failure, or a
# known one that starts passing, is reported; only the former fails the run.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
bin=${TH_BIN:-${CARGO_TARGET_DIR:-target}/debug/local-server}
tck_src=${A2A_TCK_DIR:-$root/../shared/tools/a2a-tck}
known_failures="CORE-SEND-003 DM-SERIAL-001"
mode=${1:-local}
t0=$(date +%s)
log() { echo "tck: $*" >&2; }

# shellcheck source=tests/lib/local-server.sh
. tests/lib/local-server.sh
# shellcheck source=tests/lib/lambda-watch.sh
. tests/lib/lambda-watch.sh

[[ $mode == --functions ]] && lambda_watch_install
require_local_server_bin tck "$bin"
if [[ ! -f $tck_src/run_tck.py ]]; then
  echo "tck: error: the TCK is not at $tck_src" >&2
  exit 1
fi

# One copy and venv per content of the TCK directory and of the pins.
stamp=$( (cd "$tck_src" && find . -type f -not -path './reports/*' -print0 | sort -z | xargs -0 sha256sum;
  cat "$root/tests/tck/requirements.txt") | sha256sum | cut -c1-12)
home=$root/.tools/a2a-tck-$stamp
if [[ ! -f $home/.complete ]]; then
  log "installing the TCK and its pinned dependencies from PyPI into $home"
  rm -rf "$home"
  mkdir -p "$home"
  cp -r "$tck_src" "$home/src"
  rm -rf "$home/src/reports"
  python3 -m venv "$home/venv"
  "$home/venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
    -r tests/tck/requirements.txt "$home/src"
  touch "$home/.complete"
fi
py=$home/venv/bin/python

case $mode in
  local)
    local_server_session th-tck
    start_local_server tck "$bin" "$tmp" --agent-profile tck --default-participant tck --allow-private-webhooks
    log "$bin at $url"
    ;;
  --functions)
    # The venv and the build are ready: the rest runs offline with DynamoDB Local.
    exec localstack/dynamodb-local.sh run -- "$0" --functions-inside
    ;;
  --functions-inside)
    local_server_session th-tck
    trap 'stop_lambda_watch; local_server_cleanup' EXIT
    # The table, as the README's local development says: the local server creates it.
    start_local_server tck "$bin" "$tmp" --store dynamodb --table tiny-harness-local --create-table
    stop_local_server
    start_lambda_watch "$tmp" --env-var TH_AGENT_PROFILE=tck --env-var TH_DEFAULT_PARTICIPANT=tck \
      --env-var TH_ALLOW_PRIVATE_WEBHOOKS=true
    url=$LAMBDA_WATCH_URL
    log "the functions under cargo lambda watch at $url, the stream poller feeding push-notifier"
    ;;
  *)
    echo "usage: $0 [--functions]" >&2
    exit 2
    ;;
esac

# The TCK writes its reports under its own directory: run it from a fresh copy's reports.
rm -rf "$home/src/reports"
set +e
# shellcheck disable=SC2086 # pytest arguments, split
(cd "$home/src" && "$py" run_tck.py --sut-host "$url" --transport jsonrpc,http_json --level must \
  ${TCK_PYTEST_ARGS:+-- $TCK_PYTEST_ARGS}) \
  >"$tmp/tck.out" 2>&1
set -e
grep -E '^FAILED |^[0-9]+ (passed|failed)' "$tmp/tck.out" | sed 's/^/    /' || true
report=$home/src/reports/compatibility.json
if [[ ! -f $report ]]; then
  echo "tck: error: no report; the TCK's output:" >&2
  tail -n 60 "$tmp/tck.out" | sed 's/^/    /' >&2
  exit 1
fi
stop_local_server
set +e
# shellcheck disable=SC2086 # one argument per known failure
"$py" - "$report" $known_failures <<'PY'
import json, sys
report, known = sys.argv[1], set(sys.argv[2:])
data = json.load(open(report))
failed = {req for req, r in data["per_requirement"].items() if r["status"] == "FAIL"}
for transport, t in data["per_transport"].items():
    print(f"tck: {transport}: {t['passed']} passed, {t['failed']} failed, {t['skipped']} skipped")
unexpected = sorted(failed - known)
fixed = sorted(known - failed)
print(f"tck: failed requirements: {', '.join(sorted(failed)) or 'none'} (known TCK defects: {', '.join(sorted(known))})")
if fixed:
    print(f"tck: note: known failures that now pass: {', '.join(fixed)} (update tests/tck/run.sh and docs/conformance.md)")
if unexpected:
    for req in unexpected:
        for err in data["per_requirement"][req].get("errors", [])[:3]:
            print(f"tck: {req}: {err}")
    print(f"tck: FAIL: requirements failed besides the known TCK defects: {', '.join(unexpected)}")
    sys.exit(1)
PY
rc=$?
set -e
if [[ $rc != 0 && $mode == --functions-inside ]]; then
  log "the stream poller's log (last 30 lines):"
  tail -n 30 "$tmp/poller.log" | sed 's/^/    /' >&2
  log "push-notifier in the emulator's log (last 30 lines):"
  grep 'push-notifier\|push notification' "$tmp/watch.log" | tail -n 30 | sed 's/^/    /' >&2 || true
fi
[[ $rc == 0 ]] || exit "$rc"
log "done in $(($(date +%s) - t0))s"
