//! The agent card endpoint: content, caching headers, conditional GET.

use crate::testkit::{FakeApi, Req, send, send_configured};
use crate::{AGENT_CARD_PATH, HttpConfig};

#[tokio::test]
async fn the_card_with_cache_headers() {
    let api = FakeApi::new();
    let got = send(&api, Req::get(AGENT_CARD_PATH)).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.header("content-type"), Some("application/json"));
    assert_eq!(got.header("cache-control"), Some("public, max-age=300"));
    assert_eq!(got.json()["name"], "Test Agent");
    assert_eq!(got.json()["capabilities"]["streaming"], true);
    let etag = got.header("etag").unwrap();
    assert!(
        etag.starts_with("W/\"") && etag.ends_with('"') && etag.len() == 4 + 64,
        "{etag}"
    );
    assert_eq!(etag, crate::card::etag(&got.body));
}

#[tokio::test]
async fn if_none_match_gives_304() {
    let api = FakeApi::new();
    let etag = send(&api, Req::get(AGENT_CARD_PATH))
        .await
        .header("etag")
        .unwrap()
        .to_string();
    let got = send(
        &api,
        Req::get(AGENT_CARD_PATH).header("if-none-match", &etag),
    )
    .await;
    assert_eq!(got.status, 304);
    assert!(got.body.is_empty());
    assert_eq!(got.header("etag"), Some(etag.as_str()));
    assert_eq!(got.header("cache-control"), Some("public, max-age=300"));
    let got = send(
        &api,
        Req::get(AGENT_CARD_PATH).header("if-none-match", "W/\"stale\""),
    )
    .await;
    assert_eq!(got.status, 200);
    // A changed card has another tag.
    let mut card = crate::testkit::card();
    card.version = "2.0.0".into();
    let got = send(
        &FakeApi::with_card(card),
        Req::get(AGENT_CARD_PATH).header("if-none-match", &etag),
    )
    .await;
    assert_eq!(got.status, 200);
}

#[tokio::test]
async fn max_age_is_configurable_and_only_get_and_head_are_allowed() {
    let config = HttpConfig {
        card_max_age_secs: 60,
        ..HttpConfig::default()
    };
    let api = FakeApi::new();
    let got = send_configured(&api, &config, Req::get(AGENT_CARD_PATH)).await;
    assert_eq!(got.header("cache-control"), Some("public, max-age=60"));
    let got = send(&api, Req::new("HEAD", AGENT_CARD_PATH)).await;
    assert_eq!(got.status, 200);
    assert!(got.body.is_empty());
    assert!(got.header("etag").is_some());
    let got = send(&api, Req::post(AGENT_CARD_PATH)).await;
    assert_eq!(got.status, 405);
    assert_eq!(got.header("allow"), Some("GET, HEAD"));
}
