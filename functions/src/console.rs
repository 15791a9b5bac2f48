//! The `console` function: the web console (the `web-console` crate's embedded bundle) on
//! `GET /ui` and `GET /ui/{proxy+}`, with its settings read from the environment once. It
//! builds no AWS client: the page talks to the API itself, as the signed-in user.

use assembly::names;
use assembly::settings::{ConfigError, FromLookup, Settings, one_of};
use lambda_http::{Body, Request, Response, service_fn};
use web_console::{AuthMode, Console, ConsoleSettings};

/// `TH_CONSOLE_OIDC_CLIENT_ID`: the OIDC client the console signs users in with (template
/// parameter `ConsoleOidcClientId`); unset or empty: users paste a token.
pub const CONSOLE_OIDC_CLIENT_ID: &str = "TH_CONSOLE_OIDC_CLIENT_ID";

/// What `/ui/config.json` tells the page: `TH_AUTH_MODE` (`authorizer`: sign in against
/// `TH_JWT_ISSUER` for `TH_JWT_AUDIENCE`), the client id, and the catalog's model ids.
pub struct ConsoleConfig(pub ConsoleSettings);

impl FromLookup for ConsoleConfig {
    fn from_lookup(lookup: impl Fn(&'static str) -> Option<String>) -> Result<Self, ConfigError> {
        let settings = Settings::from_lookup(&lookup)?;
        let auth = one_of(
            &lookup,
            names::AUTH_MODE,
            [("none", AuthMode::None), ("authorizer", AuthMode::Jwt)],
            AuthMode::None,
        )?;
        let set = |name| lookup(name).filter(|v: &String| !v.trim().is_empty());
        let jwt = auth == AuthMode::Jwt;
        let catalog = &settings.catalog;
        Ok(Self(ConsoleSettings {
            auth,
            issuer: set(names::JWT_ISSUER).filter(|_| jwt),
            client_id: set(CONSOLE_OIDC_CLIENT_ID).filter(|_| jwt),
            audience: set(names::JWT_AUDIENCE).filter(|_| jwt),
            models: catalog.models().iter().map(|m| m.id.clone()).collect(),
            default_model: Some(catalog.default_model().id.clone()),
        }))
    }
}

/// The console's answer: the path from its `/ui` segment on, whatever stage prefix
/// API Gateway put in front of it.
pub fn respond(console: &Console, request: &Request) -> Response<Body> {
    let path = request.uri().path();
    let from = path
        .rfind("/ui/")
        .or_else(|| path.ends_with("/ui").then(|| path.len() - 3))
        .unwrap_or(0);
    let answer = console.respond(
        request.method(),
        &path[from..],
        request.uri().query(),
        request.headers(),
    );
    // Every asset is UTF-8 text, sent as such through API Gateway.
    answer.map(|bytes| Body::Text(String::from_utf8_lossy(&bytes).into_owned()))
}

/// The `main` of the console function.
pub async fn run_console() -> Result<(), lambda_runtime::Error> {
    crate::mains::init_tracing();
    let ConsoleConfig(settings) = ConsoleConfig::from_env()?;
    tracing::info!(auth = ?settings.auth, sign_in = settings.client_id.is_some(), "console ready");
    let console = Console::new(&settings);
    lambda_http::run(service_fn(|request: Request| {
        let answer = respond(&console, &request);
        async move { Ok::<_, std::convert::Infallible>(answer) }
    }))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use assembly::settings::lookup_from;

    fn read(pairs: &[(&'static str, &str)]) -> serde_json::Value {
        let ConsoleConfig(settings) =
            ConsoleConfig::from_lookup(lookup_from(pairs)).expect("valid");
        serde_json::to_value(settings).expect("json")
    }

    #[test]
    fn the_settings_follow_the_auth_mode() {
        let jwt = read(&[
            ("TH_AUTH_MODE", "authorizer"),
            ("TH_JWT_ISSUER", "https://issuer.example"),
            ("TH_JWT_AUDIENCE", "tiny-harness"),
            (CONSOLE_OIDC_CLIENT_ID, "console"),
        ]);
        assert_eq!(
            jwt,
            serde_json::json!({"auth": "jwt", "issuer": "https://issuer.example",
                "clientId": "console", "audience": "tiny-harness",
                "models": ["echo"], "defaultModel": "echo"})
        );
        let open = read(&[(CONSOLE_OIDC_CLIENT_ID, "console"), ("TH_JWT_ISSUER", "x")]);
        assert_eq!(
            open,
            serde_json::json!({"auth": "none", "models": ["echo"], "defaultModel": "echo"})
        );
        let no_client = read(&[("TH_AUTH_MODE", "authorizer"), (CONSOLE_OIDC_CLIENT_ID, "")]);
        assert!(no_client.get("clientId").is_none(), "{no_client}");
    }

    #[test]
    fn paths_are_read_from_their_ui_segment() {
        let console = Console::new(&ConsoleConfig::from_lookup(lookup_from(&[])).expect("ok").0);
        let get = |uri: &str| {
            let request = lambda_http::http::Request::builder()
                .uri(uri)
                .body(Body::Empty)
                .expect("request");
            respond(&console, &request)
        };
        assert_eq!(get("https://x/a2a/ui/").status(), 200);
        assert_eq!(get("https://x/a2a/ui/app.js?v=1").status(), 200);
        let redirect = get("https://x/a2a/ui");
        assert_eq!(redirect.status(), 301);
        assert_eq!(redirect.headers()["location"], "ui/");
        assert_eq!(get("https://x/ui/config.json").status(), 200);
        assert_eq!(get("https://x/a2a/ui/missing").status(), 404);
    }
}
