//! Runs outside the request path. A Lambda invocation ends when its handler returns: work
//! left in the background is frozen with the execution environment. So a `returnImmediately`
//! message is answered at once and its run handed to the `runner` function (an asynchronous
//! invoke carrying the task and the lease its creator took), and the `sweeper` function (on a
//! schedule) runs again the tasks whose runner died. Both wait for every run they started,
//! sub-tasks included, before their invocation ends.

use std::sync::Arc;

use a2a_service::{RunDispatcher, Runner};
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use serde::{Deserialize, Serialize};
use task_store::Lease;

/// The payload of a `runner` invocation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunRequest {
    pub task_id: String,
    /// The lease the dispatcher held (`None`: the runner takes it).
    #[serde(default)]
    pub lease: Option<Lease>,
    /// The W3C `traceparent` of the request that queued the run: its trace goes on in the
    /// runner when the invocation's own X-Ray trace is not sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

/// What a `runner` invocation reports (in its logs and its result).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RunReport {
    pub task_id: String,
}

/// What a `sweeper` invocation reports: the tasks it ran again.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SweepReport {
    pub resumed: Vec<String>,
}

/// Hands runs to the `runner` function by an asynchronous (`Event`) invoke: Lambda queues
/// the payload and retries it, so the answering function is not held by the run.
pub struct LambdaDispatcher {
    client: aws_sdk_lambda::Client,
    function: String,
}

impl LambdaDispatcher {
    pub fn new(client: aws_sdk_lambda::Client, function: String) -> Self {
        Self { client, function }
    }
}

#[async_trait::async_trait]
impl RunDispatcher for LambdaDispatcher {
    async fn dispatch(&self, task_id: &str, lease: Option<Lease>) -> Result<(), String> {
        let payload = serde_json::to_vec(&RunRequest {
            task_id: task_id.to_owned(),
            lease,
            traceparent: telemetry::traces::current().map(|c| c.traceparent()),
        })
        .map_err(|e| e.to_string())?;
        self.client
            .invoke()
            .function_name(&self.function)
            .invocation_type(InvocationType::Event)
            .payload(Blob::new(payload))
            .send()
            .await
            .map_err(|e| aws_sdk_lambda::error::DisplayErrorContext(e).to_string())?;
        Ok(())
    }
}

/// The `runner` handler: runs the task (with the handed lease, or by taking it) and waits
/// for every run that started, its sub-tasks' included.
pub async fn run_task(runner: &Runner, request: RunRequest) -> RunReport {
    tracing::info!(task_id = %request.task_id, handed_lease = request.lease.is_some(), "run");
    let carried = match telemetry::traces::current() {
        Some(_) => None,
        None => request
            .traceparent
            .as_deref()
            .and_then(|parent| telemetry::traces::TraceContext::from_w3c(parent, None)),
    };
    telemetry::traces::scope(carried, async {
        runner.run_with(&request.task_id, request.lease).await;
        runner.settle().await;
    })
    .await;
    RunReport {
        task_id: request.task_id,
    }
}

/// The `sweeper` handler: runs again every task whose lease expired, and waits for them.
pub async fn sweep(runner: &Runner) -> Result<SweepReport, task_store::StoreError> {
    let resumed = runner.sweep().await?;
    runner.settle().await;
    if !resumed.is_empty() {
        tracing::info!(
            count = resumed.len(),
            ?resumed,
            "resumed tasks whose runner died"
        );
    }
    Ok(SweepReport { resumed })
}

/// The dispatcher the HTTP functions use when `TH_RUNNER_FUNCTION` is set.
pub fn dispatcher(
    sdk: &aws_config::SdkConfig,
    function: Option<&str>,
) -> Option<Arc<dyn RunDispatcher>> {
    function.map(|name| {
        Arc::new(LambdaDispatcher::new(
            aws_sdk_lambda::Client::new(sdk),
            name.to_owned(),
        )) as Arc<dyn RunDispatcher>
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_request_round_trips_with_or_without_its_lease() {
        let lease = Lease {
            task_id: "t1".into(),
            owner: "lambda-send-message-7".into(),
            token: "tok".into(),
            expires_at: chrono::Utc::now(),
        };
        let with = RunRequest {
            task_id: "t1".into(),
            lease: Some(lease),
            traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
        };
        let text = serde_json::to_string(&with).expect("serializes");
        assert_eq!(
            serde_json::from_str::<RunRequest>(&text).expect("parses"),
            with
        );
        let bare: RunRequest = serde_json::from_str(r#"{"task_id":"t2"}"#).expect("parses");
        assert_eq!(bare.lease, None);
        assert_eq!(bare.traceparent, None);
    }
}
