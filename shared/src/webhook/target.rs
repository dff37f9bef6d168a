//! Where a webhook may be sent: a URL checked when a subscription is created or changed,
//! and the addresses it resolves to checked at every attempt. Private, loopback,
//! link-local and other special-purpose networks (IPv4 and IPv6, IPv4-mapped IPv6
//! included) are refused unless the operator allowlisted them
//! (`webhooks.allowed_networks`): a tenant must not make the server reach into its own
//! network (SSRF).

use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;
use url::Url;

/// Longest URL a subscription may have (the column's CHECK says the same).
pub const MAX_URL_CHARS: usize = 2048;

/// Networks no receiver may be in unless allowlisted: RFC 6890's special-purpose
/// registries (this host, private, shared, loopback, link-local, documentation,
/// benchmarking, multicast, reserved) and their IPv6 counterparts, with the IPv6 ranges
/// that embed an IPv4 address (6to4, NAT64, IPv4-compatible) refused whole.
const REFUSED_NETWORKS: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "::/96",
    "::1/128",
    "64:ff9b::/96",
    "64:ff9b:1::/48",
    "100::/64",
    "2001:db8::/32",
    "2002::/16",
    "fc00::/7",
    "fe80::/10",
    "fec0::/10",
    "ff00::/8",
];

/// Why a URL or an address is refused, in words safe for the tenant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("the URL is not a valid absolute URL")]
    Malformed,
    #[error("the URL is longer than 2048 characters")]
    TooLong,
    #[error("the URL must use http or https")]
    Scheme,
    #[error("the URL must name a host")]
    NoHost,
    #[error("the URL must not carry a user name or password")]
    Credentials,
    #[error("the URL names a private, loopback or link-local address")]
    PrivateAddress,
    #[error("the host name resolves to no address")]
    Unresolved,
}

impl TargetError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::PrivateAddress => "webhook_target_refused",
            Self::Unresolved => "webhook_target_unresolved",
            _ => "invalid_webhook_url",
        }
    }
}

/// Parses CIDR networks (a bare address is its own /32 or /128); the first entry that
/// is neither, on error.
pub fn parse_networks(entries: &[String]) -> Result<Vec<IpNet>, String> {
    entries
        .iter()
        .map(|entry| {
            let entry = entry.trim();
            entry
                .parse::<IpNet>()
                .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| entry.to_owned())
        })
        .collect()
}

/// The networks refused and the operator's exceptions.
#[derive(Debug, Clone)]
pub struct TargetPolicy {
    refused: Vec<IpNet>,
    allowed: Vec<IpNet>,
}

impl TargetPolicy {
    /// The policy with `allowed_networks` (`webhooks.allowed_networks`, validated at
    /// start-up: an entry that does not parse is ignored here).
    pub fn new(allowed_networks: &[String]) -> Self {
        let refused = REFUSED_NETWORKS
            .iter()
            .filter_map(|network| network.parse().ok())
            .collect();
        let allowed = allowed_networks
            .iter()
            .filter_map(|entry| parse_networks(std::slice::from_ref(entry)).ok())
            .flatten()
            .collect();
        Self { refused, allowed }
    }

    /// May a delivery connect to `ip`? An IPv4-mapped IPv6 address is judged as the IPv4
    /// address it carries, so `::ffff:127.0.0.1` is loopback.
    pub fn permits(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            IpAddr::V4(_) => ip,
        };
        if self.allowed.iter().any(|network| network.contains(&ip)) {
            return true;
        }
        !self.refused.iter().any(|network| network.contains(&ip))
    }

    /// Checks a subscription's URL: absolute, http or https, a host, no credentials,
    /// bounded; an IP literal must be a permitted address. A host name is resolved only
    /// when a delivery is made ([`TargetPolicy::resolve`]).
    pub fn check_url(&self, raw: &str) -> Result<Url, TargetError> {
        if raw.chars().count() > MAX_URL_CHARS {
            return Err(TargetError::TooLong);
        }
        let url = Url::parse(raw).map_err(|_| TargetError::Malformed)?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(TargetError::Scheme);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(TargetError::Credentials);
        }
        match url.host() {
            None => Err(TargetError::NoHost),
            Some(url::Host::Domain("")) => Err(TargetError::NoHost),
            Some(url::Host::Ipv4(v4)) if !self.permits(IpAddr::V4(v4)) => {
                Err(TargetError::PrivateAddress)
            }
            Some(url::Host::Ipv6(v6)) if !self.permits(IpAddr::V6(v6)) => {
                Err(TargetError::PrivateAddress)
            }
            Some(_) => Ok(url),
        }
    }

    /// Resolves the URL's host ONCE and checks every address it resolves to: the
    /// delivery then connects to exactly these (the HTTP client is told them and never
    /// resolves the name itself), so a name that answers a public address to the check
    /// and a private one to the connection (DNS rebinding) reaches nothing. One refused
    /// address refuses the whole name.
    pub async fn resolve(&self, url: &Url) -> Result<Vec<SocketAddr>, TargetError> {
        let url = self.check_url(url.as_str())?;
        let port = url.port_or_known_default().ok_or(TargetError::Scheme)?;
        let addresses: Vec<SocketAddr> = match url.host() {
            Some(url::Host::Ipv4(v4)) => vec![SocketAddr::new(IpAddr::V4(v4), port)],
            Some(url::Host::Ipv6(v6)) => vec![SocketAddr::new(IpAddr::V6(v6), port)],
            Some(url::Host::Domain(domain)) => tokio::net::lookup_host((domain, port))
                .await
                .map_err(|_| TargetError::Unresolved)?
                .collect(),
            None => return Err(TargetError::NoHost),
        };
        if addresses.is_empty() {
            return Err(TargetError::Unresolved);
        }
        if addresses.iter().any(|address| !self.permits(address.ip())) {
            return Err(TargetError::PrivateAddress);
        }
        Ok(addresses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> TargetPolicy {
        TargetPolicy::new(&[])
    }

    #[test]
    fn private_loopback_and_link_local_addresses_are_refused_in_both_families() {
        let policy = policy();
        for refused in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "2002:a00:1::1",
            "::127.0.0.1",
        ] {
            let ip: IpAddr = refused.parse().expect("address");
            assert!(!policy.permits(ip), "{refused} must be refused");
        }
        for public in [
            "93.184.216.34",
            "2606:2800:220:1::1",
            "::ffff:93.184.216.34",
        ] {
            let ip: IpAddr = public.parse().expect("address");
            assert!(policy.permits(ip), "{public} is public");
        }
    }

    #[test]
    fn an_allowlisted_network_is_permitted_and_nothing_else_is() {
        let policy = TargetPolicy::new(&["127.0.0.1/32".to_owned(), "fd00::/8".to_owned()]);
        assert!(policy.permits("127.0.0.1".parse().expect("ip")));
        assert!(policy.permits("::ffff:127.0.0.1".parse().expect("ip")));
        assert!(policy.permits("fd00::5".parse().expect("ip")));
        assert!(!policy.permits("127.0.0.2".parse().expect("ip")));
        assert!(!policy.permits("10.0.0.1".parse().expect("ip")));
    }

    #[test]
    fn urls_are_checked_for_scheme_host_credentials_length_and_literal_addresses() {
        let policy = policy();
        assert!(policy.check_url("https://hooks.example.com/quire").is_ok());
        assert!(policy.check_url("http://93.184.216.34:8080/x").is_ok());
        let refused = [
            ("ftp://example.com/", TargetError::Scheme),
            ("file:///etc/passwd", TargetError::Scheme),
            ("not a url", TargetError::Malformed),
            ("https://user:pw@example.com/", TargetError::Credentials),
            ("http://127.0.0.1/", TargetError::PrivateAddress),
            ("http://[::1]:8080/", TargetError::PrivateAddress),
            ("http://[::ffff:7f00:1]/", TargetError::PrivateAddress),
            (
                "http://169.254.169.254/latest/meta-data",
                TargetError::PrivateAddress,
            ),
            ("http://2130706433/", TargetError::PrivateAddress),
            ("http://0x7f.1/", TargetError::PrivateAddress),
        ];
        for (url, expected) in refused {
            assert_eq!(policy.check_url(url).err(), Some(expected), "{url}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS));
        assert_eq!(policy.check_url(&long).err(), Some(TargetError::TooLong));
    }

    #[test]
    fn networks_parse_as_cidr_or_bare_addresses() {
        assert!(parse_networks(&["10.0.0.0/8".into(), "::1".into()]).is_ok());
        assert_eq!(
            parse_networks(&["10.0.0.0/33".into()]),
            Err("10.0.0.0/33".to_owned())
        );
    }
}
