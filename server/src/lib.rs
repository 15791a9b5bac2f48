//! The local server: configuration, the store it opens, and the HTTP listener that mounts
//! the protocol bindings (`a2a-http`) over the service (`a2a-service`).

pub mod allocator;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use a2a_http::{Body, Caller, HttpConfig};
use a2a_service::push::{PushDispatcher, PushOptions, PushSender, WebhookPolicy};
use a2a_service::{
    Agent, EventListener, ModelAgent, ModelAgentConfig, Service, ServiceConfig, TckAgent,
};
use anyhow::Context;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use http_body_util::BodyExt;
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
            http: HttpConfig::default(),
        });

        let router = axum::Router::new().fallback(serve_request).with_state(app);
        let (shutdown, mut stop) = tokio::sync::watch::channel(false);
        let serve = tokio::spawn(async move {
            let stopped = async move {
                let _ = stop.wait_for(|s| *s).await;
            };
            if let Err(err) = axum::serve(listener, router)
                .with_graceful_shutdown(stopped)
                .await
            {
                tracing::error!(%err, "server stopped");
            }
        });
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

/// Every request goes to the bindings, which route it.
async fn serve_request(State(app): State<Arc<App>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes: Bytes = match http_body_util::Limited::new(body, MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return Response::builder()
                .status(http::StatusCode::PAYLOAD_TOO_LARGE)
                .header(http::header::CONTENT_TYPE, "text/plain")
                .body(axum::body::Body::from("request too large"))
                .unwrap_or_default();
        }
    };
    let response = a2a_http::handle(
        &app.service,
        &app.http,
        http::Request::from_parts(parts, bytes),
        Caller::anonymous(),
    )
    .await;
    response.map(|body: Body| axum::body::Body::new(body))
}
