//! Helpers of the end-to-end tests: the real `local-server` binary as a child process, a
//! client for both bindings (JSON-RPC and REST) that turns either binding's errors into one
//! shape, an SSE reader, message builders, and a webhook receiver.
//!
//! Nothing here sleeps to make a test pass: waits are for an event to arrive, bounded by
//! [`WAIT`] only so that a broken server fails a test instead of hanging it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tempfile::TempDir;

/// The longest any single wait may take before the test fails (a guard, not an expectation).
pub const WAIT: Duration = Duration::from_secs(30);

pub const TASK_EXTENSION_URI: &str =
    "https://madarauchiha-314.github.io/tiny-harness/a2a/ext/task/v1";
pub const TASK_METADATA_KEY: &str = "io.github.madarauchiha-314.tiny-harness/task";
pub const TASK_MEDIA_TYPE: &str = "application/vnd.tiny-harness.task+json";
pub const EVENT_MEDIA_TYPE: &str = "application/vnd.tiny-harness.event+json";

// ---------------------------------------------------------------------------------------------
// The server process
// ---------------------------------------------------------------------------------------------

/// How to start the server.
#[derive(Default)]
pub struct ServerBuilder {
    default_participant: Option<String>,
    allow_private_webhooks: bool,
    data_dir: Option<TempDir>,
    args: Vec<String>,
    workspace_cwd: bool,
}

impl ServerBuilder {
    pub fn default_participant(mut self, id: &str) -> Self {
        self.default_participant = Some(id.to_owned());
        self
    }

    pub fn allow_private_webhooks(mut self) -> Self {
        self.allow_private_webhooks = true;
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
    /// and the examples' script resolve there); the package directory otherwise.
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
        let dir = self.data_dir.unwrap_or_else(|| {
            tempfile::Builder::new()
                .prefix("e2e-")
                .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
                .expect("data dir")
        });
        let log_path = dir.path().join("server.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("log file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_local-server"));
        command
            .args(["--addr", "127.0.0.1:0", "--store", "embedded", "--data-dir"])
            .arg(dir.path());
        if let Some(id) = &self.default_participant {
            command.args(["--default-participant", id]);
        }
        if self.allow_private_webhooks {
            command.arg("--allow-private-webhooks");
        }
        command.args(&self.args);
        if self.workspace_cwd {
            command.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
        }
        // Only the flags above configure it.
        for var in [
            "TH_ADDR",
            "TH_BASE_URL",
            "TH_STORE",
            "TH_DATA_DIR",
            "TABLE_NAME",
            "TH_CREATE_TABLE",
            "TH_DEFAULT_PARTICIPANT",
            "TH_ALLOW_PRIVATE_WEBHOOKS",
            "TH_AGENT_ID",
            "TH_AGENT_PROFILE",
            "TH_MODEL_CATALOG",
            "TH_HEADER_TIMEOUT_SECS",
            "TH_BODY_TIMEOUT_SECS",
            "TH_IDLE_TIMEOUT_SECS",
            "TH_MAX_CONNECTIONS",
            "TH_RATE_LIMIT",
            "TH_RATE_LIMIT_BURST",
        ] {
            command.env_remove(var);
        }
        let mut child = command
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start local-server");

        // The first stdout line says where it listens; the rest is drained so it never blocks.
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = tx.send(line);
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let line = match rx.recv_timeout(WAIT) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the server did not say where it listens\n{}",
                    read_log(&log_path)
                );
            }
        };
        let Some(url) = line.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("unexpected first line {line:?}\n{}", read_log(&log_path));
        };
        Server {
            child,
            url: url.to_owned(),
            dir: Some(dir),
        }
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
    /// A server with a fresh data directory and the default options.
    pub fn start() -> Self {
        Self::builder().start()
    }

    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    pub fn client(&self) -> Client {
        Client::new(&self.url)
    }

    /// Kills the process (no graceful shutdown) and hands back its data directory.
    pub fn kill(mut self) -> TempDir {
        self.stop_process();
        self.dir.take().expect("data dir")
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

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh id (message ids, JSON-RPC ids).
pub fn fresh_id(prefix: &str) -> String {
    format!("{prefix}-{}", NEXT_ID.fetch_add(1, Ordering::Relaxed))
}

pub fn text_part(text: &str) -> Value {
    json!({ "text": text })
}

pub fn data_part(media_type: &str, data: Value) -> Value {
    json!({ "data": data, "mediaType": media_type })
}

/// A user message with these parts, from `from` (`metadata.participant_id`; `None`: no
/// participant asserted), with a fresh message id.
pub fn message(from: Option<&str>, parts: Vec<Value>) -> Value {
    let mut m = json!({
        "messageId": fresh_id("m"),
        "role": "ROLE_USER",
        "parts": parts,
    });
    if let Some(from) = from {
        m["metadata"] = json!({ "participant_id": from });
    }
    m
}

/// A text message from `from`.
pub fn text(from: &str, text: &str) -> Value {
    message(Some(from), vec![text_part(text)])
}

/// The message as a follow-up on `task` (a task object or a task id).
pub fn on(mut message: Value, task: &Value) -> Value {
    let id = task.get("id").unwrap_or(task).as_str().expect("task id");
    message["taskId"] = json!(id);
    message
}

/// A `SendMessageRequest` with just the message.
pub fn send_req(message: Value) -> Value {
    json!({ "message": message })
}

// ---------------------------------------------------------------------------------------------
// Reading tasks and events
// ---------------------------------------------------------------------------------------------

pub fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or("<no state>")
}

/// The text of the first part of the task's (or status update's) status message.
pub fn status_text(value: &Value) -> &str {
    value["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or("<no status text>")
}

/// The tiny-harness extension object of a task.
pub fn ext(task: &Value) -> &Value {
    &task["metadata"][TASK_METADATA_KEY]
}

/// `task:<state>`, `status:<state>`, `artifact`, `message` for a `StreamResponse`.
pub fn event_kind(event: &Value) -> String {
    if let Some(task) = event.get("task") {
        format!("task:{}", state(task))
    } else if let Some(update) = event.get("statusUpdate") {
        format!("status:{}", state(update))
    } else if event.get("artifactUpdate").is_some() {
        "artifact".to_owned()
    } else if event.get("message").is_some() {
        "message".to_owned()
    } else {
        format!("unknown:{event}")
    }
}

pub fn event_kinds(events: &[Value]) -> Vec<String> {
    events.iter().map(event_kind).collect()
}

/// The keys of a JSON object, sorted.
pub fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    keys
}

// ---------------------------------------------------------------------------------------------
// The client
// ---------------------------------------------------------------------------------------------

/// Which binding a call goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    JsonRpc,
    Rest,
}

pub const BOTH: [Binding; 2] = [Binding::JsonRpc, Binding::Rest];

/// One HTTP response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?} {}", self.status, self.text))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn content_type(&self) -> &str {
        self.header("content-type").unwrap_or("")
    }
}

/// An A2A error from either binding, in one shape.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub binding: Binding,
    /// 200 for JSON-RPC.
    pub http_status: u16,
    /// The JSON-RPC code (`None` over REST).
    pub code: Option<i64>,
    /// `google.rpc.ErrorInfo.reason` of the first detail.
    pub reason: String,
    pub message: String,
    /// The `error` object as sent.
    pub raw: Value,
}

impl ApiError {
    /// Checks the error against the binding's expectation: the JSON-RPC code over JSON-RPC,
    /// the HTTP status over REST, the ErrorInfo reason over both.
    pub fn assert_is(&self, code: i64, http_status: u16, reason: &str) {
        match self.binding {
            Binding::JsonRpc => assert_eq!(
                (self.code, self.http_status),
                (Some(code), 200),
                "JSON-RPC error code: {self:?}"
            ),
            Binding::Rest => {
                assert_eq!(self.http_status, http_status, "REST status: {self:?}")
            }
        }
        assert_eq!(self.reason, reason, "ErrorInfo reason: {self:?}");
        let info = match self.binding {
            Binding::JsonRpc => &self.raw["data"][0],
            Binding::Rest => &self.raw["details"][0],
        };
        assert_eq!(
            info["@type"], "type.googleapis.com/google.rpc.ErrorInfo",
            "{self:?}"
        );
        assert_eq!(info["domain"], "a2a-protocol.org", "{self:?}");
    }
}

/// A client of one server. Every request carries `A2A-Version: 1.0` unless told otherwise,
/// and `X-Participant-Id` when [`Client::as_participant`] set one.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    pub base: String,
    participant: Option<String>,
    extensions: Option<String>,
    version: Option<String>,
}

impl Client {
    pub fn new(base: &str) -> Self {
        Self {
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("http client"),
            base: base.trim_end_matches('/').to_owned(),
            participant: None,
            extensions: None,
            version: Some("1.0".to_owned()),
        }
    }

    /// The same client sending `X-Participant-Id: <id>`.
    pub fn as_participant(&self, id: &str) -> Self {
        Self {
            participant: Some(id.to_owned()),
            ..self.clone()
        }
    }

    /// The same client sending `A2A-Extensions: <uris>`.
    pub fn with_extensions(&self, uris: &str) -> Self {
        Self {
            extensions: Some(uris.to_owned()),
            ..self.clone()
        }
    }

    /// The same client without the `A2A-Version` header.
    pub fn without_version(&self) -> Self {
        Self {
            version: None,
            ..self.clone()
        }
    }

    /// A separate connection pool (streams and other calls on distinct connections).
    pub fn fresh_connection(&self) -> Self {
        Self {
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("http client"),
            ..self.clone()
        }
    }

    /// The same client connecting from another local address (e.g. `127.0.0.2`, which Linux
    /// routes over loopback like 127.0.0.1): another caller to a per-address rate limit.
    pub fn bound_to(&self, address: &str) -> Self {
        Self {
            http: reqwest::Client::builder()
                .no_proxy()
                .local_address(address.parse::<std::net::IpAddr>().expect("an IP address"))
                .build()
                .expect("http client"),
            ..self.clone()
        }
    }

    pub fn api(&self, binding: Binding) -> Api {
        Api {
            client: self.clone(),
            binding,
        }
    }

    /// A request with the client's headers.
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .timeout(WAIT);
        if let Some(v) = &self.version {
            req = req.header("A2A-Version", v);
        }
        if let Some(p) = &self.participant {
            req = req.header("X-Participant-Id", p);
        }
        if let Some(e) = &self.extensions {
            req = req.header("A2A-Extensions", e);
        }
        req
    }

    pub async fn send(req: reqwest::RequestBuilder) -> Reply {
        let resp = req.send().await.expect("HTTP request");
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.expect("body");
        Reply {
            status,
            headers,
            text,
        }
    }

    /// The JSON-RPC request body for `method` with a fresh id.
    pub fn rpc_body(method: &str, params: Value) -> (String, Value) {
        let id = fresh_id("rpc");
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        (id, body)
    }

    /// POSTs a JSON-RPC request to `/`; checks the envelope (HTTP 200, JSON, the id echoed).
    pub async fn rpc(&self, method: &str, params: Value) -> Reply {
        let (id, body) = Self::rpc_body(method, params);
        let reply = Self::send(self.request(Method::POST, "/").json(&body)).await;
        assert_eq!(reply.status, StatusCode::OK, "{method}: {}", reply.text);
        assert!(
            reply.content_type().starts_with("application/json"),
            "{method}: content type {}",
            reply.content_type()
        );
        let value = reply.json();
        assert_eq!(value["jsonrpc"], "2.0", "{value}");
        assert_eq!(
            value["id"],
            id.as_str(),
            "the request id is echoed: {value}"
        );
        reply
    }

    /// A REST call; `body` is sent as `application/json` when given.
    pub async fn rest(&self, method: Method, path: &str, body: Option<Value>) -> Reply {
        let mut req = self.request(method, path);
        if let Some(body) = body {
            req = req.json(&body);
        }
        Self::send(req).await
    }
}

fn rpc_outcome(reply: &Reply) -> Result<Value, ApiError> {
    let value = reply.json();
    if let Some(err) = value.get("error") {
        return Err(ApiError {
            binding: Binding::JsonRpc,
            http_status: reply.status.as_u16(),
            code: err["code"].as_i64(),
            reason: err["data"][0]["reason"].as_str().unwrap_or("").to_owned(),
            message: err["message"].as_str().unwrap_or("").to_owned(),
            raw: err.clone(),
        });
    }
    assert!(value.get("result").is_some(), "no result: {value}");
    Ok(value["result"].clone())
}

fn rest_outcome(reply: &Reply) -> Result<Value, ApiError> {
    if reply.status.is_success() {
        // Negotiated per request (headers.rs checks which one when).
        assert!(
            reply.content_type().starts_with("application/a2a+json")
                || reply.content_type().starts_with("application/json"),
            "REST success content type: {}",
            reply.content_type()
        );
        return Ok(reply.json());
    }
    assert!(
        reply.content_type().starts_with("application/json"),
        "REST error content type: {} ({})",
        reply.content_type(),
        reply.text
    );
    let value = reply.json();
    let err = &value["error"];
    assert_eq!(
        err["code"].as_u64(),
        Some(u64::from(reply.status.as_u16())),
        "google.rpc.Status code: {value}"
    );
    Err(ApiError {
        binding: Binding::Rest,
        http_status: reply.status.as_u16(),
        code: None,
        reason: err["details"][0]["reason"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        message: err["message"].as_str().unwrap_or("").to_owned(),
        raw: err.clone(),
    })
}

/// A query string from a JSON object of parameters (strings as they are, others as JSON).
fn query(params: &Value) -> String {
    let Some(obj) = params.as_object() else {
        return String::new();
    };
    let mut out = String::new();
    for (k, v) in obj {
        let v = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.push(if out.is_empty() { '?' } else { '&' });
        out.push_str(k);
        out.push('=');
        out.push_str(&v);
    }
    out
}

/// The 11 methods through one binding, answering the method's result document (for
/// SendMessage: the task) or the error in one shape.
#[derive(Clone)]
pub struct Api {
    pub client: Client,
    pub binding: Binding,
}

impl Api {
    pub fn as_participant(&self, id: &str) -> Api {
        self.client.as_participant(id).api(self.binding)
    }

    async fn unary(
        &self,
        rpc_method: &str,
        params: Value,
        rest: (Method, String, Option<Value>),
    ) -> Result<Value, ApiError> {
        match self.binding {
            Binding::JsonRpc => rpc_outcome(&self.client.rpc(rpc_method, params).await),
            Binding::Rest => {
                let (method, path, body) = rest;
                rest_outcome(&self.client.rest(method, &path, body).await)
            }
        }
    }

    /// SendMessage: the whole `SendMessageResponse`.
    pub async fn send_response(&self, req: Value) -> Result<Value, ApiError> {
        self.unary(
            "SendMessage",
            req.clone(),
            (Method::POST, "/message:send".to_owned(), Some(req)),
        )
        .await
    }

    /// SendMessage answered with a task: the task.
    pub async fn send(&self, req: Value) -> Result<Value, ApiError> {
        let resp = self.send_response(req).await?;
        assert_eq!(
            keys(&resp),
            ["task"],
            "a SendMessageResponse with a task: {resp}"
        );
        Ok(resp["task"].clone())
    }

    /// A send that must succeed.
    pub async fn send_ok(&self, req: Value) -> Value {
        self.send(req)
            .await
            .unwrap_or_else(|e| panic!("{:?} SendMessage failed: {e:?}", self.binding))
    }

    pub async fn send_streaming(&self, req: Value) -> Result<Events, ApiError> {
        match self.binding {
            Binding::JsonRpc => {
                let (id, body) = Client::rpc_body("SendStreamingMessage", req);
                Events::open(self.client.request(Method::POST, "/").json(&body), Some(id)).await
            }
            Binding::Rest => {
                Events::open(
                    self.client
                        .request(Method::POST, "/message:stream")
                        .json(&req),
                    None,
                )
                .await
            }
        }
    }

    pub async fn get_task(&self, id: &str, history_length: Option<i64>) -> Result<Value, ApiError> {
        let mut params = json!({ "id": id });
        let mut path = format!("/tasks/{id}");
        if let Some(n) = history_length {
            params["historyLength"] = json!(n);
            path.push_str(&format!("?historyLength={n}"));
        }
        self.unary("GetTask", params, (Method::GET, path, None))
            .await
    }

    /// ListTasks with these parameters (a JSON object; sent as the query over REST).
    pub async fn list_tasks(&self, params: Value) -> Result<Value, ApiError> {
        let path = format!("/tasks{}", query(&params));
        self.unary("ListTasks", params, (Method::GET, path, None))
            .await
    }

    pub async fn cancel(&self, id: &str) -> Result<Value, ApiError> {
        self.unary(
            "CancelTask",
            json!({ "id": id }),
            (Method::POST, format!("/tasks/{id}:cancel"), None),
        )
        .await
    }

    /// SubscribeToTask (REST: POST with an empty body).
    pub async fn subscribe(&self, id: &str) -> Result<Events, ApiError> {
        match self.binding {
            Binding::JsonRpc => {
                let (rpc_id, body) = Client::rpc_body("SubscribeToTask", json!({ "id": id }));
                Events::open(
                    self.client.request(Method::POST, "/").json(&body),
                    Some(rpc_id),
                )
                .await
            }
            Binding::Rest => {
                Events::open(
                    self.client
                        .request(Method::POST, &format!("/tasks/{id}:subscribe")),
                    None,
                )
                .await
            }
        }
    }

    /// SubscribeToTask over REST with GET (the proto's verb).
    pub async fn subscribe_get(&self, id: &str) -> Result<Events, ApiError> {
        assert_eq!(self.binding, Binding::Rest);
        Events::open(
            self.client
                .request(Method::GET, &format!("/tasks/{id}:subscribe")),
            None,
        )
        .await
    }

    /// CreateTaskPushNotificationConfig; `config` holds url, id, token, authentication.
    pub async fn create_push(&self, task_id: &str, config: Value) -> Result<Value, ApiError> {
        let mut params = config.clone();
        params["taskId"] = json!(task_id);
        self.unary(
            "CreateTaskPushNotificationConfig",
            params,
            (
                Method::POST,
                format!("/tasks/{task_id}/pushNotificationConfigs"),
                Some(config),
            ),
        )
        .await
    }

    pub async fn get_push(&self, task_id: &str, id: &str) -> Result<Value, ApiError> {
        self.unary(
            "GetTaskPushNotificationConfig",
            json!({ "taskId": task_id, "id": id }),
            (
                Method::GET,
                format!("/tasks/{task_id}/pushNotificationConfigs/{id}"),
                None,
            ),
        )
        .await
    }

    pub async fn list_push(&self, task_id: &str) -> Result<Value, ApiError> {
        self.unary(
            "ListTaskPushNotificationConfigs",
            json!({ "taskId": task_id }),
            (
                Method::GET,
                format!("/tasks/{task_id}/pushNotificationConfigs"),
                None,
            ),
        )
        .await
    }

    pub async fn delete_push(&self, task_id: &str, id: &str) -> Result<Value, ApiError> {
        self.unary(
            "DeleteTaskPushNotificationConfig",
            json!({ "taskId": task_id, "id": id }),
            (
                Method::DELETE,
                format!("/tasks/{task_id}/pushNotificationConfigs/{id}"),
                None,
            ),
        )
        .await
    }

    pub async fn extended_card(&self) -> Result<Value, ApiError> {
        self.unary(
            "GetExtendedAgentCard",
            json!({}),
            (Method::GET, "/extendedAgentCard".to_owned(), None),
        )
        .await
    }
}

// ---------------------------------------------------------------------------------------------
// Server-sent events
// ---------------------------------------------------------------------------------------------

/// Reads an SSE body: yields the JSON of each `data:` field, skips comments (keep-alives).
pub struct Sse {
    body: BoxStream<'static, reqwest::Result<Vec<u8>>>,
    buffer: Vec<u8>,
    ended: bool,
}

impl Sse {
    pub fn new(resp: reqwest::Response) -> Self {
        Self {
            body: resp
                .bytes_stream()
                .map(|chunk| chunk.map(|b| b.to_vec()))
                .boxed(),
            buffer: Vec::new(),
            ended: false,
        }
    }

    /// One complete event (the bytes before a blank line), if buffered.
    fn take_frame(&mut self) -> Option<String> {
        let find = |sep: &[u8]| {
            self.buffer
                .windows(sep.len())
                .position(|w| w == sep)
                .map(|at| (at, sep.len()))
        };
        let (end, len) = match (find(b"\n\n"), find(b"\r\n\r\n")) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        let frame: Vec<u8> = self.buffer.drain(..end + len).take(end).collect();
        Some(String::from_utf8(frame).expect("UTF-8 SSE frame"))
    }

    /// The next `data:` JSON; `None` when the stream ended. Fails the test after [`WAIT`].
    pub async fn next(&mut self) -> Option<Value> {
        tokio::time::timeout(WAIT, self.next_unbounded())
            .await
            .expect("an SSE event or the end of the stream")
    }

    async fn next_unbounded(&mut self) -> Option<Value> {
        loop {
            while let Some(frame) = self.take_frame() {
                let data: Vec<&str> = frame
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                if data.is_empty() {
                    continue; // a comment (keep-alive) or a field we do not use
                }
                let json = data.join("\n");
                return Some(
                    serde_json::from_str(&json)
                        .unwrap_or_else(|e| panic!("SSE data is not JSON ({e}): {json}")),
                );
            }
            if self.ended {
                let rest = String::from_utf8_lossy(&self.buffer);
                assert!(rest.trim().is_empty(), "an incomplete SSE frame: {rest:?}");
                return None;
            }
            match self.body.next().await {
                Some(chunk) => self.buffer.extend(chunk.expect("SSE chunk")),
                None => self.ended = true,
            }
        }
    }
}

/// A stream of `StreamResponse`s from either binding (JSON-RPC frames are unwrapped after
/// checking that each carries the request id).
pub struct Events {
    pub headers: HeaderMap,
    sse: Sse,
    rpc_id: Option<String>,
}

impl Events {
    /// Sends the request; an answer that is not an event stream is the error it carries.
    pub async fn open(
        req: reqwest::RequestBuilder,
        rpc_id: Option<String>,
    ) -> Result<Events, ApiError> {
        // No overall timeout on a stream: each read is bounded instead.
        let resp = tokio::time::timeout(WAIT, req.timeout(Duration::from_secs(3600)).send())
            .await
            .expect("the stream's response head")
            .expect("HTTP request");
        let headers = resp.headers().clone();
        let content_type = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        if !content_type.starts_with("text/event-stream") {
            let status = resp.status();
            let text = resp.text().await.expect("body");
            let reply = Reply {
                status,
                headers,
                text,
            };
            let outcome = match rpc_id {
                Some(_) => rpc_outcome(&reply),
                None => rest_outcome(&reply),
            };
            return match outcome {
                Err(err) => Err(err),
                Ok(value) => panic!("a stream method answered a document: {value}"),
            };
        }
        assert_eq!(resp.status(), StatusCode::OK);
        Ok(Events {
            headers,
            sse: Sse::new(resp),
            rpc_id,
        })
    }

    /// The next `StreamResponse`; `None` when the stream ended.
    pub async fn next(&mut self) -> Option<Value> {
        let frame = self.sse.next().await?;
        match &self.rpc_id {
            None => {
                assert!(frame.get("error").is_none(), "an error event: {frame}");
                Some(frame)
            }
            Some(id) => {
                assert_eq!(frame["jsonrpc"], "2.0", "{frame}");
                assert_eq!(
                    frame["id"],
                    id.as_str(),
                    "each frame carries the request id"
                );
                assert!(frame.get("error").is_none(), "an error event: {frame}");
                Some(frame["result"].clone())
            }
        }
    }

    /// Every remaining event, until the server ends the stream.
    pub async fn collect(mut self) -> Vec<Value> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            events.push(event);
        }
        events
    }
}

// ---------------------------------------------------------------------------------------------
// Polling
// ---------------------------------------------------------------------------------------------

/// Reads the task until `done` says so (fails after [`WAIT`]).
pub async fn poll_task(api: &Api, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let task = api.get_task(id, None).await.expect("GetTask");
        if done(&task) {
            return task;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the task never got there: {task}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// A webhook receiver
// ---------------------------------------------------------------------------------------------

/// One request the receiver got, and the status it answered.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
    pub answered: u16,
}

impl Delivery {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// An HTTP server on 127.0.0.1:0 that records every request and answers 200 (or, first,
/// the statuses it was told to answer).
pub struct Webhook {
    pub base: String,
    received: tokio::sync::mpsc::UnboundedReceiver<Delivery>,
    serve: tokio::task::JoinHandle<()>,
}

impl Webhook {
    pub async fn start() -> Self {
        Self::answering(&[]).await
    }

    /// A receiver that answers its first requests with these statuses, then 200.
    pub async fn answering(first: &[u16]) -> Self {
        let script = Arc::new(std::sync::Mutex::new(
            first
                .iter()
                .copied()
                .collect::<std::collections::VecDeque<u16>>(),
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind webhook");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let (tx, received) = tokio::sync::mpsc::unbounded_channel();
        let tx = Arc::new(tx);
        let router = axum::Router::new().fallback(
            move |method: axum::http::Method,
                  uri: axum::http::Uri,
                  headers: HeaderMap,
                  body: bytes::Bytes| {
                let tx = tx.clone();
                let answer = script.lock().expect("script").pop_front().unwrap_or(200);
                async move {
                    let body = serde_json::from_slice(&body).unwrap_or_else(|_| {
                        Value::String(String::from_utf8_lossy(&body).into_owned())
                    });
                    let _ = tx.send(Delivery {
                        method: method.to_string(),
                        path: uri.path().to_owned(),
                        headers,
                        body,
                        answered: answer,
                    });
                    axum::http::StatusCode::from_u16(answer).expect("status")
                }
            },
        );
        let serve = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self {
            base,
            received,
            serve,
        }
    }

    /// The URL of a path on the receiver.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The next request (fails after [`WAIT`]).
    pub async fn next(&mut self) -> Delivery {
        tokio::time::timeout(WAIT, self.received.recv())
            .await
            .expect("a webhook delivery")
            .expect("the receiver runs")
    }

    /// Requests until one satisfies `last` (that one included).
    pub async fn until(&mut self, last: impl Fn(&Delivery) -> bool) -> Vec<Delivery> {
        let mut got = Vec::new();
        loop {
            let delivery = self.next().await;
            let stop = last(&delivery);
            got.push(delivery);
            if stop {
                return got;
            }
        }
    }

    /// What arrived so far, without waiting.
    pub fn drain(&mut self) -> Vec<Delivery> {
        let mut got = Vec::new();
        while let Ok(d) = self.received.try_recv() {
            got.push(d);
        }
        got
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.serve.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// The agent with the scripted model
// ---------------------------------------------------------------------------------------------

/// A model catalog whose default model is scripted (`script`, by task name; the format is
/// `models::scripted`'s), and a skills directory holding one skill (`refunds`).
pub struct AgentSetup {
    pub dir: TempDir,
    pub catalog: std::path::PathBuf,
    pub skills: std::path::PathBuf,
}

impl AgentSetup {
    pub fn new(script: Value) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("agent-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .expect("dir");
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
