//! What a function reads from its environment, once, at init.

use std::time::Duration;

use task_core::commands::ModelCatalog;

/// How the caller's identity is established (SPEC section 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// Self-asserted: `metadata.participant_id`, the `X-Participant-Id` header, or the
    /// default participant.
    None,
    /// Behind an authorizer: the verified principal of the request context is the
    /// participant; a request without one is refused (401).
    Authorizer,
}

/// The agent behind the tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentProfile {
    /// The model agent over the catalog's models.
    Model,
    /// The A2A TCK's message-id scenarios.
    Tck,
}

/// A configuration error: which variable, and why.
#[derive(Debug, thiserror::Error)]
#[error("{variable}: {reason}")]
pub struct ConfigError {
    pub variable: &'static str,
    pub reason: String,
}

/// The configuration of the HTTP functions and the push notifier.
#[derive(Debug, Clone)]
pub struct FunctionConfig {
    /// `TABLE_NAME`: the DynamoDB table.
    pub table: String,
    /// `BASE_URL`: the public base URL the agent card advertises (the API's URL).
    pub base_url: String,
    /// `AUTH_MODE`: `none` (default) or `authorizer`.
    pub auth: AuthMode,
    /// `DEFAULT_PARTICIPANT`: who requests asserting no participant act as (unset: refused).
    pub default_participant: Option<String>,
    /// `ALLOW_PRIVATE_WEBHOOKS`: `true` lets push configs name private addresses.
    pub allow_private_webhooks: bool,
    /// `AGENT_ID`: the agent's participant id (default `tiny-harness`).
    pub agent_id: Option<String>,
    /// `AGENT_PROFILE`: `model` (default) or `tck`.
    pub agent_profile: AgentProfile,
    /// `MODEL_CATALOG`: the catalog as JSON text (default: the `echo` model only).
    pub catalog: ModelCatalog,
    /// `STREAM_END_MARGIN_MS`: how long before the invocation's deadline a stream ends
    /// (default 3000, at most a tenth of the invocation's time left), so it closes cleanly
    /// instead of being cut by the timeout.
    pub stream_end_margin: Duration,
    /// `RUNNER_FUNCTION`: the function `returnImmediately` runs are handed to (unset: they
    /// run in the invocation that took the message, which then ends only when they do).
    pub runner_function: Option<String>,
    /// `LEASE_TTL_SECS`: how long a run's lease lasts unrenewed (default 30): a runner that
    /// dies is replaced by the sweeper after at most this long.
    pub lease_ttl: Duration,
    /// `SKILLS_DIR`: the skills shipped with the deployment (default `skills`, beside the
    /// function's binary in its package: the working directory of a Lambda function).
    pub skills_dir: std::path::PathBuf,
    /// `REMOTE_AGENTS`: the remote A2A agents `spawn_subtask` may delegate to, `ID=URL`
    /// pairs separated by commas (default none).
    pub remote_agents: std::collections::BTreeMap<String, String>,
    /// `MAX_TURNS`: model calls one run may make before the task fails (default 50).
    pub max_turns: usize,
    /// `RATE_LIMIT` (requests per second per caller) and `RATE_LIMIT_BURST` (default: one
    /// second's worth): a limit each function instance applies on its own (default none).
    /// The deployed bound is API Gateway's throttling and WAF; this one only stops a single
    /// caller from monopolising an instance.
    pub rate_limit: Option<a2a_http::RateLimit>,
}

pub(crate) fn var(name: &'static str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

pub(crate) fn invalid(variable: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        variable,
        reason: reason.into(),
    }
}

impl FunctionConfig {
    /// Reads the environment; a missing or malformed variable is an error naming it.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(var)
    }

    /// Reads from any lookup (the environment, or a map in tests).
    pub fn from_lookup(
        lookup: impl Fn(&'static str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let table = lookup("TABLE_NAME").ok_or_else(|| invalid("TABLE_NAME", "not set"))?;
        let base_url = lookup("BASE_URL").ok_or_else(|| invalid("BASE_URL", "not set"))?;
        if !(base_url.starts_with("https://") || base_url.starts_with("http://")) {
            return Err(invalid("BASE_URL", "must be an http(s) URL"));
        }
        let auth = match lookup("AUTH_MODE").as_deref() {
            None | Some("none") => AuthMode::None,
            Some("authorizer") => AuthMode::Authorizer,
            Some(other) => {
                return Err(invalid(
                    "AUTH_MODE",
                    format!("{other:?} is neither `none` nor `authorizer`"),
                ));
            }
        };
        let allow_private_webhooks = match lookup("ALLOW_PRIVATE_WEBHOOKS").as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(invalid(
                    "ALLOW_PRIVATE_WEBHOOKS",
                    format!("{other:?} is neither `true` nor `false`"),
                ));
            }
        };
        let agent_profile = match lookup("AGENT_PROFILE").as_deref() {
            None | Some("model") => AgentProfile::Model,
            Some("tck") => AgentProfile::Tck,
            Some(other) => {
                return Err(invalid(
                    "AGENT_PROFILE",
                    format!("{other:?} is neither `model` nor `tck`"),
                ));
            }
        };
        let catalog = match lookup("MODEL_CATALOG") {
            None => ModelCatalog::echo_only(),
            Some(text) => ModelCatalog::from_json(&text)
                .map_err(|e| invalid("MODEL_CATALOG", e.to_string()))?,
        };
        let stream_end_margin = match lookup("STREAM_END_MARGIN_MS") {
            None => Duration::from_millis(3000),
            Some(ms) => Duration::from_millis(
                ms.parse()
                    .map_err(|_| invalid("STREAM_END_MARGIN_MS", "not a number of milliseconds"))?,
            ),
        };
        let lease_ttl = match lookup("LEASE_TTL_SECS") {
            None => Duration::from_secs(30),
            Some(secs) => match secs.parse::<u64>() {
                Ok(secs) if secs > 0 => Duration::from_secs(secs),
                _ => {
                    return Err(invalid(
                        "LEASE_TTL_SECS",
                        "not a positive number of seconds",
                    ));
                }
            },
        };
        let remote_agents = match lookup("REMOTE_AGENTS") {
            None => Default::default(),
            Some(pairs) => a2a_service::config::parse_remote_agents(pairs.split(','))
                .map_err(|e| invalid("REMOTE_AGENTS", e))?,
        };
        let max_turns = match lookup("MAX_TURNS") {
            None => 50,
            Some(n) => match n.parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => return Err(invalid("MAX_TURNS", "not a positive number")),
            },
        };
        let rate_limit = rate_limit(&lookup)?;
        Ok(Self {
            table,
            base_url,
            auth,
            default_participant: lookup("DEFAULT_PARTICIPANT"),
            allow_private_webhooks,
            agent_id: lookup("AGENT_ID"),
            agent_profile,
            catalog,
            stream_end_margin,
            runner_function: lookup("RUNNER_FUNCTION"),
            lease_ttl,
            skills_dir: lookup("SKILLS_DIR")
                .unwrap_or_else(|| "skills".to_owned())
                .into(),
            remote_agents,
            max_turns,
            rate_limit,
        })
    }
}

fn rate_limit(
    lookup: impl Fn(&'static str) -> Option<String>,
) -> Result<Option<a2a_http::RateLimit>, ConfigError> {
    let burst = match lookup("RATE_LIMIT_BURST") {
        None => None,
        Some(n) => match n.parse::<u32>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(invalid("RATE_LIMIT_BURST", "not a positive number")),
        },
    };
    let Some(rate) = lookup("RATE_LIMIT") else {
        return match burst {
            None => Ok(None),
            Some(_) => Err(invalid("RATE_LIMIT_BURST", "set without RATE_LIMIT")),
        };
    };
    let rate = rate.parse::<f64>().unwrap_or(f64::NAN);
    let burst = burst.unwrap_or_else(|| a2a_http::RateLimit::default_burst(rate));
    a2a_http::RateLimit::new(rate, burst)
        .map(Some)
        .ok_or_else(|| invalid("RATE_LIMIT", "not a positive number of requests per second"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(pairs: &[(&'static str, &str)]) -> Result<FunctionConfig, ConfigError> {
        let map: HashMap<&'static str, String> =
            pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
        FunctionConfig::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_and_required_variables() {
        let c =
            read(&[("TABLE_NAME", "tasks"), ("BASE_URL", "https://api.example")]).expect("valid");
        assert_eq!(c.auth, AuthMode::None);
        assert_eq!(c.agent_profile, AgentProfile::Model);
        assert!(!c.allow_private_webhooks);
        assert_eq!(c.default_participant, None);
        assert_eq!(c.catalog.default_model().id, "echo");
        assert_eq!(c.stream_end_margin, Duration::from_secs(3));
        assert_eq!(c.runner_function, None);
        assert_eq!(c.lease_ttl, Duration::from_secs(30));
        assert_eq!(c.skills_dir, std::path::PathBuf::from("skills"));
        assert!(c.remote_agents.is_empty());
        assert_eq!(c.max_turns, 50);
        assert_eq!(c.rate_limit, None);

        let missing = read(&[("BASE_URL", "https://api.example")]).expect_err("no table");
        assert_eq!(missing.variable, "TABLE_NAME");
        let missing = read(&[("TABLE_NAME", "t")]).expect_err("no base url");
        assert_eq!(missing.variable, "BASE_URL");
    }

    #[test]
    fn malformed_values_name_their_variable() {
        let base = [("TABLE_NAME", "t"), ("BASE_URL", "https://a")];
        for (name, value) in [
            ("AUTH_MODE", "jwt"),
            ("ALLOW_PRIVATE_WEBHOOKS", "yes"),
            ("AGENT_PROFILE", "gpt"),
            ("MODEL_CATALOG", "{"),
            ("STREAM_END_MARGIN_MS", "soon"),
            ("REMOTE_AGENTS", "billing"),
            ("MAX_TURNS", "0"),
            ("LEASE_TTL_SECS", "0"),
            ("BASE_URL", "api.example"),
            ("RATE_LIMIT", "0"),
            ("RATE_LIMIT", "fast"),
            ("RATE_LIMIT_BURST", "0"),
            ("RATE_LIMIT_BURST", "5"),
        ] {
            let mut pairs = base.to_vec();
            pairs.retain(|(k, _)| *k != name);
            pairs.push((name, value));
            assert_eq!(read(&pairs).expect_err(name).variable, name);
        }
        let c = read(&[
            ("TABLE_NAME", "t"),
            ("BASE_URL", "https://a"),
            ("AUTH_MODE", "authorizer"),
            ("ALLOW_PRIVATE_WEBHOOKS", "true"),
            ("AGENT_PROFILE", "tck"),
            ("DEFAULT_PARTICIPANT", "tck"),
            ("STREAM_END_MARGIN_MS", "500"),
            ("RUNNER_FUNCTION", "tiny-harness-runner"),
            ("SKILLS_DIR", "/opt/skills"),
            (
                "REMOTE_AGENTS",
                "billing=https://billing.example,search=http://10.0.0.9/",
            ),
            ("MAX_TURNS", "8"),
            ("RATE_LIMIT", "2.5"),
        ])
        .expect("valid");
        assert_eq!(c.rate_limit, a2a_http::RateLimit::new(2.5, 3));
        assert_eq!(c.skills_dir, std::path::PathBuf::from("/opt/skills"));
        assert_eq!(c.remote_agents["search"], "http://10.0.0.9");
        assert_eq!(c.remote_agents.len(), 2);
        assert_eq!(c.max_turns, 8);
        assert_eq!(c.auth, AuthMode::Authorizer);
        assert!(c.allow_private_webhooks);
        assert_eq!(c.agent_profile, AgentProfile::Tck);
        assert_eq!(c.default_participant.as_deref(), Some("tck"));
        assert_eq!(c.stream_end_margin, Duration::from_millis(500));
        assert_eq!(c.runner_function.as_deref(), Some("tiny-harness-runner"));
        let c = read(&[
            ("TABLE_NAME", "t"),
            ("BASE_URL", "https://a"),
            ("RATE_LIMIT", "10"),
            ("RATE_LIMIT_BURST", "40"),
        ])
        .expect("valid");
        assert_eq!(c.rate_limit, a2a_http::RateLimit::new(10.0, 40));
    }
}
