//! Help requests end to end through the real server, with the scripted model: what other
//! participants say while a question is open does not resume the task, and reaches the agent
//! with the answer, in order and attributed (the model's last turn echoes what it was sent).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;

const QUESTION: &str = "Full or partial refund?";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comments_wait_with_the_question_and_reach_the_agent_with_the_answer() {
    let setup = AgentSetup::new(json!({"turns": [
        {"tool_calls": [{"name": "ask_participant", "arguments": {
            "participant_id": "alice", "question": QUESTION}}]},
        {"echo_input": true}
    ]}));
    let server = setup.builder().start();
    for binding in BOTH {
        let api = server.client().api(binding);
        let people = json!([{"id": "alice", "kind": "human", "role": "reporter"},
                            {"id": "bob", "kind": "human", "role": "watcher"}]);
        let task = api
            .send_ok(new_task_req(
                "alice",
                "refund order 48213",
                json!({"name": "Refund", "goal": "Refund order 48213", "participants": people}),
            ))
            .await;
        let id = id_of(&task).to_owned();
        assert_eq!(state(&task), "TASK_STATE_INPUT_REQUIRED", "{binding:?}");
        assert_eq!(status_text(&task), QUESTION);

        // Bob's comments are recorded; the task still waits on alice's answer.
        for comment in ["hurry up", "the parcel was lost\nsee the tracking"] {
            let recorded = api.follow_up(&task, "bob", comment).await;
            assert_eq!(state(&recorded), "TASK_STATE_INPUT_REQUIRED");
            assert_eq!(status_text(&recorded), QUESTION);
            let still = api.read_as("alice", &id).await;
            assert_eq!(state(&still), "TASK_STATE_INPUT_REQUIRED");
            assert_eq!(status_text(&still), QUESTION, "the question still waits");
        }

        let answered = api.follow_up(&task, "alice", "Full.").await;
        assert_eq!(state(&answered), "TASK_STATE_INPUT_REQUIRED", "{binding:?}");
        assert_eq!(
            status_text(&answered),
            "Reply from alice to \"Full or partial refund?\": Full.\n\n\
             [Comments other participants sent while the question was open, oldest first]\n\
             bob: hurry up\n\
             bob: the parcel was lost\n  see the tracking\n\
             [End of comments]",
            "{binding:?}: the agent read the answer, then the comments"
        );
    }
}
