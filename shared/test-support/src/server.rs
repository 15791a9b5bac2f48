//! The real `local-server` binary as a child process: started on a free port over a data
//! directory of its own, stopped (killed and waited for) when dropped.
//!
//! Cargo tells only the server package's own tests where its binary is
//! (`CARGO_BIN_EXE_local-server`) and where their scratch space is (`CARGO_TARGET_TMPDIR`),
//! so the test passes both to [`ServerBuilder::new`].

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use tempfile::TempDir;

use crate::client::Client;
use crate::wait::WAIT;

/// The workspace root, where a developer runs the server from.
const WORKSPACE_ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Whether an environment variable configures the server (every setting is `TH_*`; the one
/// old name the local server refuses at start-up is `TABLE_NAME`): such variables are removed
/// from its environment, so that only the flags the builder passes configure it.
fn configures_the_server(var: &str) -> bool {
    var.starts_with("TH_") || var == "TABLE_NAME"
}

/// Which store the server runs on.
enum StoreChoice {
    /// The embedded store in the data directory.
    Embedded,
    /// A DynamoDB table (at `AWS_ENDPOINT_URL_DYNAMODB`), created if missing.
    DynamoDb(String),
}

/// How to start the server.
pub struct ServerBuilder {
    binary: PathBuf,
    scratch: PathBuf,
    store: StoreChoice,
    default_participant: Option<String>,
    allow_private_webhooks: bool,
    data_dir: Option<TempDir>,
    args: Vec<String>,
    workspace_cwd: bool,
}

impl ServerBuilder {
    /// The server `binary`, its data directory made under `scratch`; the embedded store and
    /// the default options.
    pub fn new(binary: impl Into<PathBuf>, scratch: impl Into<PathBuf>) -> Self {
        Self {
            binary: binary.into(),
            scratch: scratch.into(),
            store: StoreChoice::Embedded,
            default_participant: None,
            allow_private_webhooks: false,
            data_dir: None,
            args: Vec::new(),
            workspace_cwd: false,
        }
    }

    pub fn default_participant(mut self, id: &str) -> Self {
        self.default_participant = Some(id.to_owned());
        self
    }

    pub fn allow_private_webhooks(mut self) -> Self {
        self.allow_private_webhooks = true;
        self
    }

    /// The DynamoDB table `table` instead of the embedded store; the server creates it when
    /// missing (`--create-table`).
    pub fn dynamodb_table(mut self, table: &str) -> Self {
        self.store = StoreChoice::DynamoDb(table.to_owned());
        self
    }

    /// More command-line arguments.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// More command-line arguments, in order.
    pub fn args<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Run from the workspace root, as a developer does (relative paths such as `./skills`
    /// and the examples' script resolve there); the test's package directory otherwise.
    pub fn in_workspace_root(mut self) -> Self {
        self.workspace_cwd = true;
        self
    }

    /// Reuse a data directory (a restart); a fresh one otherwise.
    pub fn data_dir(mut self, dir: TempDir) -> Self {
        self.data_dir = Some(dir);
        self
    }

    pub fn start(self) -> Server {
        let dir = match self.data_dir {
            Some(dir) => dir,
            None => tempfile::Builder::new()
                .prefix("e2e-")
                .tempdir_in(&self.scratch)
                .expect("data dir"),
        };
        let log_path = dir.path().join("server.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("log file");
        let mut command = Command::new(&self.binary);
        command.args(["--addr", "127.0.0.1:0"]);
        match &self.store {
            StoreChoice::Embedded => {
                command
                    .args(["--store", "embedded", "--data-dir"])
                    .arg(dir.path());
            }
            StoreChoice::DynamoDb(table) => {
                command.args(["--store", "dynamodb", "--table", table, "--create-table"]);
            }
        }
        if let Some(id) = &self.default_participant {
            command.args(["--default-participant", id]);
        }
        if self.allow_private_webhooks {
            command.arg("--allow-private-webhooks");
        }
        command.args(&self.args);
        if self.workspace_cwd {
            command.current_dir(WORKSPACE_ROOT);
        }
        for (var, _) in std::env::vars_os() {
            if var.to_str().is_some_and(configures_the_server) {
                command.env_remove(var);
            }
        }
        let mut child = command
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start local-server");
        match listening_url(&mut child) {
            Ok(url) => Server {
                child,
                url,
                dir: Some(dir),
            },
            Err(why) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{why}\n{}", read_log(&log_path));
            }
        }
    }
}

/// The URL from the server's first stdout line (`listening on <url>`); the rest of its
/// stdout is drained so that it never blocks on a full pipe.
fn listening_url(child: &mut Child) -> Result<String, String> {
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = tx.send(line);
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    let line = rx
        .recv_timeout(WAIT)
        .map_err(|_| "the server did not say where it listens".to_owned())?;
    match line.trim().strip_prefix("listening on ") {
        Some(url) => Ok(url.to_owned()),
        None => Err(format!("unexpected first line {line:?}")),
    }
}

fn read_log(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut file) = std::fs::File::open(path) {
        let _ = file.read_to_string(&mut text);
    }
    format!("--- server log {} ---\n{text}", path.display())
}

/// The running `local-server`, killed (and waited for) when dropped. Its log goes to
/// `<data dir>/server.log` and is printed when a test fails.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:<port>`, from the server's first stdout line.
    pub url: String,
    dir: Option<TempDir>,
}

impl Server {
    pub fn client(&self) -> Client {
        Client::new(&self.url)
    }

    /// Kills the process (no graceful shutdown) and hands back its data directory.
    pub fn kill(mut self) -> TempDir {
        self.stop_process();
        self.dir.take().expect("data dir")
    }

    /// The process id (for an operator's signals: `kill -USR1` asks for a backup).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The data directory (the store's file, `server.log`).
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("data dir").path()
    }

    /// The server's log so far (one JSON object per line).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir().join("server.log")).unwrap_or_default()
    }

    /// Sends SIGTERM and waits (bounded by [`WAIT`]) for the process to exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM {pid}");
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server ignored SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop_process(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_process();
        if std::thread::panicking()
            && let Some(dir) = &self.dir
        {
            eprintln!("{}", read_log(&dir.path().join("server.log")));
        }
    }
}
