# The project's entry points. `make help` lists them.
.DEFAULT_GOAL := help
CARGO ?= cargo

.PHONY: help run test lint bench

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

run: ## Run the service locally on http://127.0.0.1:8080 (embedded store in ./data; Ctrl-C stops it)
	$(CARGO) run -p local-server --bin tiny-harness -- $(ARGS)

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
