//! Task envelopes: how clients create or edit the extension object (SPEC section 3).
//!
//! A message may carry one envelope data part, in either form:
//! - `application/vnd.tiny-harness.task+json` whose `data` is an extension object (full for a
//!   new task, partial for an existing one);
//! - the upstream `application/vnd.tiny-harness.event+json` whose `data` is exactly
//!   `{"kind", "payload"}`: `task` (as above), or `status_update` / `artifact_update`, which
//!   are recorded into the task's history as framed events.
//!
//! An envelope that sets `lifecycle`, `model` or `reasoning_effort` is refused whole, as is an
//! edit of any key other than `name`, `description`, `acceptance_criteria` (any participant but
//! a watcher) and `participants` (admins only). Nothing of a refused envelope is applied.

use a2a::{Part, PartContent};
use serde_json::{Map, Value};

use crate::error::DomainError;
use crate::extension::{
    Lifecycle, Participant, ParticipantKind, Role, SERVER_CONTROLLED_FIELDS, TaskExtension,
};
use crate::ids::{self, IdKind};
use crate::policy::{self, Action};
use crate::{EVENT_MEDIA_TYPE, TASK_MEDIA_TYPE};

/// Fields any participant except a watcher may change on an existing task.
pub const OPEN_FIELDS: [&str; 3] = ["name", "description", "acceptance_criteria"];
/// Fields only an admin may change on an existing task.
pub const ADMIN_FIELDS: [&str; 1] = ["participants"];

/// The longest default task name, in characters.
const DEFAULT_NAME_CHARS: usize = 60;
/// The longest default goal, in bytes. The goal is the first message's text, kept in the task
/// document (which every write rewrites); a longer text is cut there, and the whole message
/// stays in the history.
pub const DEFAULT_GOAL_BYTES: usize = 32 * 1024;

/// `text` cut to at most `max` bytes on a character boundary, marked with `…` when cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[derive(Debug, Clone, PartialEq)]
pub enum Envelope {
    /// An extension object, full (new task) or partial (edit).
    Task(Map<String, Value>),
    /// An upstream `status_update` or `artifact_update` event sent by a participant.
    Recorded {
        kind: RecordedKind,
        payload: Map<String, Value>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordedKind {
    StatusUpdate,
    ArtifactUpdate,
}

impl RecordedKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RecordedKind::StatusUpdate => "status_update",
            RecordedKind::ArtifactUpdate => "artifact_update",
        }
    }
}

/// Finds the message's envelope, if any. Two envelope parts, or a malformed one, are refused.
pub fn find_envelope(parts: &[Part]) -> Result<Option<Envelope>, DomainError> {
    let mut found = None;
    for part in parts {
        let envelope = match part.media_type.as_deref() {
            Some(TASK_MEDIA_TYPE) => Envelope::Task(data_object(part, TASK_MEDIA_TYPE)?),
            Some(EVENT_MEDIA_TYPE) => event_envelope(data_object(part, EVENT_MEDIA_TYPE)?)?,
            _ => continue,
        };
        if found.replace(envelope).is_some() {
            return Err(DomainError::InvalidEnvelope(
                "a message may carry at most one envelope".to_owned(),
            ));
        }
    }
    Ok(found)
}

fn data_object(part: &Part, media_type: &str) -> Result<Map<String, Value>, DomainError> {
    match &part.content {
        PartContent::Data(Value::Object(map)) => Ok(map.clone()),
        PartContent::Data(_) => Err(DomainError::InvalidEnvelope(format!(
            "the data of a {media_type} part must be an object"
        ))),
        _ => Err(DomainError::InvalidEnvelope(format!(
            "a {media_type} part must be a data part"
        ))),
    }
}

fn event_envelope(mut data: Map<String, Value>) -> Result<Envelope, DomainError> {
    let extra: Vec<&str> = data
        .keys()
        .map(String::as_str)
        .filter(|k| !matches!(*k, "kind" | "payload"))
        .collect();
    if !extra.is_empty() {
        return Err(DomainError::InvalidEnvelope(format!(
            "unexpected key(s): {}",
            sorted(extra)
        )));
    }
    let kind = match data.get("kind") {
        Some(Value::String(kind)) => kind.clone(),
        Some(_) => {
            return Err(DomainError::InvalidEnvelope(
                "kind must be a string".to_owned(),
            ));
        }
        None => return Err(DomainError::InvalidEnvelope("kind is required".to_owned())),
    };
    let payload = match data.remove("payload") {
        Some(Value::Object(payload)) => payload,
        Some(_) => {
            return Err(DomainError::InvalidEnvelope(
                "payload must be an object".to_owned(),
            ));
        }
        None => {
            return Err(DomainError::InvalidEnvelope(
                "payload is required".to_owned(),
            ));
        }
    };
    match kind.as_str() {
        "task" => Ok(Envelope::Task(payload)),
        "status_update" => Ok(Envelope::Recorded {
            kind: RecordedKind::StatusUpdate,
            payload,
        }),
        "artifact_update" => Ok(Envelope::Recorded {
            kind: RecordedKind::ArtifactUpdate,
            payload,
        }),
        other => Err(DomainError::InvalidEnvelope(format!(
            "unknown kind {other:?}; expected task, status_update or artifact_update"
        ))),
    }
}

fn sorted(mut keys: Vec<&str>) -> String {
    keys.sort_unstable();
    keys.join(", ")
}

fn refuse_server_controlled(payload: &Map<String, Value>) -> Result<(), DomainError> {
    let set: Vec<&str> = SERVER_CONTROLLED_FIELDS
        .into_iter()
        .filter(|k| payload.contains_key(*k))
        .collect();
    if set.is_empty() {
        Ok(())
    } else {
        Err(DomainError::ServerControlledField(sorted(set)))
    }
}

/// The name and goal a task takes from a message's text when nothing else names it: the
/// first line (at most 60 characters, `task` when empty), and the text (cut at
/// [`DEFAULT_GOAL_BYTES`]).
pub fn default_name_and_goal(text: &str) -> (String, String) {
    let first_line = text.trim().lines().next().unwrap_or("").trim();
    let name: String = first_line.chars().take(DEFAULT_NAME_CHARS).collect();
    let name = if name.is_empty() {
        "task".to_owned()
    } else {
        name
    };
    (name, cut(text, DEFAULT_GOAL_BYTES))
}

/// The extension of a task created by `sender`'s first message.
///
/// Without an envelope: `name` is the first line of `text` (at most 60 characters, `task` when
/// empty), `goal` is `text` (cut at [`DEFAULT_GOAL_BYTES`]), the sender is the reporter and the
/// agent the assignee. With one:
/// the object is validated against the schema; the agent is appended as assignee when no
/// participant is one, and the sender as reporter when not listed (otherwise its own task
/// would be invisible to it and its first message refused). The lifecycle is set by the
/// server: `delegated` for a task with a parent, else `conversation`.
pub fn new_task_extension(
    sender: &str,
    agent_id: &str,
    text: &str,
    envelope: Option<&Map<String, Value>>,
) -> Result<TaskExtension, DomainError> {
    let mut ext = match envelope {
        None => {
            let (name, goal) = default_name_and_goal(text);
            let mut ext = TaskExtension::new(name, goal);
            ext.participants.push(Participant::new(
                sender,
                ParticipantKind::Human,
                Role::Reporter,
            ));
            ext
        }
        Some(payload) => {
            refuse_server_controlled(payload)?;
            let mut ext = TaskExtension::from_value(&Value::Object(payload.clone()))?;
            refuse_local_links(&ext)?;
            check_participant_ids(&ext)?;
            if ext.participant(sender).is_none() {
                ext.participants.push(Participant::new(
                    sender,
                    ParticipantKind::Human,
                    Role::Reporter,
                ));
            }
            ext
        }
    };
    if !ext.has_assignee() {
        match ext.participant_mut(agent_id) {
            // Listed in another role: the agent still becomes the assignee, without a duplicate.
            Some(agent) => agent.role = Role::Assignee,
            None => ext.participants.push(Participant::new(
                agent_id,
                ParticipantKind::Agent,
                Role::Assignee,
            )),
        }
    }
    // The service's own id is always its agent, whatever kind the envelope said.
    if let Some(agent) = ext.participant_mut(agent_id) {
        agent.kind = ParticipantKind::Agent;
    }
    ext.lifecycle = Some(if ext.parent_tasks.is_empty() {
        Lifecycle::Conversation
    } else {
        Lifecycle::Delegated
    });
    ext.check_semantics()?;
    Ok(ext)
}

/// Links to tasks on this service are the service's own (SPEC section 9): a client may name
/// tasks on other agents (`agent` set), as information, but never a task here.
fn refuse_local_links(ext: &TaskExtension) -> Result<(), DomainError> {
    let mut local = Vec::new();
    if let Some(i) = ext.parent_tasks.iter().position(|r| r.agent.is_none()) {
        local.push(format!("parent_tasks[{i}]"));
    }
    if let Some(i) = ext.sub_tasks.iter().position(|r| r.agent.is_none()) {
        local.push(format!("sub_tasks[{i}]"));
    }
    if let Some(plan) = &ext.plan {
        for (i, step) in plan.steps.iter().enumerate() {
            if let Some(j) = step.linked_tasks.iter().position(|r| r.agent.is_none()) {
                local.push(format!("plan.steps[{i}].linked_tasks[{j}]"));
                break;
            }
        }
    }
    if local.is_empty() {
        Ok(())
    } else {
        Err(DomainError::LinkNotAllowed(local.join(", ")))
    }
}

/// Participant ids obey the limits of every client-sent id.
fn check_participant_ids(ext: &TaskExtension) -> Result<(), DomainError> {
    for (i, p) in ext.participants.iter().enumerate() {
        ids::check(IdKind::Participant, &format!("participants[{i}].id"), &p.id)?;
    }
    Ok(())
}

/// The result of applying an envelope to an existing task.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvelopeEdit {
    pub task: TaskExtension,
    /// The top-level keys whose values changed, in schema order.
    pub changed: Vec<&'static str>,
}

impl EnvelopeEdit {
    /// Participant or role changes need the store's conditional write on the actor's role.
    pub fn changes_participants(&self) -> bool {
        self.changed.contains(&"participants")
    }
}

/// Applies `actor`'s envelope to an existing task: checks, shallow merge, re-validation.
/// A change of `participants` may not remove the service's agent (`agent_id`) or the last
/// admin.
pub fn apply_envelope(
    current: &TaskExtension,
    actor: &str,
    agent_id: &str,
    payload: &Map<String, Value>,
) -> Result<EnvelopeEdit, DomainError> {
    policy::authorize(current, actor, Action::Send)?;
    refuse_server_controlled(payload)?;
    let not_editable: Vec<&str> = payload
        .keys()
        .map(String::as_str)
        .filter(|k| !OPEN_FIELDS.contains(k) && !ADMIN_FIELDS.contains(k))
        .collect();
    if !not_editable.is_empty() {
        return Err(DomainError::FieldNotEditable(sorted(not_editable)));
    }
    if OPEN_FIELDS.iter().any(|k| payload.contains_key(*k)) {
        policy::authorize(current, actor, Action::EditTask)?;
    }
    if ADMIN_FIELDS.iter().any(|k| payload.contains_key(*k)) {
        policy::authorize(current, actor, Action::EditParticipants)?;
    }
    let before = current.to_value();
    let mut merged = before.clone();
    if let Value::Object(map) = &mut merged {
        for (key, value) in payload {
            map.insert(key.clone(), value.clone());
        }
    }
    let task = TaskExtension::from_value(&merged)?;
    if payload.contains_key("participants") {
        check_participant_ids(&task)?;
        policy::check_roster(current, &task, Some(agent_id))?;
    }
    let changed = OPEN_FIELDS
        .into_iter()
        .chain(ADMIN_FIELDS)
        .filter(|k| before.get(*k) != merged.get(*k))
        .collect();
    Ok(EnvelopeEdit { task, changed })
}

/// Whether `actor` may send a `status_update` / `artifact_update` envelope to the task: not
/// a watcher (watchers comment; a reported event is recorded as the actor's report).
pub fn check_recorded(current: &TaskExtension, actor: &str) -> Result<(), DomainError> {
    policy::authorize(current, actor, Action::SendEvent)?;
    Ok(())
}

/// How a recorded `status_update` / `artifact_update` envelope enters the history: framed, so
/// the agent reads it as a participant's report rather than as the service's own event.
pub fn render_recorded(kind: RecordedKind, sender: &str, payload: &Map<String, Value>) -> String {
    format!(
        "[{} from {sender}] {}",
        kind.as_str(),
        Value::Object(payload.clone())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::roles;
    use serde_json::json;

    fn data_part(media_type: &str, data: Value) -> Part {
        Part::data(data).with_media_type(media_type)
    }

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    /// A new task of the service `agent`, opened by `sender` with the task envelope `payload`.
    fn created_by(sender: &str, payload: Value) -> TaskExtension {
        new_task_extension(sender, "agent", "", Some(&obj(payload))).expect("ok")
    }

    fn team() -> TaskExtension {
        let mut ext = TaskExtension::from_value(&json!({
            "name": "Refund", "goal": "Refund order 48213", "lifecycle": "conversation",
            "participants": [
                {"id": "alice", "kind": "human", "role": "reporter"},
                {"id": "ops", "kind": "human", "role": "admin"},
                {"id": "agent", "kind": "agent", "role": "assignee"},
                {"id": "wes", "kind": "human", "role": "watcher"}],
            "plan": {"steps": [{"id": "a", "name": "A"}]}
        }))
        .expect("valid");
        ext.model = Some("m1".into());
        ext
    }

    #[test]
    fn finds_both_envelope_forms() {
        let task = find_envelope(&[
            Part::text("hi"),
            data_part(TASK_MEDIA_TYPE, json!({"name": "x", "goal": "y"})),
        ]);
        assert_eq!(
            task,
            Ok(Some(Envelope::Task(obj(json!({"name": "x", "goal": "y"})))))
        );
        let event = find_envelope(&[data_part(
            EVENT_MEDIA_TYPE,
            json!({"kind": "task", "payload": {"name": "Audit"}}),
        )]);
        assert_eq!(
            event,
            Ok(Some(Envelope::Task(obj(json!({"name": "Audit"})))))
        );
        let status = find_envelope(&[data_part(
            EVENT_MEDIA_TYPE,
            json!({"kind": "status_update", "payload": {"s": 1}}),
        )]);
        assert_eq!(
            status,
            Ok(Some(Envelope::Recorded {
                kind: RecordedKind::StatusUpdate,
                payload: obj(json!({"s": 1}))
            }))
        );
        assert_eq!(
            find_envelope(&[
                Part::text("plain"),
                data_part("application/json", json!({}))
            ]),
            Ok(None)
        );
    }

    #[test]
    fn malformed_envelopes_are_refused_with_reasons() {
        let cases = [
            (
                vec![data_part(
                    EVENT_MEDIA_TYPE,
                    json!({"kind": "bogus", "payload": {}}),
                )],
                "invalid event envelope: unknown kind \"bogus\"; expected task, status_update or artifact_update",
            ),
            (
                vec![data_part(
                    EVENT_MEDIA_TYPE,
                    json!({"kind": "task", "payload": {}, "x": 1, "a": 2}),
                )],
                "invalid event envelope: unexpected key(s): a, x",
            ),
            (
                vec![data_part(EVENT_MEDIA_TYPE, json!({"payload": {}}))],
                "invalid event envelope: kind is required",
            ),
            (
                vec![data_part(EVENT_MEDIA_TYPE, json!({"kind": "task"}))],
                "invalid event envelope: payload is required",
            ),
            (
                vec![data_part(
                    EVENT_MEDIA_TYPE,
                    json!({"kind": "task", "payload": []}),
                )],
                "invalid event envelope: payload must be an object",
            ),
            (
                vec![data_part(TASK_MEDIA_TYPE, json!("x"))],
                "invalid event envelope: the data of a application/vnd.tiny-harness.task+json part must be an object",
            ),
            (
                vec![Part::text("{}").with_media_type(TASK_MEDIA_TYPE)],
                "invalid event envelope: a application/vnd.tiny-harness.task+json part must be a data part",
            ),
            (
                vec![
                    data_part(TASK_MEDIA_TYPE, json!({})),
                    data_part(TASK_MEDIA_TYPE, json!({})),
                ],
                "invalid event envelope: a message may carry at most one envelope",
            ),
        ];
        for (parts, text) in cases {
            assert_eq!(find_envelope(&parts).expect_err(text).to_string(), text);
        }
    }

    #[test]
    fn a_new_task_without_an_envelope() {
        let ext = new_task_extension(
            "alice",
            "tiny-harness",
            "Refund order 48213\nIt was late",
            None,
        )
        .expect("ok");
        assert_eq!(
            ext.to_value(),
            json!({"name": "Refund order 48213", "type": null, "goal": "Refund order 48213\nIt was late",
                   "description": "", "acceptance_criteria": [],
                   "participants": [{"id": "alice", "kind": "human", "role": "reporter", "display_name": ""},
                                    {"id": "tiny-harness", "kind": "agent", "role": "assignee", "display_name": ""}],
                   "parent_tasks": [], "sub_tasks": [], "plan": null,
                   "lifecycle": "conversation", "model": null, "reasoning_effort": null})
        );
        let long = "x".repeat(80);
        assert_eq!(
            new_task_extension("a", "g", &long, None)
                .expect("ok")
                .name
                .len(),
            60
        );
        assert_eq!(
            new_task_extension("a", "g", "  \n ", None)
                .expect("ok")
                .name,
            "task"
        );
        assert_eq!(
            new_task_extension("a", "g", "é".repeat(70).as_str(), None)
                .expect("ok")
                .name
                .chars()
                .count(),
            60
        );
        // A huge first message is the goal only up to a cap (the whole text is in the history).
        let huge = "é".repeat(DEFAULT_GOAL_BYTES);
        let goal = new_task_extension("a", "g", &huge, None).expect("ok").goal;
        assert!(
            goal.len() <= DEFAULT_GOAL_BYTES && goal.ends_with('…'),
            "{}",
            goal.len()
        );
        assert_eq!(
            new_task_extension("a", "g", "short", None)
                .expect("ok")
                .goal,
            "short"
        );
    }

    #[test]
    fn a_new_task_with_an_envelope() {
        let ext = created_by(
            "alice",
            json!({"name": "Audit", "goal": "Audit the ledger"}),
        );
        assert_eq!(
            roles(&ext),
            [("alice", Role::Reporter), ("agent", Role::Assignee)]
        );
        assert_eq!(ext.lifecycle, Some(Lifecycle::Conversation));

        for (envelope_roster, expected) in [
            // An envelope with its own assignee gets no agent appended; the listed sender keeps its role.
            (
                json!([{"id": "bob", "kind": "human", "role": "admin"},
                       {"id": "carol", "kind": "human", "role": "assignee"}]),
                [("bob", Role::Admin), ("carol", Role::Assignee)],
            ),
            // The agent listed in another role becomes the assignee when nobody else is.
            (
                json!([{"id": "agent", "kind": "agent", "role": "watcher"}]),
                [("agent", Role::Assignee), ("bob", Role::Reporter)],
            ),
        ] {
            let ext = created_by(
                "bob",
                json!({"name": "n", "goal": "g", "participants": envelope_roster}),
            );
            assert_eq!(roles(&ext), expected, "{expected:?}");
        }

        // A parent on another agent is information the client may give.
        let child = created_by(
            "bob",
            json!({"name": "n", "goal": "g",
            "parent_tasks": [{"task_id": "p", "agent": {"kind": "agent", "id": "planner"}}]}),
        );
        assert_eq!(child.lifecycle, Some(Lifecycle::Delegated));

        // The service's own id is its agent, whatever kind the envelope gave it.
        let ext = created_by(
            "bob",
            json!({"name": "n", "goal": "g", "participants": [
            {"id": "agent", "kind": "human", "role": "watcher"}]}),
        );
        assert_eq!(
            ext.participant("agent").map(|p| (p.kind, p.role)),
            Some((ParticipantKind::Agent, Role::Assignee))
        );
    }

    #[test]
    fn a_new_task_may_not_link_tasks_on_this_service() {
        let remote = json!({"kind": "agent", "id": "billing"});
        let cases = [
            (
                json!({"name": "x", "goal": "y", "sub_tasks": [{"task_id": "victim"}]}),
                "sub_tasks[0]",
            ),
            (
                json!({"name": "x", "goal": "y", "parent_tasks": [
                    {"task_id": "r", "agent": remote}, {"task_id": "victim"}]}),
                "parent_tasks[1]",
            ),
            (
                json!({"name": "x", "goal": "y", "plan": {"steps": [
                    {"id": "a", "name": "A"},
                    {"id": "b", "name": "B", "linked_tasks": [{"task_id": "victim"}]}]}}),
                "plan.steps[1].linked_tasks[0]",
            ),
            (
                json!({"name": "x", "goal": "y", "sub_tasks": [{"task_id": "v1"}],
                       "parent_tasks": [{"task_id": "v2", "agent": null}]}),
                "parent_tasks[0], sub_tasks[0]",
            ),
        ];
        for (payload, named) in cases {
            let err = new_task_extension("a", "agent", "", Some(&obj(payload.clone())))
                .expect_err("refused");
            assert_eq!(
                err,
                DomainError::LinkNotAllowed(named.to_owned()),
                "{payload}"
            );
            assert!(
                err.to_string().starts_with(&format!(
                    "task envelope cannot set {named}: links to tasks on this service"
                )),
                "{err}"
            );
        }
        // Links to tasks on other agents are kept as they were given.
        let ext = new_task_extension(
            "a",
            "agent",
            "",
            Some(&obj(json!({"name": "x", "goal": "y",
                "sub_tasks": [{"task_id": "r1", "agent": remote, "state": "TASK_STATE_WORKING"}],
                "plan": {"steps": [{"id": "a", "name": "A",
                    "linked_tasks": [{"task_id": "r1", "agent": remote}]}]}}))),
        )
        .expect("remote links are information");
        assert_eq!(ext.sub_tasks[0].task_id, "r1");
        assert!(ext.sub_tasks[0].agent.is_some());
    }

    #[test]
    fn participant_ids_are_bounded() {
        for (id, why) in [
            ("", "is blank"),
            (&*"p".repeat(300), "longer than 256 bytes"),
        ] {
            let payload = obj(json!({"name": "x", "goal": "y", "participants": [
                {"id": "a", "kind": "human", "role": "reporter"},
                {"id": id, "kind": "human", "role": "watcher"}]}));
            let err = new_task_extension("a", "agent", "", Some(&payload)).expect_err("refused");
            assert!(
                err.to_string()
                    .starts_with("invalid id: participants[1].id")
                    && err.to_string().contains(why),
                "{err}"
            );
            let edit = obj(json!({"participants": [
                {"id": "ops", "kind": "human", "role": "admin"},
                {"id": id, "kind": "human", "role": "watcher"}]}));
            let err = apply_envelope(&team(), "ops", "agent", &edit).expect_err("refused");
            assert!(err.to_string().contains(why), "{err}");
        }
    }

    #[test]
    fn watchers_may_not_send_event_envelopes() {
        let task = team();
        assert_eq!(
            check_recorded(&task, "wes").map_err(|e| e.to_string()),
            Err("a watcher may not send event envelopes".to_owned())
        );
        assert!(check_recorded(&task, "alice").is_ok());
        assert!(check_recorded(&task, "mallory").is_err());
    }

    #[test]
    fn new_task_envelope_refusals() {
        let cases = [
            (
                json!({"name": "x", "goal": "y", "model": "m"}),
                "task envelope cannot set server-controlled field(s): model",
            ),
            (
                json!({"name": "x", "goal": "y", "reasoning_effort": null, "lifecycle": "delegated"}),
                "task envelope cannot set server-controlled field(s): lifecycle, reasoning_effort",
            ),
            (
                json!({"name": "x", "unknown": 1}),
                "invalid task extension: /: ",
            ),
            (json!({"name": "x"}), "invalid task extension: /: "),
        ];
        for (payload, text) in cases {
            let err = new_task_extension("a", "agent", "", Some(&obj(payload.clone())))
                .expect_err("refused");
            assert!(err.to_string().starts_with(text), "{payload}: {err}");
        }
    }

    #[test]
    fn open_fields_are_edited_by_any_non_watcher() {
        let current = team();
        let edit = apply_envelope(
            &current,
            "alice",
            "agent",
            &obj(json!({"acceptance_criteria": [{"text": "Refund issued"}],
            "name": "Refund"})),
        )
        .expect("reporter may");
        assert_eq!(edit.changed, ["acceptance_criteria"]);
        assert!(!edit.changes_participants());
        assert_eq!(edit.task.acceptance_criteria[0].text, "Refund issued");
        assert_eq!(
            edit.task.model.as_deref(),
            Some("m1"),
            "untouched fields are kept"
        );
        let met = apply_envelope(
            &edit.task,
            "agent",
            "agent",
            &obj(json!({"acceptance_criteria": [{"text": "Refund issued", "met": true}]})),
        )
        .expect("assignee may");
        assert!(met.task.all_criteria_met());
    }

    #[test]
    fn participants_only_by_an_admin() {
        let current = team();
        let add_bob = obj(json!({"participants": [
            {"id": "alice", "kind": "human", "role": "reporter"},
            {"id": "ops", "kind": "human", "role": "admin"},
            {"id": "agent", "kind": "agent", "role": "assignee"},
            {"id": "bob", "kind": "human", "role": "watcher"}]}));
        let err =
            apply_envelope(&current, "alice", "agent", &add_bob).expect_err("reporter may not");
        assert_eq!(err.to_string(), "only an admin may change participants");
        let edit = apply_envelope(&current, "ops", "agent", &add_bob).expect("admin may");
        assert!(edit.changes_participants());
        let ids: Vec<_> = edit
            .task
            .participants
            .iter()
            .map(|p| p.id.as_str())
            .collect();
        assert_eq!(ids, ["alice", "ops", "agent", "bob"]);
    }

    #[test]
    fn edit_refusals_apply_nothing() {
        let current = team();
        let cases = [
            ("mallory", json!({"name": "x"}), "not a participant"),
            (
                "ops",
                json!({"name": "x", "model": "m2"}),
                "task envelope cannot set server-controlled field(s): model",
            ),
            (
                "ops",
                json!({"reasoning_effort": "high"}),
                "task envelope cannot set server-controlled field(s): reasoning_effort",
            ),
            (
                "ops",
                json!({"lifecycle": "delegated"}),
                "task envelope cannot set server-controlled field(s): lifecycle",
            ),
            (
                "ops",
                json!({"name": "x", "plan": null}),
                "task envelope cannot change plan",
            ),
            (
                "ops",
                json!({"sub_tasks": [], "goal": "g", "type": "t"}),
                "task envelope cannot change goal, sub_tasks, type",
            ),
            (
                "wes",
                json!({"description": "d"}),
                "a watcher may not edit this task",
            ),
            (
                "wes",
                json!({"participants": []}),
                "only an admin may change participants",
            ),
            (
                "ops",
                json!({"participants": [
                    {"id": "alice", "kind": "human", "role": "reporter"},
                    {"id": "ops", "kind": "human", "role": "admin"}]}),
                "the service's agent cannot be removed from a task it works on",
            ),
            (
                "ops",
                json!({"participants": [
                    {"id": "alice", "kind": "human", "role": "reporter"},
                    {"id": "ops", "kind": "human", "role": "watcher"},
                    {"id": "agent", "kind": "agent", "role": "assignee"}]}),
                "the last admin cannot be removed or demoted",
            ),
            ("ops", json!({"name": 5}), "invalid task extension: /name: "),
            (
                "ops",
                json!({"participants": [{"id": "x", "kind": "human", "role": "admin"},
                                            {"id": "x", "kind": "human", "role": "watcher"}]}),
                "invalid task extension: /participants: participant id \"x\" appears more than once",
            ),
        ];
        for (actor, payload, text) in cases {
            let err = apply_envelope(&current, actor, "agent", &obj(payload.clone()))
                .expect_err("refused");
            assert!(
                err.to_string().starts_with(text),
                "{actor} {payload}: {err}"
            );
        }
    }

    #[test]
    fn recorded_events_are_framed() {
        let text = render_recorded(RecordedKind::ArtifactUpdate, "alice", &obj(json!({"a": 1})));
        assert_eq!(text, "[artifact_update from alice] {\"a\":1}");
    }
}
