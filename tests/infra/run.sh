#!/usr/bin/env bash
# The deployment template, checked offline: cfn-lint and `sam validate --lint` on
# infra/template.yaml (both from PyPI, in a venv under .tools/), then, with --build, the
# Lambda build of every function (`cargo lambda build --profile release-lambda --arm64
# --output-format zip`: the workspace's lighter profile for the functions, cargo-lambda from
# PyPI with its zig) and each zip's size, which must
# stay under 10 MB.
#
#   tests/infra/run.sh            lint the template
#   tests/infra/run.sh --build    and build every function for arm64
#
# The template's consistency with the code (functions, routes, table, permissions) is
# `cargo test -p functions --test template`, part of `make test`.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
CFN_LINT_VERSION=1.58.0
SAM_CLI_VERSION=1.170.0
CARGO_LAMBDA_VERSION=1.9.2
# Each function's zip stays under 10 MB (the issue's budget; Lambda's own limit is 50 MB).
ZIP_BUDGET=10000000
log() { printf 'infra: %s\n' "$*" >&2; }

# shellcheck source=tests/lib/venv.sh
. "$root/tests/lib/venv.sh"

t0=$(date +%s)
iac=$root/.tools/iac/venv-cfn-lint-$CFN_LINT_VERSION-sam-$SAM_CLI_VERSION
venv "$iac" "cfn-lint==$CFN_LINT_VERSION" "aws-sam-cli==$SAM_CLI_VERSION"
log "cfn-lint $("$iac/bin/cfn-lint" --version | awk '{print $2}')"
"$iac/bin/cfn-lint" infra/template.yaml
log "sam validate --lint"
SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION=us-east-1 AWS_ACCESS_KEY_ID=none AWS_SECRET_ACCESS_KEY=none \
  "$iac/bin/sam" validate --lint -t infra/template.yaml
log "template checked in $(($(date +%s) - t0))s"

if [[ ${1:-} == --build ]]; then
  t1=$(date +%s)
  cl=$root/.tools/cargo-lambda/venv-$CARGO_LAMBDA_VERSION
  if [[ ! -x $cl/bin/cargo-lambda ]]; then
    venv "$cl" "cargo-lambda==$CARGO_LAMBDA_VERSION"
  fi
  PATH=$cl/bin:$PATH cargo lambda build --profile release-lambda --arm64 --output-format zip -p functions
  log "release arm64 build in $(($(date +%s) - t1))s; zipped sizes (budget $ZIP_BUDGET bytes):"
  over=0
  for zip in target/lambda/*/bootstrap.zip; do
    name=$(basename "$(dirname "$zip")")
    size=$(stat -c %s "$zip")
    printf 'infra:   %-26s %8d bytes\n' "$name" "$size" >&2
    if ((size > ZIP_BUDGET)); then
      log "error: $name is over the budget"
      over=1
    fi
  done
  exit "$over"
fi
