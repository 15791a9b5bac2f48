#!/usr/bin/env bash
# Interop: the official A2A Python SDK client (a2a-sdk 1.3.0) drives the local server over
# JSON-RPC and over HTTP+JSON (tests/interop/python_sdk.py), streaming and not.
#
#   tests/interop/run.sh            # needs target/debug/local-server (cargo build -p local-server)
#   TH_BIN=target/release/local-server tests/interop/run.sh
#
# Builds nothing itself. Creates/reuses the SDK venv under .tools/ (tests/interop/venv.sh),
# starts the server on 127.0.0.1 with a free port (port 0) and a temporary data dir, runs the
# client once per transport, and stops the server whatever happens. Exits non-zero when any
# check fails or the server cannot be started; the last line is "interop: N passed, N failed".
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
bin=${TH_BIN:-target/debug/local-server}
default_participant=interop-default
t0=$(date +%s)

# shellcheck source=tests/lib/local-server.sh
. tests/lib/local-server.sh

require_local_server_bin interop "$bin"
py=$(tests/interop/venv.sh)

local_server_session th-interop

start_local_server interop "$bin" "$tmp" --default-participant "$default_participant"
echo "interop: $bin at $url (a2a-sdk $("$py" -c 'import importlib.metadata as m; print(m.version("a2a-sdk"))'), $("$py" -V))"

passed=0
failed=0
for binding in JSONRPC HTTP+JSON; do
  set +e
  "$py" tests/interop/python_sdk.py "$url" "$binding" \
    --default-participant "$default_participant" | tee "$tmp/$binding.out"
  rc=${PIPESTATUS[0]}
  set -e
  p=$(sed -n 's/^[^ ]*: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$tmp/$binding.out")
  f=$(sed -n 's/^[^ ]*: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$tmp/$binding.out")
  passed=$((passed + ${p:-0}))
  if [[ $rc != 0 ]]; then
    # A crash before the summary still counts as a failure.
    failed=$((failed + (${f:-0} > 0 ? ${f:-0} : 1)))
  else
    failed=$((failed + ${f:-0}))
  fi
done

if [[ $failed != 0 ]]; then
  echo "interop: the server's log (last 40 lines):"
  tail -n 40 "$tmp/server.log" | sed 's/^/    /'
fi
stop_local_server
echo "interop: done in $(($(date +%s) - t0))s"
echo "interop: $passed passed, $failed failed"
[[ $failed == 0 ]]
