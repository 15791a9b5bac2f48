//! Every function in process, from API Gateway REST (v1) and Function URL (v2) event
//! fixtures: its method on both payloads, the error mappings, authorizer identity, streamed
//! answers read back as SSE, streams that end before the invocation's deadline, and routes a
//! function does not serve.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use a2a_http::{Method, Serves};
use common::*;
use lambda_http::RequestExt;
use serde_json::{Value, json};

/// A Lambda context whose deadline is `after` from now.
fn deadline_in(after: Duration) -> lambda_http::Context {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let mut context = lambda_http::Context::default();
    context.deadline = now_ms + after.as_millis() as u64;
    context
}

/// A task made through the send-message function, as alice; returns the task.
async fn seed(deployment: &Deployment, payload: Payload) -> Value {
    let serves = Serves::Rest(Method::SendMessage);
    let app = deployment.app(serves);
    let call = Call::post(
        "/message:send",
        &json!({"message": message(Some("alice"), "refund order 48213")}),
    );
    let got = invoke(&app, serves, call.request(payload, plain(payload))).await;
    assert_eq!(got.status, 200, "{}", got.body);
    got.json()["task"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_function_answers_its_method_on_both_payloads() {
    for payload in PAYLOADS {
        // A loopback webhook (deployed functions deliver nothing themselves: the notifier does).
        let deployment = Deployment::with_env(&[("TH_ALLOW_PRIVATE_WEBHOOKS", "true")]);
        let task = seed(&deployment, payload).await;
        let id = task["id"].as_str().unwrap().to_owned();
        assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(
            task["status"]["message"]["parts"][0]["text"],
            "refund order 48213"
        );
        let hook = json!({"url": "http://127.0.0.1:9/a2a", "token": "tok"});

        // Cancel last: it ends the task the others work on.
        let mut functions = HTTP_ROUTES.to_vec();
        functions.sort_by_key(|(_, serves)| *serves == Serves::Rest(Method::CancelTask));
        for (name, serves) in functions {
            let call = match serves {
                Serves::JsonRpc => Call::rpc("GetTask", json!({"id": id})).participant("alice"),
                Serves::AgentCard => Call::get("/.well-known/agent-card.json"),
                Serves::Rest(Method::SendMessage) => Call::post(
                    "/message:send",
                    &json!({"message": on(message(Some("alice"), "and the shipping"), &id)}),
                ),
                Serves::Rest(Method::SendStreamingMessage) => Call::post(
                    "/message:stream",
                    &json!({"message": message(Some("alice"), "a streamed task")}),
                ),
                Serves::Rest(Method::GetTask) => Call::get(format!("/tasks/{id}"))
                    .query("historyLength", "1")
                    .participant("alice"),
                Serves::Rest(Method::ListTasks) => Call::get("/tasks").participant("alice"),
                Serves::Rest(Method::SubscribeToTask) => {
                    Call::get(format!("/tasks/{id}:subscribe")).participant("alice")
                }
                Serves::Rest(Method::CreatePushConfig) => Call::post(
                    format!("/tasks/{id}/pushNotificationConfigs"),
                    &json!({"id": "hook-1", "url": hook["url"], "token": "tok"}),
                )
                .participant("alice"),
                Serves::Rest(Method::GetPushConfig) => {
                    Call::get(format!("/tasks/{id}/pushNotificationConfigs/hook-1"))
                        .participant("alice")
                }
                Serves::Rest(Method::ListPushConfigs) => {
                    Call::get(format!("/tasks/{id}/pushNotificationConfigs")).participant("alice")
                }
                Serves::Rest(Method::DeletePushConfig) => Call::new(
                    "DELETE",
                    format!("/tasks/{id}/pushNotificationConfigs/hook-1"),
                )
                .participant("alice"),
                Serves::Rest(Method::CancelTask) => {
                    Call::post(format!("/tasks/{id}:cancel"), &json!({})).participant("alice")
                }
                Serves::Rest(Method::GetExtendedAgentCard) => Call::get("/extendedAgentCard"),
                Serves::Rest(Method::GetTaskTranscript) => {
                    Call::get(format!("/tasks/{id}/transcript"))
                        .query("pageSize", "1")
                        .participant("alice")
                }
                Serves::Rest(Method::GetTaskAuditLog) => {
                    Call::get(format!("/tasks/{id}/auditLog")).participant("alice")
                }
                Serves::Everything | Serves::TaskResource => unreachable!("routes name methods"),
            };
            let app = deployment.app(serves);
            let mut request = call.request(payload, plain(payload));
            if serves == Serves::Rest(Method::SubscribeToTask) {
                // The task waits for input: its stream stays open until the invocation's
                // time is nearly up (a tenth of it before).
                request = request.with_lambda_context(deadline_in(Duration::from_millis(1_000)));
            }
            let got = invoke(&app, serves, request).await;
            let what = format!("{name} on {payload:?}");
            match serves {
                Serves::Rest(Method::GetExtendedAgentCard) => {
                    // None is configured: UnsupportedOperation, as the card says.
                    assert_eq!(got.status, 400, "{what}: {}", got.body);
                    assert_eq!(
                        got.json()["error"]["details"][0]["reason"],
                        "UNSUPPORTED_OPERATION"
                    );
                    continue;
                }
                Serves::Rest(Method::DeletePushConfig) => {
                    assert_eq!(got.status, 200, "{what}: {}", got.body);
                    continue;
                }
                Serves::Rest(Method::GetTaskAuditLog) => {
                    // alice reported the task; only an admin reads its audit log.
                    assert_eq!(got.status, 404, "{what}: {}", got.body);
                    assert_eq!(
                        got.json()["error"]["details"][0]["reason"],
                        "TASK_NOT_FOUND"
                    );
                    continue;
                }
                _ => assert_eq!(got.status, 200, "{what}: {}", got.body),
            }
            match serves {
                Serves::JsonRpc => assert_eq!(got.json()["result"]["id"], json!(id), "{what}"),
                Serves::AgentCard => {
                    let card = got.json();
                    // Both interfaces, no trailing slash (A2A's form; joins with method paths).
                    for interface in card["supportedInterfaces"].as_array().unwrap() {
                        assert_eq!(interface["url"], BASE_URL, "{what}");
                    }
                    assert_eq!(card["capabilities"]["streaming"], true);
                    assert!(got.header("etag").is_some(), "{what}");
                }
                Serves::Rest(Method::SendMessage) => {
                    let task = got.json()["task"].clone();
                    assert_eq!(task["id"], json!(id), "{what}");
                    assert_eq!(
                        task["status"]["message"]["parts"][0]["text"],
                        "and the shipping"
                    );
                }
                Serves::Rest(Method::SendStreamingMessage) => {
                    assert_eq!(
                        got.header("content-type"),
                        Some("text/event-stream"),
                        "{what}"
                    );
                    let (events, _) = got.sse();
                    let states: Vec<&str> = events
                        .iter()
                        .map(|e| {
                            e["task"]["status"]["state"]
                                .as_str()
                                .or(e["statusUpdate"]["status"]["state"].as_str())
                                .unwrap_or("?")
                        })
                        .collect();
                    assert_eq!(
                        states,
                        [
                            "TASK_STATE_SUBMITTED",
                            "TASK_STATE_WORKING",
                            "TASK_STATE_INPUT_REQUIRED"
                        ],
                        "{what}"
                    );
                }
                Serves::Rest(Method::GetTask) => {
                    let task = got.json();
                    assert_eq!(task["history"].as_array().map(Vec::len), Some(1), "{what}");
                }
                Serves::Rest(Method::ListTasks) => {
                    assert_eq!(got.json()["totalSize"], 2, "{what}");
                }
                Serves::Rest(Method::SubscribeToTask) => {
                    let (events, comments) = got.sse();
                    assert_eq!(events[0]["task"]["id"], json!(id), "{what}");
                    assert_eq!(events.len(), 1, "{what}: nothing happened meanwhile");
                    assert!(
                        comments.last().is_some_and(|c| c.contains("time limit")),
                        "{what}"
                    );
                }
                Serves::Rest(Method::CreatePushConfig) | Serves::Rest(Method::GetPushConfig) => {
                    assert_eq!(got.json()["id"], "hook-1", "{what}");
                    assert_eq!(got.json()["url"], hook["url"], "{what}");
                }
                Serves::Rest(Method::ListPushConfigs) => {
                    assert_eq!(got.json()["configs"][0]["id"], "hook-1", "{what}");
                }
                Serves::Rest(Method::CancelTask) => {
                    assert_eq!(
                        got.json()["status"]["state"],
                        "TASK_STATE_CANCELED",
                        "{what}"
                    );
                }
                Serves::Rest(Method::GetTaskTranscript) => {
                    let page = got.json();
                    assert_eq!(page["taskId"], json!(id), "{what}");
                    assert!(
                        page["entries"].as_array().is_some_and(|e| e.len() <= 1),
                        "{what}"
                    );
                }
                _ => {}
            }
        }
    }
}

/// The error mappings as they leave the functions: JSON-RPC errors in a 200 with their code,
/// REST errors with their status and `ErrorInfo` reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_mappings() {
    let deployment = Deployment::new();
    let payload = Payload::RestV1;
    let task = seed(&deployment, payload).await;
    let id = task["id"].as_str().unwrap().to_owned();
    // A canceled task, for the terminal-state errors.
    let cancel = Serves::Rest(Method::CancelTask);
    let got = invoke(
        &deployment.app(cancel),
        cancel,
        Call::post(format!("/tasks/{id}:cancel"), &json!({}))
            .participant("alice")
            .request(payload, plain(payload)),
    )
    .await;
    assert_eq!(got.status, 200, "{}", got.body);

    let rest: Vec<(Serves, Call, u16, &str)> = vec![
        (Serves::Rest(Method::GetTask), Call::get("/tasks/nope").participant("alice"), 404, "TASK_NOT_FOUND"),
        // A stranger reads exactly what a missing task reads.
        (Serves::Rest(Method::GetTask), Call::get(format!("/tasks/{id}")).participant("mallory"), 404, "TASK_NOT_FOUND"),
        (Serves::Rest(Method::GetTask), Call::get(format!("/tasks/{id}")), 400, "INVALID_PARAMS"),
        (Serves::Rest(Method::GetTask), Call::get(format!("/tasks/{id}")).participant("alice").query("historyLength", "-1"), 400, "INVALID_PARAMS"),
        (Serves::Rest(Method::GetTask), Call::get(format!("/tasks/{id}")).participant("alice").without_header("A2A-Version"), 400, "VERSION_NOT_SUPPORTED"),
        (Serves::Rest(Method::GetTask), Call::get(format!("/tasks/{id}")).participant("alice").header("A2A-Extensions", "https://example.com/unknown/v1"), 400, "UNSUPPORTED_OPERATION"),
        (Serves::Rest(Method::GetTask), Call::new("POST", format!("/tasks/{id}")).participant("alice"), 405, "METHOD_NOT_ALLOWED"),
        (Serves::Rest(Method::GetTask), Call::get("/tasks").participant("alice"), 404, "METHOD_NOT_FOUND"),
        (Serves::Rest(Method::CancelTask), Call::post(format!("/tasks/{id}:cancel"), &json!({})).participant("alice"), 400, "TASK_NOT_CANCELABLE"),
        (Serves::Rest(Method::SendMessage), Call::post("/message:send", &json!({"message": on(message(Some("alice"), "too late"), &id)})), 400, "UNSUPPORTED_OPERATION"),
        (Serves::Rest(Method::SendMessage), Call::post("/message:send", &json!({"message": {"role": "ROLE_USER", "messageId": "m-x", "parts": [{"raw": "dGNr", "mediaType": "application/x-tck"}]}})).participant("alice"), 400, "CONTENT_TYPE_NOT_SUPPORTED"),
        (Serves::Rest(Method::SendMessage), Call::new("POST", "/message:send").header("Content-Type", "text/plain").body("hello"), 415, "CONTENT_TYPE_NOT_SUPPORTED"),
        (Serves::Rest(Method::SendMessage), Call::new("POST", "/message:send").header("Content-Type", "application/json").body("{not json"), 400, "PARSE_ERROR"),
        (Serves::Rest(Method::SendMessage), Call::post("/message:send", &json!({"message": message(None, "who am I")})), 400, "INVALID_PARAMS"),
        (Serves::Rest(Method::CreatePushConfig), Call::post(format!("/tasks/{id}/pushNotificationConfigs"), &json!({"url": "http://10.0.0.7/hook"})).participant("alice"), 400, "INVALID_PARAMS"),
        (Serves::Rest(Method::GetPushConfig), Call::get(format!("/tasks/{id}/pushNotificationConfigs/none")).participant("alice"), 404, "TASK_NOT_FOUND"),
        (Serves::Rest(Method::SubscribeToTask), Call::get(format!("/tasks/{id}:subscribe")).participant("alice"), 400, "UNSUPPORTED_OPERATION"),
        (Serves::Rest(Method::GetExtendedAgentCard), Call::get("/extendedAgentCard"), 400, "UNSUPPORTED_OPERATION"),
        (Serves::AgentCard, Call::get("/tasks"), 404, "METHOD_NOT_FOUND"),
    ];
    for (serves, call, status, reason) in rest {
        let got = invoke(
            &deployment.app(serves),
            serves,
            call.request(payload, plain(payload)),
        )
        .await;
        let what = format!("{serves:?} {} {}", call.method, call.path);
        assert_eq!(got.status, status, "{what}: {}", got.body);
        assert_eq!(
            got.header("content-type"),
            Some("application/json"),
            "{what}"
        );
        let body = got.json();
        assert_eq!(body["error"]["code"], status, "{what}");
        assert_eq!(
            body["error"]["details"][0]["reason"], reason,
            "{what}: {body}"
        );
    }

    let rpc: Vec<(Call, i64)> = vec![
        (
            Call::rpc("GetTask", json!({"id": "nope"})).participant("alice"),
            -32001,
        ),
        (
            Call::rpc("CancelTask", json!({"id": id})).participant("alice"),
            -32002,
        ),
        (
            Call::rpc(
                "SendMessage",
                json!({"message": on(message(Some("alice"), "x"), &id)}),
            ),
            -32004,
        ),
        (
            Call::rpc("GetTask", json!({"id": id}))
                .participant("alice")
                .without_header("A2A-Version"),
            -32009,
        ),
        (Call::rpc("NoSuchMethod", json!({})), -32601),
        (
            Call::rpc("GetTask", json!({"id": 7})).participant("alice"),
            -32602,
        ),
        (
            Call::new("POST", "/")
                .header("Content-Type", "application/json")
                .body("{"),
            -32700,
        ),
        (
            Call::post("/", &json!({"id": 1, "method": "GetTask"})),
            -32600,
        ),
        (Call::rpc("GetExtendedAgentCard", json!({})), -32004),
    ];
    let jsonrpc = deployment.app(Serves::JsonRpc);
    for (call, code) in rpc {
        let got = invoke(
            &jsonrpc,
            Serves::JsonRpc,
            call.request(payload, plain(payload)),
        )
        .await;
        assert_eq!(got.status, 200, "{}", got.body);
        let body = got.json();
        assert_eq!(body["error"]["code"], code, "{body}");
        assert_eq!(
            body["error"]["data"][0]["@type"], "type.googleapis.com/google.rpc.ErrorInfo",
            "{body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_an_authorizer_the_verified_subject_is_the_participant() {
    let deployment = Deployment::with_env(&[("TH_AUTH_MODE", "authorizer")]);
    let send = Serves::Rest(Method::SendMessage);
    let app = deployment.app(send);
    let cases = [
        (Payload::RestV1, "rest-v1-cognito-authorizer.json", "alice"),
        (Payload::RestV1, "rest-v1-lambda-authorizer.json", "bob"),
        (
            Payload::FunctionUrl,
            "function-url-jwt-authorizer.json",
            "dave",
        ),
        (
            Payload::FunctionUrl,
            "function-url-iam-authorizer.json",
            "arn:aws:sts::123456789012:assumed-role/a2a-clients/carol",
        ),
    ];
    for (payload, fixture_name, principal) in cases {
        // No participant asserted: the principal is the sender, and becomes the reporter.
        let call = Call::post("/message:send", &json!({"message": message(None, "hello")}));
        let got = invoke(&app, send, call.request(payload, fixture_name)).await;
        assert_eq!(got.status, 200, "{fixture_name}: {}", got.body);
        let task = got.json()["task"].clone();
        let participants =
            &task["metadata"]["io.github.madarauchiha-314.tiny-harness/task"]["participants"];
        assert_eq!(participants[0]["id"], principal, "{fixture_name}");
        assert_eq!(participants[0]["role"], "reporter", "{fixture_name}");

        // Asserting the same identity is fine; asserting another is refused.
        let same = Call::post(
            "/message:send",
            &json!({"message": message(Some(principal), "again")}),
        );
        let got = invoke(&app, send, same.request(payload, fixture_name)).await;
        assert_eq!(got.status, 200, "{fixture_name}: {}", got.body);
        let other = Call::post(
            "/message:send",
            &json!({"message": message(Some("eve"), "as eve")}),
        );
        let got = invoke(&app, send, other.request(payload, fixture_name)).await;
        assert_eq!(got.status, 400, "{fixture_name}: {}", got.body);
        assert!(
            got.body
                .contains("does not match the authenticated principal"),
            "{}",
            got.body
        );

        // The header cannot override the verified identity for reads either.
        let get = Serves::Rest(Method::GetTask);
        let read = Call::get(format!("/tasks/{}", task["id"].as_str().unwrap())).participant("eve");
        let got = invoke(
            &deployment.app(get),
            get,
            read.request(payload, fixture_name),
        )
        .await;
        assert_eq!(
            got.status, 200,
            "{fixture_name}: read as {principal}: {}",
            got.body
        );
    }
    // Without an authorizer's principal the function refuses the request.
    for payload in PAYLOADS {
        let call = Call::post(
            "/message:send",
            &json!({"message": message(Some("alice"), "hi")}),
        );
        let got = invoke(&app, send, call.request(payload, plain(payload))).await;
        assert_eq!(got.status, 401, "{}", got.body);
        assert_eq!(got.header("www-authenticate"), Some("Bearer"));
        assert_eq!(
            got.json()["error"]["details"][0]["reason"],
            "UNAUTHENTICATED"
        );
    }
    // Self-asserted mode ignores an authorizer it was not told about? No: it reads nothing
    // from the context, and the message's own claim stands.
    let open = Deployment::new();
    let app = open.app(send);
    let call = Call::post(
        "/message:send",
        &json!({"message": message(Some("zoe"), "hi")}),
    );
    let got = invoke(
        &app,
        send,
        call.request(Payload::RestV1, "rest-v1-cognito-authorizer.json"),
    )
    .await;
    let task = got.json()["task"].clone();
    assert_eq!(
        task["metadata"]["io.github.madarauchiha-314.tiny-harness/task"]["participants"][0]["id"],
        "zoe"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_subject_equal_to_the_agent_id_is_refused() {
    // The lambda authorizer fixture's principal is "bob": here, the agent's own id.
    let deployment =
        Deployment::with_env(&[("TH_AUTH_MODE", "authorizer"), ("TH_AGENT_ID", "bob")]);
    let send = Serves::Rest(Method::SendMessage);
    let call = Call::post("/message:send", &json!({"message": message(None, "hello")}));
    let got = invoke(
        &deployment.app(send),
        send,
        call.request(Payload::RestV1, "rest-v1-lambda-authorizer.json"),
    )
    .await;
    assert_eq!(got.status, 400, "{}", got.body);
    assert!(got.body.contains("agent id"), "{}", got.body);
    let list = Serves::Rest(Method::ListTasks);
    let got = invoke(
        &deployment.app(list),
        list,
        Call::get("/tasks").request(Payload::RestV1, "rest-v1-lambda-authorizer.json"),
    )
    .await;
    assert_eq!(got.status, 400, "{}", got.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_rpc_streams_and_answers_buffered_methods_as_streams_too() {
    let deployment = Deployment::new();
    let jsonrpc = deployment.app(Serves::JsonRpc);
    for payload in PAYLOADS {
        let call = Call::rpc(
            "SendStreamingMessage",
            json!({"message": message(Some("alice"), "stream me")}),
        );
        let got = invoke(
            &jsonrpc,
            Serves::JsonRpc,
            call.request(payload, plain(payload)),
        )
        .await;
        assert_eq!(got.status, 200);
        assert_eq!(got.header("content-type"), Some("text/event-stream"));
        let (frames, _) = got.sse();
        assert_eq!(frames.len(), 3, "{}", got.body);
        assert!(frames.iter().all(|f| f["jsonrpc"] == "2.0" && f["id"] == 7));
        assert_eq!(
            frames[2]["result"]["statusUpdate"]["status"]["state"],
            "TASK_STATE_INPUT_REQUIRED"
        );
        let id = frames[0]["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_owned();

        // A buffered method through the streaming runtime: the whole JSON body, not empty.
        let call = Call::rpc("GetTask", json!({"id": id})).participant("alice");
        let got = invoke(
            &jsonrpc,
            Serves::JsonRpc,
            call.request(payload, plain(payload)),
        )
        .await;
        assert_eq!(got.header("content-type"), Some("application/json"));
        assert_eq!(
            got.json()["result"]["status"]["state"],
            "TASK_STATE_INPUT_REQUIRED"
        );

        // Subscribe, while a follow-up arrives through another function.
        let subscribe = Call::rpc("SubscribeToTask", json!({"id": id})).participant("alice");
        let request = subscribe.request(payload, plain(payload));
        let app = jsonrpc.clone();
        let stream = tokio::spawn(async move { invoke(&app, Serves::JsonRpc, request).await });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let send = Serves::Rest(Method::SendMessage);
        let follow_up = Call::post(
            "/message:send",
            &json!({"message": on(message(Some("alice"), "more"), &id)}),
        );
        let got = invoke(
            &deployment.app(send),
            send,
            follow_up.request(payload, plain(payload)),
        )
        .await;
        assert_eq!(got.status, 200);
        let got = tokio::time::timeout(Duration::from_secs(20), stream)
            .await
            .unwrap()
            .unwrap();
        let (frames, _) = got.sse();
        let kinds: Vec<String> = frames
            .iter()
            .map(|f| {
                let r = &f["result"];
                if r.get("task").is_some() {
                    "task".to_owned()
                } else {
                    r["statusUpdate"]["status"]["state"]
                        .as_str()
                        .unwrap_or("?")
                        .to_owned()
                }
            })
            .collect();
        assert_eq!(
            kinds,
            ["task", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED"],
            "{}",
            got.body
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_ends_cleanly_before_the_invocations_deadline() {
    let deployment = Deployment::with_env(&[("TH_STREAM_END_MARGIN_MS", "200")]);
    let task = seed(&deployment, Payload::FunctionUrl).await;
    let id = task["id"].as_str().unwrap();
    let serves = Serves::Rest(Method::SubscribeToTask);
    let app = deployment.app(serves);
    // SubscribeToTask on an interrupted task stays open: it would run until the timeout.
    let request = Call::get(format!("/tasks/{id}:subscribe"))
        .participant("alice")
        .request(Payload::FunctionUrl, "function-url.json")
        .with_lambda_context(deadline_in(Duration::from_millis(1_200)));
    let started = std::time::Instant::now();
    let got = tokio::time::timeout(Duration::from_secs(10), invoke(&app, serves, request))
        .await
        .expect("the stream ended by itself");
    let (frames, comments) = got.sse();
    assert_eq!(frames[0]["task"]["id"], json!(id));
    assert_eq!(
        comments.last().map(String::as_str),
        Some("the stream ends before the function's time limit; subscribe again to continue")
    );
    assert!(
        started.elapsed() < Duration::from_millis(1_200),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stage_is_not_part_of_the_route() {
    let deployment = Deployment::new();
    let task = seed(&deployment, Payload::RestV1).await;
    let serves = Serves::Rest(Method::GetTask);
    let app = deployment.app(serves);
    // lambda_http puts `/prod` in front of REST API paths; the route is the same.
    let request = Call::get(format!("/tasks/{}", task["id"].as_str().unwrap()))
        .participant("alice")
        .request(Payload::RestV1, "rest-v1.json");
    assert!(
        request.uri().path().starts_with("/prod/tasks/"),
        "{}",
        request.uri()
    );
    let got = invoke(&app, serves, request).await;
    assert_eq!(got.status, 200, "{}", got.body);
}

/// The event with another client address in its request context.
fn from_ip(mut event: Value, payload: Payload, ip: &str) -> lambda_http::Request {
    match payload {
        Payload::RestV1 => event["requestContext"]["identity"]["sourceIp"] = json!(ip),
        Payload::FunctionUrl => event["requestContext"]["http"]["sourceIp"] = json!(ip),
    }
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_is_per_instance_per_source_ip_or_verified_principal() {
    // One request, then one every 100 s.
    let limit = [("TH_RATE_LIMIT", "0.01"), ("TH_RATE_LIMIT_BURST", "1")];
    let deployment = Deployment::with_env(&limit);
    for payload in PAYLOADS {
        let rpc = Serves::JsonRpc;
        let app = deployment.app(rpc);
        let call = Call::rpc("ListTasks", json!({})).participant("alice");
        let got = invoke(&app, rpc, call.request(payload, plain(payload))).await;
        assert_eq!(got.status, 200, "{payload:?}: {}", got.body);
        let got = invoke(&app, rpc, call.request(payload, plain(payload))).await;
        assert_eq!(got.status, 429, "{payload:?}: {}", got.body);
        let retry_after: u64 = got.header("retry-after").unwrap().parse().unwrap();
        assert!(retry_after > 60, "{payload:?}: {retry_after}");
        assert_eq!(got.json()["error"]["code"], -32000, "{}", got.body);
        // Another source IP is another caller.
        let other = from_ip(call.event(payload, plain(payload)), payload, "198.51.100.4");
        let got = invoke(&app, rpc, other).await;
        assert_eq!(got.status, 200, "{payload:?}: {}", got.body);

        // Each instance counts on its own; a REST function answers in REST.
        let list = Serves::Rest(Method::ListTasks);
        let app = deployment.app(list);
        let call = Call::get("/tasks").participant("alice");
        assert_eq!(
            invoke(&app, list, call.request(payload, plain(payload)))
                .await
                .status,
            200
        );
        let got = invoke(&app, list, call.request(payload, plain(payload))).await;
        assert_eq!(got.status, 429, "{payload:?}: {}", got.body);
        assert!(got.header("retry-after").is_some());
        assert_eq!(got.json()["error"]["status"], "RESOURCE_EXHAUSTED");
    }

    // Behind an authorizer the verified principal is the caller: alice and bob share an
    // address (203.0.113.7) but not a bucket.
    let env = [limit[0], limit[1], ("TH_AUTH_MODE", "authorizer")];
    let deployment = Deployment::with_env(&env);
    let list = Serves::Rest(Method::ListTasks);
    let app = deployment.app(list);
    let call = Call::get("/tasks");
    let alice = "rest-v1-cognito-authorizer.json";
    let bob = "rest-v1-lambda-authorizer.json";
    let got = invoke(&app, list, call.request(Payload::RestV1, alice)).await;
    assert_eq!(got.status, 200, "{}", got.body);
    let got = invoke(&app, list, call.request(Payload::RestV1, alice)).await;
    assert_eq!(got.status, 429, "{}", got.body);
    let got = invoke(&app, list, call.request(Payload::RestV1, bob)).await;
    assert_eq!(got.status, 200, "{}", got.body);
}
