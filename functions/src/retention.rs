//! The sweeper's retention pass: once a day (the template's second schedule, input
//! `{"pass": "retention"}`), the terminal tasks past `TH_RETENTION_DAYS` get the table's TTL
//! attribute on every item (`store_dynamodb`'s `RetentionStore`), and DynamoDB deletes them.
//! Nothing of it runs on the request path.

use chrono::{Duration, Utc};
use serde::Serialize;
use task_store::{RetentionStore, StoreError};

/// The scheduler's input that asks the sweeper for the retention pass.
pub const RETENTION_PASS: &str = "retention";

/// Whether an invocation's event asks for the retention pass (else: the lease sweep).
pub fn is_retention_pass(event: &serde_json::Value) -> bool {
    event["pass"] == RETENTION_PASS
}

/// What a retention pass did.
#[derive(Debug, Serialize)]
pub struct RetentionReport {
    /// Tasks whose items were marked to expire in this pass.
    pub marked: usize,
}

/// Marks the tasks past `keep` (none while retention is off).
pub async fn retention_pass(
    store: &dyn RetentionStore,
    keep: Option<Duration>,
) -> Result<RetentionReport, StoreError> {
    let Some(keep) = keep else {
        return Ok(RetentionReport { marked: 0 });
    };
    let purged = store.purge(Utc::now(), keep).await?;
    if !purged.expiring.is_empty() {
        tracing::info!(
            marked = purged.expiring.len(),
            "retention: marked finished tasks to expire"
        );
    }
    Ok(RetentionReport {
        marked: purged.expiring.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_retention_input_asks_for_the_pass() {
        assert!(is_retention_pass(&serde_json::json!({"pass": "retention"})));
        assert!(!is_retention_pass(&serde_json::json!({})));
        assert!(!is_retention_pass(
            &serde_json::json!({"source": "aws.scheduler"})
        ));
    }
}
