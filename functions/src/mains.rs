//! The `main` of each binary: the configuration read and the clients built once, at init,
//! through the assembly, then the Lambda runtime's loop over the invocations.

use std::sync::Arc;

use a2a_http::{Method, Serves};
use lambda_runtime::{LambdaEvent, service_fn};
use store_dynamodb::DynamoDbStore;

use crate::config::{FromLookup, FunctionConfig};
use crate::emf::Emf;
use crate::http::{self, App};
use crate::notifier::Notifier;
use crate::{authorizer, calls, retention, runner, service};

/// JSON logs for CloudWatch (one object per line; `RUST_LOG` filters, default `info`), and
/// the spans as X-Ray subsegments when Lambda runs the X-Ray daemon (active tracing).
pub fn init_tracing() {
    if let Err(error) =
        assembly::traces::install_tracing(&CloudWatchJson, &assembly::traces::function_export())
    {
        // Spans are not worth failing the function for: logs only.
        tracing_subscriber::fmt()
            .json()
            .with_current_span(false)
            .with_ansi(false)
            .without_time()
            .init();
        tracing::warn!(%error, "spans are not exported");
    }
}

/// The functions' log lines: JSON on stdout, without a time (CloudWatch stamps every line).
struct CloudWatchJson;

impl telemetry::traces::Logs for CloudWatchJson {
    fn layer<S>(&self) -> Box<dyn tracing_subscriber::Layer<S> + Send + Sync>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
    {
        Box::new(
            tracing_subscriber::fmt::layer()
                .json()
                .with_current_span(false)
                .with_ansi(false)
                .without_time(),
        )
    }
}

/// The trace an invocation's spans belong to: its X-Ray trace (`xray_trace_id`, as in
/// `_X_AMZN_TRACE_ID`) when X-Ray sampled it; `None` otherwise, and the request's own W3C
/// context (or the one a run request carries) is used instead.
pub(crate) fn invocation_trace(
    xray_trace_id: Option<&str>,
) -> Option<telemetry::traces::TraceContext> {
    xray_trace_id
        .and_then(telemetry::traces::TraceContext::from_xray)
        .filter(|context| context.sampled)
}

/// The SDK configuration (one for every client) and the store on the table.
async fn store(config: &FunctionConfig) -> (aws_config::SdkConfig, Arc<DynamoDbStore>) {
    let sdk = store_dynamodb::sdk_config().await;
    let dynamodb = aws_sdk_dynamodb::config::Builder::from(&sdk)
        .interceptor(calls::DynamoDbCallLog::from_env())
        .build();
    let client = aws_sdk_dynamodb::Client::from_conf(dynamodb);
    (
        sdk,
        // The agent never lists: its index entries and counts are not written.
        Arc::new(
            DynamoDbStore::new(client, config.table.clone())
                .without_listing_for(config.settings.agent_id.clone()),
        ),
    )
}

/// The `main` of an HTTP function: configuration, clients (through the assembly), then invocations until the
/// runtime stops. Errors here are init errors (reported to Lambda as such).
pub async fn run_http(serves: Serves) -> Result<(), lambda_runtime::Error> {
    init_tracing();
    let config = FunctionConfig::from_env()?;
    let emf = Emf::install(&config.metrics_namespace);
    let (sdk, store) = store(&config).await;
    let agent = assembly::agent(&config.settings, Some(&sdk)).await?;
    let mut app = App::with_agent(store, &config, serves, agent);
    if let Some(dispatcher) = runner::dispatcher(&sdk, config.runner_function.as_deref()) {
        app = app.with_dispatcher(dispatcher);
    }
    tracing::info!(?serves, table = %config.table, auth = ?config.auth, runner = ?config.runner_function, "function ready");
    if serves.may_stream() {
        http::run_streaming(app, emf).await
    } else {
        http::run_buffered(app, emf).await
    }
}

/// The `main` of a REST function.
pub async fn run_rest(method: Method) -> Result<(), lambda_runtime::Error> {
    run_http(Serves::Rest(method)).await
}

/// The `main` of the push notifier.
pub async fn run_notifier() -> Result<(), lambda_runtime::Error> {
    init_tracing();
    let config = FunctionConfig::from_env()?;
    let emf = Emf::install(&config.metrics_namespace);
    let sender = assembly::push_sender(&config.settings)?;
    let (_, store) = store(&config).await;
    let notifier = Arc::new(Notifier::new(store, Arc::new(sender)));
    tracing::info!(table = %config.table, "push notifier ready");
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<aws_lambda_events::event::dynamodb::Event>| {
            let notifier = Arc::clone(&notifier);
            let emf = Arc::clone(&emf);
            let trace = invocation_trace(event.context.xray_trace_id.as_deref());
            async move {
                let handled = telemetry::traces::scope(trace, notifier.handle(&event.payload));
                let failures = emf.around(handled).await;
                Ok::<_, lambda_runtime::Error>(failures)
            }
        },
    ))
    .await
}

/// The service a background function runs tasks with (no HTTP in front).
async fn background_service(
    config: &FunctionConfig,
) -> Result<a2a_service::Service, lambda_runtime::Error> {
    let (sdk, store) = store(config).await;
    let agent = assembly::agent(&config.settings, Some(&sdk)).await?;
    tracing::info!(table = %config.table, "function ready");
    Ok(service::service(store, config, agent))
}

/// The `main` of a background function: the service made once, then each invocation's
/// event handled by `handle` with it, its metrics printed when it ends.
async fn run_background<A, R, Fut>(
    handle: impl Fn(Arc<a2a_service::Service>, A) -> Fut,
) -> Result<(), lambda_runtime::Error>
where
    A: for<'de> serde::Deserialize<'de>,
    R: serde::Serialize,
    Fut: Future<Output = Result<R, lambda_runtime::Error>>,
{
    init_tracing();
    let config = FunctionConfig::from_env()?;
    let emf = Emf::install(&config.metrics_namespace);
    let service = Arc::new(background_service(&config).await?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<A>| {
        let trace = invocation_trace(event.context.xray_trace_id.as_deref());
        let handled = telemetry::traces::scope(trace, handle(Arc::clone(&service), event.payload));
        let emf = Arc::clone(&emf);
        async move { emf.around(handled).await }
    }))
    .await
}

/// The `main` of the runner: one handed-off run per invocation (see [`runner`]).
pub async fn run_runner() -> Result<(), lambda_runtime::Error> {
    run_background(|service, request: runner::RunRequest| async move {
        Ok(runner::run_task(service.runner(), request).await)
    })
    .await
}

/// The `main` of the sweeper: on a schedule, the tasks whose runner died (see [`runner`]);
/// on its daily schedule, the retention pass (see [`retention`]).
pub async fn run_sweeper() -> Result<(), lambda_runtime::Error> {
    init_tracing();
    let config = FunctionConfig::from_env()?;
    let (sdk, store) = store(&config).await;
    let agent = assembly::agent(&config.settings, Some(&sdk)).await?;
    let keep = config.settings.retention;
    let service = Arc::new(service::service(store.clone(), &config, agent));
    tracing::info!(table = %config.table, "function ready");
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        let (service, store) = (Arc::clone(&service), Arc::clone(&store));
        async move {
            // A failed pass is retried by the next tick; the error names only the store.
            let failed = |e: task_store::StoreError| lambda_runtime::Error::from(e.to_string());
            if retention::is_retention_pass(&event.payload) {
                let report = retention::retention_pass(&*store, keep)
                    .await
                    .map_err(failed)?;
                return Ok(serde_json::to_value(report)?);
            }
            let report = runner::sweep(service.runner()).await.map_err(failed)?;
            Ok::<_, lambda_runtime::Error>(serde_json::to_value(report)?)
        }
    }))
    .await
}

/// The `main` of the JWT authorizer: an API Gateway REST API TOKEN authorizer whose verified
/// subject becomes the principal (see [`authorizer`]).
pub async fn run_authorizer() -> Result<(), lambda_runtime::Error> {
    init_tracing();
    let config = authorizer::AuthorizerConfig::from_env()?;
    let authorizer = Arc::new(authorizer::Authorizer::new(config)?);
    let config = authorizer.config();
    tracing::info!(
        issuer = %config.issuer,
        audience = %config.audience,
        jwks = ?config.jwks_url.as_ref().map(|url| url.as_str()),
        algorithms = ?config.algorithms,
        "authorizer ready"
    );
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<
            lambda_http::aws_lambda_events::apigw::ApiGatewayCustomAuthorizerRequest,
        >| {
            let authorizer = Arc::clone(&authorizer);
            async move { authorizer.handle(&event.payload).await }
        },
    ))
    .await
}

#[cfg(test)]
mod tests {
    use super::invocation_trace;

    /// An invocation's spans join its X-Ray trace only when X-Ray sampled it.
    #[test]
    fn the_invocations_trace_is_its_sampled_x_ray_trace() {
        let sampled = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        let context = invocation_trace(Some(sampled)).expect("sampled");
        assert_eq!(context.trace_id_hex(), "5759e988bd862e3fe1be46a994272793");
        assert_eq!(
            context.traceparent(),
            "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
        );
        assert_eq!(
            invocation_trace(Some(&sampled.replace("Sampled=1", "Sampled=0"))),
            None
        );
        assert_eq!(invocation_trace(None), None);
    }
}
