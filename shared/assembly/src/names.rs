//! Every setting's one name: the environment variable both hosts and the SAM template use
//! (`TH_` for what the service itself reads; AWS's own variables stay AWS's), the local
//! server's flag for it, and the old names that are refused at start-up.

/// The public base URL the agent card advertises (`--base-url`).
pub const BASE_URL: &str = "TH_BASE_URL";
/// The DynamoDB table (`--table`).
pub const TABLE: &str = "TH_TABLE";
/// Who callers asserting no participant act as (`--default-participant`).
pub const DEFAULT_PARTICIPANT: &str = "TH_DEFAULT_PARTICIPANT";
/// `true` lets push configs name private addresses (`--allow-private-webhooks`).
pub const ALLOW_PRIVATE_WEBHOOKS: &str = "TH_ALLOW_PRIVATE_WEBHOOKS";
/// The agent's participant id (`--agent-id`).
pub const AGENT_ID: &str = "TH_AGENT_ID";
/// `model` or `tck` (`--agent-profile`).
pub const AGENT_PROFILE: &str = "TH_AGENT_PROFILE";
/// The model catalog: the path of its JSON file (`--model-catalog`).
pub const MODEL_CATALOG: &str = "TH_MODEL_CATALOG";
/// The model catalog: its JSON text (`--model-catalog-json`).
pub const MODEL_CATALOG_JSON: &str = "TH_MODEL_CATALOG_JSON";
/// The skills shipped with the service (`--skills-dir`).
pub const SKILLS_DIR: &str = "TH_SKILLS_DIR";
/// `ID=URL` pairs separated by commas (`--remote-agent`, repeatable).
pub const REMOTE_AGENTS: &str = "TH_REMOTE_AGENTS";
/// Model calls one run may make (`--max-turns`).
pub const MAX_TURNS: &str = "TH_MAX_TURNS";
/// Seconds a remote agent may go without answering a relay before the relayed sub-task fails
/// as lost (`--remote-lost-after-secs`).
pub const REMOTE_LOST_AFTER_SECS: &str = "TH_REMOTE_LOST_AFTER_SECS";
/// The operator's instructions, the system prompt's first part: a file's path
/// (`--instructions-file`).
pub const INSTRUCTIONS_FILE: &str = "TH_INSTRUCTIONS_FILE";
/// The operator's instructions as text (`--instructions`).
pub const INSTRUCTIONS: &str = "TH_INSTRUCTIONS";
/// Tokens a task may spend in all (`--task-token-budget`; overrides the catalog's).
pub const TASK_TOKEN_BUDGET: &str = "TH_TASK_TOKEN_BUDGET";
/// Seconds transient model failures are retried for, from the first attempt
/// (`--model-retry-deadline-secs`).
pub const MODEL_RETRY_DEADLINE_SECS: &str = "TH_MODEL_RETRY_DEADLINE_SECS";
/// A runner's lease, in seconds (`--lease-ttl-secs`).
pub const LEASE_TTL_SECS: &str = "TH_LEASE_TTL_SECS";
/// Requests per second per caller (`--rate-limit`).
pub const RATE_LIMIT: &str = "TH_RATE_LIMIT";
/// Requests a caller may send at once (`--rate-limit-burst`).
pub const RATE_LIMIT_BURST: &str = "TH_RATE_LIMIT_BURST";
/// Days a task in a terminal state is kept after it reached it; unset or 0: forever
/// (`--retention-days`).
pub const RETENTION_DAYS: &str = "TH_RETENTION_DAYS";
/// The OTLP/HTTP collector spans are exported to (`--otlp-endpoint`; the local server's: the
/// functions export to X-Ray).
pub const OTLP_ENDPOINT: &str = "TH_OTLP_ENDPOINT";

/// `true` records metrics and serves them at `GET /metrics` (the local server's `--metrics`;
/// the functions always record them, as EMF).
pub const METRICS: &str = "TH_METRICS";

/// The functions only: the CloudWatch namespace of their EMF metrics (default `TinyHarness`).
pub const METRICS_NAMESPACE: &str = "TH_METRICS_NAMESPACE";
/// The functions only: `none` or `authorizer`.
pub const AUTH_MODE: &str = "TH_AUTH_MODE";
/// The functions only: how long before its deadline a stream ends, in milliseconds.
pub const STREAM_END_MARGIN_MS: &str = "TH_STREAM_END_MARGIN_MS";
/// The functions only: the function `returnImmediately` runs are handed to.
pub const RUNNER_FUNCTION: &str = "TH_RUNNER_FUNCTION";
/// The authorizer only: the JWT issuer, audience, JWKS and algorithms.
pub const JWT_ISSUER: &str = "TH_JWT_ISSUER";
pub const JWT_AUDIENCE: &str = "TH_JWT_AUDIENCE";
pub const JWT_JWKS_URL: &str = "TH_JWT_JWKS_URL";
pub const JWT_ALGORITHMS: &str = "TH_JWT_ALGORITHMS";

/// The local server's flag for each shared setting (for error messages).
const FLAGS: [(&str, &str); 22] = [
    (BASE_URL, "--base-url"),
    (TABLE, "--table"),
    (DEFAULT_PARTICIPANT, "--default-participant"),
    (ALLOW_PRIVATE_WEBHOOKS, "--allow-private-webhooks"),
    (AGENT_ID, "--agent-id"),
    (AGENT_PROFILE, "--agent-profile"),
    (MODEL_CATALOG, "--model-catalog"),
    (MODEL_CATALOG_JSON, "--model-catalog-json"),
    (SKILLS_DIR, "--skills-dir"),
    (REMOTE_AGENTS, "--remote-agent"),
    (MAX_TURNS, "--max-turns"),
    (REMOTE_LOST_AFTER_SECS, "--remote-lost-after-secs"),
    (INSTRUCTIONS_FILE, "--instructions-file"),
    (INSTRUCTIONS, "--instructions"),
    (TASK_TOKEN_BUDGET, "--task-token-budget"),
    (MODEL_RETRY_DEADLINE_SECS, "--model-retry-deadline-secs"),
    (LEASE_TTL_SECS, "--lease-ttl-secs"),
    (RATE_LIMIT, "--rate-limit"),
    (RATE_LIMIT_BURST, "--rate-limit-burst"),
    (RETENTION_DAYS, "--retention-days"),
    (METRICS, "--metrics"),
    (OTLP_ENDPOINT, "--otlp-endpoint"),
];

/// The local server's flag for the variable `name`, if it has one.
pub fn flag(name: &str) -> Option<&'static str> {
    FLAGS.iter().find(|(var, _)| *var == name).map(|(_, f)| *f)
}

/// A variable an earlier version read, and the one that replaced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renamed {
    pub old: &'static str,
    pub new: &'static str,
    /// Whether the local server read it (else only the functions did).
    pub local_server: bool,
}

const fn renamed(old: &'static str, new: &'static str) -> Renamed {
    Renamed {
        old,
        new,
        local_server: false,
    }
}

/// The old names. Set, they stop the start with the new name, so that a deployment still
/// carrying them is not silently run with defaults.
pub const RENAMED: [Renamed; 20] = [
    Renamed {
        old: "TABLE_NAME",
        new: TABLE,
        local_server: true,
    },
    renamed("BASE_URL", BASE_URL),
    renamed("AUTH_MODE", AUTH_MODE),
    renamed("DEFAULT_PARTICIPANT", DEFAULT_PARTICIPANT),
    renamed("ALLOW_PRIVATE_WEBHOOKS", ALLOW_PRIVATE_WEBHOOKS),
    renamed("AGENT_ID", AGENT_ID),
    renamed("AGENT_PROFILE", AGENT_PROFILE),
    // The functions' catalog was its JSON text; TH_MODEL_CATALOG is a file's path.
    renamed("MODEL_CATALOG", MODEL_CATALOG_JSON),
    renamed("STREAM_END_MARGIN_MS", STREAM_END_MARGIN_MS),
    renamed("RUNNER_FUNCTION", RUNNER_FUNCTION),
    renamed("LEASE_TTL_SECS", LEASE_TTL_SECS),
    renamed("SKILLS_DIR", SKILLS_DIR),
    renamed("REMOTE_AGENTS", REMOTE_AGENTS),
    renamed("MAX_TURNS", MAX_TURNS),
    renamed("RATE_LIMIT", RATE_LIMIT),
    renamed("RATE_LIMIT_BURST", RATE_LIMIT_BURST),
    renamed("JWT_ISSUER", JWT_ISSUER),
    renamed("JWT_AUDIENCE", JWT_AUDIENCE),
    renamed("JWT_JWKS_URL", JWT_JWKS_URL),
    renamed("JWT_ALGORITHMS", JWT_ALGORITHMS),
];

/// The first old name among `olds` that `lookup` finds set.
pub fn renamed_in(
    lookup: impl Fn(&'static str) -> Option<String>,
    olds: impl Fn(&Renamed) -> bool,
) -> Option<Renamed> {
    RENAMED
        .iter()
        .filter(|r| olds(r))
        .find(|r| lookup(r.old).is_some())
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_new_name_has_the_prefix_and_every_old_name_is_listed_once() {
        for r in RENAMED {
            assert!(r.new.starts_with("TH_"), "{r:?}");
            assert_eq!(RENAMED.iter().filter(|o| o.old == r.old).count(), 1);
        }
        assert_eq!(flag(AGENT_ID), Some("--agent-id"));
        assert_eq!(flag(AUTH_MODE), None);
    }

    #[test]
    fn an_old_name_set_is_found_with_its_new_one() {
        let found = renamed_in(|n| (n == "AGENT_ID").then(|| "x".to_owned()), |_| true);
        assert_eq!(found.map(|r| r.new), Some(AGENT_ID));
        let local = renamed_in(
            |n| (n == "AGENT_ID").then(|| "x".to_owned()),
            |r| r.local_server,
        );
        assert_eq!(local, None);
    }
}
