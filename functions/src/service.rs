//! The service as every function builds it: the same configuration, the same agent.

use std::sync::Arc;

use a2a_service::{Agent, ModelAgent, ModelAgentConfig, Service, ServiceConfig, TckAgent};
use task_store::Store;

use crate::config::{AgentProfile, FunctionConfig};

pub fn service_config(config: &FunctionConfig) -> ServiceConfig {
    let mut service = ServiceConfig::local(config.base_url.clone());
    if let Some(agent_id) = &config.agent_id {
        service.agent_id = agent_id.clone();
    }
    service.default_participant = config.default_participant.clone();
    service.allow_private_webhooks = config.allow_private_webhooks;
    service.catalog = config.catalog.clone();
    service.lease_ttl = config.lease_ttl;
    // Names this execution environment in lease owners (diagnostics).
    service.instance_id = format!(
        "lambda-{}-{}",
        std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "local".to_owned()),
        std::process::id()
    );
    service
}

/// The model agent's setup over the offline providers: the catalog, the skills shipped
/// with the deployment, the remote agents, the turn limit.
fn model_agent_config(config: &FunctionConfig) -> ModelAgentConfig {
    let mut setup = ModelAgentConfig::for_catalog(config.catalog.clone());
    setup.skills = Arc::new(a2a_service::config::load_skills(&config.skills_dir));
    setup.remote_agents = config.remote_agents.clone();
    setup.max_turns = config.max_turns;
    setup
}

/// The agent of the functions: the model agent over the catalog, with the network providers
/// (Bedrock over `sdk`, OpenAI-compatible endpoints), or the TCK's.
pub fn agent(
    config: &FunctionConfig,
    sdk: &aws_config::SdkConfig,
) -> Result<Arc<dyn Agent>, models::ModelError> {
    Ok(match config.agent_profile {
        AgentProfile::Model => {
            let mut setup = model_agent_config(config);
            setup.models = setup.models.with_network_providers(sdk)?;
            Arc::new(ModelAgent::new(setup))
        }
        AgentProfile::Tck => Arc::new(TckAgent::new()),
    })
}

/// The agent without the network providers (tests, and the offline models).
pub fn offline_agent(config: &FunctionConfig) -> Arc<dyn Agent> {
    match config.agent_profile {
        AgentProfile::Model => Arc::new(ModelAgent::new(model_agent_config(config))),
        AgentProfile::Tck => Arc::new(TckAgent::new()),
    }
}

/// The service of the background functions (runner, sweeper) over `store`.
pub fn background(
    store: Arc<dyn Store>,
    config: &FunctionConfig,
    agent: Arc<dyn Agent>,
) -> Service {
    Service::new(store, service_config(config), agent, None)
}
