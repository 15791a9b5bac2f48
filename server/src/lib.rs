//! The local server: configuration, the store it opens, and the HTTP listener that mounts
//! the protocol bindings (`a2a-http`) over the service (`a2a-service`).

pub mod allocator;
mod listener;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use a2a_http::{Body, Caller, HttpConfig, RateLimit, RateLimiter};
use a2a_service::push::{PushDispatcher, PushOptions, PushSender, WebhookPolicy};
use a2a_service::{
    Agent, EventListener, ModelAgent, ModelAgentConfig, Service, ServiceConfig, TckAgent,
};
use anyhow::Context;
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use store_dynamodb::DynamoDbStore;
use store_embedded::EmbeddedStore;
use task_core::commands::{ModelCatalog, ProviderKind};
use task_store::Store;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::info;

/// The largest request body accepted (a message may hold up to 1 MiB of parts; JSON and
/// base64 add to that).
const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StoreKind {
    /// One crash-safe file under `--data-dir` (no AWS account needed).
    Embedded,
    /// The DynamoDB table `--table`; the endpoint and credentials come from the standard AWS
    /// environment (`AWS_ENDPOINT_URL_DYNAMODB` for DynamoDB Local).
    Dynamodb,
}

/// The agent that works on the tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AgentProfile {
    /// The model agent: the tool loop over the catalog's models (the offline `echo` model
    /// by default, which answers with the text it got).
    Model,
    /// The A2A TCK's scenarios, chosen by the message id prefix (for conformance runs).
    Tck,
}

/// The service on one machine.
#[derive(Debug, Clone, Parser)]
#[command(name = "local-server", version, about)]
pub struct Options {
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, env = "TH_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// The public base URL the agent card advertises (default: http://<listen address>).
    #[arg(long, env = "TH_BASE_URL")]
    pub base_url: Option<String>,
    #[arg(long, env = "TH_STORE", value_enum, default_value = "embedded")]
    pub store: StoreKind,
    /// Where the embedded store keeps its file.
    #[arg(long, env = "TH_DATA_DIR", default_value = "./.data")]
    pub data_dir: PathBuf,
    /// The DynamoDB table (with `--store dynamodb`).
    #[arg(long, env = "TABLE_NAME")]
    pub table: Option<String>,
    /// Create the DynamoDB table from `infra/template.yaml` if it does not exist (for
    /// DynamoDB Local; deployed tables come from the template itself).
    #[arg(long, env = "TH_CREATE_TABLE")]
    pub create_table: bool,
    /// The participant that plain A2A clients (which assert none) act as.
    #[arg(long, env = "TH_DEFAULT_PARTICIPANT")]
    pub default_participant: Option<String>,
    /// Allow push webhooks to private, loopback and link-local addresses (tests, local use).
    #[arg(long, env = "TH_ALLOW_PRIVATE_WEBHOOKS")]
    pub allow_private_webhooks: bool,
    /// The agent's participant id.
    #[arg(long, env = "TH_AGENT_ID", default_value = "tiny-harness")]
    pub agent_id: String,
    /// The agent behind the tasks.
    #[arg(long, env = "TH_AGENT_PROFILE", value_enum, default_value = "model")]
    pub agent_profile: AgentProfile,
    /// The skills shipped with the service (a directory per skill, each with a SKILL.md).
    #[arg(long, env = "TH_SKILLS_DIR", default_value = "./skills")]
    pub skills_dir: PathBuf,
    /// Model calls one run of the agent may make before the task fails.
    #[arg(long, env = "TH_MAX_TURNS", default_value_t = 50)]
    pub max_turns: usize,
    /// A remote A2A agent `spawn_subtask` may delegate to: `ID=URL` of its agent card or
    /// base URL (repeatable).
    #[arg(long = "remote-agent", env = "TH_REMOTE_AGENTS", value_delimiter = ',')]
    pub remote_agents: Vec<String>,
    /// The lifetime of a runner's lease: how long a task whose runner died waits before
    /// another takes it over.
    #[arg(long, env = "TH_LEASE_TTL_SECS", default_value_t = 30)]
    pub lease_ttl_secs: u64,
    /// How often the sweeper looks for expired leases (tasks whose runner died).
    #[arg(long, env = "TH_SWEEP_INTERVAL_SECS", default_value_t = 10)]
    pub sweep_interval_secs: u64,
    /// The model catalog (JSON: `default_model` and `models[]`, see README); default: the
    /// offline `echo` model only.
    #[arg(long, env = "TH_MODEL_CATALOG")]
    pub model_catalog: Option<PathBuf>,
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
    #[arg(long, env = "TH_RATE_LIMIT", value_parser = parse_rate)]
    pub rate_limit: Option<f64>,
    /// Requests a caller may send at once before the rate applies (default: one second's
    /// worth, at least 1).
    #[arg(long, env = "TH_RATE_LIMIT_BURST", requires = "rate_limit",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit_burst: Option<u32>,
}

fn parse_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(rate),
        _ => Err("not a positive number of requests per second".to_owned()),
    }
}

impl Options {
    /// The rate limit the options ask for, if any.
    fn rate_limit(&self) -> anyhow::Result<Option<RateLimit>> {
        let Some(rate) = self.rate_limit else {
            return Ok(None);
        };
        let burst = self
            .rate_limit_burst
            .unwrap_or_else(|| RateLimit::default_burst(rate));
        RateLimit::new(rate, burst)
            .map(Some)
            .context("--rate-limit must be positive and --rate-limit-burst at least 1")
    }
}

pub struct Server {
    base_url: String,
    serve: JoinHandle<()>,
    shutdown: tokio::sync::watch::Sender<bool>,
    push: Arc<PushDispatcher>,
    sweeper: JoinHandle<()>,
}

struct App {
    service: Service,
    http: HttpConfig,
    body_timeout: Duration,
}

fn load_catalog(path: &std::path::Path) -> anyhow::Result<ModelCatalog> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the model catalog {}", path.display()))?;
    ModelCatalog::from_json(&text).with_context(|| format!("the model catalog {}", path.display()))
}

async fn open_store(options: &Options) -> anyhow::Result<Arc<dyn Store>> {
    Ok(match options.store {
        StoreKind::Embedded => {
            std::fs::create_dir_all(&options.data_dir)
                .with_context(|| format!("creating {}", options.data_dir.display()))?;
            let path = options.data_dir.join("tasks.redb");
            Arc::new(
                EmbeddedStore::open(&path)
                    .with_context(|| format!("opening {}", path.display()))?,
            )
        }
        StoreKind::Dynamodb => {
            let table = options
                .table
                .clone()
                .context("--store dynamodb needs --table (or TABLE_NAME)")?;
            let store = DynamoDbStore::from_env(table.clone()).await;
            if options.create_table {
                store_dynamodb::table::ensure_table(store.client(), &table)
                    .await
                    .with_context(|| format!("creating the table {table}"))?;
            }
            Arc::new(store)
        }
    })
}

impl Server {
    /// Opens the store, binds the listener and serves until [`Server::shutdown`].
    pub async fn start(options: Options) -> anyhow::Result<Self> {
        let catalog = match &options.model_catalog {
            Some(path) => load_catalog(path)?,
            None => ModelCatalog::echo_only(),
        };
        let rate_limit = options.rate_limit()?;
        let listener = TcpListener::bind(options.addr)
            .await
            .with_context(|| format!("binding {}", options.addr))?;
        let addr = listener.local_addr()?;
        let base_url = options
            .base_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}"));
        let store = open_store(&options).await?;

        // Deliveries apply the same webhook policy as config creation.
        let policy = WebhookPolicy {
            allow_private: options.allow_private_webhooks,
        };
        let sender = PushSender::new(PushOptions {
            policy,
            ..PushOptions::default()
        })
        .map_err(|e| anyhow::anyhow!("push client: {e}"))?;
        let push = Arc::new(
            PushDispatcher::new(store.clone(), Arc::new(sender))
                .map_err(|_| anyhow::anyhow!("no tokio runtime"))?,
        );
        let mut config = ServiceConfig::local(base_url.clone());
        config.agent_id = options.agent_id.clone();
        config.default_participant = options.default_participant.clone();
        config.allow_private_webhooks = options.allow_private_webhooks;
        config.catalog = catalog.clone();
        config.lease_ttl = Duration::from_secs(options.lease_ttl_secs.max(1));
        let remote_agents = a2a_service::config::parse_remote_agents(&options.remote_agents)
            .map_err(|e| anyhow::anyhow!("--remote-agent {e}"))?;
        let agent: Arc<dyn Agent> = match options.agent_profile {
            AgentProfile::Tck => Arc::new(TckAgent::new()),
            AgentProfile::Model => {
                let mut setup = ModelAgentConfig::for_catalog(catalog);
                // OpenAI-compatible models: keys are read from the environment at each
                // call. Bedrock's credentials and region are looked up only when the catalog
                // has a Bedrock model, so that an offline start asks nothing of AWS.
                setup.models = setup
                    .models
                    .with_openai()
                    .map_err(|e| anyhow::anyhow!("model providers: {e}"))?;
                if setup.catalog.uses(ProviderKind::Bedrock) {
                    setup.models = setup
                        .models
                        .with_bedrock(&store_dynamodb::sdk_config().await);
                }
                setup.skills = Arc::new(a2a_service::config::load_skills(&options.skills_dir));
                setup.remote_agents = remote_agents;
                setup.max_turns = options.max_turns;
                Arc::new(ModelAgent::new(setup))
            }
        };
        let listener_hook: Arc<dyn EventListener> = push.clone();
        let service = Service::new(store, config, agent, Some(listener_hook));
        // The sweeper: tasks whose runner died (an expired lease) are run again.
        let sweeper = {
            let runner = service.runner().clone();
            let every = Duration::from_secs(options.sweep_interval_secs.max(1));
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                loop {
                    tick.tick().await;
                    if let Err(err) = runner.sweep().await {
                        tracing::warn!(error = %err, "the sweeper could not list expired leases");
                    }
                }
            })
        };
        let app = Arc::new(App {
            service,
            http: HttpConfig {
                rate_limit: rate_limit.map(RateLimiter::new),
                ..HttpConfig::default()
            },
            body_timeout: Duration::from_secs(options.body_timeout_secs),
        });
        let limits = listener::Limits {
            header_timeout: Duration::from_secs(options.header_timeout_secs),
            idle_timeout: Duration::from_secs(options.idle_timeout_secs),
            max_connections: options.max_connections as usize,
        };
        let (shutdown, stop) = tokio::sync::watch::channel(false);
        let handler = move |request, peer| serve_request(app.clone(), request, peer);
        let serve = tokio::spawn(listener::serve(listener, limits, handler, stop));
        info!(%base_url, store = ?options.store, agent = ?options.agent_profile, "serving A2A");
        Ok(Self {
            base_url,
            serve,
            shutdown,
            push,
            sweeper,
        })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Stops accepting, lets open requests finish (bounded), drains push deliveries.
    pub async fn shutdown(self) {
        self.sweeper.abort();
        let _ = self.shutdown.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(10), self.serve).await;
        self.push.shutdown(Duration::from_secs(5)).await;
    }
}

/// Every request goes to the bindings, which route it; a caller over the rate limit is
/// refused before its body is read.
async fn serve_request(
    app: Arc<App>,
    request: Request<Incoming>,
    peer: SocketAddr,
) -> Response<Body> {
    let caller = Caller::anonymous().with_address(Some(peer.ip()));
    if let Some(refused) = a2a_http::over_rate_limit(&app.http, request.uri().path(), &caller) {
        return refused;
    }
    let (parts, body) = request.into_parts();
    let read = http_body_util::Limited::new(body, MAX_REQUEST_BYTES).collect();
    let bytes: Bytes = match tokio::time::timeout(app.body_timeout, read).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(_)) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "request too large"),
        Err(_) => {
            // The rest of the body may still be on its way: the connection cannot be reused.
            let mut response = plain(StatusCode::REQUEST_TIMEOUT, "request body timed out");
            response.headers_mut().insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
            return response;
        }
    };
    a2a_http::handle_admitted(
        &app.service,
        &app.http,
        http::Request::from_parts(parts, bytes),
        caller,
    )
    .await
}

/// A plain-text answer of the server itself (not of an A2A binding).
fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Body::Full(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    response
}
