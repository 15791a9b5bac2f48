//! What a function reads from its environment, once, at init: the service's settings (read
//! by the assembly, as the local server reads them) and the functions' own.

use std::time::Duration;

use assembly::names;
use assembly::settings::one_of;
pub use assembly::settings::{AgentProfile, ConfigError, FromLookup, Settings, invalid, var};

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

/// The configuration of the HTTP functions, the runner, the sweeper and the push notifier.
#[derive(Debug, Clone)]
pub struct FunctionConfig {
    /// The service's settings (`TH_*`, see [`assembly::names`]), as both hosts read them.
    pub settings: Settings,
    /// `TH_TABLE`: the DynamoDB table (required here).
    pub table: String,
    /// `TH_BASE_URL`: the public base URL the agent card advertises (the API's URL; required
    /// here).
    pub base_url: String,
    /// `TH_AUTH_MODE`: `none` (default) or `authorizer`.
    pub auth: AuthMode,
    /// `TH_STREAM_END_MARGIN_MS`: how long before the invocation's deadline a stream ends
    /// (default 3000, at most a tenth of the invocation's time left), so it closes cleanly
    /// instead of being cut by the timeout.
    pub stream_end_margin: Duration,
    /// `TH_RUNNER_FUNCTION`: the function `returnImmediately` runs are handed to (unset: they
    /// run in the invocation that took the message, which then ends only when they do).
    pub runner_function: Option<String>,
    /// `TH_METRICS_NAMESPACE`: the CloudWatch namespace of the EMF metrics every function
    /// prints (default `TinyHarness`).
    pub metrics_namespace: String,
}

impl FromLookup for FunctionConfig {
    /// A variable of an earlier version is an error naming its new name.
    fn from_lookup(lookup: impl Fn(&'static str) -> Option<String>) -> Result<Self, ConfigError> {
        assembly::refuse_renamed(&lookup, |_| true)?;
        let settings = Settings::from_lookup(&lookup)?;
        let table = settings
            .table
            .clone()
            .ok_or_else(|| invalid(names::TABLE, "not set"))?;
        let base_url = settings
            .base_url
            .clone()
            .ok_or_else(|| invalid(names::BASE_URL, "not set"))?;
        let auth = one_of(
            &lookup,
            names::AUTH_MODE,
            [
                ("none", AuthMode::None),
                ("authorizer", AuthMode::Authorizer),
            ],
            AuthMode::None,
        )?;
        let stream_end_margin = match lookup(names::STREAM_END_MARGIN_MS) {
            None => Duration::from_millis(3000),
            Some(ms) => Duration::from_millis(ms.parse().map_err(|_| {
                invalid(names::STREAM_END_MARGIN_MS, "not a number of milliseconds")
            })?),
        };
        Ok(Self {
            settings,
            table,
            base_url,
            auth,
            stream_end_margin,
            runner_function: lookup(names::RUNNER_FUNCTION),
            metrics_namespace: lookup(names::METRICS_NAMESPACE)
                .unwrap_or_else(|| "TinyHarness".to_owned()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assembly::settings::lookup_from;

    fn read(pairs: &[(&'static str, &str)]) -> Result<FunctionConfig, ConfigError> {
        FunctionConfig::from_lookup(lookup_from(pairs))
    }

    #[test]
    fn defaults_and_required_variables() {
        let c = read(&[
            ("TH_TABLE", "tasks"),
            ("TH_BASE_URL", "https://api.example"),
        ])
        .expect("valid");
        assert_eq!(c.table, "tasks");
        assert_eq!(c.base_url, "https://api.example");
        assert_eq!(c.auth, AuthMode::None);
        assert_eq!(c.settings.agent_profile, AgentProfile::Model);
        assert_eq!(c.stream_end_margin, Duration::from_secs(3));
        assert_eq!(c.runner_function, None);
        assert_eq!(c.metrics_namespace, "TinyHarness");

        let missing = read(&[("TH_BASE_URL", "https://api.example")]).expect_err("no table");
        assert_eq!(missing.variable, "TH_TABLE");
        let missing = read(&[("TH_TABLE", "t")]).expect_err("no base url");
        assert_eq!(missing.variable, "TH_BASE_URL");
    }

    #[test]
    fn malformed_values_name_their_variable() {
        let base = [("TH_TABLE", "t"), ("TH_BASE_URL", "https://a")];
        for (name, value) in [
            ("TH_AUTH_MODE", "jwt"),
            ("TH_ALLOW_PRIVATE_WEBHOOKS", "yes"),
            ("TH_AGENT_PROFILE", "gpt"),
            ("TH_MODEL_CATALOG_JSON", "{"),
            ("TH_STREAM_END_MARGIN_MS", "soon"),
            ("TH_REMOTE_AGENTS", "billing"),
            ("TH_MAX_TURNS", "0"),
            ("TH_LEASE_TTL_SECS", "0"),
            ("TH_BASE_URL", "api.example"),
            ("TH_RATE_LIMIT", "0"),
            ("TH_RATE_LIMIT_BURST", "5"),
        ] {
            let mut pairs = base.to_vec();
            pairs.retain(|(k, _)| *k != name);
            pairs.push((name, value));
            assert_eq!(read(&pairs).expect_err(name).variable, name);
        }
        let c = read(&[
            ("TH_TABLE", "t"),
            ("TH_BASE_URL", "https://a"),
            ("TH_AUTH_MODE", "authorizer"),
            ("TH_STREAM_END_MARGIN_MS", "500"),
            ("TH_RUNNER_FUNCTION", "tiny-harness-runner"),
            ("TH_AGENT_PROFILE", "tck"),
            ("TH_METRICS_NAMESPACE", "Staging/TinyHarness"),
        ])
        .expect("valid");
        assert_eq!(c.metrics_namespace, "Staging/TinyHarness");
        assert_eq!(c.auth, AuthMode::Authorizer);
        assert_eq!(c.stream_end_margin, Duration::from_millis(500));
        assert_eq!(c.runner_function.as_deref(), Some("tiny-harness-runner"));
        assert_eq!(c.settings.agent_profile, AgentProfile::Tck);
    }

    #[test]
    fn an_old_name_stops_the_start_with_its_new_name() {
        for (old, new) in [
            ("TABLE_NAME", "TH_TABLE"),
            ("BASE_URL", "TH_BASE_URL"),
            ("AUTH_MODE", "TH_AUTH_MODE"),
            ("MODEL_CATALOG", "TH_MODEL_CATALOG_JSON"),
            ("RUNNER_FUNCTION", "TH_RUNNER_FUNCTION"),
        ] {
            let error = read(&[("TH_TABLE", "t"), ("TH_BASE_URL", "https://a"), (old, "x")])
                .expect_err(old);
            assert_eq!(error.variable, old);
            assert!(error.reason.contains(new), "{error}");
        }
    }
}
