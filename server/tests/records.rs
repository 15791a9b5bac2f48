//! Reading what happened, against the real server through both bindings: the card declares
//! the task extension's two methods; a participant pages through the agent's transcript and
//! sees the tool call with its arguments and result; an admin reads the audit log with a
//! stranger's refusal in it; a reporter asking for the audit log and a stranger asking for
//! either are told the task does not exist; bad paging parameters are invalid params.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use reqwest::Method;
use serde_json::{Value, json};

/// The scripted model makes a plan, then answers.
fn script() -> Value {
    json!({"turns": [
        {"tool_calls": [{"name": "create_plan", "arguments": {"steps": [
            {"name": "Look up the order", "description": "find order 48213"}]}}]},
        {"text": "The plan is made."}
    ]})
}

/// A task of alice (reporter) with carol (admin), after the agent's run, and a message of
/// mallory (a stranger) refused on it.
async fn task_with_a_refusal(api: &Api) -> String {
    let envelope = json!({"name": "Refund 48213", "goal": "refund the order", "participants": [
        {"id": "alice", "kind": "human", "role": "reporter"},
        {"id": "carol", "kind": "human", "role": "admin"}]});
    let task = api
        .send_ok(new_task_req("alice", "please make a plan", envelope))
        .await;
    assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{task}");
    assert_eq!(status_text(&task), "The plan is made.");
    let refused = api.follow_up(&task, "mallory", "let me in").await;
    assert_eq!(
        status_text(&refused),
        "message not accepted: not a participant"
    );
    id_of(&task).to_owned()
}

/// Every transcript entry, read `page_size` at a time; the number of pages it took.
async fn whole_transcript(api: &Api, id: &str, page_size: i64) -> (Vec<Value>, usize) {
    let mut entries = Vec::new();
    let mut pages = 0;
    let mut token = String::new();
    loop {
        let mut paging = json!({ "pageSize": page_size });
        if !token.is_empty() {
            paging["pageToken"] = json!(token);
        }
        let page = api.transcript(id, paging).await.expect("transcript");
        assert_eq!(page["taskId"], id);
        let got = page["entries"].as_array().expect("entries");
        assert!(got.len() <= page_size as usize, "{page}");
        entries.extend(got.iter().cloned());
        pages += 1;
        token = page["nextPageToken"].as_str().expect("token").to_owned();
        if token.is_empty() {
            return (entries, pages);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn participants_read_the_transcript_and_admins_the_audit_log_over_both_bindings() {
    let setup = AgentSetup::new(script());
    let server = setup.builder().start();
    let card = server
        .client()
        .rest(Method::GET, "/.well-known/agent-card.json", None)
        .await
        .json();
    let task_ext = card["capabilities"]["extensions"]
        .as_array()
        .expect("extensions")
        .iter()
        .find(|e| e["uri"] == TASK_EXTENSION_URI)
        .expect("the task extension")
        .clone();
    let methods = &task_ext["params"]["methods"];
    assert_eq!(
        methods["GetTaskTranscript"]["rest"],
        "GET /tasks/{id}/transcript"
    );
    assert_eq!(
        methods["GetTaskAuditLog"]["rest"],
        "GET /tasks/{id}/auditLog"
    );

    for binding in [Binding::JsonRpc, Binding::Rest] {
        let api = server.client().api(binding);
        let id = task_with_a_refusal(&api).await;
        let alice = api.as_participant("alice");

        // The transcript, a page at a time: numbered from 0, the tool call with its
        // arguments, then its result, then the answer.
        for page_size in [1, 2] {
            let (entries, pages) = whole_transcript(&alice, &id, page_size).await;
            assert!(entries.len() >= 4, "{binding:?}: {entries:?}");
            assert_eq!(
                pages,
                entries.len().div_ceil(page_size as usize),
                "{binding:?}"
            );
            let numbers: Vec<u64> = entries
                .iter()
                .map(|e| e["number"].as_u64().unwrap())
                .collect();
            assert_eq!(numbers, (0..entries.len() as u64).collect::<Vec<_>>());
            let turns: Vec<&Value> = entries.iter().map(|e| &e["entry"]["turn"]).collect();
            let call = turns
                .iter()
                .find(|t| {
                    t["role"] == "assistant" && !t["tool_calls"].as_array().unwrap().is_empty()
                })
                .expect("the model's tool call");
            assert_eq!(call["tool_calls"][0]["name"], "create_plan");
            assert_eq!(
                call["tool_calls"][0]["arguments"]["steps"][0]["name"],
                "Look up the order"
            );
            let results = turns
                .iter()
                .find(|t| t["role"] == "tool_results")
                .expect("the call's result");
            assert_eq!(results["results"][0]["name"], "create_plan");
            assert_eq!(results["results"][0]["is_error"], false);
            assert!(
                results["results"][0]["content"]
                    .as_str()
                    .unwrap()
                    .contains("plan attached with 1 steps"),
                "{results}"
            );
            assert!(
                turns
                    .iter()
                    .any(|t| t["role"] == "assistant" && t["text"] == "The plan is made."),
                "{turns:?}"
            );
        }

        // The audit log, for the admin: alice's message accepted, mallory's refused.
        let log = api
            .as_participant("carol")
            .audit_log(&id, json!({}))
            .await
            .expect("an admin reads the audit log");
        assert_eq!(log["taskId"], id.as_str());
        assert_eq!(log["nextPageToken"], "");
        let entries = log["entries"].as_array().expect("entries");
        assert!(
            entries
                .iter()
                .any(|e| e["participant_id"] == "alice" && e["accepted"] == true),
            "{log}"
        );
        let refusal = entries
            .iter()
            .find(|e| e["accepted"] == false)
            .expect("the refusal");
        assert_eq!(refusal["participant_id"], "mallory");
        assert_eq!(refusal["reason"], "not a participant");
        assert_eq!(refusal["excerpt"], "let me in");
        let first = api
            .as_participant("carol")
            .audit_log(&id, json!({"pageSize": 1}))
            .await
            .unwrap();
        assert_eq!(first["entries"].as_array().unwrap().len(), 1);
        assert_eq!(first["nextPageToken"], "1");

        // A reporter who is not an admin, and a stranger, learn nothing.
        alice
            .audit_log(&id, json!({}))
            .await
            .refused_not_found("a reporter reads no audit log");
        let mallory = api.as_participant("mallory");
        mallory
            .audit_log(&id, json!({}))
            .await
            .refused_not_found("a stranger reads no audit log");
        mallory
            .transcript(&id, json!({}))
            .await
            .refused_not_found("a stranger reads no transcript");
        alice
            .transcript("no-such-task", json!({}))
            .await
            .refused_not_found("no such task");

        // Bad paging parameters.
        for paging in [
            json!({"pageSize": 0}),
            json!({"pageSize": 101}),
            json!({"pageToken": "x"}),
            json!({"pageToken": "-1"}),
        ] {
            alice
                .transcript(&id, paging.clone())
                .await
                .refused_invalid_params(&format!("{binding:?} transcript {paging}"));
            api.as_participant("carol")
                .audit_log(&id, paging.clone())
                .await
                .refused_invalid_params(&format!("{binding:?} audit log {paging}"));
        }
    }
}
