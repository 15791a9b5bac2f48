//! What an operator configures; read once at start-up by `main` (the local server or a
//! Lambda function) and shared by every request.

use std::time::Duration;

use a2a::AgentCard;
use task_core::commands::ModelCatalog;

use crate::refusals::RefusalLimits;

#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// The agent's participant id (kind `agent`, default role `assignee`).
    pub agent_id: String,
    /// The public base URL the agent card advertises for both bindings (no trailing slash).
    pub base_url: String,
    pub name: String,
    pub description: String,
    pub version: String,
    /// Clients that know nothing of the extension (a plain A2A client, the TCK) act as this
    /// participant when they assert none. `None`: such requests are refused.
    pub default_participant: Option<String>,
    /// Webhooks to private, loopback and link-local addresses are refused unless this is set.
    pub allow_private_webhooks: bool,
    pub catalog: ModelCatalog,
    /// An extended agent card for authenticated callers; `None`: not offered.
    pub extended_card: Option<AgentCard>,
    /// A run lease's lifetime; the runner renews it while it works.
    pub lease_ttl: Duration,
    /// How often streams poll the event log for new events.
    pub poll_interval: Duration,
    /// How long a blocking SendMessage waits for the task to settle before it answers with
    /// the task as it is.
    pub blocking_timeout: Duration,
    /// Names this process in lease owners (diagnostics).
    pub instance_id: String,
    /// How many refusals per task and per caller are written down (`refusals`).
    pub refusal_limits: RefusalLimits,
}

impl ServiceConfig {
    /// Defaults for one machine: the echo model, loopback URL, no default participant.
    pub fn local(base_url: impl Into<String>) -> Self {
        Self {
            agent_id: "tiny-harness".to_owned(),
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            name: "tiny-harness".to_owned(),
            description:
                "A tiny agent harness: tasks, plans, participants, tools and skills over A2A"
                    .to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            default_participant: None,
            allow_private_webhooks: false,
            catalog: ModelCatalog::echo_only(),
            extended_card: None,
            lease_ttl: Duration::from_secs(30),
            poll_interval: Duration::from_millis(100),
            blocking_timeout: Duration::from_secs(60),
            instance_id: format!("local-{}", std::process::id()),
            refusal_limits: RefusalLimits::default(),
        }
    }
}

/// Parses the registered remote agents from `ID=URL` pairs (the URL of the agent's card or
/// its base URL, `http` or `https`), as both hosts take them (`--remote-agent`,
/// `TH_REMOTE_AGENTS`). The error names the pair that is wrong.
pub fn parse_remote_agents<S: AsRef<str>>(
    pairs: impl IntoIterator<Item = S>,
) -> Result<std::collections::BTreeMap<String, String>, String> {
    let mut agents = std::collections::BTreeMap::new();
    for pair in pairs {
        let pair = pair.as_ref().trim();
        if pair.is_empty() {
            continue;
        }
        let (id, url) = pair
            .split_once('=')
            .map(|(id, url)| (id.trim(), url.trim()))
            .filter(|(id, url)| {
                !id.is_empty() && (url.starts_with("http://") || url.starts_with("https://"))
            })
            .ok_or_else(|| format!("{pair:?} is not ID=http(s)://…"))?;
        let url = url
            .trim_end_matches("/.well-known/agent-card.json")
            .trim_end_matches('/');
        if agents.insert(id.to_owned(), url.to_owned()).is_some() {
            return Err(format!("the remote agent {id:?} is registered twice"));
        }
    }
    Ok(agents)
}

/// The skills shipped with the service (a directory per skill, each with a `SKILL.md`), or
/// none when the directory is missing or unreadable; skills that cannot be loaded are
/// logged and left out, the rest still load.
pub fn load_skills(dir: &std::path::Path) -> task_core::skills::SkillLibrary {
    use task_core::skills::SkillLibrary;
    match SkillLibrary::load_dir(dir) {
        Ok((library, skipped)) => {
            for skip in skipped {
                tracing::warn!(skill = ?skip, "a skill was not loaded");
            }
            library
        }
        Err(err) => {
            tracing::info!(dir = %dir.display(), error = %err, "no skills loaded");
            SkillLibrary::empty()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn remote_agents_are_id_url_pairs() {
        let agents = parse_remote_agents([
            "billing=https://billing.example/",
            " search = http://127.0.0.1:9/.well-known/agent-card.json",
            "",
        ])
        .expect("valid pairs");
        assert_eq!(agents["billing"], "https://billing.example");
        assert_eq!(agents["search"], "http://127.0.0.1:9");
        for bad in ["billing", "=https://x", "billing=ftp://x", "billing=x"] {
            assert!(parse_remote_agents([bad]).is_err(), "{bad}");
        }
        assert_eq!(
            parse_remote_agents(["a=http://x", "a=http://y"]).unwrap_err(),
            "the remote agent \"a\" is registered twice"
        );
    }
}
