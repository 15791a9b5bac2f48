//! The `jsonrpc` function (see `functions/src/lib.rs`).

use a2a_http::Serves;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    functions::run_http(Serves::JsonRpc).await
}
