//! The `console` function (see `functions/src/console.rs`).

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    functions::run_console().await
}
