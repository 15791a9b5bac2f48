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
//! | read the audit log          |    no    |    no    |   no    |  yes  |     as its role       |
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
    /// Reading the task's audit log (intake decisions, refusals with excerpts).
    ReadAudit,
}

impl Action {
    pub const ALL: [Action; 9] = [
        Action::Read,
        Action::Send,
        Action::Command,
        Action::SendEvent,
        Action::EditTask,
        Action::EditParticipants,
        Action::ChangeRole,
        Action::Cancel,
        Action::ReadAudit,
    ];

    fn allowed_roles(self) -> &'static [Role] {
        use Role::*;
        match self {
            Action::Read | Action::Send => &[Assignee, Reporter, Watcher, Admin],
            Action::Command | Action::SendEvent | Action::EditTask => &[Assignee, Reporter, Admin],
            Action::EditParticipants | Action::ChangeRole | Action::ReadAudit => &[Admin],
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
            Action::ReadAudit => "read the audit log",
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
        Action::EditParticipants | Action::ChangeRole | Action::ReadAudit => {
            format!("only an admin may {action}")
        }
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

/// Why a change of the participants is refused whatever the actor's role (SPEC section 9).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RosterRefusal {
    #[error("the service's agent cannot be removed from a task it works on")]
    AgentRemoved,
    #[error("the service's agent stays a participant of kind agent")]
    AgentKindChanged,
    #[error("the last admin cannot be removed or demoted")]
    LastAdmin,
}

/// Checks a change of the participants from `before` to `after`: the service's agent
/// (`agent_id`, when the caller knows it) stays on the task as an agent, and a task that has
/// an admin keeps at least one.
pub fn check_roster(
    before: &TaskExtension,
    after: &TaskExtension,
    agent_id: Option<&str>,
) -> Result<(), RosterRefusal> {
    if let Some(agent_id) = agent_id
        && before.participant(agent_id).is_some()
    {
        match after.participant(agent_id) {
            None => return Err(RosterRefusal::AgentRemoved),
            Some(agent) if agent.kind != ParticipantKind::Agent => {
                return Err(RosterRefusal::AgentKindChanged);
            }
            Some(_) => {}
        }
    }
    let admins = |t: &TaskExtension| {
        t.participants
            .iter()
            .filter(|p| p.role == Role::Admin)
            .count()
    };
    if admins(before) > 0 && admins(after) == 0 {
        return Err(RosterRefusal::LastAdmin);
    }
    Ok(())
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
    fn the_agent_stays_and_so_does_an_admin() {
        let before = task();
        let without = |id: &str| {
            let mut t = before.clone();
            t.participants.retain(|p| p.id != id);
            t
        };
        assert_eq!(
            check_roster(&before, &without("bot"), Some("bot")),
            Err(RosterRefusal::AgentRemoved)
        );
        // Another agent participant may go.
        assert!(check_roster(&before, &without("bot"), Some("other")).is_ok());
        let mut human_bot = before.clone();
        if let Some(p) = human_bot.participants.iter_mut().find(|p| p.id == "bot") {
            p.kind = ParticipantKind::Human;
        }
        assert_eq!(
            check_roster(&before, &human_bot, Some("bot")),
            Err(RosterRefusal::AgentKindChanged)
        );
        assert_eq!(
            check_roster(&before, &without("adm"), None),
            Err(RosterRefusal::LastAdmin)
        );
        let mut demoted = before.clone();
        if let Some(p) = demoted.participants.iter_mut().find(|p| p.id == "adm") {
            p.role = Role::Watcher;
        }
        assert_eq!(
            check_roster(&before, &demoted, None).map_err(|e| e.to_string()),
            Err("the last admin cannot be removed or demoted".to_owned())
        );
        // With a second admin, one may go; a task without admins has none to keep.
        let mut two = before.clone();
        two.participants.push(Participant::new(
            "adm2",
            ParticipantKind::Human,
            Role::Admin,
        ));
        let mut one = two.clone();
        one.participants.retain(|p| p.id != "adm");
        assert!(check_roster(&two, &one, None).is_ok());
        assert!(check_roster(&without("adm"), &without("adm"), None).is_ok());
    }

    #[test]
    fn refusals_say_why() {
        let t = task();
        for (who, action, why) in [
            ("stranger", Action::Read, "not a participant"),
            ("wat", Action::Command, "a watcher may not send commands"),
            ("wat", Action::EditTask, "a watcher may not edit this task"),
            (
                "wat",
                Action::SendEvent,
                "a watcher may not send event envelopes",
            ),
            (
                "rep",
                Action::EditParticipants,
                "only an admin may change participants",
            ),
            ("asg", Action::ChangeRole, "only an admin may change roles"),
            (
                "rep",
                Action::ReadAudit,
                "only an admin may read the audit log",
            ),
            (
                "asg",
                Action::Cancel,
                "only a reporter or an admin may cancel this task",
            ),
        ] {
            let refused = authorize(&t, who, action).expect_err("refused");
            assert_eq!(refused.to_string(), why, "{who} {action:?}");
        }
    }
}
