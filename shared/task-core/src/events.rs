//! The events that move a task through its lifecycle (the state machine itself is
//! [`crate::lifecycle::next`]).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleEvent {
    /// A participant's message (not a command) passed intake.
    MessageAccepted {
        answers_help_request: bool,
    },
    /// A `/model` or `/effort` command was applied; commands never run the agent.
    CommandApplied,
    /// A sub-task's state changed; a note for the agent was recorded.
    SubtaskChanged,
    /// An agent turn ended.
    TurnEnded(TurnSummary),
    /// The agent declared the task done at the end of its turn (whatever the lifecycle
    /// rule would say); a parent still waits for its unresolved sub-tasks.
    AgentCompleted {
        unresolved_sub_tasks: bool,
    },
    TurnLimitReached,
    /// A model error that retries did not cure, or a failed completion hook.
    RunFailed,
    /// A participant task (`create_task_for_participant`) was created and waits for its
    /// assignee.
    AwaitAssignee,
    /// The assignee of a participant task sent its first accepted message.
    AssigneeReplied,
    Cancel,
    Reject,
}

/// What the lifecycle rule needs to know about a finished agent turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnSummary {
    pub had_tool_calls: bool,
    pub help_requested: bool,
    pub all_criteria_met: bool,
    pub unresolved_sub_tasks: bool,
}
