//! The lifecycle state machine of SPEC section 5, as one function.
//!
//! [`next`] maps (current A2A state, its sub-state, the task's lifecycle, an event) to a
//! [`Transition`] or a typed refusal. Every transition names the states it may come from, so
//! the store turns it into a conditional write (`state IN from AND version = :read`); two
//! writers racing on one task: exactly one wins.
//!
//! | event | from | to |
//! |---|---|---|
//! | message accepted | submitted, working, auth-required, input-required (awaiting next message) | working |
//! | message accepted, answering the open help request | input-required (awaiting answer) | working |
//! | message accepted, not the answer | input-required (awaiting answer) | unchanged: recorded, the task keeps waiting |
//! | command applied | submitted | input-required (awaiting next message) |
//! | command applied | working, input-required, auth-required | unchanged |
//! | sub-task changed | working, input-required (awaiting next message) | working (the agent reads the note) |
//! | sub-task changed | input-required (awaiting answer), auth-required | unchanged |
//! | turn ended with a help request | working | input-required (awaiting answer) |
//! | turn ended with tool calls | working | working |
//! | turn ended, no tool calls, conversation | working | completed if every criterion is met (≥ 1) and no sub-task is unresolved; working (waiting for sub-tasks) if criteria are met but a sub-task is not; else input-required (awaiting next message) |
//! | turn ended, no tool calls, delegated | working | working (waiting) if a sub-task is unresolved, else completed |
//! | agent declared the task done | working | completed; working (waiting) if a sub-task is unresolved |
//! | turn limit reached, run failed | working | failed |
//! | awaiting the assignee (participant task) | submitted | input-required (awaiting answer) |
//! | assignee replied (participant task) | input-required | completed |
//! | cancel | every non-terminal state | canceled |
//! | reject | submitted, working | rejected |
//!
//! Terminal states (completed, failed, canceled, rejected) accept nothing: a cancel is
//! [`DomainError::NotCancelable`], every other event [`DomainError::TaskTerminal`].

use a2a::TaskState;

use crate::error::DomainError;
pub use crate::events::{LifecycleEvent, TurnSummary};
use crate::extension::{Lifecycle, StepState, SubState, TaskExtension};
pub use crate::states::{parse_state, short_state_name, state_name};

impl TurnSummary {
    /// The summary of a turn on `task` (after the turn's tool calls were applied).
    pub fn of(task: &TaskExtension, had_tool_calls: bool, help_requested: bool) -> Self {
        Self {
            had_tool_calls,
            help_requested,
            all_criteria_met: task.all_criteria_met(),
            unresolved_sub_tasks: task.unresolved_sub_tasks().next().is_some(),
        }
    }
}

/// A permitted state change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// The states this write may come from: the store's condition.
    pub from: &'static [TaskState],
    pub to: TaskState,
    /// Why an interrupted task waits; `None` for every other state.
    pub sub_state: Option<SubState>,
    /// Whether the agent runs (or keeps running) after this transition.
    pub runs_agent: bool,
}

impl Transition {
    /// Whether the write changes the state or the sub-state given the current ones.
    pub fn changes(&self, state: &TaskState, sub_state: Option<SubState>) -> bool {
        &self.to != state || self.sub_state != sub_state
    }
}

use TaskState::{
    AuthRequired, Canceled, Completed, Failed, InputRequired, Rejected, Submitted, Working,
};

pub const TERMINAL: &[TaskState] = &[Completed, Failed, Canceled, Rejected];
pub const NON_TERMINAL: &[TaskState] = &[Submitted, Working, InputRequired, AuthRequired];
const MESSAGE_RESUMES: &[TaskState] = &[Submitted, Working, InputRequired, AuthRequired];
const ONLY_SUBMITTED: &[TaskState] = &[Submitted];
const ONLY_WORKING: &[TaskState] = &[Working];
const ONLY_INPUT_REQUIRED: &[TaskState] = &[InputRequired];
const ONLY_AUTH_REQUIRED: &[TaskState] = &[AuthRequired];
const WORKING_OR_INPUT_REQUIRED: &[TaskState] = &[Working, InputRequired];
const REJECTABLE: &[TaskState] = &[Submitted, Working];

/// An input-required task always says why it waits; one stored without a sub-state waits for
/// the next message.
fn waiting(sub_state: Option<SubState>) -> Option<SubState> {
    sub_state.or(Some(SubState::AwaitingNextMessage))
}

fn to(
    from: &'static [TaskState],
    to: TaskState,
    sub_state: Option<SubState>,
    runs_agent: bool,
) -> Transition {
    Transition {
        from,
        to,
        sub_state,
        runs_agent,
    }
}

/// The next state of a task in `state` (with `sub_state`) whose lifecycle is `lifecycle`,
/// when `event` happens.
pub fn next(
    state: &TaskState,
    sub_state: Option<SubState>,
    lifecycle: Lifecycle,
    event: LifecycleEvent,
) -> Result<Transition, DomainError> {
    use LifecycleEvent as E;
    if state.is_terminal() {
        return Err(match event {
            E::Cancel => DomainError::NotCancelable(state.clone()),
            _ => DomainError::TaskTerminal(state.clone()),
        });
    }
    let awaiting_answer = *state == InputRequired && sub_state == Some(SubState::AwaitingAnswer);
    let refused = || DomainError::TransitionNotAllowed {
        from: state.clone(),
        event,
    };
    let waiting_for_next = Some(SubState::AwaitingNextMessage);
    let waiting_for_answer = Some(SubState::AwaitingAnswer);
    Ok(match event {
        E::MessageAccepted {
            answers_help_request,
        } => {
            if awaiting_answer && !answers_help_request {
                to(
                    ONLY_INPUT_REQUIRED,
                    InputRequired,
                    waiting_for_answer,
                    false,
                )
            } else if MESSAGE_RESUMES.contains(state) {
                to(MESSAGE_RESUMES, Working, None, true)
            } else {
                return Err(refused());
            }
        }
        E::CommandApplied => match state {
            Submitted => to(ONLY_SUBMITTED, InputRequired, waiting_for_next, false),
            Working => to(ONLY_WORKING, Working, None, false),
            InputRequired => to(
                ONLY_INPUT_REQUIRED,
                InputRequired,
                waiting(sub_state),
                false,
            ),
            AuthRequired => to(ONLY_AUTH_REQUIRED, AuthRequired, None, false),
            _ => return Err(refused()),
        },
        E::SubtaskChanged => match state {
            Working => to(WORKING_OR_INPUT_REQUIRED, Working, None, true),
            InputRequired if !awaiting_answer => to(WORKING_OR_INPUT_REQUIRED, Working, None, true),
            InputRequired => to(ONLY_INPUT_REQUIRED, InputRequired, sub_state, false),
            AuthRequired => to(ONLY_AUTH_REQUIRED, AuthRequired, None, false),
            _ => return Err(refused()),
        },
        E::TurnEnded(turn) => {
            if *state != Working {
                return Err(refused());
            }
            if turn.help_requested {
                to(ONLY_WORKING, InputRequired, waiting_for_answer, false)
            } else if turn.had_tool_calls {
                to(ONLY_WORKING, Working, None, true)
            } else {
                match lifecycle {
                    Lifecycle::Conversation => {
                        if turn.all_criteria_met && !turn.unresolved_sub_tasks {
                            to(ONLY_WORKING, Completed, None, false)
                        } else if turn.all_criteria_met {
                            to(ONLY_WORKING, Working, None, false)
                        } else {
                            to(ONLY_WORKING, InputRequired, waiting_for_next, false)
                        }
                    }
                    Lifecycle::Delegated => {
                        if turn.unresolved_sub_tasks {
                            to(ONLY_WORKING, Working, None, false)
                        } else {
                            to(ONLY_WORKING, Completed, None, false)
                        }
                    }
                }
            }
        }
        E::AgentCompleted {
            unresolved_sub_tasks,
        } => {
            if *state != Working {
                return Err(refused());
            }
            if unresolved_sub_tasks {
                to(ONLY_WORKING, Working, None, false)
            } else {
                to(ONLY_WORKING, Completed, None, false)
            }
        }
        E::TurnLimitReached | E::RunFailed => {
            if *state != Working {
                return Err(refused());
            }
            to(ONLY_WORKING, Failed, None, false)
        }
        E::AwaitAssignee => {
            if *state != Submitted {
                return Err(refused());
            }
            to(ONLY_SUBMITTED, InputRequired, waiting_for_answer, false)
        }
        E::AssigneeReplied => {
            if *state != InputRequired {
                return Err(refused());
            }
            to(ONLY_INPUT_REQUIRED, Completed, None, false)
        }
        E::Cancel => {
            if !NON_TERMINAL.contains(state) {
                return Err(refused());
            }
            to(NON_TERMINAL, Canceled, None, false)
        }
        E::Reject => {
            if !REJECTABLE.contains(state) {
                return Err(refused());
            }
            to(REJECTABLE, Rejected, None, false)
        }
    })
}

/// The note a parent's agent reads when a sub-task changes state:
/// `Sub-task <id> is <STATE>: <summary>` (summary cut to 500 characters).
pub fn subtask_note(child_id: &str, state: &TaskState, summary: &str) -> String {
    let summary: String = summary.chars().take(500).collect();
    format!(
        "Sub-task {child_id} is {}: {summary}",
        short_state_name(state)
    )
}

/// Mirrors a child's state into the parent's `sub_tasks` entry (and into the step
/// `linked_tasks` entries that name it). A child that failed, was canceled or was rejected
/// fails the steps it is linked to that are not done (linking a new sub-task retries such a
/// step). Returns whether anything changed, so the caller skips a write that would change
/// nothing.
pub fn mirror_sub_task(
    parent: &mut TaskExtension,
    child_id: &str,
    state: &TaskState,
    sub_state: Option<SubState>,
) -> bool {
    let name = Some(state_name(state).to_owned());
    let sub_state = if *state == InputRequired || *state == AuthRequired {
        sub_state
    } else {
        None
    };
    let mut changed = false;
    let mut update = |r: &mut crate::extension::TaskRef| {
        if r.task_id == child_id && (r.state != name || r.sub_state != sub_state) {
            r.state.clone_from(&name);
            r.sub_state = sub_state;
            changed = true;
        }
    };
    parent.sub_tasks.iter_mut().for_each(&mut update);
    let fails_step = matches!(state, Failed | Canceled | Rejected);
    let mut failed_a_step = false;
    if let Some(plan) = parent.plan.as_mut() {
        for step in &mut plan.steps {
            step.linked_tasks.iter_mut().for_each(&mut update);
            let linked = step.linked_tasks.iter().any(|r| r.task_id == child_id);
            if fails_step && linked && !matches!(step.state, StepState::Done | StepState::Failed) {
                step.state = StepState::Failed;
                failed_a_step = true;
            }
        }
    }
    changed || failed_a_step
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extension::TaskRef;
    use crate::states::KNOWN_STATES;
    use LifecycleEvent as E;

    fn turn(had_tool_calls: bool, help_requested: bool, met: bool, unresolved: bool) -> E {
        E::TurnEnded(TurnSummary {
            had_tool_calls,
            help_requested,
            all_criteria_met: met,
            unresolved_sub_tasks: unresolved,
        })
    }

    fn go(
        state: TaskState,
        sub: Option<SubState>,
        lifecycle: Lifecycle,
        event: E,
    ) -> (TaskState, Option<SubState>) {
        let t = next(&state, sub, lifecycle, event)
            .unwrap_or_else(|e| panic!("{state:?} {event:?}: {e}"));
        assert!(
            t.from.contains(&state),
            "{state:?} must be among the from-states of {t:?}"
        );
        (t.to, t.sub_state)
    }

    const NEXT: Option<SubState> = Some(SubState::AwaitingNextMessage);
    const ANSWER: Option<SubState> = Some(SubState::AwaitingAnswer);

    #[test]
    fn a_conversation_waits_for_the_next_message_until_its_criteria_are_met() {
        let c = Lifecycle::Conversation;
        let accepted = E::MessageAccepted {
            answers_help_request: false,
        };
        assert_eq!(go(Submitted, None, c, accepted), (Working, None));
        assert_eq!(
            go(Working, None, c, turn(true, false, false, false)),
            (Working, None)
        );
        assert_eq!(
            go(Working, None, c, turn(false, false, false, false)),
            (InputRequired, NEXT)
        );
        assert_eq!(go(InputRequired, NEXT, c, accepted), (Working, None));
        assert_eq!(
            go(Working, None, c, turn(false, false, true, false)),
            (Completed, None)
        );
    }

    #[test]
    fn a_conversation_with_met_criteria_waits_for_its_sub_tasks() {
        let c = Lifecycle::Conversation;
        let t = next(&Working, None, c, turn(false, false, true, true)).expect("allowed");
        assert_eq!((t.to, t.runs_agent), (Working, false));
        assert_eq!(go(Working, None, c, E::SubtaskChanged), (Working, None));
        assert_eq!(
            go(Working, None, c, turn(false, false, true, false)),
            (Completed, None)
        );
    }

    #[test]
    fn a_delegated_task_completes_when_its_turn_ends_without_tool_calls() {
        let d = Lifecycle::Delegated;
        assert_eq!(
            go(Working, None, d, turn(false, false, false, false)),
            (Completed, None)
        );
        // Criteria do not matter for a delegated task, unresolved children do.
        assert_eq!(
            go(Working, None, d, turn(false, false, false, true)),
            (Working, None)
        );
        assert_eq!(
            go(Working, None, d, turn(true, false, false, false)),
            (Working, None)
        );
    }

    #[test]
    fn a_help_request_waits_for_the_asked_participant() {
        for lifecycle in [Lifecycle::Conversation, Lifecycle::Delegated] {
            assert_eq!(
                go(Working, None, lifecycle, turn(true, true, true, false)),
                (InputRequired, ANSWER)
            );
            let other = next(
                &InputRequired,
                ANSWER,
                lifecycle,
                E::MessageAccepted {
                    answers_help_request: false,
                },
            )
            .expect("recorded");
            assert!(!other.changes(&InputRequired, ANSWER));
            assert_eq!(
                (other.to, other.sub_state, other.runs_agent),
                (InputRequired, ANSWER, false)
            );
            let answer = next(
                &InputRequired,
                ANSWER,
                lifecycle,
                E::MessageAccepted {
                    answers_help_request: true,
                },
            )
            .expect("resumes");
            assert_eq!((answer.to, answer.runs_agent), (Working, true));
            // A sub-task note does not interrupt the wait for an answer.
            assert_eq!(
                go(InputRequired, ANSWER, lifecycle, E::SubtaskChanged),
                (InputRequired, ANSWER)
            );
        }
    }

    #[test]
    fn sub_task_notes_wake_a_conversation_waiting_for_the_next_message() {
        let t = next(
            &InputRequired,
            NEXT,
            Lifecycle::Conversation,
            E::SubtaskChanged,
        )
        .expect("allowed");
        assert_eq!((t.to, t.runs_agent), (Working, true));
    }

    #[test]
    fn commands_never_run_the_agent() {
        let c = Lifecycle::Conversation;
        let first = next(&Submitted, None, c, E::CommandApplied).expect("allowed");
        assert_eq!(
            (first.to, first.sub_state, first.runs_agent),
            (InputRequired, NEXT, false)
        );
        for (state, sub) in [
            (Working, None),
            (InputRequired, ANSWER),
            (InputRequired, NEXT),
            (AuthRequired, None),
        ] {
            let t = next(&state, sub, c, E::CommandApplied).expect("allowed");
            assert!(!t.changes(&state, sub) && !t.runs_agent, "{state:?}");
        }
    }

    #[test]
    fn an_agent_that_declares_its_task_done_completes_it_unless_a_sub_task_is_unresolved() {
        let done = E::AgentCompleted {
            unresolved_sub_tasks: false,
        };
        let waiting = E::AgentCompleted {
            unresolved_sub_tasks: true,
        };
        for lifecycle in [Lifecycle::Conversation, Lifecycle::Delegated] {
            // Criteria do not matter: the agent says the task is done.
            assert_eq!(go(Working, None, lifecycle, done), (Completed, None));
            let t = next(&Working, None, lifecycle, waiting).expect("allowed");
            assert_eq!((t.to, t.sub_state, t.runs_agent), (Working, None, false));
            assert_eq!(
                go(Working, None, lifecycle, E::SubtaskChanged),
                (Working, None)
            );
            assert_eq!(go(Working, None, lifecycle, done), (Completed, None));
        }
        // Only a working task ends a turn.
        for (state, sub) in [
            (Submitted, None),
            (InputRequired, NEXT),
            (AuthRequired, None),
        ] {
            assert!(
                matches!(
                    next(&state, sub, Lifecycle::Conversation, done),
                    Err(DomainError::TransitionNotAllowed { .. })
                ),
                "{state:?}"
            );
        }
    }

    #[test]
    fn failures() {
        for lifecycle in [Lifecycle::Conversation, Lifecycle::Delegated] {
            assert_eq!(
                go(Working, None, lifecycle, E::TurnLimitReached),
                (Failed, None)
            );
            assert_eq!(go(Working, None, lifecycle, E::RunFailed), (Failed, None));
        }
    }

    #[test]
    fn participant_tasks() {
        let d = Lifecycle::Delegated;
        assert_eq!(
            go(Submitted, None, d, E::AwaitAssignee),
            (InputRequired, ANSWER)
        );
        assert_eq!(
            go(InputRequired, ANSWER, d, E::AssigneeReplied),
            (Completed, None)
        );
    }

    #[test]
    fn cancel_and_reject() {
        for state in NON_TERMINAL {
            assert_eq!(
                go(state.clone(), None, Lifecycle::Conversation, E::Cancel),
                (Canceled, None)
            );
        }
        assert_eq!(
            go(Submitted, None, Lifecycle::Conversation, E::Reject),
            (Rejected, None)
        );
        assert_eq!(
            go(Working, None, Lifecycle::Conversation, E::Reject),
            (Rejected, None)
        );
    }

    #[test]
    fn terminal_states_accept_nothing() {
        let events = [
            E::MessageAccepted {
                answers_help_request: true,
            },
            E::CommandApplied,
            E::SubtaskChanged,
            turn(false, false, true, false),
            E::AgentCompleted {
                unresolved_sub_tasks: false,
            },
            E::TurnLimitReached,
            E::RunFailed,
            E::AwaitAssignee,
            E::AssigneeReplied,
            E::Reject,
        ];
        for state in TERMINAL {
            for event in events {
                assert_eq!(
                    next(state, None, Lifecycle::Conversation, event),
                    Err(DomainError::TaskTerminal(state.clone()))
                );
            }
            let err = next(state, None, Lifecycle::Conversation, E::Cancel).expect_err("terminal");
            assert_eq!(err, DomainError::NotCancelable(state.clone()));
        }
        assert_eq!(
            DomainError::TaskTerminal(Completed).to_string(),
            "the task is in a terminal state (TASK_STATE_COMPLETED)"
        );
    }

    #[test]
    fn events_out_of_place_are_refused() {
        let c = Lifecycle::Conversation;
        let refused = [
            (Submitted, turn(false, false, false, false)),
            (InputRequired, turn(false, false, false, false)),
            (Submitted, E::TurnLimitReached),
            (InputRequired, E::RunFailed),
            (
                InputRequired,
                E::AgentCompleted {
                    unresolved_sub_tasks: false,
                },
            ),
            (Working, E::AwaitAssignee),
            (Working, E::AssigneeReplied),
            (InputRequired, E::Reject),
            (Submitted, E::SubtaskChanged),
        ];
        for (state, event) in refused {
            assert!(
                matches!(
                    next(&state, None, c, event),
                    Err(DomainError::TransitionNotAllowed { .. })
                ),
                "{state:?} {event:?}"
            );
        }
    }

    #[test]
    fn every_transition_names_its_own_state_among_its_from_states() {
        let events = [
            E::MessageAccepted {
                answers_help_request: true,
            },
            E::MessageAccepted {
                answers_help_request: false,
            },
            E::CommandApplied,
            E::SubtaskChanged,
            turn(false, false, false, false),
            turn(false, false, true, false),
            turn(false, false, true, true),
            turn(true, false, false, false),
            turn(true, true, false, false),
            E::AgentCompleted {
                unresolved_sub_tasks: false,
            },
            E::AgentCompleted {
                unresolved_sub_tasks: true,
            },
            E::TurnLimitReached,
            E::RunFailed,
            E::AwaitAssignee,
            E::AssigneeReplied,
            E::Cancel,
            E::Reject,
        ];
        for state in KNOWN_STATES {
            for sub in [None, NEXT, ANSWER] {
                for lifecycle in [Lifecycle::Conversation, Lifecycle::Delegated] {
                    for event in events {
                        if let Ok(t) = next(&state, sub, lifecycle, event) {
                            assert!(t.from.contains(&state), "{state:?} {event:?} {t:?}");
                            assert!(t.from.iter().all(|s| !s.is_terminal()));
                            assert_eq!(
                                t.sub_state.is_some(),
                                t.to == InputRequired,
                                "{state:?} {sub:?} {event:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn state_names() {
        for state in KNOWN_STATES {
            let name = state_name(&state);
            assert_eq!(parse_state(name), Some(state.clone()));
            assert_eq!(
                serde_json::to_value(&state).expect("serialises"),
                serde_json::json!(name)
            );
        }
        assert_eq!(parse_state("working"), None);
        assert_eq!(short_state_name(&InputRequired), "INPUT_REQUIRED");
    }

    #[test]
    fn sub_task_notes() {
        assert_eq!(
            subtask_note("t.1", &Failed, "turn limit reached"),
            "Sub-task t.1 is FAILED: turn limit reached"
        );
        let long = "x".repeat(600);
        assert_eq!(
            subtask_note("t.1", &Completed, &long).len(),
            "Sub-task t.1 is COMPLETED: ".len() + 500
        );
    }

    /// A parent with a plan of independent steps named `names`, each active and linked to
    /// the child `p.1`, which is also its sub-task.
    fn parent_of_p1(names: &[&str]) -> TaskExtension {
        let mut parent = TaskExtension::new("p", "g");
        parent.sub_tasks.push(TaskRef::local("p.1"));
        let args: Vec<crate::plan::PlanStepArgs> = names
            .iter()
            .map(|name| crate::plan::PlanStepArgs {
                name: (*name).into(),
                description: String::new(),
                depends_on: vec![],
            })
            .collect();
        let mut plan = crate::plan::build(&args).expect("valid");
        for step in &mut plan.steps {
            step.state = StepState::Active;
            step.linked_tasks.push(TaskRef::local("p.1"));
        }
        parent.plan = Some(plan);
        parent
    }

    #[test]
    fn mirroring_a_child_into_its_parent() {
        let mut parent = parent_of_p1(&["A"]);
        parent.sub_tasks.push(TaskRef::local("p.2"));
        assert!(mirror_sub_task(&mut parent, "p.1", &InputRequired, ANSWER));
        assert_eq!(
            parent.sub_tasks[0].state.as_deref(),
            Some("TASK_STATE_INPUT_REQUIRED")
        );
        assert_eq!(parent.sub_tasks[0].sub_state, ANSWER);
        assert_eq!(parent.sub_tasks[1].state, None);
        let linked = &parent.plan.as_ref().expect("plan").steps[0].linked_tasks[0];
        assert_eq!(
            (linked.state.as_deref(), linked.sub_state),
            (Some("TASK_STATE_INPUT_REQUIRED"), ANSWER)
        );
        assert!(
            !mirror_sub_task(&mut parent, "p.1", &InputRequired, ANSWER),
            "no change, no write"
        );
        assert!(mirror_sub_task(&mut parent, "p.1", &Completed, ANSWER));
        assert_eq!(
            parent.sub_tasks[0].sub_state, None,
            "only interrupted states carry a sub-state"
        );
        assert_eq!(
            parent.plan.as_ref().expect("plan").steps[0].state,
            StepState::Active,
            "a completed child leaves its step to the agent"
        );
        assert!(!mirror_sub_task(&mut parent, "p.9", &Completed, None));
    }

    #[test]
    fn a_child_that_fails_fails_its_step_unless_the_step_is_done() {
        for ended in [Failed, Canceled, Rejected] {
            let mut parent = parent_of_p1(&["A", "B"]);
            parent.plan.as_mut().expect("plan").steps[1].state = StepState::Done;
            assert!(mirror_sub_task(&mut parent, "p.1", &ended, None));
            let steps = &parent.plan.as_ref().expect("plan").steps;
            assert_eq!(steps[0].state, StepState::Failed, "{ended:?}");
            assert_eq!(steps[1].state, StepState::Done, "a done step stays done");
        }
    }
}
