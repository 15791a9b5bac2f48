# The project's entry points. `make help` lists them.
.DEFAULT_GOAL := help
CARGO ?= cargo

.PHONY: help test lint bench

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

test: ## Run every test suite (unit, property and integration)
	$(CARGO) test --workspace --all-targets

lint: ## cargo fmt --check and clippy with warnings denied
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench: ## Criterion benchmarks of the core (figures in docs/performance.md)
	$(CARGO) bench -p task-core --bench core
