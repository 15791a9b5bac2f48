//! Who may do what on a task: one table, used by every caller.
//!
//! | action                      | assignee | reporter | watcher | admin | agent on its sub-task |
//! |-----------------------------|:--------:|:--------:|:-------:|:-----:|:---------------------:|
//! | read (get, list, subscribe) |   yes    |   yes    |   yes   |  yes  |          yes          |
//! | send a message (comment)    |   yes    |   yes    |   yes   |  yes  |          yes          |
//! | send a `/model` `/effort`   |   yes    |   yes    |   no    |  yes  |     as its role       |
//! | send an event envelope (`status_update`, `artifact_update`) | yes | yes | no | yes | as its role |
//! | envelope: name, description, acceptance_criteria | yes | yes | no | yes | as its role   |
//! | envelope: participants      |    no    |    no    |   no    |  yes  |     as its role       |
//! | change a role               |    no    |    no    |   no    |  yes  |     as its role       |
//! | cancel                      |    no    |   yes    |   no    |  yes  |          yes          |
//!
//! "Agent on its sub-task" is a participant of kind `agent` on a task that has a parent: the
//! agent that spawned a sub-task may cancel it. Anyone not on the task may do nothing; the
//! callers answer reads by a non-participant exactly like a task that does not exist.

use std::fmt;

use crate::extension::{Participant, ParticipantKind, Role, TaskExtension};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Read,
    Send,
    Command,
    SendEvent,
    EditTask,
    EditParticipants,
    ChangeRole,
    Cancel,
}

impl Action {
    pub const ALL: [Action; 8] = [
        Action::Read,
        Action::Send,
        Action::Command,
        Action::SendEvent,
        Action::EditTask,
        Action::EditParticipants,
        Action::ChangeRole,
        Action::Cancel,
    ];

    fn allowed_roles(self) -> &'static [Role] {
        use Role::*;
        match self {
            Action::Read | Action::Send => &[Assignee, Reporter, Watcher, Admin],
            Action::Command | Action::SendEvent | Action::EditTask => &[Assignee, Reporter, Admin],
            Action::EditParticipants | Action::ChangeRole => &[Admin],
            Action::Cancel => &[Reporter, Admin],
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Read => "read this task",
            Action::Send => "send messages to this task",
            Action::Command => "send commands",
            Action::SendEvent => "send event envelopes",
            Action::EditTask => "edit this task",
            Action::EditParticipants => "change participants",
            Action::ChangeRole => "change roles",
            Action::Cancel => "cancel this task",
        })
    }
}

/// Why the policy refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessDenied {
    #[error("not a participant")]
    NotParticipant,
    #[error("{}", role_refusal(*.role, *.action))]
    RoleNotAllowed { role: Role, action: Action },
}

fn role_refusal(role: Role, action: Action) -> String {
    match action {
        Action::EditParticipants | Action::ChangeRole => format!("only an admin may {action}"),
        Action::Cancel => format!("only a reporter or an admin may {action}"),
        _ => format!("a {role} may not {action}"),
    }
}

/// May `participant_id` do `action` on the task? Returns the participant on success.
pub fn authorize<'t>(
    task: &'t TaskExtension,
    participant_id: &str,
    action: Action,
) -> Result<&'t Participant, AccessDenied> {
    let participant = task
        .participant(participant_id)
        .ok_or(AccessDenied::NotParticipant)?;
    let agent_on_own_sub_task = action == Action::Cancel
        && participant.kind == ParticipantKind::Agent
        && !task.parent_tasks.is_empty();
    if action.allowed_roles().contains(&participant.role) || agent_on_own_sub_task {
        Ok(participant)
    } else {
        Err(AccessDenied::RoleNotAllowed {
            role: participant.role,
            action,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extension::TaskRef;

    fn task() -> TaskExtension {
        let mut t = TaskExtension::new("n", "g");
        t.participants = vec![
            Participant::new("asg", ParticipantKind::Human, Role::Assignee),
            Participant::new("rep", ParticipantKind::Human, Role::Reporter),
            Participant::new("wat", ParticipantKind::Human, Role::Watcher),
            Participant::new("adm", ParticipantKind::Human, Role::Admin),
            Participant::new("bot", ParticipantKind::Agent, Role::Assignee),
        ];
        t
    }

    #[test]
    fn the_table() {
        use Action::*;
        let t = task();
        let expect = |who: &str, allowed: &[Action]| {
            for action in Action::ALL {
                let got = authorize(&t, who, action).is_ok();
                assert_eq!(got, allowed.contains(&action), "{who} {action:?}");
            }
        };
        expect("asg", &[Read, Send, Command, SendEvent, EditTask]);
        expect("rep", &[Read, Send, Command, SendEvent, EditTask, Cancel]);
        expect("wat", &[Read, Send]);
        expect("adm", &Action::ALL);
        // On a top-level task the agent is an assignee like any other.
        expect("bot", &[Read, Send, Command, SendEvent, EditTask]);
        expect("stranger", &[]);
    }

    #[test]
    fn the_agent_may_cancel_its_own_sub_task() {
        let mut t = task();
        t.parent_tasks.push(TaskRef::local("parent"));
        assert!(authorize(&t, "bot", Action::Cancel).is_ok());
        // A human assignee of the same sub-task still may not.
        assert!(authorize(&t, "asg", Action::Cancel).is_err());
    }

    #[test]
    fn refusals_say_why() {
        let t = task();
        let msg = |who, action| authorize(&t, who, action).expect_err("refused").to_string();
        assert_eq!(msg("stranger", Action::Read), "not a participant");
        assert_eq!(
            msg("wat", Action::Command),
            "a watcher may not send commands"
        );
        assert_eq!(
            msg("wat", Action::EditTask),
            "a watcher may not edit this task"
        );
        assert_eq!(
            msg("wat", Action::SendEvent),
            "a watcher may not send event envelopes"
        );
        assert_eq!(
            msg("rep", Action::EditParticipants),
            "only an admin may change participants"
        );
        assert_eq!(
            msg("asg", Action::ChangeRole),
            "only an admin may change roles"
        );
        assert_eq!(
            msg("asg", Action::Cancel),
            "only a reporter or an admin may cancel this task"
        );
    }
}
