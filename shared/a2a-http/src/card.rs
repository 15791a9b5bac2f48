//! The public agent card at `/.well-known/agent-card.json` (A2A §8.2), with HTTP caching.
//!
//! Why these headers: clients poll the card; `Cache-Control: public, max-age` and an `ETag`
//! with `If-None-Match` → 304 are the SHOULDs of §8.6.1 (TCK CARD-CACHE-*). The ETag is weak
//! (`W/"<sha-256 of the bytes>"`) because a CDN or API Gateway may re-encode the body. The card
//! is not an A2A method: no `A2A-Version` check.

use a2a::AgentCard;
use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use sha2::{Digest, Sha256};

use crate::HttpConfig;
use crate::body::Body;
use crate::error::{ErrorKind, ProtocolError};
use crate::reply;

/// Where the public agent card is served.
pub const AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";

/// The weak ETag of a body: `W/"<lowercase hex sha-256>"`.
pub(crate) fn etag(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(4 + digest.len() * 2);
    out.push_str("W/\"");
    for byte in digest.iter() {
        out.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(byte & 0x0f)]));
    }
    out.push('"');
    out
}

/// Whether `If-None-Match` matches the ETag (weak comparison, `*` matches anything).
fn not_modified(headers: &HeaderMap, etag: &str) -> bool {
    let opaque = |tag: &str| tag.trim().trim_start_matches("W/").to_string();
    let ours = opaque(etag);
    headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| tag.trim() == "*" || opaque(tag) == ours)
}

pub(crate) fn serve(card: &AgentCard, config: &HttpConfig, req: &Request<Bytes>) -> Response<Body> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply::method_not_allowed(
            &ProtocolError::new(
                ErrorKind::MethodNotAllowed,
                "the agent card is read with GET",
            ),
            "GET, HEAD",
        );
    }
    let bytes = match serde_json::to_vec(card) {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::error!(error = %e, "serializing the agent card failed");
            return reply::rest_error(&ProtocolError::internal());
        }
    };
    let tag = etag(&bytes);
    let cache_control = format!("public, max-age={}", config.card_max_age_secs);
    let (status, body) = if not_modified(req.headers(), &tag) {
        (StatusCode::NOT_MODIFIED, Body::empty())
    } else if req.method() == Method::HEAD {
        (StatusCode::OK, Body::empty())
    } else {
        (StatusCode::OK, Body::from(bytes))
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    if status == StatusCode::OK {
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static(reply::APPLICATION_JSON),
        );
    }
    if let Ok(value) = HeaderValue::from_str(&tag) {
        headers.insert(ETAG, value);
    }
    if let Ok(value) = HeaderValue::from_str(&cache_control) {
        headers.insert(CACHE_CONTROL, value);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_is_a_weak_sha256() {
        assert_eq!(
            etag(b""),
            "W/\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\""
        );
    }

    #[test]
    fn if_none_match_forms() {
        let tag = etag(b"card");
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(IF_NONE_MATCH, HeaderValue::from_str(v).unwrap());
            m
        };
        assert!(not_modified(&h(&tag), &tag));
        assert!(not_modified(&h(tag.trim_start_matches("W/")), &tag));
        assert!(not_modified(&h(&format!("\"other\", {tag}")), &tag));
        assert!(not_modified(&h("*"), &tag));
        assert!(!not_modified(&h("\"other\""), &tag));
        assert!(!not_modified(&HeaderMap::new(), &tag));
    }
}
