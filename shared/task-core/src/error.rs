//! The one error enum of the domain layer.
//!
//! Every refusal the core makes is a variant here with the exact text a client sees. The
//! protocol layer maps variants to JSON-RPC codes and HTTP statuses in one place; the core
//! never decides wire codes. Tool failures are not errors of the layer: they are results the
//! model reads (see [`crate::tools::ToolFailure`]).

use a2a::TaskState;

use crate::events::LifecycleEvent;
use crate::policy::AccessDenied;
use crate::states::state_name;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    /// An extension object the schema or the semantic rules refuse (-32602).
    #[error("invalid task extension: {0}")]
    InvalidExtension(String),
    /// A malformed envelope data part (-32602).
    #[error("invalid event envelope: {0}")]
    InvalidEnvelope(String),
    /// An envelope that sets `lifecycle`, `model` or `reasoning_effort` (-32602); nothing applied.
    #[error("task envelope cannot set server-controlled field(s): {0}")]
    ServerControlledField(String),
    /// An envelope on an existing task that touches keys outside the editable ones (-32602).
    #[error("task envelope cannot change {0}")]
    FieldNotEditable(String),
    /// A client-sent id outside the limits of [`crate::ids`] (-32602).
    #[error("invalid id: {0}")]
    InvalidId(String),
    /// A new-task envelope that links tasks on this service (`sub_tasks`, `parent_tasks`,
    /// steps' `linked_tasks` without `agent`): only the service makes those links (-32602).
    #[error(
        "task envelope cannot set {0}: links to tasks on this service are made only by the service (links to tasks on other agents, with \"agent\" set, are accepted as information)"
    )]
    LinkNotAllowed(String),
    /// An id reserved for an agent, claimed without a verified identity for it (-32602).
    #[error("{0}")]
    ReservedIdentity(String),
    /// A participants change that would remove the service's agent or the last admin
    /// (-32602).
    #[error(transparent)]
    Roster(#[from] crate::policy::RosterRefusal),
    /// The participant policy said no.
    #[error(transparent)]
    Denied(#[from] AccessDenied),
    /// A `/model` or `/effort` command that cannot be applied; answered with a status update.
    #[error("{0}")]
    CommandRefused(String),
    /// A message or command sent to a task in a terminal state (-32004).
    #[error("the task is in a terminal state ({})", state_name(.0))]
    TaskTerminal(TaskState),
    /// `CancelTask` on a task in a terminal state (-32002).
    #[error("the task cannot be canceled in state {}", state_name(.0))]
    NotCancelable(TaskState),
    /// A lifecycle event that the current state does not accept (a programming or race
    /// condition on the caller's side: re-read and retry).
    #[error("event {event:?} is not allowed in state {}", state_name(.from))]
    TransitionNotAllowed {
        from: TaskState,
        event: LifecycleEvent,
    },
}
