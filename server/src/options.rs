//! The local server's flags. What the service itself reads has the same names as in the
//! functions (`--agent-id` ⇔ `TH_AGENT_ID`, see `assembly::names`) and is read by the
//! assembly's one parser ([`Options::settings`]); the listener's own flags are parsed here.

use std::net::SocketAddr;
use std::path::PathBuf;

use assembly::names;
use assembly::{ConfigError, FromLookup, Settings};
use clap::{Parser, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StoreKind {
    /// One crash-safe file under `--data-dir` (no AWS account needed).
    Embedded,
    /// The DynamoDB table `--table`; the endpoint and credentials come from the standard AWS
    /// environment (`AWS_ENDPOINT_URL_DYNAMODB` for DynamoDB Local).
    Dynamodb,
}

/// The service on one machine.
#[derive(Debug, Clone, Parser)]
#[command(name = "local-server", version, about)]
pub struct Options {
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, env = "TH_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// The public base URL the agent card advertises, an http(s) URL (default:
    /// http://<listen address>).
    #[arg(long, env = names::BASE_URL)]
    pub base_url: Option<String>,
    #[arg(long, env = "TH_STORE", value_enum, default_value = "embedded")]
    pub store: StoreKind,
    /// Where the embedded store keeps its file.
    #[arg(long, env = "TH_DATA_DIR", default_value = "./.data")]
    pub data_dir: PathBuf,
    /// The DynamoDB table (with `--store dynamodb`).
    #[arg(long, env = names::TABLE)]
    pub table: Option<String>,
    /// Create the DynamoDB table from `infra/template.yaml` if it does not exist (for
    /// DynamoDB Local; deployed tables come from the template itself).
    #[arg(long, env = "TH_CREATE_TABLE")]
    pub create_table: bool,
    /// The participant that plain A2A clients (which assert none) act as.
    #[arg(long, env = names::DEFAULT_PARTICIPANT)]
    pub default_participant: Option<String>,
    /// Allow push webhooks to private, loopback and link-local addresses (tests, local use).
    #[arg(long, env = names::ALLOW_PRIVATE_WEBHOOKS)]
    pub allow_private_webhooks: bool,
    /// The agent's participant id [default: tiny-harness].
    #[arg(long, env = names::AGENT_ID)]
    pub agent_id: Option<String>,
    /// The agent behind the tasks: `model` (the tool loop over the catalog's models) or
    /// `tck` (the A2A TCK's message id scenarios) [default: model].
    #[arg(long, env = names::AGENT_PROFILE, value_parser = ["model", "tck"])]
    pub agent_profile: Option<String>,
    /// The skills shipped with the service (a directory per skill, each with a SKILL.md)
    /// [default: skills].
    #[arg(long, env = names::SKILLS_DIR)]
    pub skills_dir: Option<String>,
    /// Model calls one run of the agent may make before the task fails [default: 50].
    #[arg(long, env = names::MAX_TURNS)]
    pub max_turns: Option<String>,
    /// A remote A2A agent `spawn_subtask` may delegate to: `ID=URL` of its agent card or
    /// base URL (repeatable).
    #[arg(long = "remote-agent", env = names::REMOTE_AGENTS, value_delimiter = ',')]
    pub remote_agents: Vec<String>,
    /// Seconds a remote agent may go without answering a relay (its card, a message, a
    /// subscription) before the relayed sub-task fails as lost [default: 300].
    #[arg(long, env = names::REMOTE_LOST_AFTER_SECS)]
    pub remote_lost_after_secs: Option<String>,
    /// The operator's instructions (the system prompt's first part) from a file [default:
    /// the service's own; see docs/agent.md].
    #[arg(long, env = names::INSTRUCTIONS_FILE)]
    pub instructions_file: Option<String>,
    /// The operator's instructions as text (instead of --instructions-file).
    #[arg(long, env = names::INSTRUCTIONS)]
    pub instructions: Option<String>,
    /// Tokens (input and output) one task may spend in all; overrides the catalog's
    /// `task_token_budget` [default: the catalog's, else unbounded].
    #[arg(long, env = names::TASK_TOKEN_BUDGET)]
    pub task_token_budget: Option<String>,
    /// Seconds throttled, unavailable or timed-out model calls are retried, from the first
    /// attempt [default: 60].
    #[arg(long, env = names::MODEL_RETRY_DEADLINE_SECS)]
    pub model_retry_deadline_secs: Option<String>,
    /// The lifetime of a runner's lease: how long a task whose runner died waits before
    /// another takes it over [default: 30].
    #[arg(long, env = names::LEASE_TTL_SECS)]
    pub lease_ttl_secs: Option<String>,
    /// How often the sweeper looks for expired leases (tasks whose runner died).
    #[arg(long, env = "TH_SWEEP_INTERVAL_SECS", default_value_t = 10)]
    pub sweep_interval_secs: u64,
    /// The model catalog file (JSON: `default_model` and `models[]`, see README); default:
    /// the offline `echo` model only.
    #[arg(long, env = names::MODEL_CATALOG, conflicts_with = "model_catalog_json")]
    pub model_catalog: Option<String>,
    /// The model catalog as JSON text (instead of `--model-catalog`'s file).
    #[arg(long, env = names::MODEL_CATALOG_JSON)]
    pub model_catalog_json: Option<String>,
    /// Seconds a client has to send a request's headers, from their first byte (a new
    /// connection: from when it is accepted); past it the connection is closed.
    #[arg(long, env = "TH_HEADER_TIMEOUT_SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_secs: u64,
    /// Seconds a client has to send a request's whole body, from the end of its headers;
    /// past it the request gets 408 and the connection is closed.
    #[arg(long, env = "TH_BODY_TIMEOUT_SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout_secs: u64,
    /// Seconds a kept-alive connection may wait for its next request before it is closed.
    /// A response still being sent (an SSE stream) is not idle.
    #[arg(long, env = "TH_IDLE_TIMEOUT_SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_secs: u64,
    /// Connections served at once; further ones wait in the listen backlog until one closes.
    #[arg(long, env = "TH_MAX_CONNECTIONS", default_value_t = 512,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Requests per second per caller (client address; every loopback client is 127.0.0.1),
    /// refused past it with 429 and `Retry-After`. Off by default.
    #[arg(long, env = names::RATE_LIMIT)]
    pub rate_limit: Option<String>,
    /// Requests a caller may send at once before the rate applies (default: one second's
    /// worth, at least 1).
    #[arg(long, env = names::RATE_LIMIT_BURST)]
    pub rate_limit_burst: Option<String>,
    /// Days a task in a terminal state is kept after it reached that state (a sub-task also
    /// until its parent is gone), then purged in the background; unset or 0: forever.
    #[arg(long, env = names::RETENTION_DAYS)]
    pub retention_days: Option<String>,
    /// Record metrics and serve them at `GET /metrics` (Prometheus text format). Off by
    /// default: recording then costs nothing.
    #[arg(long, env = names::METRICS)]
    pub metrics: bool,
    /// Export spans (requests, turns, model, tool and store calls) to this OTLP/HTTP
    /// collector, e.g. http://127.0.0.1:4318 (`/v1/traces` is added). Off by default.
    #[arg(long, env = names::OTLP_ENDPOINT)]
    pub otlp_endpoint: Option<String>,
}

impl Options {
    /// The service's settings, read by the same rules as in the functions. An old variable
    /// name the local server read is an error naming the new one.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        assembly::refuse_renamed(assembly::settings::var, |r| r.local_server).map_err(explain)?;
        Settings::from_lookup(|name| self.value_of(name)).map_err(explain)
    }

    /// The value a shared setting has here (its flag, or its variable through clap).
    fn value_of(&self, name: &str) -> Option<String> {
        let value = match name {
            names::BASE_URL => self.base_url.clone(),
            names::TABLE => self.table.clone(),
            names::DEFAULT_PARTICIPANT => self.default_participant.clone(),
            names::ALLOW_PRIVATE_WEBHOOKS => self.allow_private_webhooks.then(|| "true".into()),
            names::AGENT_ID => self.agent_id.clone(),
            names::AGENT_PROFILE => self.agent_profile.clone(),
            names::MODEL_CATALOG => self.model_catalog.clone(),
            names::MODEL_CATALOG_JSON => self.model_catalog_json.clone(),
            names::SKILLS_DIR => self.skills_dir.clone(),
            names::REMOTE_AGENTS => Some(self.remote_agents.join(",")),
            names::MAX_TURNS => self.max_turns.clone(),
            names::REMOTE_LOST_AFTER_SECS => self.remote_lost_after_secs.clone(),
            names::LEASE_TTL_SECS => self.lease_ttl_secs.clone(),
            names::INSTRUCTIONS_FILE => self.instructions_file.clone(),
            names::INSTRUCTIONS => self.instructions.clone(),
            names::TASK_TOKEN_BUDGET => self.task_token_budget.clone(),
            names::MODEL_RETRY_DEADLINE_SECS => self.model_retry_deadline_secs.clone(),
            names::RATE_LIMIT => self.rate_limit.clone(),
            names::RATE_LIMIT_BURST => self.rate_limit_burst.clone(),
            names::RETENTION_DAYS => self.retention_days.clone(),
            names::METRICS => self.metrics.then(|| "true".into()),
            names::OTLP_ENDPOINT => self.otlp_endpoint.clone(),
            _ => None,
        };
        value.filter(|v| !v.trim().is_empty())
    }
}

/// The error with the flag that sets its variable, if there is one.
fn explain(error: ConfigError) -> anyhow::Error {
    match names::flag(error.variable) {
        Some(flag) => anyhow::anyhow!("{flag} ({}): {}", error.variable, error.reason),
        None => anyhow::anyhow!("{error}"),
    }
}
