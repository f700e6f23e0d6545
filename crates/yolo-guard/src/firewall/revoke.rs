//! What `yolo deny` takes out of the dynamic sets. After the allowlist shrinks, every element
//! the kernel holds for an address is checked against what the names that resolved to that
//! address are still allowed: elements no longer covered go, an any-port element whose names are
//! now allowed only some ports is narrowed to those ports (keeping its expiry), and what is still
//! allowed stays open. The kernel's listing, not the guard's memory, is the truth here: two
//! names sharing an address, or a name allowed first on a port and later on every port, leave
//! elements the guard's last-push record does not show.
//!
//! Pure: the guard lists the sets, asks its allowlist and applies the result.

use super::ruleset::{SET_ALLOW4, SET_ALLOW4_PORT, SET_ALLOW6, SET_ALLOW6_PORT};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use yolo_protocol::allowlist::{IpNet, Pattern, Ports};
use yolo_protocol::control::SetElement;

/// One element of a dynamic set, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub addr: IpAddr,
    /// `None` in the any-port sets.
    pub port: Option<u16>,
    /// Seconds until the kernel drops it.
    pub expires_secs: u64,
}

impl Listed {
    /// An element of one of the four dynamic sets (`192.0.2.1`, `192.0.2.1 . 443`); `None` for
    /// static sets and anything unreadable.
    pub fn parse(element: &SetElement) -> Option<Listed> {
        let with_port = match element.set.as_str() {
            SET_ALLOW4 | SET_ALLOW6 => false,
            SET_ALLOW4_PORT | SET_ALLOW6_PORT => true,
            _ => return None,
        };
        let (addr, port) = match element.element.split_once(" . ") {
            Some((addr, port)) if with_port => (addr, Some(port.trim().parse().ok()?)),
            None if !with_port => (element.element.as_str(), None),
            _ => return None,
        };
        Some(Listed {
            addr: addr.trim().parse().ok()?,
            port,
            expires_secs: element.expires_secs.unwrap_or(1),
        })
    }
}

/// The changes a deny makes to the dynamic sets.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Revocation {
    /// Elements to delete.
    pub remove: Vec<(IpAddr, Ports)>,
    /// Any-port elements narrowed to some ports: added back for those ports, with the seconds
    /// the any-port element had left.
    pub narrow: Vec<(IpAddr, Ports, u64)>,
    /// What closed, in the user's words: `192.0.2.7`, `192.0.2.7:8080`.
    pub closed: Vec<String>,
}

impl Revocation {
    /// The addresses whose elements change.
    pub fn addresses(&self) -> Vec<IpAddr> {
        let set: BTreeSet<IpAddr> = self.remove.iter().map(|(a, _)| *a).collect();
        set.into_iter().collect()
    }
}

/// `grant(addr)` says what the names that resolved to `addr` are still allowed: `Some(None)`
/// when none of them is allowed any more, `None` when no name is known for it (its elements are
/// left to expire on their own timeout).
pub fn revocations(
    listed: &[Listed],
    grant: impl Fn(&IpAddr) -> Option<Option<Ports>>,
) -> Revocation {
    let mut by_addr: BTreeMap<IpAddr, (Option<u64>, BTreeSet<u16>)> = BTreeMap::new();
    for element in listed {
        let (any_port, ports) = by_addr.entry(element.addr).or_default();
        match element.port {
            None => *any_port = Some(element.expires_secs),
            Some(port) => {
                ports.insert(port);
            }
        }
    }
    let mut out = Revocation::default();
    for (addr, (any_port, ports)) in by_addr {
        let Some(grant) = grant(&addr) else { continue };
        let keep: BTreeSet<u16> = match &grant {
            Some(Ports::Any) => continue,
            Some(Ports::Only(keep)) => keep.iter().copied().collect(),
            None => BTreeSet::new(),
        };
        if let Some(expires) = any_port {
            out.remove.push((addr, Ports::Any));
            if keep.is_empty() {
                out.closed.push(show(addr, None));
            } else {
                let kept: Vec<String> = keep.iter().map(u16::to_string).collect();
                out.narrow
                    .push((addr, Ports::Only(keep.iter().copied().collect()), expires));
                out.closed.push(format!(
                    "{} (every port but {})",
                    show(addr, None),
                    kept.join(",")
                ));
            }
        }
        let stray: Vec<u16> = ports.difference(&keep).copied().collect();
        if !stray.is_empty() {
            let stray = Ports::Only(stray);
            // Already said: the whole address closed.
            if !(any_port.is_some() && keep.is_empty()) {
                out.closed.push(show(addr, Some(stray.clone())));
            }
            out.remove.push((addr, stray));
        }
    }
    out
}

/// `192.0.2.7`, `192.0.2.7:80,443`, `[2001:db8::1]:443`: how the allowlist writes them.
fn show(addr: IpAddr, ports: Option<Ports>) -> String {
    Pattern::Network {
        net: IpNet::host(addr),
        ports: ports.unwrap_or(Ports::Any),
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn listed(set: &str, element: &str, expires: u64) -> Listed {
        Listed::parse(&SetElement {
            set: set.into(),
            element: element.into(),
            timeout_secs: Some(300),
            expires_secs: Some(expires),
        })
        .unwrap_or_else(|| panic!("{set} {element}"))
    }

    fn only(ports: &[u16]) -> Ports {
        Ports::Only(ports.to_vec())
    }

    #[test]
    fn parses_the_dynamic_sets_only() {
        let e = listed("allow6_port", "2001:db8::1 . 443", 9);
        assert_eq!(
            (e.addr, e.port, e.expires_secs),
            (ip("2001:db8::1"), Some(443), 9)
        );
        assert_eq!(listed("allow4", "192.0.2.1", 5).port, None);
        for (set, element) in [
            ("net4", "10.0.0.0/8"),
            ("allow4", "192.0.2.1 . 443"),
            ("allow4_port", "192.0.2.1"),
            ("allow4_port", "192.0.2.1 . http"),
            ("allow4", "nonsense"),
        ] {
            let e = SetElement {
                set: set.into(),
                element: element.into(),
                timeout_secs: None,
                expires_secs: None,
            };
            assert_eq!(Listed::parse(&e), None, "{set} {element}");
        }
    }

    #[test]
    fn a_denied_port_goes_and_the_other_ports_stay() {
        let a = ip("192.0.2.7");
        let sets = [
            listed("allow4_port", "192.0.2.7 . 80", 100),
            listed("allow4_port", "192.0.2.7 . 8080", 100),
        ];
        let r = revocations(&sets, |_| Some(Some(only(&[80]))));
        assert_eq!(r.remove, vec![(a, only(&[8080]))]);
        assert!(r.narrow.is_empty());
        assert_eq!(r.closed, ["192.0.2.7:8080"]);
        assert_eq!(r.addresses(), vec![a]);
    }

    #[test]
    fn a_denied_name_takes_every_element_of_its_addresses() {
        let sets = [
            listed("allow4", "192.0.2.7", 100),
            listed("allow4_port", "192.0.2.7 . 443", 100),
            listed("allow6_port", "2001:db8::7 . 22", 100),
        ];
        let r = revocations(&sets, |_| Some(None));
        assert_eq!(
            r.remove,
            vec![
                (ip("192.0.2.7"), Ports::Any),
                (ip("192.0.2.7"), only(&[443])),
                (ip("2001:db8::7"), only(&[22])),
            ]
        );
        assert_eq!(r.closed, ["192.0.2.7", "[2001:db8::7]:22"]);
    }

    #[test]
    fn an_any_port_element_narrows_keeping_its_expiry() {
        let sets = [listed("allow4", "192.0.2.7", 42)];
        let r = revocations(&sets, |_| Some(Some(only(&[443]))));
        assert_eq!(r.remove, vec![(ip("192.0.2.7"), Ports::Any)]);
        assert_eq!(r.narrow, vec![(ip("192.0.2.7"), only(&[443]), 42)]);
        assert_eq!(r.closed, ["192.0.2.7 (every port but 443)"]);
    }

    #[test]
    fn still_allowed_or_unknown_addresses_are_left_alone() {
        let sets = [
            listed("allow4", "192.0.2.1", 100),
            listed("allow4_port", "192.0.2.2 . 443", 100),
            listed("allow4_port", "192.0.2.3 . 80", 100),
        ];
        let r = revocations(&sets, |a| match a.to_string().as_str() {
            "192.0.2.1" => Some(Some(Ports::Any)),
            "192.0.2.2" => Some(Some(only(&[80, 443]))),
            _ => None,
        });
        assert_eq!(r, Revocation::default());
    }
}
