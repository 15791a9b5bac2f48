//! The `sweeper` function: on a schedule, runs again the tasks whose runner died (see
//! `functions/src/runner.rs`).

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    functions::run_sweeper().await
}
