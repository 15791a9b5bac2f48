//! The server: the store it opens, the service the assembly builds over it with the push
//! dispatcher, the sweeper, and the listener that hands every request to the bindings.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use a2a_http::{Body, Caller, HttpConfig, RateLimiter};
use a2a_service::Service;
use a2a_service::push::PushDispatcher;
use anyhow::Context;
use assembly::{HostParts, Settings};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use store_dynamodb::DynamoDbStore;
use store_embedded::EmbeddedStore;
use task_store::Store;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::info;

use crate::listener;
use crate::options::{Options, StoreKind};

/// The largest request body accepted (a message may hold up to 1 MiB of parts; JSON and
/// base64 add to that).
const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

pub struct Server {
    base_url: String,
    serve: JoinHandle<()>,
    shutdown: tokio::sync::watch::Sender<bool>,
    push: Arc<PushDispatcher>,
    sweeper: JoinHandle<()>,
    /// The retention purge and the backup trigger, when running.
    upkeep: Vec<JoinHandle<()>>,
}

struct App {
    service: Service,
    http: HttpConfig,
    console: web_console::Console,
    body_timeout: Duration,
    /// `--metrics`: `GET /metrics` is served.
    metrics: bool,
}

/// The store, and the embedded one again when it is that (for its backups).
async fn open_store(
    options: &Options,
    settings: &Settings,
) -> anyhow::Result<(Arc<dyn Store>, Option<EmbeddedStore>)> {
    Ok(match options.store {
        StoreKind::Embedded => {
            std::fs::create_dir_all(&options.data_dir)
                .with_context(|| format!("creating {}", options.data_dir.display()))?;
            let path = options.data_dir.join("tasks.redb");
            // The agent never lists: its index entries and counts are not written.
            let store = EmbeddedStore::open(&path)
                .with_context(|| format!("opening {}", path.display()))?
                .without_listing_for(settings.agent_id.as_str());
            (Arc::new(store.clone()), Some(store))
        }
        StoreKind::Dynamodb => {
            let table = settings
                .table
                .clone()
                .context("--store dynamodb needs --table (or TH_TABLE)")?;
            // The agent never lists: its index entries and counts are not written.
            let store = DynamoDbStore::from_env(table.clone())
                .await
                .without_listing_for(settings.agent_id.clone());
            if options.create_table {
                store_dynamodb::table::ensure_table(store.client(), &table)
                    .await
                    .with_context(|| format!("creating the table {table}"))?;
            }
            (Arc::new(store), None)
        }
    })
}

impl Server {
    /// Opens the store, binds the listener and serves until [`Server::shutdown`].
    pub async fn start(options: Options) -> anyhow::Result<Self> {
        let settings = options.settings()?;
        if settings.metrics {
            crate::metrics::install();
        }
        let listener = TcpListener::bind(options.addr)
            .await
            .with_context(|| format!("binding {}", options.addr))?;
        let addr = listener.local_addr()?;
        let base_url = settings
            .base_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}"));
        let (store, embedded) = open_store(&options, &settings).await?;
        let mut upkeep = Vec::new();
        if let Some(keep) = settings.retention {
            upkeep.push(crate::maintenance::spawn_purge(store.clone(), keep));
        }
        upkeep.push(crate::maintenance::spawn_backups(
            embedded,
            options.data_dir.clone(),
        )?);
        let push = Arc::new(
            PushDispatcher::new(store.clone(), Arc::new(assembly::push_sender(&settings)?))
                .map_err(|_| anyhow::anyhow!("no tokio runtime"))?,
        );
        let agent = assembly::agent(&settings, None).await?;
        let host = HostParts {
            base_url: base_url.clone(),
            instance_id: None,
            listener: Some(push.clone()),
        };
        let service = assembly::service(&settings, store, agent, host);
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
            console: crate::console::console(&settings),
            service,
            http: HttpConfig {
                rate_limit: settings.rate_limit.map(RateLimiter::new),
                ..HttpConfig::default()
            },
            body_timeout: Duration::from_secs(options.body_timeout_secs),
            metrics: settings.metrics,
        });
        let limits = listener::Limits {
            header_timeout: Duration::from_secs(options.header_timeout_secs),
            idle_timeout: Duration::from_secs(options.idle_timeout_secs),
            max_connections: options.max_connections as usize,
        };
        let (shutdown, stop) = tokio::sync::watch::channel(false);
        let handler = move |request, peer| serve_request(app.clone(), request, peer);
        let serve = tokio::spawn(listener::serve(listener, limits, handler, stop));
        info!(%base_url, store = ?options.store, agent = ?settings.agent_profile, "serving A2A");
        Ok(Self {
            base_url,
            serve,
            shutdown,
            push,
            sweeper,
            upkeep,
        })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Stops accepting, lets open requests finish (bounded), drains push deliveries.
    pub async fn shutdown(self) {
        self.sweeper.abort();
        for task in &self.upkeep {
            task.abort();
        }
        let _ = self.shutdown.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(10), self.serve).await;
        self.push.shutdown(Duration::from_secs(5)).await;
    }
}

/// Every request goes to the bindings, which route it, except the probes (`/healthz`,
/// `/readyz`), the metrics (`/metrics`, with `--metrics`) and the console's (`/ui/`); a
/// caller over the rate limit is refused before its body is read.
async fn serve_request(
    app: Arc<App>,
    request: Request<Incoming>,
    peer: SocketAddr,
) -> Response<Body> {
    // Probes (an orchestrator's, a load balancer's) are not rate-limited.
    if let Some(probe) = crate::health::probe(&request) {
        return crate::health::answer(&app.service, probe).await;
    }
    if app.metrics && crate::metrics::is_scrape(&request) {
        return crate::metrics::answer();
    }
    let caller = Caller::anonymous().with_address(Some(peer.ip()));
    if let Some(refused) = a2a_http::over_rate_limit(&app.http, request.uri().path(), &caller) {
        return refused;
    }
    if let Some(page) = crate::console::serve(&app.console, &request) {
        return page;
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
