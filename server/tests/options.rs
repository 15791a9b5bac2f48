//! The local server's own options: the model catalog (file or text), renamed variables,
//! structured logs, and a graceful stop on SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::*;
use serde_json::Value;

const CATALOG: &str = r#"{
  "default_model": "echo",
  "models": [
    {"id": "echo", "provider": "echo"},
    {"id": "claude-sonnet", "provider": "bedrock", "default_effort": "medium",
     "settings": {"model_id": "anthropic.claude-sonnet-4"}}
  ]
}"#;

/// The catalog as a file (`--model-catalog`) or as its text (`--model-catalog-json`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_catalog_file_is_what_model_commands_see() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let catalog = dir.path().join("catalog.json");
    std::fs::write(&catalog, CATALOG).unwrap();
    for (flag, value) in [
        ("--model-catalog", catalog.to_str().unwrap()),
        ("--model-catalog-json", CATALOG),
    ] {
        let server = server_with(flag, value);
        let api = server.client().api(Binding::JsonRpc);
        let task = api.send_text("alice", "hello").await;

        let shown = api.follow_up(&task, "alice", "/model").await;
        assert_eq!(
            status_text(&shown),
            "model: echo (default); available: echo (echo), claude-sonnet (bedrock)",
            "{flag}"
        );
        let set = api.follow_up(&task, "alice", "/model claude-sonnet").await;
        assert_eq!(ext(&set)["model"], "claude-sonnet", "{set}");
    }
}

#[test]
fn a_bad_model_catalog_stops_the_server_with_the_reason() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let catalog = dir.path().join("catalog.json");
    std::fs::write(
        &catalog,
        r#"{"default_model": "gpt", "models": [{"id": "echo", "provider": "echo"}]}"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_local-server"))
        .args(["--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--model-catalog")
        .arg(&catalog)
        .env_remove("RUST_LOG")
        .output()
        .expect("run local-server");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the default model \"gpt\" is not in the catalog"),
        "{stderr}"
    );
    let missing = Command::new(env!("CARGO_BIN_EXE_local-server"))
        .args(["--addr", "127.0.0.1:0", "--model-catalog"])
        .arg(dir.path().join("absent.json"))
        .output()
        .expect("run local-server");
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("reading the model catalog"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_are_json_lines_and_sigterm_stops_gracefully() {
    let mut server = Server::start();
    let api = server.client().api(Binding::Rest);
    api.send_text("alice", "hello").await;

    let status = server.terminate();
    assert!(status.success(), "exit status {status:?}");
    let log = server.log();
    let lines: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}")))
        .collect();
    assert!(
        lines
            .iter()
            .all(|l| l["level"].is_string() && l["timestamp"].is_string())
    );
    let messages: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["fields"]["message"].as_str())
        .collect();
    assert!(messages.contains(&"serving A2A"), "{messages:?}");
    assert!(
        messages.iter().any(|m| m.starts_with("shutting down")),
        "{messages:?}"
    );
}

/// What examples/README.md promises: the example catalog's scripted model plans, loads the
/// shipped skill, completes both steps and answers, offline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_catalog_runs_its_scripted_demo_offline() {
    let server = Server::builder()
        .in_workspace_root()
        .arg("--model-catalog")
        .arg("examples/catalog.json")
        .start();
    let api = server.client().api(Binding::JsonRpc);
    let task = api.send_text("alice", "Refund order 48213").await;
    assert_eq!(
        status_text(&task),
        "Order 48213 is refunded in full: the parcel was lost in transit.",
        "{task}"
    );
    let steps = ext(&task)["plan"]["steps"].as_array().unwrap().clone();
    assert_eq!(steps.len(), 2, "{task}");
    assert!(steps.iter().all(|s| s["state"] == "done"), "{task}");

    let switched = api.follow_up(&task, "alice", "/model echo").await;
    assert_eq!(ext(&switched)["model"], "echo", "{switched}");
}

/// An old variable name stops the start with its new name; the catalog is given one way.
#[test]
fn a_renamed_variable_or_two_catalogs_stop_the_server() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let run = |command: &mut Command| {
        let out = command
            .args(["--addr", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .env_remove("TH_MODEL_CATALOG")
            .env_remove("TH_MODEL_CATALOG_JSON")
            .output()
            .expect("run local-server");
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let renamed = run(Command::new(env!("CARGO_BIN_EXE_local-server")).env("TABLE_NAME", "tasks"));
    assert!(
        renamed.contains("TABLE_NAME") && renamed.contains("set TH_TABLE instead"),
        "{renamed}"
    );
    let catalog = dir.path().join("catalog.json");
    std::fs::write(&catalog, CATALOG).unwrap();
    let both = run(Command::new(env!("CARGO_BIN_EXE_local-server"))
        .env_remove("TABLE_NAME")
        .arg("--model-catalog")
        .arg(&catalog)
        .arg("--model-catalog-json")
        .arg(CATALOG));
    assert!(both.contains("--model-catalog"), "{both}");
}
