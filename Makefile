# The project's entry points. `make help` lists them.
.DEFAULT_GOAL := help
CARGO ?= cargo

.PHONY: help run test lint bench interop tck tck-functions bench-load lambda-e2e infra infra-build lambda-init

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

run: ## Run the service locally on http://127.0.0.1:8080 (embedded store in ./.data; Ctrl-C stops it)
	$(CARGO) run --release --bin local-server -- $(ARGS)

# The emulators run the tests in a private network namespace that reaches only loopback,
# so everything is built first and the tests run offline.
test: ## Every suite: unit, property, and the store contract on the embedded store, DynamoDB Local and LocalStack
	$(CARGO) test --workspace --all-targets --no-run
	localstack/dynamodb-local.sh run -- $(CARGO) test --workspace --all-targets --offline
	localstack/localstack.sh run -- $(CARGO) test -p store-dynamodb --test contract --offline

lint: ## cargo fmt --check and clippy with warnings denied
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench: ## Criterion benchmarks of the core (figures in docs/performance.md)
	$(CARGO) bench -p task-core --bench core

# Builds target/debug/local-server with the same command as `make test`, so that after it
# nothing is rebuilt (`cargo build -p local-server` resolves other features and rebuilds
# about a hundred crates).
interop: ## The official A2A Python SDK client (a2a-sdk 1.3.0) against the local server, JSON-RPC and HTTP+JSON
	$(CARGO) test --workspace --all-targets --no-run
	tests/interop/run.sh

tck: ## The A2A TCK (../shared/tools/a2a-tck) against the local server, MUST level, both transports; only its known defects may fail
	$(CARGO) test --workspace --all-targets --no-run
	tests/tck/run.sh

# Builds every member's binaries as `make lambda-e2e` does (so after it nothing is rebuilt).
tck-functions: ## The A2A TCK against the Lambda functions under cargo lambda watch over DynamoDB Local, with the stream poller; only its known defects may fail
	tests/tck/run.sh --functions

lambda-e2e: ## The real Lambda function binaries under cargo lambda watch over DynamoDB Local, with the stream poller (tests/lambda/run.sh)
	tests/lambda/run.sh

infra: ## cfn-lint and sam validate --lint on infra/template.yaml
	tests/infra/run.sh

infra-build: ## The same, then every function built for Lambda (cargo lambda build --profile release-lambda --arm64, zipped sizes)
	tests/infra/run.sh --build

# Each function's Lambda build (profile release-lambda, for this machine), laid out as
# <function>/bootstrap.
lambda-init: ## Cold-start init time of every function, measured locally against a stub Runtime API (bench/lambda-init.py)
	$(CARGO) build --profile release-lambda -p functions --bins
	@for f in $$(sed -n '/^\[\[bin\]\]/{n;s/^name = "\(.*\)"/\1/p}' functions/Cargo.toml); do \
	  mkdir -p target/lambda-host/$$f && ln -sfn ../../release-lambda/$$f target/lambda-host/$$f/bootstrap; done
	bench/lambda-init.py target/lambda-host $(ARGS)

bench-load: ## Load test: the release server vs the a2a-sdk 1.3.0 echo server under oha (figures in docs/performance.md)
	bench/run.sh

.PHONY: fuzz
fuzz: ## Long fuzz run of both bindings' request decoding (PROPTEST_CASES per property, default 100000)
	PROPTEST_CASES=$${PROPTEST_CASES:-100000} $(CARGO) test -p a2a-http --test fuzz -- --nocapture
