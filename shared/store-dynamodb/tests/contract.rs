//! The store contract suite against the DynamoDB adapter, each test on a fresh table made
//! from `infra/template.yaml` on the endpoint from the environment (`make test` starts
//! DynamoDB Local for it; without an endpoint every test fails and says so).

mod common;

task_store::contract_suite!(common::fresh_store());
