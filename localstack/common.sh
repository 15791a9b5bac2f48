# shellcheck shell=bash
# shellcheck disable=SC2034  # LE_* variables are read by the sourcing scripts
# Shared helpers for localstack/dynamodb-local.sh and localstack/localstack.sh.
# Sourced, never executed. The caller sets LE_NAME (log prefix, also the name of
# the run directory and the emulator's log) and LE_SELF first, runs with
# `set -euo pipefail`, defines the hooks listed at le_main, and ends with
# `le_main "$@"`.
#
# The model: `<script> run -- cmd...` installs what it needs (in the host's
# namespaces, because installing needs the package registries), then runs itself
# again as PID 1 of fresh network + PID namespaces (`unshare -n -p -f --mount-proc
# --kill-child`, or `-rn ...` when not root); the original shell stays in front
# only to forward signals. Inside, it brings `lo` up, starts the emulator in the
# background, waits until it answers a real DynamoDB request, runs the command
# with the emulator's endpoint in its environment, and finally stops the emulator
# (TERM, then KILL after a bounded wait). The namespaces are ours alone, so every
# process still in them at the end was started by us (the emulator, its children,
# anything the command left behind): they are stopped the same way, and the
# kernel kills any survivor when our PID 1 exits.

LE_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LE_REPO_ROOT=$(cd "$LE_LIB_DIR/.." && pwd)
LE_TOOLS_DIR=${EMULATOR_TOOLS_DIR:-$LE_REPO_ROOT/.tools}

# Exit code of the wrapper itself when the emulator could not be provided
# (install failed, no private network namespace, readiness timeout, emulator
# died). Chosen like `docker run`: 125 is not a plausible test-runner status.
LE_EXIT_SETUP=125
LE_EXIT_USAGE=2

LE_SERVER_PID=
LE_SERVER_LOG=
LE_CMD_PID=
LE_OWN_NETNS=0
LE_CLEANED=0
LE_KEEP_LOG=0
LE_RUN_DIR=

le_log() { printf '%s: %s\n' "$LE_NAME" "$*" >&2; }
le_err() { printf '%s: error: %s\n' "$LE_NAME" "$*" >&2; }

# Microseconds since the epoch, without forking.
le_now_us() { local t=${EPOCHREALTIME/[.,]/}; echo "$((10#$t))"; }

# le_elapsed START_US -> "1.23" (seconds since START_US, from le_now_us)
le_elapsed() {
  local d=$(($(le_now_us) - $1))
  printf '%d.%02d' $((d / 1000000)) $((d % 1000000 / 10000))
}

le_is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

# le_stat PID -> the fields of /proc/PID/stat after "(comm) " (fails if gone).
le_stat() {
  local line
  read -r line 2>/dev/null <"/proc/$1/stat" || return 1
  line=${line##*) }
  printf '%s\n' "$line"
}

# True while PID exists and is not a zombie.
le_alive() {
  local line state
  line=$(le_stat "$1") || return 1
  state=${line%% *}
  [[ $state != Z && $state != X ]]
}

# le_wait_dead SECONDS PID... -> 0 when all are gone within SECONDS.
le_wait_dead() {
  local limit_us=$(($1 * 1000000)) t0 pid any
  shift
  t0=$(le_now_us)
  while :; do
    any=0
    for pid in "$@"; do
      if le_alive "$pid"; then any=1; break; fi
    done
    [[ $any == 0 ]] && return 0
    (($(le_now_us) - t0 >= limit_us)) && return 1
    sleep 0.1
  done
}

# le_descendants PID -> PID and all its descendants, one per line.
le_descendants() {
  local root=$1 d pid line state ppid changed=1
  local -A set=([$root]=1)
  while [[ $changed == 1 ]]; do
    changed=0
    for d in /proc/[0-9]*; do
      pid=${d#/proc/}
      [[ -n ${set[$pid]:-} ]] && continue
      read -r line 2>/dev/null <"$d/stat" || continue
      line=${line##*) }
      read -r state ppid _ <<<"$line"
      if [[ -n ${set[$ppid]:-} ]]; then
        set[$pid]=1
        changed=1
      fi
    done
  done
  printf '%s\n' "${!set[@]}"
}

# Sum of VmRSS and VmHWM (peak) in MiB over PID and its descendants.
le_rss_summary() {
  local root=$1 pid rss hwm comm total=0 peak=0 parts=()
  le_alive "$root" || { echo "n/a (not running)"; return 0; }
  for pid in $(le_descendants "$root"); do
    [[ -r /proc/$pid/status ]] || continue
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
    hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
    read -r comm 2>/dev/null <"/proc/$pid/comm" || comm='?'
    [[ -n $rss ]] || continue
    total=$((total + rss))
    peak=$((peak + ${hwm:-0}))
    parts+=("$comm=$((rss / 1024))MiB")
  done
  echo "RSS $((total / 1024)) MiB (peak $((peak / 1024)) MiB; ${parts[*]})"
}

# Decide how to isolate. Sets LE_UNSHARE_FLAGS (array), or LE_NETNS_NONE=1 when
# EMULATOR_NETNS=none (the caller vouches for isolation). The namespaces: network
# (0.0.0.0 binds stay private), PID with /proc remounted (our shell is PID 1 of
# it: it reaps orphans, and when it exits the kernel kills whatever is left),
# and --kill-child (if `unshare` itself dies, our shell is killed, hence all).
le_netns_prepare() {
  local base
  LE_NETNS_NONE=0
  LE_UNSHARE_FLAGS=()
  case ${EMULATOR_NETNS:-auto} in
    none) LE_NETNS_NONE=1; return 0 ;;
    auto) ;;
    *) le_err "EMULATOR_NETNS must be 'auto' or 'none' (got '${EMULATOR_NETNS}')"; return 1 ;;
  esac
  if ! command -v unshare >/dev/null 2>&1; then
    le_err "unshare (util-linux) not found: cannot create a private network namespace." \
      "The emulator binds 0.0.0.0; set EMULATOR_NETNS=none only where that is acceptable."
    return 1
  fi
  for base in -n -rn; do
    [[ $base == -n && $EUID != 0 ]] && continue
    if unshare "$base" -p -f --mount-proc --kill-child true 2>/dev/null; then
      LE_UNSHARE_FLAGS=("$base" -p -f --mount-proc --kill-child)
      return 0
    fi
  done
  le_err "cannot create private network+PID namespaces here (tried 'unshare -n -p -f --mount-proc'" \
    "and 'unshare -rn -p -f --mount-proc'; need root or unprivileged user namespaces)." \
    "Set EMULATOR_NETNS=none only where binding 0.0.0.0 is acceptable."
  return 1
}

# le_run_in_netns ARGS...: run "$BASH ARGS..." in fresh namespaces and exit with
# its status. `unshare --fork` blocks SIGINT/SIGTERM in itself, so this shell
# stays in front: it forwards INT/TERM/HUP as TERM to the inner shell, and if
# that has not finished within a bound, KILLs `unshare` (--kill-child then takes
# the whole namespace down).
le_run_in_netns() {
  local st=0
  LE_UNSHARE_PID=
  LE_FWD_SIGNAL=
  trap 'le_forward_signal INT 2' INT
  trap 'le_forward_signal TERM 15' TERM
  trap 'le_forward_signal HUP 1' HUP
  # setpriv --pdeathsig: should this shell die (even by SIGKILL), unshare gets
  # SIGKILL, and --kill-child takes the namespace down with it.
  local pdeath=()
  if setpriv --help 2>/dev/null | grep -q -- --pdeathsig; then
    pdeath=(setpriv --pdeathsig KILL --)
  fi
  "${pdeath[@]}" unshare "${LE_UNSHARE_FLAGS[@]}" -- "$BASH" "$@" <&0 &
  LE_UNSHARE_PID=$!
  while le_alive "$LE_UNSHARE_PID"; do
    if [[ -z $LE_FWD_SIGNAL ]]; then
      wait "$LE_UNSHARE_PID" || true # returns early when a trapped signal arrives
    else
      if (($(le_now_us) - LE_FWD_T0 >= LE_FWD_LIMIT * 1000000)); then
        le_log "namespace still running ${LE_FWD_LIMIT}s after SIG$LE_FWD_SIGNAL; killing it"
        kill -KILL "$LE_UNSHARE_PID" 2>/dev/null || true
        le_wait_dead 5 "$LE_UNSHARE_PID" || true
        break
      fi
      sleep 0.2
    fi
  done
  wait "$LE_UNSHARE_PID" || st=$?
  trap - INT TERM HUP
  if [[ -n $LE_FWD_SIGNAL ]]; then
    exit $((128 + LE_FWD_NUM))
  fi
  exit "$st"
}

le_forward_signal() {
  local inner=
  [[ -n $LE_FWD_SIGNAL ]] && return 0 # already stopping
  LE_FWD_SIGNAL=$1
  LE_FWD_NUM=$2
  LE_FWD_T0=$(le_now_us)
  LE_FWD_LIMIT=$((3 * ${LE_STOP_TIMEOUT:-10} + 10))
  le_log "received SIG$1; stopping"
  [[ -n $LE_UNSHARE_PID ]] || return 0
  read -r inner _ 2>/dev/null <"/proc/$LE_UNSHARE_PID/task/$LE_UNSHARE_PID/children" || true
  if [[ -n $inner ]]; then
    kill -TERM "$inner" 2>/dev/null || true
  else
    kill -KILL "$LE_UNSHARE_PID" 2>/dev/null || true
  fi
}

# Inside our fresh namespace only `lo` exists and it is down.
le_netns_setup() {
  if command -v ip >/dev/null 2>&1; then
    ip link set lo up
  elif command -v ifconfig >/dev/null 2>&1; then
    ifconfig lo up
  else
    le_err "neither ip (iproute2) nor ifconfig found: cannot bring up loopback"
    return 1
  fi
}

# All processes (pids) in our network namespace except this shell.
le_netns_pids() {
  local d pid
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    [[ $d/ns/net -ef /proc/$$/ns/net ]] 2>/dev/null || continue
    le_alive "$pid" || continue
    echo "$pid"
  done
}

# le_stop NAME PID SECONDS: TERM, wait up to SECONDS, then KILL.
le_stop() {
  local name=$1 pid=$2 limit=$3 t0
  [[ -n $pid ]] || return 0
  if le_alive "$pid"; then
    t0=$(le_now_us)
    kill -TERM "$pid" 2>/dev/null || true
    if le_wait_dead "$limit" "$pid"; then
      le_log "$name stopped (TERM) in $(le_elapsed "$t0")s"
    else
      le_log "$name (pid $pid) still running ${limit}s after TERM; sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
      le_wait_dead 5 "$pid" || le_err "$name (pid $pid) survived KILL"
    fi
  fi
  wait "$pid" 2>/dev/null || true
}

# le_stop_tree NAME PID SECONDS: le_stop PID, then the same for any of its
# descendants (recorded before the TERM) that outlived it, e.g. LocalStack's
# java child when python had to be KILLed. Matters with EMULATOR_NETNS=none; in
# our own namespaces the sweep and PID-namespace teardown also cover this.
le_stop_tree() {
  local name=$1 pid=$2 limit=$3 p left=() tree=()
  mapfile -t tree < <(le_descendants "$pid")
  le_stop "$name" "$pid" "$limit"
  for p in "${tree[@]}"; do
    [[ $p != "$pid" ]] && le_alive "$p" && left+=("$p")
  done
  ((${#left[@]})) || return 0
  le_log "$name left ${#left[@]} child process(es) running (${left[*]}); sending TERM"
  kill -TERM "${left[@]}" 2>/dev/null || true
  if ! le_wait_dead "$limit" "${left[@]}"; then
    for p in "${left[@]}"; do le_alive "$p" && kill -KILL "$p" 2>/dev/null; done
    le_wait_dead 5 "${left[@]}" || le_err "some of $name's children survived KILL"
  fi
}

# Stop whatever is left in our private namespace (never used with EMULATOR_NETNS=none).
le_sweep_netns() {
  local limit=$1 pids pid desc=()
  [[ $LE_OWN_NETNS == 1 ]] || return 0
  mapfile -t pids < <(le_netns_pids)
  # the process-substitution helper itself may still be listed for a moment
  local live=()
  for pid in "${pids[@]}"; do le_alive "$pid" && live+=("$pid"); done
  ((${#live[@]})) || return 0
  for pid in "${live[@]}"; do
    desc+=("$pid:$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-80)")
  done
  le_log "stopping ${#live[@]} leftover process(es) in the private namespace: ${desc[*]}"
  kill -TERM "${live[@]}" 2>/dev/null || true
  if ! le_wait_dead "$limit" "${live[@]}"; then
    le_log "leftovers still running ${limit}s after TERM; sending KILL"
    for pid in "${live[@]}"; do le_alive "$pid" && kill -KILL "$pid" 2>/dev/null; done
    le_wait_dead 5 "${live[@]}" || le_err "some processes survived KILL"
  fi
  for pid in "${live[@]}"; do wait "$pid" 2>/dev/null || true; done
}

le_log_tail() {
  local n=${1:-40}
  if [[ -n $LE_SERVER_LOG && -s $LE_SERVER_LOG ]]; then
    printf '%s: ---- last %s lines of %s ----\n' "$LE_NAME" "$n" "$LE_SERVER_LOG" >&2
    tail -n "$n" "$LE_SERVER_LOG" | sed 's/^/    /' >&2
    printf '%s: ----\n' "$LE_NAME" >&2
  fi
}

# le_wait_ready TIMEOUT DESCRIPTION PROBE_FUNCTION: poll until the probe
# succeeds, the server dies, or TIMEOUT seconds pass.
le_wait_ready() {
  local limit=$1 what=$2 probe=$3 t0 st=0
  t0=$(le_now_us)
  LE_PROBE_DEADLINE_US=$((t0 + limit * 1000000))
  while :; do
    if "$probe"; then
      LE_READY_SECONDS=$(le_elapsed "$t0")
      return 0
    fi
    if ! le_alive "$LE_SERVER_PID"; then
      wait "$LE_SERVER_PID" 2>/dev/null || st=$?
      le_err "$what exited during startup (status $st) before answering"
      LE_KEEP_LOG=1
      le_log_tail 40
      return 1
    fi
    if (($(le_now_us) - t0 >= limit * 1000000)); then
      le_err "$what not ready after ${limit}s (its DynamoDB readiness requests did not get HTTP 200)"
      LE_KEEP_LOG=1
      le_log_tail 40
      return 1
    fi
    sleep 0.1
  done
}

# --max-time for one probe request: at most CAP (default 10) seconds, and not
# past the readiness deadline (at least 1 s).
le_probe_max_time() {
  local cap=${1:-10} left
  left=$(((${LE_PROBE_DEADLINE_US:-0} - $(le_now_us)) / 1000000))
  ((left > cap)) && left=$cap
  ((left < 1)) && left=1
  echo "$left"
}

# le_aws_json_post URL SIGNING_SERVICE TARGET JSON_VERSION MAX_TIME_CAP -> 0 on
# HTTP 200. A real AWS JSON request (body `{}`) with a SigV4-shaped Authorization
# header: DynamoDB Local rejects requests without one (MissingAuthenticationToken)
# but does not verify the signature; LocalStack routes on its signing service.
le_aws_json_post() {
  local url=$1 service=$2 target=$3 version=$4 cap=$5 code
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time "$(le_probe_max_time "$cap")" -X POST "$url/" \
    -H "Content-Type: application/x-amz-json-$version" \
    -H "X-Amz-Target: $target" \
    -H "Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/$service/aws4_request, SignedHeaders=content-type;host;x-amz-target, Signature=0000000000000000000000000000000000000000000000000000000000000000" \
    --data '{}' 2>/dev/null) || return 1
  [[ $code == 200 ]]
}

# A real DynamoDB request: POST ListTables (at most 3 s).
le_ddb_list_tables_ok() {
  le_aws_json_post "$1" dynamodb DynamoDB_20120810.ListTables 1.0 3
}

# Environment for the command under test.
le_export_client_env() {
  local endpoint=$1 emulator=$2
  export AWS_ENDPOINT_URL_DYNAMODB=$endpoint
  export AWS_ENDPOINT_URL_DYNAMODB_STREAMS=$endpoint
  export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
  export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
  export AWS_EC2_METADATA_DISABLED=true
  export DDB_EMULATOR=$emulator
  unset AWS_SESSION_TOKEN AWS_SECURITY_TOKEN AWS_PROFILE
}

# Runs "$@" in the background (so that signals to this wrapper are handled at
# once) with our stdin, and waits for it. Sets LE_CMD_STATUS.
le_run_command() {
  LE_CMD_STATUS=0
  "$@" <&0 &
  LE_CMD_PID=$!
  wait "$LE_CMD_PID" || LE_CMD_STATUS=$?
  LE_CMD_PID=
}

# le_run_command_and_exit ENDPOINT EMULATOR: the end of `serve` once the emulator
# is ready: run LE_CMD against ENDPOINT, keep the emulator's files when it
# fails, stop everything, and exit with the command's status.
le_run_command_and_exit() {
  le_export_client_env "$1" "$2"
  le_run_command "${LE_CMD[@]}"
  if [[ $LE_CMD_STATUS != 0 ]]; then
    LE_KEEP_LOG=1
    le_log "command exited with status $LE_CMD_STATUS"
  fi
  le_cleanup
  trap - EXIT
  exit "$LE_CMD_STATUS"
}

# Called on EXIT (and from the signal handler): stop everything, idempotently.
# The caller defines le_stop_server (emulator-specific) before trapping.
le_cleanup() {
  [[ $LE_CLEANED == 1 ]] && return 0
  LE_CLEANED=1
  # a second signal must not cut the cleanup short (the outer shell bounds it)
  trap '' INT TERM HUP
  set +e
  if [[ -n $LE_CMD_PID ]]; then
    le_stop "command" "$LE_CMD_PID" "${LE_STOP_TIMEOUT:-10}"
  fi
  if [[ -n $LE_SERVER_PID ]]; then
    le_stop_server
  fi
  le_sweep_netns "${LE_STOP_TIMEOUT:-10}"
  if [[ -n $LE_RUN_DIR && -d $LE_RUN_DIR ]]; then
    if [[ $LE_KEEP_LOG == 1 ]]; then
      le_log "kept the emulator's files for inspection: $LE_RUN_DIR"
    else
      rm -rf "$LE_RUN_DIR"
    fi
  fi
}

le_on_signal() {
  local sig=$1 num=$2
  trap '' INT TERM HUP
  le_log "received SIG$sig; stopping"
  le_cleanup
  trap - EXIT
  exit $((128 + num))
}

le_install_traps() {
  trap le_cleanup EXIT
  trap 'le_on_signal INT 2' INT
  trap 'le_on_signal TERM 15' TERM
  trap 'le_on_signal HUP 1' HUP
}

# The start of `serve`: a fresh LE_RUN_DIR (removed at exit unless kept), the
# cleanup traps, and loopback up when we are in our own namespaces. Exits
# LE_EXIT_SETUP when loopback cannot be brought up.
le_serve_prepare() {
  LE_RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/$LE_NAME.XXXXXX")
  le_install_traps
  if [[ $LE_OWN_NETNS == 1 ]]; then
    le_netns_setup || exit "$LE_EXIT_SETUP"
  fi
}

# le_start_server CMD...: start the emulator in the background from LE_RUN_DIR,
# stdin closed, output to LE_RUN_DIR/LE_NAME.log. Sets LE_SERVER_PID, LE_SERVER_LOG.
le_start_server() {
  (cd "$LE_RUN_DIR" && exec "$@") >"$LE_RUN_DIR/$LE_NAME.log" 2>&1 </dev/null &
  LE_SERVER_PID=$!
  LE_SERVER_LOG=$LE_RUN_DIR/$LE_NAME.log
}

# Parse "[--port N] -- cmd..." for `run`. Sets LE_PORT and LE_CMD (array).
le_parse_run_args() {
  LE_CMD=()
  while (($#)); do
    case $1 in
      --port)
        (($# >= 2)) || { le_err "--port needs a value"; return 1; }
        LE_PORT=$2
        shift 2
        ;;
      --port=*) LE_PORT=${1#--port=}; shift ;;
      --) shift; LE_CMD=("$@"); break ;;
      *) le_err "unexpected argument '$1' (usage: run [--port N] -- command [args...])"; return 1 ;;
    esac
  done
  if ((${#LE_CMD[@]} == 0)); then
    le_err "no command given (usage: run [--port N] -- command [args...])"
    return 1
  fi
  if ! le_is_uint "$LE_PORT" || ((10#$LE_PORT < 1 || 10#$LE_PORT > 65535)); then
    le_err "invalid port '$LE_PORT'"
    return 1
  fi
  LE_PORT=$((10#$LE_PORT))
}

# le_main "$@": the command line both wrappers share (help, install, run, and
# the internal __netns-run that le_run_in_netns starts in the new namespaces).
# Hooks the caller defines besides `usage`, `serve` and `le_stop_server`:
#   le_install            install if needed (`install` and `run`)
#   le_report_install     after `install`: final checks, print the install's path
#   le_require_installed  in the namespaces: exit LE_EXIT_SETUP unless installed
#   le_netns_none_note    what binds where with EMULATOR_NETNS=none (one line)
le_main() {
  case ${1:-help} in
    help | -h | --help)
      usage
      ;;
    install)
      (($# == 1)) || { usage >&2; exit "$LE_EXIT_USAGE"; }
      le_install || exit "$LE_EXIT_SETUP"
      le_report_install
      ;;
    run)
      shift
      le_parse_run_args "$@" || exit "$LE_EXIT_USAGE"
      le_install || exit "$LE_EXIT_SETUP"
      le_netns_prepare || exit "$LE_EXIT_SETUP"
      if [[ $LE_NETNS_NONE == 1 ]]; then
        le_log "EMULATOR_NETNS=none: $(le_netns_none_note)"
        serve
      fi
      le_run_in_netns "$LE_SELF" __netns-run --port "$LE_PORT" -- "${LE_CMD[@]}"
      ;;
    __netns-run) # internal: we are PID 1 of our own network+PID namespaces
      shift
      le_parse_run_args "$@" || exit "$LE_EXIT_USAGE"
      LE_OWN_NETNS=1
      le_require_installed
      serve
      ;;
    *)
      usage >&2
      exit "$LE_EXIT_USAGE"
      ;;
  esac
}
