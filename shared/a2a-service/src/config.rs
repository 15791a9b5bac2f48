//! What an operator configures; read once at start-up by `main` (the local server or a
//! Lambda function) and shared by every request.

use std::time::Duration;

use a2a::AgentCard;
use task_core::commands::ModelCatalog;

#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// The agent's participant id (kind `agent`, default role `assignee`).
    pub agent_id: String,
    /// The public base URL the agent card advertises for both bindings (no trailing slash).
    pub base_url: String,
    pub name: String,
    pub description: String,
    pub version: String,
    /// Clients that know nothing of the extension (a plain A2A client, the TCK) act as this
    /// participant when they assert none. `None`: such requests are refused.
    pub default_participant: Option<String>,
    /// Webhooks to private, loopback and link-local addresses are refused unless this is set.
    pub allow_private_webhooks: bool,
    pub catalog: ModelCatalog,
    /// An extended agent card for authenticated callers; `None`: not offered.
    pub extended_card: Option<AgentCard>,
    /// A run lease's lifetime; the runner renews it while it works.
    pub lease_ttl: Duration,
    /// How often streams poll the event log for new events.
    pub poll_interval: Duration,
    /// How long a blocking SendMessage waits for the task to settle before it answers with
    /// the task as it is.
    pub blocking_timeout: Duration,
    /// Names this process in lease owners (diagnostics).
    pub instance_id: String,
    /// The remote A2A agents sub-tasks may be delegated to: id → the agent's base URL (where
    /// `/.well-known/agent-card.json` is).
    pub remote_agents: std::collections::BTreeMap<String, String>,
}

impl ServiceConfig {
    /// Defaults for one machine: the echo model, loopback URL, no default participant.
    pub fn local(base_url: impl Into<String>) -> Self {
        Self {
            agent_id: "tiny-harness".to_owned(),
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            name: "tiny-harness".to_owned(),
            description:
                "A tiny agent harness: tasks, plans, participants, tools and skills over A2A"
                    .to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            default_participant: None,
            allow_private_webhooks: false,
            catalog: ModelCatalog::echo_only(),
            extended_card: None,
            lease_ttl: Duration::from_secs(30),
            poll_interval: Duration::from_millis(100),
            blocking_timeout: Duration::from_secs(60),
            instance_id: format!("local-{}", std::process::id()),
            remote_agents: std::collections::BTreeMap::new(),
        }
    }
}
