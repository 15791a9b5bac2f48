//! The JWT authorizer in process, against a loopback issuer (axum on 127.0.0.1:0) that serves
//! its discovery document and a JWKS made of the test-only keys in `fixtures/jwt/`: tokens
//! signed in the test are allowed for the whole stage with their subject as the principal, or
//! refused with `Unauthorized` (the service agent's own id among the refused subjects); a
//! rotated key is picked up by a refetch (at most one per interval); an issuer that cannot be
//! reached is an error other than `Unauthorized`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use functions::FromLookup;
use functions::authorizer::{Authorizer, AuthorizerConfig, AuthorizerError};
use jsonwebtoken::{Algorithm, AlgorithmFamily, EncodingKey, Header};
use lambda_http::aws_lambda_events::apigw::{
    ApiGatewayCustomAuthorizerRequest, ApiGatewayCustomAuthorizerResponse,
};
use lambda_runtime::Diagnostic;
use serde_json::{Value, json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/jwt");
const AUDIENCE: &str = "tiny-harness";
const METHOD_ARN: &str =
    "arn:aws:execute-api:eu-west-1:123456789012:abc123def4/a2a/POST/message:send";
const STAGE_RESOURCE: &str = "arn:aws:execute-api:eu-west-1:123456789012:abc123def4/a2a/*/*";

const ES256: &str = "test-only-es256";
const RS256: &str = "test-only-rs256";
const ROTATED: &str = "test-only-es256-rotated";
const NOT_IN_JWKS: &str = "test-only-es256-not-in-jwks";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The public JWK of a fixture key, by kid.
fn public_jwk(kid: &str) -> Value {
    let jwks: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/jwks.json")).unwrap())
            .unwrap();
    jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == kid)
        .cloned()
        .unwrap_or_else(|| panic!("no fixture key {kid}"))
}

/// A token signed with the fixture key `key` (`{key}.pem`), its header naming `kid`.
fn sign_with(key: &str, alg: Algorithm, kid: Option<&str>, claims: &Value) -> String {
    let pem = std::fs::read(format!("{FIXTURES}/{key}.pem")).unwrap();
    let key = match alg.family() {
        AlgorithmFamily::Ec => EncodingKey::from_ec_pem(&pem),
        AlgorithmFamily::Rsa => EncodingKey::from_rsa_pem(&pem),
        other => panic!("no fixture key for {other:?}"),
    }
    .unwrap();
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

/// A token signed with the fixture key named by its own kid.
fn sign(kid: &str, claims: &Value) -> String {
    let alg = if kid == RS256 {
        Algorithm::RS256
    } else {
        Algorithm::ES256
    };
    sign_with(kid, alg, Some(kid), claims)
}

/// A TOKEN authorizer event, as API Gateway sends it.
fn event(authorization: Option<&str>) -> ApiGatewayCustomAuthorizerRequest {
    let mut event = json!({"type": "TOKEN", "methodArn": METHOD_ARN});
    if let Some(authorization) = authorization {
        event["authorizationToken"] = json!(authorization);
    }
    serde_json::from_value(event).unwrap()
}

fn bearer(token: &str) -> ApiGatewayCustomAuthorizerRequest {
    event(Some(&format!("Bearer {token}")))
}

/// A loopback issuer: `{base}/realms/a2a`, its discovery document and its JWKS (the served
/// keys can change), counting the fetches.
#[derive(Clone)]
struct Issuer {
    base: String,
    keys: Arc<Mutex<Vec<Value>>>,
    discovery_fetches: Arc<AtomicUsize>,
    jwks_fetches: Arc<AtomicUsize>,
}

async fn discovery(State(issuer): State<Issuer>) -> Json<Value> {
    issuer.discovery_fetches.fetch_add(1, Ordering::SeqCst);
    Json(json!({
        "issuer": issuer.issuer(),
        "jwks_uri": format!("{}/certs", issuer.issuer()),
        "id_token_signing_alg_values_supported": ["RS256", "ES256"],
    }))
}

async fn jwks(State(issuer): State<Issuer>) -> Json<Value> {
    issuer.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    let mut keys = issuer.keys.lock().unwrap().clone();
    // Keys this cannot use are skipped, not fatal to the set.
    keys.push(json!({"kty": "quantum", "kid": "junk"}));
    keys.push(json!({"kid": "no-kty"}));
    keys.push(json!({"kty": "RSA", "use": "enc", "alg": "RSA-OAEP", "kid": "enc", "n": "sXch", "e": "AQAB"}));
    Json(json!({ "keys": keys }))
}

impl Issuer {
    async fn start(kids: &[&str]) -> Self {
        let issuer = Issuer {
            base: String::new(),
            keys: Arc::new(Mutex::new(kids.iter().map(|kid| public_jwk(kid)).collect())),
            discovery_fetches: Arc::default(),
            jwks_fetches: Arc::default(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = Issuer {
            base: format!("http://{}", listener.local_addr().unwrap()),
            ..issuer
        };
        let router = Router::new()
            .route(
                "/realms/a2a/.well-known/openid-configuration",
                get(discovery),
            )
            .route("/realms/a2a/certs", get(jwks))
            .with_state(issuer.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        issuer
    }

    fn issuer(&self) -> String {
        format!("{}/realms/a2a", self.base)
    }

    /// The issuer rotates a key in.
    fn gain(&self, kid: &str) {
        self.keys.lock().unwrap().push(public_jwk(kid));
    }

    fn jwks_fetches(&self) -> usize {
        self.jwks_fetches.load(Ordering::SeqCst)
    }

    fn authorizer_with(&self, extra: &[(&'static str, &str)]) -> Authorizer {
        let mut env: HashMap<&'static str, String> = HashMap::from([
            ("TH_JWT_ISSUER", self.issuer()),
            ("TH_JWT_AUDIENCE", AUDIENCE.to_owned()),
        ]);
        env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
        let config = AuthorizerConfig::from_lookup(|name| env.get(name).cloned()).unwrap();
        Authorizer::new(config).unwrap()
    }

    fn authorizer(&self) -> Authorizer {
        self.authorizer_with(&[])
    }

    /// Claims this issuer's tokens carry for `sub`, valid for five minutes.
    fn claims(&self, sub: &str) -> Value {
        let now = now();
        json!({
            "iss": self.issuer(), "aud": AUDIENCE, "sub": sub,
            "iat": now, "nbf": now, "exp": now + 300,
        })
    }
}

fn assert_allowed(response: &ApiGatewayCustomAuthorizerResponse, sub: &str) {
    let json = serde_json::to_value(response).unwrap();
    assert_eq!(json["principalId"], sub);
    assert_eq!(json["context"], json!({ "sub": sub }));
    assert_eq!(json["policyDocument"]["Version"], "2012-10-17");
    assert_eq!(
        json["policyDocument"]["Statement"],
        json!([{
            "Action": ["execute-api:Invoke"],
            "Effect": "Allow",
            "Resource": [STAGE_RESOURCE],
        }]),
        "one statement allowing every method and path of the stage"
    );
}

/// The error is the one API Gateway answers 401 to.
fn assert_unauthorized(result: Result<ApiGatewayCustomAuthorizerResponse, AuthorizerError>) {
    let error = result.expect_err("refused");
    assert!(error.is_unauthorized(), "{error:?}");
    assert_eq!(Diagnostic::from(error).error_message, "Unauthorized");
}

#[tokio::test]
async fn valid_tokens_are_allowed_for_the_whole_stage_with_their_subject() {
    let issuer = Issuer::start(&[ES256, RS256]).await;
    let authorizer = issuer.authorizer();

    let token = sign(ES256, &issuer.claims("alice"));
    assert_allowed(&authorizer.handle(&bearer(&token)).await.unwrap(), "alice");

    let token = sign(RS256, &issuer.claims("bob"));
    assert_allowed(&authorizer.handle(&bearer(&token)).await.unwrap(), "bob");
    // The scheme in any case, extra spaces.
    let lower = event(Some(&format!("bearer   {token} ")));
    assert_allowed(&authorizer.handle(&lower).await.unwrap(), "bob");

    // `aud` as an array that contains the audience; `exp` and `nbf` within the 30 s leeway.
    let mut claims = issuer.claims("carol");
    claims["aud"] = json!(["another-api", AUDIENCE]);
    claims["exp"] = json!(now() - 15);
    claims["nbf"] = json!(now() + 15);
    let token = sign(ES256, &claims);
    assert_allowed(&authorizer.handle(&bearer(&token)).await.unwrap(), "carol");

    // Discovered once, fetched once: every later token used the cache.
    assert_eq!(issuer.discovery_fetches.load(Ordering::SeqCst), 1);
    assert_eq!(issuer.jwks_fetches(), 1);
}

#[tokio::test]
async fn invalid_or_missing_tokens_are_unauthorized() {
    let issuer = Issuer::start(&[ES256, RS256]).await;
    let authorizer = issuer.authorizer();
    let with = |change: &dyn Fn(&mut Value)| {
        let mut claims = issuer.claims("alice");
        change(&mut claims);
        sign(ES256, &claims)
    };
    let good = with(&|_| {});

    let header = |h: Value| URL_SAFE_NO_PAD.encode(h.to_string());
    let payload = URL_SAFE_NO_PAD.encode(issuer.claims("alice").to_string());
    let signature = good.rsplit('.').next().unwrap().to_owned();
    let hs256 = {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(ES256.to_owned());
        let secret = EncodingKey::from_secret(b"a shared secret").unwrap();
        jsonwebtoken::encode(&header, &issuer.claims("alice"), &secret).unwrap()
    };

    let cases: Vec<(&str, &str, String)> = vec![
        (
            "wrong issuer",
            "InvalidIssuer",
            with(&|c| c["iss"] = json!("https://evil.example")),
        ),
        (
            "issuer with another trailing slash",
            "InvalidIssuer",
            with(&|c| c["iss"] = json!(format!("{}/", issuer.issuer()))),
        ),
        ("no issuer", "claim: iss", with(&|c| remove(c, "iss"))),
        (
            "wrong audience",
            "InvalidAudience",
            with(&|c| c["aud"] = json!("another-api")),
        ),
        (
            "audience list without ours",
            "InvalidAudience",
            with(&|c| c["aud"] = json!(["a", "b"])),
        ),
        ("no audience", "claim: aud", with(&|c| remove(c, "aud"))),
        (
            "expired beyond the leeway",
            "ExpiredSignature",
            with(&|c| c["exp"] = json!(now() - 120)),
        ),
        // The leeway is 30 s (it adds to API Gateway's cache in how long a token outlives
        // its `exp`): 45 s past `exp` is too late.
        (
            "expired 45 s ago",
            "ExpiredSignature",
            with(&|c| c["exp"] = json!(now() - 45)),
        ),
        (
            "not yet valid in 45 s",
            "ImmatureSignature",
            with(&|c| c["nbf"] = json!(now() + 45)),
        ),
        ("no expiry", "claim: exp", with(&|c| remove(c, "exp"))),
        (
            "not yet valid beyond the leeway",
            "ImmatureSignature",
            with(&|c| c["nbf"] = json!(now() + 600)),
        ),
        ("no subject", "claim: sub", with(&|c| remove(c, "sub"))),
        (
            "empty subject",
            "no subject",
            with(&|c| c["sub"] = json!("")),
        ),
        (
            "subject not a string",
            "expected a string",
            with(&|c| c["sub"] = json!(42)),
        ),
        (
            "signed with a key not in the JWKS",
            "InvalidSignature",
            sign_with(
                NOT_IN_JWKS,
                Algorithm::ES256,
                Some(ES256),
                &issuer.claims("alice"),
            ),
        ),
        (
            "signed with the RSA key, the EC key's kid",
            "the key is for ES256",
            sign_with(
                RS256,
                Algorithm::RS256,
                Some(ES256),
                &issuer.claims("alice"),
            ),
        ),
        (
            "no kid",
            "no key (kid)",
            sign_with(ES256, Algorithm::ES256, None, &issuer.claims("alice")),
        ),
        (
            "a kid the issuer never had",
            "not in the issuer's JWKS",
            sign_with(
                ES256,
                Algorithm::ES256,
                Some("made-up"),
                &issuer.claims("alice"),
            ),
        ),
        ("HS256 (a shared secret)", "HS256 is not accepted", hs256),
        (
            "alg none, no signature",
            "unknown variant `none`",
            format!(
                "{}.{payload}.",
                header(json!({"alg": "none", "typ": "JWT", "kid": ES256}))
            ),
        ),
        (
            "alg none, a valid token's signature",
            "unknown variant `none`",
            format!(
                "{}.{payload}.{signature}",
                header(json!({"alg": "none", "kid": ES256}))
            ),
        ),
        (
            "the payload swapped under a valid signature",
            "InvalidSignature",
            format!(
                "{}.{}.{signature}",
                good.split('.').next().unwrap(),
                URL_SAFE_NO_PAD.encode(issuer.claims("mallory").to_string())
            ),
        ),
        ("not a JWT", "InvalidToken", "not-a-jwt".to_owned()),
        ("two segments", "InvalidToken", "abc.def".to_owned()),
    ];
    for (what, why, token) in cases {
        let result = authorizer.handle(&bearer(&token)).await;
        match &result {
            Err(AuthorizerError::Unauthorized(reason)) => {
                assert!(
                    reason.contains(why),
                    "{what}: refused for {reason:?}, not {why:?}"
                );
            }
            other => panic!("{what}: {other:?}"),
        }
        assert_unauthorized(result);
    }

    for (what, authorization) in [
        ("no Bearer scheme", Some(good.clone())),
        ("another scheme", Some(format!("Basic {good}"))),
        ("Bearer alone", Some("Bearer".to_owned())),
        ("Bearer and a space", Some("Bearer ".to_owned())),
        ("no authorizationToken", None),
    ] {
        let result = authorizer.handle(&event(authorization.as_deref())).await;
        assert!(result.is_err(), "{what}: allowed");
        assert_unauthorized(result);
    }

    // The good token itself was fine all along.
    assert_allowed(&authorizer.handle(&bearer(&good)).await.unwrap(), "alice");
}

fn remove(claims: &mut Value, name: &str) {
    claims.as_object_mut().unwrap().remove(name);
}

#[tokio::test]
async fn the_service_agents_id_is_no_subject() {
    let issuer = Issuer::start(&[ES256]).await;

    // TH_AGENT_ID unset: the functions' default, `tiny-harness`.
    let authorizer = issuer.authorizer();
    let result = authorizer
        .handle(&bearer(&sign(ES256, &issuer.claims("tiny-harness"))))
        .await;
    assert!(
        matches!(&result, Err(AuthorizerError::Unauthorized(r)) if r.contains("reserved")),
        "{result:?}"
    );
    assert_unauthorized(result);

    // TH_AGENT_ID set: that id is reserved, and the default one is an ordinary subject again.
    let authorizer = issuer.authorizer_with(&[("TH_AGENT_ID", "billing-agent")]);
    assert_unauthorized(
        authorizer
            .handle(&bearer(&sign(ES256, &issuer.claims("billing-agent"))))
            .await,
    );
    let token = sign(ES256, &issuer.claims("tiny-harness"));
    assert_allowed(
        &authorizer.handle(&bearer(&token)).await.unwrap(),
        "tiny-harness",
    );
    // Only the exact id: a subject that merely contains it is someone else.
    let token = sign(ES256, &issuer.claims("billing-agent-2"));
    assert_allowed(
        &authorizer.handle(&bearer(&token)).await.unwrap(),
        "billing-agent-2",
    );
}

#[tokio::test]
async fn only_the_configured_algorithms_are_accepted() {
    let issuer = Issuer::start(&[ES256, RS256]).await;
    let authorizer = issuer.authorizer_with(&[("TH_JWT_ALGORITHMS", "ES256")]);
    let token = sign(RS256, &issuer.claims("bob"));
    assert_unauthorized(authorizer.handle(&bearer(&token)).await);
    let token = sign(ES256, &issuer.claims("alice"));
    assert_allowed(&authorizer.handle(&bearer(&token)).await.unwrap(), "alice");
}

#[tokio::test]
async fn a_rotated_key_is_fetched_again_at_most_once_per_interval() {
    let issuer = Issuer::start(&[ES256]).await;
    let slow = issuer.authorizer(); // the default: one refetch per 60 s
    let quick = issuer
        .authorizer()
        .with_min_refetch_interval(Duration::from_secs(1));
    let rotated = sign(ROTATED, &issuer.claims("dave"));

    // Before the rotation: the first fetch lacks the key, and is not repeated at once.
    assert_unauthorized(slow.handle(&bearer(&rotated)).await);
    assert_eq!(issuer.jwks_fetches(), 1);
    assert_unauthorized(quick.handle(&bearer(&rotated)).await);
    assert_eq!(issuer.jwks_fetches(), 2);

    issuer.gain(ROTATED);

    // Within the interval nobody fetches again: made-up kids cannot hammer the issuer.
    assert_unauthorized(slow.handle(&bearer(&rotated)).await);
    assert_unauthorized(quick.handle(&bearer(&rotated)).await);
    assert_eq!(issuer.jwks_fetches(), 2);

    // Once the interval has passed, the unknown kid is fetched again, and found.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_allowed(&quick.handle(&bearer(&rotated)).await.unwrap(), "dave");
    assert_eq!(issuer.jwks_fetches(), 3);
    // The key is cached now; a made-up kid right after is refused without a fetch.
    assert_allowed(&quick.handle(&bearer(&rotated)).await.unwrap(), "dave");
    let made_up = sign_with(
        ROTATED,
        Algorithm::ES256,
        Some("made-up"),
        &issuer.claims("dave"),
    );
    assert_unauthorized(quick.handle(&bearer(&made_up)).await);
    assert_eq!(issuer.jwks_fetches(), 3);
    // The slow one still waits out its 60 s.
    assert_unauthorized(slow.handle(&bearer(&rotated)).await);
    assert_eq!(issuer.jwks_fetches(), 3);
}

#[tokio::test]
async fn a_configured_jwks_url_skips_discovery() {
    let issuer = Issuer::start(&[ES256]).await;
    let url = format!("{}/certs", issuer.issuer());
    let authorizer = issuer.authorizer_with(&[("TH_JWT_JWKS_URL", &url)]);
    let token = sign(ES256, &issuer.claims("erin"));
    assert_allowed(&authorizer.handle(&bearer(&token)).await.unwrap(), "erin");
    assert_eq!(issuer.discovery_fetches.load(Ordering::SeqCst), 0);
    assert_eq!(issuer.jwks_fetches(), 1);
}

#[tokio::test]
async fn an_unreachable_issuer_is_an_error_not_unauthorized() {
    let issuer = Issuer::start(&[ES256]).await;
    let token = sign(ES256, &issuer.claims("alice"));

    // Nothing listens there any more.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/certs", listener.local_addr().unwrap())
    };
    // A discovery document that is not there (404).
    let wrong_issuer = format!("{}/realms/none", issuer.base);
    let cases = [
        issuer.authorizer_with(&[("TH_JWT_JWKS_URL", &closed)]),
        issuer.authorizer_with(&[("TH_JWT_ISSUER", &wrong_issuer)]),
    ];
    for authorizer in cases {
        let error = authorizer
            .handle(&bearer(&token))
            .await
            .expect_err("no keys");
        assert!(matches!(error, AuthorizerError::Jwks(_)), "{error:?}");
        let diagnostic = Diagnostic::from(error);
        assert_ne!(diagnostic.error_message, "Unauthorized");
        assert_eq!(diagnostic.error_type, "JwksUnavailable");
    }
}

#[tokio::test]
async fn an_event_without_a_method_arn_is_an_error() {
    let issuer = Issuer::start(&[ES256]).await;
    let authorizer = issuer.authorizer();
    let token = sign(ES256, &issuer.claims("alice"));
    let event: ApiGatewayCustomAuthorizerRequest = serde_json::from_value(json!({
        "type": "TOKEN", "authorizationToken": format!("Bearer {token}"),
    }))
    .unwrap();
    let error = authorizer.handle(&event).await.expect_err("no methodArn");
    assert!(matches!(error, AuthorizerError::Event(_)), "{error:?}");
    assert_eq!(
        issuer.jwks_fetches(),
        0,
        "nothing fetched for a malformed event"
    );
}
