//! The `authorizer` function: an API Gateway (REST API) TOKEN authorizer that verifies a
//! bearer JWT and hands its subject to the functions as the principal (see
//! `functions/src/authorizer.rs`).

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    functions::run_authorizer().await
}
