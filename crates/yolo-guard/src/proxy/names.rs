//! Which names the guard answered with which addresses: DNS adds to it as it adds the addresses
//! to the sets, and the proxy asks it per connection. Is the original destination an inspected
//! address at all (else the connection reached the proxy some other way)? Did the guard answer
//! the SNI name (or the Host header, on port 80) with that address, as an inspected name? A
//! name bound to another address is a way to reach one host while the rules judge another.
//!
//! The allowed names the proxy does not inspect are kept too, with the ports their allow entry
//! opens: an address shared by an inspected and a non-inspected host (a CDN's edge) is in the
//! inspected sets, so the non-inspected host's connections reach the proxy as well; the proxy
//! passes those through untouched when the guard answered their name with that address
//! ([`Inspected::passes`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use yolo_protocol::allowlist::Ports;

/// Kept past the answer's own lifetime: a client may connect to an address it was given
/// shortly before the set element (same timeout) expired.
const GRACE: Duration = Duration::from_secs(60);

/// Addresses, or names at an address all told, remembered before the expired ones are swept:
/// bounds memory under a wildcard flood (`*.example.com` answers many names with many
/// addresses, or many names with one). When the sweep leaves more than half, the names that
/// expire first are forgotten down to half: the proxy then refuses their connections until
/// they are looked up again (fail closed).
const SWEEP_AT: usize = 65_536;

/// What an answer made of a name at one address.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// The proxy inspects it.
    Inspected,
    /// An allowed name the proxy passes through, on these ports.
    Passed(Ports),
}

/// The names answered with one address: what each is, and until when.
type Names = HashMap<String, (Kind, Instant)>;

#[derive(Default)]
pub(crate) struct Inspected {
    by_addr: Mutex<HashMap<IpAddr, Names>>,
    /// Names at an address added since the last sweep, and left by it (an upper bound).
    entries: std::sync::atomic::AtomicUsize,
}

/// The expired names forgotten; past half of `SWEEP_AT` (addresses or names), the ones that
/// expire first too, down to half. The names left.
fn sweep(map: &mut HashMap<IpAddr, Names>, now: Instant) -> usize {
    for names in map.values_mut() {
        names.retain(|_, (_, until)| *until > now);
    }
    map.retain(|_, names| !names.is_empty());
    let mut count: usize = map.values().map(HashMap::len).sum();
    if map.len() > SWEEP_AT / 2 || count > SWEEP_AT / 2 {
        let mut by_expiry: Vec<(Instant, IpAddr, String)> = map
            .iter()
            .flat_map(|(addr, names)| {
                names
                    .iter()
                    .map(move |(name, (_, until))| (*until, *addr, name.clone()))
            })
            .collect();
        by_expiry.sort();
        for (_, addr, name) in by_expiry {
            if count <= SWEEP_AT / 2 && map.len() <= SWEEP_AT / 2 {
                break;
            }
            if let Some(names) = map.get_mut(&addr) {
                if names.remove(&name).is_some() {
                    count -= 1;
                }
                if names.is_empty() {
                    map.remove(&addr);
                }
            }
        }
    }
    count
}

impl Inspected {
    /// The guard answered the inspected `name` with `addrs`, valid until `expires`.
    pub(crate) fn record(&self, name: &str, addrs: &[IpAddr], expires: Instant) {
        self.insert(name, addrs, expires, Kind::Inspected);
    }

    /// The guard answered `name`, allowed on `ports` and not inspected, with `addrs`.
    pub(crate) fn record_passed(
        &self,
        name: &str,
        ports: Ports,
        addrs: &[IpAddr],
        expires: Instant,
    ) {
        self.insert(name, addrs, expires, Kind::Passed(ports));
    }

    fn insert(&self, name: &str, addrs: &[IpAddr], expires: Instant, kind: Kind) {
        let name = normalize(name);
        use std::sync::atomic::Ordering;
        let mut map = self.by_addr.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if map.len() >= SWEEP_AT || self.entries.load(Ordering::Relaxed) >= SWEEP_AT {
            self.entries.store(sweep(&mut map, now), Ordering::Relaxed);
        }
        for addr in addrs {
            // Expired names go at the sweep: one here would go through every name of the
            // address on each answer (a CPU flood of its own).
            let names = map.entry(canonical(*addr)).or_default();
            if !names.contains_key(&name) {
                self.entries.fetch_add(1, Ordering::Relaxed);
            }
            let until = match names.get(&name) {
                // The same kind again: the later of the two expiries.
                Some((had, until)) if *had == kind => (*until).max(expires + GRACE),
                // A name whose kind changed (its rules or entry did): the new answer decides.
                _ => expires + GRACE,
            };
            names.insert(name.clone(), (kind.clone(), until));
        }
    }

    /// Whether `addr` is an inspected address (some inspected name was answered with it).
    pub(crate) fn is_inspected(&self, addr: IpAddr) -> bool {
        let now = Instant::now();
        let map = self.by_addr.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&canonical(addr)).is_some_and(|names| {
            names
                .values()
                .any(|(kind, until)| *kind == Kind::Inspected && *until > now)
        })
    }

    /// Whether the guard answered the inspected `name` with `addr`.
    pub(crate) fn answered(&self, name: &str, addr: IpAddr) -> bool {
        self.kind(name, addr)
            .is_some_and(|kind| kind == Kind::Inspected)
    }

    /// Whether the guard answered `name`, an allowed name it does not inspect, with `addr`,
    /// and its allow entry opens `port`: the proxy may pass its connection through.
    pub(crate) fn passes(&self, name: &str, addr: IpAddr, port: u16) -> bool {
        match self.kind(name, addr) {
            Some(Kind::Passed(Ports::Any)) => true,
            Some(Kind::Passed(Ports::Only(ports))) => ports.contains(&port),
            _ => false,
        }
    }

    fn kind(&self, name: &str, addr: IpAddr) -> Option<Kind> {
        let now = Instant::now();
        let map = self.by_addr.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&canonical(addr))
            .and_then(|names| names.get(&normalize(name)))
            .filter(|(_, until)| *until > now)
            .map(|(kind, _)| kind.clone())
    }

    /// Drop the names `denied` now refuses (`yolo deny`); the addresses no inspected name
    /// holds any more, which leave the inspected sets.
    pub(crate) fn forget(&self, denied: impl Fn(&str) -> bool) -> Vec<IpAddr> {
        let mut map = self.by_addr.lock().unwrap_or_else(|p| p.into_inner());
        let mut released = Vec::new();
        for (addr, names) in map.iter_mut() {
            let inspected =
                |names: &Names| names.values().any(|(kind, _)| *kind == Kind::Inspected);
            let before = inspected(names);
            names.retain(|name, _| !denied(name));
            if before && !inspected(names) {
                released.push(*addr);
            }
        }
        map.retain(|_, names| !names.is_empty());
        released.sort();
        released
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

    /// Distinct names answered with one address (a wildcard flood) stay within `SWEEP_AT`;
    /// the latest still passes, the first ones are forgotten (refused until looked up again).
    #[test]
    fn a_flood_of_names_at_one_address_stays_bounded() {
        let names = Inspected::default();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let later = Instant::now() + Duration::from_secs(3600);
        for i in 0..150_000 {
            names.record_passed(&format!("n{i}.allowed.test"), Ports::Any, &[a], later);
        }
        let held: usize = names
            .by_addr
            .lock()
            .unwrap()
            .values()
            .map(HashMap::len)
            .sum();
        assert!(held <= SWEEP_AT, "{held}");
        assert!(names.passes("n149999.allowed.test", a, 443));
        assert!(!names.passes("n0.allowed.test", a, 443));
    }

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
        assert_eq!(names.forget(|n| n == "api.example.test"), [a]);
        assert!(!names.is_inspected(a));
    }

    /// A shared address: the inspected name is answered as inspected, the other one passes on
    /// the ports its entry opens, and neither stands in for the other.
    #[test]
    fn a_non_inspected_name_at_an_inspected_address_passes_on_its_ports_only() {
        let names = Inspected::default();
        let shared: IpAddr = "192.0.2.1".parse().unwrap();
        let later = Instant::now() + Duration::from_secs(30);
        names.record("api.example.test", &[shared], later);
        names.record_passed("cdn.example.test", Ports::Any, &[shared], later);
        names.record_passed(
            "web.example.test",
            Ports::Only(vec![8443]),
            &[shared],
            later,
        );
        assert!(names.is_inspected(shared));
        assert!(names.passes("cdn.example.test", shared, 443));
        assert!(!names.answered("cdn.example.test", shared));
        assert!(!names.passes("api.example.test", shared, 443));
        assert!(!names.passes("web.example.test", shared, 443));
        assert!(names.passes("web.example.test", shared, 8443));
        assert!(!names.passes("never.example.test", shared, 443));
        // An address only non-inspected names hold is no inspected address.
        let other: IpAddr = "192.0.2.9".parse().unwrap();
        names.record_passed("cdn.example.test", Ports::Any, &[other], later);
        assert!(!names.is_inspected(other));
        // Denying the inspected name releases the address; the other name still passes.
        assert_eq!(names.forget(|n| n == "api.example.test"), [shared]);
        assert!(!names.is_inspected(shared));
        assert!(names.passes("cdn.example.test", shared, 443));
        assert!(names.forget(|n| n == "cdn.example.test").is_empty());
        assert!(!names.passes("cdn.example.test", shared, 443));
    }
}
