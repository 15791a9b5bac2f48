//! Two server processes share one DynamoDB table: a subscriber on one sees the events the
//! other produces, because streams follow the table's event log, not process memory.
//! Runs against the endpoint in `AWS_ENDPOINT_URL_DYNAMODB` (DynamoDB Local under `make test`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

struct Server {
    child: Child,
    url: String,
}

impl Server {
    /// A server on `table`; the first one creates it (`--create-table`, from the template).
    fn start(table: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_local-server"))
            .args([
                "--addr",
                "127.0.0.1:0",
                "--store",
                "dynamodb",
                "--table",
                table,
                "--create-table",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start local-server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read stdout");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        Self { child, url }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn require_endpoint() {
    if std::env::var("AWS_ENDPOINT_URL_DYNAMODB").is_err() {
        panic!(
            "needs DynamoDB Local: run through `make test` (localstack/dynamodb-local.sh run -- cargo test ...)"
        );
    }
}

async fn rpc(client: &reqwest::Client, url: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let response = client
        .post(format!("{url}/"))
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .expect("send");
    let value: Value = response.json().await.expect("json");
    assert!(value.get("error").is_none(), "{method}: {value}");
    value["result"].clone()
}

fn message(id: &str, text: &str, task_id: Option<&str>) -> Value {
    let mut m = json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}],
                       "metadata": {"participant_id": "alice"}});
    if let Some(task_id) = task_id {
        m["taskId"] = json!(task_id);
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_on_one_instance_sees_events_written_by_another() {
    require_endpoint();
    let aws = aws_sdk_dynamodb::Client::new(&store_dynamodb::sdk_config().await);
    let table = format!("tasks-two-instances-{}", std::process::id());

    let a = Server::start(&table);
    let described = aws
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .expect("the first server created the table (--create-table)");
    assert_eq!(
        described.table().and_then(|t| t.table_name()),
        Some(table.as_str())
    );
    let b = Server::start(&table);
    let client = reqwest::Client::new();
    let created = rpc(
        &client,
        &a.url,
        "SendMessage",
        json!({"message": message("m-1", "hello from A", None)}),
    )
    .await;
    let task_id = created["task"]["id"].as_str().expect("id").to_owned();
    assert_eq!(
        created["task"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );

    // B follows the task over REST SSE.
    let response = client
        .post(format!("{}/tasks/{task_id}:subscribe", b.url))
        .header("A2A-Version", "1.0")
        .header("X-Participant-Id", "alice")
        .send()
        .await
        .expect("subscribe");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    let mut events: Vec<Value> = Vec::new();
    let mut followed_up = false;
    let reading = async {
        while let Some(chunk) = body.next().await {
            buffer.push_str(&String::from_utf8_lossy(&chunk.expect("chunk")));
            while let Some(end) = buffer.find("\n\n") {
                let frame: String = buffer.drain(..end + 2).collect();
                if let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) {
                    events.push(serde_json::from_str(data).expect("event json"));
                }
            }
            if !followed_up && !events.is_empty() {
                // The subscriber has the task: now A processes a follow-up.
                followed_up = true;
                rpc(
                    &client,
                    &a.url,
                    "SendMessage",
                    json!({"message": message("m-2", "again, from A", Some(&task_id))}),
                )
                .await;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), reading)
        .await
        .expect("the stream ends");

    assert_eq!(events[0]["task"]["id"], task_id.as_str());
    let states: Vec<&str> = events[1..]
        .iter()
        .map(|e| e["statusUpdate"]["status"]["state"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(states, ["TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED"]);
    assert_eq!(
        events[2]["statusUpdate"]["status"]["message"]["parts"][0]["text"],
        "again, from A"
    );

    drop((a, b));
    store_dynamodb::table::delete_table(&aws, &table)
        .await
        .expect("delete table");
}
