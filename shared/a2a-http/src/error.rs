//! The one mapping from an error to what each binding puts on the wire.
//!
//! Why one module: A2A requires the JSON-RPC and HTTP+JSON bindings to be functionally
//! equivalent, errors included. Every error a response can carry — a [`ServiceError`] or a
//! binding-level refusal (parse error, bad envelope, unknown method, content type, version,
//! extensions) — becomes a [`ProtocolError`] whose [`ErrorKind`] has exactly one row in
//! [`ErrorKind::mapping`]: JSON-RPC code, HTTP status, `google.rpc.ErrorInfo` reason and
//! `google.rpc.Code` name. The table follows the A2A v1.0.1 HTTP table (a2a-lf's
//! `A2AError::http_status_code`) except where noted on the variants.
//!
//! Nothing internal reaches a client: `Internal` always says "internal error" and
//! `Unavailable` a fixed sentence; details of a failure are logged where it happens.

use std::collections::{BTreeMap, HashMap};

use a2a::errordetails::{FieldViolation, PROTOCOL_DOMAIN, TypedDetail};
use a2a::{JsonRpcError, error_code};
use a2a_service::ServiceError;
use http::StatusCode;
use serde_json::{Value, json};

/// JSON-RPC code of [`ErrorKind::RateLimited`].
pub const RATE_LIMITED_CODE: i32 = -32000;

/// The kinds of error a response can carry, binding-level and service-level alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The body is not JSON (JSON-RPC -32700).
    ParseError,
    /// Not a valid JSON-RPC 2.0 request object (-32600).
    InvalidRequest,
    /// Unknown JSON-RPC method, or no REST route for the path. HTTP 404 (as the a2a-sdk does;
    /// a2a-lf says 501, which reads as "the server can't do this at all").
    MethodNotFound,
    /// A known REST path with the wrong HTTP method: 405 (REST only; -32601 if ever rendered
    /// as JSON-RPC).
    MethodNotAllowed,
    /// -32602, with `google.rpc.BadRequest` field violations where the field is known.
    InvalidParams,
    /// -32603, HTTP 500, message "internal error" only.
    Internal,
    /// The store is unavailable or throttled: -32603 like `Internal`, but HTTP 503 so REST
    /// clients and proxies know a retry may succeed.
    Unavailable,
    TaskNotFound,
    TaskNotCancelable,
    PushNotificationNotSupported,
    UnsupportedOperation,
    /// A part's media type the agent does not accept (-32005, HTTP 400 per v1.0.1).
    ContentTypeNotSupported,
    /// The request's own `Content-Type` is not one the binding can read: -32005, HTTP 415
    /// (v1.0.0 and the TCK; v1.0.1 says 400, but 415 is what HTTP means by it).
    RequestContentTypeNotSupported,
    InvalidAgentResponse,
    ExtendedAgentCardNotConfigured,
    ExtensionSupportRequired,
    VersionNotSupported,
    /// An authorizer is configured but the request carries no verified principal (a
    /// deployment mistake: the front door should have refused it). HTTP 401 on both
    /// bindings, since authentication is the transport's (A2A §13); -32600 if ever rendered
    /// as JSON-RPC.
    Unauthenticated,
    /// The caller or the task is over a rate limit: HTTP 429 with `Retry-After` on both
    /// bindings (JSON-RPC errors are otherwise HTTP 200), JSON-RPC -32000 (the JSON-RPC range
    /// for implementation-defined server errors, outside A2A's own -32001..), `google.rpc`
    /// `RESOURCE_EXHAUSTED`.
    RateLimited,
}

/// One row of the table: how an [`ErrorKind`] appears on each binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorMapping {
    /// `error.code` of a JSON-RPC error response.
    pub jsonrpc_code: i32,
    /// HTTP status of an HTTP+JSON error response (JSON-RPC answers 200 regardless).
    pub http_status: u16,
    /// `google.rpc.ErrorInfo.reason` (domain `a2a-protocol.org`).
    pub reason: &'static str,
    /// `google.rpc.Status.status` of an HTTP+JSON error body (the `google.rpc.Code` name).
    pub status: &'static str,
}

impl ErrorKind {
    /// Every kind, for tables and tests.
    pub const ALL: [ErrorKind; 19] = [
        ErrorKind::ParseError,
        ErrorKind::InvalidRequest,
        ErrorKind::MethodNotFound,
        ErrorKind::MethodNotAllowed,
        ErrorKind::InvalidParams,
        ErrorKind::Internal,
        ErrorKind::Unavailable,
        ErrorKind::TaskNotFound,
        ErrorKind::TaskNotCancelable,
        ErrorKind::PushNotificationNotSupported,
        ErrorKind::UnsupportedOperation,
        ErrorKind::ContentTypeNotSupported,
        ErrorKind::RequestContentTypeNotSupported,
        ErrorKind::InvalidAgentResponse,
        ErrorKind::ExtendedAgentCardNotConfigured,
        ErrorKind::ExtensionSupportRequired,
        ErrorKind::VersionNotSupported,
        ErrorKind::Unauthenticated,
        ErrorKind::RateLimited,
    ];

    /// The table.
    pub const fn mapping(self) -> ErrorMapping {
        const fn row(
            jsonrpc_code: i32,
            http_status: u16,
            reason: &'static str,
            status: &'static str,
        ) -> ErrorMapping {
            ErrorMapping {
                jsonrpc_code,
                http_status,
                reason,
                status,
            }
        }
        use error_code as c;
        match self {
            ErrorKind::ParseError => row(c::PARSE_ERROR, 400, "PARSE_ERROR", "INVALID_ARGUMENT"),
            ErrorKind::InvalidRequest => row(
                c::INVALID_REQUEST,
                400,
                "INVALID_REQUEST",
                "INVALID_ARGUMENT",
            ),
            ErrorKind::MethodNotFound => {
                row(c::METHOD_NOT_FOUND, 404, "METHOD_NOT_FOUND", "NOT_FOUND")
            }
            ErrorKind::MethodNotAllowed => row(
                c::METHOD_NOT_FOUND,
                405,
                "METHOD_NOT_ALLOWED",
                "UNIMPLEMENTED",
            ),
            ErrorKind::InvalidParams => {
                row(c::INVALID_PARAMS, 400, "INVALID_PARAMS", "INVALID_ARGUMENT")
            }
            ErrorKind::Internal => row(c::INTERNAL_ERROR, 500, "INTERNAL_ERROR", "INTERNAL"),
            ErrorKind::Unavailable => row(c::INTERNAL_ERROR, 503, "INTERNAL_ERROR", "UNAVAILABLE"),
            ErrorKind::TaskNotFound => row(c::TASK_NOT_FOUND, 404, "TASK_NOT_FOUND", "NOT_FOUND"),
            ErrorKind::TaskNotCancelable => row(
                c::TASK_NOT_CANCELABLE,
                400,
                "TASK_NOT_CANCELABLE",
                "FAILED_PRECONDITION",
            ),
            ErrorKind::PushNotificationNotSupported => row(
                c::PUSH_NOTIFICATION_NOT_SUPPORTED,
                400,
                "PUSH_NOTIFICATION_NOT_SUPPORTED",
                "FAILED_PRECONDITION",
            ),
            ErrorKind::UnsupportedOperation => row(
                c::UNSUPPORTED_OPERATION,
                400,
                "UNSUPPORTED_OPERATION",
                "FAILED_PRECONDITION",
            ),
            ErrorKind::ContentTypeNotSupported => row(
                c::CONTENT_TYPE_NOT_SUPPORTED,
                400,
                "CONTENT_TYPE_NOT_SUPPORTED",
                "INVALID_ARGUMENT",
            ),
            ErrorKind::RequestContentTypeNotSupported => row(
                c::CONTENT_TYPE_NOT_SUPPORTED,
                415,
                "CONTENT_TYPE_NOT_SUPPORTED",
                "INVALID_ARGUMENT",
            ),
            ErrorKind::InvalidAgentResponse => row(
                c::INVALID_AGENT_RESPONSE,
                500,
                "INVALID_AGENT_RESPONSE",
                "INTERNAL",
            ),
            ErrorKind::ExtendedAgentCardNotConfigured => row(
                c::EXTENDED_CARD_NOT_CONFIGURED,
                400,
                "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
                "FAILED_PRECONDITION",
            ),
            ErrorKind::ExtensionSupportRequired => row(
                c::EXTENSION_SUPPORT_REQUIRED,
                400,
                "EXTENSION_SUPPORT_REQUIRED",
                "FAILED_PRECONDITION",
            ),
            ErrorKind::VersionNotSupported => row(
                c::VERSION_NOT_SUPPORTED,
                400,
                "VERSION_NOT_SUPPORTED",
                "FAILED_PRECONDITION",
            ),
            ErrorKind::Unauthenticated => row(
                c::INVALID_REQUEST,
                401,
                "UNAUTHENTICATED",
                "UNAUTHENTICATED",
            ),
            ErrorKind::RateLimited => {
                row(RATE_LIMITED_CODE, 429, "RATE_LIMITED", "RESOURCE_EXHAUSTED")
            }
        }
    }
}

/// An error on its way to the client: its kind, a client-safe message, `ErrorInfo` metadata
/// and `BadRequest` field violations.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtocolError {
    pub kind: ErrorKind,
    pub message: String,
    /// `google.rpc.ErrorInfo.metadata` (string map; e.g. `taskId`).
    pub metadata: BTreeMap<String, String>,
    /// Rendered as one `google.rpc.BadRequest` detail when not empty.
    pub violations: Vec<FieldViolation>,
    /// Seconds for the `Retry-After` header (rate limits).
    pub retry_after_secs: Option<u64>,
}

impl ProtocolError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ProtocolError {
            kind,
            message: message.into(),
            metadata: BTreeMap::new(),
            violations: Vec::new(),
            retry_after_secs: None,
        }
    }

    /// Over a rate limit: 429 with `Retry-After: retry_after_secs` (at least 1).
    pub fn rate_limited(retry_after_secs: u64) -> Self {
        let secs = retry_after_secs.max(1);
        ProtocolError {
            retry_after_secs: Some(secs),
            ..ProtocolError::new(
                ErrorKind::RateLimited,
                format!("rate limit exceeded; retry after {secs} s"),
            )
            .with_metadata("retryAfterSeconds", secs.to_string())
        }
    }

    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    pub fn internal() -> Self {
        ProtocolError::new(ErrorKind::Internal, "internal error")
    }

    /// -32602 with field violations; the message lists them.
    pub fn invalid_params(violations: Vec<FieldViolation>) -> Self {
        let listed: Vec<String> = violations
            .iter()
            .map(|v| format!("{}: {}", v.field, v.description))
            .collect();
        let message = if listed.is_empty() {
            "invalid params".to_string()
        } else {
            format!("invalid params: {}", listed.join("; "))
        };
        ProtocolError {
            violations,
            ..ProtocolError::new(ErrorKind::InvalidParams, message)
        }
    }

    /// -32602 for one field.
    pub fn invalid_field(field: impl Into<String>, description: impl Into<String>) -> Self {
        ProtocolError::invalid_params(vec![FieldViolation {
            field: field.into(),
            description: description.into(),
        }])
    }

    /// The request's `Content-Type` cannot be read by the binding (-32005, HTTP 415).
    pub fn request_content_type(content_type: Option<&str>) -> Self {
        let shown = content_type.unwrap_or("none");
        ProtocolError::new(
            ErrorKind::RequestContentTypeNotSupported,
            format!("unsupported request Content-Type {shown:?}; use application/json or application/a2a+json"),
        )
        .with_metadata("contentType", shown)
    }

    pub fn mapping(&self) -> ErrorMapping {
        self.kind.mapping()
    }

    pub fn http_status(&self) -> StatusCode {
        StatusCode::from_u16(self.kind.mapping().http_status)
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The `ErrorInfo` detail, then a `BadRequest` detail if there are field violations.
    pub fn details(&self) -> Vec<TypedDetail> {
        let metadata: Option<HashMap<String, String>> = if self.metadata.is_empty() {
            None
        } else {
            Some(
                self.metadata
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
        };
        let mut details = vec![TypedDetail::error_info(
            self.kind.mapping().reason,
            PROTOCOL_DOMAIN,
            metadata,
        )];
        if !self.violations.is_empty() {
            details.push(TypedDetail::bad_request(self.violations.clone()));
        }
        details
    }

    fn details_json(&self) -> Value {
        Value::Array(
            self.details()
                .iter()
                .map(|d| serde_json::to_value(d).unwrap_or(Value::Null))
                .collect(),
        )
    }

    /// The JSON-RPC `error` object: code, message, `data` = the details array.
    pub fn to_jsonrpc_error(&self) -> JsonRpcError {
        JsonRpcError {
            code: self.kind.mapping().jsonrpc_code,
            message: self.message.clone(),
            data: Some(self.details_json()),
        }
    }

    /// The HTTP+JSON error body: `{"error": google.rpc.Status}`.
    pub fn to_rest_body(&self) -> Value {
        let m = self.kind.mapping();
        json!({
            "error": {
                "code": m.http_status,
                "status": m.status,
                "message": self.message,
                "details": self.details_json(),
            }
        })
    }
}

impl From<ServiceError> for ProtocolError {
    fn from(err: ServiceError) -> Self {
        match err {
            ServiceError::InvalidParams(message) => {
                ProtocolError::new(ErrorKind::InvalidParams, message)
            }
            ServiceError::TaskNotFound(task_id) => ProtocolError::new(
                ErrorKind::TaskNotFound,
                format!("task not found: {task_id}"),
            )
            .with_metadata("taskId", task_id),
            ServiceError::TaskNotCancelable(message) => {
                ProtocolError::new(ErrorKind::TaskNotCancelable, message)
            }
            ServiceError::UnsupportedOperation(message) => {
                ProtocolError::new(ErrorKind::UnsupportedOperation, message)
            }
            ServiceError::ContentTypeNotSupported(message) => {
                ProtocolError::new(ErrorKind::ContentTypeNotSupported, message)
            }
            ServiceError::ExtendedCardNotConfigured => ProtocolError::new(
                ErrorKind::ExtendedAgentCardNotConfigured,
                ServiceError::ExtendedCardNotConfigured.to_string(),
            ),
            ServiceError::Internal => ProtocolError::internal(),
            ServiceError::Unavailable => ProtocolError::new(
                ErrorKind::Unavailable,
                "the service is temporarily unavailable",
            ),
            ServiceError::RateLimited { retry_after_secs } => {
                ProtocolError::rate_limited(retry_after_secs)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a::A2AError;
    use a2a::errordetails::{BAD_REQUEST_TYPE, ERROR_INFO_TYPE};

    /// The table, spelled out: kind, JSON-RPC code, HTTP status, reason, google.rpc status.
    const TABLE: [(ErrorKind, i32, u16, &str, &str); 19] = [
        (
            ErrorKind::ParseError,
            -32700,
            400,
            "PARSE_ERROR",
            "INVALID_ARGUMENT",
        ),
        (
            ErrorKind::InvalidRequest,
            -32600,
            400,
            "INVALID_REQUEST",
            "INVALID_ARGUMENT",
        ),
        (
            ErrorKind::MethodNotFound,
            -32601,
            404,
            "METHOD_NOT_FOUND",
            "NOT_FOUND",
        ),
        (
            ErrorKind::MethodNotAllowed,
            -32601,
            405,
            "METHOD_NOT_ALLOWED",
            "UNIMPLEMENTED",
        ),
        (
            ErrorKind::InvalidParams,
            -32602,
            400,
            "INVALID_PARAMS",
            "INVALID_ARGUMENT",
        ),
        (
            ErrorKind::Internal,
            -32603,
            500,
            "INTERNAL_ERROR",
            "INTERNAL",
        ),
        (
            ErrorKind::Unavailable,
            -32603,
            503,
            "INTERNAL_ERROR",
            "UNAVAILABLE",
        ),
        (
            ErrorKind::TaskNotFound,
            -32001,
            404,
            "TASK_NOT_FOUND",
            "NOT_FOUND",
        ),
        (
            ErrorKind::TaskNotCancelable,
            -32002,
            400,
            "TASK_NOT_CANCELABLE",
            "FAILED_PRECONDITION",
        ),
        (
            ErrorKind::PushNotificationNotSupported,
            -32003,
            400,
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
            "FAILED_PRECONDITION",
        ),
        (
            ErrorKind::UnsupportedOperation,
            -32004,
            400,
            "UNSUPPORTED_OPERATION",
            "FAILED_PRECONDITION",
        ),
        (
            ErrorKind::ContentTypeNotSupported,
            -32005,
            400,
            "CONTENT_TYPE_NOT_SUPPORTED",
            "INVALID_ARGUMENT",
        ),
        (
            ErrorKind::RequestContentTypeNotSupported,
            -32005,
            415,
            "CONTENT_TYPE_NOT_SUPPORTED",
            "INVALID_ARGUMENT",
        ),
        (
            ErrorKind::InvalidAgentResponse,
            -32006,
            500,
            "INVALID_AGENT_RESPONSE",
            "INTERNAL",
        ),
        (
            ErrorKind::ExtendedAgentCardNotConfigured,
            -32007,
            400,
            "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            "FAILED_PRECONDITION",
        ),
        (
            ErrorKind::ExtensionSupportRequired,
            -32008,
            400,
            "EXTENSION_SUPPORT_REQUIRED",
            "FAILED_PRECONDITION",
        ),
        (
            ErrorKind::VersionNotSupported,
            -32009,
            400,
            "VERSION_NOT_SUPPORTED",
            "FAILED_PRECONDITION",
        ),
        (
            ErrorKind::Unauthenticated,
            -32600,
            401,
            "UNAUTHENTICATED",
            "UNAUTHENTICATED",
        ),
        (
            ErrorKind::RateLimited,
            -32000,
            429,
            "RATE_LIMITED",
            "RESOURCE_EXHAUSTED",
        ),
    ];

    #[test]
    fn the_table() {
        for (kind, code, http, reason, status) in TABLE {
            let m = kind.mapping();
            assert_eq!(
                (m.jsonrpc_code, m.http_status, m.reason, m.status),
                (code, http, reason, status),
                "{kind:?}"
            );
        }
        assert_eq!(TABLE.len(), ErrorKind::ALL.len());
        for kind in ErrorKind::ALL {
            assert!(
                TABLE.iter().any(|row| row.0 == kind),
                "{kind:?} missing from the table"
            );
        }
    }

    /// Where the table agrees with a2a-lf (v1.0.1 statuses, reasons) and where it deliberately
    /// differs.
    #[test]
    fn agrees_with_a2a_lf_except_the_documented_deviations() {
        let deviations = [
            ErrorKind::MethodNotFound,                 // a2a-lf: 501
            ErrorKind::MethodNotAllowed,               // REST-only, not in a2a-lf
            ErrorKind::Unavailable,                    // 503 instead of 500
            ErrorKind::RequestContentTypeNotSupported, // 415 instead of 400
            ErrorKind::Unauthenticated,                // transport-level, not in a2a-lf
            ErrorKind::RateLimited,                    // not an A2A error
        ];
        for kind in ErrorKind::ALL {
            let m = kind.mapping();
            let lf = A2AError::new(m.jsonrpc_code, "");
            if !deviations.contains(&kind) {
                assert_eq!(m.http_status, lf.http_status_code(), "{kind:?}");
            }
            if !matches!(
                kind,
                ErrorKind::MethodNotAllowed | ErrorKind::Unauthenticated | ErrorKind::RateLimited
            ) {
                assert_eq!(m.reason, a2a::error_reason(m.jsonrpc_code), "{kind:?}");
            }
        }
    }

    #[test]
    fn service_errors_map_one_to_one() {
        let cases = [
            (
                ServiceError::InvalidParams("bad".into()),
                ErrorKind::InvalidParams,
                "bad",
            ),
            (
                ServiceError::TaskNotFound("t1".into()),
                ErrorKind::TaskNotFound,
                "task not found: t1",
            ),
            (
                ServiceError::TaskNotCancelable("done".into()),
                ErrorKind::TaskNotCancelable,
                "done",
            ),
            (
                ServiceError::UnsupportedOperation("no".into()),
                ErrorKind::UnsupportedOperation,
                "no",
            ),
            (
                ServiceError::ContentTypeNotSupported("img".into()),
                ErrorKind::ContentTypeNotSupported,
                "img",
            ),
            (
                ServiceError::ExtendedCardNotConfigured,
                ErrorKind::ExtendedAgentCardNotConfigured,
                "the extended agent card is not configured",
            ),
            (
                ServiceError::Internal,
                ErrorKind::Internal,
                "internal error",
            ),
            (
                ServiceError::Unavailable,
                ErrorKind::Unavailable,
                "the service is temporarily unavailable",
            ),
            (
                ServiceError::RateLimited {
                    retry_after_secs: 7,
                },
                ErrorKind::RateLimited,
                "rate limit exceeded; retry after 7 s",
            ),
        ];
        for (err, kind, message) in cases {
            let p = ProtocolError::from(err);
            assert_eq!((p.kind, p.message.as_str()), (kind, message));
        }
        let p = ProtocolError::from(ServiceError::TaskNotFound("t1".into()));
        assert_eq!(p.metadata.get("taskId").map(String::as_str), Some("t1"));
        let p = ProtocolError::from(ServiceError::RateLimited {
            retry_after_secs: 0,
        });
        assert_eq!(p.retry_after_secs, Some(1), "Retry-After is never 0");
    }

    #[test]
    fn jsonrpc_error_carries_error_info_then_bad_request() {
        let err = ProtocolError::invalid_field("message.parts", "must contain at least one part");
        assert_eq!(
            err.message,
            "invalid params: message.parts: must contain at least one part"
        );
        let rpc = err.to_jsonrpc_error();
        assert_eq!(rpc.code, -32602);
        let data = rpc.data.unwrap();
        assert_eq!(data[0]["@type"], ERROR_INFO_TYPE);
        assert_eq!(data[0]["reason"], "INVALID_PARAMS");
        assert_eq!(data[0]["domain"], "a2a-protocol.org");
        assert_eq!(data[1]["@type"], BAD_REQUEST_TYPE);
        assert_eq!(data[1]["fieldViolations"][0]["field"], "message.parts");
    }

    #[test]
    fn rest_body_is_google_rpc_status() {
        let err = ProtocolError::from(ServiceError::TaskNotFound("t-9".into()));
        assert_eq!(err.http_status(), StatusCode::NOT_FOUND);
        let body = err.to_rest_body();
        assert_eq!(body["error"]["code"], 404);
        assert_eq!(body["error"]["status"], "NOT_FOUND");
        assert_eq!(body["error"]["message"], "task not found: t-9");
        assert_eq!(body["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(body["error"]["details"][0]["metadata"]["taskId"], "t-9");
        assert_eq!(body["error"]["details"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn internal_errors_say_nothing_more() {
        let body = ProtocolError::from(ServiceError::Internal).to_rest_body();
        assert_eq!(body["error"]["message"], "internal error");
        assert_eq!(body["error"]["code"], 500);
        assert!(body["error"]["details"][0].get("metadata").is_none());
    }
}
