//! Helpers of the end-to-end tests: everything of `test-support`, and what only this
//! package's tests can have: its `local-server` binary (cargo names its path and the
//! scratch directory only to them) and the agent over a scripted model catalog.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use tempfile::TempDir;
pub use test_support::*;

/// `Server::start()` and `Server::builder()`: this package's `local-server` binary, its data
/// under cargo's scratch directory.
pub trait LocalServer {
    /// A server with a fresh data directory and the default options.
    fn start() -> Server;
    fn builder() -> ServerBuilder;
}

impl LocalServer for Server {
    fn start() -> Server {
        Self::builder().start()
    }

    fn builder() -> ServerBuilder {
        ServerBuilder::new(env!("CARGO_BIN_EXE_local-server"), scratch())
    }
}

/// A server with one option set (`flag value`), the others default.
pub fn server_with(flag: &str, value: &str) -> Server {
    Server::builder().arg(flag).arg(value).start()
}

/// Cargo's scratch directory for this package's tests.
pub fn scratch() -> &'static str {
    env!("CARGO_TARGET_TMPDIR")
}

/// A fresh directory under [`scratch`].
pub fn scratch_dir(prefix: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(scratch())
        .expect("dir")
}

/// A server over this model catalog (`--model-catalog`), and the directory holding its file.
pub fn server_with_catalog(catalog: Value) -> (Server, TempDir) {
    let dir = scratch_dir("catalog-");
    let path = dir.path().join("catalog.json");
    std::fs::write(&path, catalog.to_string()).expect("catalog");
    let server = Server::builder()
        .arg("--model-catalog")
        .arg(path.to_str().expect("utf-8"))
        .start();
    (server, dir)
}

/// A script (for [`AgentSetup`]) in which the task named "Parent" spawns a sub-task for the
/// remote agent `ledger`, says so, then says `then` when the sub-task is over; any other task
/// answers "not relayed".
pub fn ledger_subtask_script(then: &str) -> Value {
    json!({"tasks": {
        "Parent": {"turns": [
            {"tool_calls": [{"name": "spawn_subtask", "arguments": {
                "name": "Ledger check", "goal": "check the remote ledger", "agent": "ledger"}}]},
            {"text": "asked the ledger agent"},
            {"text": then}
        ]},
        "*": {"turns": [{"text": "not relayed"}]}
    }})
}

/// The one skill of [`AgentSetup`]: its files under the skills directory.
const REFUNDS_SKILL: [(&str, &str); 2] = [
    (
        "refunds/SKILL.md",
        "---\nname: refunds\ndescription: How refunds are decided\n---\nRefund in full when the parcel is lost.\n",
    ),
    (
        "refunds/references/policy.md",
        "Refunds over 500 EUR need a second approval.\n",
    ),
];

/// A model catalog whose default model is scripted (`script`, by task name; the format is
/// `models::scripted`'s), and a skills directory holding one skill (`refunds`).
pub struct AgentSetup {
    pub dir: TempDir,
    pub catalog: std::path::PathBuf,
    pub skills: std::path::PathBuf,
}

impl AgentSetup {
    pub fn new(script: Value) -> Self {
        let dir = scratch_dir("agent-");
        let catalog = scripted_catalog(dir.path(), &script);
        let skills = dir.path().join("skills");
        std::fs::create_dir_all(skills.join("refunds/references")).expect("skills");
        for (file, content) in REFUNDS_SKILL {
            std::fs::write(skills.join(file), content).expect("skill file");
        }
        Self {
            dir,
            catalog,
            skills,
        }
    }

    /// A server over this catalog and these skills.
    pub fn builder(&self) -> ServerBuilder {
        Server::builder()
            .arg("--model-catalog")
            .arg(self.catalog.to_str().expect("utf-8"))
            .arg("--skills-dir")
            .arg(self.skills.to_str().expect("utf-8"))
    }
}
