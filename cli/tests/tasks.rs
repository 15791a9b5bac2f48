//! `th` against the real local server (embedded store, echo model): create, list, send,
//! show, criteria, cancel, JSON output and exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

#[test]
fn a_task_is_created_listed_sent_to_shown_and_canceled() {
    let server = server();
    let url = server.url.as_str();
    let created = th(
        url,
        &[
            "--as",
            "alice",
            "--json",
            "new",
            "--name",
            "Refund",
            "--goal",
            "Refund order 48213",
            "--description",
            "the parcel was lost",
            "--criterion",
            "refund sent",
            "--criterion",
            "customer told",
            "--participant",
            "alice:reporter",
            "--participant",
            "bob:watcher",
            "refund order 48213",
        ],
    )
    .ok()
    .json();
    let id = created["id"].as_str().expect("task id").to_owned();
    assert_eq!(
        created["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{created}"
    );

    let listed = th(url, &["--as", "alice", "tasks"]).ok();
    assert!(
        listed
            .stdout
            .contains(&format!("{id}\tinput-required\tRefund")),
        "{}",
        listed.stdout
    );
    let listed = th(
        url,
        &[
            "--as",
            "alice",
            "--json",
            "tasks",
            "--state",
            "input-required",
        ],
    )
    .ok()
    .json();
    assert_eq!(listed["tasks"][0]["id"], id.as_str(), "{listed}");
    let none = th(
        url,
        &["--as", "alice", "--json", "tasks", "--state", "completed"],
    )
    .ok()
    .json();
    assert_eq!(none["tasks"].as_array().map(Vec::len), Some(0), "{none}");
    let strangers = th(url, &["--as", "mallory", "tasks"]).ok();
    assert!(!strangers.stdout.contains(&id), "{}", strangers.stdout);

    let sent = th(url, &["--as", "alice", "send", &id, "any news?"]).ok();
    assert!(
        sent.stdout.starts_with(&format!("{id}\tinput-required")),
        "{}",
        sent.stdout
    );
    assert!(
        sent.stdout.contains("any news?"),
        "the echo model answers: {}",
        sent.stdout
    );

    th(url, &["--as", "alice", "criteria", &id, "--met", "2"]).ok();
    let shown = th(url, &["--as", "alice", "show", &id]).ok().stdout;
    for line in [
        "name:   Refund",
        "state:  input-required",
        "goal:   Refund order 48213",
        "description: the parcel was lost",
        "  1. [ ] refund sent",
        "  2. [x] customer told",
        "  alice (reporter, human)",
        "  bob (watcher, human)",
    ] {
        assert!(shown.contains(line), "{line:?} in:\n{shown}");
    }
    let shown = th(url, &["--as", "bob", "--json", "show", &id]).ok().json();
    assert_eq!(shown["id"], id.as_str());

    // A watcher may not cancel; the reporter may.
    let refused = th(url, &["--as", "bob", "cancel", &id]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    let canceled = th(url, &["--as", "alice", "cancel", &id]).ok();
    assert!(canceled.stdout.contains("canceled"), "{}", canceled.stdout);

    let finished = th(url, &["--as", "alice", "send", &id, "hello again"]);
    assert_eq!(finished.code, 3, "{}", finished.stderr);
    assert!(
        finished.stderr.starts_with("th: not supported"),
        "{}",
        finished.stderr
    );
}

#[test]
fn exit_codes_tell_usage_not_found_and_unreachable_apart() {
    let server = server();
    let url = &server.url.clone();

    let missing = th(url, &["--as", "alice", "show", "no-such-task"]);
    assert_eq!(missing.code, 3, "{}", missing.stderr);
    assert_eq!(
        missing.stderr.trim(),
        "th: task not found (or you are not one of its participants)"
    );
    assert!(missing.stdout.is_empty());

    let usage = th(url, &["send", "only-a-task"]);
    assert_eq!(usage.code, 2, "{}", usage.stderr);
    let usage = th(
        url,
        &[
            "new",
            "--name",
            "x",
            "--goal",
            "y",
            "--participant",
            "alice",
        ],
    );
    assert_eq!(usage.code, 2, "{}", usage.stderr);
    assert!(usage.stderr.contains("ID:ROLE"), "{}", usage.stderr);

    let anonymous = th(url, &["new", "--name", "x", "--goal", "y"]);
    assert_eq!(
        anonymous.code, 3,
        "no participant asserted: {}",
        anonymous.stderr
    );
    assert!(
        anonymous.stderr.starts_with("th: invalid request"),
        "{}",
        anonymous.stderr
    );

    // A port nothing listens on: the server's own, once it is stopped.
    drop(server);
    let unreachable = th(url, &["--as", "alice", "tasks"]);
    assert_eq!(unreachable.code, 4, "{}", unreachable.stderr);
    assert!(
        unreachable.stderr.contains("cannot reach the server"),
        "{}",
        unreachable.stderr
    );
}

#[test]
fn the_card_and_completions_print() {
    let server = server();
    let url = server.url.as_str();
    let card = th(url, &["card"]).ok().stdout;
    assert!(card.contains("binding: JSONRPC"), "{card}");
    let card = th(url, &["--json", "card"]).ok().json();
    assert!(card["supportedInterfaces"].is_array(), "{card}");
    for command in [
        "card",
        "tasks",
        "new",
        "send",
        "show",
        "watch",
        "answer",
        "cancel",
        "model",
        "effort",
        "criteria",
        "push",
        "completions",
    ] {
        let help = th(url, &[command, "--help"]).ok().stdout;
        assert!(
            help.contains("Usage: th ") && help.contains("Global options"),
            "{help}"
        );
    }
    for shell in ["bash", "zsh", "fish"] {
        let script = th(url, &["completions", shell]).ok().stdout;
        assert!(script.contains("th"), "{shell}: {script}");
    }
}

#[test]
fn refusals_and_interrupts_are_told_apart() {
    let server = server();
    let url = server.url.as_str();
    let task = th(
        url,
        &[
            "--as", "alice", "--json", "new", "--name", "N", "--goal", "G", "go",
        ],
    )
    .ok()
    .json();
    let id = task["id"].as_str().expect("id");

    let stranger = th(url, &["--as", "mallory", "send", id, "let me in"]);
    assert_eq!(stranger.code, 3);
    assert_eq!(
        stranger.stderr.trim(),
        "th: message not accepted: not a participant"
    );
    assert!(stranger.stdout.is_empty(), "{}", stranger.stdout);

    th(
        url,
        &["--as", "alice", "send", "--interrupt", id, "stop that"],
    )
    .ok();
    let task = th(url, &["--as", "alice", "--json", "show", id])
        .ok()
        .json();
    let sent = task["history"]
        .as_array()
        .expect("history")
        .iter()
        .find(|m| m["parts"][0]["text"] == "stop that")
        .unwrap_or_else(|| panic!("the message in the history: {task}"));
    assert_eq!(sent["metadata"]["interrupt"], true, "{sent}");
    assert_eq!(sent["metadata"]["participant_id"], "alice", "{sent}");
}

#[test]
fn push_configs_are_added_listed_and_removed() {
    let server = ServerBuilder::new(local_server_binary(), scratch())
        .allow_private_webhooks()
        .start();
    let url = server.url.as_str();
    let task = th(
        url,
        &[
            "--as", "alice", "--json", "new", "--name", "N", "--goal", "G", "go",
        ],
    )
    .ok()
    .json();
    let id = task["id"].as_str().expect("id");
    let hook = "http://127.0.0.1:9/hook";
    let added = th(
        url,
        &["--as", "alice", "push", "add", id, hook, "--id", "p1"],
    )
    .ok();
    assert_eq!(added.stdout.trim(), format!("p1\t{hook}"));
    let listed = th(url, &["--as", "alice", "push", "ls", id]).ok();
    assert_eq!(listed.stdout.trim(), format!("p1\t{hook}"));
    th(url, &["--as", "alice", "push", "rm", id, "p1"]).ok();
    let listed = th(url, &["--as", "alice", "push", "ls", id]).ok();
    assert!(listed.stdout.trim().is_empty(), "{}", listed.stdout);
    let unknown = th(url, &["--as", "alice", "push", "ls", "no-such-task"]);
    assert_eq!(unknown.code, 3, "{}", unknown.stderr);
}

#[test]
fn tasks_are_listed_a_page_at_a_time() {
    let server = server();
    let url = server.url.as_str();
    for name in ["First", "Second"] {
        th(
            url,
            &["--as", "alice", "new", "--name", name, "--goal", "G", "go"],
        )
        .ok();
    }
    let first = th(url, &["--as", "alice", "tasks", "--page-size", "1"]).ok();
    assert_eq!(first.stdout.lines().count(), 1, "{}", first.stdout);
    let token = first
        .stderr
        .trim()
        .strip_prefix("next page: --page-token ")
        .unwrap_or_else(|| panic!("a next page: {}", first.stderr));
    let second = th(
        url,
        &[
            "--as",
            "alice",
            "tasks",
            "--page-size",
            "1",
            "--page-token",
            token,
        ],
    )
    .ok();
    assert_eq!(second.stdout.lines().count(), 1, "{}", second.stdout);
    assert_ne!(first.stdout, second.stdout);
    let names: String = [first.stdout, second.stdout].concat();
    assert!(
        names.contains("\tFirst\n") && names.contains("\tSecond\n"),
        "{names}"
    );

    let bad = th(url, &["--as", "alice", "tasks", "--page-size", "0"]);
    assert_eq!(bad.code, 3, "{}", bad.stderr);
    assert!(
        bad.stderr.starts_with("th: invalid request:"),
        "{}",
        bad.stderr
    );
}
