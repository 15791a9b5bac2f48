#!/usr/bin/env bash
# The web console end to end: Selenium drives Debian's headless chromium (chromium-driver)
# against a local-server run with the scripted catalog of tests/browser/catalog.py.
#
#   tests/browser/run.sh        # needs target/debug/local-server (cargo build -p local-server)
#   TH_BIN=target/release/local-server tests/browser/run.sh
#
# Builds nothing itself; needs `chromium` and `chromium-driver` (apt-get install -y chromium
# chromium-driver; .ci/run installs them). The Selenium venv lives under .tools/ (pins:
# tests/browser/requirements.txt). Screenshots go to target/browser-screenshots/ (SHOTS).
# The last line is "browser: N passed, N failed"; exits non-zero on a failure.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
bin=${TH_BIN:-${CARGO_TARGET_DIR:-target}/debug/local-server}
shots=${SHOTS:-$root/target/browser-screenshots}
log() { printf 'browser: %s\n' "$*" >&2; }

# shellcheck source=tests/lib/local-server.sh
. tests/lib/local-server.sh
# shellcheck source=tests/lib/venv.sh
. tests/lib/venv.sh

require_local_server_bin browser "$bin"
for tool in chromium chromedriver; do
  command -v "$tool" >/dev/null || {
    log "error: $tool not found (apt-get install -y chromium chromium-driver)"
    exit 1
  }
done
req=tests/browser/requirements.txt
venv_dir=$root/.tools/python-browser-$(sha256sum <"$req" | cut -c1-12)
venv "$venv_dir" -r "$req"

local_server_session th-browser
catalog=$(python3 tests/browser/catalog.py "$tmp")
start_local_server browser "$bin" "$tmp" --model-catalog "$catalog"
log "$bin at $url ($(chromium --version 2>/dev/null | head -n 1))"
rm -rf "$shots"
set +e
"$venv_dir/bin/python" tests/browser/console_test.py "$url" "$shots"
rc=$?
set -e
if [[ $rc != 0 ]]; then
  log "the server's log (last 40 lines):"
  tail -n 40 "$tmp/server.log" | sed 's/^/    /' >&2
fi
log "screenshots in $shots"
exit $rc
