//! An A2A error from either binding in one shape, and how each binding's answer is read as
//! a result or that error.

use serde_json::Value;

use crate::client::{Binding, Reply};

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

/// A JSON-RPC answer's `result`, or its `error`.
pub fn rpc_outcome(reply: &Reply) -> Result<Value, ApiError> {
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

/// A REST answer's document, or its `google.rpc.Status` error.
pub fn rest_outcome(reply: &Reply) -> Result<Value, ApiError> {
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

/// A call that must fail with a given A2A error.
pub trait Refused {
    /// The error, checked with [`ApiError::assert_is`]; fails the test with `why` if the
    /// call succeeded.
    fn refused(self, why: &str, code: i64, http_status: u16, reason: &str) -> ApiError;

    /// Refused as INVALID_PARAMS (JSON-RPC -32602, REST 400).
    fn refused_invalid_params(self, why: &str) -> ApiError
    where
        Self: Sized,
    {
        self.refused(why, -32602, 400, "INVALID_PARAMS")
    }

    /// Refused as TASK_NOT_FOUND (JSON-RPC -32001, REST 404).
    fn refused_not_found(self, why: &str) -> ApiError
    where
        Self: Sized,
    {
        self.refused(why, -32001, 404, "TASK_NOT_FOUND")
    }
}

impl<T: std::fmt::Debug> Refused for Result<T, ApiError> {
    fn refused(self, why: &str, code: i64, http_status: u16, reason: &str) -> ApiError {
        let err = self.expect_err(why);
        err.assert_is(code, http_status, reason);
        err
    }
}
