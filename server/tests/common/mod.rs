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
        let script_path = dir.path().join("script.json");
        std::fs::write(&script_path, script.to_string()).expect("script");
        let catalog = dir.path().join("catalog.json");
        let models = json!({
            "default_model": "scripted",
            "models": [
                {"id": "scripted", "provider": "scripted", "settings": {"script": script_path}},
                {"id": "echo", "provider": "echo"}
            ]
        });
        std::fs::write(&catalog, models.to_string()).expect("catalog");
        let skills = dir.path().join("skills");
        std::fs::create_dir_all(skills.join("refunds/references")).expect("skills");
        std::fs::write(
            skills.join("refunds/SKILL.md"),
            "---\nname: refunds\ndescription: How refunds are decided\n---\nRefund in full when the parcel is lost.\n",
        )
        .expect("skill");
        std::fs::write(
            skills.join("refunds/references/policy.md"),
            "Refunds over 500 EUR need a second approval.\n",
        )
        .expect("resource");
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
