//! Interrupts end to end on the scripted model: a turn that answers only after a minute is
//! cut by a message marked `metadata.interrupt: true`, sent to the server that runs it or to
//! another server process over the same DynamoDB table (the holder of the run notices it by
//! reading the inbox). The cut turn's answer never appears; the cut message is in the
//! history with a status message saying who interrupted it; the interrupt's turn reads both.
//! The DynamoDB test runs against the endpoint in `AWS_ENDPOINT_URL_DYNAMODB` (DynamoDB Local
//! under `make test`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

const SLOW: &str = "write the long report";
const STOP: &str = "stop: only the title";

/// The first message answers at once; the second turn echoes its input after a minute,
/// unless that input is the interrupt (the same turn, played again for it).
fn script() -> Value {
    json!({"turns": [
        {"text": "ready"},
        {"echo_input": true, "delay_ms": 60_000, "delay_unless_input_contains": "stop"}
    ]})
}

/// `text` from alice on `task`, answered at once; marked as an interrupt or not.
fn queued(task: &str, text: &str, interrupt: bool) -> Value {
    let mut message = on(common::text("alice", text), task);
    if interrupt {
        message["metadata"]["interrupt"] = json!(true);
    }
    let mut req = send_req(message);
    req["configuration"] = json!({"returnImmediately": true});
    req
}

/// The history as `role: text`.
fn history(task: &Value) -> Vec<String> {
    task["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|m| {
            let role = if m["role"] == "ROLE_AGENT" {
                "agent"
            } else {
                "user"
            };
            format!("{role}: {}", m["parts"][0]["text"].as_str().unwrap_or(""))
        })
        .collect()
}

/// Opens alice's task on `runs`, starts the slow turn there, interrupts it through `told`,
/// and checks what the task kept.
async fn interrupt_a_slow_turn(runs: &Api, told: &Api) {
    let (runs, told) = (&runs.as_participant("alice"), &told.as_participant("alice"));
    let created = runs.send_text("alice", "hello").await;
    assert_eq!(status_text(&created), "ready");
    let id = id_of(&created).to_owned();
    runs.send_ok(queued(&id, SLOW, false)).await;
    poll_state(told, &id, "TASK_STATE_WORKING").await;

    told.send_ok(queued(&id, STOP, true)).await;
    let task = poll_task(told, &id, "the interrupt's answer", |t| {
        state(t) == "TASK_STATE_INPUT_REQUIRED"
    })
    .await;
    assert_eq!(status_text(&task), STOP, "{task}");
    let task = told.get_task(&id, None).await.expect("GetTask");
    assert_eq!(
        history(&task),
        [
            "user: hello",
            "agent: ready",
            format!("user: {SLOW}").as_str(),
            "agent: interrupted by alice",
            format!("user: {STOP}").as_str(),
            format!("agent: {STOP}").as_str(),
        ],
        "the cut turn's answer ({SLOW}) never came"
    );

    // The interrupt's turn read the cut message and the interrupt, then answered.
    let page = told
        .transcript(&id, json!({"pageSize": 50}))
        .await
        .expect("transcript");
    let turns: Vec<String> = page["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            let turn = &e["entry"]["turn"];
            format!("{}: {}", turn["role"].as_str().unwrap_or("?"), turn["text"])
        })
        .collect();
    assert_eq!(
        turns,
        [
            r#"user: "hello""#.to_owned(),
            r#"assistant: "ready""#.to_owned(),
            format!(r#"user: "{SLOW}""#),
            format!(r#"user: "{STOP}""#),
            format!(r#"assistant: "{STOP}""#),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_cuts_a_slow_turn_on_the_same_server() {
    let setup = AgentSetup::new(script());
    let server = setup.builder().start();
    let api = server.client().api(Binding::JsonRpc);
    interrupt_a_slow_turn(&api, &api).await;
    assert!(server.log().contains("run interrupted"), "{}", server.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_sent_to_another_process_cuts_the_turn_its_holder_runs() {
    if std::env::var("AWS_ENDPOINT_URL_DYNAMODB").is_err() {
        panic!(
            "needs DynamoDB Local: run through `make test` (localstack/dynamodb-local.sh run -- cargo test ...)"
        );
    }
    let aws = aws_sdk_dynamodb::Client::new(&store_dynamodb::sdk_config().await);
    let table = format!("tasks-interrupts-{}", std::process::id());
    let setup = AgentSetup::new(script());
    let a = setup.builder().dynamodb_table(&table).start();
    let b = setup.builder().dynamodb_table(&table).start();
    interrupt_a_slow_turn(
        &a.client().api(Binding::JsonRpc),
        &b.client().api(Binding::Rest),
    )
    .await;
    // A, which held the run, cut it; B only queued the interrupt.
    assert!(a.log().contains("run interrupted"), "{}", a.log());
    assert!(!b.log().contains("run interrupted"), "{}", b.log());

    drop((a, b));
    store_dynamodb::table::delete_table(&aws, &table)
        .await
        .expect("delete table");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cut_senders_stream_ends_with_the_interrupts_answer() {
    let setup = AgentSetup::new(script());
    let server = setup.builder().start();
    let api = server
        .client()
        .api(Binding::JsonRpc)
        .as_participant("alice");
    let created = api.send_text("alice", "hello").await;
    let id = id_of(&created).to_owned();
    let mut slow = send_req(on(common::text("alice", SLOW), &id));
    slow["configuration"] = json!({});
    let stream = api.send_streaming(slow).await.expect("stream");
    let followed = tokio::spawn(stream.collect());
    poll_state(&api, &id, "TASK_STATE_WORKING").await;
    api.send_ok(queued(&id, STOP, true)).await;
    let events = tokio::time::timeout(std::time::Duration::from_secs(30), followed)
        .await
        .expect("the cut message's stream ended well before its minute")
        .expect("stream task");
    let texts: Vec<String> = events
        .iter()
        .filter_map(|e| e["statusUpdate"]["status"]["message"]["parts"][0]["text"].as_str())
        .map(str::to_owned)
        .collect();
    assert!(
        texts.contains(&"interrupted by alice".to_owned()),
        "{texts:?}"
    );
    assert_eq!(
        event_kind(events.last().unwrap()),
        "status:TASK_STATE_INPUT_REQUIRED"
    );
    assert_eq!(texts.last().map(String::as_str), Some(STOP));
}
