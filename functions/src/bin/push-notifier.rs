//! The `push-notifier` function: the task table's DynamoDB Stream to webhooks (see
//! `functions/src/notifier.rs`).

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    functions::run_notifier().await
}
