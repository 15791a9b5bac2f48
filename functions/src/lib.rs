//! The Lambda functions: one per A2A method behind its REST route (one, `task`, for the three
//! methods on `/tasks/{id}`, which API Gateway sees as one resource), the JSON-RPC endpoint
//! (every method), the agent card, the push notifier, the runner, the sweeper and the JWT
//! authorizer of a REST API deployment, and the web console. Each binary in `src/bin/` is one
//! call into this library ([`mains`]), which reads the configuration from the environment
//! (the `TH_*` settings, through the `assembly` crate, as the local server does) and builds
//! the clients once, at init; every invocation then runs the shared handlers of `a2a-http`
//! over the DynamoDB store, exactly as the local server runs them over its own store.

pub mod authorizer;
pub mod calls;
pub mod config;
pub mod console;
pub mod emf;
pub mod http;
pub mod identity;
pub mod mains;
pub mod notifier;
pub mod retention;
pub mod runner;
mod service;

pub use config::{AuthMode, FromLookup, FunctionConfig};
pub use console::run_console;
pub use http::App;
pub use mains::{
    init_tracing, run_authorizer, run_http, run_notifier, run_rest, run_runner, run_sweeper,
};
pub use notifier::Notifier;
