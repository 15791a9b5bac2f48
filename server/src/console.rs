//! The web console at `/ui/` (the `web-console` crate's bundle and settings), answered before
//! the A2A bindings see the request.

use a2a_http::Body;
use assembly::Settings;
use http::{Request, Response};
use web_console::{AuthMode, Console, ConsoleSettings};

/// The console of this server: identities are self-asserted here (`X-Participant-Id`), and
/// the `/model` picker lists the catalog the server was started with.
pub fn console(settings: &Settings) -> Console {
    let catalog = &settings.catalog;
    Console::new(&ConsoleSettings {
        auth: AuthMode::None,
        issuer: None,
        client_id: None,
        audience: None,
        models: catalog.models().iter().map(|m| m.id.clone()).collect(),
        default_model: Some(catalog.default_model().id.clone()),
    })
}

/// The console's answer to `request` when its path is the console's; `None` otherwise.
pub fn serve<B>(console: &Console, request: &Request<B>) -> Option<Response<Body>> {
    let uri = request.uri();
    if !web_console::is_console_path(uri.path()) {
        return None;
    }
    let response = console.respond(request.method(), uri.path(), uri.query(), request.headers());
    Some(response.map(Body::Full))
}
