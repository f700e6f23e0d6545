//! Which names the guard answered with which addresses, for the inspected names only: DNS adds
//! to it as it adds the addresses to the inspected sets, and the proxy asks it twice per
//! connection. Is the original destination an inspected address at all (else the connection
//! reached the proxy some other way)? Did the guard answer the SNI name (or the Host header,
//! on port 80) with that address? A name bound to another address is a way to reach one host
//! while the rules judge another.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Kept past the answer's own lifetime: a client may connect to an address it was given
/// shortly before the set element (same timeout) expired.
const GRACE: Duration = Duration::from_secs(60);

#[derive(Default)]
pub(crate) struct Inspected {
    by_addr: Mutex<HashMap<IpAddr, HashMap<String, Instant>>>,
}

impl Inspected {
    /// The guard answered `name` with `addrs`, valid until `expires`.
    pub(crate) fn record(&self, name: &str, addrs: &[IpAddr], expires: Instant) {
        let name = normalize(name);
        let mut map = self.by_addr.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        for addr in addrs {
            let names = map.entry(*addr).or_default();
            names.retain(|_, until| *until > now);
            let until = names.entry(name.clone()).or_insert(expires + GRACE);
            *until = (*until).max(expires + GRACE);
        }
    }

    /// Whether `addr` is an inspected address (some inspected name was answered with it).
    pub(crate) fn is_inspected(&self, addr: IpAddr) -> bool {
        let now = Instant::now();
        let map = self.by_addr.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&canonical(addr))
            .is_some_and(|names| names.values().any(|until| *until > now))
    }

    /// Whether the guard answered `name` with `addr`.
    pub(crate) fn answered(&self, name: &str, addr: IpAddr) -> bool {
        let now = Instant::now();
        let map = self.by_addr.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&canonical(addr))
            .and_then(|names| names.get(&normalize(name)))
            .is_some_and(|until| *until > now)
    }

    /// Drop the names `denied` now refuses (`yolo deny`).
    pub(crate) fn forget(&self, denied: impl Fn(&str) -> bool) {
        let mut map = self.by_addr.lock().unwrap_or_else(|p| p.into_inner());
        for names in map.values_mut() {
            names.retain(|name, _| !denied(name));
        }
        map.retain(|_, names| !names.is_empty());
    }
}

/// Names compare lowercase and without the root's dot, as DNS answered them.
pub(crate) fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// An IPv4 address a dual-stack socket reports as `::ffff:a.b.c.d` is that IPv4 address.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_bound_to_the_addresses_it_was_answered_with_only() {
        let names = Inspected::default();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        names.record(
            "API.Example.test.",
            &[a],
            Instant::now() + Duration::from_secs(30),
        );
        assert!(names.answered("api.example.test", a));
        assert!(!names.answered("api.example.test", b));
        assert!(!names.answered("other.example.test", a));
        assert!(names.is_inspected(a));
        assert!(!names.is_inspected(b));
        names.forget(|n| n == "api.example.test");
        assert!(!names.is_inspected(a));
    }
}
