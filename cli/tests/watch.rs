//! `th watch`, `th answer`, `th model` and `th effort` against the real local server with a
//! scripted model that asks alice for help; one run of `watch` in a pseudo-terminal
//! (`script(1)`), where the help request is answered at its prompt.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use common::*;
use serde_json::{Value, json};

const QUESTION: &str = "Full or partial refund?";

fn asking_script() -> Value {
    json!({"turns": [
        {"tool_calls": [{"name": "create_plan", "arguments": {"steps": [
            {"name": "Ask the customer", "description": "ask alice"}]}}]},
        {"tool_calls": [{"name": "ask_participant", "arguments": {
            "participant_id": "alice", "question": QUESTION}}]},
        {"tool_calls": [{"name": "complete_step", "arguments": {
            "step": "Ask the customer", "output": "full refund"}}]},
        {"text": "Refunding in full."}
    ]})
}

/// A task of alice's, waiting on her help request; its id.
fn waiting_task(url: &str) -> String {
    let task = th(
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
            "--participant",
            "alice:reporter",
            "refund order 48213",
        ],
    )
    .ok()
    .json();
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{task}"
    );
    task["id"].as_str().expect("id").to_owned()
}

#[test]
fn watch_stops_at_a_help_request_which_answer_resolves() {
    let (server, _dir) = scripted_server(asking_script());
    let url = server.url.as_str();
    let id = waiting_task(url);

    let watched = th(url, &["--as", "alice", "watch", &id]).ok().stdout;
    assert!(watched.contains("state: input-required"), "{watched}");
    assert!(
        watched.contains("plan:\n  [pending] Ask the customer"),
        "{watched}"
    );
    assert!(
        watched.contains(&format!("help request: {QUESTION}")),
        "{watched}"
    );
    let events = th(url, &["--as", "alice", "--json", "watch", &id])
        .ok()
        .stdout;
    let first: Value = serde_json::from_str(events.lines().next().expect("an event")).unwrap();
    assert_eq!(first["task"]["id"], id.as_str(), "{first}");

    let shown = th(url, &["--as", "alice", "show", &id]).ok().stdout;
    assert!(shown.contains(&format!("status: {QUESTION}")), "{shown}");
    assert!(
        shown.contains("plan:\n  [") && shown.contains("Ask the customer"),
        "{shown}"
    );

    let answered = th(url, &["--as", "alice", "answer", &id, "Full."])
        .ok()
        .stdout;
    assert!(answered.contains("Refunding in full."), "{answered}");
    let shown = th(url, &["--as", "alice", "show", &id]).ok().stdout;
    assert!(
        shown.contains("  [done] Ask the customer -> full refund"),
        "{shown}"
    );

    let catalog = th(url, &["--as", "alice", "model", &id]).ok().stdout;
    assert!(
        catalog.contains("scripted") && catalog.contains("echo"),
        "{catalog}"
    );
    th(url, &["--as", "alice", "model", &id, "echo"]).ok();
    th(url, &["--as", "alice", "effort", &id, "high"]).ok();
    let shown = th(url, &["--as", "alice", "show", &id]).ok().stdout;
    assert!(
        shown.contains("model:  echo") && shown.contains("effort:  high"),
        "{shown}"
    );
    let unknown = th(url, &["--as", "alice", "model", &id, "gpt-9"]);
    assert_eq!(unknown.code, 3, "{} {}", unknown.stdout, unknown.stderr);
    assert!(
        unknown.stderr.contains("unknown model"),
        "{}",
        unknown.stderr
    );
}

/// Everything the child wrote, read on a thread so that it never blocks.
fn collect(mut from: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let out = Arc::new(Mutex::new(String::new()));
    let sink = out.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1024];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    out
}

fn wait_for(out: &Mutex<String>, what: &str) {
    let deadline = Instant::now() + test_support::WAIT;
    while !out.lock().unwrap().contains(what) {
        assert!(
            Instant::now() < deadline,
            "no {what:?} in:\n{}",
            out.lock().unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn watch_on_a_terminal_prompts_for_the_answer_and_ends_with_the_task() {
    let (server, _dir) = scripted_server(asking_script());
    let url = server.url.as_str();
    let id = waiting_task(url);

    // script(1) runs `th watch` on a pseudo-terminal and relays our pipe to it.
    let command = format!(
        "{} --url {url} --as alice watch {id}",
        env!("CARGO_BIN_EXE_th")
    );
    let mut child = std::process::Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script(1)");
    let out = collect(child.stdout.take().unwrap());
    wait_for(&out, "answer> ");
    assert!(out.lock().unwrap().contains(QUESTION));
    child.stdin.as_mut().unwrap().write_all(b"Full.\n").unwrap();

    // The answer resumed the run: the watch shows the step done and the agent's text.
    wait_for(&out, "[done] Ask the customer -> full refund");
    wait_for(&out, "Refunding in full.");
    th(url, &["--as", "alice", "cancel", &id]).ok();
    wait_for(&out, "state: canceled");
    let deadline = Instant::now() + test_support::WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "watch did not exit");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status}: {}", out.lock().unwrap());
    let out = out.lock().unwrap();
    assert!(!out.contains('\x1b'), "no colour with NO_COLOR: {out:?}");
}

#[test]
fn sub_tasks_show_with_their_mirrored_state_and_a_finished_task_watches_to_its_end() {
    let (server, _dir) = scripted_server(json!({"tasks": {
        "Parent": {"turns": [
            {"tool_calls": [{"name": "spawn_subtask", "arguments": {
                "name": "Child", "goal": "check the ledger"}}]},
            {"text": "waiting for the child"},
            {"text": "the child is done"}
        ]},
        "Child": {"turns": [{"text": "the ledger balances"}]}
    }}));
    let url = server.url.as_str();
    let parent = th(
        url,
        &[
            "--as", "alice", "--json", "new", "--name", "Parent", "--goal", "check", "go",
        ],
    )
    .ok()
    .json();
    let id = parent["id"].as_str().expect("id");
    let child = format!("{id}.1");
    let deadline = Instant::now() + test_support::WAIT;
    loop {
        let shown = th(url, &["--as", "alice", "show", id]).ok().stdout;
        // The parent's last turn is over (its status is that turn's text): the mirror of the
        // completed child is committed before the turn the child's note wakes, so the child
        // may already show completed while the parent still waits with its earlier status.
        if shown.contains(&format!("sub-tasks:\n  {child} completed"))
            && shown.contains("state:  input-required")
            && shown.contains("status: the child is done")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the child never completed:\n{shown}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    let watched = th(url, &["--as", "alice", "watch", &child]).ok().stdout;
    assert!(
        watched.starts_with("state: completed\nthe ledger balances"),
        "{watched}"
    );
}

/// What `th ARGS` prints on a pseudo-terminal (`script(1)`), with `NO_COLOR` set or not.
fn on_a_terminal(url: &str, args: &str, no_color: bool) -> String {
    let command = format!("{} --url {url} {args}", env!("CARGO_BIN_EXE_th"));
    let mut script = std::process::Command::new("script");
    script
        .args(["-qfec", &command, "/dev/null"])
        .stdin(Stdio::null());
    if no_color {
        script.env("NO_COLOR", "1");
    } else {
        script.env_remove("NO_COLOR");
    }
    let out = script.output().expect("script(1)");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn states_are_coloured_on_a_terminal_unless_no_color_is_set() {
    let server = server();
    let url = server.url.as_str();
    th(
        url,
        &["--as", "alice", "new", "--name", "N", "--goal", "G", "go"],
    )
    .ok();
    let coloured = on_a_terminal(url, "--as alice tasks", false);
    assert!(
        coloured.contains("\x1b[33minput-required\x1b[0m"),
        "{coloured:?}"
    );
    let plain = on_a_terminal(url, "--as alice tasks", true);
    assert!(
        plain.contains("input-required") && !plain.contains('\x1b'),
        "{plain:?}"
    );
    let piped = th_command(url, &["--as", "alice", "tasks"])
        .env_remove("NO_COLOR")
        .output()
        .expect("th");
    let piped = String::from_utf8_lossy(&piped.stdout);
    assert!(
        piped.contains("input-required") && !piped.contains('\x1b'),
        "{piped:?}"
    );
}
