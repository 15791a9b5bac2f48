//! Which webhook URLs we call: the SSRF guard (A2A §13.2: servers SHOULD refuse webhook URLs
//! to private, loopback or link-local addresses).
//!
//! # http or https
//!
//! `https` is always accepted. `http` is accepted **only when the operator allows private
//! webhooks** (`allow_private`, the local and test mode — the TCK's receiver is
//! `http://localhost:<port>/webhook`). Plain http to a public host would carry the
//! `Authorization` credentials, the notification token and the task's content in cleartext
//! over the internet, and every legitimate plain-http receiver we know of is a local one,
//! which needs `allow_private` anyway.
//!
//! # DNS rebinding
//!
//! [`check_webhook_url`] resolves the host when a config is created, but a name can resolve
//! differently later. So at delivery time the [`PushSender`](super::PushSender) resolves
//! through [`PolicyResolver`], which applies the same address rules to every address it
//! returns: the connection goes only to an address checked just before connecting (literal
//! IPs are checked directly, they are never resolved). Redirects are not followed and
//! proxies are not used (a proxy would resolve the name itself).
//!
//! What remains: a public address that the network routes to something internal (the
//! operator's own public IPs, a NAT or load balancer in front of internal services), and
//! IPv6 transition prefixes we do not decode (Teredo `2001::/32`); a webhook receiver that
//! answers a plain 2xx is all we ever learn from it, as no response body is read.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::error::ServiceError;

/// The operator's webhook rules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WebhookPolicy {
    /// Accept webhooks on loopback, private, link-local and other non-public addresses, and
    /// plain `http` (local use and conformance tests). Off in production.
    pub allow_private: bool,
}

/// Why an address is not a public unicast one. `always` classes are never a valid TCP
/// destination and stay refused even when private webhooks are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AddressClass {
    name: &'static str,
    always: bool,
}

const fn class(name: &'static str) -> Option<AddressClass> {
    Some(AddressClass {
        name,
        always: false,
    })
}

const fn never(name: &'static str) -> Option<AddressClass> {
    Some(AddressClass { name, always: true })
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    let [a, b, c, _] = ip.octets();
    if ip.is_unspecified() {
        never("unspecified")
    } else if ip.is_broadcast() {
        never("broadcast")
    } else if ip.is_multicast() {
        never("multicast")
    } else if ip.is_loopback() {
        class("loopback")
    } else if ip.is_private() {
        class("private")
    } else if ip.is_link_local() {
        // 169.254.0.0/16, which holds the cloud metadata service 169.254.169.254.
        class("link-local")
    } else if a == 100 && (b & 0xc0) == 64 {
        class("shared (CGNAT)")
    } else if a == 0 {
        class("\"this network\"")
    } else if a >= 240
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b & 0xfe) == 18)
        || (a == 192 && b == 0 && c == 2)
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
    {
        // 240/4 reserved, 192.0.0/24 protocol assignments, 198.18/15 benchmarking, and the
        // documentation ranges.
        class("reserved")
    } else {
        None
    }
}

/// The IPv4 address an IPv6 address stands for, when it embeds one: IPv4-mapped
/// (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`, deprecated), NAT64 (`64:ff9b::/96`),
/// 6to4 (`2002:AABB:CCDD::/48`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(tail),
        [0, 0, 0, 0, 0, 0, _, _] => Some(tail),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(tail),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    let first = ip.segments()[0];
    if ip.is_unspecified() {
        never("unspecified")
    } else if ip.is_loopback() {
        class("loopback")
    } else if ip.is_multicast() {
        never("multicast")
    } else if (first & 0xfe00) == 0xfc00 {
        // fc00::/7, unique local.
        class("private")
    } else if (first & 0xffc0) == 0xfe80 {
        class("link-local")
    } else if (first & 0xffc0) == 0xfec0 {
        // fec0::/10, the deprecated site-local range.
        class("private")
    } else if let Some(v4) = embedded_v4(ip) {
        classify_v4(v4)
    } else {
        None
    }
}

fn classify(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Why `ip` may not receive webhooks under `policy`, or `None` when it may.
pub fn refusal_reason(ip: IpAddr, policy: &WebhookPolicy) -> Option<String> {
    let class = classify(ip)?;
    if class.always {
        Some(format!(
            "webhook URL resolves to a {} address ({ip}), which cannot receive webhooks",
            class.name
        ))
    } else if policy.allow_private {
        None
    } else {
        Some(format!(
            "webhook URL resolves to a {} address ({ip}); the operator has not allowed private webhooks",
            class.name
        ))
    }
}

/// The host's address when it is a literal IP (the URL parser has normalised it: dotted
/// IPv4, bracketed IPv6), `None` for a domain name.
fn literal_ip(url: &Url) -> Result<Option<IpAddr>, &'static str> {
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or("webhook URL has no host")?;
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6
            .parse::<Ipv6Addr>()
            .map(|ip| Some(IpAddr::V6(ip)))
            .map_err(|_| "webhook URL has an invalid IPv6 host");
    }
    Ok(host.parse::<Ipv4Addr>().ok().map(IpAddr::V4))
}

/// The checks that need no DNS: a parseable absolute URL, its scheme, no credentials, a host.
/// Gives the URL and the host's address when the host is a literal IP (checked already).
pub(crate) fn check_static(
    url: &str,
    policy: &WebhookPolicy,
) -> Result<(Url, Option<IpAddr>), String> {
    let parsed =
        Url::parse(url).map_err(|e| format!("webhook URL is not a valid absolute URL: {e}"))?;
    match parsed.scheme() {
        "https" => {}
        "http" if policy.allow_private => {}
        "http" => {
            return Err(
                "webhook URL must use https (plain http is accepted only when the \
                 operator allows private webhooks, for local use)"
                    .to_owned(),
            );
        }
        other => return Err(format!("webhook URL must use https, not {other}")),
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(
            "webhook URL must not contain credentials; use the config's authentication".to_owned(),
        );
    }
    let ip = literal_ip(&parsed).map_err(str::to_owned)?;
    if let Some(ip) = ip
        && let Some(reason) = refusal_reason(ip, policy)
    {
        return Err(reason);
    }
    Ok((parsed, ip))
}

/// Why a host name was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostRefused {
    /// The name did not resolve (now): no DNS, or no such name.
    Unresolved(String),
    /// One of its addresses may not receive webhooks.
    Address(String),
}

impl HostRefused {
    fn into_reason(self) -> String {
        match self {
            HostRefused::Unresolved(reason) | HostRefused::Address(reason) => reason,
        }
    }
}

/// Resolves `host` and refuses it when any of its addresses is refused (one bad address is
/// enough: the client could pick it).
pub(crate) async fn resolve_checked(
    host: &str,
    port: u16,
    policy: &WebhookPolicy,
) -> Result<Vec<SocketAddr>, HostRefused> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| {
            HostRefused::Unresolved(format!("webhook host {host} could not be resolved: {e}"))
        })?
        .collect();
    if addrs.is_empty() {
        return Err(HostRefused::Unresolved(format!(
            "webhook host {host} has no address"
        )));
    }
    for addr in &addrs {
        if let Some(reason) = refusal_reason(addr.ip(), policy) {
            return Err(HostRefused::Address(reason));
        }
    }
    Ok(addrs)
}

/// Checks a webhook URL when a push config is created (or given inline with a message):
/// `https` (or `http` when private webhooks are allowed), no credentials in the URL, and a
/// host none of whose addresses is loopback, private (RFC 1918, `fc00::/7`), link-local
/// (`169.254/16`, `fe80::/10`), CGNAT (`100.64/10`), reserved, unspecified, multicast or
/// broadcast — IPv4-mapped and other IPv6 forms of those included — unless the policy allows
/// private webhooks (unspecified, multicast and broadcast are refused even then).
///
/// A name that does not resolve is refused, except when private webhooks are allowed (local
/// and test mode, often with no DNS at all): there it is accepted, and delivery resolves it
/// again through [`PolicyResolver`], which applies the same rules at connect time.
///
/// Errors are `ServiceError::InvalidParams` saying why.
pub async fn check_webhook_url(url: &str, policy: &WebhookPolicy) -> Result<Url, ServiceError> {
    let (parsed, literal) = check_static(url, policy).map_err(ServiceError::InvalidParams)?;
    if literal.is_none()
        && let Some(host) = parsed.host_str()
    {
        let port = parsed.port_or_known_default().unwrap_or(443);
        match resolve_checked(host, port, policy).await {
            Ok(_) => {}
            Err(HostRefused::Unresolved(_)) if policy.allow_private => {}
            Err(refused) => return Err(ServiceError::InvalidParams(refused.into_reason())),
        }
    }
    Ok(parsed)
}

/// The error [`PolicyResolver`] gives for a refused address, found again in the request
/// error's source chain.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct RefusedAddress(pub(crate) String);

/// The push client's DNS resolver: the system resolver, then the address rules on every
/// result, so the connection is pinned to addresses checked at connect time.
#[derive(Debug, Clone)]
pub(crate) struct PolicyResolver {
    pub(crate) policy: WebhookPolicy,
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // Port 0: reqwest puts the URL's port (or the scheme's default) in its place.
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            for addr in &addrs {
                if let Some(reason) = refusal_reason(addr.ip(), &policy) {
                    return Err(Box::new(RefusedAddress(format!("{host}: {reason}")))
                        as Box<dyn std::error::Error + Send + Sync>);
                }
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

pub(crate) fn resolver(policy: WebhookPolicy) -> Arc<PolicyResolver> {
    Arc::new(PolicyResolver { policy })
}
