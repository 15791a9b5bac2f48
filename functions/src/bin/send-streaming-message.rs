//! The `send-streaming-message` function (see `functions/src/lib.rs`).

use a2a_http::Method;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    functions::run_rest(Method::SendStreamingMessage).await
}
