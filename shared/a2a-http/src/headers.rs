//! The service parameters every A2A method carries in HTTP headers, checked the same way for
//! both bindings before the service is called: `A2A-Version`, `A2A-Extensions`,
//! `X-Participant-Id`, and the request `Content-Type`.
//!
//! Why here and not in the service: these are properties of the HTTP exchange (a header, a
//! query parameter), and A2A wants them refused before anything is stored (an unknown extension
//! must not create a task).

use std::collections::BTreeSet;

use a2a::AgentCard;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderName};

use crate::error::{ErrorKind, ProtocolError};

/// The protocol version this binding speaks (Major.Minor; patch numbers are ignored).
pub const SUPPORTED_VERSION: &str = "1.0";
/// The version an absent or empty `A2A-Version` means (A2A §3.6).
const DEFAULT_VERSION: &str = "0.3";
// Looked up as `HeaderName`s: a `&str` is parsed and lower-cased again on every lookup.
pub(crate) const VERSION_HEADER: HeaderName = HeaderName::from_static("a2a-version");
pub(crate) const EXTENSIONS_HEADER: HeaderName = HeaderName::from_static("a2a-extensions");
pub(crate) const PARTICIPANT_HEADER: HeaderName = HeaderName::from_static("x-participant-id");
const TRACEPARENT: HeaderName = HeaderName::from_static(telemetry::traces::TRACEPARENT);
const TRACESTATE: HeaderName = HeaderName::from_static(telemetry::traces::TRACESTATE);

/// The `A2A-Version` the client asked for: the header, else the `A2A-Version` query parameter
/// (A2A §3.6.1; name matched case-insensitively), trimmed; `None` when absent or empty.
pub(crate) fn requested_version(headers: &HeaderMap, query: Option<&str>) -> Option<String> {
    let from_header = headers
        .get_all(VERSION_HEADER)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_string())
        .find(|v| !v.is_empty());
    from_header.or_else(|| {
        form_urlencoded::parse(query.unwrap_or("").as_bytes())
            .find(|(k, v)| k.eq_ignore_ascii_case(VERSION_HEADER.as_str()) && !v.trim().is_empty())
            .map(|(_, v)| v.trim().to_string())
    })
}

/// `1.0` and `1.0.<patch>` are accepted.
fn is_supported_version(version: &str) -> bool {
    match version.strip_prefix(SUPPORTED_VERSION) {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix('.')
            .is_some_and(|patch| !patch.is_empty() && patch.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}

/// Refuses any version but 1.0 with VersionNotSupported (-32009).
pub(crate) fn check_version(headers: &HeaderMap, query: Option<&str>) -> Result<(), ProtocolError> {
    match requested_version(headers, query) {
        Some(v) if is_supported_version(&v) => Ok(()),
        Some(v) => Err(ProtocolError::new(
            ErrorKind::VersionNotSupported,
            format!("A2A version {v:?} is not supported; this agent supports A2A {SUPPORTED_VERSION}"),
        )
        .with_metadata("requestedVersion", v)
        .with_metadata("supportedVersions", SUPPORTED_VERSION)),
        None => Err(ProtocolError::new(
            ErrorKind::VersionNotSupported,
            format!(
                "A2A version {DEFAULT_VERSION} is not supported (no A2A-Version header or query parameter means \
                 {DEFAULT_VERSION}); send A2A-Version: {SUPPORTED_VERSION}"
            ),
        )
        .with_metadata("requestedVersion", DEFAULT_VERSION)
        .with_metadata("supportedVersions", SUPPORTED_VERSION)),
    }
}

/// The extension URIs the client activated: every `A2A-Extensions` header line, split on
/// commas, trimmed, empties dropped, duplicates dropped (first occurrence kept).
pub(crate) fn requested_extensions(headers: &HeaderMap) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for value in headers.get_all(EXTENSIONS_HEADER) {
        for uri in String::from_utf8_lossy(value.as_bytes()).split(',') {
            let uri = uri.trim();
            if !uri.is_empty() && !out.iter().any(|u| u == uri) {
                out.push(uri.to_string());
            }
        }
    }
    out
}

/// Checks the activated extensions against the card: any URI the card does not declare is
/// UnsupportedOperation (-32004); a `required` extension the client did not activate is
/// ExtensionSupportRequired (-32008). Returns the activated ones, in the client's order.
pub(crate) fn activated_extensions(
    headers: &HeaderMap,
    card: &AgentCard,
) -> Result<Vec<String>, ProtocolError> {
    let requested = requested_extensions(headers);
    let declared = card.capabilities.extensions.as_deref().unwrap_or_default();
    let unknown: BTreeSet<&str> = requested
        .iter()
        .map(String::as_str)
        .filter(|uri| !declared.iter().any(|e| e.uri == *uri))
        .collect();
    refuse_extensions(
        ErrorKind::UnsupportedOperation,
        "unsupported A2A extension(s)",
        unknown,
    )?;
    let missing: BTreeSet<&str> = declared
        .iter()
        .filter(|e| e.required == Some(true) && !requested.contains(&e.uri))
        .map(|e| e.uri.as_str())
        .collect();
    refuse_extensions(
        ErrorKind::ExtensionSupportRequired,
        "the agent requires A2A extension(s) the request did not activate",
        missing,
    )?;
    Ok(requested)
}

/// Refuses a request over `uris` (none: no refusal), listing them comma-separated in the
/// message and the `extensions` metadata.
fn refuse_extensions(
    kind: ErrorKind,
    what: &str,
    uris: BTreeSet<&str>,
) -> Result<(), ProtocolError> {
    if uris.is_empty() {
        return Ok(());
    }
    let listed = uris.into_iter().collect::<Vec<_>>().join(",");
    Err(ProtocolError::new(kind, format!("{what}: {listed}")).with_metadata("extensions", listed))
}

/// `X-Participant-Id`, trimmed; `None` when absent or empty. A value that is not visible ASCII
/// is refused rather than ignored (ignoring it would silently change who the caller is).
pub(crate) fn participant_header(headers: &HeaderMap) -> Result<Option<String>, ProtocolError> {
    match headers.get(PARTICIPANT_HEADER) {
        None => Ok(None),
        Some(value) => match value.to_str() {
            Ok(v) if v.trim().is_empty() => Ok(None),
            Ok(v) => Ok(Some(v.trim().to_string())),
            Err(_) => Err(ProtocolError::invalid_field(
                "X-Participant-Id",
                "must be visible ASCII",
            )),
        },
    }
}

/// The W3C trace context of the request (`traceparent`, `tracestate`), if it carries a
/// well-formed one.
pub(crate) fn trace_context(headers: &HeaderMap) -> Option<telemetry::traces::TraceContext> {
    let parent = headers.get(TRACEPARENT)?.to_str().ok()?;
    let state = headers.get(TRACESTATE).and_then(|v| v.to_str().ok());
    telemetry::traces::TraceContext::from_w3c(parent, state)
}

/// The request's `Content-Type` header as sent (for error messages).
pub(crate) fn content_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get(CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// Whether the request body is declared as JSON the binding reads: `application/json` or
/// `application/a2a+json`, any parameters (`charset=utf-8`) allowed, case-insensitive.
pub(crate) fn is_json_content_type(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).is_some_and(|value| {
        let essence = value.as_bytes().split(|b| *b == b';').next().unwrap_or(b"");
        let essence = essence.trim_ascii();
        essence.eq_ignore_ascii_case(b"application/json")
            || essence.eq_ignore_ascii_case(b"application/a2a+json")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a::{AgentCapabilities, AgentExtension};
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    fn card(extensions: &[(&str, bool)]) -> AgentCard {
        let mut card = crate::testkit::card();
        card.capabilities = AgentCapabilities {
            extensions: Some(
                extensions
                    .iter()
                    .map(|(uri, required)| AgentExtension {
                        uri: uri.to_string(),
                        description: None,
                        required: Some(*required),
                        params: None,
                    })
                    .collect(),
            ),
            ..card.capabilities
        };
        card
    }

    #[test]
    fn version_rules() {
        for ok in ["1.0", " 1.0 ", "1.0.0", "1.0.1", "1.0.12"] {
            assert!(
                check_version(&headers(&[("a2a-version", ok)]), None).is_ok(),
                "{ok}"
            );
        }
        for bad in ["0.3", "99.0", "1", "1.1", "1.0.", "1.0.x", "1.00", "2.0"] {
            let err = check_version(&headers(&[("a2a-version", bad)]), None).unwrap_err();
            assert_eq!(err.kind, ErrorKind::VersionNotSupported, "{bad}");
            assert!(err.message.contains(bad.trim()), "{}", err.message);
        }
        for absent in [
            headers(&[]),
            headers(&[("a2a-version", "")]),
            headers(&[("a2a-version", "  ")]),
        ] {
            let err = check_version(&absent, None).unwrap_err();
            assert_eq!(err.kind, ErrorKind::VersionNotSupported);
            assert!(err.message.contains("0.3"), "{}", err.message);
        }
    }

    #[test]
    fn version_from_the_query_parameter() {
        assert!(check_version(&headers(&[]), Some("historyLength=1&A2A-Version=1.0")).is_ok());
        assert!(check_version(&headers(&[]), Some("a2a-version=1.0.3")).is_ok());
        assert!(check_version(&headers(&[]), Some("A2A-Version=0.3")).is_err());
        assert!(check_version(&headers(&[]), Some("A2A-Version=")).is_err());
        // The header wins over the query.
        assert!(
            check_version(&headers(&[("a2a-version", "1.0")]), Some("A2A-Version=9.9")).is_ok()
        );
    }

    #[test]
    fn extensions_are_split_trimmed_and_deduplicated() {
        let h = headers(&[
            ("a2a-extensions", " urn:a , ,urn:b"),
            ("a2a-extensions", "urn:a,urn:c,"),
        ]);
        assert_eq!(requested_extensions(&h), vec!["urn:a", "urn:b", "urn:c"]);
    }

    #[test]
    fn unknown_extensions_are_refused_sorted() {
        let card = card(&[("urn:a", false)]);
        let err = activated_extensions(
            &headers(&[("a2a-extensions", "urn:z, urn:a, urn:m")]),
            &card,
        )
        .unwrap_err();
        assert_eq!(err.kind, ErrorKind::UnsupportedOperation);
        assert_eq!(err.message, "unsupported A2A extension(s): urn:m,urn:z");
        assert_eq!(
            activated_extensions(&headers(&[("a2a-extensions", "urn:a")]), &card).unwrap(),
            vec!["urn:a"]
        );
        assert!(
            activated_extensions(&headers(&[]), &card)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn required_extensions_must_be_activated() {
        let card = card(&[("urn:req", true), ("urn:opt", false), ("urn:req2", true)]);
        let err =
            activated_extensions(&headers(&[("a2a-extensions", "urn:opt")]), &card).unwrap_err();
        assert_eq!(err.kind, ErrorKind::ExtensionSupportRequired);
        assert!(err.message.ends_with("urn:req,urn:req2"), "{}", err.message);
        let ok = activated_extensions(&headers(&[("a2a-extensions", "urn:req2,urn:req")]), &card)
            .unwrap();
        assert_eq!(ok, vec!["urn:req2", "urn:req"]);
    }

    #[test]
    fn participant_header_rules() {
        assert_eq!(participant_header(&headers(&[])).unwrap(), None);
        assert_eq!(
            participant_header(&headers(&[("x-participant-id", "  ")])).unwrap(),
            None
        );
        assert_eq!(
            participant_header(&headers(&[("x-participant-id", " alice ")])).unwrap(),
            Some("alice".into())
        );
        let mut h = HeaderMap::new();
        h.insert(
            "x-participant-id",
            HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap(),
        );
        assert_eq!(
            participant_header(&h).unwrap_err().kind,
            ErrorKind::InvalidParams
        );
    }

    #[test]
    fn content_types() {
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/a2a+json",
            "application/a2a+json;v=1",
        ] {
            assert!(
                is_json_content_type(&headers(&[("content-type", ok)])),
                "{ok}"
            );
        }
        for bad in [
            "text/plain",
            "application/jsonx",
            "application/x-www-form-urlencoded",
            "",
        ] {
            assert!(
                !is_json_content_type(&headers(&[("content-type", bad)])),
                "{bad}"
            );
        }
        assert!(!is_json_content_type(&headers(&[])));
    }
}
