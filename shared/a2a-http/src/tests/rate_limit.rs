//! The rate limit through `handle`: refused before anything is parsed or called, in the
//! binding the request used, per caller.

use serde_json::json;

use crate::testkit::{FakeApi, Req, send_with};
use crate::{AGENT_CARD_PATH, Caller, HttpConfig, Method, RateLimit, RateLimiter, Serves};

/// One request per caller, then a token every 100 s.
fn limited(serves: Serves) -> HttpConfig {
    HttpConfig {
        serves,
        rate_limit: Some(RateLimiter::new(RateLimit::new(0.01, 1).unwrap())),
        ..HttpConfig::default()
    }
}

fn from(address: &str) -> Caller {
    Caller::anonymous().with_address(Some(address.parse().unwrap()))
}

fn get_task() -> Req {
    Req::rpc("GetTask", json!({"id": "t-1"}))
}

#[tokio::test]
async fn over_the_limit_json_rpc_gets_429_with_retry_after_and_a_json_rpc_error() {
    let api = FakeApi::new();
    let config = limited(Serves::Everything);
    let first = send_with(&api, &config, get_task(), from("192.0.2.1")).await;
    assert_eq!(first.status, 200);
    assert_eq!(api.calls().len(), 1);

    // Not even parsed: a body that is not JSON gets the rate limit, not -32700.
    let got = send_with(
        &api,
        &config,
        Req::post("/").raw("application/json", "{not json"),
        from("192.0.2.1"),
    )
    .await;
    assert_eq!(got.status, 429);
    assert_eq!(got.header("retry-after"), Some("100"));
    assert_eq!(got.header("content-type"), Some("application/json"));
    let body = got.json();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], json!(null));
    assert_eq!(body["error"]["code"], -32000);
    assert_eq!(body["error"]["data"][0]["reason"], "RATE_LIMITED");
    assert_eq!(api.calls().len(), 1, "the service was not called");
}

#[tokio::test]
async fn over_the_limit_rest_and_the_card_get_429_with_a_status_body() {
    let api = FakeApi::new();
    let config = limited(Serves::Everything);
    let alice = from("192.0.2.1");
    assert_eq!(
        send_with(&api, &config, Req::get("/tasks/t-1"), alice.clone())
            .await
            .status,
        200
    );
    for req in [Req::get("/tasks/t-1"), Req::get(AGENT_CARD_PATH)] {
        let got = send_with(&api, &config, req, alice.clone()).await;
        assert_eq!(got.status, 429);
        assert_eq!(got.header("retry-after"), Some("100"));
        let error = &got.json()["error"];
        assert_eq!(error["code"], 429);
        assert_eq!(error["status"], "RESOURCE_EXHAUSTED");
        assert_eq!(error["details"][0]["metadata"]["retryAfterSeconds"], "100");
    }
    assert_eq!(api.calls().len(), 1);
}

#[tokio::test]
async fn a_function_that_serves_rest_answers_its_limit_in_rest() {
    let api = FakeApi::new();
    let config = limited(Serves::Rest(Method::GetTask));
    let caller = from("192.0.2.1");
    send_with(&api, &config, Req::get("/tasks/t-1"), caller.clone()).await;
    let got = send_with(&api, &config, get_task(), caller).await;
    assert_eq!(got.status, 429);
    assert_eq!(got.json()["error"]["status"], "RESOURCE_EXHAUSTED");
}

#[tokio::test]
async fn other_callers_and_unlimited_configs_are_not_refused() {
    let api = FakeApi::new();
    let config = limited(Serves::Everything);
    assert_eq!(
        send_with(&api, &config, get_task(), from("192.0.2.1"))
            .await
            .status,
        200
    );
    assert_eq!(
        send_with(&api, &config, get_task(), from("192.0.2.1"))
            .await
            .status,
        429
    );
    for caller in [
        from("192.0.2.2"),
        Caller::verified("alice").with_address(Some("192.0.2.1".parse().unwrap())),
    ] {
        let got = send_with(&api, &config, get_task(), caller).await;
        assert_eq!(got.status, 200, "{}", got.text());
    }
    let unlimited = HttpConfig::default();
    for _ in 0..20 {
        let got = send_with(&api, &unlimited, get_task(), from("192.0.2.1")).await;
        assert_eq!(got.status, 200);
    }
}

#[tokio::test]
async fn a_host_may_check_the_limit_before_reading_the_body_then_not_again() {
    let api = FakeApi::new();
    let config = limited(Serves::Everything);
    let caller = from("192.0.2.1");
    assert!(crate::over_rate_limit(&config, "/", &caller).is_none());
    let got = crate::testkit::collect(
        crate::handle_admitted(&api, &config, get_task().build(), caller.clone()).await,
    )
    .await;
    assert_eq!(got.status, 200, "the admitted request took no second token");
    let refused = crate::over_rate_limit(&config, "/", &caller).expect("over the limit");
    assert_eq!(refused.status(), 429);
}
