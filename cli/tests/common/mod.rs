//! What the `th` tests share: the local server (the `local-server` binary next to `th` in
//! the target directory), a scripted model catalog, and `th` run as a child process.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;
use tempfile::TempDir;
pub use test_support::{Server, ServerBuilder};

/// The `local-server` binary of this build. Cargo names another package's binary to no test
/// (`CARGO_BIN_EXE_*` is per package), so it is looked up next to `th`: build it first with
/// `cargo build -p local-server` (same target directory and profile).
pub fn local_server_binary() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_BIN_EXE_th")).with_file_name("local-server");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build -p local-server` before `cargo test -p th`",
        path.display()
    );
    path
}

pub fn scratch() -> &'static str {
    env!("CARGO_TARGET_TMPDIR")
}

/// A server with the default options (the `echo` model).
pub fn server() -> Server {
    ServerBuilder::new(local_server_binary(), scratch()).start()
}

/// A server whose default model is scripted (`script` in `models::scripted`'s format), and
/// the directory holding its files.
pub fn scripted_server(script: Value) -> (Server, TempDir) {
    let dir = tempfile::Builder::new()
        .prefix("th-agent-")
        .tempdir_in(scratch())
        .expect("dir");
    let catalog = test_support::scripted_catalog(dir.path(), &script);
    let server = ServerBuilder::new(local_server_binary(), scratch())
        .arg("--model-catalog")
        .arg(catalog.to_str().expect("utf-8"))
        .start();
    (server, dir)
}

/// `th` with these arguments, against `url`, without any `TH_*` or colour settings of the
/// environment it runs in.
pub fn th_command(url: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_th"));
    for (var, _) in std::env::vars_os() {
        if var.to_str().is_some_and(|v| v.starts_with("TH_")) {
            command.env_remove(var);
        }
    }
    command
        .env("NO_COLOR", "1")
        .arg("--url")
        .arg(url)
        .args(args);
    command
}

/// What one `th` run printed and how it exited.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }

    /// Fails the test unless the run exited with 0.
    pub fn ok(self) -> Self {
        assert_eq!(
            self.code, 0,
            "stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }
}

pub fn th(url: &str, args: &[&str]) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = th_command(url, args).output().expect("run th");
    Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}
