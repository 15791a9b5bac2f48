#!/usr/bin/env bash
# Load benchmark: the local server (release build, embedded store persisting every task)
# side by side with the a2a-sdk 1.3.0 echo server (bench/python_echo_server.py:
# DefaultRequestHandler, InMemoryTaskStore, one uvicorn worker), both on 127.0.0.1, under the
# same load from oha (a compiled HTTP load generator from crates.io):
#
#   send   JSON-RPC SendMessage, a new task each time (the echo agent answers; the task then
#          waits in TASK_STATE_INPUT_REQUIRED); each body has its own messageId
#   get    JSON-RPC GetTask of one existing task
#
# at concurrency 1 and 16, for a fixed duration each (-w: requests still open at the deadline
# are waited for, none is aborted). Each load runs ROUNDS times, the two servers taking turns
# (ours, Python, ours, Python, ...), so that a slow spell of the machine falls on both; the
# table gives each server's median round and the ratio of the medians, with every round's
# ratio beside it. Prints the table and writes it, with oha's JSON, to $OUT.
#
#   bench/run.sh                  # DURATION=10s ROUNDS=3 CONCURRENCY="1 16" OUT=target/bench-load
#   DURATION=5s ROUNDS=1 bench/run.sh
#
# Installs what it needs: oha (cargo install --locked into .tools/oha), the SDK venv
# (tests/interop/venv.sh), the release build of local-server. Every request loop is bounded
# by DURATION and targets loopback only; both servers are stopped whatever happens.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CONCURRENCY=${CONCURRENCY:-1 16}
OUT=${OUT:-$root/target/bench-load}
OHA_VERSION=1.16.0
PARTICIPANT=bench
BODIES=${BODIES:-200000} # distinct SendMessage bodies (messageIds) oha picks from
log() { printf 'bench: %s\n' "$*" >&2; }

# --- install ----------------------------------------------------------------
oha=$root/.tools/oha/bin/oha
if ! [[ -x $oha ]] || [[ $("$oha" --version 2>/dev/null) != "oha $OHA_VERSION" ]]; then
  log "installing oha $OHA_VERSION (cargo install --locked --root .tools/oha; a few minutes)"
  cargo install oha --version "$OHA_VERSION" --locked --root "$root/.tools/oha" >&2
fi
py=$(tests/interop/venv.sh)
log "building the release server (cargo build --release -p local-server)"
cargo build --release -p local-server --bin local-server >&2
bin=$root/target/release/local-server

# --- servers ----------------------------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/th-bench.XXXXXX")
pids=()
stop_all() {
  local pid
  for pid in "${pids[@]}"; do
    kill -INT "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  pids=()
}
cleanup() {
  stop_all
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_url FILE PID -> the URL of the first "listening on URL" line
wait_url() {
  local url
  for _ in $(seq 300); do
    url=$(sed -n 's/^listening on \(http:[^ ]*\)$/\1/p' "$1" | head -n 1)
    if [[ -n $url ]]; then
      echo "${url%/}"
      return 0
    fi
    kill -0 "$2" 2>/dev/null || break
    sleep 0.05
  done
  log "error: a server did not start; its log:"
  cat "${1%.out}.log" >&2
  return 1
}

RUST_LOG=warn "$bin" --addr 127.0.0.1:0 --data-dir "$tmp/data" \
  --default-participant "$PARTICIPANT" >"$tmp/ours.out" 2>"$tmp/ours.log" &
pids+=($!)
ours_pid=$!
ours_base=$(wait_url "$tmp/ours.out" "$ours_pid")

py_port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$py" bench/python_echo_server.py --host 127.0.0.1 --port "$py_port" >"$tmp/python.out" 2>"$tmp/python.log" &
pids+=($!)
python_pid=$!
python_base=$(wait_url "$tmp/python.out" "$python_pid")

declare -A url=([ours]="$ours_base/" [python]="$python_base/a2a/jsonrpc")
declare -A pid=([ours]=$ours_pid [python]=$python_pid)
headers=(-H 'A2A-Version: 1.0' -H 'Content-Type: application/json' -H "X-Participant-Id: $PARTICIPANT")

rpc() { # rpc SERVER JSON -> the response body
  curl -sS --max-time 10 "${headers[@]}" "${url[$1]}" -d "$2"
}
total_tasks() { # the server's task count for our participant (ListTasks totalSize)
  rpc "$1" '{"jsonrpc":"2.0","id":"n","method":"ListTasks","params":{"pageSize":1}}' |
    "$py" -c 'import json,sys; print(json.load(sys.stdin)["result"]["totalSize"])'
}
cpu_ticks() { # user+system clock ticks of a process
  awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

# Bodies: one JSON-RPC SendMessage per line, each with its own messageId; oha -Z picks a line
# at random per request. A repeat is harmless: without a taskId every message opens a new task
# on both servers (message ids are de-duplicated per task), which is checked below by counting
# the tasks each load created.
awk -v n="$BODIES" -v p="$PARTICIPANT" 'BEGIN { for (i = 1; i <= n; i++)
  printf "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"SendMessage\",\"params\":{\"message\":{\"messageId\":\"bench-%08d\",\"role\":\"ROLE_USER\",\"parts\":[{\"text\":\"echo me %d\"}],\"metadata\":{\"participant_id\":\"%s\"}}}}\n", i, i, i, p }' \
  >"$tmp/send.jsonl"

declare -A get_body
for s in ours python; do
  first=$(rpc "$s" "$(head -n 1 "$tmp/send.jsonl")")
  task_id=$(printf '%s' "$first" | "$py" -c '
import json, sys
r = json.load(sys.stdin)["result"]["task"]
assert r["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", r["status"]
assert r["status"]["message"]["parts"][0]["text"] == "echo me 1", r["status"]
print(r["id"])') || {
    log "error: $s did not answer SendMessage as expected: $first"
    exit 1
  }
  get_body[$s]="{\"jsonrpc\":\"2.0\",\"id\":\"g\",\"method\":\"GetTask\",\"params\":{\"id\":\"$task_id\"}}"
  check=$(rpc "$s" "${get_body[$s]}")
  [[ $check == *'"result"'* && $check == *"$task_id"* ]] || {
    log "error: $s GetTask: $check"
    exit 1
  }
  # warm up (not recorded)
  "$oha" --no-tui -z 2s -c 4 -w -m POST "${headers[@]}" -Z "$tmp/send.jsonl" "${url[$s]}" >/dev/null
done

# --- loads ------------------------------------------------------------------
mkdir -p "$OUT"
rm -f "$OUT"/*.json
results=$OUT/results.tsv
printf 'load\tc\tround\tserver\tok\terrors\trps\tp50_ms\tp99_ms\tcpu_ms_per_req\tcreated\n' >"$results"
for load in send get; do
  for c in $CONCURRENCY; do
    for round in $(seq "$ROUNDS"); do
      for s in ours python; do
        before=
        [[ $load == send ]] && before=$(total_tasks "$s")
        ticks0=$(cpu_ticks "${pid[$s]}")
        if [[ $load == send ]]; then
          body=(-Z "$tmp/send.jsonl")
        else
          body=(-d "${get_body[$s]}")
        fi
        log "$load c=$c round $round/$ROUNDS $s (${url[$s]}) for $DURATION"
        json=$OUT/$load-c$c-r$round-$s.json
        "$oha" --no-tui --output-format json -z "$DURATION" -c "$c" -w -m POST "${headers[@]}" \
          "${body[@]}" "${url[$s]}" >"$json"
        ticks1=$(cpu_ticks "${pid[$s]}")
        created=-
        [[ $load == send ]] && created=$(($(total_tasks "$s") - before))
        "$py" - "$json" "$load" "$c" "$round" "$s" "$((ticks1 - ticks0))" "$(getconf CLK_TCK)" "$created" >>"$results" <<'EOF'
import json, sys
path, load, c, round_, server, ticks, hz, created = sys.argv[1:]
r = json.load(open(path))
codes = r["statusCodeDistribution"]
ok = codes.get("200", 0)
errors = sum(codes.values()) - ok + sum(r["errorDistribution"].values())
lat = r["metrics"]["latency_ms"]
n = sum(codes.values()) + sum(r["errorDistribution"].values())
cpu = int(ticks) * 1000 / int(hz) / max(n, 1)
print(f'{load}\t{c}\t{round_}\t{server}\t{ok}\t{errors}\t{r["summary"]["requestsPerSec"]:.1f}\t'
      f'{lat["p50"]:.2f}\t{lat["p99"]:.2f}\t{cpu:.2f}\t{created}')
EOF
      done
    done
  done
done
stop_all

# --- table ------------------------------------------------------------------
{
  echo "oha $OHA_VERSION, $DURATION per round, $ROUNDS rounds per load (the servers taking turns), keep-alive; both servers on 127.0.0.1 on this machine ($(nproc) cores; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
  "$py" - "$results" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
runs = {}
for r in rows:
    runs.setdefault((r["load"], r["c"], r["server"]), []).append(r)
def median_round(rs):  # the round with the median req/s (the lower middle one of an even count)
    ordered = sorted(rs, key=lambda r: float(r["rps"]))
    return ordered[(len(ordered) - 1) // 2]
def times(x):
    return f"{x:.2f}×" if x < 1 else f"{x:.1f}×"
print("| load | c | server | req/s (median round) | p50 ms | p99 ms | errors | ok | tasks created | server CPU ms/req | ours/Python: ratio of the medians (each round) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for (load, c, server), rs in runs.items():
    m = median_round(rs)
    ratio = ""
    others = runs.get((load, c, "python"))
    if server == "ours" and others:
        theirs = {r["round"]: float(r["rps"]) for r in others}
        x = float(m["rps"]) / max(float(median_round(others)["rps"]), 1e-9)
        each = ", ".join(times(float(r["rps"]) / theirs[r["round"]]) for r in rs if theirs.get(r["round"]))
        ratio = f"**{times(x)}** ({each})"
    name = {"send": "SendMessage (new task)", "get": "GetTask"}[load]
    who = {"ours": "local-server (release, redb)", "python": "a2a-sdk 1.3.0 (in-memory)"}[server]
    total = lambda k: sum(int(r[k]) for r in rs)
    created = "-" if rs[0]["created"] == "-" else total("created")
    print(f'| {name} | {c} | {who} | {float(m["rps"]):,.0f} | {m["p50_ms"]} | {m["p99_ms"]} | '
          f'{total("errors")} | {total("ok")} | {created} | {m["cpu_ms_per_req"]} | {ratio} |')
print()
print("p50, p99 and CPU are those of the median round; errors, ok and tasks created add up all rounds.")
bad = [r for r in rows if r["load"] == "send" and r["created"] not in ("-", r["ok"])]
for r in bad:
    print(f'WARNING: {r["server"]} send c={r["c"]} round {r["round"]}: {r["ok"]} ok responses but {r["created"]} tasks created')
EOF
} | tee "$OUT/table.md"
log "oha JSON and results.tsv in $OUT"
