//! The HTTP+JSON (REST) binding (A2A §11): routes per method, errors as `google.rpc.Status`.
//!
//! Why the route matching is hand-written: the paths use custom verbs (`/tasks/{id}:cancel`)
//! and an optional `/{tenant}` prefix, neither of which routers (axum, API Gateway) express
//! well, and the same table must work behind both. Path segments are split on `/` before they
//! are percent-decoded, and a custom verb is split off the raw segment, so ids may contain
//! encoded `/` and `:`. Path, query and body are merged into one JSON object and decoded by the
//! same code as JSON-RPC `params`, so both bindings validate alike.

use a2a_service::{A2aApi, RequestContext};
use bytes::Bytes;
use http::{HeaderMap, Method as HttpMethod, Request, Response};
use percent_encoding::percent_decode_str;
use serde_json::{Map, Value};

use crate::body::Body;
use crate::error::{ErrorKind, ProtocolError};
use crate::ops::{self, Method, Outcome};
use crate::sse::{self, Framing};
use crate::{Caller, HttpConfig, headers, params, reply};

/// A matched REST path (the method is checked separately so a wrong one can get 405).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    SendMessage,
    StreamMessage,
    ListTasks,
    ExtendedCard,
    Task(String),
    CancelTask(String),
    SubscribeTask(String),
    PushConfigs(String),
    PushConfig(String, String),
    Transcript(String),
    AuditLog(String),
}

impl Route {
    fn allow(&self) -> &'static str {
        match self {
            Route::SendMessage | Route::StreamMessage | Route::CancelTask(_) => "POST",
            Route::ListTasks
            | Route::ExtendedCard
            | Route::Task(_)
            | Route::Transcript(_)
            | Route::AuditLog(_) => "GET",
            Route::SubscribeTask(_) | Route::PushConfigs(_) => "GET, POST",
            Route::PushConfig(..) => "GET, DELETE",
        }
    }

    /// Whether some HTTP method of this route is `method` (a wrong HTTP method on a
    /// function's own route still gets its 405).
    /// Whether the route has a method (by any HTTP method) that `answered` accepts.
    fn serves_any(&self, answered: impl Fn(Method) -> bool) -> bool {
        [HttpMethod::GET, HttpMethod::POST, HttpMethod::DELETE]
            .iter()
            .any(|http| self.method(http).is_some_and(&answered))
    }

    fn method(&self, http: &HttpMethod) -> Option<Method> {
        let (get, post, delete) = (
            http == HttpMethod::GET,
            http == HttpMethod::POST,
            http == HttpMethod::DELETE,
        );
        Some(match self {
            Route::SendMessage if post => Method::SendMessage,
            Route::StreamMessage if post => Method::SendStreamingMessage,
            Route::ListTasks if get => Method::ListTasks,
            Route::ExtendedCard if get => Method::GetExtendedAgentCard,
            Route::Task(_) if get => Method::GetTask,
            Route::CancelTask(_) if post => Method::CancelTask,
            Route::SubscribeTask(_) if get || post => Method::SubscribeToTask,
            Route::PushConfigs(_) if get => Method::ListPushConfigs,
            Route::PushConfigs(_) if post => Method::CreatePushConfig,
            Route::PushConfig(..) if get => Method::GetPushConfig,
            Route::PushConfig(..) if delete => Method::DeletePushConfig,
            Route::Transcript(_) if get => Method::GetTaskTranscript,
            Route::AuditLog(_) if get => Method::GetTaskAuditLog,
            _ => return None,
        })
    }
}

fn decode_segment(raw: &str) -> Result<String, ProtocolError> {
    percent_decode_str(raw)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| {
            ProtocolError::invalid_field(
                "path",
                "a path segment is not valid percent-encoded UTF-8",
            )
        })
}

fn match_route(segments: &[&str]) -> Result<Option<Route>, ProtocolError> {
    Ok(Some(match segments {
        ["message:send"] => Route::SendMessage,
        ["message:stream"] => Route::StreamMessage,
        ["tasks"] => Route::ListTasks,
        ["extendedAgentCard"] => Route::ExtendedCard,
        ["tasks", raw] => {
            if let Some(id) = raw.strip_suffix(":cancel") {
                Route::CancelTask(decode_segment(id)?)
            } else if let Some(id) = raw.strip_suffix(":subscribe") {
                Route::SubscribeTask(decode_segment(id)?)
            } else {
                Route::Task(decode_segment(raw)?)
            }
        }
        ["tasks", id, "pushNotificationConfigs"] => Route::PushConfigs(decode_segment(id)?),
        ["tasks", id, "transcript"] => Route::Transcript(decode_segment(id)?),
        ["tasks", id, "auditLog"] => Route::AuditLog(decode_segment(id)?),
        ["tasks", id, "pushNotificationConfigs", config_id] => {
            Route::PushConfig(decode_segment(id)?, decode_segment(config_id)?)
        }
        _ => return Ok(None),
    }))
}

/// The route and the tenant (from an optional first path segment). A path that matches
/// without a tenant wins over one that matches with it.
fn resolve(path: &str, prefix: &str) -> Result<Option<(Route, Option<String>)>, ProtocolError> {
    let prefix = prefix.trim_end_matches('/');
    let Some(rest) = path.strip_prefix(prefix) else {
        return Ok(None);
    };
    // Clients that join a base URL ending in `/` with a path starting with one send `//`.
    let Some(rest) = rest.strip_prefix('/').map(|r| r.trim_start_matches('/')) else {
        return Ok(None);
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return Ok(None);
    }
    let segments: Vec<&str> = rest.split('/').collect();
    if let Some(route) = match_route(&segments)? {
        return Ok(Some((route, None)));
    }
    if let [tenant, tail @ ..] = segments.as_slice()
        && !tenant.is_empty()
        && !tail.is_empty()
        && let Some(route) = match_route(tail)?
    {
        return Ok(Some((route, Some(decode_segment(tenant)?))));
    }
    Ok(None)
}

/// The body of a POST as a JSON object: empty, `{}` and `null` all mean "no fields"; a body
/// with content must be declared JSON (else 415).
fn body_object(headers: &HeaderMap, body: &Bytes) -> Result<Map<String, Value>, ProtocolError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    if !headers::is_json_content_type(headers) {
        return Err(ProtocolError::request_content_type(
            headers::content_type(headers).as_deref(),
        ));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(obj)) => Ok(obj),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(_) => Err(ProtocolError::new(
            ErrorKind::InvalidRequest,
            "the request body must be a JSON object",
        )),
        Err(e) => Err(ProtocolError::new(
            ErrorKind::ParseError,
            format!("invalid JSON payload: {e}"),
        )),
    }
}

/// Puts a path parameter into the params; a body value that disagrees is refused.
fn merge_path_param(
    obj: &mut Map<String, Value>,
    key: &str,
    value: String,
) -> Result<(), ProtocolError> {
    match obj.get(key) {
        Some(Value::String(existing)) if !existing.is_empty() && *existing != value => {
            Err(ProtocolError::invalid_field(key, "must match the path"))
        }
        _ => {
            obj.insert(key.to_string(), Value::String(value));
            Ok(())
        }
    }
}

/// Copies the named query parameters (first occurrence) into the params, as strings; the
/// decoder reads numbers, booleans, enums and timestamps from strings.
fn copy_query(obj: &mut Map<String, Value>, query: Option<&str>, keys: &[&str]) {
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if keys.contains(&key.as_ref()) && !obj.contains_key(key.as_ref()) {
            obj.insert(key.into_owned(), Value::String(value.into_owned()));
        }
    }
}

fn build_params(
    route: Route,
    method: Method,
    mut body: Map<String, Value>,
    query: Option<&str>,
    tenant: Option<String>,
) -> Result<Map<String, Value>, ProtocolError> {
    let mut obj = match method {
        Method::SendMessage
        | Method::SendStreamingMessage
        | Method::CancelTask
        | Method::CreatePushConfig => body,
        Method::SubscribeToTask => {
            body.retain(|k, _| k == "id");
            body
        }
        _ => Map::new(),
    };
    match route {
        Route::SendMessage | Route::StreamMessage | Route::ExtendedCard => {}
        Route::ListTasks => copy_query(
            &mut obj,
            query,
            &[
                "contextId",
                "status",
                "pageSize",
                "pageToken",
                "historyLength",
                "statusTimestampAfter",
                "includeArtifacts",
            ],
        ),
        Route::Task(id) => {
            merge_path_param(&mut obj, "id", id)?;
            copy_query(&mut obj, query, &["historyLength"]);
        }
        Route::CancelTask(id) | Route::SubscribeTask(id) => merge_path_param(&mut obj, "id", id)?,
        Route::PushConfigs(task_id) => {
            merge_path_param(&mut obj, "taskId", task_id)?;
            if method == Method::ListPushConfigs {
                copy_query(&mut obj, query, &["pageSize", "pageToken"]);
            }
        }
        Route::PushConfig(task_id, config_id) => {
            merge_path_param(&mut obj, "taskId", task_id)?;
            merge_path_param(&mut obj, "id", config_id)?;
        }
        Route::Transcript(id) | Route::AuditLog(id) => {
            merge_path_param(&mut obj, "id", id)?;
            copy_query(&mut obj, query, &["pageSize", "pageToken"]);
        }
    }
    if let Some(tenant) = tenant {
        obj.insert("tenant".to_string(), Value::String(tenant));
    }
    Ok(obj)
}

pub(crate) async fn handle(
    api: &dyn A2aApi,
    config: &HttpConfig,
    req: Request<Bytes>,
    caller: &Caller,
) -> Response<Body> {
    let (route, tenant) = match resolve(req.uri().path(), &config.rest_prefix) {
        Ok(Some(found)) => found,
        Ok(None) => {
            let err = ProtocolError::new(
                ErrorKind::MethodNotFound,
                format!("no A2A route for {}", req.uri().path()),
            );
            return reply::rest_error(&err);
        }
        Err(err) => return reply::rest_error(&err),
    };
    let serves = config.serves;
    if !matches!(serves, crate::Serves::Everything) {
        // A function answers its own routes: another route here is a routing mistake.
        let answered = |m: Method| serves.answers_rest(m);
        if route.method(req.method()).is_some_and(|m| !answered(m))
            || (route.method(req.method()).is_none() && !route.serves_any(answered))
        {
            let err = ProtocolError::new(
                ErrorKind::MethodNotFound,
                format!("no A2A route for {} here", req.uri().path()),
            );
            return reply::rest_error(&err);
        }
    }
    let Some(method) = route.method(req.method()) else {
        let err = ProtocolError::new(
            ErrorKind::MethodNotAllowed,
            format!(
                "{} is not allowed here; use {}",
                req.method(),
                route.allow()
            ),
        );
        return reply::method_not_allowed(&err, route.allow());
    };
    let body = if req.method() == HttpMethod::POST {
        match body_object(req.headers(), req.body()) {
            Ok(body) => body,
            Err(err) => return reply::rest_error(&err),
        }
    } else {
        Map::new()
    };
    ops::preflight_and_call(
        api,
        method,
        "rest",
        &req,
        caller,
        reply::rest_error,
        async |ctx| {
            let success_type = reply::rest_success_type(req.headers());
            call(
                api,
                config,
                ctx,
                route,
                method,
                body,
                req.uri().query(),
                tenant,
                success_type,
            )
            .await
        },
    )
    .await
}

#[allow(clippy::too_many_arguments)]
async fn call(
    api: &dyn A2aApi,
    config: &HttpConfig,
    ctx: &RequestContext,
    route: Route,
    method: Method,
    body: Map<String, Value>,
    query: Option<&str>,
    tenant: Option<String>,
    success_type: &'static str,
) -> Result<Response<Body>, ProtocolError> {
    let params = build_params(route, method, body, query, tenant)?;
    let op = params::decode(method, &params)?;
    match ops::dispatch(api, ctx, op).await? {
        Outcome::Unary(result) => Ok(reply::rest_ok(&result, success_type)),
        Outcome::Stream(events) => Ok(reply::sse(
            sse::open(events, Framing::Rest, config.keep_alive).await?,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(path: &str) -> Option<(Route, Option<String>)> {
        resolve(path, "").unwrap()
    }

    #[test]
    fn route_table() {
        let t = |s: &str| Some(s.to_string());
        assert_eq!(route("/message:send"), Some((Route::SendMessage, None)));
        assert_eq!(route("/message:stream"), Some((Route::StreamMessage, None)));
        assert_eq!(route("/tasks"), Some((Route::ListTasks, None)));
        assert_eq!(route("/tasks/"), Some((Route::ListTasks, None)));
        assert_eq!(
            route("/extendedAgentCard"),
            Some((Route::ExtendedCard, None))
        );
        assert_eq!(route("/tasks/t1"), Some((Route::Task("t1".into()), None)));
        assert_eq!(
            route("/tasks/t1:cancel"),
            Some((Route::CancelTask("t1".into()), None))
        );
        assert_eq!(
            route("/tasks/t1:subscribe"),
            Some((Route::SubscribeTask("t1".into()), None))
        );
        assert_eq!(
            route("/tasks/t1/pushNotificationConfigs"),
            Some((Route::PushConfigs("t1".into()), None))
        );
        assert_eq!(
            route("/tasks/t1/pushNotificationConfigs/c1"),
            Some((Route::PushConfig("t1".into(), "c1".into()), None))
        );
        assert_eq!(
            route("/tasks/t1/transcript"),
            Some((Route::Transcript("t1".into()), None))
        );
        assert_eq!(
            route("/tasks/t1/auditLog"),
            Some((Route::AuditLog("t1".into()), None))
        );
        assert_eq!(
            route("/acme/tasks/t%2F1/auditLog"),
            Some((Route::AuditLog("t/1".into()), t("acme")))
        );
        assert_eq!(
            route("/acme/message:send"),
            Some((Route::SendMessage, t("acme")))
        );
        assert_eq!(
            route("/acme/tasks/t1:cancel"),
            Some((Route::CancelTask("t1".into()), t("acme")))
        );
        assert_eq!(route("/a%20b/tasks"), Some((Route::ListTasks, t("a b"))));
        // Without a tenant first: /tasks/tasks is GetTask("tasks").
        assert_eq!(
            route("/tasks/tasks"),
            Some((Route::Task("tasks".into()), None))
        );
        assert_eq!(
            route("/tasks/tasks/x"),
            Some((Route::Task("x".into()), t("tasks")))
        );
        for none in [
            "/",
            "",
            "/nope",
            "/tasks/a/b",
            "/tasks/a/transcripts",
            "/tasks/a/auditlog",
            "/tasks/a/transcript/1",
            "/acme/nope",
            "/a/b/tasks",
            "/message:send/x",
        ] {
            assert_eq!(route(none), None, "{none}");
        }
    }

    #[test]
    fn a_doubled_leading_slash_is_the_same_route() {
        // The card advertises `http://host/`; clients (the TCK's raw requests among them)
        // append `/message:send` to it. An empty first segment is never a tenant.
        let t = |s: &str| Some(s.to_string());
        assert_eq!(route("//message:send"), Some((Route::SendMessage, None)));
        assert_eq!(route("//tasks"), Some((Route::ListTasks, None)));
        assert_eq!(
            route("//acme/tasks/t1"),
            Some((Route::Task("t1".into()), t("acme")))
        );
        assert_eq!(
            resolve("/rest//tasks/t1:cancel", "/rest").unwrap(),
            Some((Route::CancelTask("t1".into()), None))
        );
        assert_eq!(route("//"), None);
        assert_eq!(route("/tasks//x"), None, "only leading slashes collapse");
    }

    #[test]
    fn ids_are_percent_decoded_after_splitting() {
        assert_eq!(
            route("/tasks/a%2Fb%3Ac"),
            Some((Route::Task("a/b:c".into()), None))
        );
        assert_eq!(
            route("/tasks/a%3Acancel:cancel"),
            Some((Route::CancelTask("a:cancel".into()), None))
        );
        assert_eq!(route("/tasks/a:b"), Some((Route::Task("a:b".into()), None)));
        assert_eq!(
            route("/tasks/t%20 1/pushNotificationConfigs/c%2B1"),
            Some((Route::PushConfig("t  1".into(), "c+1".into()), None))
        );
        assert!(resolve("/tasks/%FF", "").is_err());
    }

    #[test]
    fn prefix_is_stripped() {
        assert_eq!(
            resolve("/rest/tasks", "/rest").unwrap(),
            Some((Route::ListTasks, None))
        );
        assert_eq!(
            resolve("/rest/tasks", "/rest/").unwrap(),
            Some((Route::ListTasks, None))
        );
        assert_eq!(resolve("/tasks", "/rest").unwrap(), None);
        assert_eq!(resolve("/restx/tasks", "/rest").unwrap(), None);
    }

    #[test]
    fn methods_per_route() {
        use HttpMethod as H;
        let cases = [
            (Route::SendMessage, H::POST, Some(Method::SendMessage)),
            (Route::SendMessage, H::GET, None),
            (
                Route::StreamMessage,
                H::POST,
                Some(Method::SendStreamingMessage),
            ),
            (Route::ListTasks, H::GET, Some(Method::ListTasks)),
            (Route::ListTasks, H::POST, None),
            (
                Route::ExtendedCard,
                H::GET,
                Some(Method::GetExtendedAgentCard),
            ),
            (Route::Task("t".into()), H::GET, Some(Method::GetTask)),
            (Route::Task("t".into()), H::DELETE, None),
            (
                Route::CancelTask("t".into()),
                H::POST,
                Some(Method::CancelTask),
            ),
            (Route::CancelTask("t".into()), H::GET, None),
            (
                Route::SubscribeTask("t".into()),
                H::GET,
                Some(Method::SubscribeToTask),
            ),
            (
                Route::SubscribeTask("t".into()),
                H::POST,
                Some(Method::SubscribeToTask),
            ),
            (
                Route::PushConfigs("t".into()),
                H::GET,
                Some(Method::ListPushConfigs),
            ),
            (
                Route::PushConfigs("t".into()),
                H::POST,
                Some(Method::CreatePushConfig),
            ),
            (Route::PushConfigs("t".into()), H::PUT, None),
            (
                Route::PushConfig("t".into(), "c".into()),
                H::GET,
                Some(Method::GetPushConfig),
            ),
            (
                Route::PushConfig("t".into(), "c".into()),
                H::DELETE,
                Some(Method::DeletePushConfig),
            ),
            (Route::PushConfig("t".into(), "c".into()), H::POST, None),
            (
                Route::Transcript("t".into()),
                H::GET,
                Some(Method::GetTaskTranscript),
            ),
            (Route::Transcript("t".into()), H::POST, None),
            (
                Route::AuditLog("t".into()),
                H::GET,
                Some(Method::GetTaskAuditLog),
            ),
            (Route::AuditLog("t".into()), H::DELETE, None),
        ];
        for (route, http, expected) in cases {
            assert_eq!(route.method(&http), expected, "{route:?} {http}");
        }
    }
}
