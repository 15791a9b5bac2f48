//! The web console (issue 25): the bundle built from `console/src` (committed in
//! `console/dist/`) embedded in the binary, its settings as `/ui/config.json`, and one
//! function both hosts call to answer `/ui` and `/ui/…` (the local server, the `console`
//! Lambda function).

use std::sync::LazyLock;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// One file of the bundle.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

const ASSETS: [Asset; 3] = [
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        bytes: include_bytes!("../dist/index.html"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../dist/app.js"),
    },
    Asset {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../dist/app.css"),
    },
];

/// Scripts and styles from the console's own origin only; API calls to it and, for sign-in,
/// to the OIDC issuer (https); A2UI images from anywhere on https. Lit's and A2UI's styles
/// are set at run time, hence `'unsafe-inline'` for styles (never for scripts).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
    img-src 'self' https: data:; connect-src 'self' https:; base-uri 'none'; \
    form-action 'self'; frame-ancestors 'none'";

/// How the console's users say who they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Self-asserted: the user picks a participant id (sent as `X-Participant-Id`).
    None,
    /// A bearer JWT from the issuer the authorizer trusts (sign-in with PKCE, or pasted).
    Jwt,
}

/// What the console reads from `/ui/config.json`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsoleSettings {
    pub auth: AuthMode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// The model catalog's ids, for the `/model` picker (the A2A surface does not list them).
    pub models: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
}

/// The console, ready to serve: the settings rendered once.
#[derive(Debug, Clone)]
pub struct Console {
    config: Bytes,
    config_etag: String,
}

/// `"<first 16 bytes of the SHA-256, hex>"`.
fn etag(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

static ETAGS: LazyLock<Vec<String>> =
    LazyLock::new(|| ASSETS.iter().map(|a| etag(a.bytes)).collect());

/// Whether a request path is the console's (`/ui` or under `/ui/`).
pub fn is_console_path(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}

impl Console {
    pub fn new(settings: &ConsoleSettings) -> Self {
        // A struct of strings always serializes.
        let config = Bytes::from(serde_json::to_vec(settings).unwrap_or_default());
        let config_etag = etag(&config);
        Self {
            config,
            config_etag,
        }
    }

    /// The answer to a request for `path` (a console path, see [`is_console_path`]; `query`
    /// without its `?`).
    pub fn respond(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Response<Bytes> {
        if method != Method::GET && method != Method::HEAD {
            let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return response;
        }
        let Some(name) = path.strip_prefix("/ui/") else {
            // `/ui`: relative, so a deployed stage prefix (`/Prod/ui`) is kept.
            let mut response = plain(StatusCode::MOVED_PERMANENTLY, "see /ui/");
            response
                .headers_mut()
                .insert(header::LOCATION, HeaderValue::from_static("ui/"));
            return response;
        };
        let name = if name.is_empty() { "index.html" } else { name };
        let (body, content_type, tag, cache) = if name == "config.json" {
            (
                self.config.clone(),
                "application/json",
                self.config_etag.as_str(),
                "no-cache",
            )
        } else if let Some(i) = ASSETS.iter().position(|a| a.name == name) {
            let asset = &ASSETS[i];
            // index.html names the script and style by content hash (`?v=`): those URLs never
            // change meaning; everything else is revalidated.
            let versioned = query.is_some_and(|q| q.split('&').any(|p| p.starts_with("v=")));
            let cache = if versioned && name != "index.html" {
                "public, max-age=31536000, immutable"
            } else {
                "no-cache"
            };
            (
                Bytes::from_static(asset.bytes),
                asset.content_type,
                ETAGS.get(i).map_or("", String::as_str),
                cache,
            )
        } else {
            return plain(StatusCode::NOT_FOUND, "not found");
        };
        let fresh = headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim() == tag));
        let (status, body) = if fresh {
            (StatusCode::NOT_MODIFIED, Bytes::new())
        } else if method == Method::HEAD {
            (StatusCode::OK, Bytes::new())
        } else {
            (StatusCode::OK, body)
        };
        let mut response = Response::new(body);
        *response.status_mut() = status;
        let h = response.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
        if let Ok(tag) = HeaderValue::from_str(tag) {
            h.insert(header::ETAG, tag);
        }
        security_headers(h);
        response
    }
}

fn security_headers(h: &mut HeaderMap) {
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
}

fn plain(status: StatusCode, text: &'static str) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from_static(text.as_bytes()));
    *response.status_mut() = status;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    security_headers(h);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn console() -> Console {
        Console::new(&ConsoleSettings {
            auth: AuthMode::None,
            issuer: None,
            client_id: None,
            audience: None,
            models: vec!["demo".into(), "echo".into()],
            default_model: Some("demo".into()),
        })
    }

    fn get(path: &str, query: Option<&str>) -> Response<Bytes> {
        console().respond(&Method::GET, path, query, &HeaderMap::new())
    }

    fn header(r: &Response<Bytes>, name: header::HeaderName) -> &str {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    #[test]
    fn the_page_and_its_assets_have_their_types_and_caching() {
        let index = get("/ui/", None);
        assert_eq!(index.status(), StatusCode::OK);
        assert_eq!(
            header(&index, header::CONTENT_TYPE),
            "text/html; charset=utf-8"
        );
        assert_eq!(header(&index, header::CACHE_CONTROL), "no-cache");
        let html = String::from_utf8_lossy(index.body()).into_owned();
        assert!(html.contains("app.js?v="), "{html}");
        let script = get("/ui/app.js", Some("v=abc"));
        assert_eq!(
            header(&script, header::CONTENT_TYPE),
            "text/javascript; charset=utf-8"
        );
        assert!(header(&script, header::CACHE_CONTROL).contains("immutable"));
        assert_eq!(
            get("/ui/app.js", None).headers()[header::CACHE_CONTROL],
            "no-cache"
        );
        assert_eq!(
            get("/ui/app.css", None).headers()[header::CONTENT_TYPE],
            "text/css; charset=utf-8"
        );
        assert!(header(&index, header::CONTENT_SECURITY_POLICY).contains("script-src 'self'"));
        assert_eq!(get("/ui/nope.js", None).status(), StatusCode::NOT_FOUND);
        assert_eq!(
            get("/ui/../Cargo.toml", None).status(),
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn ui_without_its_slash_is_redirected_relatively() {
        let r = get("/ui", None);
        assert_eq!(r.status(), StatusCode::MOVED_PERMANENTLY);
        assert_eq!(header(&r, header::LOCATION), "ui/");
        assert!(is_console_path("/ui") && is_console_path("/ui/app.js"));
        assert!(!is_console_path("/uix") && !is_console_path("/tasks"));
    }

    #[test]
    fn config_json_holds_the_settings() {
        let r = get("/ui/config.json", None);
        assert_eq!(header(&r, header::CONTENT_TYPE), "application/json");
        let config: serde_json::Value = serde_json::from_slice(r.body()).unwrap_or_default();
        assert_eq!(
            config,
            serde_json::json!({"auth": "none", "models": ["demo", "echo"], "defaultModel": "demo"})
        );
    }

    #[test]
    fn a_known_etag_is_not_modified_and_other_methods_are_refused() {
        let first = get("/ui/app.css", None);
        let tag = first.headers()[header::ETAG].clone();
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_NONE_MATCH, tag);
        let again = console().respond(&Method::GET, "/ui/app.css", None, &headers);
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert!(again.body().is_empty());
        let head = console().respond(&Method::HEAD, "/ui/", None, &HeaderMap::new());
        assert_eq!(head.status(), StatusCode::OK);
        assert!(head.body().is_empty());
        let post = console().respond(&Method::POST, "/ui/", None, &HeaderMap::new());
        assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(header(&post, header::ALLOW), "GET, HEAD");
    }
}
