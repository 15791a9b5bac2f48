//! The `authorizer` function: an API Gateway REST API (v1) **TOKEN Lambda authorizer** that
//! verifies a bearer JWT from one issuer for one audience, so that a deployment can run with
//! `TH_AUTH_MODE=authorizer` and the token's verified subject as the participant (the functions
//! read it from `requestContext.authorizer.principalId`, see [`crate::identity`]).
//!
//! # Environment (read once, at init; a missing or malformed variable fails the init with a
//! message naming it)
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `TH_JWT_ISSUER` | (required) | the issuer: an `https` URL (`http` only on a loopback host, for tests); tokens must carry exactly this `iss` |
//! | `TH_JWT_AUDIENCE` | (required) | the audience: the token's `aud` (a string or an array) must contain it |
//! | `TH_JWT_JWKS_URL` | discovered | the issuer's JWKS; unset, the `jwks_uri` of `{issuer}/.well-known/openid-configuration` (a trailing `/` of the issuer is dropped first) |
//! | `TH_JWT_ALGORITHMS` | `RS256,ES256` | the signature algorithms accepted, separated by commas (`RS*`, `PS*`, `ES256`, `ES384`, `EdDSA`); `none` and the shared-secret `HS*` are refused |
//! | `TH_AGENT_ID` | `tiny-harness` | the service agent's participant id, as the other functions read it: a token whose `sub` is this id is refused |
//!
//! # Behaviour
//!
//! The event's `authorizationToken` must be `Bearer <jwt>` (the scheme in any case). The token
//! is accepted when its header's `alg` is one of `TH_JWT_ALGORITHMS`, its `kid` names a key of
//! the issuer's JWKS (whose own `alg` and `use`, where given, agree: `alg` the token's, `use`
//! `sig`) and its signature verifies with that key, `iss` is `TH_JWT_ISSUER`, `aud` contains
//! `TH_JWT_AUDIENCE`, `exp` is present and `exp`/`nbf` hold with [`LEEWAY_SECS`] (30 s) of leeway,
//! and `sub` is a non-empty string other than `TH_AGENT_ID` (the agent's id is reserved: a caller
//! acting as the agent would see every task). The answer is then an IAM policy allowing `execute-api:Invoke` on every
//! method and path of the stage the request came through, `arn:{partition}:execute-api:
//! {region}:{account}:{apiId}/{stage}/*/*` (derived from the event's `methodArn`, so that a
//! policy API Gateway caches for the token covers every route), with `principalId` = `sub`
//! and the context `{"sub": sub}`.
//!
//! API Gateway caches that answer per token for the template's `AuthorizerCacheSeconds` (at
//! most 60), so a token keeps working at most `LEEWAY_SECS` + that cache time (90 s with the
//! defaults) past its `exp`.
//!
//! A missing, malformed or refused token is answered with the error `Unauthorized` (exactly
//! that message: API Gateway then answers 401); why is logged at info, never the token. A JWKS
//! (or discovery document) that cannot be fetched is an error of another message, logged at
//! warn: API Gateway answers 500.
//!
//! The JWKS is fetched on the first request (not at init, whose time is bounded) and kept in
//! memory. A `kid` it lacks (a rotated key) triggers one refetch, at most once every 60 s, so
//! that tokens with made-up `kid`s cannot make the function hammer the issuer. Keys older than
//! an hour are refreshed on the next request (at most once every 60 s); if that refresh fails,
//! the cached keys go on being used. Fetches use rustls, time out after a few seconds and
//! follow redirects only to `https` (or loopback `http`) URLs.
//!
//! Only the REST API's TOKEN authorizer payload is read (`type`, `authorizationToken`,
//! `methodArn`); HTTP APIs have a JWT authorizer of their own.

use std::collections::HashMap;
use std::net::IpAddr;
use std::str::FromStr;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use lambda_http::aws_lambda_events::apigw::{
    ApiGatewayCustomAuthorizerPolicy, ApiGatewayCustomAuthorizerRequest,
    ApiGatewayCustomAuthorizerResponse,
};
use lambda_http::aws_lambda_events::iam::{IamPolicyEffect, IamPolicyStatement};
use lambda_runtime::Diagnostic;
use reqwest::Url;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::Mutex;

use assembly::names;

use crate::config::{ConfigError, FromLookup, invalid};

/// The algorithms accepted when `TH_JWT_ALGORITHMS` is unset.
pub const DEFAULT_ALGORITHMS: [Algorithm; 2] = [Algorithm::RS256, Algorithm::ES256];
/// Clock skew tolerated on `exp` and `nbf`, in seconds. Small, because it adds to API
/// Gateway's cache of the answer in how long a token works past its `exp` (issuers and Lambda
/// keep NTP time; 30 s covers ordinary skew).
pub const LEEWAY_SECS: u64 = 30;
/// The shortest time between two fetches of the JWKS caused by requests (an unknown `kid`, a
/// refresh of old keys).
pub const MIN_REFETCH_INTERVAL: Duration = Duration::from_secs(60);
/// How long fetched keys are used before the next request refreshes them.
pub const JWKS_MAX_AGE: Duration = Duration::from_secs(3600);
/// The whole of one fetch (discovery document or JWKS).
const FETCH_TIMEOUT: Duration = Duration::from_secs(4);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const MAX_REDIRECTS: usize = 5;

/// What the authorizer reads from its environment.
#[derive(Debug, Clone)]
pub struct AuthorizerConfig {
    /// `TH_JWT_ISSUER`: the `iss` tokens must carry, and the base of the discovery document.
    pub issuer: String,
    /// `TH_JWT_AUDIENCE`: the audience tokens' `aud` must contain.
    pub audience: String,
    /// `TH_JWT_JWKS_URL`: the JWKS (unset: discovered from the issuer).
    pub jwks_url: Option<Url>,
    /// `TH_JWT_ALGORITHMS`: the signature algorithms accepted (default RS256 and ES256).
    pub algorithms: Vec<Algorithm>,
    /// `TH_AGENT_ID`: the service agent's participant id (default as the functions'), which no
    /// token's subject may be.
    pub agent_id: String,
}

/// Whether `url` may be fetched: `https`, or `http` to a loopback host.
fn fetchable(url: &Url) -> bool {
    match url.scheme() {
        "https" => url.host_str().is_some_and(|h| !h.is_empty()),
        "http" => {
            let host = url
                .host_str()
                .unwrap_or_default()
                .trim_start_matches('[')
                .trim_end_matches(']');
            host.eq_ignore_ascii_case("localhost")
                || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
        }
        _ => false,
    }
}

fn fetchable_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    if fetchable(&url) {
        Ok(url)
    } else {
        Err(format!(
            "{text:?} is neither an https URL nor an http URL of a loopback host"
        ))
    }
}

/// `RS256,ES256`: known, asymmetric, each once, at least one.
fn parse_algorithms(list: &str) -> Result<Vec<Algorithm>, String> {
    let mut algorithms = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let algorithm = Algorithm::from_str(name)
            .map_err(|_| format!("{name:?} is not a JWS signature algorithm this accepts"))?;
        if algorithm.family() == AlgorithmFamily::Hmac {
            return Err(format!(
                "{name}: shared-secret (HMAC) algorithms are refused"
            ));
        }
        if !algorithms.contains(&algorithm) {
            algorithms.push(algorithm);
        }
    }
    if algorithms.is_empty() {
        return Err("names no algorithm".to_owned());
    }
    Ok(algorithms)
}

impl FromLookup for AuthorizerConfig {
    fn from_lookup(lookup: impl Fn(&'static str) -> Option<String>) -> Result<Self, ConfigError> {
        assembly::refuse_renamed(&lookup, |_| true)?;
        let read = |name| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let issuer =
            read(names::JWT_ISSUER).ok_or_else(|| invalid(names::JWT_ISSUER, "not set"))?;
        let issuer_url = fetchable_url(&issuer).map_err(|e| invalid(names::JWT_ISSUER, e))?;
        if issuer_url.query().is_some() || issuer_url.fragment().is_some() {
            return Err(invalid(
                names::JWT_ISSUER,
                "an issuer URL has no query and no fragment",
            ));
        }
        let audience =
            read(names::JWT_AUDIENCE).ok_or_else(|| invalid(names::JWT_AUDIENCE, "not set"))?;
        let jwks_url = read(names::JWT_JWKS_URL)
            .map(|url| fetchable_url(&url).map_err(|e| invalid(names::JWT_JWKS_URL, e)))
            .transpose()?;
        let algorithms = match read(names::JWT_ALGORITHMS) {
            None => DEFAULT_ALGORITHMS.to_vec(),
            Some(list) => parse_algorithms(&list).map_err(|e| invalid(names::JWT_ALGORITHMS, e))?,
        };
        // Read exactly as the functions read it (the assembly's settings), with the same default.
        let agent_id = assembly::settings::agent_id(&lookup);
        Ok(Self {
            issuer,
            audience,
            jwks_url,
            algorithms,
            agent_id,
        })
    }
}

impl AuthorizerConfig {
    /// `{issuer}/.well-known/openid-configuration` (OpenID Connect Discovery 1.0, section 4).
    pub fn discovery_url(&self) -> Result<Url, String> {
        let base = self.issuer.trim_end_matches('/');
        Url::parse(&format!("{base}/.well-known/openid-configuration"))
            .map_err(|e| format!("the discovery URL of {:?}: {e}", self.issuer))
    }
}

/// Why a request was not allowed.
#[derive(Debug, thiserror::Error)]
pub enum AuthorizerError {
    /// No token, or a token refused (the reason is for the log): API Gateway answers 401 to
    /// this error, whose message is exactly `Unauthorized`.
    #[error("Unauthorized")]
    Unauthorized(String),
    /// The issuer's keys could not be had: API Gateway answers 500.
    #[error("the issuer's keys are unavailable: {0}")]
    Jwks(String),
    /// Not a REST API TOKEN authorizer event (no usable `methodArn`): API Gateway answers 500.
    #[error("not an API Gateway authorizer event: {0}")]
    Event(String),
}

impl AuthorizerError {
    /// Whether this is the `Unauthorized` answer (401).
    pub fn is_unauthorized(&self) -> bool {
        matches!(self, Self::Unauthorized(_))
    }
}

fn unauthorized(reason: impl Into<String>) -> AuthorizerError {
    AuthorizerError::Unauthorized(reason.into())
}

impl From<AuthorizerError> for Diagnostic {
    fn from(error: AuthorizerError) -> Self {
        let error_type = match &error {
            AuthorizerError::Unauthorized(_) => "Unauthorized",
            AuthorizerError::Jwks(_) => "JwksUnavailable",
            AuthorizerError::Event(_) => "InvalidEvent",
        };
        Diagnostic {
            error_type: error_type.to_owned(),
            error_message: error.to_string(),
        }
    }
}

/// The token of `Bearer <token>` (the scheme in any case), if that is what the header holds.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim().split_once(char::is_whitespace)?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer")
        && !token.is_empty()
        && !token.contains(char::is_whitespace))
    .then_some(token)
}

/// Every method and path of the stage of `method_arn`:
/// `arn:{partition}:execute-api:{region}:{account}:{apiId}/{stage}/{METHOD}/{path}` becomes
/// `arn:{partition}:execute-api:{region}:{account}:{apiId}/{stage}/*/*`.
pub fn stage_resource(method_arn: &str) -> Option<String> {
    let mut fields = method_arn.splitn(6, ':');
    let (arn, partition, service, region, account, resource) = (
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
    );
    let mut path = resource.split('/');
    let (api, stage) = (path.next()?, path.next()?);
    let all_present = [partition, region, account, api, stage]
        .iter()
        .all(|f| !f.is_empty() && !f.contains('*'));
    (arn == "arn" && service == "execute-api" && all_present)
        .then(|| format!("arn:{partition}:execute-api:{region}:{account}:{api}/{stage}/*/*"))
}

/// The policy of an allowed token.
fn allow(subject: String, resource: String) -> ApiGatewayCustomAuthorizerResponse {
    let mut statement = IamPolicyStatement::default();
    statement.action = vec!["execute-api:Invoke".to_owned()];
    statement.effect = IamPolicyEffect::Allow;
    statement.resource = vec![resource];
    let mut policy = ApiGatewayCustomAuthorizerPolicy::default();
    policy.version = Some("2012-10-17".to_owned());
    policy.statement = vec![statement];
    let mut response = ApiGatewayCustomAuthorizerResponse::default();
    response.context = serde_json::json!({ "sub": subject });
    response.principal_id = Some(subject);
    response.policy_document = policy;
    response
}

/// The claims read beyond those the validation checks.
#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<String>,
}

#[derive(Deserialize)]
struct DiscoveryDocument {
    jwks_uri: String,
}

/// A JWKS, each key read on its own: a key this cannot read (another key type, an
/// encryption key's algorithm) is skipped instead of spoiling the set.
#[derive(Deserialize)]
struct JwksDocument {
    keys: Vec<Value>,
}

#[derive(Default)]
struct JwksCache {
    /// The JWKS URL: configured, or discovered on the first fetch.
    url: Option<Url>,
    /// The keys by `kid`.
    keys: HashMap<String, Jwk>,
    /// The last successful fetch.
    fetched: Option<Instant>,
    /// The last fetch attempted.
    attempted: Option<Instant>,
}

/// The verifier: its configuration, an HTTP client and the cached JWKS.
pub struct Authorizer {
    config: AuthorizerConfig,
    http: reqwest::Client,
    min_refetch: Duration,
    cache: Mutex<JwksCache>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Authorizer {
    /// The authorizer of `config` (no fetch yet: the first request fetches the JWKS).
    pub fn new(config: AuthorizerConfig) -> Result<Self, reqwest::Error> {
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            if attempt.previous().len() >= MAX_REDIRECTS {
                attempt.error("too many redirects")
            } else if fetchable(attempt.url()) {
                attempt.follow()
            } else {
                attempt.error("a redirect to a URL that is neither https nor loopback")
            }
        });
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(redirects)
            .user_agent(concat!(
                "tiny-harness-authorizer/",
                env!("CARGO_PKG_VERSION")
            ))
            .build()?;
        let cache = JwksCache {
            url: config.jwks_url.clone(),
            ..JwksCache::default()
        };
        Ok(Self {
            config,
            http,
            min_refetch: MIN_REFETCH_INTERVAL,
            cache: Mutex::new(cache),
        })
    }

    /// Another shortest time between two request-driven fetches of the JWKS (default
    /// [`MIN_REFETCH_INTERVAL`]; the tests shorten it).
    pub fn with_min_refetch_interval(mut self, interval: Duration) -> Self {
        self.min_refetch = interval;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &AuthorizerConfig {
        &self.config
    }

    /// One invocation: [`Self::authorize`], and a log line of the outcome (never the token).
    pub async fn handle(
        &self,
        request: &ApiGatewayCustomAuthorizerRequest,
    ) -> Result<ApiGatewayCustomAuthorizerResponse, AuthorizerError> {
        let result = self.authorize(request).await;
        match &result {
            Ok(response) => {
                tracing::info!(principal = ?response.principal_id, "token allowed");
            }
            Err(AuthorizerError::Unauthorized(reason)) => {
                tracing::info!(%reason, "token refused");
            }
            Err(error) => tracing::warn!(%error, "authorizer failed"),
        }
        result
    }

    /// The policy for the event's token, or why there is none.
    pub async fn authorize(
        &self,
        request: &ApiGatewayCustomAuthorizerRequest,
    ) -> Result<ApiGatewayCustomAuthorizerResponse, AuthorizerError> {
        let method_arn = request.method_arn.as_deref().unwrap_or_default();
        let resource = stage_resource(method_arn).ok_or_else(|| {
            AuthorizerError::Event(format!(
                "methodArn {method_arn:?} is not an execute-api ARN"
            ))
        })?;
        let authorization = request
            .authorization_token
            .as_deref()
            .ok_or_else(|| unauthorized("no authorizationToken"))?;
        let token = bearer_token(authorization)
            .ok_or_else(|| unauthorized("the authorizationToken is not `Bearer <token>`"))?;
        let subject = self.verify(token).await?;
        Ok(allow(subject, resource))
    }

    /// The verified subject of `token`.
    pub async fn verify(&self, token: &str) -> Result<String, AuthorizerError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| unauthorized(format!("not a JWT with a known algorithm: {e}")))?;
        let algorithm = header.alg;
        if !self.config.algorithms.contains(&algorithm) {
            return Err(unauthorized(format!(
                "algorithm {algorithm:?} is not accepted"
            )));
        }
        let kid = header
            .kid
            .as_deref()
            .filter(|kid| !kid.is_empty())
            .ok_or_else(|| unauthorized("the token names no key (kid)"))?;
        let jwk = self.key(kid).await?;
        let key = decoding_key(&jwk, algorithm)
            .map_err(|reason| unauthorized(format!("key {kid:?}: {reason}")))?;

        let mut validation = Validation::new(algorithm);
        validation.leeway = LEEWAY_SECS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|e| unauthorized(format!("token refused (key {kid:?}): {e}")))?;
        match data.claims.sub {
            Some(subject) if subject == self.config.agent_id => Err(unauthorized(
                "the subject is the service agent's id, which is reserved",
            )),
            Some(subject) if !subject.is_empty() => Ok(subject),
            _ => Err(unauthorized("the token has no subject (sub)")),
        }
    }

    /// The key `kid` of the issuer's JWKS: from the cache, else after a refetch (at most one
    /// per [`MIN_REFETCH_INTERVAL`]).
    async fn key(&self, kid: &str) -> Result<Jwk, AuthorizerError> {
        let mut cache = self.cache.lock().await;
        let now = Instant::now();
        let may_refetch = |cache: &JwksCache| {
            cache
                .attempted
                .is_none_or(|at| now.duration_since(at) >= self.min_refetch)
        };
        let mut fresh = false;
        match cache.fetched.map(|at| now.duration_since(at)) {
            // Nothing fetched yet (or every fetch so far failed): this one must succeed.
            None => {
                self.fetch(&mut cache).await?;
                fresh = true;
            }
            Some(age) if age >= JWKS_MAX_AGE && may_refetch(&cache) => {
                match self.fetch(&mut cache).await {
                    Ok(()) => fresh = true,
                    Err(error) => {
                        tracing::warn!(%error, "JWKS refresh failed; the cached keys stay in use");
                    }
                }
            }
            Some(_) => {}
        }
        if let Some(jwk) = cache.keys.get(kid) {
            return Ok(jwk.clone());
        }
        if fresh || !may_refetch(&cache) {
            return Err(unauthorized(format!(
                "key {kid:?} is not in the issuer's JWKS"
            )));
        }
        tracing::info!(kid, "unknown key: fetching the JWKS again");
        self.fetch(&mut cache).await?;
        cache.keys.get(kid).cloned().ok_or_else(|| {
            unauthorized(format!(
                "key {kid:?} is not in the issuer's JWKS (refetched)"
            ))
        })
    }

    /// Fetches the JWKS (discovering its URL first if need be) into the cache.
    async fn fetch(&self, cache: &mut JwksCache) -> Result<(), AuthorizerError> {
        cache.attempted = Some(Instant::now());
        let url = match &cache.url {
            Some(url) => url.clone(),
            None => {
                let discovery = self.config.discovery_url().map_err(AuthorizerError::Jwks)?;
                let document: DiscoveryDocument = self.get_json(&discovery).await?;
                let url = fetchable_url(&document.jwks_uri).map_err(|e| {
                    AuthorizerError::Jwks(format!("the jwks_uri of {discovery}: {e}"))
                })?;
                cache.url = Some(url.clone());
                url
            }
        };
        let document: JwksDocument = self.get_json(&url).await?;
        let listed = document.keys.len();
        let keys: HashMap<String, Jwk> = document
            .keys
            .into_iter()
            .filter_map(|key| serde_json::from_value::<Jwk>(key).ok())
            .filter_map(|jwk| jwk.common.key_id.clone().map(|kid| (kid, jwk)))
            .collect();
        tracing::info!(%url, keys = keys.len(), skipped = listed - keys.len(), "JWKS fetched");
        cache.keys = keys;
        cache.fetched = Some(Instant::now());
        Ok(())
    }

    async fn get_json<T: DeserializeOwned>(&self, url: &Url) -> Result<T, AuthorizerError> {
        let fail = |e: reqwest::Error| AuthorizerError::Jwks(format!("GET {url}: {e}"));
        self.http
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(fail)?
            .error_for_status()
            .map_err(fail)?
            .json::<T>()
            .await
            .map_err(fail)
    }
}

/// The verifying key of `jwk` for `algorithm`, if the key is meant for it.
fn decoding_key(jwk: &Jwk, algorithm: Algorithm) -> Result<DecodingKey, String> {
    if let Some(usage) = &jwk.common.public_key_use
        && *usage != PublicKeyUse::Signature
    {
        return Err("not a signature key (use)".to_owned());
    }
    if let Some(key_algorithm) = jwk.common.key_algorithm
        && key_algorithm != KeyAlgorithm::from(algorithm)
    {
        return Err(format!(
            "the key is for {key_algorithm}, the token says {algorithm:?}"
        ));
    }
    let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("unusable key: {e}"))?;
    if key.family() != algorithm.family() {
        return Err(format!("not a key for {algorithm:?}"));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&'static str, &str)]) -> Result<AuthorizerConfig, ConfigError> {
        AuthorizerConfig::from_lookup(assembly::settings::lookup_from(pairs))
    }

    #[test]
    fn configuration_defaults_and_errors_name_their_variable() {
        let c = read(&[
            ("TH_JWT_ISSUER", "https://issuer.example/"),
            ("TH_JWT_AUDIENCE", "tiny-harness"),
        ])
        .expect("valid");
        assert_eq!(c.issuer, "https://issuer.example/");
        assert_eq!(c.audience, "tiny-harness");
        assert_eq!(c.jwks_url, None);
        assert_eq!(c.algorithms, vec![Algorithm::RS256, Algorithm::ES256]);
        assert_eq!(c.agent_id, "tiny-harness", "the functions' default");
        assert_eq!(
            c.discovery_url().expect("url").as_str(),
            "https://issuer.example/.well-known/openid-configuration"
        );

        let c = read(&[
            ("TH_JWT_ISSUER", "http://127.0.0.1:8080/realms/a2a"),
            ("TH_JWT_AUDIENCE", "aud"),
            ("TH_JWT_JWKS_URL", "http://localhost:8080/certs"),
            ("TH_JWT_ALGORITHMS", " ES384, PS256 ,ES384"),
            ("TH_AGENT_ID", "billing-agent"),
        ])
        .expect("loopback http is allowed");
        assert_eq!(c.agent_id, "billing-agent");
        assert_eq!(c.algorithms, vec![Algorithm::ES384, Algorithm::PS256]);
        assert_eq!(
            c.jwks_url.as_ref().map(Url::as_str),
            Some("http://localhost:8080/certs")
        );
        assert_eq!(
            c.discovery_url().expect("url").as_str(),
            "http://127.0.0.1:8080/realms/a2a/.well-known/openid-configuration"
        );

        let base = [
            ("TH_JWT_ISSUER", "https://issuer.example"),
            ("TH_JWT_AUDIENCE", "aud"),
        ];
        for (name, value) in [
            ("TH_JWT_ISSUER", ""),
            ("TH_JWT_ISSUER", "issuer.example"),
            ("TH_JWT_ISSUER", "http://issuer.example"),
            ("TH_JWT_ISSUER", "http://10.0.0.1"),
            ("TH_JWT_ISSUER", "https://issuer.example/?tenant=1"),
            ("TH_JWT_AUDIENCE", " "),
            ("TH_JWT_JWKS_URL", "http://issuer.example/jwks"),
            ("TH_JWT_JWKS_URL", "file:///etc/jwks.json"),
            ("TH_JWT_ALGORITHMS", "none"),
            ("TH_JWT_ALGORITHMS", "RS256,HS256"),
            ("TH_JWT_ALGORITHMS", " , "),
        ] {
            let mut pairs = base.to_vec();
            pairs.retain(|(k, _)| *k != name);
            pairs.push((name, value));
            assert_eq!(read(&pairs).expect_err(value).variable, name, "{value:?}");
        }
        assert_eq!(
            read(&[("TH_JWT_AUDIENCE", "aud")])
                .expect_err("no issuer")
                .variable,
            "TH_JWT_ISSUER"
        );
        assert_eq!(
            read(&[("TH_JWT_ISSUER", "https://i.example")])
                .expect_err("no audience")
                .variable,
            "TH_JWT_AUDIENCE"
        );
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer_token("Bearer abc.def.ghi"), Some("abc.def.ghi"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("BEARER   abc  "), Some("abc"));
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("abc.def.ghi"), None);
        assert_eq!(bearer_token("Basic dXNlcjpwYXNz"), None);
        assert_eq!(bearer_token("Bearer a b"), None);
        assert_eq!(bearer_token(""), None);
    }

    #[test]
    fn the_policy_covers_the_whole_stage() {
        assert_eq!(
            stage_resource(
                "arn:aws:execute-api:eu-west-1:123456789012:abc123/a2a/POST/message:send"
            )
            .as_deref(),
            Some("arn:aws:execute-api:eu-west-1:123456789012:abc123/a2a/*/*")
        );
        assert_eq!(
            stage_resource(
                "arn:aws-cn:execute-api:cn-north-1:123456789012:abc123/prod/GET/tasks/t-1/pushNotificationConfigs"
            )
            .as_deref(),
            Some("arn:aws-cn:execute-api:cn-north-1:123456789012:abc123/prod/*/*")
        );
        for bad in [
            "",
            "arn:aws:lambda:eu-west-1:123456789012:function:f",
            "arn:aws:execute-api:eu-west-1:123456789012:abc123",
            "arn:aws:execute-api:eu-west-1::abc123/a2a/GET/",
            "arn:aws:execute-api:eu-west-1:123456789012:*/a2a/GET/",
        ] {
            assert_eq!(stage_resource(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_allow_policy_serializes_as_api_gateway_expects() {
        let response = allow(
            "alice".to_owned(),
            "arn:aws:execute-api:eu-west-1:1:a/s/*/*".to_owned(),
        );
        let json = serde_json::to_value(&response).expect("json");
        assert_eq!(json["principalId"], "alice");
        assert_eq!(json["context"], serde_json::json!({"sub": "alice"}));
        assert_eq!(json["policyDocument"]["Version"], "2012-10-17");
        assert_eq!(
            json["policyDocument"]["Statement"],
            serde_json::json!([{
                "Action": ["execute-api:Invoke"],
                "Effect": "Allow",
                "Resource": ["arn:aws:execute-api:eu-west-1:1:a/s/*/*"],
            }])
        );
    }

    #[test]
    fn only_unauthorized_says_unauthorized() {
        let diagnostic = Diagnostic::from(unauthorized("expired"));
        assert_eq!(diagnostic.error_message, "Unauthorized");
        assert_eq!(diagnostic.error_type, "Unauthorized");
        let diagnostic = Diagnostic::from(AuthorizerError::Jwks("timeout".into()));
        assert_ne!(diagnostic.error_message, "Unauthorized");
        assert!(!AuthorizerError::Jwks(String::new()).is_unauthorized());
    }

    #[test]
    fn keys_must_be_meant_for_the_algorithm() {
        let rsa: Jwk = serde_json::from_value(serde_json::json!({
            "kty": "RSA", "kid": "r", "use": "sig", "alg": "RS256",
            "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw",
            "e": "AQAB"
        }))
        .expect("jwk");
        assert!(decoding_key(&rsa, Algorithm::RS256).is_ok());
        assert!(
            decoding_key(&rsa, Algorithm::PS256).is_err(),
            "alg mismatch"
        );
        assert!(decoding_key(&rsa, Algorithm::ES256).is_err());
        let mut unlabelled = rsa.clone();
        unlabelled.common.key_algorithm = None;
        assert!(decoding_key(&unlabelled, Algorithm::PS256).is_ok());
        assert!(
            decoding_key(&unlabelled, Algorithm::ES256).is_err(),
            "family"
        );
        let mut encryption = unlabelled;
        encryption.common.public_key_use = Some(PublicKeyUse::Encryption);
        assert!(decoding_key(&encryption, Algorithm::RS256).is_err());
        let secret: Jwk = serde_json::from_value(serde_json::json!({
            "kty": "oct", "kid": "s", "k": "c2VjcmV0"
        }))
        .expect("jwk");
        assert!(decoding_key(&secret, Algorithm::RS256).is_err());
    }
}
