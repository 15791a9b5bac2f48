//! Service parameters on the wire: `A2A-Version`, `A2A-Extensions`, `X-Participant-Id`, and
//! the caller's verified principal, through both bindings.

use a2a::{AgentExtension, methods};
use serde_json::json;

use crate::testkit::{FakeApi, OTHER_EXT, Req, TASK_EXT, card, send, send_with};
use crate::{Caller, HttpConfig};

fn rpc_get_task() -> Req {
    Req::rpc(methods::GET_TASK, json!({"id": "t-1"}))
}

#[tokio::test]
async fn a_missing_version_means_0_3_and_is_refused_on_both_bindings() {
    for req in [rpc_get_task().without_version(), rpc_get_task().version("")] {
        let api = FakeApi::new();
        let body = send(&api, req).await.json();
        assert_eq!(body["error"]["code"], -32009);
        assert_eq!(body["id"], 1);
        assert!(body["error"]["message"].as_str().unwrap().contains("0.3"));
        assert_eq!(body["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED");
        assert!(api.calls().is_empty());
    }
    let api = FakeApi::new();
    let got = send(&api, Req::get("/tasks/t-1").without_version()).await;
    assert_eq!(got.status, 400);
    assert_eq!(
        got.json()["error"]["details"][0]["reason"],
        "VERSION_NOT_SUPPORTED"
    );
    assert_eq!(got.json()["error"]["status"], "FAILED_PRECONDITION");
    assert!(api.calls().is_empty());
}

#[tokio::test]
async fn other_versions_are_refused_naming_the_version() {
    let api = FakeApi::new();
    let body = send(&api, rpc_get_task().version("99.0")).await.json();
    assert_eq!(body["error"]["code"], -32009);
    assert!(body["error"]["message"].as_str().unwrap().contains("99.0"));
    let got = send(&api, Req::post("/tasks/t:cancel").version("0.3")).await;
    assert_eq!(got.status, 400);
    assert!(
        got.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("0.3")
    );
    assert!(api.calls().is_empty());
}

#[tokio::test]
async fn patch_versions_and_the_query_parameter_are_accepted() {
    let api = FakeApi::new();
    let body = send(&api, rpc_get_task().version("1.0.1")).await.json();
    assert!(body.get("result").is_some(), "{body}");
    let got = send(
        &api,
        Req::get("/tasks/t-1?A2A-Version=1.0").without_version(),
    )
    .await;
    assert_eq!(got.status, 200);
    let req = Req::post("/?A2A-Version=1.0")
        .without_version()
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}));
    assert!(send(&api, req).await.json().get("result").is_some());
}

#[tokio::test]
async fn the_card_needs_no_version() {
    let api = FakeApi::new();
    let got = send(
        &api,
        Req::get("/.well-known/agent-card.json").without_version(),
    )
    .await;
    assert_eq!(got.status, 200);
}

#[tokio::test]
async fn unknown_extensions_are_refused_before_the_service() {
    let api = FakeApi::new();
    let req = rpc_get_task().header("A2A-Extensions", &format!("urn:zzz, {TASK_EXT}, urn:aaa"));
    let body = send(&api, req).await.json();
    assert_eq!(body["error"]["code"], -32004);
    assert_eq!(
        body["error"]["message"],
        "unsupported A2A extension(s): urn:aaa,urn:zzz"
    );
    let req = Req::post("/message:send")
        .header("a2a-extensions", "urn:nope")
        .json(
            &json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}}),
        );
    let got = send(&api, req).await;
    assert_eq!(got.status, 400);
    assert_eq!(
        got.json()["error"]["details"][0]["reason"],
        "UNSUPPORTED_OPERATION"
    );
    assert!(api.calls().is_empty(), "nothing may be stored");
}

#[tokio::test]
async fn activated_extensions_reach_the_service_and_are_echoed() {
    let api = FakeApi::new();
    let req = rpc_get_task()
        .header("a2a-extensions", &format!("{OTHER_EXT} ,"))
        .header("a2a-extensions", TASK_EXT);
    let got = send(&api, req).await;
    assert_eq!(
        got.header("a2a-extensions"),
        Some(format!("{OTHER_EXT},{TASK_EXT}").as_str())
    );
    let (ctx, _) = api.only_call();
    assert_eq!(
        ctx.extensions,
        vec![OTHER_EXT.to_string(), TASK_EXT.to_string()]
    );
    // Streams echo too; requests without extensions get no header.
    let api = FakeApi::new();
    let got = send(
        &api,
        Req::post("/tasks/t:subscribe").header("a2a-extensions", TASK_EXT),
    )
    .await;
    assert_eq!(got.header("a2a-extensions"), Some(TASK_EXT));
    let got = send(&api, Req::get("/tasks/t")).await;
    assert_eq!(got.header("a2a-extensions"), None);
}

#[tokio::test]
async fn required_extensions_must_be_activated() {
    let mut card = card();
    if let Some(exts) = card.capabilities.extensions.as_mut() {
        exts.push(AgentExtension {
            uri: "urn:a2a:tck:required-extension".into(),
            description: None,
            required: Some(true),
            params: None,
        });
    }
    let api = FakeApi::with_card(card.clone());
    let body = send(&api, rpc_get_task()).await.json();
    assert_eq!(body["error"]["code"], -32008);
    assert_eq!(
        body["error"]["data"][0]["reason"],
        "EXTENSION_SUPPORT_REQUIRED"
    );
    let got = send(&api, Req::get("/tasks/t")).await;
    assert_eq!(got.status, 400);
    assert!(api.calls().is_empty());
    let api = FakeApi::with_card(card);
    let body = send(
        &api,
        rpc_get_task().header("a2a-extensions", "urn:a2a:tck:required-extension"),
    )
    .await
    .json();
    assert!(body.get("result").is_some(), "{body}");
}

#[tokio::test]
async fn participant_header_and_verified_principal_reach_the_service() {
    let api = FakeApi::new();
    let req = rpc_get_task().header("X-Participant-Id", "alice");
    send_with(
        &api,
        &HttpConfig::default(),
        req,
        Caller::verified("user-123"),
    )
    .await;
    let (ctx, _) = api.only_call();
    assert_eq!(ctx.participant_header.as_deref(), Some("alice"));
    assert_eq!(ctx.verified_principal.as_deref(), Some("user-123"));
    assert!(ctx.extensions.is_empty());

    let api = FakeApi::new();
    send(&api, Req::get("/tasks/t").header("x-participant-id", "bob")).await;
    let (ctx, _) = api.only_call();
    assert_eq!(ctx.participant_header.as_deref(), Some("bob"));
    assert_eq!(ctx.verified_principal, None);
}
