//! Allowlist patterns: exact domains, `*.domain` wildcards, CIDRs, `host:port`. Pure.
//!
//! Contract:
//! - `Allowlist::parse(&[String]) -> Result<Allowlist, PatternError>`: its message names the bad
//!   pattern, says why, and lists the accepted forms.
//! - `Allowlist::lookup(&self, name) -> Option<Ports>`: `None` = denied; matching is
//!   case-insensitive, ignores a trailing dot; `*.example.com` matches `a.example.com` and
//!   `a.b.example.com` but not `example.com`.
//! - `Allowlist::networks(&self) -> Vec<(IpNet, Ports)>`: static CIDR entries.
//! - `Allowlist::extend` / `Allowlist::remove` for `yolo allow` / `yolo deny`; a deny with ports
//!   (`example.com:8080`) takes only those ports out.
//!
//! This module does not decide what an address resolved from an allowed name may be; the guard
//! asks [`is_internal_address`] for that (DNS rebinding to the host or other containers).

use std::fmt;
use std::net::{AddrParseError, IpAddr, Ipv4Addr, Ipv6Addr};
use std::num::ParseIntError;
use std::str::FromStr;

/// Shown with every parse error so the user sees what would have worked.
pub const ACCEPTED_FORMS: &str = "accepted forms: example.com, *.example.com, example.com:443, \
     *.example.com:80,443, 1.2.3.4, 10.0.0.0/8, 10.0.0.0/8:443, 2001:db8::1, 2001:db8::/32, \
     [2001:db8::1]:443, [2001:db8::/32]:443";

/// Which destination ports an allowlist entry opens.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Ports {
    Any,
    /// Sorted, deduplicated, never empty, never 0.
    Only(Vec<u16>),
}

impl Ports {
    /// Union of two port selections: `Any` wins, lists are merged.
    pub fn union(&self, other: &Ports) -> Ports {
        match (self, other) {
            (Ports::Only(a), Ports::Only(b)) => Ports::only(a.iter().chain(b).copied()),
            _ => Ports::Any,
        }
    }

    fn only(ports: impl IntoIterator<Item = u16>) -> Ports {
        let mut ports: Vec<u16> = ports.into_iter().collect();
        ports.sort_unstable();
        ports.dedup();
        Ports::Only(ports)
    }

    /// `443` or `80,443`; rejects 0, >65535, and empty entries.
    fn parse(text: &str) -> Result<Ports, PatternProblem> {
        let ports = text
            .split(',')
            .map(|p| match p.trim().parse::<u32>() {
                Ok(n @ 1..=65535) => Ok(n as u16),
                _ => Err(PatternProblem::Port { port: p.into() }),
            })
            .collect::<Result<Vec<u16>, _>>()?;
        Ok(Ports::only(ports))
    }

    /// `""` for `Any`, `":80,443"` otherwise: the suffix of a normalized pattern.
    fn suffix(&self) -> String {
        match self {
            Ports::Any => String::new(),
            Ports::Only(ports) => {
                let list: Vec<String> = ports.iter().map(u16::to_string).collect();
                format!(":{}", list.join(","))
            }
        }
    }
}

/// An IPv4 or IPv6 network: address with its host bits cleared, and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpNet {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl IpNet {
    /// A network; host bits are cleared so `10.1.2.3/8` and `10.0.0.0/8` are the same entry
    /// (nftables interval sets want the network address).
    pub fn new(addr: IpAddr, prefix: u8) -> Result<IpNet, NetError> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(NetError::PrefixOutOfRange { prefix, max });
        }
        Ok(IpNet {
            addr: mask(addr, prefix),
            prefix,
        })
    }

    /// A single address: /32 or /128.
    pub fn host(addr: IpAddr) -> IpNet {
        let prefix = if addr.is_ipv4() { 32 } else { 128 };
        IpNet { addr, prefix }
    }

    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }

    /// Whether this network covers exactly one address.
    pub fn is_host(&self) -> bool {
        self.prefix == if self.is_ipv4() { 32 } else { 128 }
    }

    pub fn contains(&self, addr: &IpAddr) -> bool {
        addr.is_ipv4() == self.is_ipv4() && mask(*addr, self.prefix) == self.addr
    }
}

fn mask(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let bits = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & bits))
        }
        IpAddr::V6(a) => {
            let bits = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & bits))
        }
    }
}

impl FromStr for IpNet {
    type Err = NetError;

    /// `1.2.3.4`, `10.0.0.0/8`, `2001:db8::1`, `2001:db8::/32`.
    fn from_str(text: &str) -> Result<IpNet, NetError> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = addr.parse().map_err(|source| NetError::Address {
            text: addr.into(),
            source,
        })?;
        match prefix {
            None => Ok(IpNet::host(addr)),
            Some(p) => {
                let prefix = p.parse::<u8>().map_err(|source| NetError::Prefix {
                    text: p.into(),
                    source,
                })?;
                IpNet::new(addr, prefix)
            }
        }
    }
}

/// Why a text is not an address or network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetError {
    Address {
        text: String,
        source: AddrParseError,
    },
    Prefix {
        text: String,
        source: ParseIntError,
    },
    PrefixOutOfRange {
        prefix: u8,
        max: u8,
    },
}

impl fmt::Display for NetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetError::Address { text, .. } => write!(f, "{text:?} is not an IP address"),
            NetError::Prefix { text, .. } => write!(f, "prefix /{text} is not a number"),
            NetError::PrefixOutOfRange { prefix, max } => {
                write!(f, "prefix /{prefix} is out of range (0 to {max})")
            }
        }
    }
}

impl std::error::Error for NetError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NetError::Address { source, .. } => Some(source),
            NetError::Prefix { source, .. } => Some(source),
            NetError::PrefixOutOfRange { .. } => None,
        }
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// One allowlist entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// `example.com` (lowercase, no trailing dot).
    Exact { name: String, ports: Ports },
    /// `*.example.com`, stored without the `*.`: matches subdomains at any depth only.
    Wildcard { suffix: String, ports: Ports },
    /// A CIDR or single address, for things without DNS.
    Network { net: IpNet, ports: Ports },
}

impl Pattern {
    pub fn ports(&self) -> &Ports {
        match self {
            Pattern::Exact { ports, .. }
            | Pattern::Wildcard { ports, .. }
            | Pattern::Network { ports, .. } => ports,
        }
    }

    /// The same target with other ports.
    fn with_ports(&self, ports: Ports) -> Pattern {
        match self {
            Pattern::Exact { name, .. } => Pattern::Exact {
                name: name.clone(),
                ports,
            },
            Pattern::Wildcard { suffix, .. } => Pattern::Wildcard {
                suffix: suffix.clone(),
                ports,
            },
            Pattern::Network { net, .. } => Pattern::Network { net: *net, ports },
        }
    }

    /// The pattern without its ports, as written in normalized form: what `yolo deny` matches.
    fn target(&self) -> String {
        match self {
            Pattern::Exact { name, .. } => name.clone(),
            Pattern::Wildcard { suffix, .. } => format!("*.{suffix}"),
            Pattern::Network { net, .. } if net.is_host() => net.addr.to_string(),
            Pattern::Network { net, .. } => net.to_string(),
        }
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Pattern::Exact { name: n, .. } => n == name,
            Pattern::Wildcard { suffix, .. } => name
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            Pattern::Network { .. } => false,
        }
    }
}

impl FromStr for Pattern {
    type Err = PatternError;

    fn from_str(text: &str) -> Result<Pattern, PatternError> {
        parse_pattern(text.trim()).map_err(|problem| PatternError {
            pattern: text.into(),
            problem,
        })
    }
}

/// An allowlist pattern yolo cannot use. Its message names the pattern as given, says why, and
/// lists the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternError {
    /// The pattern as given (untrimmed).
    pub pattern: String,
    pub problem: PatternProblem,
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}; {ACCEPTED_FORMS}", self.pattern, self.problem)
    }
}

impl std::error::Error for PatternError {
    /// The address or number parse error behind a bad network, if any; the problem itself is
    /// already in the message.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.problem {
            PatternProblem::Net(net) => net.source(),
            _ => None,
        }
    }
}

/// What is wrong with an allowlist pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternProblem {
    Empty,
    /// A port that is not 1 to 65535.
    Port {
        port: String,
    },
    /// Looks like an address or network but is not one.
    Net(NetError),
    /// `[...]` holding something other than an IPv6 address or network.
    NotIpv6 {
        target: String,
    },
    MissingBracket,
    AfterBracket {
        rest: String,
    },
    /// `*.com`: a wildcard over a single label.
    TooBroad {
        suffix: String,
    },
    /// `*` alone.
    Everything,
    /// A `/0` network.
    EveryAddress {
        net: IpNet,
    },
    /// `*` anywhere but as the whole first label.
    Wildcard,
    EmptyDomain,
    NotAscii,
    NameTooLong,
    LabelLength,
    Character {
        found: char,
    },
    Hyphen,
    /// A name whose last label is a number: a broken IPv4 address.
    NumericTld,
}

impl fmt::Display for PatternProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternProblem::Empty => f.write_str("empty pattern"),
            PatternProblem::Port { port } => {
                write!(f, "port {port:?} is not a number from 1 to 65535")
            }
            PatternProblem::Net(net) => write!(f, "{net}"),
            PatternProblem::NotIpv6 { target } => {
                write!(f, "[{target}] is not an IPv6 address or network")
            }
            PatternProblem::MissingBracket => f.write_str("missing ] after the IPv6 address"),
            PatternProblem::AfterBracket { rest } => write!(f, "unexpected {rest:?} after ]"),
            PatternProblem::TooBroad { suffix } => write!(
                f,
                "*.{suffix} is too broad: a wildcard needs at least two labels, like *.example.{suffix}"
            ),
            PatternProblem::Everything => {
                f.write_str("* alone would allow everything; use --network open instead")
            }
            PatternProblem::EveryAddress { net } => write!(
                f,
                "{net} would allow every address; use --network open instead"
            ),
            PatternProblem::Wildcard => f.write_str(
                "a wildcard is only allowed as a whole first label, like *.example.com",
            ),
            PatternProblem::EmptyDomain => f.write_str("empty domain name"),
            PatternProblem::NotAscii => {
                f.write_str("non-ASCII names must be written in punycode (xn--...)")
            }
            PatternProblem::NameTooLong => f.write_str("a domain name is at most 253 characters"),
            PatternProblem::LabelLength => {
                f.write_str("each label between dots must be 1 to 63 characters")
            }
            PatternProblem::Character { found } => {
                write!(f, "invalid character {found:?} in a domain name")
            }
            PatternProblem::Hyphen => f.write_str("a label cannot start or end with '-'"),
            PatternProblem::NumericTld => f.write_str(
                "not a valid IP address, and a domain cannot end in a number",
            ),
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = self.target();
        let ports = self.ports().suffix();
        // IPv6 with ports needs brackets, or the port would read as part of the address.
        match self {
            Pattern::Network { net, .. } if !net.is_ipv4() && !ports.is_empty() => {
                write!(f, "[{target}]{ports}")
            }
            _ => write!(f, "{target}{ports}"),
        }
    }
}

fn parse_pattern(text: &str) -> Result<Pattern, PatternProblem> {
    if text.is_empty() {
        return Err(PatternProblem::Empty);
    }
    let (target, ports, bracketed) = split_ports(text)?;
    let ports = match ports {
        Some(p) => Ports::parse(p)?,
        None => Ports::Any,
    };
    if bracketed {
        return match target.parse::<IpNet>() {
            Ok(net) if !net.is_ipv4() => network(net, ports),
            _ => Err(PatternProblem::NotIpv6 {
                target: target.into(),
            }),
        };
    }
    if target.chars().next().is_some_and(|c| c.is_ascii_digit()) || target.contains(':') {
        if let Ok(net) = target.parse::<IpNet>() {
            return network(net, ports);
        }
        // A name may start with a digit (`1password.com`), but not look like a broken address.
        if target.contains(['/', ':']) || target.split('.').all(is_numeric) {
            return match target.parse::<IpNet>() {
                Ok(net) => network(net, ports),
                Err(e) => Err(PatternProblem::Net(e)),
            };
        }
    }
    if let Some(suffix) = target.strip_prefix("*.") {
        let suffix = domain(suffix)?;
        if !suffix.contains('.') {
            return Err(PatternProblem::TooBroad { suffix });
        }
        return Ok(Pattern::Wildcard { suffix, ports });
    }
    if target == "*" {
        return Err(PatternProblem::Everything);
    }
    if target.contains('*') {
        return Err(PatternProblem::Wildcard);
    }
    Ok(Pattern::Exact {
        name: domain(target)?,
        ports,
    })
}

fn network(net: IpNet, ports: Ports) -> Result<Pattern, PatternProblem> {
    if net.prefix == 0 {
        return Err(PatternProblem::EveryAddress { net });
    }
    Ok(Pattern::Network { net, ports })
}

/// Splits `host:ports`, `[v6]:ports`, `cidr:ports` into (target, ports, bracketed); a bare
/// IPv6 address has no port.
fn split_ports(text: &str) -> Result<(&str, Option<&str>, bool), PatternProblem> {
    if let Some(rest) = text.strip_prefix('[') {
        let (inner, after) = rest.split_once(']').ok_or(PatternProblem::MissingBracket)?;
        return match after.strip_prefix(':') {
            Some(ports) => Ok((inner, Some(ports), true)),
            None if after.is_empty() => Ok((inner, None, true)),
            None => Err(PatternProblem::AfterBracket { rest: after.into() }),
        };
    }
    match text.split_once(':') {
        None => Ok((text, None, false)),
        Some((host, ports)) if !ports.contains(':') => Ok((host, Some(ports), false)),
        // Several colons: IPv6. `2001:db8::1:443` is ambiguous, so ports need brackets.
        Some(_) => Ok((text, None, false)),
    }
}

fn is_numeric(label: &str) -> bool {
    !label.is_empty() && label.bytes().all(|b| b.is_ascii_digit())
}

/// Lowercases, strips one trailing dot, and checks RFC 1123 label rules (plus `_`, which real
/// names such as `_acme-challenge` use).
fn domain(text: &str) -> Result<String, PatternProblem> {
    let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    if name.is_empty() {
        return Err(PatternProblem::EmptyDomain);
    }
    if !name.is_ascii() {
        return Err(PatternProblem::NotAscii);
    }
    if name.len() > 253 {
        return Err(PatternProblem::NameTooLong);
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(PatternProblem::LabelLength);
        }
        if let Some(found) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(PatternProblem::Character { found });
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(PatternProblem::Hyphen);
        }
    }
    if name.rsplit('.').next().is_some_and(is_numeric) {
        return Err(PatternProblem::NumericTld);
    }
    Ok(name)
}

/// The merged allowlist: patterns in first-seen order, duplicates (after normalization) dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    patterns: Vec<Pattern>,
}

impl Allowlist {
    pub fn parse(patterns: &[String]) -> Result<Allowlist, PatternError> {
        let mut list = Allowlist::default();
        list.extend(patterns)?;
        Ok(list)
    }

    /// Merges sources in order (agent preset, repo, user config, flags), dropping duplicates.
    pub fn merge(sources: &[&[String]]) -> Result<Allowlist, PatternError> {
        let mut list = Allowlist::default();
        for source in sources {
            list.extend(source)?;
        }
        Ok(list)
    }

    /// Adds patterns; all-or-nothing, so a typo in `yolo allow a b` changes nothing.
    pub fn extend(&mut self, patterns: &[String]) -> Result<(), PatternError> {
        let parsed = patterns
            .iter()
            .map(|p| p.parse::<Pattern>())
            .collect::<Result<Vec<_>, _>>()?;
        for pattern in parsed {
            if !self.patterns.contains(&pattern) {
                self.patterns.push(pattern);
            }
        }
        Ok(())
    }

    /// Removes entries, or ports of entries, and returns what went (normalized).
    /// `example.com` without ports removes every `example.com[:ports]` entry, since `yolo deny
    /// example.com` means the host as a whole. `example.com:8080` takes port 8080 out of every
    /// `example.com:ports` entry (`example.com:80,8080` becomes `example.com:80`; an entry left
    /// without ports goes) and returns `example.com:8080`; an `example.com` entry open on every
    /// port stays, since "every port but 8080" is not a pattern ([`Allowlist::open_on_every_port`]
    /// finds it). Unparsable arguments remove nothing.
    pub fn remove(&mut self, patterns: &[String]) -> Vec<String> {
        let mut removed = Vec::new();
        for text in patterns {
            let Ok(wanted) = text.parse::<Pattern>() else {
                continue;
            };
            let target = wanted.target();
            let mut kept = Vec::with_capacity(self.patterns.len());
            for pattern in self.patterns.drain(..) {
                if pattern.target() != target {
                    kept.push(pattern);
                    continue;
                }
                let mut note = |gone: String| {
                    if !removed.contains(&gone) {
                        removed.push(gone);
                    }
                };
                match (pattern.ports(), wanted.ports()) {
                    (_, Ports::Any) => note(pattern.to_string()),
                    (Ports::Any, Ports::Only(_)) => kept.push(pattern),
                    (Ports::Only(have), Ports::Only(closing)) => {
                        let (gone, left): (Vec<u16>, Vec<u16>) =
                            have.iter().partition(|p| closing.contains(p));
                        if !gone.is_empty() {
                            note(pattern.with_ports(Ports::Only(gone)).to_string());
                        }
                        if !left.is_empty() {
                            kept.push(pattern.with_ports(Ports::Only(left)));
                        }
                    }
                }
            }
            // Narrowing can make two entries equal (`a:80` and `a:80,8080` minus 8080).
            for pattern in kept {
                if !self.patterns.contains(&pattern) {
                    self.patterns.push(pattern);
                }
            }
        }
        removed
    }

    /// The entry with `pattern`'s target that is open on every port, if any: what stays when
    /// `yolo deny example.com:443` meets `example.com`.
    pub fn open_on_every_port(&self, pattern: &str) -> Option<String> {
        let wanted = pattern.parse::<Pattern>().ok()?;
        self.patterns
            .iter()
            .find(|p| p.target() == wanted.target() && *p.ports() == Ports::Any)
            .map(Pattern::to_string)
    }

    /// Ports allowed for `name`, or `None` if no pattern matches. Several matches merge.
    pub fn lookup(&self, name: &str) -> Option<Ports> {
        let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        self.patterns
            .iter()
            .filter(|p| p.matches(&name))
            .map(|p| p.ports().clone())
            .reduce(|a, b| a.union(&b))
    }

    /// The first entry (as listed) that allows `name`: the allowlist entry a lookup is
    /// credited to. The guard's log keeps a first sighting per entry past its size cap, and
    /// entries are the user's, so their number is not the agent's to grow.
    pub fn entry(&self, name: &str) -> Option<String> {
        let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        self.patterns
            .iter()
            .find(|p| p.matches(&name))
            .map(Pattern::to_string)
    }

    /// The static network entries, in order.
    pub fn networks(&self) -> Vec<(IpNet, Ports)> {
        self.patterns
            .iter()
            .filter_map(|p| match p {
                Pattern::Network { net, ports } => Some((*net, ports.clone())),
                _ => None,
            })
            .collect()
    }

    /// Normalized patterns for display and for the guard config.
    pub fn patterns(&self) -> Vec<String> {
        self.patterns.iter().map(Pattern::to_string).collect()
    }

    pub fn entries(&self) -> &[Pattern] {
        &self.patterns
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }
}

/// A name an allow may add to the allowlist as an exact host: letters, digits, `-`, `_` and
/// dots, a dot at least, and a last label with a letter. Not a `*` label (a wildcard there),
/// not an address literal like `169.254.169.254` (a network entry: direct connections to the
/// cloud's metadata or the host's network).
pub fn plain_host_name(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or_default();
    name.contains('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
        && last.bytes().any(|b| b.is_ascii_alphabetic())
}

/// Addresses a public name should never resolve to: loopback, private, link-local (cloud
/// metadata), CGNAT, multicast, unspecified, documentation/benchmark ranges, ULA. The guard
/// should not add these to the dynamic sets for a name match (DNS rebinding to the host or to
/// other containers); a user who needs one lists it as a static network instead.
pub fn is_internal_address(addr: &IpAddr) -> bool {
    match addr {
        IpAddr::V4(a) => {
            let [b0, b1, ..] = a.octets();
            a.is_private()
                || a.is_loopback()
                || a.is_link_local()
                || a.is_unspecified()
                || a.is_broadcast()
                || a.is_multicast()
                || a.is_documentation()
                || (b0 == 100 && (64..128).contains(&b1)) // CGNAT 100.64.0.0/10
                || (b0 == 198 && (18..20).contains(&b1)) // benchmarking 198.18.0.0/15
                || b0 == 0
                || b0 >= 240
        }
        IpAddr::V6(a) => {
            let first = a.segments()[0];
            if let Some(v4) = a.to_ipv4_mapped() {
                return is_internal_address(&IpAddr::V4(v4));
            }
            a.is_loopback()
                || a.is_unspecified()
                || a.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (first == 0x2001 && a.segments()[1] == 0x0db8) // documentation
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn list(items: &[&str]) -> Allowlist {
        Allowlist::parse(&strings(items)).unwrap()
    }

    fn err(item: &str) -> String {
        Allowlist::parse(&strings(&[item])).unwrap_err().to_string()
    }

    fn only(ports: &[u16]) -> Option<Ports> {
        Some(Ports::Only(ports.to_vec()))
    }

    #[test]
    fn a_name_is_credited_to_the_first_entry_that_allows_it() {
        let a = list(&["api.example.com:443", "*.example.com", "example.org"]);
        assert_eq!(
            a.entry("API.example.com.").as_deref(),
            Some("api.example.com:443")
        );
        assert_eq!(a.entry("x.y.example.com").as_deref(), Some("*.example.com"));
        assert_eq!(a.entry("example.org").as_deref(), Some("example.org"));
        assert_eq!(a.entry("example.com"), None);
    }

    #[test]
    fn exact_match_is_case_insensitive_and_ignores_trailing_dot() {
        let a = list(&["Example.COM."]);
        assert_eq!(a.lookup("example.com"), Some(Ports::Any));
        assert_eq!(a.lookup("EXAMPLE.com."), Some(Ports::Any));
        assert_eq!(a.lookup("www.example.com"), None);
        assert_eq!(a.lookup("example.org"), None);
        assert_eq!(a.patterns(), ["example.com"]);
    }

    #[test]
    fn wildcard_matches_any_depth_but_not_the_apex() {
        let a = list(&["*.example.com"]);
        assert_eq!(a.lookup("a.example.com"), Some(Ports::Any));
        assert_eq!(a.lookup("a.b.c.example.com."), Some(Ports::Any));
        assert_eq!(a.lookup("example.com"), None);
        assert_eq!(a.lookup("badexample.com"), None);
        assert_eq!(a.lookup("a.example.com.evil.net"), None);
        assert_eq!(a.lookup(".example.com"), None);
    }

    #[test]
    fn ports_merge_and_any_wins() {
        let a = list(&[
            "example.com:443",
            "*.example.com:80,8080",
            "api.example.com:22",
        ]);
        assert_eq!(a.lookup("example.com"), only(&[443]));
        assert_eq!(a.lookup("api.example.com"), only(&[22, 80, 8080]));
        let b = list(&["*.example.com:443", "api.example.com"]);
        assert_eq!(b.lookup("api.example.com"), Some(Ports::Any));
        assert_eq!(b.lookup("x.example.com"), only(&[443]));
    }

    #[test]
    fn port_lists_are_sorted_and_deduplicated() {
        let a = list(&["example.com:8080,443,443"]);
        assert_eq!(a.patterns(), ["example.com:443,8080"]);
    }

    #[test]
    fn networks_in_all_forms() {
        let a = list(&[
            "1.2.3.4",
            "10.0.0.0/8:443",
            "10.1.2.3/16",
            "2001:db8::1",
            "2001:DB8::/32",
            "[2001:db8::1]:443",
            "[2001:db8:1::/48]:80,443",
        ]);
        assert_eq!(
            a.patterns(),
            [
                "1.2.3.4",
                "10.0.0.0/8:443",
                "10.1.0.0/16",
                "2001:db8::1",
                "2001:db8::/32",
                "[2001:db8::1]:443",
                "[2001:db8:1::/48]:80,443",
            ]
        );
        let nets = a.networks();
        assert_eq!(nets[0], ("1.2.3.4/32".parse().unwrap(), Ports::Any));
        assert_eq!(nets[1].1, Ports::Only(vec![443]));
        assert_eq!(nets[4].0.prefix, 32);
        assert_eq!(a.lookup("1.2.3.4"), None, "networks are not names");
    }

    #[test]
    fn normalized_patterns_parse_back_to_the_same_list() {
        let a = list(&["[2001:db8::/32]:443", "*.Example.com:80", "10.0.0.1"]);
        assert_eq!(Allowlist::parse(&a.patterns()).unwrap(), a);
    }

    #[test]
    fn names_may_start_with_digits() {
        let a = list(&["1password.com", "3.example.com", "_dmarc.example.com"]);
        assert_eq!(a.lookup("1password.com"), Some(Ports::Any));
        assert!(a.networks().is_empty());
    }

    #[test]
    fn ipnet_contains() {
        let net: IpNet = "10.0.0.0/8".parse().unwrap();
        assert!(net.contains(&"10.255.0.1".parse().unwrap()));
        assert!(!net.contains(&"11.0.0.1".parse().unwrap()));
        assert!(!net.contains(&"::ffff:10.0.0.1".parse().unwrap()));
        let v6: IpNet = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(&"2001:db8:ffff::1".parse().unwrap()));
        assert!(!v6.contains(&"2001:db9::1".parse().unwrap()));
        let host: IpNet = "1.2.3.4".parse().unwrap();
        assert!(host.is_host() && host.contains(&"1.2.3.4".parse().unwrap()));
        assert_eq!(host.to_string(), "1.2.3.4/32");
        let all6 = IpNet::new("::".parse().unwrap(), 0).unwrap();
        assert!(all6.contains(&"2001::1".parse().unwrap()));
    }

    #[test]
    fn rejects_bad_patterns_with_the_accepted_forms() {
        for bad in [
            "",
            "   ",
            "*",
            "*.com",
            "*.",
            "a.*.example.com",
            "*example.com",
            "**.example.com",
            "exa mple.com",
            "exa$mple.com",
            "-example.com",
            "example-.com",
            "a..b",
            "example.com:0",
            "example.com:65536",
            "example.com:",
            "example.com:http",
            "example.com:80,",
            "10.0.0.0/33",
            "2001:db8::/129",
            "10.0.0.0/x",
            "1.2.3",
            "1.2.3.4.5",
            "999.1.1.1",
            "0.0.0.0/0",
            "::/0",
            "[2001:db8::1",
            "[2001:db8::1]x",
            "[example.com]:443",
            "bücher.de",
            "http://example.com",
        ] {
            let e = err(bad);
            assert!(e.contains(ACCEPTED_FORMS), "{bad:?}: {e}");
            assert!(e.starts_with(&format!("{bad:?}")), "{bad:?}: {e}");
        }
    }

    #[test]
    fn errors_are_typed_and_keep_the_parse_error_as_source() {
        use std::error::Error as _;
        let e = Allowlist::parse(&strings(&["ok.com", " 999.1.1.1:443"])).unwrap_err();
        assert_eq!(e.pattern, " 999.1.1.1:443");
        assert!(matches!(
            e.problem,
            PatternProblem::Net(NetError::Address { .. })
        ));
        assert_eq!(
            e.to_string(),
            format!("\" 999.1.1.1:443\": \"999.1.1.1\" is not an IP address; {ACCEPTED_FORMS}")
        );
        assert_eq!(
            e.source().map(|s| s.to_string()).as_deref(),
            Some("invalid IP address syntax")
        );
        let e = "*.com".parse::<Pattern>().unwrap_err();
        assert_eq!(
            e.problem,
            PatternProblem::TooBroad {
                suffix: "com".into()
            }
        );
        assert!(e.source().is_none());
        assert!(matches!(
            "10.0.0.0/33".parse::<IpNet>(),
            Err(NetError::PrefixOutOfRange {
                prefix: 33,
                max: 32
            })
        ));
    }

    #[test]
    fn single_label_wildcard_says_too_broad() {
        assert!(err("*.com").contains("too broad"));
        assert!(err("*").contains("allow everything"));
        assert!(err("0.0.0.0/0").contains("every address"));
    }

    #[test]
    fn long_names_are_rejected() {
        let label = "a".repeat(64);
        assert!(err(&format!("{label}.com")).contains("63"));
        let long = vec!["abcdefghi"; 26].join(".") + ".com";
        assert!(err(&long).contains("253"));
    }

    #[test]
    fn extend_is_all_or_nothing_and_deduplicates() {
        let mut a = list(&["example.com"]);
        assert!(a.extend(&strings(&["ok.com", "bad name"])).is_err());
        assert_eq!(a.patterns(), ["example.com"]);
        a.extend(&strings(&["EXAMPLE.com", "ok.com"])).unwrap();
        assert_eq!(a.patterns(), ["example.com", "ok.com"]);
    }

    #[test]
    fn merge_keeps_first_seen_order_without_duplicates() {
        let preset = strings(&["api.anthropic.com", "*.github.com"]);
        let repo = strings(&["pypi.org", "api.anthropic.com"]);
        let flags = strings(&["*.GitHub.com", "10.0.0.1:5432"]);
        let a = Allowlist::merge(&[&preset, &repo, &flags]).unwrap();
        assert_eq!(
            a.patterns(),
            [
                "api.anthropic.com",
                "*.github.com",
                "pypi.org",
                "10.0.0.1:5432"
            ]
        );
        assert!(Allowlist::merge(&[&preset, &strings(&["*"])]).is_err());
    }

    #[test]
    fn remove_by_host_drops_all_ports_by_exact_entry_only_that_one() {
        let mut a = list(&[
            "example.com",
            "example.com:443",
            "example.com:22",
            "*.example.com",
        ]);
        assert_eq!(a.remove(&strings(&["example.com:22"])), ["example.com:22"]);
        assert_eq!(
            a.remove(&strings(&["EXAMPLE.com.", "nope.com", "bad name"])),
            ["example.com", "example.com:443"]
        );
        assert_eq!(a.patterns(), ["*.example.com"]);
        assert_eq!(a.remove(&strings(&["*.example.com"])), ["*.example.com"]);
        assert!(a.is_empty());
        let mut n = list(&["10.0.0.0/8:443", "2001:db8::1"]);
        assert_eq!(
            n.remove(&strings(&["10.0.0.0/8", "[2001:db8::1]"])),
            ["10.0.0.0/8:443", "2001:db8::1"]
        );
    }

    #[test]
    fn remove_with_ports_closes_only_those_ports() {
        let mut a = list(&[
            "example.com:80,8080",
            "example.com:8080",
            "example.com:80",
            "*.example.com:22,443",
            "10.0.0.0/8:443,5432",
            "[2001:db8::1]:80,443",
        ]);
        assert_eq!(
            a.remove(&strings(&["example.com:8080"])),
            ["example.com:8080"]
        );
        assert_eq!(
            a.patterns()[..2],
            ["example.com:80", "*.example.com:22,443"]
        );
        assert_eq!(a.lookup("example.com"), only(&[80]));
        assert_eq!(
            a.remove(&strings(&["*.example.com:22,23", "10.0.0.0/8:5432"])),
            ["*.example.com:22", "10.0.0.0/8:5432"]
        );
        assert_eq!(
            a.remove(&strings(&["[2001:db8::1]:443", "example.com:443"])),
            ["[2001:db8::1]:443"]
        );
        assert_eq!(
            a.patterns(),
            [
                "example.com:80",
                "*.example.com:443",
                "10.0.0.0/8:443",
                "[2001:db8::1]:80"
            ]
        );
        assert_eq!(a.networks()[0].1, Ports::Only(vec![443]));
        assert_eq!(a.remove(&strings(&["example.com:80"])), ["example.com:80"]);
        assert_eq!(a.lookup("example.com"), None);
    }

    #[test]
    fn remove_with_ports_leaves_an_every_port_entry_and_says_so() {
        let mut a = list(&["example.com", "example.com:443", "other.com:443"]);
        assert_eq!(
            a.remove(&strings(&["example.com:443"])),
            ["example.com:443"]
        );
        assert_eq!(a.patterns(), ["example.com", "other.com:443"]);
        assert_eq!(a.lookup("example.com"), Some(Ports::Any));
        assert_eq!(
            a.open_on_every_port("EXAMPLE.com:443").as_deref(),
            Some("example.com")
        );
        assert_eq!(a.open_on_every_port("other.com:443"), None);
        assert_eq!(a.open_on_every_port("bad name"), None);
    }

    #[test]
    fn internal_addresses() {
        for a in [
            "127.0.0.11",
            "10.1.2.3",
            "172.17.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:10.0.0.1",
            "ff02::1",
        ] {
            assert!(is_internal_address(&a.parse().unwrap()), "{a}");
        }
        for a in ["1.1.1.1", "140.82.112.3", "2606:4700::1111"] {
            assert!(!is_internal_address(&a.parse().unwrap()), "{a}");
        }
    }
}
