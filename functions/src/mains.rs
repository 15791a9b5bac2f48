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

/// JSON logs for CloudWatch (one object per line; `RUST_LOG` filters, default `info`).
pub fn init_tracing() {
    tracing_subscriber::fmt()
        .json()
        .with_current_span(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_ansi(false)
        .without_time() // CloudWatch stamps every line
        .init();
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
            async move {
                let failures = emf.around(notifier.handle(&event.payload)).await;
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
        let handled = handle(Arc::clone(&service), event.payload);
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
