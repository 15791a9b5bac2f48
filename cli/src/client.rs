//! The A2A client: the agent card, JSON-RPC calls, the SSE stream of SubscribeToTask, and
//! the errors mapped to plain words and exit codes.

use a2a::jsonrpc::methods;
use futures::{Stream, StreamExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::args::Global;

pub const TASK_EXTENSION_URI: &str =
    "https://madarauchiha-314.github.io/tiny-harness/a2a/ext/task/v1";

/// What went wrong, in words for stderr; the kind chooses the exit code.
#[derive(Debug)]
pub enum CliError {
    /// The command line asks for something impossible (exit 2, as clap's own errors).
    Usage(String),
    /// Not found, or refused by the server (exit 3).
    Refused(String),
    /// The server failed or could not be reached (exit 4).
    Failure(String),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Refused(_) => 3,
            CliError::Failure(_) => 4,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            CliError::Usage(m) | CliError::Refused(m) | CliError::Failure(m) => m,
        }
    }
}

/// A JSON-RPC error object in plain words (its message is the server's client-safe text).
fn rpc_error(error: &Value) -> CliError {
    let code = error["code"].as_i64().unwrap_or(0);
    let message = error["message"].as_str().unwrap_or("").trim();
    match code {
        -32001 => {
            CliError::Refused("task not found (or you are not one of its participants)".to_owned())
        }
        -32002 if message.is_empty() => CliError::Refused("the task cannot be canceled".to_owned()),
        -32002 => CliError::Refused(message.to_owned()),
        -32004 => CliError::Refused(format!(
            "not supported (a finished task takes no more messages): {message}"
        )),
        -32602 => CliError::Refused(format!("invalid request: {message}")),
        -32003 | -32099..=-32005 => CliError::Refused(format!("refused: {message}")),
        _ => CliError::Failure(format!("the server failed: {message}")),
    }
}

fn network_error(err: &reqwest::Error) -> CliError {
    if err.is_connect() {
        CliError::Failure("cannot reach the server (is it running? see --url)".to_owned())
    } else if err.is_timeout() {
        CliError::Failure("the server did not answer in time".to_owned())
    } else if err.is_decode() {
        CliError::Failure("the server's answer is not valid JSON".to_owned())
    } else {
        CliError::Failure("the connection to the server failed".to_owned())
    }
}

fn http_error(status: reqwest::StatusCode) -> CliError {
    match status.as_u16() {
        401 | 403 => CliError::Refused(format!("not authorized (HTTP {status}): check --token")),
        404 => CliError::Refused("not found (HTTP 404): is --url an A2A agent?".to_owned()),
        429 => CliError::Refused("too many requests (HTTP 429): try again later".to_owned()),
        _ if status.is_client_error() => {
            CliError::Refused(format!("the server refused the request (HTTP {status})"))
        }
        _ => CliError::Failure(format!("the server failed (HTTP {status})")),
    }
}

pub struct Client {
    http: reqwest::Client,
    base: String,
    pub participant: Option<String>,
    token: Option<String>,
    endpoint: Option<String>,
}

impl Client {
    pub fn new(global: &Global) -> Result<Self, CliError> {
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|_| CliError::Failure("cannot set up the HTTP client".to_owned()))?;
        Ok(Self {
            http,
            base: global.url.trim_end_matches('/').to_owned(),
            participant: global.participant.clone(),
            token: global.token.clone(),
            endpoint: None,
        })
    }

    fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        let mut req = self
            .http
            .request(method, url)
            .header(a2a::SVC_PARAM_VERSION, a2a::VERSION)
            .header(a2a::SVC_PARAM_EXTENSIONS, TASK_EXTENSION_URI);
        if let Some(p) = &self.participant {
            req = req.header("X-Participant-Id", p);
        }
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        req
    }

    /// The agent card at `<url>/.well-known/agent-card.json`.
    pub async fn card(&self) -> Result<Value, CliError> {
        let url = format!("{}/.well-known/agent-card.json", self.base);
        let resp = self
            .request(reqwest::Method::GET, &url)
            .send()
            .await
            .map_err(|e| network_error(&e))?;
        if !resp.status().is_success() {
            return Err(http_error(resp.status()));
        }
        resp.json().await.map_err(|e| network_error(&e))
    }

    /// The JSON-RPC URL the card names (read once).
    async fn endpoint(&mut self) -> Result<String, CliError> {
        if let Some(url) = &self.endpoint {
            return Ok(url.clone());
        }
        let card: a2a::AgentCard = checked(self.card().await?, "agent card")?;
        let url = card
            .supported_interfaces
            .into_iter()
            .find(|i| i.protocol_binding == a2a::TRANSPORT_PROTOCOL_JSONRPC)
            .map(|i| i.url)
            .ok_or_else(|| {
                CliError::Refused("the agent card names no JSON-RPC endpoint".to_owned())
            })?;
        self.endpoint = Some(url.clone());
        Ok(url)
    }

    fn body(method: &str, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": uuid::Uuid::new_v4().to_string(), "method": method, "params": params})
    }

    /// One JSON-RPC call: its `result`, or the error in plain words.
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value, CliError> {
        let url = self.endpoint().await?;
        let resp = self
            .request(reqwest::Method::POST, &url)
            .json(&Self::body(method, params))
            .send()
            .await
            .map_err(|e| network_error(&e))?;
        let status = resp.status();
        let body: Value = match resp.json().await {
            Ok(body) => body,
            Err(_) if !status.is_success() => return Err(http_error(status)),
            Err(e) => return Err(network_error(&e)),
        };
        if let Some(error) = body.get("error") {
            return Err(rpc_error(error));
        }
        if !status.is_success() {
            return Err(http_error(status));
        }
        body.get("result")
            .cloned()
            .ok_or_else(|| CliError::Failure("the server's answer has no result".to_owned()))
    }

    /// SubscribeToTask: each `StreamResponse` of the stream, until the server ends it.
    pub async fn subscribe(
        &mut self,
        task: &str,
    ) -> Result<impl Stream<Item = Result<Value, CliError>> + use<>, CliError> {
        let url = self.endpoint().await?;
        let resp = self
            .request(reqwest::Method::POST, &url)
            .header("Accept", "text/event-stream")
            .json(&Self::body(methods::SUBSCRIBE_TO_TASK, json!({"id": task})))
            .send()
            .await
            .map_err(|e| network_error(&e))?;
        let status = resp.status();
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            // An error comes back as one JSON-RPC answer.
            let body: Value = resp.json().await.map_err(|_| http_error(status))?;
            return Err(match body.get("error") {
                Some(error) => rpc_error(error),
                None => http_error(status),
            });
        }
        let frames = sse_frames(resp.bytes_stream());
        Ok(frames.map(|frame| {
            let frame = frame?;
            let value: Value = serde_json::from_str(&frame).map_err(|_| {
                CliError::Failure("the server sent an event that is not JSON".to_owned())
            })?;
            match value.get("error") {
                Some(error) => Err(rpc_error(error)),
                None => {
                    let event = value.get("result").cloned().unwrap_or(value);
                    checked::<a2a::StreamResponse>(event.clone(), "stream event").map(|_| event)
                }
            }
        }))
    }
}

/// `value` if it reads as the A2A object `T` (a server that answers otherwise is broken).
pub fn checked<T: DeserializeOwned>(value: Value, what: &str) -> Result<T, CliError> {
    serde_json::from_value(value)
        .map_err(|_| CliError::Failure(format!("the server's {what} is not a valid A2A object")))
}

/// The `data:` payloads of an SSE byte stream, one per event.
fn sse_frames(
    body: impl Stream<Item = reqwest::Result<bytes::Bytes>> + Send + 'static,
) -> impl Stream<Item = Result<String, CliError>> {
    futures::stream::unfold(
        (Box::pin(body), Vec::<u8>::new(), false),
        |(mut body, mut buffer, mut ended)| async move {
            loop {
                if let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
                    let frame: Vec<u8> = buffer.drain(..end + 2).collect();
                    let text = String::from_utf8_lossy(&frame).into_owned();
                    let data: Vec<&str> = text
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .map(|d| d.strip_prefix(' ').unwrap_or(d))
                        .collect();
                    if data.is_empty() {
                        continue; // a keep-alive comment
                    }
                    return Some((Ok(data.join("\n")), (body, buffer, ended)));
                }
                if ended {
                    return None;
                }
                match body.next().await {
                    // CR LF line ends are read as LF.
                    Some(Ok(chunk)) => buffer.extend(chunk.iter().filter(|b| **b != b'\r')),
                    Some(Err(e)) => return Some((Err(network_error(&e)), (body, buffer, true))),
                    None => {
                        // A last event without its blank line still counts.
                        ended = true;
                        buffer.extend_from_slice(b"\n\n");
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a2a_errors_map_to_words_and_exit_codes() {
        let error =
            |code: i64, message: &str| rpc_error(&json!({"code": code, "message": message}));
        assert_eq!(error(-32001, "Task not found: t-1").exit_code(), 3);
        assert_eq!(
            error(-32001, "x").message(),
            "task not found (or you are not one of its participants)"
        );
        assert_eq!(
            error(-32602, "no participant asserted").message(),
            "invalid request: no participant asserted"
        );
        assert_eq!(error(-32004, "terminal").exit_code(), 3);
        assert_eq!(
            error(-32002, "only a reporter").message(),
            "only a reporter"
        );
        assert_eq!(error(-32603, "internal error").exit_code(), 4);
        assert_eq!(error(-32700, "parse error").exit_code(), 4);
    }

    #[test]
    fn answers_that_are_not_a2a_objects_are_server_failures() {
        let bad = checked::<a2a::Task>(json!({"id": 1}), "task").unwrap_err();
        assert_eq!(bad.exit_code(), 4);
        assert_eq!(bad.message(), "the server's task is not a valid A2A object");
    }

    #[tokio::test]
    async fn sse_frames_skip_comments_and_read_crlf_and_split_chunks() {
        let chunks = [
            ": keep-alive\r\n\r\ndata: {\"a\":",
            "1}\r\n\r\ndata: {\"b\":2}\n\n",
            "data: 3",
        ];
        let body =
            futures::stream::iter(chunks.map(|c| Ok::<_, reqwest::Error>(bytes::Bytes::from(c))));
        let frames: Vec<String> = sse_frames(body)
            .map(|f| f.map_err(|e| e.message().to_owned()))
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(frames, ["{\"a\":1}", "{\"b\":2}", "3"]);
    }
}
