//! The settings' defaults and the errors naming their variable.

use super::*;

fn read(pairs: &[(&'static str, &str)]) -> Result<Settings, ConfigError> {
    Settings::from_lookup(lookup_from(pairs))
}

#[test]
fn defaults() {
    let c = read(&[]).expect("valid");
    assert_eq!(c.base_url, None);
    assert_eq!(c.table, None);
    assert_eq!(c.agent_profile, AgentProfile::Model);
    assert_eq!(c.agent_id, "tiny-harness");
    assert!(!c.allow_private_webhooks);
    assert_eq!(c.default_participant, None);
    assert_eq!(c.catalog.default_model().id, "echo");
    assert_eq!(c.lease_ttl, Duration::from_secs(30));
    assert_eq!(c.skills_dir, PathBuf::from("skills"));
    assert!(c.remote_agents.is_empty());
    assert_eq!(c.max_turns, 50);
    assert_eq!(c.remote_lost_after, Duration::from_secs(300));
    assert_eq!(c.rate_limit, None);
    assert_eq!(c.instructions, None);
    assert_eq!(c.task_token_budget, None);
    assert_eq!(c.model_retry_deadline, None);
    assert!(!c.metrics);
    assert_eq!(c.retention, None, "kept forever unless set");
}

#[test]
fn retention_is_whole_days_and_zero_is_forever() {
    let c = read(&[("TH_RETENTION_DAYS", "30")]).expect("valid");
    assert_eq!(c.retention, Some(chrono::Duration::days(30)));
    let c = read(&[("TH_RETENTION_DAYS", "0")]).expect("valid");
    assert_eq!(c.retention, None);
    for bad in ["-1", "1.5", "a week", "36501"] {
        let err = read(&[("TH_RETENTION_DAYS", bad)]).expect_err(bad);
        assert_eq!(err.variable, "TH_RETENTION_DAYS");
    }
}

#[test]
fn the_instructions_come_from_their_text_or_their_file_never_both() {
    let dir = std::env::temp_dir().join(format!("th-instructions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("instructions.md");
    std::fs::write(&file, "  Be brief.\n").expect("file");
    let path = file.to_str().expect("utf-8");
    let c = read(&[("TH_INSTRUCTIONS_FILE", path)]).expect("valid");
    assert_eq!(c.instructions.as_deref(), Some("Be brief."));
    let c = read(&[("TH_INSTRUCTIONS", "Be kind.")]).expect("valid");
    assert_eq!(c.instructions.as_deref(), Some("Be kind."));
    let both = read(&[("TH_INSTRUCTIONS_FILE", path), ("TH_INSTRUCTIONS", "x")]);
    assert_eq!(both.expect_err("both").variable, "TH_INSTRUCTIONS");
    std::fs::write(&file, " \n").expect("file");
    let empty = read(&[("TH_INSTRUCTIONS_FILE", path)]);
    assert_eq!(empty.expect_err("empty").variable, "TH_INSTRUCTIONS_FILE");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn malformed_values_name_their_variable() {
    for (name, value) in [
        ("TH_ALLOW_PRIVATE_WEBHOOKS", "yes"),
        ("TH_AGENT_PROFILE", "gpt"),
        ("TH_MODEL_CATALOG_JSON", "{"),
        ("TH_MODEL_CATALOG", "/no/such/catalog.json"),
        ("TH_REMOTE_AGENTS", "billing"),
        ("TH_MAX_TURNS", "0"),
        ("TH_REMOTE_LOST_AFTER_SECS", "0"),
        ("TH_LEASE_TTL_SECS", "0"),
        ("TH_BASE_URL", "api.example"),
        ("TH_RATE_LIMIT", "0"),
        ("TH_RATE_LIMIT", "fast"),
        ("TH_RATE_LIMIT_BURST", "0"),
        ("TH_RATE_LIMIT_BURST", "5"),
        ("TH_INSTRUCTIONS_FILE", "/no/such/instructions.md"),
        ("TH_TASK_TOKEN_BUDGET", "0"),
        ("TH_TASK_TOKEN_BUDGET", "lots"),
        ("TH_MODEL_RETRY_DEADLINE_SECS", "0"),
        ("TH_METRICS", "on"),
    ] {
        assert_eq!(read(&[(name, value)]).expect_err(name).variable, name);
    }
}

#[test]
fn values_are_read() {
    let c = read(&[
        ("TH_TABLE", "t"),
        ("TH_BASE_URL", "https://a"),
        ("TH_ALLOW_PRIVATE_WEBHOOKS", "true"),
        ("TH_AGENT_ID", "bob"),
        ("TH_AGENT_PROFILE", "tck"),
        ("TH_DEFAULT_PARTICIPANT", "tck"),
        ("TH_SKILLS_DIR", "/opt/skills"),
        (
            "TH_REMOTE_AGENTS",
            "billing=https://billing.example,search=http://10.0.0.9/",
        ),
        ("TH_MAX_TURNS", "8"),
        ("TH_REMOTE_LOST_AFTER_SECS", "2"),
        ("TH_LEASE_TTL_SECS", "5"),
        ("TH_RATE_LIMIT", "2.5"),
        ("TH_TASK_TOKEN_BUDGET", "50000"),
        ("TH_MODEL_RETRY_DEADLINE_SECS", "7"),
        ("TH_METRICS", "true"),
    ])
    .expect("valid");
    assert!(c.metrics);
    assert_eq!(c.task_token_budget, Some(50_000));
    assert_eq!(c.model_retry_deadline, Some(Duration::from_secs(7)));
    assert_eq!(c.table.as_deref(), Some("t"));
    assert_eq!(c.base_url.as_deref(), Some("https://a"));
    assert_eq!(c.rate_limit, RateLimit::new(2.5, 3));
    assert_eq!(c.skills_dir, PathBuf::from("/opt/skills"));
    assert_eq!(c.remote_agents["search"], "http://10.0.0.9");
    assert_eq!(c.remote_agents.len(), 2);
    assert_eq!(c.max_turns, 8);
    assert_eq!(c.remote_lost_after, Duration::from_secs(2));
    assert_eq!(c.lease_ttl, Duration::from_secs(5));
    assert!(c.allow_private_webhooks);
    assert_eq!(c.agent_id, "bob");
    assert_eq!(c.agent_profile, AgentProfile::Tck);
    assert_eq!(c.default_participant.as_deref(), Some("tck"));
    let c = read(&[("TH_RATE_LIMIT", "10"), ("TH_RATE_LIMIT_BURST", "40")]).expect("valid");
    assert_eq!(c.rate_limit, RateLimit::new(10.0, 40));
}

#[test]
fn the_catalog_comes_from_its_text_or_its_file_never_both() {
    let text = r#"{"default_model": "e", "models": [{"id": "e", "provider": "echo"}]}"#;
    let c = read(&[("TH_MODEL_CATALOG_JSON", text)]).expect("valid");
    assert_eq!(c.catalog.default_model().id, "e");

    let dir = std::env::temp_dir().join(format!("assembly-catalog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("catalog.json");
    std::fs::write(&path, text).expect("written");
    let path = path.to_str().expect("utf-8");
    let c = read(&[("TH_MODEL_CATALOG", path)]).expect("valid");
    assert_eq!(c.catalog.default_model().id, "e");

    let both = read(&[("TH_MODEL_CATALOG", path), ("TH_MODEL_CATALOG_JSON", text)]);
    assert_eq!(both.expect_err("both").variable, "TH_MODEL_CATALOG_JSON");
    let _ = std::fs::remove_dir_all(&dir);

    // The JSON text under the path's name says where it goes.
    let misplaced = read(&[("TH_MODEL_CATALOG", text)]).expect_err("not a path");
    assert!(
        misplaced.reason.contains("TH_MODEL_CATALOG_JSON"),
        "{misplaced}"
    );
}

#[test]
fn an_old_name_is_refused_with_its_new_one() {
    let lookup = |n: &'static str| (n == "MODEL_CATALOG").then(|| "{}".to_owned());
    let error = refuse_renamed(lookup, |_| true).expect_err("renamed");
    assert_eq!(error.variable, "MODEL_CATALOG");
    assert!(error.reason.contains("TH_MODEL_CATALOG_JSON"), "{error}");
    assert!(refuse_renamed(lookup, |r| r.local_server).is_ok());
}

#[test]
fn the_otlp_endpoint_is_an_http_url_and_off_by_default() {
    assert_eq!(read(&[]).expect("valid").otlp_endpoint, None);
    let c = read(&[("TH_OTLP_ENDPOINT", "http://127.0.0.1:4318")]).expect("valid");
    assert_eq!(c.otlp_endpoint.as_deref(), Some("http://127.0.0.1:4318"));
    let bad = read(&[("TH_OTLP_ENDPOINT", "127.0.0.1:4318")]);
    assert_eq!(bad.expect_err("no scheme").variable, "TH_OTLP_ENDPOINT");
}
