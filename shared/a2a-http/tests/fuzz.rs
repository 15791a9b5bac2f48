//! Fuzzing the request decoding of both bindings: proptest over raw bytes and over
//! structure-aware requests, sent through [`a2a_http::handle`] into the real service over the
//! embedded store (echo agent), not a test double.
//!
//! Properties, checked on every response of every case:
//! - `handle` answers (no panic, in the test or in a background task; no hang past a timeout);
//! - no HTTP 500 (nor any 5xx but 503, the intentional "unavailable" mapping), and no JSON-RPC
//!   `-32603 internal error` / `-32006` — bad input is never the server's fault;
//! - JSON-RPC (POST to the endpoint): HTTP 200, `application/json`, a JSON object with
//!   `"jsonrpc":"2.0"`, the request's `id` echoed, exactly one of `result`/`error`, the error
//!   code in the A2A/JSON-RPC set and its `data` led by an `ErrorInfo`;
//! - HTTP+JSON: an error is `application/json` `{"error":{code,status,message,details}}` with
//!   `code` the HTTP status, `(code, status)` a row of the error table and an `ErrorInfo`
//!   detail (405s carry `Allow`); a success is `application/a2a+json` or `application/json` JSON;
//! - SSE (both bindings): at most a few frames are read, each with a short timeout; every
//!   `data:` line is JSON of the binding's framing, every other line a comment or blank.
//!
//! Case counts: proptest's default, 256 per property, unless `PROPTEST_CASES` is set
//! (`make fuzz` runs a long one). Each property prints its executions and an outcome histogram
//! (`cargo test -p a2a-http --test fuzz -- --nocapture`). A finding is kept below as a
//! regression case marked `#[ignore = "BUG: ..."]`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use a2a_http::{AGENT_CARD_PATH, Body, Caller, ErrorKind, HttpConfig, handle};
use a2a_service::{A2aApi, EchoAgent, Service, ServiceConfig};
use bytes::Bytes;
use futures::StreamExt;
use http::header::{ALLOW, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method, Request};
use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, utf8_percent_encode};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};
use store_embedded::EmbeddedStore;

// ---------------------------------------------------------------------------------------------
// The fixture: one real service over one embedded store per property.

/// The participant a request without one acts as (so most requests reach the service).
const DEFAULT_PARTICIPANT: &str = "fuzzer";
/// A request that takes longer than this is reported as slow (not a failure).
const SLOW: Duration = Duration::from_secs(2);
/// `handle` must answer within this (a blocking send waits at most `blocking_timeout`).
const ANSWER_WITHIN: Duration = Duration::from_secs(30);
/// SSE: frames read at most, and the wait for each.
const MAX_FRAMES: usize = 6;
const FRAME_WAIT: Duration = Duration::from_millis(150);

const JSONRPC_CODES: [i64; 15] = [
    -32700, -32600, -32601, -32602, -32603, -32001, -32002, -32003, -32004, -32005, -32006, -32007,
    -32008, -32009, -32000,
];
/// JSON-RPC's code of a rate limit (refused requests per task and per caller are limited).
const RATE_LIMITED: i64 = -32000;
const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
const PROTOCOL_DOMAIN: &str = "a2a-protocol.org";

const REAL_METHODS: [&str; 11] = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
];

/// Values the strategies draw from besides random ones: ids of tasks and configs that exist,
/// the card's extensions and input modes.
#[derive(Debug, Clone)]
struct Pools {
    task_ids: Vec<String>,
    config_ids: Vec<String>,
    extensions: Vec<String>,
    media_types: Vec<String>,
}

struct Fixture {
    rt: tokio::runtime::Runtime,
    /// The name of the runtime's threads.
    threads: String,
    service: Service,
    http: HttpConfig,
    pools: Pools,
    _dir: tempfile::TempDir,
}

/// Threads of the fixtures' runtimes that panicked, by name (one name per property). A panic
/// in `handle` itself fails the case through proptest; one in a task the service spawned (the
/// runner) is caught by tokio and seen only here.
static WORKER_PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static PANIC_HOOK: Once = Once::new();

fn install_panic_hook() {
    PANIC_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current();
            if let (Some(name), Ok(mut panics)) = (thread.name(), WORKER_PANICS.lock())
                && name.starts_with("fuzz-rt-")
            {
                panics.push(name.to_owned());
            }
            previous(info);
        }));
    });
}

impl Fixture {
    fn new(name: &str) -> Self {
        install_panic_hook();
        let threads = format!("fuzz-rt-{name}");
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
        let store = EmbeddedStore::open(dir.path().join("fuzz.redb")).expect("open the store");
        let mut config = ServiceConfig::local("http://127.0.0.1:8080");
        config.default_participant = Some(DEFAULT_PARTICIPANT.to_owned());
        config.poll_interval = Duration::from_millis(5);
        config.blocking_timeout = Duration::from_secs(3);
        let service = Service::new(Arc::new(store), config, Arc::new(EchoAgent), None);
        let card = service.agent_card();
        let pools = Pools {
            task_ids: Vec::new(),
            config_ids: vec!["cfg-1".to_owned(), "cfg-missing".to_owned()],
            extensions: card
                .capabilities
                .extensions
                .iter()
                .flatten()
                .map(|e| e.uri.clone())
                .collect(),
            media_types: card.default_input_modes.clone(),
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(threads.clone())
            .enable_all()
            .build()
            .expect("runtime");
        let mut fx = Fixture {
            rt,
            threads,
            service,
            http: HttpConfig {
                keep_alive: Duration::from_secs(2),
                ..HttpConfig::default()
            },
            pools,
            _dir: dir,
        };
        fx.seed();
        fx
    }

    /// A JSON-RPC call that must succeed; its `result`.
    fn rpc(&self, method: &str, params: Value, participant: Option<&str>) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut builder = Request::post("/")
            .header(CONTENT_TYPE, "application/json")
            .header("a2a-version", "1.0");
        if let Some(p) = participant {
            builder = builder.header("x-participant-id", p);
        }
        let req = builder
            .body(Bytes::from(serde_json::to_vec(&body).unwrap()))
            .unwrap();
        let resp = self
            .rt
            .block_on(handle(&self.service, &self.http, req, Caller::anonymous()));
        let bytes = self.rt.block_on(resp.into_body().collect());
        let value: Value = serde_json::from_slice(&bytes).expect("a JSON-RPC response");
        assert!(value.get("result").is_some(), "seeding {method}: {value}");
        value["result"].clone()
    }

    /// Tasks in several states (waiting for input, another participant's, canceled) and a push
    /// config, so the fuzzed ids reach existing records too.
    fn seed(&mut self) {
        let send = |text: &str, participant: Option<&str>| -> String {
            let result = self.rpc(
                "SendMessage",
                json!({"message": {"messageId": uuid(), "role": "ROLE_USER",
                    "parts": [{"text": text}]}}),
                participant,
            );
            result["task"]["id"].as_str().expect("a task id").to_owned()
        };
        let waiting = send("hello", None);
        let theirs = send("hi from alice", Some("alice"));
        let command = send("/model", None);
        let canceled = send("to be canceled", None);
        self.rpc("CancelTask", json!({"id": canceled}), None);
        self.rpc(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": waiting, "id": "cfg-1", "url": "https://93.184.216.34/hook"}),
            None,
        );
        self.pools.task_ids = vec![waiting, theirs, command, canceled, "no-such-task".into()];
    }
}

fn uuid() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("seed-{}", N.fetch_add(1, Ordering::SeqCst))
}

// ---------------------------------------------------------------------------------------------
// One case: a request, its response, the checks.

/// A request as the strategies make it (bytes shown escaped when a case fails).
#[derive(Debug, Clone)]
struct Case {
    method: Method,
    uri: String,
    headers: Vec<(&'static str, Bytes)>,
    body: Bytes,
}

impl Case {
    fn post(uri: &str, body: Bytes) -> Self {
        Case {
            method: Method::POST,
            uri: uri.to_owned(),
            headers: vec![
                ("content-type", Bytes::from_static(b"application/json")),
                ("a2a-version", Bytes::from_static(b"1.0")),
            ],
            body,
        }
    }

    /// `None` when `http` refuses the URI (the strategies avoid it; counted).
    fn request(&self) -> Option<Request<Bytes>> {
        let mut builder = Request::builder()
            .method(self.method.clone())
            .uri(self.uri.as_str());
        for (name, value) in &self.headers {
            if let Ok(value) = HeaderValue::from_bytes(value) {
                builder = builder.header(*name, value);
            }
        }
        builder.body(self.body.clone()).ok()
    }

    /// The id the JSON-RPC answer must carry, when the request makes it certain: the
    /// Content-Type is plainly JSON and the body a JSON object.
    fn expected_rpc_id(&self) -> Option<Value> {
        let ct: Vec<&Bytes> = self
            .headers
            .iter()
            .filter(|(n, _)| *n == "content-type")
            .map(|(_, v)| v)
            .collect();
        if ct != [&Bytes::from_static(b"application/json")] {
            return None;
        }
        let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(&self.body) else {
            return None;
        };
        Some(match obj.get("id") {
            Some(Value::String(s)) => Value::String(s.clone()),
            Some(Value::Number(n)) => n.as_i64().map_or(Value::Null, Value::from),
            _ => Value::Null,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Binding {
    JsonRpc,
    Rest,
    Card,
}

/// Which binding answers, as `handle` routes (the JSON-RPC endpoint is `/`; a non-POST there
/// gets a REST-shaped 405).
fn binding(req: &Request<Bytes>) -> Binding {
    let path = req.uri().path();
    if path == AGENT_CARD_PATH {
        Binding::Card
    } else if path.trim_end_matches('/').is_empty() && req.method() == Method::POST {
        Binding::JsonRpc
    } else {
        Binding::Rest
    }
}

/// A response, read: the head, and the whole body or the first SSE frames.
struct Got {
    status: u16,
    headers: HeaderMap,
    body: Bytes,
    stream: bool,
}

impl Got {
    fn content_type(&self) -> &str {
        self.headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        text.chars().take(600).collect()
    }
}

async fn read(body: Body) -> (Bytes, bool) {
    match body {
        Body::Full(bytes) => (bytes, false),
        Body::Stream(mut stream) => {
            let mut buf = Vec::new();
            for _ in 0..MAX_FRAMES {
                match tokio::time::timeout(FRAME_WAIT, stream.next()).await {
                    Ok(Some(chunk)) => buf.extend_from_slice(&chunk),
                    Ok(None) | Err(_) => break,
                }
            }
            (Bytes::from(buf), true)
        }
    }
}

/// What every property records.
#[derive(Default)]
struct Stats {
    executions: AtomicU64,
    unbuildable: AtomicU64,
    slow: Mutex<Vec<String>>,
    outcomes: Mutex<BTreeMap<String, u64>>,
}

fn fail(what: impl Into<String>) -> TestCaseError {
    TestCaseError::fail(what.into())
}

fn ensure(ok: bool, what: impl FnOnce() -> String) -> Result<(), TestCaseError> {
    if ok { Ok(()) } else { Err(fail(what())) }
}

impl Fixture {
    fn worker_panics(&self) -> usize {
        let panics = WORKER_PANICS.lock().unwrap();
        panics.iter().filter(|t| **t == self.threads).count()
    }

    /// Sends one case and checks the response; the outcome label goes in the histogram.
    fn run_case(&self, stats: &Stats, case: &Case) -> Result<(), TestCaseError> {
        stats.executions.fetch_add(1, Ordering::Relaxed);
        let Some(req) = case.request() else {
            stats.unbuildable.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        };
        let binding = binding(&req);
        let panics = self.worker_panics();
        let started = Instant::now();
        let answered = self.rt.block_on(async {
            let resp = tokio::time::timeout(
                ANSWER_WITHIN,
                handle(&self.service, &self.http, req, Caller::anonymous()),
            )
            .await
            .ok()?;
            let (parts, body) = resp.into_parts();
            let (body, stream) = read(body).await;
            Some(Got {
                status: parts.status.as_u16(),
                headers: parts.headers,
                body,
                stream,
            })
        });
        let elapsed = started.elapsed();
        let got = answered.ok_or_else(|| fail(format!("no answer within {ANSWER_WITHIN:?}")))?;
        if elapsed > SLOW {
            stats
                .slow
                .lock()
                .unwrap()
                .push(format!("{elapsed:.1?}: {case:?}"));
        }
        let label = match binding {
            Binding::JsonRpc => check_jsonrpc(&got, case.expected_rpc_id().as_ref()),
            Binding::Rest => check_rest(&got),
            Binding::Card => check_card(&got),
        }
        .map_err(|e| {
            fail(format!(
                "{e}\n  status {}\n  body {}",
                got.status,
                got.text()
            ))
        })?;
        ensure(self.worker_panics() == panics, || {
            "a task the service spawned panicked while the case ran (see the output)".into()
        })?;
        *stats.outcomes.lock().unwrap().entry(label).or_default() += 1;
        Ok(())
    }
}

/// The label of a response too deep for serde_json's default recursion limit (128): the known
/// finding of `responses_to_deep_requests_stay_parseable`, counted, not failed.
const TOO_DEEP: &str = "KNOWN FINDING: deeper than serde_json's 128 levels";

/// A response document; `None` when it is nested too deep for serde_json to read (the server
/// wrote it with serde_json, so it is well-formed).
fn parse(bytes: &[u8], what: &str) -> Result<Option<Value>, TestCaseError> {
    match serde_json::from_slice(bytes) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => Ok(None),
        Err(e) => Err(fail(format!("{what} that is not JSON: {e}"))),
    }
}

/// The `data:` payloads of an SSE body (`None`: too deep); any other line must be a comment
/// or blank.
fn sse_events(got: &Got) -> Result<Vec<Option<Value>>, TestCaseError> {
    ensure(got.content_type() == "text/event-stream", || {
        format!("a stream with Content-Type {:?}", got.content_type())
    })?;
    let text =
        std::str::from_utf8(&got.body).map_err(|_| fail("an SSE stream that is not UTF-8"))?;
    let mut events = Vec::new();
    for line in text.lines() {
        if let Some(data) = line.strip_prefix("data:") {
            events.push(parse(data.trim_start().as_bytes(), "an SSE data line")?);
        } else {
            ensure(line.is_empty() || line.starts_with(':'), || {
                format!("an SSE line that is neither data, comment nor blank: {line:?}")
            })?;
        }
    }
    Ok(events)
}

/// `details` must hold an `ErrorInfo` of the A2A domain with a reason.
fn check_details(details: Option<&Value>) -> Result<(), TestCaseError> {
    let details = details
        .and_then(Value::as_array)
        .ok_or_else(|| fail("error details are not an array"))?;
    ensure(
        details.iter().any(|d| {
            d["@type"] == ERROR_INFO_TYPE
                && d["domain"] == PROTOCOL_DOMAIN
                && d["reason"].as_str().is_some_and(|r| !r.is_empty())
        }),
        || format!("no ErrorInfo detail in {details:?}"),
    )
}

/// One JSON-RPC response object.
fn check_rpc_object(v: &Value, id: Option<&Value>) -> Result<String, TestCaseError> {
    let obj = v
        .as_object()
        .ok_or_else(|| fail("a JSON-RPC response that is not an object"))?;
    ensure(obj.get("jsonrpc") == Some(&json!("2.0")), || {
        "jsonrpc is not \"2.0\"".into()
    })?;
    let got_id = obj.get("id").ok_or_else(|| fail("no id"))?;
    ensure(
        matches!(got_id, Value::Null | Value::String(_)) || got_id.as_i64().is_some(),
        || format!("id {got_id} is not a string, an integer or null"),
    )?;
    if let Some(id) = id {
        ensure(got_id == id, || format!("id {got_id} does not echo {id}"))?;
    }
    match (obj.get("result"), obj.get("error")) {
        (Some(_), None) => Ok("result".into()),
        (None, Some(err)) => {
            let code = err["code"]
                .as_i64()
                .ok_or_else(|| fail("error.code is not an integer"))?;
            ensure(JSONRPC_CODES.contains(&code), || {
                format!("error code {code} is not an A2A/JSON-RPC code")
            })?;
            let message = err["message"]
                .as_str()
                .ok_or_else(|| fail("error.message is not a string"))?;
            ensure(code != -32603 || message != "internal error", || {
                "FINDING: an internal error (HTTP 500 equivalent) for a client's request".into()
            })?;
            ensure(code != -32006, || {
                "FINDING: InvalidAgentResponse (HTTP 500 equivalent)".into()
            })?;
            if err.get("data").is_some() {
                check_details(err.get("data"))?;
            }
            let reason = err["data"][0]["reason"].as_str().unwrap_or("");
            Ok(format!("error {code} {reason}"))
        }
        _ => Err(fail("not exactly one of result and error")),
    }
}

fn check_jsonrpc(got: &Got, id: Option<&Value>) -> Result<String, TestCaseError> {
    if got.status == 429 {
        // The one JSON-RPC error that is not HTTP 200: a rate limit, with Retry-After.
        ensure(got.headers.contains_key(http::header::RETRY_AFTER), || {
            "a 429 without Retry-After".into()
        })?;
        let v =
            parse(&got.body, "a JSON-RPC 429 body")?.ok_or_else(|| fail("a 429 body too deep"))?;
        let label = check_rpc_object(&v, id)?;
        ensure(v["error"]["code"] == RATE_LIMITED, || {
            format!("HTTP 429 with error {}", v["error"])
        })?;
        return Ok(format!("rpc 429 {label}"));
    }
    ensure(got.status == 200, || {
        format!("JSON-RPC answered HTTP {}", got.status)
    })?;
    if got.stream {
        let events = sse_events(got)?;
        for event in &events {
            match event {
                Some(event) => check_rpc_object(event, id)?,
                None => return Ok(format!("rpc sse {TOO_DEEP}")),
            };
        }
        return Ok(format!("rpc sse ({} events)", events.len().min(3)));
    }
    ensure(got.content_type() == "application/json", || {
        format!("JSON-RPC Content-Type {:?}", got.content_type())
    })?;
    match parse(&got.body, "a JSON-RPC body")? {
        Some(v) => Ok(format!("rpc {}", check_rpc_object(&v, id)?)),
        None => Ok(format!("rpc {TOO_DEEP}")),
    }
}

/// `{"error": google.rpc.Status}`; `status` is the HTTP status it came with, if any.
fn check_rest_error(v: &Value, status: Option<u16>) -> Result<String, TestCaseError> {
    let err = v
        .get("error")
        .and_then(Value::as_object)
        .ok_or_else(|| fail("a REST error without an error object"))?;
    let code = err
        .get("code")
        .and_then(Value::as_u64)
        .ok_or_else(|| fail("error.code is not a number"))?;
    if let Some(status) = status {
        ensure(code == u64::from(status), || {
            format!("error.code {code} is not the HTTP status {status}")
        })?;
    }
    let name = err
        .get("status")
        .and_then(Value::as_str)
        .ok_or_else(|| fail("error.status is not a string"))?;
    ensure(
        ErrorKind::ALL.iter().any(|k| {
            let m = k.mapping();
            u64::from(m.http_status) == code && m.status == name
        }),
        || format!("({code}, {name}) is not a row of the error table"),
    )?;
    ensure(err.get("message").is_some_and(Value::is_string), || {
        "error.message is not a string".into()
    })?;
    check_details(err.get("details"))?;
    ensure(code != 500, || {
        "FINDING: HTTP 500 for a client's request".into()
    })?;
    let reason = err["details"][0]["reason"].as_str().unwrap_or("");
    Ok(format!("{code} {reason}"))
}

fn check_rest(got: &Got) -> Result<String, TestCaseError> {
    let status = got.status;
    ensure(status < 500 || status == 503, || {
        format!("FINDING: HTTP {status}")
    })?;
    if status >= 400 {
        ensure(got.content_type() == "application/json", || {
            format!("a REST error with Content-Type {:?}", got.content_type())
        })?;
        let v: Value = serde_json::from_slice(&got.body)
            .map_err(|e| fail(format!("a REST error body that is not JSON: {e}")))?;
        if status == 405 {
            ensure(got.headers.contains_key(ALLOW), || {
                "a 405 without Allow".into()
            })?;
        }
        return Ok(format!("rest {}", check_rest_error(&v, Some(status))?));
    }
    ensure(status == 200, || format!("REST answered HTTP {status}"))?;
    if got.stream {
        let events = sse_events(got)?;
        for event in &events {
            match event {
                Some(event) if event.get("error").is_some() => {
                    check_rest_error(event, None)?;
                }
                Some(event) => ensure(event.is_object(), || format!("a REST event {event}"))?,
                None => return Ok(format!("rest sse {TOO_DEEP}")),
            }
        }
        return Ok(format!("rest sse ({} events)", events.len().min(3)));
    }
    let negotiated = ["application/a2a+json", "application/json"];
    ensure(negotiated.contains(&got.content_type()), || {
        format!("a REST success with Content-Type {:?}", got.content_type())
    })?;
    match parse(&got.body, "a REST body")? {
        Some(v) => ensure(v.is_object(), || {
            "a REST result that is not an object".into()
        })?,
        None => return Ok(format!("rest 200 {TOO_DEEP}")),
    }
    Ok("rest 200".into())
}

fn check_card(got: &Got) -> Result<String, TestCaseError> {
    ensure(got.status < 500, || format!("FINDING: HTTP {}", got.status))?;
    if got.status == 200 && !got.body.is_empty() {
        serde_json::from_slice::<Value>(&got.body)
            .map_err(|e| fail(format!("an agent card that is not JSON: {e}")))?;
    }
    Ok(format!("card {}", got.status))
}

/// Runs one property: a fresh service, `PROPTEST_CASES` (default 256) cases, a summary.
fn fuzz<S>(name: &str, strategy: impl FnOnce(&Pools) -> S, to_case: impl Fn(S::Value) -> Case)
where
    S: Strategy,
{
    let fx = Fixture::new(name);
    let strategy = strategy(&fx.pools);
    let stats = Stats::default();
    let config = Config {
        // Findings are kept in this file by hand, not in proptest-regressions/.
        failure_persistence: None,
        ..Config::default()
    };
    let cases = config.cases;
    let mut runner = TestRunner::new(config);
    let started = Instant::now();
    let result = runner.run(&strategy, |value| fx.run_case(&stats, &to_case(value)));
    let elapsed = started.elapsed();
    let slow = stats.slow.lock().unwrap();
    let mut summary = format!(
        "fuzz {name}: {} executions ({cases} cases), {} unbuildable, {} slow (>{SLOW:?}), {elapsed:.1?}",
        stats.executions.load(Ordering::Relaxed),
        stats.unbuildable.load(Ordering::Relaxed),
        slow.len(),
    );
    for (outcome, n) in stats.outcomes.lock().unwrap().iter() {
        summary.push_str(&format!("\n    {n:>7}  {outcome}"));
    }
    for case in slow.iter().take(3) {
        summary.push_str(&format!("\n    slow: {case}"));
    }
    eprintln!("{summary}");
    if let Err(err) = result {
        panic!("{name}: {err}");
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies.

const STRINGS: &[&str] = &[
    "",
    " ",
    "ROLE_USER",
    "ROLE_AGENT",
    "ROLE_UNSPECIFIED",
    "user",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_UNSPECIFIED",
    "text/plain",
    "application/json",
    "image/png",
    "2026-01-31T12:00:00Z",
    "9999-12-31T23:59:59Z",
    "0000-01-01T00:00:00Z",
    "1970-01-01T00:00:00.000000001+23:59",
    "+275760-09-13T00:00:00Z",
    "dGNr",
    "***",
    "https://93.184.216.34/hook",
    "http://127.0.0.1/x",
    "https://[::1]/",
    "https://10.0.0.1/",
    "https://user:pw@93.184.216.34/",
    "https://[::ffff:127.0.0.1]/",
    "https://0.0.0.0/",
    "ftp://x",
    "not a url",
    "/model",
    "/model echo",
    "/model a b",
    "/effort high",
    "/effort",
    "/effort HIGH",
    "-1",
    "0",
    "2147483648",
    "1e3",
    "NaN",
    "true",
    "null",
    "fuzzer",
    "alice",
    "mallory",
    "participant_id",
    "task",
    "status_update",
    "artifact_update",
    "conversation",
    "delegated",
    "human",
    "agent",
    "admin",
    "watcher",
    "assignee",
    "reporter",
    "low",
    "high",
    "Bearer",
];

const KEYS: &[&str] = &[
    "message",
    "messageId",
    "role",
    "parts",
    "text",
    "raw",
    "url",
    "data",
    "mediaType",
    "filename",
    "metadata",
    "contextId",
    "taskId",
    "extensions",
    "referenceTaskIds",
    "configuration",
    "acceptedOutputModes",
    "historyLength",
    "returnImmediately",
    "taskPushNotificationConfig",
    "pushNotificationConfig",
    "tenant",
    "id",
    "pageSize",
    "pageToken",
    "status",
    "statusTimestampAfter",
    "includeArtifacts",
    "token",
    "authentication",
    "scheme",
    "credentials",
    "participant_id",
    "kind",
    "payload",
    "name",
    "description",
    "acceptance_criteria",
    "participants",
    "lifecycle",
    "model",
    "reasoning_effort",
    "display_name",
    "jsonrpc",
    "method",
    "params",
    "@type",
];

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn text(p: &Pools) -> BoxedStrategy<String> {
    prop_oneof![
        4 => "\\PC{0,16}",
        3 => select(strings(STRINGS)),
        2 => select(p.task_ids.clone()),
        1 => select(p.config_ids.clone()),
        1 => select(p.media_types.clone()),
        1 => "[\\x00-\\x1f\\x7f\\x{80}-\\x{9f}\\x{fffe}\\x{ffff}\\x{10ffff}]{1,4}",
        1 => "[a-z]{300,3000}",
    ]
    .boxed()
}

fn key() -> BoxedStrategy<String> {
    prop_oneof![4 => select(strings(KEYS)), 1 => "\\PC{0,8}"].boxed()
}

fn number() -> BoxedStrategy<Value> {
    prop_oneof![
        3 => any::<i64>().prop_map(Value::from),
        3 => (-3i64..=110).prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
        2 => select(vec![
            json!(0.5), json!(2.0), json!(-0.0), json!(1e10), json!(9.99e9), json!(1e308),
            json!(2147483647), json!(2147483648_i64), json!(-2147483648_i64),
            json!(-2147483649_i64), json!(u64::MAX), json!(i64::MIN),
        ]),
    ]
    .boxed()
}

fn leaf(p: &Pools) -> BoxedStrategy<Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        2 => number(),
        4 => text(p).prop_map(Value::String),
    ]
    .boxed()
}

/// Any JSON value, at most 4 levels deep, keys mostly A2A field names.
fn json_value(p: &Pools) -> BoxedStrategy<Value> {
    leaf(p)
        .prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..6).prop_map(Value::Array),
                vec((key(), inner), 0..6).prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
        .boxed()
}

fn object_of(fields: BoxedStrategy<(String, Value)>, max: usize) -> BoxedStrategy<Value> {
    vec(fields, 0..max)
        .prop_map(|kv| Value::Object(kv.into_iter().collect()))
        .boxed()
}

/// A JSON object with A2A field names and random values: params of any method.
fn params_object(p: &Pools) -> BoxedStrategy<Value> {
    object_of((key(), json_value(p)).boxed(), 7)
}

fn media_type(p: &Pools) -> BoxedStrategy<String> {
    let mut list = p.media_types.clone();
    list.extend(strings(&[
        "image/png",
        "text/plain; charset=utf-8",
        "TEXT/PLAIN",
        "",
    ]));
    prop_oneof![4 => select(list), 1 => text(p)].boxed()
}

fn media_containing(p: &Pools, needle: &str) -> String {
    p.media_types
        .iter()
        .find(|m| m.contains(needle))
        .cloned()
        .unwrap_or_else(|| needle.to_owned())
}

/// A task extension object for an envelope (new task or edit), valid-ish.
fn task_envelope(p: &Pools) -> BoxedStrategy<Value> {
    let participant = (
        select(strings(&["fuzzer", "alice", "mallory", ""])),
        select(strings(&["human", "agent", "robot"])),
        select(strings(&[
            "assignee", "reporter", "watcher", "admin", "boss",
        ])),
        option::of(text(p)),
    )
        .prop_map(|(id, kind, role, name)| {
            let mut v = json!({"id": id, "kind": kind, "role": role});
            if let Some(name) = name {
                v["display_name"] = Value::String(name);
            }
            v
        });
    let field = prop_oneof![
        link_field(p),
        text(p).prop_map(|t| ("name".to_owned(), Value::String(t))),
        text(p).prop_map(|t| ("description".to_owned(), Value::String(t))),
        vec(text(p), 0..3).prop_map(|v| ("acceptance_criteria".to_owned(), json!(v))),
        vec(participant, 0..3).prop_map(|v| ("participants".to_owned(), Value::Array(v))),
        select(strings(&["conversation", "delegated", "x"]))
            .prop_map(|l| ("lifecycle".to_owned(), Value::String(l))),
        select(strings(&["echo", "gpt"])).prop_map(|m| ("model".to_owned(), Value::String(m))),
        (key(), json_value(p)),
    ];
    object_of(field.boxed(), 5)
}

/// A task reference: to a task here (existing or not), or on another agent.
fn task_ref(p: &Pools) -> BoxedStrategy<Value> {
    let task_id =
        prop_oneof![3 => select(p.task_ids.clone()), 1 => text(p), 1 => id_beyond_limits()];
    let agent = prop_oneof![
        2 => Just(None),
        1 => Just(Some(Value::Null)),
        2 => select(strings(&["billing", "tiny-harness", ""]))
            .prop_map(|id| Some(json!({"kind": "agent", "id": id}))),
        1 => json_value(p).prop_map(Some),
    ];
    (
        task_id,
        agent,
        option::of(select(strings(&[
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED",
            "bogus",
        ]))),
    )
        .prop_map(|(task_id, agent, state)| {
            let mut r = json!({"task_id": task_id});
            if let Some(agent) = agent {
                r["agent"] = agent;
            }
            if let Some(state) = state {
                r["state"] = Value::String(state);
            }
            r
        })
        .boxed()
}

/// An envelope field that links tasks: `sub_tasks`, `parent_tasks`, or a plan whose steps
/// link tasks.
fn link_field(p: &Pools) -> BoxedStrategy<(String, Value)> {
    prop_oneof![
        vec(task_ref(p), 0..3).prop_map(|v| ("sub_tasks".to_owned(), Value::Array(v))),
        vec(task_ref(p), 0..3).prop_map(|v| ("parent_tasks".to_owned(), Value::Array(v))),
        vec(task_ref(p), 0..3).prop_map(|refs| {
            let steps = json!([{"id": "a", "name": "A"}, {"id": "b", "name": "B", "depends_on": ["a"],
                "linked_tasks": refs}]);
            ("plan".to_owned(), json!({"steps": steps}))
        }),
    ]
    .boxed()
}

/// An id no client may send: blank, over 256 bytes, or with a control character.
fn id_beyond_limits() -> BoxedStrategy<String> {
    prop_oneof![
        select(strings(&["", " ", "\t", " padded ", "a\nb", "nul\u{0}"])),
        "[a-z0-9-]{257,1200}",
        "\\PC{1,20}[\\x00-\\x1f][a-z]{0,5}",
    ]
    .boxed()
}

fn base64ish() -> BoxedStrategy<String> {
    prop_oneof![
        select(strings(&["dGNr", "", "AA==", "////", "=", "a", "dGNr\n"])),
        "[A-Za-z0-9+/]{0,24}={0,2}",
    ]
    .boxed()
}

fn with_media(mut part: Value, media: Option<String>) -> Value {
    if let Some(m) = media {
        part["mediaType"] = Value::String(m);
    }
    part
}

fn message_part(p: &Pools) -> BoxedStrategy<Value> {
    let task_mt = media_containing(p, "task+json");
    let event_mt = media_containing(p, "event+json");
    prop_oneof![
        10 => (text(p), option::weighted(0.15, media_type(p)))
            .prop_map(|(t, m)| with_media(json!({"text": t}), m)),
        1 => select(strings(&["/model", "/model echo", "/model a b", "/effort high", "/effort x", "/effort"]))
            .prop_map(|c| json!({"text": c})),
        1 => (base64ish(), option::of(media_type(p)), option::of(text(p)))
            .prop_map(|(raw, m, name)| {
                let mut part = with_media(json!({"raw": raw}), m);
                if let Some(name) = name {
                    part["filename"] = Value::String(name);
                }
                part
            }),
        1 => (text(p), option::of(media_type(p))).prop_map(|(u, m)| with_media(json!({"url": u}), m)),
        2 => (json_value(p), option::of(media_type(p))).prop_map(|(d, m)| with_media(json!({"data": d}), m)),
        1 => task_envelope(p).prop_map(move |d| json!({"data": d, "mediaType": task_mt})),
        1 => (select(strings(&["task", "status_update", "artifact_update", "bogus"])), task_envelope(p))
            .prop_map(move |(kind, payload)| {
                json!({"data": {"kind": kind, "payload": payload}, "mediaType": event_mt})
            }),
    ]
    .boxed()
}

fn message(p: &Pools) -> BoxedStrategy<Value> {
    (
        prop_oneof![
            6 => "[a-z0-9-]{8,16}",
            2 => select(strings(&["m1", "m2", "dup"])),
            2 => text(p),
            1 => id_beyond_limits(),
        ],
        prop_oneof![8 => Just(json!("ROLE_USER")), 1 => Just(json!("ROLE_AGENT")), 1 => leaf(p)],
        prop_oneof![4 => vec(message_part(p), 1..2), 1 => vec(message_part(p), 1..4)],
        option::weighted(0.2, text(p)),
        option::weighted(0.2, prop_oneof![3 => select(p.task_ids.clone()), 1 => text(p)]),
        option::weighted(
            0.3,
            prop_oneof![
                6 => select(strings(&["fuzzer", "alice", "mallory", "tiny-harness"])).prop_map(Value::String),
                2 => leaf(p),
                1 => id_beyond_limits().prop_map(Value::String),
            ],
        ),
    )
        .prop_map(|(id, role, parts, context, task, participant)| {
            let mut m = json!({"messageId": id, "role": role, "parts": parts});
            if let Some(c) = context {
                m["contextId"] = Value::String(c);
            }
            if let Some(t) = task {
                m["taskId"] = Value::String(t);
            }
            if let Some(who) = participant {
                m["metadata"] = json!({"participant_id": who});
            }
            m
        })
        .boxed()
}

fn push_config(p: &Pools) -> BoxedStrategy<Value> {
    (
        prop_oneof![3 => select(strings(&["https://93.184.216.34/hook", "https://10.0.0.1/", "http://127.0.0.1/x",
            "https://user:pw@93.184.216.34/", "https://[::1]/", "ftp://x", "not a url", ""])), 1 => text(p)],
        option::of(select(p.config_ids.clone())),
        option::of(text(p)),
        option::weighted(0.3, (text(p), option::of(text(p)))),
    )
        .prop_map(|(url, id, token, auth)| {
            let mut c = json!({"url": url});
            if let Some(id) = id {
                c["id"] = Value::String(id);
            }
            if let Some(token) = token {
                c["token"] = Value::String(token);
            }
            if let Some((scheme, credentials)) = auth {
                c["authentication"] = json!({"scheme": scheme, "credentials": credentials});
            }
            c
        })
        .boxed()
}

fn configuration(p: &Pools) -> BoxedStrategy<Value> {
    (
        option::weighted(
            0.3,
            prop_oneof![3 => (0i64..10).prop_map(Value::from), 1 => number()],
        ),
        option::weighted(0.6, any::<bool>()),
        option::weighted(0.2, vec(media_type(p), 0..3)),
        option::weighted(0.15, push_config(p)),
    )
        .prop_map(|(history, immediately, modes, push)| {
            let mut c = json!({});
            if let Some(h) = history {
                c["historyLength"] = h;
            }
            if let Some(i) = immediately {
                c["returnImmediately"] = Value::Bool(i);
            }
            if let Some(m) = modes {
                c["acceptedOutputModes"] = json!(m);
            }
            if let Some(push) = push {
                c["taskPushNotificationConfig"] = push;
            }
            c
        })
        .boxed()
}

/// A path into a JSON tree.
#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    At(usize),
}

fn paths(v: &Value, at: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                at.push(Seg::Key(k.clone()));
                out.push(at.clone());
                paths(child, at, out);
                at.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                at.push(Seg::At(i));
                out.push(at.clone());
                paths(child, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn at_mut<'v>(v: &'v mut Value, path: &[Seg]) -> Option<&'v mut Value> {
    path.iter().try_fold(v, |v, seg| match seg {
        Seg::Key(k) => v.get_mut(k.as_str()),
        Seg::At(i) => v.get_mut(*i),
    })
}

/// A change to a valid request: drop a member, replace it with anything, or bury it under
/// `depth` levels of nesting (around serde_json's recursion limit of 128).
#[derive(Debug, Clone)]
enum Mutation {
    Remove(Index),
    Replace(Index, Value),
    Deepen(Index, usize),
}

fn mutation(p: &Pools) -> BoxedStrategy<Mutation> {
    prop_oneof![
        2 => any::<Index>().prop_map(Mutation::Remove),
        4 => (any::<Index>(), json_value(p)).prop_map(|(i, v)| Mutation::Replace(i, v)),
        1 => (any::<Index>(), 110usize..128).prop_map(|(i, d)| Mutation::Deepen(i, d)),
    ]
    .boxed()
}

fn nested(depth: usize, inner: Value) -> Value {
    (0..depth).fold(inner, |v, i| {
        if i % 2 == 0 {
            Value::Array(vec![v])
        } else {
            json!({ "k": v })
        }
    })
}

fn mutate(mut v: Value, mutations: &[Mutation]) -> Value {
    for m in mutations {
        let mut all = Vec::new();
        paths(&v, &mut Vec::new(), &mut all);
        if all.is_empty() {
            break;
        }
        let (index, change) = match m {
            Mutation::Remove(i) => (i, None),
            Mutation::Replace(i, new) => (i, Some(new.clone())),
            Mutation::Deepen(i, depth) => (i, Some(nested(*depth, json!("deep")))),
        };
        let path = index.get(&all).clone();
        match change {
            Some(new) => {
                if let Some(slot) = at_mut(&mut v, &path) {
                    *slot = new;
                }
            }
            None => {
                let (last, parent) = path.split_last().expect("a path is never empty");
                match (at_mut(&mut v, parent), last) {
                    (Some(Value::Object(m)), Seg::Key(k)) => {
                        m.remove(k);
                    }
                    (Some(Value::Array(a)), Seg::At(i)) if *i < a.len() => {
                        a.remove(*i);
                    }
                    _ => {}
                }
            }
        }
    }
    v
}

const PARAM_KEYS: &[&str] = &[
    "id",
    "taskId",
    "historyLength",
    "pageSize",
    "pageToken",
    "contextId",
    "status",
    "statusTimestampAfter",
    "includeArtifacts",
    "tenant",
    "metadata",
    "url",
    "token",
    "authentication",
];

/// Params of the methods other than the sends: their own members, values often plausible
/// (existing ids, numbers, the query-style strings).
fn method_params(p: &Pools) -> BoxedStrategy<Value> {
    let value = prop_oneof![
        3 => select(p.task_ids.clone()).prop_map(Value::String),
        1 => select(p.config_ids.clone()).prop_map(Value::String),
        2 => number(),
        2 => leaf(p),
        1 => json_value(p),
    ];
    let field = (select(strings(PARAM_KEYS)), value);
    object_of(field.boxed(), 5)
}

/// SendMessage params: valid ones, then none to three mutations.
fn send_params(p: &Pools) -> BoxedStrategy<Value> {
    (
        message(p),
        option::weighted(0.5, configuration(p)),
        option::weighted(0.1, params_object(p)),
        option::weighted(0.1, text(p)),
        prop_oneof![3 => Just(Vec::new()), 1 => vec(mutation(p), 1..4)],
    )
        .prop_map(|(message, configuration, metadata, tenant, mutations)| {
            let mut params = json!({"message": message});
            if let Some(c) = configuration {
                params["configuration"] = c;
            }
            if let Some(m) = metadata {
                params["metadata"] = m;
            }
            if let Some(t) = tenant {
                params["tenant"] = Value::String(t);
            }
            mutate(params, &mutations)
        })
        .boxed()
}

/// Valid request bodies, the seeds of byte-level mutation.
fn jsonrpc_seeds(p: &Pools) -> Vec<Bytes> {
    let t = &p.task_ids[0];
    let calls = [
        (
            "SendMessage",
            json!({"message": {"messageId": "m-seed", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
                "configuration": {"returnImmediately": true, "historyLength": 2}}),
        ),
        (
            "SendStreamingMessage",
            json!({"message": {"messageId": "m-seed2", "role": "ROLE_USER", "taskId": t,
                "parts": [{"text": "again"}, {"data": {"k": [1, 2.5, null]}, "mediaType": "application/json"}]}}),
        ),
        ("GetTask", json!({"id": t, "historyLength": 3})),
        (
            "ListTasks",
            json!({"pageSize": 10, "status": "TASK_STATE_INPUT_REQUIRED",
            "statusTimestampAfter": "2026-01-31T12:00:00Z", "includeArtifacts": true}),
        ),
        ("CancelTask", json!({"id": t, "metadata": {"why": "fuzz"}})),
        ("SubscribeToTask", json!({"id": t})),
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": t, "url": "https://93.184.216.34/hook", "id": "c2",
            "authentication": {"scheme": "Bearer", "credentials": "s"}}),
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": t, "id": "cfg-1"}),
        ),
        (
            "ListTaskPushNotificationConfigs",
            json!({"taskId": t, "pageSize": 5}),
        ),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": t, "id": "c2"}),
        ),
        ("GetExtendedAgentCard", json!({})),
    ];
    calls
        .iter()
        .enumerate()
        .map(|(i, (method, params))| {
            let body = json!({"jsonrpc": "2.0", "id": i, "method": method, "params": params});
            Bytes::from(serde_json::to_vec(&body).unwrap())
        })
        .collect()
}

fn rest_seeds(p: &Pools) -> Vec<Bytes> {
    let t = &p.task_ids[0];
    [
        json!({"message": {"messageId": "r-seed", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "configuration": {"returnImmediately": true}}),
        json!({"message": {"messageId": "r-seed2", "role": "ROLE_USER", "taskId": t,
            "parts": [{"raw": "dGNr", "filename": "x.bin", "mediaType": "text/plain"}]}}),
        json!({"id": "x", "metadata": {}}),
        json!({"url": "https://93.184.216.34/hook", "id": "c3", "token": "tok"}),
        json!({}),
    ]
    .iter()
    .map(|v| Bytes::from(serde_json::to_vec(v).unwrap()))
    .collect()
}

/// Odd documents: deep nesting, huge numbers, lone surrogates, BOMs, duplicate keys.
fn special_bodies() -> Vec<Bytes> {
    let mut out: Vec<Bytes> = [
        "",
        " ",
        "null",
        "{}",
        "[]",
        "\"x\"",
        "1",
        "1e999999",
        "-0",
        "NaN",
        "\u{feff}{}",
        "{\"jsonrpc\":\"2.0\",\"id\":\"\\ud800\",\"method\":\"GetTask\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"GetTask\",\"method\":\"ListTasks\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":18446744073709551615,\"method\":\"ListTasks\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1.0,\"method\":\"ListTasks\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1e400,\"method\":\"ListTasks\"}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"ListTasks\",\"params\":{\"pageSize\":1e400}}",
        "{\"jsonrpc\":\"2.0\",\"method\":\"GetTask\",\"params\":{\"id\":\"a\\u0000b\"}}",
        "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ListTasks\"}]",
    ]
    .iter()
    .map(|s| Bytes::from(s.as_bytes().to_vec()))
    .collect();
    for depth in [127, 128, 129, 1000] {
        out.push(Bytes::from("[".repeat(depth)));
        let inner = serde_json::to_string(&nested(depth.min(140), json!(1))).unwrap();
        out.push(Bytes::from(format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ListTasks\",\"params\":{{\"x\":{inner}}}}}"
        )));
    }
    out
}

/// A byte-level change to a seed.
#[derive(Debug, Clone)]
enum ByteOp {
    Flip(Index, u8),
    Insert(Index, Vec<u8>),
    Delete(Index, usize),
    Truncate(Index),
    Duplicate(Index, usize),
}

const TOKENS: &[&str] = &[
    "null",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "1e400",
    "-0",
    "[]",
    "{}",
    "\"",
    "\\",
    ",",
    ":",
    "{",
    "}",
    "[",
    "]",
    "\u{0}",
    "\u{feff}",
    "9223372036854775808",
    "\"TASK_STATE_WORKING\"",
];

fn byte_op() -> BoxedStrategy<ByteOp> {
    prop_oneof![
        3 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| ByteOp::Flip(i, b)),
        3 => (any::<Index>(), prop_oneof![
            select(TOKENS).prop_map(|t| t.as_bytes().to_vec()),
            vec(any::<u8>(), 1..4),
        ]).prop_map(|(i, b)| ByteOp::Insert(i, b)),
        2 => (any::<Index>(), 1usize..8).prop_map(|(i, n)| ByteOp::Delete(i, n)),
        1 => any::<Index>().prop_map(ByteOp::Truncate),
        1 => (any::<Index>(), 1usize..16).prop_map(|(i, n)| ByteOp::Duplicate(i, n)),
    ]
    .boxed()
}

fn apply_bytes(seed: &[u8], ops: &[ByteOp]) -> Bytes {
    let mut b = seed.to_vec();
    for op in ops {
        let at = |i: &Index, len: usize| if len == 0 { 0 } else { i.index(len) };
        match op {
            ByteOp::Flip(i, x) if !b.is_empty() => {
                let k = at(i, b.len());
                b[k] = *x;
            }
            ByteOp::Flip(..) => {}
            ByteOp::Insert(i, bytes) => {
                let k = at(i, b.len() + 1);
                b.splice(k..k, bytes.iter().copied());
            }
            ByteOp::Delete(i, n) => {
                let k = at(i, b.len());
                let end = (k + n).min(b.len());
                b.drain(k..end);
            }
            ByteOp::Truncate(i) => {
                let k = at(i, b.len() + 1);
                b.truncate(k);
            }
            ByteOp::Duplicate(i, n) => {
                let k = at(i, b.len());
                let end = (k + n).min(b.len());
                let chunk = b[k..end].to_vec();
                b.splice(end..end, chunk);
            }
        }
    }
    Bytes::from(b)
}

/// Raw bodies: random bytes, random text, mutated seeds, odd documents.
fn raw_body(seeds: Vec<Bytes>) -> BoxedStrategy<Bytes> {
    prop_oneof![
        2 => vec(any::<u8>(), 0..512).prop_map(Bytes::from),
        1 => "\\PC{0,256}".prop_map(|s| Bytes::from(s.into_bytes())),
        5 => (select(seeds), vec(byte_op(), 1..4)).prop_map(|(seed, ops)| apply_bytes(&seed, &ops)),
        1 => select(special_bodies()),
    ]
    .boxed()
}

fn header_bytes() -> BoxedStrategy<Bytes> {
    vec(
        prop_oneof![8 => 0x20u8..0x7f, 1 => 0x80u8..=0xff, 1 => Just(b'\t')],
        0..24,
    )
    .prop_map(Bytes::from)
    .boxed()
}

fn from_list(list: &[&'static str]) -> BoxedStrategy<Bytes> {
    select(list.to_vec())
        .prop_map(|s| Bytes::from_static(s.as_bytes()))
        .boxed()
}

/// The service headers: mostly the ones that let a request through, sometimes odd ones.
fn headers(p: &Pools) -> BoxedStrategy<Vec<(&'static str, Bytes)>> {
    let version = prop_oneof![
        40 => Just(Bytes::from_static(b"1.0")),
        3 => from_list(&["1.0.0", "1.0.1", " 1.0 ", "0.3", "", "1", "1.1", "2.0", "1.0.", "1.0.x",
            "1.00", "1.0.99999999999999999999999", "1.0,1.0", "\t1.0"]),
        1 => header_bytes(),
    ];
    let mut uris = p.extensions.clone();
    uris.extend(strings(&["urn:x", "", " ", "https://example.com/ext"]));
    let extensions = prop_oneof![
        3 => (vec(select(p.extensions.clone()), 0..4), select(vec![",", ", ", " , ", ",,"]))
            .prop_map(|(list, sep)| Bytes::from(list.join(sep))),
        2 => (vec(select(uris), 0..4), select(vec![",", ", ", " , ", ",,"]))
            .prop_map(|(list, sep)| Bytes::from(list.join(sep))),
        1 => header_bytes(),
    ];
    let participant = prop_oneof![
        3 => from_list(&["fuzzer", "alice", "mallory", " ", "", " alice "]),
        1 => header_bytes(),
    ];
    let content_type = prop_oneof![
        40 => Just(Bytes::from_static(b"application/json")),
        4 => from_list(&["application/a2a+json", "application/json; charset=utf-8", "APPLICATION/JSON",
            "application/a2a+json;v=1", "text/plain", "application/jsonx", "", ";", "application/json;;",
            "multipart/form-data; boundary=x", "application/x-www-form-urlencoded", " application/json "]),
        1 => header_bytes(),
    ];
    (
        option::weighted(0.97, version),
        option::weighted(0.03, header_bytes()),
        option::weighted(0.15, extensions),
        option::weighted(0.2, participant),
        option::weighted(0.97, content_type),
    )
        .prop_map(|(version, version2, extensions, participant, ct)| {
            let mut h = Vec::new();
            if let Some(v) = version {
                h.push(("a2a-version", v));
            }
            if let Some(v) = version2 {
                h.push(("a2a-version", v));
            }
            if let Some(v) = extensions {
                h.push(("a2a-extensions", v));
            }
            if let Some(v) = participant {
                h.push(("x-participant-id", v));
            }
            if let Some(v) = ct {
                h.push(("content-type", v));
            }
            h
        })
        .boxed()
}

/// Characters escaped in a fuzzed path segment or query component when it is encoded.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}')
    .add(b'&')
    .add(b'=')
    .add(b'+');

/// A path segment: an existing id, something percent-encoded (both ways), or raw oddities.
fn segment(p: &Pools) -> BoxedStrategy<String> {
    prop_oneof![
        3 => select(p.task_ids.clone()),
        3 => text(p).prop_map(|s| utf8_percent_encode(&s, SEGMENT).to_string()),
        1 => text(p).prop_map(|s| utf8_percent_encode(&s, NON_ALPHANUMERIC).to_string()),
        2 => select(strings(&["%FF", "%", "%2", "%zz", "a%2Fb", "a%3Acancel", "x:cancel", "x:subscribe",
            ":cancel", ":", "", ".", "..", "tasks", "message:send", "%00", "%C3%28", "%E2%82", "acme",
            "a%20b", "pushNotificationConfigs", "t%2F..%2F.."])),
    ]
    .boxed()
}

/// A REST request line: a route with fuzzed ids and an optional tenant, mostly with a method
/// it allows; or random segments and any method.
fn rest_path(p: &Pools) -> BoxedStrategy<(Method, String)> {
    let (get, post, delete) = (Method::GET, Method::POST, Method::DELETE);
    let routes = select(vec![
        ("message:send", vec![post.clone()]),
        ("message:stream", vec![post.clone()]),
        ("tasks", vec![get.clone()]),
        ("extendedAgentCard", vec![get.clone()]),
        ("tasks/{id}", vec![get.clone()]),
        ("tasks/{id}:cancel", vec![post.clone()]),
        ("tasks/{id}:subscribe", vec![get.clone(), post.clone()]),
        (
            "tasks/{id}/pushNotificationConfigs",
            vec![get.clone(), post],
        ),
        (
            "tasks/{id}/pushNotificationConfigs/{cid}",
            vec![get.clone(), delete],
        ),
        (".well-known/agent-card.json", vec![get]),
    ]);
    let cid = prop_oneof![2 => select(p.config_ids.clone()), 1 => segment(p)];
    let routed = (
        option::weighted(0.25, segment(p)),
        routes,
        segment(p),
        cid,
        any::<bool>(),
        any::<Index>(),
        option::weighted(0.15, http_method()),
    )
        .prop_map(|(tenant, (route, allowed), id, cid, slash, pick, other)| {
            let method = other.unwrap_or_else(|| pick.get(&allowed).clone());
            let mut path = String::new();
            if let Some(t) = tenant {
                path.push('/');
                path.push_str(&t);
            }
            path.push('/');
            path.push_str(&route.replace("{id}", &id).replace("{cid}", &cid));
            if slash {
                path.push('/');
            }
            (method, path)
        });
    let random =
        (http_method(), vec(segment(p), 0..5), any::<bool>()).prop_map(|(method, segs, slash)| {
            let mut path = format!("/{}", segs.join("/"));
            if slash {
                path.push('/');
            }
            (method, path)
        });
    prop_oneof![4 => routed, 1 => random].boxed()
}

fn query(p: &Pools) -> BoxedStrategy<String> {
    let keys = prop_oneof![
        6 => select(strings(&["historyLength", "pageSize", "pageToken", "contextId", "status",
            "statusTimestampAfter", "includeArtifacts", "A2A-Version", "a2a-version", "tenant", "id"])),
        1 => text(p),
    ];
    let values = prop_oneof![
        4 => select(strings(&["0", "1", "-1", "100", "101", "2147483647", "2147483648", "-2147483649",
            " 5", "5 ", "1e2", "0x10", "true", "false", "TRUE", "yes", "TASK_STATE_WORKING", "3", "9",
            "TASK_STATE_UNSPECIFIED", "2026-01-31T12:00:00Z", "2026-13-45T99:99:99Z",
            "+275760-09-13T00:00:00Z", "1.0", ""])),
        2 => text(p),
        1 => select(p.task_ids.clone()),
    ];
    let pair = (keys, values, 0u8..4).prop_map(|(k, v, style)| {
        let enc = |s: &str| -> String {
            match style {
                0 => form_urlencoded::byte_serialize(s.as_bytes()).collect(),
                1 => utf8_percent_encode(s, NON_ALPHANUMERIC).to_string(),
                _ => utf8_percent_encode(s, SEGMENT).to_string(),
            }
        };
        if style == 3 && v.is_empty() {
            enc(&k)
        } else {
            format!("{}={}", enc(&k), enc(&v))
        }
    });
    prop_oneof![
        6 => vec(pair, 0..5).prop_map(|pairs| pairs.join("&")),
        1 => select(strings(&["", "&&", "=", "==1", "historyLength", "%", "%zz=1", "a=%FF", "+=+"])),
    ]
    .boxed()
}

fn with_query(path: String, q: Option<String>) -> String {
    match q {
        Some(q) => format!("{path}?{q}"),
        None => path,
    }
}

fn http_method() -> BoxedStrategy<Method> {
    prop_oneof![
        6 => Just(Method::POST),
        4 => Just(Method::GET),
        1 => Just(Method::DELETE),
        1 => select(vec![Method::PUT, Method::PATCH, Method::HEAD, Method::OPTIONS,
            Method::from_bytes(b"FUZZ").unwrap()]),
    ]
    .boxed()
}

/// A JSON-RPC request: envelope members each valid or not, params per method or random.
fn envelope(p: &Pools) -> BoxedStrategy<Value> {
    let absent = || Just(None::<Value>);
    let jsonrpc = prop_oneof![
        10 => Just(Some(json!("2.0"))),
        1 => absent(),
        1 => leaf(p).prop_map(Some),
    ];
    let id = prop_oneof![
        4 => any::<i64>().prop_map(|n| Some(json!(n))),
        3 => text(p).prop_map(|s| Some(json!(s))),
        1 => Just(Some(Value::Null)),
        1 => absent(),
        1 => json_value(p).prop_map(Some),
    ];
    let method = prop_oneof![
        12 => select(REAL_METHODS.to_vec()).prop_map(|m| Some(json!(m))),
        2 => select(vec!["message/send", "tasks/get", "sendMessage", "sendmessage", "SENDMESSAGE", "",
            " SendMessage", "SendMessage ", "GetTask\u{0}", "rpc.discover", "__proto__", "constructor"])
            .prop_map(|m| Some(json!(m))),
        1 => text(p).prop_map(|m| Some(json!(m))),
        1 => leaf(p).prop_map(Some),
        1 => absent(),
    ];
    let params = prop_oneof![
        4 => method_params(p).prop_map(Some),
        2 => params_object(p).prop_map(Some),
        4 => send_params(p).prop_map(Some),
        1 => json_value(p).prop_map(Some),
        1 => Just(Some(Value::Null)),
        1 => absent(),
    ];
    (
        jsonrpc,
        id,
        method,
        params,
        option::weighted(0.1, (key(), json_value(p))),
    )
        .prop_map(|(jsonrpc, id, method, params, extra)| {
            let mut obj = Map::new();
            if let Some((k, v)) = extra {
                obj.insert(k, v);
            }
            for (k, v) in [
                ("jsonrpc", jsonrpc),
                ("id", id),
                ("method", method),
                ("params", params),
            ] {
                if let Some(v) = v {
                    obj.insert(k.to_owned(), v);
                }
            }
            Value::Object(obj)
        })
        .boxed()
}

fn to_body(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap())
}

// ---------------------------------------------------------------------------------------------
// The properties.

/// JSON-RPC: any bytes POSTed to `/` as JSON with `A2A-Version: 1.0`.
#[test]
fn jsonrpc_raw_bodies() {
    fuzz(
        "jsonrpc_raw_bodies",
        |p| raw_body(jsonrpc_seeds(p)),
        |body| Case::post("/", body),
    );
}

/// REST: any bytes POSTed as JSON to the routes with bodies.
#[test]
fn rest_raw_bodies() {
    fuzz(
        "rest_raw_bodies",
        |p| {
            let task = p.task_ids[0].clone();
            let routes = vec![
                "/message:send".to_owned(),
                "/message:stream".to_owned(),
                "/tasks/x:cancel".to_owned(),
                "/tasks/x/pushNotificationConfigs".to_owned(),
                format!("/tasks/{task}:cancel"),
                format!("/tasks/{task}/pushNotificationConfigs"),
            ];
            (select(routes), raw_body(rest_seeds(p)))
        },
        |(uri, body)| Case::post(&uri, body),
    );
}

/// JSON-RPC: envelopes with random members and params, odd headers, a query now and then.
#[test]
fn jsonrpc_envelopes() {
    fuzz(
        "jsonrpc_envelopes",
        |p| {
            (
                envelope(p),
                headers(p),
                option::weighted(0.1, query(p)),
                select(vec!["/", "//", "/?"]),
                prop_oneof![12 => Just(Method::POST), 1 => http_method()],
            )
        },
        |(envelope, headers, query, path, method)| Case {
            method,
            uri: with_query(path.to_owned(), query),
            headers,
            body: to_body(&envelope),
        },
    );
}

/// REST: random paths (routes, tenants, encodings), methods, queries, headers and JSON bodies.
#[test]
fn rest_requests() {
    fuzz(
        "rest_requests",
        |p| {
            (
                rest_path(p),
                option::weighted(0.3, query(p)),
                headers(p),
                prop_oneof![
                    2 => method_params(p).prop_map(|v| to_body(&v)),
                    1 => params_object(p).prop_map(|v| to_body(&v)),
                    2 => send_params(p).prop_map(|v| to_body(&v)),
                    2 => json_value(p).prop_map(|v| to_body(&v)),
                    1 => Just(Bytes::new()),
                    1 => raw_body(rest_seeds(p)),
                ],
            )
        },
        |((method, path), query, headers, body)| Case {
            method,
            uri: with_query(path, query),
            headers,
            body,
        },
    );
}

/// REST reads: `GET /tasks` and `GET /tasks/{id}` with random query strings.
#[test]
fn rest_reads_with_queries() {
    fuzz(
        "rest_reads_with_queries",
        |p| {
            let path = prop_oneof![
                2 => Just("/tasks".to_owned()),
                2 => segment(p).prop_map(|id| format!("/tasks/{id}")),
                1 => (segment(p), prop_oneof![Just("tasks".to_owned()), segment(p).prop_map(|id| format!("tasks/{id}"))])
                    .prop_map(|(tenant, rest)| format!("/{tenant}/{rest}")),
            ];
            (path, query(p), headers(p))
        },
        |(path, query, headers)| Case {
            method: Method::GET,
            uri: with_query(path, Some(query)),
            headers,
            body: Bytes::new(),
        },
    );
}

/// Both bindings: SendMessage / SendStreamingMessage with valid params, then mutated.
#[test]
fn messages_near_valid() {
    fuzz(
        "messages_near_valid",
        |p| {
            (
                send_params(p),
                any::<bool>(),
                any::<bool>(),
                option::weighted(0.15, segment(p)),
                headers(p),
            )
        },
        |(params, rest, streaming, tenant, headers)| {
            if rest {
                let route = if streaming {
                    "message:stream"
                } else {
                    "message:send"
                };
                let path = match tenant {
                    Some(t) => format!("/{t}/{route}"),
                    None => format!("/{route}"),
                };
                Case {
                    method: Method::POST,
                    uri: path,
                    headers,
                    body: to_body(&params),
                }
            } else {
                let method = if streaming {
                    "SendStreamingMessage"
                } else {
                    "SendMessage"
                };
                let body =
                    json!({"jsonrpc": "2.0", "id": "n-1", "method": method, "params": params});
                Case {
                    method: Method::POST,
                    uri: "/".to_owned(),
                    headers,
                    body: to_body(&body),
                }
            }
        },
    );
}

/// A new task's envelope that links a task on this service, or a message with an id beyond
/// the limits, is refused whole: -32602, no task created, the linked tasks untouched.
#[test]
fn links_and_ids_beyond_limits_are_refused_whole() {
    let fx = Fixture::new("refused_whole");
    let local_ref = (select(fx.pools.task_ids.clone()), any::<bool>()).prop_map(|(id, null)| {
        if null {
            json!({"task_id": id, "agent": null})
        } else {
            json!({"task_id": id})
        }
    });
    let with_link = (
        task_envelope(&fx.pools),
        local_ref,
        vec(task_ref(&fx.pools), 0..2),
        0..3usize,
    )
        .prop_map(|(mut env, local, mut others, at)| {
            if !env.is_object() {
                env = json!({});
            }
            env["name"] = json!("n");
            env["goal"] = json!("g");
            others.push(local);
            match at {
                0 => env["sub_tasks"] = Value::Array(others),
                1 => env["parent_tasks"] = Value::Array(others),
                _ => {
                    env["plan"] =
                        json!({"steps": [{"id": "a", "name": "A", "linked_tasks": others}]})
                }
            }
            json!({"messageId": "link", "role": "ROLE_USER", "parts": [
                {"text": "hi"},
                {"data": env, "mediaType": "application/vnd.tiny-harness.task+json"}]})
        });
    let with_bad_id = (id_beyond_limits(), 0..3usize).prop_map(|(bad, field)| {
        let mut m = json!({"messageId": "ids", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
        match field {
            0 => m["messageId"] = Value::String(bad),
            // The binding reads an empty contextId as none (a new context), as A2A clients
            // send it.
            1 if bad.is_empty() => m["contextId"] = json!(" "),
            1 => m["contextId"] = Value::String(bad),
            _ => m["metadata"] = json!({"participant_id": bad}),
        }
        m
    });
    let strategy = prop_oneof![with_link, with_bad_id];
    let count = || {
        let listed = fx.rpc("ListTasks", json!({"pageSize": 100}), None);
        listed["totalSize"].as_i64().unwrap_or(-1)
    };
    let theirs = fx.pools.task_ids[1].clone();
    let snapshot = || fx.rpc("GetTask", json!({"id": theirs}), Some("alice"));
    let (tasks_before, theirs_before) = (count(), snapshot());
    let mut runner = TestRunner::new(Config {
        failure_persistence: None,
        ..Config::default()
    });
    let executions = AtomicU64::new(0);
    let result = runner.run(&strategy, |message| {
        executions.fetch_add(1, Ordering::Relaxed);
        let mut message = message;
        if message["messageId"] == "link" || message["messageId"] == "ids" {
            message["messageId"] = json!(uuid());
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": message}});
        let req = Case::post("/", to_body(&body)).request().unwrap();
        let resp = fx
            .rt
            .block_on(handle(&fx.service, &fx.http, req, Caller::anonymous()));
        let bytes = fx.rt.block_on(resp.into_body().collect());
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| fail(e.to_string()))?;
        ensure(v["error"]["code"] == -32602, || {
            format!("not refused with -32602: {v}\n  request: {body}")
        })
    });
    eprintln!(
        "fuzz links_and_ids_beyond_limits_are_refused_whole: {} executions",
        executions.load(Ordering::Relaxed)
    );
    if let Err(err) = result {
        panic!("{err}");
    }
    assert_eq!(count(), tasks_before, "no task was created");
    assert_eq!(snapshot(), theirs_before, "the linked task is untouched");
}

/// The checks themselves catch what they are meant to (a checker that accepts everything
/// would make every run above pass).
#[test]
fn the_checks_reject_findings() {
    let got = |status: u16, content_type: &'static str, body: Value| Got {
        status,
        headers: HeaderMap::from_iter([(CONTENT_TYPE, HeaderValue::from_static(content_type))]),
        body: to_body(&body),
        stream: false,
    };
    let info =
        json!([{"@type": ERROR_INFO_TYPE, "reason": "INTERNAL_ERROR", "domain": PROTOCOL_DOMAIN}]);
    let internal = json!({"error": {"code": 500, "status": "INTERNAL", "message": "internal error",
        "details": info}});
    assert!(check_rest(&got(500, "application/json", internal)).is_err());
    let rpc_internal = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603,
        "message": "internal error", "data": info}});
    assert!(check_jsonrpc(&got(200, "application/json", rpc_internal), None).is_err());
    let both =
        json!({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": -32602, "message": "x"}});
    assert!(check_jsonrpc(&got(200, "application/json", both), None).is_err());
    let ok = json!({"jsonrpc": "2.0", "id": 1, "result": {}});
    assert!(check_jsonrpc(&got(200, "application/json", ok.clone()), Some(&json!(1))).is_ok());
    assert!(check_jsonrpc(&got(200, "application/json", ok), Some(&json!(2))).is_err());
    // A 429 is a rate limit with Retry-After, or a finding.
    let limited = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000,
        "message": "rate limit exceeded; retry after 5 s", "data": [{"@type": ERROR_INFO_TYPE,
        "reason": "RATE_LIMITED", "domain": PROTOCOL_DOMAIN}]}});
    assert!(check_jsonrpc(&got(429, "application/json", limited.clone()), None).is_err());
    let mut with_retry = got(429, "application/json", limited);
    with_retry
        .headers
        .insert(http::header::RETRY_AFTER, HeaderValue::from_static("5"));
    assert!(check_jsonrpc(&with_retry, None).is_ok());
    let not_limited = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "x"}});
    let mut wrong = got(429, "application/json", not_limited);
    wrong
        .headers
        .insert(http::header::RETRY_AFTER, HeaderValue::from_static("5"));
    assert!(check_jsonrpc(&wrong, None).is_err());
    let no_info =
        json!({"error": {"code": 404, "status": "NOT_FOUND", "message": "x", "details": []}});
    assert!(check_rest(&got(404, "application/json", no_info)).is_err());
    let stream = Got {
        status: 200,
        headers: HeaderMap::from_iter([(
            CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        )]),
        body: Bytes::from_static(b": keep-alive\n\ndata: {\"task\": {}}\n\ndata: {oops\n\n"),
        stream: true,
    };
    assert!(check_rest(&stream).is_err());
}

// ---------------------------------------------------------------------------------------------
// Findings, kept as regression cases.

/// The deepest nesting of arrays and objects in a JSON document.
fn nesting(json: &[u8]) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0, false, false);
    for &b in json {
        match (in_string, escaped, b) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (true, false, b'"') => in_string = false,
            (true, false, _) => {}
            (false, _, b'"') => in_string = true,
            (false, _, b'[' | b'{') => {
                depth += 1;
                max = max.max(depth);
            }
            (false, _, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Regression (found by `messages_near_valid`): a message whose data part (or metadata) was
/// nested just under serde_json's default recursion limit (128) used to be accepted, and the
/// answer repeated it two levels deeper (`task.history[]`), past the limit, so no client
/// parsing with serde_json's defaults could read that task again. The service now refuses
/// message data nested deeper than 32 levels.
#[test]
fn responses_to_deep_requests_stay_parseable() {
    let fx = Fixture::new("deep");
    for binding in ["rest", "jsonrpc"] {
        let data = nested(122, json!("deep"));
        let params = json!({"message": {"messageId": format!("deep-{binding}"), "role": "ROLE_USER",
            "parts": [{"data": data}]}});
        let (uri, body) = if binding == "rest" {
            ("/message:send", params)
        } else {
            let body =
                json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params});
            ("/", body)
        };
        let body = to_body(&body);
        let req = Case::post(uri, body.clone()).request().unwrap();
        let resp = fx
            .rt
            .block_on(handle(&fx.service, &fx.http, req, Caller::anonymous()));
        let bytes = fx.rt.block_on(resp.into_body().collect());
        // The service refuses data nested this deep, so nothing unreadable is ever stored.
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("nests deeper than"), "{binding}: {text}");
        if let Err(e) = serde_json::from_slice::<Value>(&bytes) {
            panic!(
                "{binding}: a request {} levels deep was accepted; the response, {} levels deep, \
                 cannot be parsed: {e}",
                nesting(&body),
                nesting(&bytes)
            );
        }
    }
}
