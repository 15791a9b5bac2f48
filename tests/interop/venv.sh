#!/usr/bin/env bash
# Creates (or reuses) the Python venv with the official A2A SDK that tests/interop/run.sh and
# bench/run.sh share, and prints its interpreter's path on stdout (progress goes to stderr).
#
#   PY=$(tests/interop/venv.sh)
#
# Pins: tests/interop/requirements.txt (a2a-sdk[http-server]==1.3.0, uvicorn, all transitive
# dependencies exact). The venv lives under the git-ignored .tools/python-a2a/, keyed by the
# interpreter's version and the pins' hash, so a changed pin builds a fresh one. Needs
# Python >= 3.10 (a2a-sdk's floor); A2A_PYTHON picks the interpreter, else python3.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
req=$root/tests/interop/requirements.txt
base=${A2A_VENV_DIR:-$root/.tools/python-a2a}
log() { printf 'a2a-venv: %s\n' "$*" >&2; }

py=$(command -v "${A2A_PYTHON:-python3}" 2>/dev/null) || {
  log "error: ${A2A_PYTHON:-python3} not found"
  exit 1
}
if ! "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
  log "error: $py is older than Python 3.10 (a2a-sdk 1.3.0 needs >= 3.10); set A2A_PYTHON"
  exit 1
fi
ver=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
key=$(sha256sum <"$req" | cut -c1-12)
venv=$base/venv-py$ver-$key

if [[ ! -f $venv/.complete ]]; then
  t0=$(date +%s)
  mkdir -p "$base"
  rm -rf "$venv"
  log "building $venv (a2a-sdk 1.3.0; log: $base/pip-install.log)"
  "$py" -m venv "$venv"
  if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -r "$req" \
    >"$base/pip-install.log" 2>&1 || ! "$venv/bin/python" -m pip check >>"$base/pip-install.log" 2>&1; then
    log "error: pip install -r $req failed; last lines of $base/pip-install.log:"
    tail -n 20 "$base/pip-install.log" | sed 's/^/    /' >&2
    rm -rf "$venv"
    exit 1
  fi
  "$venv/bin/python" -c 'import a2a.client, a2a.server.routes, uvicorn' || {
    log "error: the venv cannot import a2a.client / a2a.server.routes / uvicorn"
    rm -rf "$venv"
    exit 1
  }
  date -u +%FT%TZ >"$venv/.complete"
  log "venv ready in $(($(date +%s) - t0))s"
fi
echo "$venv/bin/python"
