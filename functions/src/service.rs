//! The service as every function builds it, through the assembly: the same settings, the
//! same agent, named after the function in lease owners.

use std::sync::Arc;

use a2a_service::{Agent, Service};
use assembly::HostParts;
use task_store::Store;

use crate::config::FunctionConfig;

/// What a function adds to the service: the API's URL and its name in lease owners; no
/// event listener (the DynamoDB stream feeds the push notifier).
pub fn host_parts(config: &FunctionConfig) -> HostParts {
    HostParts {
        base_url: config.base_url.clone(),
        // Names this execution environment in lease owners (diagnostics).
        instance_id: Some(format!(
            "lambda-{}-{}",
            std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "local".to_owned()),
            std::process::id()
        )),
        listener: None,
    }
}

/// The service over `store` with `agent`.
pub fn service(store: Arc<dyn Store>, config: &FunctionConfig, agent: Arc<dyn Agent>) -> Service {
    assembly::service(&config.settings, store, agent, host_parts(config))
}
