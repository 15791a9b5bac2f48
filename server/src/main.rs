//! `tiny-harness`: the whole service on one machine. Every A2A method (JSON-RPC and REST) and
//! the agent card on one HTTP listener, the same handlers the Lambda functions run, over the
//! embedded store (default) or a DynamoDB table.

use anyhow::Context;
use clap::Parser;
use local_server::{Options, Server};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let options = Options::parse();
    tracing_subscriber::fmt()
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
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    server.shutdown().await;
    Ok(())
}
