//! The webhook URL policy: which addresses, schemes and URLs a config may name.

use crate::error::ServiceError;
use crate::push::{WebhookPolicy, check_webhook_url};

const STRICT: WebhookPolicy = WebhookPolicy {
    allow_private: false,
};
const LAX: WebhookPolicy = WebhookPolicy {
    allow_private: true,
};

async fn refused(url: &str, policy: &WebhookPolicy) -> String {
    match check_webhook_url(url, policy).await {
        Err(ServiceError::InvalidParams(why)) => why,
        other => panic!("{url}: expected InvalidParams, got {other:?}"),
    }
}

async fn accepted(url: &str, policy: &WebhookPolicy) {
    let checked = check_webhook_url(url, policy).await;
    assert!(checked.is_ok(), "{url}: {checked:?}");
}

#[tokio::test]
async fn every_non_public_address_class_is_refused() {
    let cases = [
        ("https://127.0.0.1/h", "loopback", "127.0.0.1"),
        ("https://127.9.9.9/h", "loopback", "127.9.9.9"),
        ("https://10.1.2.3/h", "private", "10.1.2.3"),
        ("https://172.16.0.1/h", "private", "172.16.0.1"),
        ("https://172.31.255.255/h", "private", "172.31.255.255"),
        ("https://192.168.1.1/h", "private", "192.168.1.1"),
        (
            "https://169.254.169.254/latest/meta-data",
            "link-local",
            "169.254.169.254",
        ),
        ("https://100.64.0.1/h", "CGNAT", "100.64.0.1"),
        ("https://100.127.255.254/h", "CGNAT", "100.127.255.254"),
        ("https://0.0.0.0/h", "unspecified", "0.0.0.0"),
        ("https://224.0.0.1/h", "multicast", "224.0.0.1"),
        ("https://255.255.255.255/h", "broadcast", "255.255.255.255"),
        ("https://240.0.0.1/h", "reserved", "240.0.0.1"),
        // Other spellings of IPv4 the URL parser normalises.
        ("https://2130706433/h", "loopback", "127.0.0.1"),
        ("https://0x7f.1/h", "loopback", "127.0.0.1"),
        ("https://[::1]/h", "loopback", "::1"),
        ("https://[::]/h", "unspecified", "::"),
        ("https://[fc00::1]/h", "private", "fc00::1"),
        ("https://[fd12:3456::1]/h", "private", "fd12:3456::1"),
        ("https://[fe80::1]/h", "link-local", "fe80::1"),
        ("https://[ff02::1]/h", "multicast", "ff02::1"),
        (
            "https://[::ffff:127.0.0.1]/h",
            "loopback",
            "::ffff:127.0.0.1",
        ),
        ("https://[::ffff:10.0.0.1]/h", "private", "::ffff:10.0.0.1"),
        (
            "https://[::ffff:169.254.169.254]/h",
            "link-local",
            "::ffff:169.254.169.254",
        ),
        (
            "https://[::ffff:100.64.0.1]/h",
            "CGNAT",
            "::ffff:100.64.0.1",
        ),
        ("https://[64:ff9b::a00:1]/h", "private", "64:ff9b::a00:1"),
        ("https://[2002:7f00:1::]/h", "loopback", "2002:7f00:1::"),
    ];
    for (url, class, addr) in cases {
        let why = refused(url, &STRICT).await;
        assert!(why.contains(class), "{url}: {why}");
        assert!(why.contains(&format!("({addr})")), "{url}: {why}");
    }
    let why = refused("https://127.0.0.1/h", &STRICT).await;
    assert_eq!(
        why,
        "webhook URL resolves to a loopback address (127.0.0.1); the operator has not allowed private webhooks"
    );
}

#[tokio::test]
async fn public_addresses_pass() {
    for url in [
        "https://93.184.216.34/hook",
        "https://8.8.8.8:8443/x?y=1",
        "https://[2606:4700:4700::1111]/hook",
        "https://[::ffff:8.8.8.8]/hook",
        "https://172.32.0.1/hook",
        "https://100.128.0.1/hook",
    ] {
        accepted(url, &STRICT).await;
    }
}

#[tokio::test]
async fn localhost_resolves_to_loopback() {
    let why = refused("https://localhost:8443/webhook", &STRICT).await;
    assert!(why.contains("loopback"), "{why}");
    assert!(
        why.contains("operator has not allowed private webhooks"),
        "{why}"
    );
    let url = check_webhook_url("http://localhost:8443/webhook", &LAX)
        .await
        .unwrap();
    assert_eq!(url.as_str(), "http://localhost:8443/webhook");
}

#[tokio::test]
async fn https_always_http_only_when_private_webhooks_are_allowed() {
    let why = refused("http://93.184.216.34/hook", &STRICT).await;
    assert!(why.contains("https"), "{why}");
    accepted("http://93.184.216.34/hook", &LAX).await;
    accepted("http://127.0.0.1:8080/hook", &LAX).await;
    for url in [
        "ftp://93.184.216.34/hook",
        "file:///etc/passwd",
        "ws://93.184.216.34/",
    ] {
        refused(url, &LAX).await;
    }
    for url in ["not a url", "/relative/hook", ""] {
        let why = refused(url, &LAX).await;
        assert!(why.contains("not a valid absolute URL"), "{url}: {why}");
    }
}

#[tokio::test]
async fn credentials_in_the_url_are_refused() {
    for url in [
        "https://user:secret@93.184.216.34/hook",
        "https://user@93.184.216.34/hook",
        "https://:secret@93.184.216.34/hook",
    ] {
        let why = refused(url, &STRICT).await;
        assert!(why.contains("credentials"), "{url}: {why}");
        refused(url, &LAX).await;
    }
}

#[tokio::test]
async fn allowing_private_webhooks_lets_local_addresses_through() {
    for url in [
        "https://127.0.0.1/h",
        "http://127.0.0.1:8080/h",
        "https://10.0.0.1/h",
        "https://169.254.169.254/h",
        "https://100.64.0.1/h",
        "https://[::1]/h",
        "https://[fd00::1]/h",
        "https://[::ffff:127.0.0.1]/h",
        "https://localhost/h",
    ] {
        accepted(url, &LAX).await;
    }
    // Never a TCP destination.
    for url in [
        "https://0.0.0.0/h",
        "https://224.0.0.1/h",
        "https://255.255.255.255/h",
        "https://[::]/h",
    ] {
        refused(url, &LAX).await;
    }
}

#[tokio::test]
async fn a_name_that_does_not_resolve_is_refused_unless_private_webhooks_are_allowed() {
    // `.invalid` never resolves (RFC 6761), with or without DNS.
    let url = "https://hooks.tiny-harness.invalid/webhook";
    let why = refused(url, &STRICT).await;
    assert!(why.contains("could not be resolved"), "{why}");
    // Local and test mode (often offline): accepted; delivery resolves and checks again.
    accepted(url, &LAX).await;
    // The static rules still apply there.
    refused("https://user@hooks.tiny-harness.invalid/webhook", &LAX).await;
}
