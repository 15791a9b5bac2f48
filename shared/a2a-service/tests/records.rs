//! Reading what happened on a task over the memory store: the transcript for participants,
//! the audit log for admins, both paged by entry number; anyone else is told the task does
//! not exist.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use a2a::{Message, Part, SendMessageResponse, Task};
use a2a_service::api::{TaskRecordsRequest, TranscriptPage};
use a2a_service::{
    A2aApi, Agent, AgentReply, RequestContext, ServiceError, TurnContext, TurnWrite,
};
use async_trait::async_trait;
use common::{Fixture, as_participant, on, send};
use serde_json::{Value, json};
use task_core::TASK_MEDIA_TYPE;
use task_store::StoreError;

/// Writes two transcript entries per run (what it read, what it answered), as the model
/// agent writes its turns, and answers with the text it got.
struct TranscriptAgent;

#[async_trait]
impl Agent for TranscriptAgent {
    async fn run(&self, turn: &mut TurnContext<'_>) -> Result<AgentReply, StoreError> {
        let message_id = turn.message().message_id.clone();
        let input = turn.input().to_owned();
        let entries = vec![
            json!({"message_id": message_id, "turn": {"role": "user", "text": input}}),
            json!({"message_id": message_id, "turn": {"role": "assistant", "text": input, "tool_calls": []}}),
        ];
        turn.commit_turn(|_| TurnWrite {
            transcript: entries.clone(),
            ..TurnWrite::default()
        })
        .await?;
        Ok(AgentReply::text(&input))
    }
}

fn fixture() -> Fixture {
    common::fixture_with(Arc::new(TranscriptAgent), common::quick)
}

fn message(from: &str, id: &str, parts: Vec<Part>) -> Message {
    let mut m = common::from(from, parts);
    m.message_id = id.into();
    m
}

/// A task of alice (reporter) with bob (watcher) and carol (admin), after `runs` messages of
/// alice (two transcript entries each).
async fn task_with_runs(f: &Fixture, runs: usize) -> Task {
    let envelope = Part::data(json!({"name": "n", "goal": "g", "participants": [
        {"id": "alice", "kind": "human", "role": "reporter"},
        {"id": "bob", "kind": "human", "role": "watcher"},
        {"id": "carol", "kind": "human", "role": "admin"}]}))
    .with_media_type(TASK_MEDIA_TYPE);
    let first = message("alice", "m-0", vec![Part::text("run 0"), envelope]);
    let mut task = sent(f, send(first)).await;
    for n in 1..runs {
        let next = message(
            "alice",
            &format!("m-{n}"),
            vec![Part::text(format!("run {n}"))],
        );
        task = sent(f, on(&task, next)).await;
    }
    task
}

async fn sent(f: &Fixture, req: a2a::SendMessageRequest) -> Task {
    match f
        .service
        .send_message(&RequestContext::default(), req)
        .await
        .expect("send")
    {
        SendMessageResponse::Task(task) => task,
        other => panic!("expected a task, got {other:?}"),
    }
}

fn page(id: &str, page_size: Option<i32>, page_token: Option<&str>) -> TaskRecordsRequest {
    TaskRecordsRequest {
        id: id.to_owned(),
        page_size,
        page_token: page_token.map(str::to_owned),
    }
}

async fn transcript(
    f: &Fixture,
    who: &str,
    req: TaskRecordsRequest,
) -> Result<TranscriptPage, ServiceError> {
    f.service
        .get_task_transcript(&as_participant(who), req)
        .await
}

fn numbers(page: &TranscriptPage) -> Vec<u64> {
    page.entries.iter().map(|e| e.number).collect()
}

#[tokio::test]
async fn a_participant_pages_through_the_transcript_by_entry_number() {
    let f = fixture();
    let task = task_with_runs(&f, 3).await;
    let whole = transcript(&f, "bob", page(&task.id, None, None))
        .await
        .expect("a watcher reads");
    assert_eq!(numbers(&whole), [0, 1, 2, 3, 4, 5]);
    assert_eq!(whole.next_page_token, "", "one page holds it all");
    assert_eq!(whole.task_id, task.id);
    assert_eq!(
        whole.entries[2].entry,
        json!({"message_id": "m-1", "turn": {"role": "user", "text": "run 1"}}),
        "entries as stored"
    );

    let first = transcript(&f, "alice", page(&task.id, Some(4), None))
        .await
        .unwrap();
    assert_eq!(
        (numbers(&first), first.next_page_token.as_str()),
        (vec![0, 1, 2, 3], "4")
    );
    let second = transcript(&f, "alice", page(&task.id, Some(4), Some("4")))
        .await
        .unwrap();
    assert_eq!(
        (numbers(&second), second.next_page_token.as_str()),
        (vec![4, 5], "")
    );
    // A page that ends where the transcript ends has no next page.
    let exact = transcript(&f, "alice", page(&task.id, Some(2), Some("4")))
        .await
        .unwrap();
    assert_eq!(
        (numbers(&exact), exact.next_page_token.as_str()),
        (vec![4, 5], "")
    );
    let past = transcript(&f, "alice", page(&task.id, Some(2), Some("60")))
        .await
        .unwrap();
    assert!(past.entries.is_empty() && past.next_page_token.is_empty());
    // The whole page serializes with camelCase envelope names and each entry's number.
    assert_eq!(
        serde_json::to_value(&exact).unwrap(),
        json!({"taskId": task.id, "nextPageToken": "", "entries": [
            {"number": 4, "entry": {"message_id": "m-2", "turn": {"role": "user", "text": "run 2"}}},
            {"number": 5, "entry": {"message_id": "m-2", "turn": {"role": "assistant", "text": "run 2", "tool_calls": []}}}
        ]})
    );
}

#[tokio::test]
async fn bad_page_sizes_and_tokens_are_invalid_params() {
    let f = fixture();
    let task = task_with_runs(&f, 1).await;
    for (size, token) in [
        (Some(0), None),
        (Some(101), None),
        (None, Some("x")),
        (None, Some("-1")),
    ] {
        let refused = transcript(&f, "alice", page(&task.id, size, token)).await;
        assert!(
            matches!(refused, Err(ServiceError::InvalidParams(_))),
            "{size:?} {token:?}: {refused:?}"
        );
        let refused = f
            .service
            .get_task_audit_log(&as_participant("carol"), page(&task.id, size, token))
            .await;
        assert!(
            matches!(refused, Err(ServiceError::InvalidParams(_))),
            "{size:?} {token:?}: {refused:?}"
        );
    }
    let refused = transcript(&f, "alice", page(&task.id, Some(0), None)).await;
    assert_eq!(
        refused.map(|_| ()),
        Err(ServiceError::InvalidParams(
            "pageSize must be between 1 and 100 (got 0)".into()
        ))
    );
}

#[tokio::test]
async fn only_admins_read_the_audit_log_and_it_shows_refusals() {
    let f = fixture();
    let task = task_with_runs(&f, 2).await;
    // A stranger's message is refused and audited.
    sent(
        &f,
        on(
            &task,
            message("mallory", "m-x", vec![Part::text("let me in")]),
        ),
    )
    .await;

    let log = f
        .service
        .get_task_audit_log(&as_participant("carol"), page(&task.id, None, None))
        .await
        .expect("an admin reads the audit log");
    assert_eq!(log.task_id, task.id);
    assert_eq!(log.next_page_token, "");
    let decisions: Vec<(&str, bool)> = log
        .entries
        .iter()
        .map(|e| (e.message_id.as_str(), e.accepted))
        .collect();
    // Accepted: both of alice's messages (a message may have more than one decision, such as
    // its envelope's and its run's); refused: mallory's, last.
    let (refusal, accepted) = log.entries.split_last().expect("entries");
    assert!(accepted.iter().all(|e| e.accepted), "{decisions:?}");
    for id in ["m-0", "m-1"] {
        assert!(decisions.contains(&(id, true)), "{decisions:?}");
    }
    assert_eq!(
        (refusal.message_id.as_str(), refusal.accepted),
        ("m-x", false)
    );
    assert_eq!(refusal.participant_id.as_deref(), Some("mallory"));
    assert_eq!(refusal.reason, "not a participant");
    assert_eq!(refusal.excerpt.as_deref(), Some("let me in"));
    // Entries serialize as the store keeps them (snake_case, like the task extension).
    let wire = serde_json::to_value(&log).unwrap();
    let last = decisions.len() - 1;
    assert_eq!(wire["entries"][last]["participant_id"], "mallory");
    assert!(wire["entries"][last]["at"].is_string());

    // Paged: one entry at a time.
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = f
            .service
            .get_task_audit_log(
                &as_participant("carol"),
                page(&task.id, Some(1), token.as_deref()),
            )
            .await
            .unwrap();
        seen.extend(page.entries.iter().map(|e| e.message_id.clone()));
        if page.next_page_token.is_empty() {
            break;
        }
        token = Some(page.next_page_token);
    }
    let all: Vec<&str> = decisions.iter().map(|(id, _)| *id).collect();
    assert_eq!(seen, all, "every entry once, in order");

    // A deployed admin (a verified principal) goes through the same caller logic.
    let verified = RequestContext {
        verified_principal: Some("carol".into()),
        ..RequestContext::default()
    };
    assert!(
        f.service
            .get_task_audit_log(&verified, page(&task.id, None, None))
            .await
            .is_ok()
    );

    // Participants who are not admins, strangers and unknown tasks all get the same answer.
    for (who, id) in [
        ("alice", task.id.as_str()),
        ("bob", task.id.as_str()),
        ("mallory", task.id.as_str()),
        ("carol", "no-such-task"),
    ] {
        let refused = f
            .service
            .get_task_audit_log(&as_participant(who), page(id, None, None))
            .await;
        assert_eq!(
            refused.map(|_| ()),
            Err(ServiceError::TaskNotFound(id.to_owned())),
            "{who} on {id}"
        );
    }
}

#[tokio::test]
async fn strangers_do_not_learn_a_transcript_exists() {
    let f = fixture();
    let task = task_with_runs(&f, 1).await;
    for (who, id) in [("mallory", task.id.as_str()), ("alice", "no-such-task")] {
        assert_eq!(
            transcript(&f, who, page(id, None, None)).await.map(|_| ()),
            Err(ServiceError::TaskNotFound(id.to_owned())),
            "{who} on {id}"
        );
    }
    // Nobody asserted and no default participant: the same refusal as GetTask's.
    let anonymous = f
        .service
        .get_task_transcript(&RequestContext::default(), page(&task.id, None, None))
        .await;
    assert!(matches!(anonymous, Err(ServiceError::InvalidParams(_))));
    let entries: Vec<Value> = transcript(&f, "carol", page(&task.id, None, None))
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.entry)
        .collect();
    assert_eq!(entries.len(), 2, "an admin is a participant too");
}
