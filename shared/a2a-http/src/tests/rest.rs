//! The HTTP+JSON binding: all 11 methods, tenants, ids, bodies, errors.

use a2a::{TaskState, methods};
use a2a_service::ServiceError;
use serde_json::{Value, json};

use crate::testkit::{Call, FakeApi, Got, Req, send, send_configured};
use crate::{HttpConfig, Method, Serves};

type Check = Box<dyn Fn(&Call) -> bool>;

fn send_body() -> Value {
    json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}})
}

fn assert_rest_error(got: &Got, status: u16, rpc_status: &str, reason: &str) -> Value {
    assert_eq!(got.status, status, "{}", got.text());
    assert_eq!(
        got.header("content-type"),
        Some("application/json"),
        "errors are application/json (TCK gotcha 5)"
    );
    let body = got.json();
    assert_eq!(body["error"]["code"], status);
    assert_eq!(body["error"]["status"], rpc_status);
    assert_eq!(
        body["error"]["details"][0]["@type"],
        "type.googleapis.com/google.rpc.ErrorInfo"
    );
    assert_eq!(body["error"]["details"][0]["reason"], reason);
    assert_eq!(body["error"]["details"][0]["domain"], "a2a-protocol.org");
    body
}

#[tokio::test]
async fn every_method_dispatches() {
    let cases: Vec<(Req, Check)> = vec![
        (
            Req::post("/message:send").json(&send_body()),
            Box::new(|c| matches!(c, Call::SendMessage(r) if r.message.message_id == "m-1")),
        ),
        (
            Req::post("/message:stream").json(&send_body()),
            Box::new(
                |c| matches!(c, Call::SendStreamingMessage(r) if r.message.message_id == "m-1"),
            ),
        ),
        (
            Req::get("/tasks/t-1?historyLength=3"),
            Box::new(
                |c| matches!(c, Call::GetTask(r) if r.id == "t-1" && r.history_length == Some(3)),
            ),
        ),
        (
            Req::get(
                "/tasks?contextId=c-1&status=TASK_STATE_INPUT_REQUIRED&pageSize=5&pageToken=p&historyLength=0\
                 &statusTimestampAfter=2026-01-31T12%3A00%3A00Z&includeArtifacts=true&ignored=1",
            ),
            Box::new(|c| {
                matches!(c, Call::ListTasks(r) if r.context_id.as_deref() == Some("c-1")
                    && r.status == Some(TaskState::InputRequired) && r.page_size == Some(5)
                    && r.page_token.as_deref() == Some("p") && r.history_length == Some(0)
                    && r.status_timestamp_after.is_some() && r.include_artifacts == Some(true))
            }),
        ),
        (
            Req::post("/tasks/t-1:cancel"),
            Box::new(|c| matches!(c, Call::CancelTask(r) if r.id == "t-1")),
        ),
        (
            Req::get("/tasks/t-1:subscribe"),
            Box::new(|c| matches!(c, Call::SubscribeToTask(r) if r.id == "t-1")),
        ),
        (
            Req::post("/tasks/t-1:subscribe"),
            Box::new(|c| matches!(c, Call::SubscribeToTask(r) if r.id == "t-1")),
        ),
        (
            Req::post("/tasks/t-1/pushNotificationConfigs")
                .json(&json!({"url": "https://hook", "token": "tok"})),
            Box::new(|c| {
                matches!(c, Call::CreatePushConfig(r) if r.task_id == "t-1" && r.url == "https://hook"
                    && r.token.as_deref() == Some("tok"))
            }),
        ),
        (
            Req::get("/tasks/t-1/pushNotificationConfigs?pageSize=2&pageToken=x"),
            Box::new(|c| {
                matches!(c, Call::ListPushConfigs(r) if r.task_id == "t-1" && r.page_size == Some(2)
                    && r.page_token.as_deref() == Some("x"))
            }),
        ),
        (
            Req::get("/tasks/t-1/pushNotificationConfigs/c-1"),
            Box::new(
                |c| matches!(c, Call::GetPushConfig(r) if r.task_id == "t-1" && r.id == "c-1"),
            ),
        ),
        (
            Req::new("DELETE", "/tasks/t-1/pushNotificationConfigs/c-1"),
            Box::new(
                |c| matches!(c, Call::DeletePushConfig(r) if r.task_id == "t-1" && r.id == "c-1"),
            ),
        ),
        (
            Req::get("/extendedAgentCard"),
            Box::new(|c| matches!(c, Call::GetExtendedAgentCard(_))),
        ),
    ];
    for (req, check) in cases {
        let api = FakeApi::new();
        let got = send(&api, req).await;
        assert_eq!(got.status, 200, "{}", got.text());
        let (_, call) = api.only_call();
        assert!(check(&call), "{call:?}");
        if got.was_stream {
            assert_eq!(got.header("content-type"), Some("text/event-stream"));
            let events = got.events();
            assert!(
                events[0].get("task").is_some(),
                "bare StreamResponse: {events:?}"
            );
            assert!(events[1].get("statusUpdate").is_some());
        } else {
            // Negotiated: see `reply::rest_success_type` and its tests.
            let content_type = got.header("content-type").unwrap_or_default();
            assert!(
                content_type == "application/a2a+json" || content_type == "application/json",
                "{content_type}"
            );
            got.json();
        }
    }
}

#[tokio::test]
async fn success_bodies_are_the_bare_documents() {
    let api = FakeApi::new();
    let got = send(&api, Req::post("/message:send").json(&send_body())).await;
    assert_eq!(got.json()["task"]["id"], "task-1");
    let got = send(&api, Req::get("/tasks/t-9")).await;
    assert_eq!(
        got.json(),
        json!({"id": "t-9", "contextId": "ctx-1", "status": {"state": "TASK_STATE_WORKING"}})
    );
    let got = send(
        &api,
        Req::new("DELETE", "/tasks/t/pushNotificationConfigs/c"),
    )
    .await;
    assert_eq!(got.json(), json!({}));
    let got = send(
        &api,
        Req::post("/tasks/t/pushNotificationConfigs").json(&json!({"url": "https://h"})),
    )
    .await;
    assert_eq!(got.json()["id"], "cfg-1");
    assert_eq!(got.json()["taskId"], "t");
}

#[tokio::test]
async fn cancel_and_subscribe_accept_empty_braces_and_null_bodies() {
    for path in ["/tasks/t-1:cancel", "/tasks/t-1:subscribe"] {
        for req in [
            Req::post(path),
            Req::post(path).raw("application/json", ""),
            Req::post(path).raw("application/json", "{}"),
            Req::post(path).raw("application/json", "null"),
            Req::post(path).raw("application/json", " \n"),
            Req::post(path).raw("text/plain", ""),
            Req::post(path).raw("application/a2a+json", r#"{"id": "t-1"}"#),
        ] {
            let api = FakeApi::new();
            let got = send(&api, req).await;
            assert_eq!(got.status, 200, "{path}: {}", got.text());
            assert_eq!(api.calls().len(), 1);
        }
    }
    let api = FakeApi::new();
    let got = send(
        &api,
        Req::post("/tasks/t-1:cancel").json(&json!({"metadata": {"reason": "user"}})),
    )
    .await;
    assert_eq!(got.status, 200);
    let (_, call) = api.only_call();
    assert!(
        matches!(call, Call::CancelTask(r) if r.metadata.as_ref().is_some_and(|m| m["reason"] == "user"))
    );
}

#[tokio::test]
async fn wrong_body_content_type_is_415() {
    // The TCK's 415 test: text/plain to /message:send.
    let api = FakeApi::new();
    let got = send(
        &api,
        Req::post("/message:send").raw("text/plain", send_body().to_string()),
    )
    .await;
    let body = assert_rest_error(&got, 415, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("text/plain")
    );
    assert!(api.calls().is_empty());
    let got = send(
        &api,
        Req::post("/tasks/t:cancel").raw("application/x-www-form-urlencoded", "a=b"),
    )
    .await;
    assert_rest_error(&got, 415, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED");
    let got = send(
        &api,
        Req::post("/message:send").body(send_body().to_string()),
    )
    .await;
    assert_rest_error(&got, 415, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED");
    // a2a+json is accepted.
    let got = send(
        &api,
        Req::post("/message:send").raw("application/a2a+json", send_body().to_string()),
    )
    .await;
    assert_eq!(got.status, 200);
}

#[tokio::test]
async fn bad_bodies() {
    let api = FakeApi::new();
    let got = send(
        &api,
        Req::post("/message:send").raw("application/json", "{oops"),
    )
    .await;
    assert_rest_error(&got, 400, "INVALID_ARGUMENT", "PARSE_ERROR");
    let got = send(
        &api,
        Req::post("/message:send").raw("application/json", "[1]"),
    )
    .await;
    assert_rest_error(&got, 400, "INVALID_ARGUMENT", "INVALID_REQUEST");
    let got = send(&api, Req::post("/message:send")).await;
    let body = assert_rest_error(&got, 400, "INVALID_ARGUMENT", "INVALID_PARAMS");
    assert_eq!(
        body["error"]["details"][1]["fieldViolations"][0]["field"],
        "message"
    );
    let got = send(&api, Req::get("/tasks?pageSize=500")).await;
    let body = assert_rest_error(&got, 400, "INVALID_ARGUMENT", "INVALID_PARAMS");
    assert_eq!(
        body["error"]["details"][1]["@type"],
        "type.googleapis.com/google.rpc.BadRequest"
    );
    assert_eq!(
        body["error"]["details"][1]["fieldViolations"][0]["field"],
        "pageSize"
    );
    let got = send(&api, Req::get("/tasks?status=NOPE&statusTimestampAfter=x")).await;
    let body = assert_rest_error(&got, 400, "INVALID_ARGUMENT", "INVALID_PARAMS");
    assert_eq!(
        body["error"]["details"][1]["fieldViolations"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(api.calls().is_empty());
}

#[tokio::test]
async fn path_ids_win_and_must_agree() {
    let api = FakeApi::new();
    let got = send(
        &api,
        Req::post("/tasks/t-1/pushNotificationConfigs").json(&json!({"taskId": "t-2", "url": "u"})),
    )
    .await;
    let body = assert_rest_error(&got, 400, "INVALID_ARGUMENT", "INVALID_PARAMS");
    assert_eq!(
        body["error"]["details"][1]["fieldViolations"][0]["field"],
        "taskId"
    );
    let got = send(
        &api,
        Req::post("/tasks/t-1:cancel").json(&json!({"id": "t-2"})),
    )
    .await;
    assert_rest_error(&got, 400, "INVALID_ARGUMENT", "INVALID_PARAMS");
    assert!(api.calls().is_empty());
    let got = send(
        &api,
        Req::post("/tasks/t-1/pushNotificationConfigs").json(&json!({"taskId": "t-1", "url": "u"})),
    )
    .await;
    assert_eq!(got.status, 200);
}

#[tokio::test]
async fn tenant_prefix_is_copied_into_the_request() {
    let cases = [
        (
            Req::post("/acme/message:send")
                .json(&json!({"message": send_body()["message"], "tenant": "other"})),
            Method::SendMessage,
        ),
        (Req::get("/acme/tasks/t-1"), Method::GetTask),
        (Req::get("/acme/tasks"), Method::ListTasks),
        (Req::post("/acme/tasks/t-1:cancel"), Method::CancelTask),
        (
            Req::get("/acme/tasks/t-1/pushNotificationConfigs/c"),
            Method::GetPushConfig,
        ),
        (
            Req::get("/acme/extendedAgentCard"),
            Method::GetExtendedAgentCard,
        ),
    ];
    for (req, method) in cases {
        let api = FakeApi::new();
        let got = send(&api, req).await;
        assert_eq!(got.status, 200, "{}", got.text());
        let (_, call) = api.only_call();
        assert_eq!(call.method_and_tenant(), (method, Some("acme")), "{call:?}");
    }
}

#[tokio::test]
async fn ids_in_paths_are_percent_decoded() {
    let api = FakeApi::new();
    send(&api, Req::get("/tasks/a%2Fb%3Ac%20d")).await;
    send(&api, Req::post("/tasks/x%3Acancel:cancel")).await;
    send(
        &api,
        Req::new("DELETE", "/tasks/t%2B1/pushNotificationConfigs/c%2F1"),
    )
    .await;
    let calls: Vec<Call> = api.calls().into_iter().map(|(_, c)| c).collect();
    assert!(
        matches!(&calls[0], Call::GetTask(r) if r.id == "a/b:c d"),
        "{calls:?}"
    );
    assert!(
        matches!(&calls[1], Call::CancelTask(r) if r.id == "x:cancel"),
        "{calls:?}"
    );
    assert!(
        matches!(&calls[2], Call::DeletePushConfig(r) if r.task_id == "t+1" && r.id == "c/1"),
        "{calls:?}"
    );
    let got = send(&api, Req::get("/tasks/%FF")).await;
    assert_rest_error(&got, 400, "INVALID_ARGUMENT", "INVALID_PARAMS");
}

#[tokio::test]
async fn unknown_routes_are_404_and_wrong_methods_405() {
    let api = FakeApi::new();
    for path in ["/nope", "/v1/x/message:send", "/tasks/a/b", "/acme/nope/x"] {
        let got = send(&api, Req::get(path)).await;
        assert_rest_error(&got, 404, "NOT_FOUND", "METHOD_NOT_FOUND");
    }
    for (method, path, allow) in [
        ("GET", "/message:send", "POST"),
        ("DELETE", "/tasks", "GET"),
        ("GET", "/tasks/t:cancel", "POST"),
        ("PUT", "/tasks/t/pushNotificationConfigs", "GET, POST"),
        ("POST", "/tasks/t/pushNotificationConfigs/c", "GET, DELETE"),
        ("POST", "/acme/tasks/t", "GET"),
    ] {
        let got = send(&api, Req::new(method, path)).await;
        assert_rest_error(&got, 405, "UNIMPLEMENTED", "METHOD_NOT_ALLOWED");
        assert_eq!(got.header("allow"), Some(allow), "{method} {path}");
    }
    assert!(api.calls().is_empty());
}

#[tokio::test]
async fn rest_prefix_moves_the_routes() {
    let config = HttpConfig {
        rest_prefix: "/rest".into(),
        ..HttpConfig::default()
    };
    let api = FakeApi::new();
    let got = send_configured(&api, &config, Req::get("/rest/tasks/t-1")).await;
    assert_eq!(got.status, 200);
    let got = send_configured(&api, &config, Req::get("/rest/acme/tasks/t-1")).await;
    assert_eq!(got.status, 200);
    let got = send_configured(&api, &config, Req::get("/tasks/t-1")).await;
    assert_eq!(got.status, 404);
}

/// Every service error through the REST binding: status, google.rpc status, reason.
#[tokio::test]
async fn service_errors_on_the_wire() {
    let cases = [
        (
            ServiceError::InvalidParams("no participant asserted".into()),
            400,
            "INVALID_ARGUMENT",
            "INVALID_PARAMS",
        ),
        (
            ServiceError::TaskNotFound("t-1".into()),
            404,
            "NOT_FOUND",
            "TASK_NOT_FOUND",
        ),
        (
            ServiceError::TaskNotCancelable("terminal".into()),
            400,
            "FAILED_PRECONDITION",
            "TASK_NOT_CANCELABLE",
        ),
        (
            ServiceError::UnsupportedOperation("x".into()),
            400,
            "FAILED_PRECONDITION",
            "UNSUPPORTED_OPERATION",
        ),
        (
            ServiceError::ContentTypeNotSupported("x".into()),
            400,
            "INVALID_ARGUMENT",
            "CONTENT_TYPE_NOT_SUPPORTED",
        ),
        (
            ServiceError::ExtendedCardNotConfigured,
            400,
            "FAILED_PRECONDITION",
            "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        ),
        (ServiceError::Internal, 500, "INTERNAL", "INTERNAL_ERROR"),
        (
            ServiceError::Unavailable,
            503,
            "UNAVAILABLE",
            "INTERNAL_ERROR",
        ),
    ];
    for (err, status, rpc_status, reason) in cases {
        let api = FakeApi::new().failing(err.clone());
        let got = send(&api, Req::post("/tasks/t-1:cancel")).await;
        let body = assert_rest_error(&got, status, rpc_status, reason);
        assert_eq!(
            body["error"]["message"],
            crate::ProtocolError::from(err).message
        );
    }
    let api = FakeApi::new().failing(ServiceError::TaskNotFound("t-1".into()));
    let got = send(&api, Req::get("/tasks/t-1")).await;
    let body = assert_rest_error(&got, 404, "NOT_FOUND", "TASK_NOT_FOUND");
    assert_eq!(body["error"]["details"][0]["metadata"]["taskId"], "t-1");
}

/// A unit that serves part of the API answers each of `others` with 404, calling nothing (nor
/// having called anything before).
async fn assert_routes_refused(
    api: &FakeApi,
    config: &HttpConfig,
    others: impl IntoIterator<Item = Req>,
) {
    for req in others {
        let got = send_configured(api, config, req).await;
        assert_rest_error(&got, 404, "NOT_FOUND", "METHOD_NOT_FOUND");
    }
    assert!(api.calls().is_empty());
}

/// A deployment unit that serves one method answers its own route (a wrong HTTP method there
/// still gets 405) and refuses every other route, the card and JSON-RPC, calling nothing.
#[tokio::test]
async fn a_unit_serving_one_method_refuses_every_other_route() {
    let get_task = HttpConfig {
        serves: Serves::Rest(Method::GetTask),
        ..HttpConfig::default()
    };
    let api = FakeApi::new();
    let got = send_configured(&api, &get_task, Req::get("/tasks/t-1")).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert!(matches!(api.only_call().1, Call::GetTask(r) if r.id == "t-1"));

    let api = FakeApi::new();
    let wrong_verb = send_configured(&api, &get_task, Req::new("DELETE", "/tasks/t-1")).await;
    assert_eq!(wrong_verb.status, 405, "{}", wrong_verb.text());
    let others = [
        Req::post("/message:send").json(&send_body()),
        Req::post("/tasks/t-1:cancel"),
        Req::get("/tasks"),
        Req::get("/.well-known/agent-card.json"),
        Req::rpc(methods::GET_TASK, json!({"id": "t-1"})),
    ];
    assert_routes_refused(&api, &get_task, others).await;

    let jsonrpc = HttpConfig {
        serves: Serves::JsonRpc,
        ..HttpConfig::default()
    };
    assert_routes_refused(&api, &jsonrpc, [Req::get("/tasks/t-1")]).await;
    let card = HttpConfig {
        serves: Serves::AgentCard,
        ..HttpConfig::default()
    };
    let got = send_configured(&api, &card, Req::get("/.well-known/agent-card.json")).await;
    assert_eq!(got.status, 200);
    assert!(api.calls().is_empty());
}

/// The unit behind API Gateway's `/tasks/{id}` resource answers the three methods on it
/// (GetTask, CancelTask, SubscribeToTask by GET and POST) and the task's records, and refuses
/// every other route.
#[tokio::test]
async fn the_task_resource_unit_answers_the_three_methods_on_tasks_id() {
    let task = HttpConfig {
        serves: Serves::TaskResource,
        ..HttpConfig::default()
    };
    for req in [
        Req::get("/tasks/t-1"),
        Req::post("/tasks/t-1:cancel"),
        Req::get("/tasks/t-1:subscribe"),
        Req::post("/tasks/t-1:subscribe"),
        Req::get("/tasks/t-1/transcript"),
        Req::get("/tasks/t-1/auditLog"),
    ] {
        let api = FakeApi::new();
        let got = send_configured(&api, &task, req).await;
        assert_eq!(got.status, 200, "{}", got.text());
        assert!(matches!(
            api.only_call().1,
            Call::GetTask(_)
                | Call::CancelTask(_)
                | Call::SubscribeToTask(_)
                | Call::GetTaskTranscript(_)
                | Call::GetTaskAuditLog(_)
        ));
    }
    let api = FakeApi::new();
    let got = send_configured(&api, &task, Req::new("DELETE", "/tasks/t-1")).await;
    assert_eq!(got.status, 405, "{}", got.text());
    let others = [
        Req::post("/message:send").json(&send_body()),
        Req::get("/tasks"),
        Req::get("/tasks/t-1/pushNotificationConfigs"),
        Req::get("/.well-known/agent-card.json"),
        Req::rpc(methods::GET_TASK, json!({"id": "t-1"})),
    ];
    assert_routes_refused(&api, &task, others).await;
    assert!(Serves::TaskResource.may_stream());
    assert!(!Serves::TaskResource.answers_rest(Method::ListTasks));
}
