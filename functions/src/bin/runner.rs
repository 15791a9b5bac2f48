//! The `runner` function: a `returnImmediately` run handed off by an HTTP function (see
//! `functions/src/runner.rs`).

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    functions::run_runner().await
}
