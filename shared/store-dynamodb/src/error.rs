//! The adapter's one error enum, its mapping onto [`StoreError`], and the mapping of a
//! cancelled transaction's reasons onto typed conflicts.

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::CancellationReason;
use aws_smithy_runtime_api::http::Response;
use task_store::{Conflict, StoreError};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Everything that can go wrong inside the adapter that is not a conflict.
#[derive(Debug, thiserror::Error)]
pub enum DynamoDbError {
    /// A call failed: network, a service error, or throttling after the SDK's retries.
    #[error("DynamoDB {operation} failed: {message}")]
    Call {
        operation: &'static str,
        message: String,
        #[source]
        source: BoxError,
    },
    /// A transaction was cancelled for a reason that is no conflict (throttling or
    /// contention that outlasted the retries, a validation error).
    #[error("DynamoDB {operation} was cancelled: {reasons}")]
    Cancelled {
        operation: &'static str,
        reasons: String,
    },
    /// A stored item the adapter cannot read back.
    #[error("item {key}: {reason}")]
    Corrupt { key: String, reason: String },
    /// The SDK refused to build a request (a defect of the adapter).
    #[error("cannot build a DynamoDB request: {0}")]
    Build(#[from] aws_smithy_types::error::operation::BuildError),
}

/// Error codes of a throttled call.
const THROTTLED_CALL: &[&str] = &[
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
];

impl DynamoDbError {
    /// A failed call (a throttled one is counted: it outlasted the SDK's retries).
    pub fn call<E>(operation: &'static str, err: SdkError<E, Response>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        if err
            .code()
            .is_some_and(|code| THROTTLED_CALL.contains(&code))
        {
            telemetry::metrics::dynamodb_throttle(operation);
        }
        DynamoDbError::Call {
            operation,
            message: DisplayErrorContext(&err).to_string(),
            source: Box::new(err),
        }
    }

    pub fn corrupt(key: impl Into<String>, reason: impl Into<String>) -> Self {
        DynamoDbError::Corrupt {
            key: key.into(),
            reason: reason.into(),
        }
    }
}

impl From<DynamoDbError> for StoreError {
    fn from(err: DynamoDbError) -> Self {
        match err {
            DynamoDbError::Corrupt { .. } => StoreError::Corrupt(err.to_string()),
            other => StoreError::backend(other),
        }
    }
}

/// What the condition on one transaction item protects, so a failed condition becomes the
/// conflict the port names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// Put of a new task item (`attribute_not_exists`).
    NewTask(String),
    /// The task item's version (and allowed states, and actor role) condition.
    TaskVersion(String),
    /// Enqueue's and put_push_config's check that the task exists (and is not terminal).
    TaskOpen(String),
    /// A message-id record (`attribute_not_exists`).
    MessageId { task_id: String, message_id: String },
    /// A consumed inbox item (`attribute_exists`).
    InboxItem(String),
    /// Any other item of a change (logs, index; conditioned only as a safeguard): if one
    /// fails, the task moved on (or, for a creation, already existed).
    Log { task_id: String, creating: bool },
    /// A push config item: free (a creation) or still the writer's (a replacement, a
    /// delete).
    PushConfigId { task_id: String, config_id: String },
    /// A push config counter under its cap (a creation).
    PushConfigCap {
        task_id: String,
        per_participant: bool,
        max: usize,
    },
}

/// Reasons that mean "the same item is in another transaction right now".
const CONTENTION: &[&str] = &["TransactionConflict"];
/// Reasons that mean throttling.
const THROTTLING: &[&str] = &[
    "ThrottlingError",
    "ProvisionedThroughputExceeded",
    "RequestLimitExceeded",
];
const CONDITION_FAILED: &str = "ConditionalCheckFailed";

/// What a `TransactionCanceledException` means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancellation {
    Conflict(Conflict),
    /// A `TaskOpen` guard failed and DynamoDB returned no item: there is no such task.
    NotFound(String),
    /// Another transaction held one of the items; worth another attempt.
    Contention,
    /// Throttled; worth another attempt after a backoff.
    Throttled,
    /// Anything else (validation, an unknown code): the reasons, for the error text.
    Other(String),
}

/// The reasons' codes as text, for errors and logs.
pub fn describe(reasons: &[CancellationReason]) -> String {
    let failed: Vec<String> = reasons
        .iter()
        .enumerate()
        .filter(|(_, r)| r.code().is_some_and(|c| c != "None"))
        .map(|(i, r)| match r.message() {
            Some(m) => format!("item {i}: {} ({m})", r.code().unwrap_or_default()),
            None => format!("item {i}: {}", r.code().unwrap_or_default()),
        })
        .collect();
    if failed.is_empty() {
        "no reasons given".to_owned()
    } else {
        failed.join("; ")
    }
}

/// Maps a cancelled transaction onto the conflict of its first failed condition (items are
/// ordered task item, message ids, inbox items, the rest, per change, so this is the
/// conflict the embedded store reports for the same commit); without a failed condition,
/// contention or throttling say "try again".
pub fn classify(reasons: &[CancellationReason], guards: &[Guard]) -> Cancellation {
    let failed_condition = reasons
        .iter()
        .zip(guards)
        .find(|(r, _)| r.code() == Some(CONDITION_FAILED));
    if let Some((reason, guard)) = failed_condition {
        return match guard {
            Guard::NewTask(id) => Cancellation::Conflict(Conflict::TaskExists(id.clone())),
            Guard::TaskVersion(id) => Cancellation::Conflict(Conflict::TaskChanged(id.clone())),
            Guard::TaskOpen(id) => match reason.item() {
                Some(_) => Cancellation::Conflict(Conflict::TaskTerminal(id.clone())),
                None => Cancellation::NotFound(id.clone()),
            },
            Guard::MessageId {
                task_id,
                message_id,
            } => Cancellation::Conflict(Conflict::DuplicateMessage {
                task_id: task_id.clone(),
                message_id: message_id.clone(),
            }),
            Guard::InboxItem(id) => Cancellation::Conflict(Conflict::InboxItemGone(id.clone())),
            Guard::Log {
                task_id,
                creating: true,
            } => Cancellation::Conflict(Conflict::TaskExists(task_id.clone())),
            Guard::Log {
                task_id,
                creating: false,
            } => Cancellation::Conflict(Conflict::TaskChanged(task_id.clone())),
            Guard::PushConfigId { task_id, config_id } => {
                Cancellation::Conflict(Conflict::PushConfigTaken {
                    task_id: task_id.clone(),
                    config_id: config_id.clone(),
                })
            }
            Guard::PushConfigCap {
                task_id,
                per_participant,
                max,
            } => Cancellation::Conflict(Conflict::TooManyPushConfigs {
                task_id: task_id.clone(),
                per_participant: *per_participant,
                max: *max,
            }),
        };
    }
    let any = |codes: &[&str]| {
        reasons
            .iter()
            .any(|r| r.code().is_some_and(|c| codes.contains(&c)))
    };
    if any(CONTENTION) {
        Cancellation::Contention
    } else if any(THROTTLING) {
        Cancellation::Throttled
    } else {
        Cancellation::Other(describe(reasons))
    }
}

/// The task a contention on this transaction is reported for: the first task updated (its
/// version may have moved), else the first task created or checked.
pub fn contended_task(guards: &[Guard]) -> Option<&str> {
    let updated = guards.iter().find_map(|g| match g {
        Guard::TaskVersion(id) => Some(id.as_str()),
        _ => None,
    });
    updated.or_else(|| {
        guards.iter().find_map(|g| match g {
            Guard::NewTask(id) | Guard::TaskOpen(id) => Some(id.as_str()),
            _ => None,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;

    fn reason(code: &str) -> CancellationReason {
        CancellationReason::builder().code(code).build()
    }

    fn guards() -> Vec<Guard> {
        vec![
            Guard::NewTask("child".into()),
            Guard::TaskVersion("parent".into()),
            Guard::MessageId {
                task_id: "parent".into(),
                message_id: "m-1".into(),
            },
            Guard::InboxItem("parent".into()),
            Guard::Log {
                task_id: "parent".into(),
                creating: false,
            },
        ]
    }

    #[test]
    fn the_first_failed_condition_decides() {
        let g = guards();
        let cases = [
            (
                ["ConditionalCheckFailed", "None", "None", "None", "None"],
                Conflict::TaskExists("child".into()),
            ),
            (
                [
                    "None",
                    "ConditionalCheckFailed",
                    "ConditionalCheckFailed",
                    "None",
                    "None",
                ],
                Conflict::TaskChanged("parent".into()),
            ),
            (
                [
                    "None",
                    "None",
                    "ConditionalCheckFailed",
                    "ConditionalCheckFailed",
                    "None",
                ],
                Conflict::DuplicateMessage {
                    task_id: "parent".into(),
                    message_id: "m-1".into(),
                },
            ),
            (
                ["None", "None", "None", "ConditionalCheckFailed", "None"],
                Conflict::InboxItemGone("parent".into()),
            ),
            (
                ["None", "None", "None", "None", "ConditionalCheckFailed"],
                Conflict::TaskChanged("parent".into()),
            ),
            // A failed condition outranks contention elsewhere in the same transaction.
            (
                [
                    "TransactionConflict",
                    "ConditionalCheckFailed",
                    "None",
                    "None",
                    "None",
                ],
                Conflict::TaskChanged("parent".into()),
            ),
        ];
        for (codes, expected) in cases {
            let reasons: Vec<_> = codes.iter().map(|c| reason(c)).collect();
            assert_eq!(
                classify(&reasons, &g),
                Cancellation::Conflict(expected),
                "{codes:?}"
            );
        }
    }

    #[test]
    fn contention_and_throttling_are_retryable_and_the_rest_is_described() {
        let g = guards();
        let reasons = |codes: &[&str]| codes.iter().map(|c| reason(c)).collect::<Vec<_>>();
        assert_eq!(
            classify(&reasons(&["None", "TransactionConflict", "None"]), &g),
            Cancellation::Contention
        );
        assert_eq!(
            classify(&reasons(&["ThrottlingError", "None"]), &g),
            Cancellation::Throttled
        );
        assert_eq!(
            classify(&reasons(&["ProvisionedThroughputExceeded"]), &g),
            Cancellation::Throttled
        );
        let validation = vec![
            reason("None"),
            CancellationReason::builder()
                .code("ValidationError")
                .message("Item size has exceeded the maximum")
                .build(),
        ];
        assert_eq!(
            classify(&validation, &g),
            Cancellation::Other(
                "item 1: ValidationError (Item size has exceeded the maximum)".into()
            )
        );
        assert_eq!(
            classify(&[], &g),
            Cancellation::Other("no reasons given".into())
        );
        assert_eq!(contended_task(&g), Some("parent"));
        assert_eq!(contended_task(&g[..1]), Some("child"));
    }

    #[test]
    fn an_open_task_check_tells_missing_from_terminal_by_the_returned_item() {
        let g = vec![
            Guard::TaskOpen("t-1".into()),
            Guard::MessageId {
                task_id: "t-1".into(),
                message_id: "m".into(),
            },
        ];
        let missing = vec![reason("ConditionalCheckFailed"), reason("None")];
        assert_eq!(classify(&missing, &g), Cancellation::NotFound("t-1".into()));
        let terminal = vec![
            CancellationReason::builder()
                .code("ConditionalCheckFailed")
                .item("state", AttributeValue::S("TASK_STATE_COMPLETED".into()))
                .build(),
            reason("ConditionalCheckFailed"),
        ];
        assert_eq!(
            classify(&terminal, &g),
            Cancellation::Conflict(Conflict::TaskTerminal("t-1".into()))
        );
        let duplicate = vec![reason("None"), reason("ConditionalCheckFailed")];
        assert_eq!(
            classify(&duplicate, &g),
            Cancellation::Conflict(Conflict::DuplicateMessage {
                task_id: "t-1".into(),
                message_id: "m".into()
            })
        );
    }

    #[test]
    fn corrupt_items_and_backend_failures_map_to_their_store_errors() {
        let corrupt: StoreError = DynamoDbError::corrupt("TASK#t-1/TASK", "no version").into();
        assert!(
            matches!(corrupt, StoreError::Corrupt(ref text) if text == "item TASK#t-1/TASK: no version"),
            "{corrupt:?}"
        );
        let cancelled: StoreError = DynamoDbError::Cancelled {
            operation: "TransactWriteItems",
            reasons: "item 0: ThrottlingError".into(),
        }
        .into();
        assert!(matches!(cancelled, StoreError::Backend(_)));
    }
}

#[cfg(test)]
mod metered {
    use super::*;
    use aws_sdk_dynamodb::error::ErrorMetadata;
    use aws_sdk_dynamodb::operation::get_item::GetItemError;
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_types::body::SdkBody;
    use telemetry::metrics::{self, Metric, Mode, Value};

    fn failed(code: &str) -> SdkError<GetItemError, Response> {
        let status = StatusCode::try_from(400u16).expect("status");
        SdkError::service_error(
            GetItemError::generic(ErrorMetadata::builder().code(code).build()),
            Response::new(status, SdkBody::empty()),
        )
    }

    fn throttles(operation: &str) -> f64 {
        metrics::installed()
            .expect("installed")
            .snapshot()
            .iter()
            .find(|s| s.metric == Metric::DynamoDbThrottles && s.labels[0] == operation)
            .map(|s| match s.value {
                Value::Counter(n) => n,
                _ => 0.0,
            })
            .unwrap_or(0.0)
    }

    #[test]
    fn a_call_throttled_past_the_sdks_retries_is_counted_and_no_other_failure() {
        metrics::install(Mode::Prometheus);
        let before = throttles("GetItem");
        let _ = DynamoDbError::call("GetItem", failed("ValidationException"));
        assert_eq!(throttles("GetItem"), before);
        let _ = DynamoDbError::call("GetItem", failed("ThrottlingException"));
        let _ = DynamoDbError::call("GetItem", failed("ProvisionedThroughputExceededException"));
        assert_eq!(throttles("GetItem"), before + 2.0);
    }
}
