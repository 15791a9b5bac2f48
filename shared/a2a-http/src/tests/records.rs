//! The task extension's record reads through both bindings: the JSON-RPC names and the REST
//! routes reach the service with the same request, results are framed like any method's,
//! bad paging parameters are invalid params, and names nearby stay unknown.

use a2a_service::ServiceError;
use a2a_service::api::TaskRecordsRequest;
use serde_json::json;

use crate::testkit::{Call, FakeApi, Req, send};

fn records(id: &str, page_size: Option<i32>, page_token: Option<&str>) -> TaskRecordsRequest {
    TaskRecordsRequest {
        id: id.into(),
        page_size,
        page_token: page_token.map(str::to_owned),
    }
}

#[tokio::test]
async fn rest_routes_carry_the_path_id_and_the_paging_query() {
    let cases = [
        (
            Req::get("/tasks/t%2F1/transcript?pageSize=2&pageToken=4&other=x"),
            Call::GetTaskTranscript(records("t/1", Some(2), Some("4"))),
        ),
        (
            Req::get("/acme/tasks/t-1/auditLog"),
            Call::GetTaskAuditLog(records("t-1", None, None)),
        ),
        (
            Req::get("/tasks/t-1/auditLog?pageToken=abc"),
            Call::GetTaskAuditLog(records("t-1", None, Some("abc"))),
        ),
    ];
    for (req, expected) in cases {
        let api = FakeApi::new();
        let got = send(&api, req).await;
        assert_eq!(got.status, 200, "{}", got.text());
        assert_eq!(api.only_call().1, expected);
    }
}

#[tokio::test]
async fn a_page_is_the_result_in_both_bindings() {
    let api = FakeApi::new();
    let rest = send(&api, Req::get("/tasks/t-1/transcript")).await.json();
    let rpc = send(&api, Req::rpc("GetTaskTranscript", json!({"id": "t-1"})))
        .await
        .json();
    let expected = json!({
        "taskId": "t-1",
        "entries": [{"number": 0, "entry": {"turn": {"role": "user", "text": "hi"}}}],
        "nextPageToken": "1"
    });
    assert_eq!(rest, expected);
    assert_eq!(rpc["result"], expected);
    let last = send(&api, Req::get("/tasks/t-1/auditLog")).await.json();
    assert_eq!(
        last,
        json!({"taskId": "t-1", "entries": [], "nextPageToken": ""})
    );
}

#[tokio::test]
async fn bad_paging_parameters_are_invalid_params_before_the_service() {
    for (method, params) in [
        ("GetTaskTranscript", json!({"id": "t-1", "pageSize": 0})),
        ("GetTaskTranscript", json!({"id": "t-1", "pageSize": 101})),
        ("GetTaskAuditLog", json!({"id": "t-1", "pageSize": "many"})),
        ("GetTaskAuditLog", json!({"id": "t-1", "pageToken": 3})),
        ("GetTaskAuditLog", json!({"pageSize": 3})),
    ] {
        let api = FakeApi::new();
        let body = send(&api, Req::rpc(method, params.clone())).await.json();
        assert_eq!(body["error"]["code"], -32602, "{method} {params}: {body}");
        assert!(api.calls().is_empty());
    }
    for path in [
        "/tasks/t-1/transcript?pageSize=0",
        "/tasks/t-1/auditLog?pageSize=1000",
        "/tasks/t-1/auditLog?pageSize=x",
    ] {
        let api = FakeApi::new();
        let got = send(&api, Req::get(path)).await;
        assert_eq!(got.status, 400, "{path}: {}", got.text());
        assert!(got.text().contains("pageSize"), "{}", got.text());
        assert!(api.calls().is_empty());
    }
}

#[tokio::test]
async fn the_service_refusals_map_like_any_method() {
    let api = FakeApi::new().failing(ServiceError::TaskNotFound("t-1".into()));
    let got = send(&api, Req::get("/tasks/t-1/auditLog")).await;
    assert_eq!(got.status, 404, "{}", got.text());
    let api = FakeApi::new().failing(ServiceError::TaskNotFound("t-1".into()));
    let body = send(&api, Req::rpc("GetTaskTranscript", json!({"id": "t-1"})))
        .await
        .json();
    assert_eq!(body["error"]["code"], -32001, "{body}");
    let api = FakeApi::new().failing(ServiceError::InvalidParams("pageToken is bad".into()));
    let got = send(&api, Req::get("/tasks/t-1/transcript?pageToken=x")).await;
    assert_eq!(got.status, 400, "{}", got.text());
}

#[tokio::test]
async fn other_names_and_verbs_stay_unknown() {
    for name in ["getTaskTranscript", "GetTaskAuditlog", "tasks/transcript"] {
        let api = FakeApi::new();
        let body = send(&api, Req::rpc(name, json!({"id": "t-1"})))
            .await
            .json();
        assert_eq!(body["error"]["code"], -32601, "{name}: {body}");
    }
    let api = FakeApi::new();
    let got = send(&api, Req::post("/tasks/t-1/transcript")).await;
    assert_eq!(got.status, 405, "{}", got.text());
    assert_eq!(got.header("allow"), Some("GET"));
    let got = send(&api, Req::get("/tasks/t-1/audit")).await;
    assert_eq!(got.status, 404, "{}", got.text());
    assert!(api.calls().is_empty());
}
