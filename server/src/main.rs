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
    if let Err(error) = options.settings() {
        Options::command()
            .error(ErrorKind::ValueValidation, format!("{error:#}"))
            .exit();
    }
    // Structured logs: one JSON object per line on stderr (RUST_LOG filters, default info).
    tracing_subscriber::fmt()
        .json()
        .with_current_span(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let server = Server::start(options)
        .await
        .context("starting the server")?;
    // The first line on stdout says where to reach it (tests wait for it).
    println!("listening on {}", server.base_url());
    shutdown_signal().await?;
    tracing::info!("shutting down: finishing open requests and push deliveries");
    server.shutdown().await;
    Ok(())
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
