//! The service layer's one error enum. Each variant is one A2A error; the protocol binding
//! maps them to JSON-RPC codes and HTTP statuses in one place. `Internal` never carries text
//! to the client: its detail is logged where it happens.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// -32602: the request is malformed or refused as a whole (bad envelope, no participant…).
    #[error("{0}")]
    InvalidParams(String),
    /// -32001: no such task, or the caller may not see it (indistinguishable by design).
    #[error("task not found: {0}")]
    TaskNotFound(String),
    /// -32002.
    #[error("{0}")]
    TaskNotCancelable(String),
    /// -32004: e.g. a message to a terminal task, an unknown extension.
    #[error("{0}")]
    UnsupportedOperation(String),
    /// -32005: a part whose media type the agent does not accept.
    #[error("{0}")]
    ContentTypeNotSupported(String),
    /// -32007.
    #[error("the extended agent card is not configured")]
    ExtendedCardNotConfigured,
    /// -32603: a failure of ours; the text a client sees is only "internal error".
    #[error("internal error")]
    Internal,
    /// The storage backend is unavailable or throttled beyond retries (-32603, HTTP 503).
    #[error("the service is temporarily unavailable")]
    Unavailable,
    /// The caller (or the task) is over a rate limit: HTTP 429 with `Retry-After` on both
    /// bindings (JSON-RPC -32000), nothing done.
    #[error("rate limit exceeded; retry after {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
}

/// Store errors a request cannot act on. A conflict a request can act on (a version that
/// moved, a repeated message id) is matched by the caller before it comes here.
impl From<task_store::StoreError> for ServiceError {
    fn from(err: task_store::StoreError) -> Self {
        use task_store::StoreError;
        match err {
            StoreError::TooLarge(text) | StoreError::Invalid(text) => {
                ServiceError::InvalidParams(text)
            }
            StoreError::NotFound(what) => {
                ServiceError::TaskNotFound(what.trim_start_matches("task ").to_owned())
            }
            StoreError::Backend(err) => {
                tracing::warn!(%err, "storage backend failed");
                ServiceError::Unavailable
            }
            other => internal("store", other),
        }
    }
}

/// The lifecycle's and the envelopes' refusals as A2A errors.
impl From<task_core::DomainError> for ServiceError {
    fn from(err: task_core::DomainError) -> Self {
        use task_core::DomainError;
        match err {
            DomainError::TaskTerminal(_) => ServiceError::UnsupportedOperation(err.to_string()),
            DomainError::NotCancelable(_) => ServiceError::TaskNotCancelable(err.to_string()),
            DomainError::TransitionNotAllowed { .. } => internal("lifecycle", err),
            other => ServiceError::InvalidParams(other.to_string()),
        }
    }
}

/// A failure of ours: logged here with its detail, answered as `Internal`.
fn internal(context: &str, err: impl std::fmt::Display) -> ServiceError {
    tracing::error!(%err, "{context}");
    ServiceError::Internal
}
