//! What intake makes of a message (answered at once, queued for the runner, or answered
//! directly), how a queued one is to be run, and a follow-up attempt's retry-or-fail.

use a2a::{Message, StreamResponse, Task};
use task_core::DomainError;
use task_store::{Conflict, Lease, PendingCommit, StoreError};

use crate::error::ServiceError;
use crate::runner::{Created, Processed};

/// What intake made of a message.
pub(super) enum Intake {
    /// Answered at once (a command, a refusal, a repeat, an envelope with nothing else): the
    /// task view for a blocking call and the events for a stream (a new task's first).
    /// `push_from`: where an inline push config starts, `None` when the sender may not
    /// follow the task (a refusal).
    Answered {
        task: Box<Task>,
        events: Vec<StreamResponse>,
        push_from: Option<u64>,
    },
    /// Queued for the runner; the answer is in the log from `log`.
    Queued {
        log: LogPosition,
        push_from: u64,
        run: Run,
    },
    /// The agent answered a new message directly: no task, nothing stored.
    Direct(Box<Message>),
}

/// Where a stream picks up a task's event log: the task as first shown, then its events from
/// `from_seq` on, until one settles the task or answers `message_id` (any, when `None`).
pub(super) struct LogPosition {
    pub task_id: String,
    pub first: Box<Task>,
    pub from_seq: u64,
    pub message_id: Option<String>,
}

/// How a queued message is to be run.
pub(super) struct Run {
    /// The run lease, when the task was created with it (this process runs it).
    pub lease: Option<Lease>,
    /// The task as just created with the message queued, for its runner.
    pub created: Option<Box<Created>>,
    /// The commit that creates the task, submitted and not yet known to be done
    /// (`TaskStore::submit`): the runner may start before it is, as its own writes come
    /// after it, but no client is answered until it is.
    pub committing: Option<PendingCommit>,
    /// Told the task as the run processed the message, when this process runs it.
    pub processed: Option<tokio::sync::oneshot::Receiver<Processed>>,
}

impl Intake {
    /// Answered on a task the sender follows, with the one event of its stream.
    pub fn answered(task: Task, event: StreamResponse, push_from: u64) -> Self {
        Intake::Answered {
            task: Box::new(task),
            events: vec![event],
            push_from: Some(push_from),
        }
    }
}

/// A follow-up attempt: retry on a fresh read, or fail with this error.
pub(super) enum Retry {
    Again,
    Fail(ServiceError),
}

impl From<StoreError> for Retry {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict(Conflict::TaskChanged(_)) => Retry::Again,
            StoreError::Conflict(Conflict::DuplicateMessage { .. }) => Retry::Fail(
                ServiceError::InvalidParams("this message id was already received".to_owned()),
            ),
            other => Retry::Fail(other.into()),
        }
    }
}

impl From<ServiceError> for Retry {
    fn from(err: ServiceError) -> Self {
        Retry::Fail(err)
    }
}

impl From<DomainError> for Retry {
    fn from(err: DomainError) -> Self {
        Retry::Fail(err.into())
    }
}
