//! What DNS taught the guard: which name last resolved to an address (for `blocked` events),
//! which addresses each name resolved to (so `yolo deny` can take them away), and which addresses
//! are in the nft sets until when (so a repeated lookup does not write the sets again).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Names remembered, or the bytes of them with their addresses (`cost`), before the expired
/// ones are swept. When the sweep leaves more than half of either, the names that expire first
/// are forgotten down to half (`Inner::evicted`): distinct names under an allowed wildcard,
/// each answered, grew the guard by 390 bytes a name (136,000 in 40 s) until it ran out of
/// memory, since none expires before its set element does.
const SWEEP_AT: usize = 65_536;
const MAX_BYTES: usize = 16 << 20;

/// What a remembered name costs, about: its bytes, its addresses and the table's entry.
fn cost(name: &str, addrs: &[IpAddr]) -> usize {
    name.len() + std::mem::size_of_val(addrs) + 96
}

pub struct Resolved<G> {
    inner: Mutex<Inner<G>>,
}

struct Inner<G> {
    by_name: HashMap<String, (Vec<IpAddr>, Instant)>,
    by_addr: HashMap<IpAddr, String>,
    /// Elements pushed to the dynamic sets: the grant (ports) and when the kernel drops them.
    in_set: HashMap<IpAddr, (G, Instant)>,
    /// `cost` of `by_name`, counted up as names come and again at each sweep.
    bytes: usize,
    /// Names were forgotten before they expired: an address in the sets may have no name
    /// remembered that accounts for it (`Resolved::evicted`).
    evicted: bool,
}

impl<G: Clone + PartialEq> Default for Resolved<G> {
    fn default() -> Self {
        Resolved {
            inner: Mutex::new(Inner {
                by_name: HashMap::new(),
                by_addr: HashMap::new(),
                in_set: HashMap::new(),
                bytes: 0,
                evicted: false,
            }),
        }
    }
}

impl<G> Inner<G> {
    /// The expired names forgotten; when more than half of `SWEEP_AT` or `MAX_BYTES` is left,
    /// the ones that expire first too, down to half (so that sweeps stay far apart).
    fn sweep(&mut self, now: Instant) {
        self.by_name.retain(|_, (_, until)| *until > now);
        self.bytes = self
            .by_name
            .iter()
            .map(|(name, (addrs, _))| cost(name, addrs))
            .sum();
        if self.by_name.len() > SWEEP_AT / 2 || self.bytes > MAX_BYTES / 2 {
            let mut by_expiry: Vec<(Instant, String)> = self
                .by_name
                .iter()
                .map(|(name, (_, until))| (*until, name.clone()))
                .collect();
            by_expiry.sort();
            let mut count = self.by_name.len();
            for (_, name) in by_expiry {
                if count <= SWEEP_AT / 2 && self.bytes <= MAX_BYTES / 2 {
                    break;
                }
                if let Some((addrs, _)) = self.by_name.remove(&name) {
                    self.bytes = self.bytes.saturating_sub(cost(&name, &addrs));
                    count -= 1;
                }
            }
            self.evicted = true;
        }
        let Inner {
            by_name, by_addr, ..
        } = self;
        by_addr.retain(|_, name| by_name.contains_key(name));
    }
}

impl<G: Clone + PartialEq> Resolved<G> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<G>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `name` just resolved to `addrs`; remember both directions until `expires`.
    pub fn record(&self, name: &str, addrs: &[IpAddr], expires: Instant) {
        let mut inner = self.lock();
        if inner.by_name.len() >= SWEEP_AT || inner.bytes >= MAX_BYTES {
            inner.sweep(Instant::now());
        }
        for addr in addrs {
            inner.by_addr.insert(*addr, name.to_string());
        }
        inner.bytes += cost(name, addrs);
        inner
            .by_name
            .insert(name.to_string(), (addrs.to_vec(), expires));
    }

    /// Whether names were forgotten before they expired (see `SWEEP_AT`): an address in the
    /// sets with no name remembered may then be one whose name is denied now.
    pub fn evicted(&self) -> bool {
        self.lock().evicted
    }

    /// The name that last resolved to `addr`.
    pub fn name_of(&self, addr: &IpAddr) -> Option<String> {
        self.lock().by_addr.get(addr).cloned()
    }

    /// The elements that must be (re)written to the sets: absent, with other ports, or with less
    /// than half of `timeout` left. Refreshing early keeps an element from expiring between the
    /// answer and the client's connect, without a set update per query.
    pub fn stale(
        &self,
        wanted: &[(IpAddr, G)],
        timeout: Duration,
        now: Instant,
    ) -> Vec<(IpAddr, G)> {
        let inner = self.lock();
        wanted
            .iter()
            .filter(|(addr, grant)| match inner.in_set.get(addr) {
                Some((have, until)) => {
                    have != grant || until.saturating_duration_since(now) < timeout / 2
                }
                None => true,
            })
            .cloned()
            .collect()
    }

    /// Whether `addr` was ever pushed to the sets (and not revoked since): updating it may be a
    /// refresh of an element the kernel still holds.
    pub fn was_pushed(&self, addr: &IpAddr) -> bool {
        self.lock().in_set.contains_key(addr)
    }

    /// `elements` are now in the sets until `now + timeout`.
    pub fn pushed(&self, elements: &[(IpAddr, G)], timeout: Duration, now: Instant) {
        let mut inner = self.lock();
        for (addr, grant) in elements {
            inner.in_set.insert(*addr, (grant.clone(), now + timeout));
        }
    }

    /// Forget every name `denied` says is no longer allowed; returns the set elements that only
    /// those names justified (an address shared with a still-allowed name, a CDN edge say, stays).
    pub fn forget(&self, denied: impl Fn(&str) -> bool) -> Vec<(IpAddr, G)> {
        let mut inner = self.lock();
        let gone: Vec<String> = inner
            .by_name
            .keys()
            .filter(|n| denied(n))
            .cloned()
            .collect();
        let mut candidates = Vec::new();
        for name in &gone {
            if let Some((addrs, _)) = inner.by_name.remove(name) {
                candidates.extend(addrs);
            }
        }
        let still_used =
            |inner: &Inner<G>, addr: &IpAddr| inner.by_name.values().any(|(a, _)| a.contains(addr));
        let mut removed = Vec::new();
        for addr in candidates {
            if still_used(&inner, &addr) {
                continue;
            }
            inner.by_addr.remove(&addr);
            if let Some((grant, _)) = inner.in_set.remove(&addr) {
                removed.push((addr, grant));
            }
        }
        removed
    }

    /// Every remembered address with the names that resolved to it: those whose last answer
    /// held it, and the last name to name it (whose answer may have moved on since, while the
    /// kernel still holds the address until its timeout).
    pub fn names_by_address(&self) -> HashMap<IpAddr, Vec<String>> {
        let inner = self.lock();
        let mut out: HashMap<IpAddr, Vec<String>> = HashMap::new();
        for (name, (addrs, _)) in &inner.by_name {
            for addr in addrs {
                out.entry(*addr).or_default().push(name.clone());
            }
        }
        for (addr, name) in &inner.by_addr {
            let names = out.entry(*addr).or_default();
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        out
    }

    /// `addrs` changed in the sets behind the guard's back (a deny): forget what was pushed for
    /// them, so the next answer naming them writes them again with their current grant.
    pub fn unpush(&self, addrs: &[IpAddr]) {
        let mut inner = self.lock();
        for addr in addrs {
            inner.in_set.remove(addr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Distinct long names, none expired, far past what is remembered: the tables stay within
    /// their bounds, the latest names are kept, and that some were forgotten is known (a deny
    /// then closes addresses no name accounts for).
    #[test]
    fn a_flood_of_distinct_names_stays_bounded_and_says_it_forgot() {
        let r = Resolved::<u8>::default();
        let later = Instant::now() + Duration::from_secs(3600);
        let long = "x".repeat(200);
        assert!(!r.evicted());
        for i in 0..200_000u32 {
            let addr = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + (i % 50_000)));
            r.record(&format!("{long}.{i}.allowed.test"), &[addr], later);
            let inner = r.lock();
            assert!(inner.by_name.len() <= SWEEP_AT, "{i}");
            assert!(inner.bytes <= MAX_BYTES + cost(&long, &[addr]) * 2, "{i}");
        }
        assert!(r.evicted());
        let last = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + (199_999 % 50_000)));
        assert_eq!(
            r.name_of(&last).as_deref(),
            Some(format!("{long}.199999.allowed.test").as_str())
        );
        let inner = r.lock();
        assert!(inner
            .by_addr
            .values()
            .all(|n| inner.by_name.contains_key(n)));
    }

    #[test]
    fn refresh_only_when_less_than_half_the_timeout_is_left() {
        let r = Resolved::<u8>::default();
        let t0 = Instant::now();
        let timeout = Duration::from_secs(300);
        let want = [(ip("192.0.2.1"), 0u8)];
        assert_eq!(r.stale(&want, timeout, t0).len(), 1);
        r.pushed(&want, timeout, t0);
        assert!(r
            .stale(&want, timeout, t0 + Duration::from_secs(100))
            .is_empty());
        assert_eq!(
            r.stale(&want, timeout, t0 + Duration::from_secs(151)).len(),
            1
        );
        // Other ports for the same address: rewrite.
        assert_eq!(r.stale(&[(ip("192.0.2.1"), 1u8)], timeout, t0).len(), 1);
    }

    #[test]
    fn names_by_address_includes_the_last_name_of_a_moved_answer() {
        let r = Resolved::<u8>::default();
        let t = Instant::now() + Duration::from_secs(60);
        r.record("a.test", &[ip("192.0.2.1")], t);
        r.record("b.test", &[ip("192.0.2.2")], t);
        // a.test moves on; the kernel may still hold 192.0.2.1 for it until its timeout.
        r.record("a.test", &[ip("192.0.2.3")], t);
        let map = r.names_by_address();
        assert_eq!(map[&ip("192.0.2.1")], ["a.test"]);
        assert_eq!(map[&ip("192.0.2.2")], ["b.test"]);
        assert_eq!(map[&ip("192.0.2.3")], ["a.test"]);
        r.record("c.test", &[ip("192.0.2.4")], t);
        r.record("d.test", &[ip("192.0.2.4")], t);
        r.record("c.test", &[], t);
        let mut names = r.names_by_address()[&ip("192.0.2.4")].clone();
        names.sort();
        assert_eq!(names, ["d.test"]);
    }

    #[test]
    fn unpush_makes_the_next_answer_write_again() {
        let r = Resolved::<u8>::default();
        let now = Instant::now();
        let timeout = Duration::from_secs(300);
        let want = [(ip("192.0.2.1"), 1u8)];
        assert!(!r.was_pushed(&ip("192.0.2.1")));
        r.pushed(&want, timeout, now);
        assert!(r.stale(&want, timeout, now).is_empty());
        assert!(r.was_pushed(&ip("192.0.2.1")));
        r.unpush(&[ip("192.0.2.1")]);
        assert_eq!(r.stale(&want, timeout, now), want);
        assert!(!r.was_pushed(&ip("192.0.2.1")));
    }

    #[test]
    fn forget_keeps_addresses_a_still_allowed_name_uses() {
        let r = Resolved::<()>::default();
        let t = Instant::now() + Duration::from_secs(60);
        r.record("a.test", &[ip("192.0.2.1"), ip("192.0.2.2")], t);
        r.record("b.test", &[ip("192.0.2.2")], t);
        r.pushed(
            &[(ip("192.0.2.1"), ()), (ip("192.0.2.2"), ())],
            Duration::from_secs(60),
            Instant::now(),
        );
        let removed = r.forget(|n| n == "a.test");
        assert_eq!(removed, vec![(ip("192.0.2.1"), ())]);
        assert_eq!(r.name_of(&ip("192.0.2.1")), None);
        assert_eq!(r.name_of(&ip("192.0.2.2")).as_deref(), Some("b.test"));
    }
}
