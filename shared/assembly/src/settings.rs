//! [`Settings`]: what both hosts configure, read by one set of rules from one set of names
//! (the environment in the functions, the flags and the environment in the local server).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use a2a_http::RateLimit;
use a2a_service::ServiceConfig;
use task_core::commands::ModelCatalog;

use crate::names;

/// The agent behind the tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentProfile {
    /// The model agent: the tool loop over the catalog's models (the offline `echo` model by
    /// default, which answers with the text it got).
    Model,
    /// The A2A TCK's scenarios, chosen by the message id prefix (for conformance runs).
    Tck,
}

/// A configuration error: which variable, and why.
#[derive(Debug, thiserror::Error)]
#[error("{variable}: {reason}")]
pub struct ConfigError {
    pub variable: &'static str,
    pub reason: String,
}

/// An error about `variable`.
pub fn invalid(variable: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        variable,
        reason: reason.into(),
    }
}

/// A variable of the environment; an empty one counts as unset.
pub fn var(name: &'static str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The service's configuration, the same on both hosts.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `TH_BASE_URL`: the public base URL the agent card advertises (an http(s) URL; the
    /// functions need it, the local server defaults to its listen address).
    pub base_url: Option<String>,
    /// `TH_TABLE`: the DynamoDB table (the functions need it; the local server with
    /// `--store dynamodb`).
    pub table: Option<String>,
    /// `TH_DEFAULT_PARTICIPANT`: who requests asserting no participant act as (unset:
    /// refused).
    pub default_participant: Option<String>,
    /// `TH_ALLOW_PRIVATE_WEBHOOKS`: `true` lets push configs name private addresses.
    pub allow_private_webhooks: bool,
    /// `TH_AGENT_ID`: the agent's participant id (default `tiny-harness`).
    pub agent_id: String,
    /// `TH_AGENT_PROFILE`: `model` (default) or `tck`.
    pub agent_profile: AgentProfile,
    /// `TH_MODEL_CATALOG` (a file's path) or `TH_MODEL_CATALOG_JSON` (the JSON text), not
    /// both (default: the `echo` model only).
    pub catalog: ModelCatalog,
    /// `TH_SKILLS_DIR`: the skills shipped with the service (default `skills`, relative to
    /// the working directory: beside the binary in a function's package).
    pub skills_dir: PathBuf,
    /// `TH_REMOTE_AGENTS`: the remote A2A agents `spawn_subtask` may delegate to, `ID=URL`
    /// pairs separated by commas (default none).
    pub remote_agents: BTreeMap<String, String>,
    /// `TH_MAX_TURNS`: model calls one run may make before the task fails (default 50).
    pub max_turns: usize,
    /// `TH_REMOTE_LOST_AFTER_SECS`: how long a remote agent may go without answering a relay
    /// before the relayed sub-task fails as lost (default 300 s).
    pub remote_lost_after: Duration,
    /// `TH_INSTRUCTIONS_FILE` (a file's path) or `TH_INSTRUCTIONS` (the text), not both:
    /// the operator's part of the system prompt (default: the service's own instructions,
    /// `a2a_service::DEFAULT_INSTRUCTIONS`).
    pub instructions: Option<String>,
    /// `TH_TASK_TOKEN_BUDGET`: tokens (input and output) a task may spend in all; overrides
    /// the catalog's `task_token_budget` (default: the catalog's, else unbounded).
    pub task_token_budget: Option<u64>,
    /// `TH_MODEL_RETRY_DEADLINE_SECS`: how long transient model failures are retried,
    /// from the first attempt (default: the models crate's, 60 s).
    pub model_retry_deadline: Option<Duration>,
    /// `TH_LEASE_TTL_SECS`: how long a run's lease lasts unrenewed (default 30): a runner
    /// that dies is replaced by the sweeper after at most this long.
    pub lease_ttl: Duration,
    /// `TH_RATE_LIMIT` (requests per second per caller) and `TH_RATE_LIMIT_BURST` (default:
    /// one second's worth): a limit each process applies on its own (default none).
    pub rate_limit: Option<RateLimit>,
    /// `TH_RETENTION_DAYS`: how long a task in a terminal state is kept after it reached
    /// that state (a sub-task also never before its parent goes); unset or `0`: forever
    /// (the default).
    pub retention: Option<chrono::Duration>,
    /// `TH_METRICS`: `true` records metrics for `GET /metrics` (the local server; default
    /// `false`: recording costs nothing then).
    pub metrics: bool,
    /// `TH_OTLP_ENDPOINT`: the OTLP/HTTP collector the local server exports its spans to, an
    /// http(s) URL (default none: no spans recorded).
    pub otlp_endpoint: Option<String>,
}

/// A configuration read by name from a lookup: the environment, the local server's flags, or
/// a map in tests ([`lookup_from`]). Both hosts' configurations read this way.
pub trait FromLookup: Sized {
    /// Reads from any lookup; a missing or malformed variable is an error naming it.
    fn from_lookup(lookup: impl Fn(&'static str) -> Option<String>) -> Result<Self, ConfigError>;

    /// Reads the environment ([`var`]).
    fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(var)
    }
}

/// A lookup over fixed `(name, value)` pairs (for tests of the configurations).
pub fn lookup_from(
    pairs: &[(&'static str, &str)],
) -> impl Fn(&'static str) -> Option<String> + use<> {
    let map: HashMap<&'static str, String> =
        pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
    move |name| map.get(name).cloned()
}

impl FromLookup for Settings {
    fn from_lookup(lookup: impl Fn(&'static str) -> Option<String>) -> Result<Self, ConfigError> {
        let base_url = lookup(names::BASE_URL);
        if let Some(url) = &base_url
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            return Err(invalid(names::BASE_URL, "must be an http(s) URL"));
        }
        let otlp_endpoint = lookup(names::OTLP_ENDPOINT);
        if let Some(url) = &otlp_endpoint
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            return Err(invalid(names::OTLP_ENDPOINT, "must be an http(s) URL"));
        }
        let allow_private_webhooks = one_of(
            &lookup,
            names::ALLOW_PRIVATE_WEBHOOKS,
            [("true", true), ("false", false)],
            false,
        )?;
        let agent_profile = one_of(
            &lookup,
            names::AGENT_PROFILE,
            [("model", AgentProfile::Model), ("tck", AgentProfile::Tck)],
            AgentProfile::Model,
        )?;
        let lease_ttl = Duration::from_secs(positive(&lookup, names::LEASE_TTL_SECS, 30)?);
        let remote_agents = match lookup(names::REMOTE_AGENTS) {
            None => BTreeMap::new(),
            Some(pairs) => a2a_service::config::parse_remote_agents(pairs.split(','))
                .map_err(|e| invalid(names::REMOTE_AGENTS, e))?,
        };
        let max_turns = positive(&lookup, names::MAX_TURNS, 50)?;
        let task_token_budget = optional_positive(&lookup, names::TASK_TOKEN_BUDGET)?;
        let model_retry_deadline =
            optional_positive(&lookup, names::MODEL_RETRY_DEADLINE_SECS)?.map(Duration::from_secs);
        let remote_lost_after =
            Duration::from_secs(positive(&lookup, names::REMOTE_LOST_AFTER_SECS, 300)?);
        Ok(Self {
            base_url,
            table: lookup(names::TABLE),
            default_participant: lookup(names::DEFAULT_PARTICIPANT),
            allow_private_webhooks,
            agent_id: agent_id(&lookup),
            agent_profile,
            catalog: catalog(&lookup)?,
            skills_dir: lookup(names::SKILLS_DIR)
                .unwrap_or_else(|| "skills".to_owned())
                .into(),
            remote_agents,
            max_turns,
            remote_lost_after,
            instructions: instructions(&lookup)?,
            task_token_budget,
            model_retry_deadline,
            lease_ttl,
            rate_limit: rate_limit(&lookup)?,
            retention: retention(&lookup)?,
            metrics: one_of(
                &lookup,
                names::METRICS,
                [("true", true), ("false", false)],
                false,
            )?,
            otlp_endpoint,
        })
    }
}

/// An error if `lookup` finds one of the old names `olds` selects set: it names the new one.
pub fn refuse_renamed(
    lookup: impl Fn(&'static str) -> Option<String>,
    olds: impl Fn(&names::Renamed) -> bool,
) -> Result<(), ConfigError> {
    match names::renamed_in(lookup, olds) {
        None => Ok(()),
        Some(renamed) => Err(invalid(
            renamed.old,
            format!("this variable was renamed: set {} instead", renamed.new),
        )),
    }
}

/// `TH_AGENT_ID`, or the service's default id (the authorizer reads it the same way).
pub fn agent_id(lookup: impl Fn(&'static str) -> Option<String>) -> String {
    lookup(names::AGENT_ID)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| ServiceConfig::local(String::new()).agent_id)
}

/// A setting that is one of two words (the value of the one it is), or `default` when unset.
pub fn one_of<T>(
    lookup: impl Fn(&'static str) -> Option<String>,
    name: &'static str,
    [(first, first_value), (second, second_value)]: [(&str, T); 2],
    default: T,
) -> Result<T, ConfigError> {
    match lookup(name) {
        None => Ok(default),
        Some(word) if word == first => Ok(first_value),
        Some(word) if word == second => Ok(second_value),
        Some(other) => Err(invalid(
            name,
            format!("{other:?} is neither `{first}` nor `{second}`"),
        )),
    }
}

/// A positive whole number, or `default` when unset.
fn positive<N: std::str::FromStr + PartialOrd + Default>(
    lookup: impl Fn(&'static str) -> Option<String>,
    name: &'static str,
    default: N,
) -> Result<N, ConfigError> {
    match lookup(name) {
        None => Ok(default),
        Some(text) => match text.parse::<N>() {
            Ok(n) if n > N::default() => Ok(n),
            _ => Err(invalid(name, "not a positive number")),
        },
    }
}

/// A positive whole number, or `None` when unset.
fn optional_positive<N: std::str::FromStr + PartialOrd + Default>(
    lookup: impl Fn(&'static str) -> Option<String>,
    name: &'static str,
) -> Result<Option<N>, ConfigError> {
    match lookup(name) {
        None => Ok(None),
        Some(_) => positive(lookup, name, N::default()).map(Some),
    }
}

/// The catalog from its file or its text (one of them), or the `echo` model alone.
fn catalog(lookup: impl Fn(&'static str) -> Option<String>) -> Result<ModelCatalog, ConfigError> {
    match (
        lookup(names::MODEL_CATALOG),
        lookup(names::MODEL_CATALOG_JSON),
    ) {
        (Some(_), Some(_)) => Err(invalid(
            names::MODEL_CATALOG_JSON,
            format!(
                "set together with {}: give the catalog one way",
                names::MODEL_CATALOG
            ),
        )),
        (Some(path), None) => {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                let hint = if path.trim_start().starts_with('{') {
                    format!(
                        " ({} is a file's path; the catalog's JSON text goes in {})",
                        names::MODEL_CATALOG,
                        names::MODEL_CATALOG_JSON
                    )
                } else {
                    String::new()
                };
                invalid(
                    names::MODEL_CATALOG,
                    format!("reading the model catalog {path}: {e}{hint}"),
                )
            })?;
            ModelCatalog::from_json(&text).map_err(|e| {
                invalid(
                    names::MODEL_CATALOG,
                    format!("the model catalog {path}: {e}"),
                )
            })
        }
        (None, Some(text)) => ModelCatalog::from_json(&text)
            .map_err(|e| invalid(names::MODEL_CATALOG_JSON, e.to_string())),
        (None, None) => Ok(ModelCatalog::echo_only()),
    }
}

/// The operator's instructions from their file or their text (one of them), if set.
fn instructions(
    lookup: impl Fn(&'static str) -> Option<String>,
) -> Result<Option<String>, ConfigError> {
    match (
        lookup(names::INSTRUCTIONS_FILE),
        lookup(names::INSTRUCTIONS),
    ) {
        (Some(_), Some(_)) => Err(invalid(
            names::INSTRUCTIONS,
            format!(
                "set together with {}: give the instructions one way",
                names::INSTRUCTIONS_FILE
            ),
        )),
        (Some(path), None) => match std::fs::read_to_string(&path) {
            Ok(text) if !text.trim().is_empty() => Ok(Some(text.trim().to_owned())),
            Ok(_) => Err(invalid(
                names::INSTRUCTIONS_FILE,
                format!("the instructions file {path} is empty"),
            )),
            Err(e) => Err(invalid(
                names::INSTRUCTIONS_FILE,
                format!("reading the instructions file {path}: {e}"),
            )),
        },
        (None, text) => Ok(text.map(|t| t.trim().to_owned())),
    }
}

fn rate_limit(
    lookup: impl Fn(&'static str) -> Option<String>,
) -> Result<Option<RateLimit>, ConfigError> {
    let burst = optional_positive::<u32>(&lookup, names::RATE_LIMIT_BURST)?;
    let Some(rate) = lookup(names::RATE_LIMIT) else {
        return match burst {
            None => Ok(None),
            Some(_) => Err(invalid(
                names::RATE_LIMIT_BURST,
                format!("set without {}", names::RATE_LIMIT),
            )),
        };
    };
    let rate = rate.parse::<f64>().unwrap_or(f64::NAN);
    let burst = burst.unwrap_or_else(|| RateLimit::default_burst(rate));
    RateLimit::new(rate, burst).map(Some).ok_or_else(|| {
        invalid(
            names::RATE_LIMIT,
            "not a positive number of requests per second",
        )
    })
}

/// Whole days, `0` for none; at most 100 years.
fn retention(
    lookup: impl Fn(&'static str) -> Option<String>,
) -> Result<Option<chrono::Duration>, ConfigError> {
    const MAX_DAYS: u32 = 36_500;
    match lookup(names::RETENTION_DAYS) {
        None => Ok(None),
        Some(text) => match text.trim().parse::<u32>() {
            Ok(0) => Ok(None),
            Ok(days) if days <= MAX_DAYS => Ok(Some(chrono::Duration::days(i64::from(days)))),
            _ => Err(invalid(
                names::RETENTION_DAYS,
                format!("not a whole number of days from 0 (forever) to {MAX_DAYS}"),
            )),
        },
    }
}

#[cfg(test)]
mod tests;
