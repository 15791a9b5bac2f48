//! The names of A2A task states as the extension stores them (`TaskRef.state`) and as
//! notes and errors say them.

use a2a::TaskState;
use a2a::TaskState::*;

/// The ProtoJSON name of a state (`TASK_STATE_WORKING`), as `TaskRef.state` stores it.
pub fn state_name(state: &TaskState) -> &'static str {
    match state {
        TaskState::Unspecified => "TASK_STATE_UNSPECIFIED",
        Submitted => "TASK_STATE_SUBMITTED",
        Working => "TASK_STATE_WORKING",
        Completed => "TASK_STATE_COMPLETED",
        Failed => "TASK_STATE_FAILED",
        Canceled => "TASK_STATE_CANCELED",
        InputRequired => "TASK_STATE_INPUT_REQUIRED",
        Rejected => "TASK_STATE_REJECTED",
        AuthRequired => "TASK_STATE_AUTH_REQUIRED",
    }
}

/// The name without its prefix (`WORKING`), as the sub-task note says it.
pub fn short_state_name(state: &TaskState) -> &'static str {
    state_name(state).trim_start_matches("TASK_STATE_")
}

/// Every state a task can be in (all but `Unspecified`).
pub(crate) const KNOWN_STATES: [TaskState; 8] = [
    Submitted,
    Working,
    Completed,
    Failed,
    Canceled,
    InputRequired,
    Rejected,
    AuthRequired,
];

/// Parses a ProtoJSON state name.
pub fn parse_state(name: &str) -> Option<TaskState> {
    KNOWN_STATES.into_iter().find(|s| state_name(s) == name)
}
