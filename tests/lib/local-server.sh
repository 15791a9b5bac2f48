# shellcheck shell=bash
# Sourced by the scripts that drive a local-server process (tests/interop/run.sh,
# tests/tck/run.sh): start it on 127.0.0.1 with a free port, stop it whatever happens.
#
#   start_local_server <name> <bin> <tmp dir> [server args...]
#       starts <bin> --addr 127.0.0.1:0 --data-dir <tmp>/data [args...]; sets $server_pid and
#       $url (from the server's first stdout line); its log is <tmp>/server.log. Exits 1,
#       printing that log, when the server does not start.
#   stop_local_server
#       Ctrl-C (the server's graceful shutdown), SIGKILL after 5 s; safe to call twice.
#   require_local_server_bin <name> <bin>
#       exits 1 with a hint to build it when <bin> is not an executable.
#   local_server_session <prefix>
#       sets $tmp to a fresh directory under $TMPDIR named <prefix>.XXXXXX and traps EXIT
#       (and INT/TERM, exiting 130/143) to stop the server and remove $tmp.

server_pid=
url=
tmp=

require_local_server_bin() {
  local name=$1 bin=$2
  if [[ ! -x $bin ]]; then
    echo "$name: error: $bin not found; build it first (cargo build -p local-server)" >&2
    exit 1
  fi
}

local_server_session() {
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  trap local_server_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

local_server_cleanup() {
  stop_local_server
  rm -rf "$tmp"
}

start_local_server() {
  local name=$1 bin=$2 tmp=$3
  shift 3
  RUST_LOG=${RUST_LOG:-warn} "$bin" --addr 127.0.0.1:0 --data-dir "$tmp/data" "$@" \
    >"$tmp/stdout" 2>"$tmp/server.log" &
  server_pid=$!
  url=
  for _ in $(seq 200); do
    url=$(sed -n 's/^listening on \(http:[^ ]*\)$/\1/p' "$tmp/stdout" | head -n 1)
    [[ -n $url ]] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
    sleep 0.05
  done
  if [[ -z $url ]]; then
    echo "$name: error: the server did not start; its log:" >&2
    sed 's/^/    /' "$tmp/server.log" >&2
    exit 1
  fi
}

stop_local_server() {
  [[ -n $server_pid ]] || return 0
  if kill -0 "$server_pid" 2>/dev/null; then
    kill -INT "$server_pid" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$server_pid" 2>/dev/null; then
      echo "server $server_pid ignored SIGINT for 5 s; killing it" >&2
      kill -KILL "$server_pid" 2>/dev/null || true
    fi
  fi
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}
