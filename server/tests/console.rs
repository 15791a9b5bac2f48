//! The web console served by the real `local-server` at `/ui/` (issue 25): the page, its
//! assets with their types, its settings from the server's catalog; the A2A routes beside it
//! unchanged. The pages themselves are driven in Chromium by `tests/browser/run.sh`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_served_at_ui() {
    let (server, _dir) = server_with_catalog(json!({"default_model": "echo", "models": [
        {"id": "echo", "provider": "echo"}, {"id": "echo-2", "provider": "echo"}]}));
    let http = no_redirects();
    let get = |path: &str| http.get(format!("{}{path}", server.url)).send();

    let bare = get("/ui").await.unwrap();
    assert_eq!(bare.status(), 301);
    assert_eq!(bare.headers()["location"], "ui/");

    let page = get("/ui/").await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    assert_eq!(page.headers()["cache-control"], "no-cache");
    let html = page.text().await.unwrap();
    let script = html
        .split("src=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page names its script");
    assert!(script.starts_with("app.js?v="), "{html}");

    let js = get(&format!("/ui/{script}")).await.unwrap();
    assert_eq!(js.status(), 200);
    assert_eq!(
        js.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    assert!(
        js.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("immutable")
    );
    let etag = js.headers()["etag"].clone();
    let again = http
        .get(format!("{}/ui/{script}", server.url))
        .header("If-None-Match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);

    let config: Value = get("/ui/config.json").await.unwrap().json().await.unwrap();
    assert_eq!(
        config,
        json!({"auth": "none", "models": ["echo", "echo-2"], "defaultModel": "echo"})
    );
    assert_eq!(get("/ui/missing.js").await.unwrap().status(), 404);
    let post = http
        .post(format!("{}/ui/", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 405);

    // The A2A routes are the bindings' as before.
    let card = get("/.well-known/agent-card.json").await.unwrap();
    assert_eq!(card.status(), 200);
}
