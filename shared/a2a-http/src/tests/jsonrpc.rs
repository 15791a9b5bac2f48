//! The JSON-RPC binding: envelope rules, all 13 methods (A2A's 11, the task extension's 2),
//! errors.

use a2a::{TaskState, methods};
use a2a_service::ServiceError;
use serde_json::{Value, json};

use crate::HttpConfig;
use crate::testkit::{Call, FakeApi, Req, send, send_configured};

type Check = Box<dyn Fn(&Call) -> bool>;

fn message() -> Value {
    json!({"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hello"}]})
}

/// Every method, its params, and what the service must have been called with.
#[tokio::test]
async fn every_method_dispatches() {
    let cases: Vec<(&str, Value, Check)> = vec![
        (
            methods::SEND_MESSAGE,
            json!({"message": message(), "configuration": {}}),
            Box::new(|c| matches!(c, Call::SendMessage(r) if r.message.message_id == "m-1")),
        ),
        (
            methods::SEND_STREAMING_MESSAGE,
            json!({"message": message()}),
            Box::new(|c| matches!(c, Call::SendStreamingMessage(r) if r.message.parts.len() == 1)),
        ),
        (
            methods::GET_TASK,
            json!({"id": "t-1", "historyLength": 2}),
            Box::new(
                |c| matches!(c, Call::GetTask(r) if r.id == "t-1" && r.history_length == Some(2)),
            ),
        ),
        (
            methods::LIST_TASKS,
            json!({"pageSize": 10, "status": "TASK_STATE_WORKING"}),
            Box::new(
                |c| matches!(c, Call::ListTasks(r) if r.page_size == Some(10) && r.status == Some(TaskState::Working)),
            ),
        ),
        (
            methods::CANCEL_TASK,
            json!({"id": "t-1"}),
            Box::new(|c| matches!(c, Call::CancelTask(r) if r.id == "t-1")),
        ),
        (
            methods::SUBSCRIBE_TO_TASK,
            json!({"id": "t-1"}),
            Box::new(|c| matches!(c, Call::SubscribeToTask(r) if r.id == "t-1")),
        ),
        (
            methods::CREATE_PUSH_CONFIG,
            json!({"taskId": "t-1", "url": "https://hook"}),
            Box::new(
                |c| matches!(c, Call::CreatePushConfig(r) if r.task_id == "t-1" && r.url == "https://hook"),
            ),
        ),
        (
            methods::GET_PUSH_CONFIG,
            json!({"taskId": "t-1", "id": "c-1"}),
            Box::new(
                |c| matches!(c, Call::GetPushConfig(r) if r.task_id == "t-1" && r.id == "c-1"),
            ),
        ),
        (
            methods::LIST_PUSH_CONFIGS,
            json!({"taskId": "t-1"}),
            Box::new(|c| matches!(c, Call::ListPushConfigs(r) if r.task_id == "t-1")),
        ),
        (
            methods::DELETE_PUSH_CONFIG,
            json!({"taskId": "t-1", "id": "c-1"}),
            Box::new(
                |c| matches!(c, Call::DeletePushConfig(r) if r.task_id == "t-1" && r.id == "c-1"),
            ),
        ),
        (
            methods::GET_EXTENDED_AGENT_CARD,
            json!({}),
            Box::new(|c| matches!(c, Call::GetExtendedAgentCard(_))),
        ),
        (
            "GetTaskTranscript",
            json!({"id": "t-1", "pageSize": 2, "pageToken": "4"}),
            Box::new(
                |c| matches!(c, Call::GetTaskTranscript(r) if r.id == "t-1" && r.page_size == Some(2) && r.page_token.as_deref() == Some("4")),
            ),
        ),
        (
            "GetTaskAuditLog",
            json!({"id": "t-1"}),
            Box::new(
                |c| matches!(c, Call::GetTaskAuditLog(r) if r.id == "t-1" && r.page_size.is_none() && r.page_token.is_none()),
            ),
        ),
    ];
    assert_eq!(cases.len(), 13);
    for (method, params, check) in cases {
        let api = FakeApi::new();
        let got = send(&api, Req::rpc(method, params)).await;
        assert_eq!(got.status, 200, "{method}");
        let (_, call) = api.only_call();
        assert!(check(&call), "{method}: {call:?}");
        if methods::is_streaming(method) {
            assert_eq!(
                got.header("content-type"),
                Some("text/event-stream"),
                "{method}"
            );
            let events = got.events();
            assert_eq!(events.len(), 2, "{method}");
            assert!(
                events
                    .iter()
                    .all(|e| e["id"] == 1 && e["jsonrpc"] == "2.0" && e.get("result").is_some())
            );
        } else {
            assert_eq!(
                got.header("content-type"),
                Some("application/json"),
                "{method}"
            );
            let body = got.json();
            assert_eq!(body["jsonrpc"], "2.0");
            assert_eq!(body["id"], 1);
            assert!(body.get("error").is_none(), "{method}: {body}");
            assert!(body.get("result").is_some(), "{method}: {body}");
        }
    }
}

#[tokio::test]
async fn results_are_the_proto_json_documents() {
    let api = FakeApi::new();
    let body = send(&api, Req::rpc("SendMessage", json!({"message": message()})))
        .await
        .json();
    assert_eq!(body["result"]["task"]["id"], "task-1");
    assert_eq!(
        body["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    let body = send(&api, Req::rpc("ListTasks", json!({}))).await.json();
    assert_eq!(
        body["result"],
        json!({"tasks": [{"id": "task-1", "contextId": "ctx-1",
        "status": {"state": "TASK_STATE_WORKING"}}], "nextPageToken": "", "pageSize": 50, "totalSize": 1})
    );

    let body = send(
        &api,
        Req::rpc(
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": "t", "id": "c"}),
        ),
    )
    .await
    .json();
    assert_eq!(body, json!({"jsonrpc": "2.0", "id": 1, "result": {}}));

    let body = send(&api, Req::rpc("GetExtendedAgentCard", Value::Null))
        .await
        .json();
    assert_eq!(body["result"]["name"], "Extended Test Agent");
}

#[tokio::test]
async fn string_ids_and_missing_params_are_fine() {
    let api = FakeApi::new();
    let req = Req::post("/")
        .json(&json!({"jsonrpc": "2.0", "id": "abc-1", "method": "GetExtendedAgentCard"}));
    let body = send(&api, req).await.json();
    assert_eq!(body["id"], "abc-1");
    assert!(body.get("result").is_some());
    // A notification (no id) is still answered, with id null.
    let req =
        Req::post("/").json(&json!({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "t"}}));
    let body = send(&api, req).await.json();
    assert_eq!(body["id"], Value::Null);
    assert!(body.get("result").is_some());
}

async fn rpc_error(req: Req) -> (Value, Value) {
    let api = FakeApi::new();
    let got = send(&api, req).await;
    assert_eq!(got.status, 200, "JSON-RPC errors are HTTP 200");
    assert_eq!(got.header("content-type"), Some("application/json"));
    let body = got.json();
    assert!(
        api.calls().is_empty(),
        "the service must not be called: {:?}",
        api.calls()
    );
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(
        body["error"]["data"][0]["@type"],
        "type.googleapis.com/google.rpc.ErrorInfo"
    );
    assert_eq!(body["error"]["data"][0]["domain"], "a2a-protocol.org");
    (body["id"].clone(), body["error"].clone())
}

#[tokio::test]
async fn envelope_errors() {
    let (id, err) = rpc_error(Req::post("/").raw("application/json", "{not json")).await;
    assert_eq!((id, err["code"].clone()), (Value::Null, json!(-32700)));
    assert_eq!(err["data"][0]["reason"], "PARSE_ERROR");

    let invalid = [
        (
            json!([{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}]),
            Value::Null,
        ),
        (json!("GetTask"), Value::Null),
        // Four members in order are still an array, not an envelope.
        (json!(["2.0", 1, "GetTask", {"id": "t"}]), Value::Null),
        (
            json!({"jsonrpc": "1.0", "id": 7, "method": "GetTask"}),
            json!(7),
        ),
        (json!({"id": 7, "method": "GetTask"}), json!(7)),
        (
            json!({"jsonrpc": "2.0", "id": {"x": 1}, "method": "GetTask"}),
            Value::Null,
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1.5, "method": "GetTask"}),
            Value::Null,
        ),
        (
            json!({"jsonrpc": "2.0", "id": true, "method": "GetTask"}),
            Value::Null,
        ),
        (
            json!({"jsonrpc": "2.0", "id": "x", "method": 5}),
            json!("x"),
        ),
        (json!({"jsonrpc": "2.0", "id": "x"}), json!("x")),
    ];
    for (body, expected_id) in invalid {
        let (id, err) = rpc_error(Req::post("/").json(&body)).await;
        assert_eq!(err["code"], -32600, "{body}");
        assert_eq!(id, expected_id, "{body}");
        assert_eq!(err["data"][0]["reason"], "INVALID_REQUEST");
    }

    let (id, err) = rpc_error(Req::rpc("message/send", json!({}))).await;
    assert_eq!((id, err["code"].clone()), (json!(1), json!(-32601)));
    assert_eq!(err["data"][0]["reason"], "METHOD_NOT_FOUND");

    let (id, err) = rpc_error(
        Req::post("/")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": [1]})),
    )
    .await;
    assert_eq!((id, err["code"].clone()), (json!(1), json!(-32602)));
    // The envelope's own checks come before the params' shape.
    let (id, err) = rpc_error(
        Req::post("/").json(&json!({"jsonrpc": "1.0", "id": 2, "method": "GetTask", "params": 5})),
    )
    .await;
    assert_eq!((id, err["code"].clone()), (json!(2), json!(-32600)));
    // A member sent twice: the last one counts (as a JSON object read whole would have it).
    let (id, err) = rpc_error(Req::post("/").raw(
        "application/json",
        r#"{"jsonrpc":"2.0","id":3,"method":"GetTask","method":"tasks/get","params":{"id":"t"}}"#,
    ))
    .await;
    assert_eq!((id, err["code"].clone()), (json!(3), json!(-32601)));
}

#[tokio::test]
async fn invalid_params_name_the_fields() {
    let cases = [
        ("SendMessage", json!({}), "message"),
        (
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}),
            "message.parts",
        ),
        (
            "SendMessage",
            json!({"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}),
            "message.messageId",
        ),
        (
            "SendMessage",
            json!({"message": {"messageId": "m", "parts": [{"text": "x"}]}}),
            "message.role",
        ),
        (
            "SendStreamingMessage",
            json!({"message": {"messageId": "m", "role": "user", "parts": [{"text": "x"}]}}),
            "message.role",
        ),
        ("ListTasks", json!({"pageSize": 101}), "pageSize"),
        ("ListTasks", json!({"pageSize": 0}), "pageSize"),
        ("ListTasks", json!({"status": "working"}), "status"),
        ("GetTask", json!({}), "id"),
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "t"}),
            "url",
        ),
    ];
    for (method, params, field) in cases {
        let (_, err) = rpc_error(Req::rpc(method, params.clone())).await;
        assert_eq!(err["code"], -32602, "{method} {params}");
        assert_eq!(err["data"][0]["reason"], "INVALID_PARAMS");
        assert_eq!(
            err["data"][1]["@type"],
            "type.googleapis.com/google.rpc.BadRequest"
        );
        assert_eq!(
            err["data"][1]["fieldViolations"][0]["field"], field,
            "{method} {params}"
        );
    }
}

#[tokio::test]
async fn content_type_is_checked_before_parsing() {
    // TCK gotcha 4: a Python repr body sent as text/plain must get -32005, not -32700.
    let repr = "{'jsonrpc': '2.0', 'id': 1, 'method': 'SendMessage', 'params': {}}";
    let (id, err) = rpc_error(Req::post("/").raw("text/plain", repr)).await;
    assert_eq!((id, err["code"].clone()), (Value::Null, json!(-32005)));
    assert_eq!(err["data"][0]["reason"], "CONTENT_TYPE_NOT_SUPPORTED");

    let (_, err) =
        rpc_error(Req::post("/").body(r#"{"jsonrpc":"2.0","id":1,"method":"GetTask"}"#)).await;
    assert_eq!(err["code"], -32005, "no Content-Type at all");

    let valid =
        json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}).to_string();
    for ct in [
        "application/json",
        "application/json; charset=utf-8",
        "application/a2a+json",
        "APPLICATION/JSON",
    ] {
        let api = FakeApi::new();
        let body = send(&api, Req::post("/").raw(ct, valid.clone()))
            .await
            .json();
        assert!(body.get("result").is_some(), "{ct}: {body}");
    }
}

#[tokio::test]
async fn the_configured_path_with_and_without_a_trailing_slash() {
    let config = HttpConfig {
        jsonrpc_path: "/a2a/jsonrpc".into(),
        ..HttpConfig::default()
    };
    for path in ["/", "/a2a/jsonrpc", "/a2a/jsonrpc/"] {
        let api = FakeApi::new();
        let req = Req::post(path)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}));
        let got = send_configured(&api, &config, req).await;
        assert!(got.json().get("result").is_some(), "{path}");
    }
    let api = FakeApi::new();
    let got = send_configured(&api, &config, Req::get("/a2a/jsonrpc")).await;
    assert_eq!(got.status, 405);
    assert_eq!(got.header("allow"), Some("POST"));
}

/// Every service error through the JSON-RPC binding: code, reason, message, HTTP 200.
#[tokio::test]
async fn service_errors_on_the_wire() {
    let cases = [
        (
            ServiceError::InvalidParams("no participant asserted".into()),
            -32602,
            "INVALID_PARAMS",
            "no participant asserted",
        ),
        (
            ServiceError::TaskNotFound("t-1".into()),
            -32001,
            "TASK_NOT_FOUND",
            "task not found: t-1",
        ),
        (
            ServiceError::TaskNotCancelable("terminal".into()),
            -32002,
            "TASK_NOT_CANCELABLE",
            "terminal",
        ),
        (
            ServiceError::UnsupportedOperation("terminal task".into()),
            -32004,
            "UNSUPPORTED_OPERATION",
            "terminal task",
        ),
        (
            ServiceError::ContentTypeNotSupported("image/png".into()),
            -32005,
            "CONTENT_TYPE_NOT_SUPPORTED",
            "image/png",
        ),
        (
            ServiceError::ExtendedCardNotConfigured,
            -32007,
            "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            "the extended agent card is not configured",
        ),
        (
            ServiceError::Internal,
            -32603,
            "INTERNAL_ERROR",
            "internal error",
        ),
        (
            ServiceError::Unavailable,
            -32603,
            "INTERNAL_ERROR",
            "the service is temporarily unavailable",
        ),
    ];
    for (err, code, reason, message) in cases {
        let api = FakeApi::new().failing(err.clone());
        let got = send(&api, Req::rpc("GetTask", json!({"id": "t-1"}))).await;
        assert_eq!(got.status, 200);
        let body = got.json();
        assert_eq!(body["id"], 1);
        assert_eq!(body["error"]["code"], code, "{err:?}");
        assert_eq!(body["error"]["message"], message, "{err:?}");
        assert_eq!(body["error"]["data"][0]["reason"], reason, "{err:?}");
    }
}
