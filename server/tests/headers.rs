//! The service parameters that travel in HTTP headers (`A2A-Version`, `A2A-Extensions`,
//! `X-Participant-Id`) and the request size limit, against the real server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a2a_version_is_taken_as_0_3_and_refused() {
    let server = Server::start();
    let plain = server.client().without_version().as_participant("alice");

    // JSON-RPC: -32009 with ErrorInfo, at HTTP 200.
    let reply = plain
        .rpc("SendMessage", send_req(text("alice", "hello")))
        .await;
    let err = &reply.json()["error"];
    assert_eq!(err["code"], -32009, "{err}");
    assert_eq!(err["data"][0]["reason"], "VERSION_NOT_SUPPORTED");
    assert_eq!(
        err["data"][0]["@type"],
        "type.googleapis.com/google.rpc.ErrorInfo"
    );
    assert!(err["message"].as_str().unwrap().contains("0.3"), "{err}");

    // REST: 400 with a google.rpc.Status whose ErrorInfo says why.
    for (method, path, body) in [
        (Method::GET, "/tasks", None),
        (
            Method::POST,
            "/message:send",
            Some(send_req(text("alice", "hello"))),
        ),
        (
            Method::POST,
            "/message:stream",
            Some(send_req(text("alice", "hello"))),
        ),
    ] {
        let reply = plain.rest(method.clone(), path, body).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{method} {path}");
        assert!(reply.content_type().starts_with("application/json"));
        let body = reply.json();
        assert_eq!(body["error"]["code"], 400);
        assert_eq!(body["error"]["status"], "FAILED_PRECONDITION");
        assert_eq!(
            body["error"]["details"][0]["reason"], "VERSION_NOT_SUPPORTED",
            "{body}"
        );
    }

    // Another version is refused too; the version may also come as a query parameter.
    let reply = plain.get_with_header("/tasks", "A2A-Version", "0.3").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let reply = plain
        .rest(Method::GET, "/tasks?A2A-Version=1.0", None)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);

    // Nothing was stored by the refused sends.
    let list = server
        .client()
        .as_participant("alice")
        .api(Binding::JsonRpc)
        .list_tasks(json!({}))
        .await
        .expect("list");
    assert_eq!(list["totalSize"], 0, "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_extension_is_refused_before_anything_is_stored() {
    let server = Server::start();
    for binding in BOTH {
        for header in [
            "urn:example:unknown-extension",
            &format!("{TASK_EXTENSION_URI}, urn:example:unknown-extension"),
        ] {
            let api = server.client().with_extensions(header).api(binding);
            api.send(send_req(text("carol", "store me?")))
                .await
                .refused("unknown extension", -32004, 400, "UNSUPPORTED_OPERATION");
            let Err(err) = api
                .send_streaming(send_req(text("carol", "store me?")))
                .await
            else {
                panic!("{binding:?}: a stream despite an unknown extension");
            };
            err.assert_is(-32004, 400, "UNSUPPORTED_OPERATION");
            assert!(
                err.message.contains("urn:example:unknown-extension"),
                "{err:?}"
            );
        }
        let list = server
            .client()
            .as_participant("carol")
            .api(binding)
            .list_tasks(json!({}))
            .await
            .expect("list");
        assert_eq!(list["tasks"], json!([]), "{binding:?}: nothing stored");
        assert_eq!(list["totalSize"], 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supported_extension_is_echoed_in_the_response() {
    let server = Server::start();
    let client = server.client().with_extensions(TASK_EXTENSION_URI);

    let reply = client
        .rpc("SendMessage", send_req(text("alice", "with the extension")))
        .await;
    assert_eq!(reply.header("a2a-extensions"), Some(TASK_EXTENSION_URI));
    let task = reply.json()["result"]["task"].clone();
    let id = id_of(&task);

    let reply = client
        .as_participant("alice")
        .rest(Method::GET, &format!("/tasks/{id}"), None)
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("a2a-extensions"), Some(TASK_EXTENSION_URI));

    for binding in BOTH {
        let stream = client
            .api(binding)
            .send_streaming(send_req(text("alice", "streamed")))
            .await
            .expect("stream");
        assert_eq!(
            stream
                .headers
                .get("a2a-extensions")
                .map(|v| v.to_str().unwrap()),
            Some(TASK_EXTENSION_URI),
            "{binding:?}"
        );
        stream.collect().await;
    }

    // Without the header, nothing is echoed.
    let reply = server
        .client()
        .as_participant("alice")
        .rest(Method::GET, &format!("/tasks/{id}"), None)
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("a2a-extensions"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x_participant_id_names_the_caller_when_the_message_does_not() {
    let server = Server::start();
    for binding in BOTH {
        let dave = server.client().as_participant("dave").api(binding);
        let task = dave
            .send_ok(send_req(message(None, vec![text_part("who am I?")])))
            .await;
        assert_eq!(ext(&task)["participants"][0]["id"], "dave", "{binding:?}");
        assert_eq!(ext(&task)["participants"][0]["role"], "reporter");
        let id = id_of(&task);
        let read = dave.get_task(id, None).await.expect("dave reads his task");
        assert_eq!(read["id"], task["id"]);

        // The message's own participant id wins over the header.
        let task = dave.send_text("erin", "I am erin").await;
        assert_eq!(ext(&task)["participants"][0]["id"], "erin", "{binding:?}");
        dave.get_task(id_of(&task), None)
            .await
            .refused_not_found("dave is not a participant of erin's task");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_over_the_limit_is_413() {
    let server = Server::start();
    let client = server.client().as_participant("alice");
    // 4 MiB is the limit: a message whose text alone is larger.
    let big = "x".repeat(4 * 1024 * 1024 + 1);
    let body = serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": send_req(text("alice", &big)),
    }))
    .unwrap();
    for path in ["/", "/message:send"] {
        let reply = Client::send(
            client
                .request(Method::POST, path)
                .header("content-type", "application/json")
                .body(body.clone()),
        )
        .await;
        assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{path}");
    }
    // The server is still fine, and stored nothing.
    let list = client
        .api(Binding::Rest)
        .list_tasks(json!({}))
        .await
        .expect("list");
    assert_eq!(list["totalSize"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_successes_come_back_in_the_media_type_the_client_spoke() {
    let server = Server::start();
    let client = server.client().as_participant("alice");
    let body = send_req(text("alice", "hello"));
    // A 1.0.0 client posting application/json gets application/json.
    let plain = Client::send(client.request(Method::POST, "/message:send").json(&body)).await;
    assert_eq!(plain.status, 200, "{}", plain.text);
    assert_eq!(plain.content_type(), "application/json");
    let id = plain.json()["task"]["id"]
        .as_str()
        .expect("a task")
        .to_owned();
    // One that asks for application/a2a+json (or sends it) gets it, as A2A 1.0.1 prefers.
    let asks = Client::send(
        client
            .request(Method::POST, "/message:send")
            .header("Accept", "application/a2a+json")
            .json(&send_req(text("alice", "again"))),
    )
    .await;
    assert_eq!(asks.content_type(), "application/a2a+json");
    let sends = Client::send(
        client
            .request(Method::POST, "/message:send")
            .header("Content-Type", "application/a2a+json")
            .body(send_req(text("alice", "once more")).to_string()),
    )
    .await;
    assert_eq!(sends.content_type(), "application/a2a+json");
    // A GET, with nothing to go by, gets application/a2a+json.
    let get = Client::send(client.request(Method::GET, &format!("/tasks/{id}"))).await;
    assert_eq!(
        (get.status.as_u16(), get.content_type()),
        (200, "application/a2a+json")
    );
}
