//! The `task` function: everything on `/tasks/{id}`: GetTask, CancelTask (`:cancel`) and
//! SubscribeToTask (`:subscribe`), one resource to API Gateway (see `functions/src/lib.rs`).

use a2a_http::Serves;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    functions::run_http(Serves::TaskResource).await
}
