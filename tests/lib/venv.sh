# shellcheck shell=bash
# Sourced by the scripts that install Python tools from PyPI (tests/infra/run.sh,
# localstack/deploy.sh); uses the caller's `log`.
#
#   venv <dir> <pip requirement>...   a venv with these, made once (.complete marks it done)
venv() {
  local dir=$1
  shift
  if [[ ! -f $dir/.complete ]]; then
    log "installing $* from PyPI into $dir"
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/python" -m pip install --disable-pip-version-check --no-input -q "$@"
    touch "$dir/.complete"
  fi
}
