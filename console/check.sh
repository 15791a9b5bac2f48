#!/usr/bin/env bash
# The console's checks: a clean install from the lockfile (npm ci), the type check, the unit
# tests, and the committed bundle (dist/) compared byte for byte with a fresh build of the
# sources: a change to console/src must be committed with `npm run build`'s output.
#
#   console/check.sh        (make console; .ci/run)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

npm ci --no-audit --no-fund --loglevel=error
npm run --silent check
npm test --silent >/tmp/console-unit.$$ 2>&1 || { cat /tmp/console-unit.$$; rm -f /tmp/console-unit.$$; exit 1; }
grep -E '^# (pass|fail)' /tmp/console-unit.$$ | sed 's/^# /console: unit tests /'
rm -f /tmp/console-unit.$$
fresh=$(mktemp -d)
trap 'rm -rf "$fresh"' EXIT
node build.mjs --out "$fresh"
if ! diff -r dist "$fresh" >/dev/null; then
  echo "console: error: dist/ is not what the sources build; run (cd console && npm run build) and commit dist/" >&2
  diff -rq dist "$fresh" >&2 || true
  exit 1
fi
echo "console: dist/ is exactly what the sources build ($(du -b dist/app.js | cut -f1) bytes of app.js, $(gzip -9c dist/app.js | wc -c) gzipped)"
