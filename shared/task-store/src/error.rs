//! The store layer's one error enum.

/// Why a conditional write did not apply. Always a normal outcome of concurrency or of a
/// duplicate request: the caller re-reads and retries, or answers accordingly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Conflict {
    /// A task with this id already exists.
    #[error("task {0} already exists")]
    TaskExists(String),
    /// The task changed since it was read (version), or is in a state the write does not
    /// allow, or the actor no longer holds the role the write requires.
    #[error("task {0} changed since it was read")]
    TaskChanged(String),
    /// The message id was already recorded for this task.
    #[error("message {message_id} was already received by task {task_id}")]
    DuplicateMessage { task_id: String, message_id: String },
    /// An inbox item the write consumes is gone (another runner processed it).
    #[error("an inbox item of task {0} was already consumed")]
    InboxItemGone(String),
    /// The task is in a terminal state (enqueueing).
    #[error("task {0} is in a terminal state")]
    TaskTerminal(String),
    /// Someone else holds the lease, unexpired.
    #[error("task {task_id} is leased by another runner until {expires_at}")]
    LeaseHeld {
        task_id: String,
        expires_at: chrono::DateTime<chrono::Utc>,
    },
    /// The lease was stolen after expiring, or released.
    #[error("the lease on task {0} was lost")]
    LeaseLost(String),
    /// The push config id is taken on the task by another participant's config (or by a
    /// config without owner): only its owner may replace it.
    #[error("push config id {config_id} is taken on task {task_id}; choose another id")]
    PushConfigTaken { task_id: String, config_id: String },
    /// Creating the config would pass a cap of [`crate::limits`] (`per_participant`: the
    /// owner's configs on the task, else the task's).
    #[error("{}", too_many_push_configs(*.per_participant, *.max))]
    TooManyPushConfigs {
        task_id: String,
        per_participant: bool,
        max: usize,
    },
}

fn too_many_push_configs(per_participant: bool, max: usize) -> String {
    if per_participant {
        format!("at most {max} push configs per participant per task")
    } else {
        format!("at most {max} push configs per task")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Conflict(#[from] Conflict),
    /// The task (or config) does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// A document too large to store; the text says what and by how much.
    #[error("{0}")]
    TooLarge(String),
    /// A request the store cannot take (bad page token, missing status timestamp...).
    #[error("{0}")]
    Invalid(String),
    /// Stored data the store cannot read back (a defect or a foreign writer).
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The backend failed (network, throttling beyond retries, I/O).
    #[error("storage backend error: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl StoreError {
    pub fn backend(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        StoreError::Backend(Box::new(err))
    }

    pub fn conflict(&self) -> Option<&Conflict> {
        match self {
            StoreError::Conflict(c) => Some(c),
            _ => None,
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;
