//! Size rules, and the caps on push configs, every adapter applies the same way.
//!
//! DynamoDB refuses items over 400 KB and transactions over 4 MB. Documents (history
//! messages, artifacts, events) are stored as JSON split into chunks of at most
//! [`CHUNK_BYTES`], so no item approaches the limit and a conversation of any length keeps
//! working; one document may take at most [`MAX_DOCUMENT_BYTES`], and a document over it is
//! refused with a message that names its largest part. The task document (extension, agent
//! state, status) is one item, conditioned on by every write, so it has its own cap.

use std::collections::HashSet;

use a2a::{Artifact, Message, Part, StreamResponse};
use serde::Serialize;

use crate::error::{Conflict, StoreError, StoreResult};
use crate::model::{AuditEntry, Change, PushConfig, TaskRecord};

/// The largest piece of a document one item holds.
pub const CHUNK_BYTES: usize = 256 * 1024;
/// The largest message, artifact or event.
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;
/// The largest task document.
pub const MAX_TASK_BYTES: usize = 300 * 1024;
/// The most document bytes one commit may write (DynamoDB's transaction cap is 4 MB).
pub const MAX_COMMIT_BYTES: usize = 3 * 1024 * 1024;
/// The most push configs one participant may own on one task (every event of the task goes
/// to each: a cap bounds what one caller can make the service send).
pub const MAX_PUSH_CONFIGS_PER_PARTICIPANT: usize = 10;
/// The most push configs one task may have, all its participants' together (configs without
/// owner, from before configs had owners, are not counted).
pub const MAX_PUSH_CONFIGS_PER_TASK: usize = 50;

/// The id a push config is stored under: a config without one is `Invalid`.
pub fn push_config_id(config: &PushConfig) -> StoreResult<String> {
    config
        .id
        .clone()
        .ok_or_else(|| StoreError::Invalid("a push config needs an id".to_owned()))
}

/// Whether one more config may be stored on `task_id` by a participant who owns `mine` of
/// the task's `all` configs with an owner: `TooManyPushConfigs` naming the cap it would
/// pass, the participant's first. (DynamoDB checks the same caps with counters.)
pub fn check_push_config_caps(task_id: &str, mine: usize, all: usize) -> Result<(), Conflict> {
    let over = |per_participant, max| Conflict::TooManyPushConfigs {
        task_id: task_id.to_owned(),
        per_participant,
        max,
    };
    if mine >= MAX_PUSH_CONFIGS_PER_PARTICIPANT {
        return Err(over(true, MAX_PUSH_CONFIGS_PER_PARTICIPANT));
    }
    if all >= MAX_PUSH_CONFIGS_PER_TASK {
        return Err(over(false, MAX_PUSH_CONFIGS_PER_TASK));
    }
    Ok(())
}

fn human(bytes: usize) -> String {
    if bytes >= 1024 * 1024 {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

fn to_json<T: Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Invalid(format!("cannot encode: {e}")))
}

/// The largest part of `parts`: (1-based index, encoded size).
fn largest_part(parts: &[Part]) -> Option<(usize, usize)> {
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            (
                i + 1,
                serde_json::to_string(p).map(|s| s.len()).unwrap_or(0),
            )
        })
        .max_by_key(|&(_, size)| size)
}

fn too_large(what: String, size: usize, parts: &[Part]) -> StoreError {
    let largest = largest_part(parts)
        .map(|(i, s)| format!(" (its largest part, #{i}, is {})", human(s)))
        .unwrap_or_default();
    StoreError::TooLarge(format!(
        "{what} is {}, over the {} a stored message, artifact or event may take{largest}",
        human(size),
        human(MAX_DOCUMENT_BYTES)
    ))
}

fn document<T: Serialize>(
    value: &T,
    what: impl FnOnce() -> String,
    parts: &[Part],
) -> StoreResult<String> {
    let json = to_json(value)?;
    if json.len() > MAX_DOCUMENT_BYTES {
        return Err(too_large(what(), json.len(), parts));
    }
    Ok(json)
}

pub fn encode_message(message: &Message) -> StoreResult<String> {
    document(
        message,
        || format!("message {}", message.message_id),
        &message.parts,
    )
}

pub fn encode_artifact(artifact: &Artifact) -> StoreResult<String> {
    document(
        artifact,
        || format!("artifact {}", artifact.artifact_id),
        &artifact.parts,
    )
}

pub fn encode_event(event: &StreamResponse) -> StoreResult<String> {
    let parts: &[Part] = match event {
        StreamResponse::ArtifactUpdate(a) => &a.artifact.parts,
        StreamResponse::Message(m) => &m.parts,
        StreamResponse::StatusUpdate(s) => s.status.message.as_ref().map_or(&[], |m| &m.parts),
        StreamResponse::Task(_) => &[],
    };
    document(event, || "event".to_owned(), parts)
}

pub fn encode_task(record: &TaskRecord) -> StoreResult<String> {
    if record.status.timestamp.is_none() {
        return Err(StoreError::Invalid(format!(
            "task {} has no status timestamp",
            record.id
        )));
    }
    let json = to_json(record)?;
    if json.len() > MAX_TASK_BYTES {
        return Err(StoreError::TooLarge(format!(
            "task {} is {}, over the {} a task document may take (its plan, participants and status message count)",
            record.id,
            human(json.len()),
            human(MAX_TASK_BYTES)
        )));
    }
    Ok(json)
}

/// Refuses a commit whose documents together exceed [`MAX_COMMIT_BYTES`].
pub fn check_commit_bytes(total: usize) -> StoreResult<()> {
    if total > MAX_COMMIT_BYTES {
        return Err(StoreError::TooLarge(format!(
            "one write would store {}, over the {} a single write may take",
            human(total),
            human(MAX_COMMIT_BYTES)
        )));
    }
    Ok(())
}

/// The documents of one change, encoded and checked against the size rules.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedChange {
    pub task: String,
    pub events: Vec<String>,
    pub history: Vec<String>,
    /// (artifact id, artifact).
    pub artifacts: Vec<(String, String)>,
    pub audit: Vec<(AuditEntry, String)>,
    /// The messages of a creation's inbox items (or of the one queued by an `Enqueue`), in
    /// order.
    pub inbox: Vec<String>,
    pub transcript: Vec<String>,
}

impl EncodedChange {
    fn bytes(&self) -> usize {
        self.inbox.iter().map(String::len).sum::<usize>()
            + self.task.len()
            + self.events.iter().map(String::len).sum::<usize>()
            + self.history.iter().map(String::len).sum::<usize>()
            + self.artifacts.iter().map(|(_, a)| a.len()).sum::<usize>()
            + self.audit.iter().map(|(_, a)| a.len()).sum::<usize>()
            + self.transcript.iter().map(String::len).sum::<usize>()
    }
}

/// Encodes every document of a commit, in change order, before anything is written: a task
/// changed twice, a document over its cap or a commit over [`MAX_COMMIT_BYTES`] is refused
/// here, the same way by every adapter.
pub fn encode_changes(changes: &[Change]) -> StoreResult<Vec<EncodedChange>> {
    let mut seen = HashSet::new();
    let mut encoded = Vec::with_capacity(changes.len());
    for change in changes {
        if !seen.insert(change.task_id()) {
            return Err(StoreError::Invalid(format!(
                "a commit changes task {} twice",
                change.task_id()
            )));
        }
        let (record, events, history, artifacts, audit, transcript, inbox): (
            _,
            _,
            _,
            &[Artifact],
            _,
            &[serde_json::Value],
            Vec<&Message>,
        ) = match change {
            Change::Create(new) => (
                Some(&new.record),
                &new.events[..],
                &new.history[..],
                &[],
                &new.audit[..],
                &[],
                new.inbox.iter().map(|i| &i.message).collect(),
            ),
            Change::Update(update) => (
                Some(update.record.as_ref().unwrap_or(&update.base.record)),
                &update.events[..],
                &update.history[..],
                &update.artifacts[..],
                &update.audit[..],
                &update.transcript[..],
                Vec::new(),
            ),
            Change::Enqueue { item, .. } => (
                None,
                &[][..],
                &[][..],
                &[],
                &[][..],
                &[],
                vec![&item.message],
            ),
        };
        encoded.push(EncodedChange {
            task: record.map(encode_task).transpose()?.unwrap_or_default(),
            events: events
                .iter()
                .map(encode_event)
                .collect::<StoreResult<_>>()?,
            history: history
                .iter()
                .map(encode_message)
                .collect::<StoreResult<_>>()?,
            artifacts: artifacts
                .iter()
                .map(|a| Ok((a.artifact_id.clone(), encode_artifact(a)?)))
                .collect::<StoreResult<_>>()?,
            audit: audit
                .iter()
                .map(|e| Ok((e.clone(), to_json(e)?)))
                .collect::<StoreResult<_>>()?,
            inbox: inbox
                .into_iter()
                .map(encode_message)
                .collect::<StoreResult<_>>()?,
            transcript: transcript
                .iter()
                .map(|entry| document(entry, || "a transcript entry".to_owned(), &[]))
                .collect::<StoreResult<_>>()?,
        });
    }
    check_commit_bytes(encoded.iter().map(EncodedChange::bytes).sum())?;
    Ok(encoded)
}

/// Splits a document into pieces of at most [`CHUNK_BYTES`], on character boundaries.
pub fn chunks(json: &str) -> Vec<&str> {
    let mut out = Vec::with_capacity(json.len() / CHUNK_BYTES + 1);
    let mut rest = json;
    while rest.len() > CHUNK_BYTES {
        let mut cut = CHUNK_BYTES;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (head, tail) = rest.split_at(cut);
        out.push(head);
        rest = tail;
    }
    out.push(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a::Role;

    #[test]
    fn chunks_rejoin_and_respect_the_bound() {
        let text = "é".repeat(CHUNK_BYTES); // 2 bytes each: boundaries matter
        let json = serde_json::to_string(&text).expect("json");
        let pieces = chunks(&json);
        assert_eq!(pieces.len(), 3);
        assert!(pieces.iter().all(|p| p.len() <= CHUNK_BYTES));
        assert_eq!(pieces.concat(), json);
        assert_eq!(chunks(""), vec![""]);
    }

    #[test]
    fn a_message_over_the_cap_names_its_largest_part() {
        let message = Message::new(
            Role::User,
            vec![
                Part::text("small"),
                Part::text("x".repeat(MAX_DOCUMENT_BYTES)),
            ],
        );
        let err = encode_message(&message).expect_err("too large").to_string();
        assert!(
            err.starts_with(&format!(
                "message {} is 1.0 MiB, over the 1.0 MiB",
                message.message_id
            )),
            "{err}"
        );
        assert!(err.ends_with("(its largest part, #2, is 1.0 MiB)"), "{err}");
        let fits = Message::new(
            Role::User,
            vec![Part::text("x".repeat(MAX_DOCUMENT_BYTES - 200))],
        );
        assert!(encode_message(&fits).is_ok());
    }

    #[test]
    fn push_configs_have_a_cap_per_participant_then_per_task() {
        let over = |per_participant, max| {
            Err(Conflict::TooManyPushConfigs {
                task_id: "t".into(),
                per_participant,
                max,
            })
        };
        let (mine, all) = (MAX_PUSH_CONFIGS_PER_PARTICIPANT, MAX_PUSH_CONFIGS_PER_TASK);
        assert_eq!(check_push_config_caps("t", mine - 1, all - 1), Ok(()));
        assert_eq!(
            check_push_config_caps("t", mine, all),
            over(true, MAX_PUSH_CONFIGS_PER_PARTICIPANT)
        );
        assert_eq!(
            check_push_config_caps("t", 0, all),
            over(false, MAX_PUSH_CONFIGS_PER_TASK)
        );
    }

    #[test]
    fn commits_have_a_cap() {
        assert!(check_commit_bytes(MAX_COMMIT_BYTES).is_ok());
        assert_eq!(
            check_commit_bytes(MAX_COMMIT_BYTES + 1)
                .expect_err("over")
                .to_string(),
            "one write would store 3.0 MiB, over the 3.0 MiB a single write may take"
        );
    }
}
