//! `local-server`: the whole service on one machine. Every A2A method (JSON-RPC and REST) and
//! the agent card on one HTTP listener, the same handlers the Lambda functions run, over the
//! embedded store (default) or a DynamoDB table.

use anyhow::Context;
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use local_server::{Options, Server};

// Many small allocations per request (JSON documents, tasks, events): mimalloc serves them
// with far less work than glibc's malloc under concurrency (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    local_server::allocator::keep_freed_memory_longer();
    let options = Options::parse();
    // A setting the assembly refuses is a usage error (exit 2), like a flag clap refuses.
    let settings = match options.settings() {
        Ok(settings) => settings,
        Err(error) => Options::command()
            .error(ErrorKind::ValueValidation, format!("{error:#}"))
            .exit(),
    };
    // Structured logs: one JSON object per line on stderr (RUST_LOG filters, default info);
    // spans exported over OTLP when --otlp-endpoint is set.
    let tracing =
        assembly::traces::install_tracing(&StderrJson, &assembly::traces::local_export(&settings))
            .context("setting up the trace exporter")?;
    let server = Server::start(options)
        .await
        .context("starting the server")?;
    // The first line on stdout says where to reach it (tests wait for it).
    println!("listening on {}", server.base_url());
    shutdown_signal().await?;
    tracing::info!("shutting down: finishing open requests and push deliveries");
    server.shutdown().await;
    // The spans still batched go out before the process ends.
    tokio::task::spawn_blocking(move || tracing.shutdown())
        .await
        .context("flushing the spans")?;
    Ok(())
}

/// The server's log lines: JSON on stderr.
struct StderrJson;

impl telemetry::traces::Logs for StderrJson {
    fn layer<S>(&self) -> Box<dyn tracing_subscriber::Layer<S> + Send + Sync>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
    {
        Box::new(
            tracing_subscriber::fmt::layer()
                .json()
                .with_current_span(false)
                .with_writer(std::io::stderr),
        )
    }
}

/// Ctrl-C (SIGINT) or SIGTERM (what process managers and `kill` send).
async fn shutdown_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        ctrl_c = tokio::signal::ctrl_c() => ctrl_c.context("waiting for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}
