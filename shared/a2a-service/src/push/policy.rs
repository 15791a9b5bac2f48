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
//! # IPv4 inside IPv6
//!
//! An IPv6 address that carries an IPv4 address can reach that IPv4 host (through the
//! kernel's dual stack, a translator or a tunnel), so every IPv4 address an IPv6 address may
//! stand for is decoded and the IPv4 rules apply to each; the strictest verdict wins (see
//! [`embedded_v4`]): IPv4-mapped, IPv4-translated, IPv4-compatible, NAT64 with the well-known
//! prefix and with the local-use prefix `64:ff9b:1::/48`, 6to4, Teredo (server and client)
//! and ISATAP interface ids.
//!
//! What remains: a public address that the network routes to something internal (the
//! operator's own public IPs, a NAT or load balancer in front of internal services); a NAT64
//! prefix of the operator's own (a network-specific prefix, which an address does not name);
//! and a local-use NAT64 translator at /48, /56 or /64 that ignores a non-zero RFC 6052
//! suffix (such addresses are read in their /96 form only, see [`nat64_local_use`]). A webhook
//! receiver that answers a plain 2xx is all we ever learn from it, as no response body is
//! read.

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

/// `len` bits of `bits` starting `from` bits after its most significant one.
fn bits_at(bits: u128, from: u32, len: u32) -> u32 {
    ((bits >> (128 - from - len)) & ((1u128 << len) - 1)) as u32
}

/// The IPv4 addresses of a local-use NAT64 address (`64:ff9b:1::/48`, RFC 8215: a translator
/// may use it, or a longer prefix inside it, at the RFC 6052 lengths 48, 56, 64 or 96). RFC
/// 6052 section 2.2 places the 32 IPv4 bits around the reserved octet `u` (bits 64..71, zero)
/// by prefix length; the bits after them are the suffix (zero):
///
/// | prefix | IPv4 bits | suffix |
/// |---|---|---|
/// | /96 | 96..127 | none |
/// | /64 | 72..103 | 104..127 |
/// | /56 | 56..63 and 72..95 | 96..127 |
/// | /48 | 48..63 and 72..87 | 88..127 |
///
/// An address does not say which length its network uses, so each reading that fits it is
/// taken and the strictest verdict wins:
///
/// - /96, always: as deployed (DNS64 synthesising `64:ff9b:1::/96`, or a /96 inside the /48),
///   the IPv4 address is the last 32 bits;
/// - /64, when `u` and its suffix are zero. A /96 address of a public host is not refused for
///   this reading unless its IPv4 address ends in `.0.0.0` (else its /64 suffix is not zero);
/// - /56 and /48 need no reading of their own: their suffix covers bits 96..127, so a well
///   formed address of theirs reads as `0.0.0.0` at /96 and is refused whatever it carries.
///
/// Not covered: a translator at /48, /56 or /64 that ignores a non-zero suffix.
fn nat64_local_use(bits: u128) -> Vec<Ipv4Addr> {
    let as_96 = Ipv4Addr::from(bits as u32);
    let u_is_zero = bits_at(bits, 64, 8) == 0;
    let suffix_is_zero = bits_at(bits, 104, 24) == 0;
    if u_is_zero && suffix_is_zero {
        vec![as_96, Ipv4Addr::from(bits_at(bits, 72, 32))]
    } else {
        vec![as_96]
    }
}

/// Every IPv4 address an IPv6 address may stand for:
///
/// - IPv4-mapped `::ffff:a.b.c.d` (the dual-stack kernel connects to the IPv4 host);
/// - IPv4-translated `::ffff:0:a.b.c.d` (SIIT, RFC 2765);
/// - IPv4-compatible `::a.b.c.d` (deprecated);
/// - NAT64, well-known prefix `64:ff9b::/96` (RFC 6052; used at /96 only): the last 32 bits;
/// - NAT64, local-use prefix `64:ff9b:1::/48` (RFC 8215): see [`nat64_local_use`];
/// - 6to4 `2002:AABB:CCDD::/48` (RFC 3056): the relay's IPv4 in bits 16..47;
/// - Teredo `2001::/32` (RFC 4380): the server's IPv4 in bits 32..63 and the client's, XORed
///   with `0xffffffff`, in the last 32 bits (both are hosts the packets go to);
/// - ISATAP interface ids `…:0:5efe:a.b.c.d` and `…:200:5efe:a.b.c.d` under any prefix
///   (RFC 5214): the tunnel's IPv4 endpoint in the last 32 bits.
fn embedded_v4(ip: Ipv6Addr) -> Vec<Ipv4Addr> {
    let s = ip.segments();
    let bits = u128::from(ip);
    let tail = Ipv4Addr::from(bits as u32);
    let mut found = match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => vec![tail],
        [0, 0, 0, 0, 0xffff, 0, _, _] => vec![tail],
        [0, 0, 0, 0, 0, 0, _, _] => vec![tail],
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => vec![tail],
        [0x64, 0xff9b, 1, ..] => nat64_local_use(bits),
        [0x2002, ..] => vec![Ipv4Addr::from(bits_at(bits, 16, 32))],
        [0x2001, 0, ..] => vec![Ipv4Addr::from(bits_at(bits, 32, 32)), !tail],
        _ => Vec::new(),
    };
    if (s[4] & 0xfdff) == 0 && s[5] == 0x5efe {
        found.push(tail);
    }
    found
}

/// The stricter of two verdicts: refused always, then refused unless private webhooks are
/// allowed, then accepted.
fn strictest(a: Option<AddressClass>, b: Option<AddressClass>) -> Option<AddressClass> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.always && !a.always { b } else { a }),
        (a, b) => a.or(b),
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
    } else {
        embedded_v4(ip)
            .into_iter()
            .map(classify_v4)
            .fold(None, strictest)
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

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: WebhookPolicy = WebhookPolicy {
        allow_private: false,
    };
    const LENIENT: WebhookPolicy = WebhookPolicy {
        allow_private: true,
    };

    fn v6(text: &str) -> IpAddr {
        IpAddr::V6(text.parse().unwrap_or_else(|e| panic!("{text}: {e}")))
    }

    /// `address` is refused (strictly) as `class`, naming itself.
    fn refused_as(address: &str, class: &str) {
        let reason = refusal_reason(v6(address), &STRICT)
            .unwrap_or_else(|| panic!("{address} was accepted, not refused as {class}"));
        assert!(
            reason.contains(&format!("a {class} address")),
            "{address}: {reason}"
        );
    }

    fn accepted(address: &str) {
        assert_eq!(refusal_reason(v6(address), &STRICT), None, "{address}");
    }

    #[test]
    fn ipv4_translated_addresses_are_decoded() {
        // ::ffff:0:a.b.c.d (SIIT).
        refused_as("::ffff:0:7f00:1", "loopback");
        refused_as("::ffff:0:127.0.0.1", "loopback");
        refused_as("::ffff:0:a00:1", "private");
        refused_as("::ffff:0:a9fe:a9fe", "link-local");
        accepted("::ffff:0:808:808");
        // The URL as a client would send it.
        let error = check_static("https://[::ffff:0:7f00:1]/hook", &STRICT)
            .expect_err("an IPv4-translated loopback webhook");
        assert!(error.contains("loopback"), "{error}");
        assert!(check_static("https://[::ffff:0:7f00:1]/hook", &LENIENT).is_ok());
    }

    #[test]
    fn local_use_nat64_addresses_are_decoded_at_every_prefix_length() {
        // /96 (as DNS64 synthesises them): the last 32 bits, whatever the 48..95 bits hold.
        refused_as("64:ff9b:1::7f00:1", "loopback");
        refused_as("64:ff9b:1::a9fe:a9fe", "link-local");
        refused_as("64:ff9b:1::a00:1", "private");
        refused_as("64:ff9b:1:abcd:1234:5678:a00:1", "private");
        accepted("64:ff9b:1::808:808");
        accepted("64:ff9b:1:abcd:1234:5678:808:808");
        // /64: the IPv4 in bits 72..103 (after the zero `u` octet), the suffix zero. Read at
        // /96 this one is 1.0.0.0, a public address.
        refused_as("64:ff9b:1:0:7f:0:100:0", "loopback");
        refused_as("64:ff9b:1:42:a:0:100:0", "private");
        // 169.254.169.254 at /64 (254.0.0.0, reserved, at /96).
        let metadata = refusal_reason(v6("64:ff9b:1:42:a9:fea9:fe00:0"), &STRICT);
        assert!(metadata.is_some(), "the metadata service at /64");
        // /56 (bits 56..63 and 72..95) and /48 (48..63 and 72..87): 0.0.0.0 at /96, so
        // refused whatever they carry, private or public.
        refused_as("64:ff9b:1:a:0:1::", "unspecified");
        refused_as("64:ff9b:1:a9fe:a9:fe00::", "unspecified");
        refused_as("64:ff9b:1:808:8:800::", "unspecified");
        // `u` not zero: no RFC 6052 address but /96, which is public here.
        accepted("64:ff9b:1:0:ff7f:0:100:0");
        // The well-known prefix stays /96 only.
        refused_as("64:ff9b::7f00:1", "loopback");
        accepted("64:ff9b::808:808");
        let error = check_static("https://[64:ff9b:1::a9fe:a9fe]/hook", &STRICT)
            .expect_err("the metadata service through local-use NAT64");
        assert!(error.contains("link-local"), "{error}");
    }

    #[test]
    fn teredo_server_and_client_are_both_checked() {
        // 2001:0:SSSS:SSSS:flags:port:CCCC:CCCC, the client XORed with ffff:ffff.
        // Server 8.8.8.8, client 1.1.1.1: both public.
        accepted("2001:0:808:808:8000:ffff:fefe:fefe");
        // Server 8.8.8.8, client 127.0.0.1.
        refused_as("2001:0:808:808::80ff:fffe", "loopback");
        // Server 8.8.8.8, client 169.254.169.254 (the metadata service).
        refused_as("2001:0:808:808:8000:ffff:5601:5601", "link-local");
        // Server 10.0.0.1, client 1.1.1.1.
        refused_as("2001:0:a00:1:8000:ffff:fefe:fefe", "private");
        // Server 192.168.0.1, client 10.0.0.1: whichever, refused.
        assert!(refusal_reason(v6("2001:0:c0a8:1::f5ff:fffe"), &STRICT).is_some());
    }

    #[test]
    fn the_strictest_verdict_wins() {
        // Teredo: server 10.0.0.1 (private, allowed when private webhooks are), client
        // 255.255.255.255 (broadcast, never a destination).
        let both = v6("2001:0:a00:1::");
        let reason = refusal_reason(both, &LENIENT).expect("the broadcast client");
        assert!(reason.contains("broadcast"), "{reason}");
        // Server public, client private: allowed only when private webhooks are.
        let client_private = v6("2001:0:808:808::f5ff:fffe");
        assert!(refusal_reason(client_private, &STRICT).is_some());
        assert_eq!(refusal_reason(client_private, &LENIENT), None);
        // Local-use NAT64: public at /96 (1.0.0.0), multicast at /64 (224.0.0.1): never.
        let reason =
            refusal_reason(v6("64:ff9b:1:0:e0:0:100:0"), &LENIENT).expect("224.0.0.1 at /64");
        assert!(reason.contains("multicast"), "{reason}");
    }

    #[test]
    fn six_to_four_and_isatap_are_decoded() {
        // 6to4: 2002:AABB:CCDD::/48.
        refused_as("2002:a9fe:a9fe::1", "link-local");
        refused_as("2002:7f00:1::", "loopback");
        accepted("2002:808:808::1");
        // ISATAP interface ids, under a global prefix.
        refused_as("2600:1f18:1:2:0:5efe:a9fe:a9fe", "link-local");
        refused_as("2600:1f18:1:2:200:5efe:a00:1", "private");
        accepted("2600:1f18:1:2:200:5efe:808:808");
    }

    #[test]
    fn the_forms_decoded_before_still_are() {
        refused_as("::ffff:127.0.0.1", "loopback");
        refused_as("::ffff:169.254.169.254", "link-local");
        refused_as("::10.0.0.1", "private");
        accepted("::ffff:8.8.8.8");
        accepted("2600:1f18::1");
    }
}
