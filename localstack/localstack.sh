#!/usr/bin/env bash
# The LocalStack runtime (localstack-core, host mode, no Docker) serving DynamoDB
# and DynamoDB Streams only, on loopback, in a private network namespace shared
# with the command under test. Nothing is downloaded at start: DynamoDB Local
# comes from the npm package installed by dynamodb-local.sh, kinesis-mock (the
# backend of LocalStack's default DynamoDB Streams provider) from npm, and
# LocalStack's "java 21" is a link to the system JDK (17 is enough).
#
#   localstack/localstack.sh install
#   localstack/localstack.sh run [--port N] -- command [args...]
#   localstack/localstack.sh help
#
# Needs Python >= 3.12 (localstack-core uses PEP 695 syntax). Without it, both
# subcommands print one line starting with "SKIPPED: LocalStack needs Python >= 3.12"
# and exit 0 without running anything. See localstack/README.md.
set -euo pipefail

LE_NAME=localstack
LE_SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
# shellcheck source=localstack/common.sh
. "$(dirname "$LE_SELF")/common.sh"

LS_VERSION=2026.3.0 # must match localstack-requirements.txt
LS_REQUIREMENTS=$LE_LIB_DIR/localstack-requirements.txt
KINESIS_LOCAL_VERSION=0.5.2 # LocalStack 2026.3.0's _KINESIS_MOCK_VERSION (npm kinesis-local)

LE_PORT=${LS_EMU_PORT:-4566}
LE_STOP_TIMEOUT=${LS_EMU_STOP_TIMEOUT:-15}
LS_READY_TIMEOUT=${LS_EMU_READY_TIMEOUT:-120}
# twisted (LocalStack's default) shuts down cleanly on TERM in ~5 s; hypercorn
# hung after traffic in 3 of 4 runs here (needed the KILL). twisted ignores the
# host part of GATEWAY_LISTEN and binds 0.0.0.0: fine inside our namespace.
LS_GATEWAY_SERVER=${LS_EMU_GATEWAY_SERVER:-twisted}
# v2: DynamoDB Streams served by DynamoDB Local itself (PROVIDER_OVERRIDE_*=v2).
# default: LocalStack's out-of-the-box provider, streams copied into kinesis-mock;
# it drops the first write(s) after CreateTable while the backing Kinesis stream
# is still CREATING ("Stream ... is not currently ACTIVE or UPDATING"), so the
# smoke check's stream assertions are flaky on it.
LS_STREAMS_PROVIDER=${LS_EMU_STREAMS_PROVIDER:-v2}
LS_BASE=$LE_TOOLS_DIR/localstack

usage() {
  cat <<EOF
usage: $0 install
       $0 run [--port N] -- command [args...]

install  Build the LocalStack $LS_VERSION venv (exact pins in
         localstack/localstack-requirements.txt, Python >= 3.12) and the offline
         package seed under ${LS_BASE}/, unless already there.
run      Install if needed, then in a private network namespace start LocalStack
         (DynamoDB + DynamoDB Streams) on 127.0.0.1:PORT (default ${LE_PORT}), wait
         until ListTables answers, run the command with AWS_ENDPOINT_URL_DYNAMODB etc.
         exported, stop LocalStack (TERM, KILL after ${LE_STOP_TIMEOUT}s) and everything it
         started, and exit with the command's status (125 if LocalStack could not be
         provided). Without Python >= 3.12: prints "SKIPPED: ..." and exits 0.
EOF
}

# --- Python >= 3.12 --------------------------------------------------------

py_ok() { [[ -x $1 ]] && "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; }

# Sets LS_PY to the interpreter to build the venv with, preferring 3.13 (tested),
# then 3.12; LS_EMU_PYTHON overrides. Fails (setting PY_SKIP_REASON) when there is none.
find_python() {
  local c root cands=()
  LS_PY=
  if [[ -n ${LS_EMU_PYTHON:-} ]]; then
    c=$(command -v "$LS_EMU_PYTHON" 2>/dev/null || true)
    if [[ -n $c ]] && py_ok "$c"; then LS_PY=$c; return 0; fi
    PY_SKIP_REASON="LS_EMU_PYTHON=$LS_EMU_PYTHON is not a Python >= 3.12"
    return 1
  fi
  root=${PYENV_ROOT:-$HOME/.pyenv}
  shopt -s nullglob
  cands+=("$root"/versions/3.13.*/bin/python3 "$root"/versions/3.12.*/bin/python3)
  shopt -u nullglob
  for c in python3.13 python3.12 python3; do
    c=$(command -v "$c" 2>/dev/null || true)
    [[ -n $c ]] && cands+=("$c")
  done
  for c in "${cands[@]}"; do
    # pyenv shims exist for versions that are not selected: ask the interpreter
    if py_ok "$c"; then LS_PY=$c; return 0; fi
  done
  PY_SKIP_REASON="no python3.13/python3.12 found (looked in $root/versions and PATH)"
  return 1
}

skip_no_python() {
  echo "SKIPPED: LocalStack needs Python >= 3.12 (localstack-core $LS_VERSION uses PEP 695 syntax); ${PY_SKIP_REASON}"
  exit 0
}

# --- install ---------------------------------------------------------------

# Cache keys: a changed pin builds afresh, an unchanged one is reused.
venv_key() { sha256sum <"$LS_REQUIREMENTS" | cut -c1-12; }
lib_key() {
  cat "$LE_LIB_DIR"/npm/dynamodb-local/package*.json "$LE_LIB_DIR"/npm/kinesis-local/package*.json |
    sha256sum | cut -c1-12
}

venv_dir() {
  local py=$1 ver
  ver=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
  echo "$LS_BASE/venv-py$ver-$(venv_key)"
}

java_home() {
  local java
  if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then
    echo "$JAVA_HOME"
    return 0
  fi
  java=$(command -v java 2>/dev/null) || return 1
  java=$(readlink -f "$java")
  dirname "$(dirname "$java")"
}

install_venv() {
  local py=$1 venv=$2 t0 log
  [[ -f $venv/.complete ]] && return 0
  t0=$(le_now_us)
  log=$LS_BASE/pip-install.log
  le_log "building $venv with $py (localstack-core $LS_VERSION; log: $log)"
  rm -rf "$venv"
  "$py" -m venv "$venv"
  if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input \
    -r "$LS_REQUIREMENTS" >"$log" 2>&1; then
    le_err "pip install of $LS_REQUIREMENTS failed; last lines of $log:"
    tail -n 20 "$log" | sed 's/^/    /' >&2
    rm -rf "$venv"
    return 1
  fi
  if ! "$venv/bin/python" -m pip check >>"$log" 2>&1; then
    le_err "pip check failed (see $log)"
    rm -rf "$venv"
    return 1
  fi
  if ! "$venv/bin/python" -c 'import localstack.runtime.main' >>"$log" 2>&1; then
    le_err "the venv cannot import localstack.runtime.main (see $log)"
    rm -rf "$venv"
    return 1
  fi
  date -u +%FT%TZ >"$venv/.complete"
  le_log "venv ready in $(le_elapsed "$t0")s ($(du -sh "$venv" | cut -f1))"
}

# A do-nothing javaagent: LocalStack always adds
# -javaagent:<ddb dir>/ddb-local-loader-0.1.jar (its >20-GSI patch, downloaded
# from GitHub normally; unreachable here).
build_agent() {
  local out=$1 tmp
  [[ -f $out ]] && return 0
  if ! command -v javac >/dev/null 2>&1 || ! command -v jar >/dev/null 2>&1; then
    le_err "javac and jar (a JDK) are needed to build the no-op ddb-local-loader agent"
    return 1
  fi
  tmp=$(mktemp -d)
  printf '%s\n' 'public class NoopAgent {' \
    '  public static void premain(String a, java.lang.instrument.Instrumentation i) {}' '}' \
    >"$tmp/NoopAgent.java"
  printf 'Premain-Class: NoopAgent\n' >"$tmp/manifest.txt"
  (cd "$tmp" && javac --release 11 NoopAgent.java && jar cfm agent.jar manifest.txt NoopAgent.class) >&2 || {
    rm -rf "$tmp"
    le_err "building the no-op agent jar failed"
    return 1
  }
  mkdir -p "$(dirname "$out")"
  mv "$tmp/agent.jar" "$out"
  rm -rf "$tmp"
}

# The directory LocalStack sees as $FILESYSTEM_ROOT/var/lib/localstack/lib,
# pre-seeded so that its package installers find everything "already installed".
seed_lib() {
  local lib=$1 ddb_dir jhome tmp
  [[ -f $lib/.complete ]] && return 0
  ddb_dir=$("$LE_LIB_DIR/dynamodb-local.sh" install) || return 1
  jhome=$(java_home) || { le_err "java not found"; return 1; }
  rm -rf "$lib"
  mkdir -p "$lib/dynamodb-local" "$lib/java" "$lib/kinesis-local"
  # hard links: no copy of the 58 MB, same files as dynamodb-local.sh runs
  cp -al "$ddb_dir" "$lib/dynamodb-local/2" 2>/dev/null || cp -a "$ddb_dir" "$lib/dynamodb-local/2"
  build_agent "$LS_BASE/agent/ddb-local-loader-0.1.jar" || return 1
  cp "$LS_BASE/agent/ddb-local-loader-0.1.jar" "$lib/dynamodb-local/2/"
  ln -sfn "$jhome" "$lib/java/21"
  # kinesis-mock for the default (v1) DynamoDB Streams provider, laid out as
  # LocalStack's NodePackageInstaller would (npm install --prefix <dir> pkg@ver)
  tmp=$lib/kinesis-local/$KINESIS_LOCAL_VERSION
  mkdir -p "$tmp"
  cp "$LE_LIB_DIR/npm/kinesis-local/package.json" "$LE_LIB_DIR/npm/kinesis-local/package-lock.json" "$tmp/"
  if ! (cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2); then
    le_err "npm ci of kinesis-local@$KINESIS_LOCAL_VERSION failed"
    return 1
  fi
  date -u +%FT%TZ >"$lib/.complete"
}

# Sets LS_PY, LS_VENV, LS_LIB. Exits 0 with SKIPPED when there is no Python >= 3.12.
ls_install() {
  local t0
  find_python || skip_no_python
  LS_VENV=$(venv_dir "$LS_PY")
  LS_LIB=$LS_BASE/lib-$(lib_key)
  [[ -f $LS_VENV/.complete && -f $LS_LIB/.complete ]] && return 0
  mkdir -p "$LS_BASE"
  t0=$(le_now_us)
  (
    if command -v flock >/dev/null 2>&1; then flock 9; fi
    install_venv "$LS_PY" "$LS_VENV" && seed_lib "$LS_LIB"
  ) 9>"$LS_BASE/.install.lock" || return 1
  le_log "install complete in $(le_elapsed "$t0")s"
}

# --- run -------------------------------------------------------------------

le_stop_server() {
  le_log "LocalStack at exit: $(le_rss_summary "$LE_SERVER_PID")"
  le_stop_tree "LocalStack" "$LE_SERVER_PID" "$LE_STOP_TIMEOUT"
  LE_SERVER_PID=
}

# Ready = DynamoDB ListTables and DynamoDB Streams ListStreams answer 200 (the
# first DynamoDB call starts LocalStack's DynamoDB Local child: a few seconds);
# with the kinesis-backed provider also start kinesis-mock now, not in a test.
probe() {
  ls_post dynamodb DynamoDB_20120810.ListTables 1.0 || return 1
  ls_post dynamodb DynamoDBStreams_20120810.ListStreams 1.0 || return 1
  if [[ $LS_STREAMS_PROVIDER == default ]]; then
    ls_post kinesis Kinesis_20131202.ListStreams 1.1 || return 1
  fi
}

# ls_post SIGNING_SERVICE TARGET JSON_VERSION -> 0 on HTTP 200 (at most 10 s)
ls_post() { le_aws_json_post "http://127.0.0.1:$LE_PORT" "$1" "$2" "$3" 10; }

serve() {
  local fs endpoint services overrides=()
  le_is_uint "$LS_READY_TIMEOUT" || { le_err "LS_EMU_READY_TIMEOUT must be whole seconds"; exit "$LE_EXIT_USAGE"; }
  le_is_uint "$LE_STOP_TIMEOUT" || { le_err "LS_EMU_STOP_TIMEOUT must be whole seconds"; exit "$LE_EXIT_USAGE"; }
  case $LS_STREAMS_PROVIDER in
    v2)
      services=dynamodb,dynamodbstreams
      overrides=(PROVIDER_OVERRIDE_DYNAMODB=v2 PROVIDER_OVERRIDE_DYNAMODBSTREAMS=v2)
      ;;
    default) services=dynamodb,dynamodbstreams,kinesis ;;
    *) le_err "LS_EMU_STREAMS_PROVIDER must be 'v2' or 'default'"; exit "$LE_EXIT_USAGE" ;;
  esac
  services=${LS_EMU_SERVICES:-$services}

  if [[ ! -x $LS_LIB/java/21/bin/java ]]; then
    le_err "$LS_LIB/java/21 does not point to a JDK any more; delete $LS_LIB and rerun"
    exit "$LE_EXIT_SETUP"
  fi
  le_serve_prepare
  # a private FILESYSTEM_ROOT per run (state, tmp, logs), sharing the seeded libs
  fs=$LE_RUN_DIR/fs
  mkdir -p "$fs/var/lib/localstack"
  ln -s "$LS_LIB" "$fs/var/lib/localstack/lib"

  le_start_server env \
    -u AWS_ENDPOINT_URL -u AWS_ENDPOINT_URL_DYNAMODB -u AWS_ENDPOINT_URL_DYNAMODB_STREAMS -u AWS_PROFILE \
    OVERRIDE_IN_DOCKER=0 FILESYSTEM_ROOT="$fs" \
    GATEWAY_LISTEN="127.0.0.1:$LE_PORT" GATEWAY_SERVER="$LS_GATEWAY_SERVER" \
    SERVICES="$services" STRICT_SERVICE_LOADING=1 \
    DYNAMODB_IN_MEMORY=1 PERSISTENCE=0 \
    DISABLE_EVENTS=1 SKIP_SSL_CERT_DOWNLOAD=1 DNS_ADDRESS=0 \
    PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    "${overrides[@]}" \
    "$LS_VENV/bin/python" -m localstack.runtime.main

  le_wait_ready "$LS_READY_TIMEOUT" "LocalStack (127.0.0.1:$LE_PORT)" probe || exit "$LE_EXIT_SETUP"
  endpoint=http://127.0.0.1:$LE_PORT
  le_log "LocalStack $LS_VERSION ($services, streams provider $LS_STREAMS_PROVIDER, $LS_GATEWAY_SERVER) ready at $endpoint in ${LE_READY_SECONDS}s; $(le_rss_summary "$LE_SERVER_PID")"

  le_run_command_and_exit "$endpoint" localstack
}

# --- the hooks of le_main (common.sh) ----------------------------------------

le_install() { ls_install; }

le_report_install() { echo "$LS_VENV"; }

# Sets LS_PY, LS_VENV, LS_LIB like ls_install, without installing.
le_require_installed() {
  find_python || skip_no_python
  LS_VENV=$(venv_dir "$LS_PY")
  LS_LIB=$LS_BASE/lib-$(lib_key)
  [[ -f $LS_VENV/.complete && -f $LS_LIB/.complete ]] || { le_err "LocalStack is not installed"; exit "$LE_EXIT_SETUP"; }
}

le_netns_none_note() { echo "LocalStack's DynamoDB Local child binds 0.0.0.0 in the current network namespace"; }

le_main "$@"
