#!/usr/bin/env bash
# Deploys infra/template.yaml to a running LocalStack (localstack/compose.yaml) exactly as to
# AWS (`sam build`, `sam deploy`, pointed at LocalStack with AWS_ENDPOINT_URL), then checks that
# the deployed API answers.
#
#   localstack/deploy.sh           build, deploy (stack a2a-local), check
#   localstack/deploy.sh check     only the checks, against the deployed stack
#   localstack/deploy.sh delete    delete the stack (and its retained table)
#
# Needs Docker (for LocalStack and its Lambda containers), Rust, Python 3; SAM CLI and
# cargo-lambda are installed from PyPI into venvs under .tools/, as tests/infra/run.sh does.
# Environment: LOCALSTACK_ENDPOINT (default http://localhost.localstack.cloud:4566, which
# resolves to 127.0.0.1), STACK_NAME (default a2a-local), STAGE (default a2a).
#
# Not run on the project's own machines, which have no Docker engine: see localstack/README.md
# for what was checked there and what LocalStack's free plan runs.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
SAM_CLI_VERSION=1.170.0
CARGO_LAMBDA_VERSION=1.9.2
endpoint=${LOCALSTACK_ENDPOINT:-http://localhost.localstack.cloud:4566}
stack=${STACK_NAME:-a2a-local}
stage=${STAGE:-a2a}
participant=local
log() { printf 'localstack-deploy: %s\n' "$*" >&2; }

# shellcheck source=tests/lib/venv.sh
. "$root/tests/lib/venv.sh"
sam_venv=$root/.tools/localstack-deploy/venv-sam-$SAM_CLI_VERSION
cl_venv=$root/.tools/cargo-lambda/venv-$CARGO_LAMBDA_VERSION
venv "$sam_venv" "aws-sam-cli==$SAM_CLI_VERSION"
venv "$cl_venv" "cargo-lambda==$CARGO_LAMBDA_VERSION"

# Every AWS call below goes to LocalStack: the SDKs (boto3 in SAM CLI) honour AWS_ENDPOINT_URL.
export AWS_ENDPOINT_URL=$endpoint AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test SAM_CLI_TELEMETRY=0
export PATH=$cl_venv/bin:$sam_venv/bin:$PATH
py=$sam_venv/bin/python

# The stack's resources and outputs, or nothing when there is no stack.
stack_info() {
  "$py" - "$stack" <<'EOF'
import json, sys, boto3, botocore
cfn = boto3.client("cloudformation")
try:
    stack = cfn.describe_stacks(StackName=sys.argv[1])["Stacks"][0]
except botocore.exceptions.ClientError:
    sys.exit(0)
resources = cfn.describe_stack_resources(StackName=sys.argv[1])["StackResources"]
print(json.dumps({
    "status": stack["StackStatus"],
    "outputs": {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])},
    "resources": {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources},
}))
EOF
}

wait_for_localstack() {
  for _ in $(seq 1 60); do
    if "$py" -c 'import json,sys,urllib.request; h=json.load(urllib.request.urlopen(sys.argv[1]+"/_localstack/health", timeout=2)); sys.exit(0 if h.get("services") else 1)' "$endpoint" 2>/dev/null; then
      return 0
    fi
    sleep 1
  done
  log "no LocalStack at $endpoint (start it: docker compose -f localstack/compose.yaml up -d)"
  exit 1
}

# AuthMode=none, explicitly (the template defaults to jwt): a LocalStack stack has no issuer,
# and its identities are self-asserted (X-Participant-Id), fit for a local emulator only.
deploy() { # deploy <PublicBaseUrl>
  sam deploy -t .aws-sam/build/template.yaml --stack-name "$stack" --resolve-s3 \
    --capabilities CAPABILITY_IAM --no-confirm-changeset --no-fail-on-empty-changeset \
    --parameter-overrides "StageName=$stage" "AuthMode=none" "DefaultParticipant=$participant" \
    "PublicBaseUrl=$1" "LogRetentionDays=1"
}

# The agent card, ListTasks (buffered integrations), SendMessage over JSON-RPC and GetTask over
# HTTP+JSON (streamed integrations) through the API, as a client would call them.
check() {
  local info base
  info=$(stack_info)
  [[ -n $info ]] || { log "no stack $stack"; exit 1; }
  base=$("$py" -c 'import json,sys; print(json.loads(sys.argv[1])["outputs"]["BaseUrl"])' "$info")
  log "checking $base"
  "$py" - "$base" "$participant" <<'EOF'
import json, sys, urllib.request, urllib.error
base, participant = sys.argv[1], sys.argv[2]
headers = {"A2A-Version": "1.0", "Content-Type": "application/json", "X-Participant-Id": participant}
failed = 0

def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.read()[:300]

def expect(name, ok, detail):
    global failed
    failed += 0 if ok else 1
    print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail}")

status, card = call("GET", "/.well-known/agent-card.json")
urls = [i.get("url") for i in card.get("supportedInterfaces", [])] if status == 200 else []
expect("agent card", status == 200 and all(u and u.startswith(base) for u in urls),
       f"HTTP {status}, interfaces {urls}")
status, listed = call("GET", "/tasks")
expect("ListTasks", status == 200, f"HTTP {status}")
status, sent = call("POST", "/", {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
    "message": {"messageId": "localstack-check", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}})
task = sent.get("result", {}).get("task", {}) if status == 200 and isinstance(sent, dict) else {}
expect("SendMessage (JSON-RPC)", bool(task.get("id")),
       f"HTTP {status}, task {task.get('id')} {task.get('status', {}).get('state')}")
if task.get("id"):
    status, got = call("GET", f"/tasks/{task['id']}")
    expect("GetTask (HTTP+JSON)", status == 200 and got.get("id") == task["id"],
           f"HTTP {status}, state {got.get('status', {}).get('state') if status == 200 else got}")
sys.exit(1 if failed else 0)
EOF
}

case ${1:-deploy} in
  deploy)
    wait_for_localstack
    log "sam build (cargo lambda build --release --arm64, per function)"
    sam build -t infra/template.yaml
    info=$(stack_info)
    api=
    if [[ -n $info ]]; then
      api=$("$py" -c 'import json,sys; print(json.loads(sys.argv[1])["resources"].get("Api",""))' "$info")
    fi
    if [[ -z $api ]]; then
      # The API's id, which LocalStack's URL carries, exists only once the stack does: deploy
      # once with the default base URL, then again with LocalStack's.
      log "first deploy of $stack"
      deploy ""
      api=$("$py" -c 'import json,sys; print(json.loads(sys.argv[1])["resources"]["Api"])' "$(stack_info)")
    fi
    host=${endpoint#*://}
    port=${host##*:}
    [[ $port == "$host" ]] && port=4566
    base="http://$api.execute-api.localhost.localstack.cloud:$port/$stage"
    log "deploying $stack with PublicBaseUrl=$base"
    deploy "$base"
    check
    ;;
  check) check ;;
  delete)
    info=$(stack_info)
    table=
    if [[ -n $info ]]; then
      table=$("$py" -c 'import json,sys; print(json.loads(sys.argv[1])["resources"].get("TasksTable",""))' "$info")
    fi
    sam delete --stack-name "$stack" --no-prompts
    if [[ -n $table ]]; then
      log "deleting the retained table $table"
      "$py" -c 'import sys,boto3; boto3.client("dynamodb").delete_table(TableName=sys.argv[1])' "$table"
    fi
    ;;
  *)
    sed -n '2,13p' "$0" >&2
    exit 2
    ;;
esac
