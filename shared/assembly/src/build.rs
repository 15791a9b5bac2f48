//! The service built from [`Settings`], the same way on both hosts: the agent (and its model
//! providers), the service configuration, the push sender.

use std::sync::Arc;

use a2a_service::push::{PushOptions, PushSender, WebhookPolicy};
use a2a_service::{
    Agent, EventListener, ModelAgent, ModelAgentConfig, Service, ServiceConfig, TckAgent,
};
use task_core::commands::ProviderKind;
use task_store::Store;

use crate::settings::{AgentProfile, Settings};

/// Why the service could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum AssemblyError {
    #[error("model providers: {0}")]
    Models(#[from] models::ModelError),
    #[error("push client: {0}")]
    Push(String),
}

/// The agent `settings` choose: the model agent over the catalog, with the network model
/// providers (OpenAI-compatible endpoints; Bedrock over `aws`, or the standard AWS
/// environment when `None`), or the TCK's.
pub async fn agent(
    settings: &Settings,
    aws: Option<&aws_config::SdkConfig>,
) -> Result<Arc<dyn Agent>, AssemblyError> {
    if settings.agent_profile == AgentProfile::Tck {
        return Ok(Arc::new(TckAgent::new()));
    }
    let mut setup = model_agent_config(settings);
    // OpenAI-compatible models read their keys from the environment at each call.
    setup.models = setup.models.with_openai()?;
    // Bedrock's credentials and region are looked up only when the catalog has a Bedrock
    // model, so that an offline start asks nothing of AWS.
    if setup.catalog.uses(ProviderKind::Bedrock) {
        let sdk = match aws {
            Some(sdk) => sdk.clone(),
            None => store_dynamodb::sdk_config().await,
        };
        setup.models = setup.models.with_bedrock(&sdk);
    }
    Ok(Arc::new(ModelAgent::new(setup)))
}

/// The agent `settings` choose, with the offline model providers only (tests).
pub fn offline_agent(settings: &Settings) -> Arc<dyn Agent> {
    match settings.agent_profile {
        AgentProfile::Model => Arc::new(ModelAgent::new(model_agent_config(settings))),
        AgentProfile::Tck => Arc::new(TckAgent::new()),
    }
}

/// The model agent's setup over the offline providers: the catalog, the skills shipped with
/// the service, the remote agents and how long one may go without answering, the turn limit,
/// the operator's instructions, the token budget and how long model failures are retried.
fn model_agent_config(settings: &Settings) -> ModelAgentConfig {
    let mut setup = ModelAgentConfig::for_catalog(settings.catalog.clone());
    setup.skills = Arc::new(a2a_service::config::load_skills(&settings.skills_dir));
    setup.remote_agents = settings.remote_agents.clone();
    setup.max_turns = settings.max_turns;
    setup.remote_lost_after = settings.remote_lost_after;
    if let Some(instructions) = &settings.instructions {
        setup.instructions.clone_from(instructions);
    }
    if settings.task_token_budget.is_some() {
        setup.token_budget = settings.task_token_budget;
    }
    if let Some(deadline) = settings.model_retry_deadline {
        setup.models = setup
            .models
            .with_retry(models::RetryPolicy::with_deadline(deadline));
    }
    setup
}

/// What the host adds to the service: the URL it is reached at, its name in lease owners,
/// and who hears its task events.
#[derive(Default)]
pub struct HostParts {
    /// The public base URL (the settings' `base_url`, or the host's default).
    pub base_url: String,
    /// Names this process in lease owners (diagnostics); `None`: the service's default.
    pub instance_id: Option<String>,
    /// The push dispatcher of the local server; the functions have none (the DynamoDB
    /// stream feeds their notifier).
    pub listener: Option<Arc<dyn EventListener>>,
}

/// The service configuration of `settings` on this host.
pub fn service_config(settings: &Settings, host: &HostParts) -> ServiceConfig {
    let mut config = ServiceConfig::local(host.base_url.clone());
    config.agent_id = settings.agent_id.clone();
    config.default_participant = settings.default_participant.clone();
    config.allow_private_webhooks = settings.allow_private_webhooks;
    config.catalog = settings.catalog.clone();
    config.lease_ttl = settings.lease_ttl;
    if let Some(instance_id) = &host.instance_id {
        config.instance_id = instance_id.clone();
    }
    config
}

/// The service over `store` with `agent`.
pub fn service(
    settings: &Settings,
    store: Arc<dyn Store>,
    agent: Arc<dyn Agent>,
    host: HostParts,
) -> Service {
    let config = service_config(settings, &host);
    Service::new(store, config, agent, host.listener)
}

/// The push sender: deliveries apply the same webhook policy as config creation.
pub fn push_sender(settings: &Settings) -> Result<PushSender, AssemblyError> {
    PushSender::new(PushOptions {
        policy: WebhookPolicy {
            allow_private: settings.allow_private_webhooks,
        },
        ..PushOptions::default()
    })
    .map_err(|e| AssemblyError::Push(e.to_string()))
}
