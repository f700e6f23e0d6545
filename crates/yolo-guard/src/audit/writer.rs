//! Appends the guard's audit events to its file in the host's data folder (bind-mounted).
//! One `write` per line with O_APPEND, so lines stay whole next to other writers. The CLI's
//! `audit::Writer` does the same for the host's file: the two share the line format
//! (`Event::to_line`), not the file handling, because `yolo-protocol` does no I/O.
//!
//! The file is the one thing the agent can make grow on the host, so it has a size cap
//! ([`Budget`]): past it events are counted per kind instead of written, and `suppressed`
//! records say how many — one per kind when it starts, then again after 1, 2, 4, 8 … seconds
//! and at the end, so their own size stays bounded too (a handful of lines per kind).

use crate::error::{Error, Result};
use chrono::{DateTime, Duration, Utc};
use std::collections::{BTreeMap, HashSet};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use yolo_protocol::chain::Appender;
use yolo_protocol::event::{Event, EventKind};

pub struct Writer {
    session: String,
    /// Stamped on every event (`GuardConfig::phase`).
    phase: Option<String>,
    path: PathBuf,
    /// The file, its size cap and its hash chain (`yolo_protocol::chain`).
    state: Mutex<(File, Budget, Appender)>,
    /// Past the cap: callers count their events here instead of queueing them.
    full: AtomicBool,
}

impl Writer {
    /// Append to `path`; `max_bytes`: the session log's cap (`None`: no cap, for the one-off
    /// lines of a failed start or a stop, which must be written whatever the size).
    pub fn open(path: &Path, session: &str, max_bytes: Option<u64>) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        // A restarted guard continues the same session's file, its budget and its chain.
        let used = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Writer {
            session: session.to_string(),
            phase: None,
            path: path.to_path_buf(),
            state: Mutex::new((
                file,
                Budget::new(max_bytes.unwrap_or(u64::MAX), used),
                Appender::new(),
            )),
            full: AtomicBool::new(false),
        })
    }

    /// The same writer, stamping `phase` on every event.
    pub fn in_phase(mut self, phase: Option<&str>) -> Self {
        self.phase = phase.map(str::to_string);
        self
    }

    pub fn write(&self, kind: EventKind) -> Result<()> {
        let event = Event::now(&self.session, kind).in_phase(self.phase.as_deref());
        let line = event.to_line();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (file, budget, chain) = &mut *state;
        if budget.admit(&event.kind, sealed_len(&line), event.ts) {
            return self.seal(file, chain, &line);
        }
        self.full.store(true, Ordering::Relaxed);
        let due = budget.reports(event.ts, false);
        self.append(file, chain, due)
    }

    /// The last record of this writer: how many come before it in the file, so `yolo audit
    /// verify` sees a cut at the end. Written past the cap too.
    pub fn close(&self) -> Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (file, _, chain) = &mut *state;
        let (session, phase) = (&self.session, self.phase.as_deref());
        chain
            .append_with(file, |records| {
                Event::now(session, EventKind::ChainEnd { records })
                    .in_phase(phase)
                    .to_line()
            })
            .map(|_| ())
            .map_err(|e| Error::io(&self.path, e))
    }

    fn seal(&self, file: &File, chain: &mut Appender, line: &[u8]) -> Result<()> {
        chain
            .append(file, line)
            .map(|_| ())
            .map_err(|e| Error::io(&self.path, e))
    }

    /// Past the cap, count `kind` as not written and say so (`true`); else `false`. Lets a
    /// flood past the cap skip the queue and the serializing altogether.
    pub fn suppress_if_full(&self, kind: &EventKind) -> bool {
        if !self.full.load(Ordering::Relaxed) {
            return false;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.1.may_reserve(kind) {
            return false; // the writer decides whether it still fits the reserve
        }
        state.1.left_out(kind, Utc::now());
        true
    }

    /// The `events_dropped` record for events the queue refused (`count`, and `kinds`: per
    /// kind); past the cap they are counted as suppressed under their own kinds instead.
    pub fn write_dropped(&self, dropped: BTreeMap<&'static str, u64>) -> Result<()> {
        let total: u64 = dropped.values().sum();
        let kinds: serde_json::Map<String, serde_json::Value> = dropped
            .iter()
            .map(|(k, n)| (k.to_string(), (*n).into()))
            .collect();
        let details = BTreeMap::from([
            ("count".to_string(), total.into()),
            ("kinds".to_string(), kinds.into()),
        ]);
        let event = Event::now(
            &self.session,
            EventKind::Guard {
                status: "events_dropped".into(),
                details,
            },
        )
        .in_phase(self.phase.as_deref());
        let line = event.to_line();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (file, budget, chain) = &mut *state;
        if budget.take(sealed_len(&line)) {
            return self.seal(file, chain, &line);
        }
        self.full.store(true, Ordering::Relaxed);
        for (of, n) in dropped {
            budget.suppress(of, n, event.ts);
        }
        let due = budget.reports(event.ts, false);
        self.append(file, chain, due)
    }

    /// Due `suppressed` records (call it now and then); with `last`, every changed count.
    pub fn report_suppressed(&self, last: bool) -> Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (file, budget, chain) = &mut *state;
        let due = budget.reports(Utc::now(), last);
        self.append(file, chain, due)
    }

    fn append(&self, file: &File, chain: &mut Appender, kinds: Vec<EventKind>) -> Result<()> {
        for kind in kinds {
            let line = Event::now(&self.session, kind)
                .in_phase(self.phase.as_deref())
                .to_line();
            self.seal(file, chain, &line)?;
        }
        Ok(())
    }
}

/// A record of something the user decided, written whatever the cap.
fn user_decision(kind: &EventKind) -> bool {
    match kind {
        EventKind::Approval { decision, .. } => decision == "allowed" || decision == "denied",
        EventKind::Firewall { .. } => true,
        _ => false,
    }
}

/// The size a line takes in the file once sealed.
fn sealed_len(line: &[u8]) -> u64 {
    (line.len() + yolo_protocol::chain::SEAL_LEN) as u64
}

/// What a reserve past the cap is kept for: the first sighting of something the agent reached
/// or tried to reach. Each class has a reserve of its own, so a flood of one (connects to
/// random addresses, lookups of random names under an allowed wildcard) cannot use up another's,
/// and a flood of anything else (refused names, repeats) uses none.
///
/// Within a class, sightings come in groups the agent cannot multiply ([`group`]): allowed
/// names by the allowlist entry that allowed them (the user's list), blocked destinations by
/// their address's /8. The first sighting of each group past the cap is always written; the
/// reserve pays for further distinct names or destinations, and no group may take more of it
/// than it leaves for the others. What is left out of a group is counted per group and
/// written as a sample record (its first, `sample_of` and the count) with the `suppressed`
/// reports, so a flood of random names under one wildcard neither hides the next entry's
/// lookup nor loses its own count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reserved {
    /// The first `blocked` record of a destination (protocol, address, port).
    Connection,
    /// The first `dns` record of an allowed name: the agent reached it.
    Name,
    /// A change to a path the host runs (`file` records flagged `sensitive`, never folded).
    Sensitive,
}

/// Whether `kind` is a first sighting ([`reserved`] without building its key).
pub fn is_sighting(kind: &EventKind) -> bool {
    match kind {
        EventKind::Blocked { count: None, .. } => true,
        EventKind::Dns {
            decision,
            count: None,
            ..
        } => decision == "allowed",
        EventKind::File { sensitive, .. } => *sensitive,
        _ => false,
    }
}

/// The reserve class of `kind` and what makes it distinct (the key of its first sighting);
/// `None` for what a reserve is not kept for (folded repeats among them).
pub fn reserved(kind: &EventKind) -> Option<(Reserved, String)> {
    match kind {
        EventKind::Blocked {
            proto,
            dst,
            port,
            count: None,
            ..
        } => Some((Reserved::Connection, format!("{proto} {dst} {port:?}"))),
        EventKind::Dns {
            name,
            decision,
            count: None,
            ..
        } if decision == "allowed" => Some((Reserved::Name, name.clone())),
        EventKind::File {
            path,
            sensitive: true,
            ..
        } => Some((Reserved::Sensitive, path.clone())),
        _ => None,
    }
}

/// The group of a sighting class `kind` belongs to ([`Reserved`]), for any record of it,
/// folded ones too: `(class, group)`. `None` for what is not grouped (sensitive files, whose
/// reserve is kept per path alone, and everything that is not a sighting).
pub fn group(kind: &EventKind) -> Option<(Reserved, String)> {
    match kind {
        EventKind::Dns {
            decision,
            entry,
            sample_of: None,
            ..
        } if decision == "allowed" => {
            Some((Reserved::Name, entry.clone().unwrap_or_else(|| "*".into())))
        }
        EventKind::Blocked {
            dst,
            sample_of: None,
            ..
        } => Some((Reserved::Connection, address_block(dst))),
        _ => None,
    }
}

/// The /8 of an address (`203.0.0.0/8`, `2000::/8`): 512 blocks at most, whatever addresses
/// the agent tries.
fn address_block(dst: &str) -> String {
    match dst.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(a)) => format!("{}.0.0.0/8", a.octets()[0]),
        Ok(std::net::IpAddr::V6(a)) => {
            let first = a.octets()[0];
            format!("{}/8", std::net::Ipv6Addr::from(u128::from(first) << 120))
        }
        Err(_) => "?".into(),
    }
}

/// A group's share of its class's reserve past the cap, and what of it was left out since
/// its last sample record.
#[derive(Default)]
struct Group {
    /// Its first sighting past the cap is written.
    sighted: bool,
    /// Reserve bytes its sightings took.
    spent: u64,
    /// The first record left out since the last report, and how many occurrences were.
    sample: Option<EventKind>,
    count: u64,
    first: Option<DateTime<Utc>>,
    last: Option<DateTime<Utc>>,
}

/// A session log's size cap: what may still be written, and a tally of what was not.
pub struct Budget {
    max: u64,
    used: u64,
    /// Set by the first line that did not fit: from then on nothing but reports is written,
    /// and first sightings ([`Reserved`]) while their class's reserve lasts.
    full: bool,
    /// Bytes kept past the cap per class, a sixteenth of the cap each: a flood of distinct
    /// refused names fills the cap in seconds, and the allowed name the agent then reaches, or
    /// the one connection attempt that matters, must still be described, not only counted.
    reserves: BTreeMap<Reserved, u64>,
    /// The first sightings written from a reserve (a keyed hash of class and key): each is
    /// written once; the next sighting of it is counted. At most a reserve's bytes over its
    /// shortest line entries, so bounded by the cap.
    sighted: HashSet<u64>,
    sighting_key: std::collections::hash_map::RandomState,
    /// Per group ([`group`]) past the cap: bounded by the allowlist's entries and 512 blocks.
    groups: BTreeMap<(Reserved, String), Group>,
    tally: BTreeMap<&'static str, Tally>,
    /// When the next round of `suppressed` records may be written, and the wait after it.
    next_report: Option<DateTime<Utc>>,
    backoff: Duration,
}

struct Tally {
    count: u64,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    reported: u64,
}

impl Budget {
    pub fn new(max: u64, used: u64) -> Budget {
        Budget {
            max,
            used,
            full: false,
            reserves: BTreeMap::new(),
            sighted: HashSet::new(),
            sighting_key: Default::default(),
            groups: BTreeMap::new(),
            tally: BTreeMap::new(),
            next_report: None,
            backoff: Duration::seconds(1),
        }
    }

    /// Whether a line of `bytes` for `kind` fits; if not, it is counted (as the occurrences
    /// it stands for) under its kind.
    pub fn admit(&mut self, kind: &EventKind, bytes: u64, now: DateTime<Utc>) -> bool {
        if self.take(bytes) {
            return true;
        }
        // The user's own decisions (an answered question, an allowlist change) are written
        // past the cap: a person makes them, so they cannot flood it, and the agent's flood
        // must not hide them.
        if user_decision(kind) {
            return true;
        }
        if let Some((class, key)) = reserved(kind) {
            let sighting = self.sighting(class, &key);
            if !self.sighted.contains(&sighting) && self.fits_reserve(class, kind, bytes) {
                self.sighted.insert(sighting);
                return true;
            }
        }
        self.left_out(kind, now);
        false
    }

    /// Whether the sighting `kind` of `class` is written past the cap, and if so charge it:
    /// the first of its group always (groups are bounded, see [`Reserved`]), others while
    /// the reserve has room and their group's share stays within what is left for the rest.
    fn fits_reserve(&mut self, class: Reserved, kind: &EventKind, bytes: u64) -> bool {
        let left = *self.reserve(class);
        let Some(key) = group(kind) else {
            if bytes > left {
                return false;
            }
            *self.reserve(class) -= bytes;
            return true;
        };
        let group = self.groups.entry(key).or_default();
        let first = !group.sighted;
        let fair = bytes <= left && group.spent + bytes <= left - bytes;
        if !(first || fair) {
            return false;
        }
        group.sighted = true;
        let charged = bytes.min(left);
        group.spent += charged;
        *self.reserve(class) -= charged;
        true
    }

    /// Fewer bytes than any record a reserve is spent on takes ([`Budget::may_reserve`] must
    /// not say no to what `fits_reserve` would take).
    const MIN_RECORD: u64 = 64;

    /// Whether `kind` might still be written past the cap: a first sighting not yet written
    /// while its class has reserve left, or the first of its group.
    pub fn may_reserve(&mut self, kind: &EventKind) -> bool {
        let Some((class, key)) = reserved(kind) else {
            return false;
        };
        let sighting = self.sighting(class, &key);
        if self.sighted.contains(&sighting) {
            return false;
        }
        let left = *self.reserve(class);
        let Some(key) = group(kind) else {
            return left > 0;
        };
        match self.groups.get(&key) {
            None => true,
            Some(g) if !g.sighted => true,
            // The fairness `fits_reserve` applies, for the smallest record: a group that spent
            // its share is counted here, on the fast path, and never queued, so its flood
            // cannot crowd another group's first sighting out of the queue.
            Some(g) => g.spent + Self::MIN_RECORD <= left.saturating_sub(Self::MIN_RECORD),
        }
    }

    /// Count `kind` as not written: in its group's next sample record when it has a group,
    /// else under its kind in `suppressed`.
    pub fn left_out(&mut self, kind: &EventKind, now: DateTime<Utc>) {
        let Some(key) = group(kind) else {
            self.suppress(kind.name(), kind.count(), now);
            return;
        };
        let group = self.groups.entry(key).or_default();
        if group.sample.is_none() {
            group.sample = Some(kind.clone());
            group.first = Some(kind.folded().and_then(|f| f.first).unwrap_or(now));
        }
        group.count += kind.count();
        group.last = Some(kind.folded().and_then(|f| f.last).unwrap_or(now));
    }

    fn reserve(&mut self, class: Reserved) -> &mut u64 {
        let share = self.max / 16;
        self.reserves.entry(class).or_insert(share)
    }

    fn sighting(&self, class: Reserved, key: &str) -> u64 {
        use std::hash::BuildHasher;
        self.sighting_key.hash_one((class, key))
    }

    /// Whether `bytes` more fit (and are now used); the first refusal closes the log.
    pub fn take(&mut self, bytes: u64) -> bool {
        if !self.full && self.used.saturating_add(bytes) <= self.max {
            self.used += bytes;
            return true;
        }
        self.full = true;
        false
    }

    /// Count `n` events of kind `of` as not written.
    pub fn suppress(&mut self, of: &'static str, n: u64, now: DateTime<Utc>) {
        let tally = self.tally.entry(of).or_insert(Tally {
            count: 0,
            first: now,
            last: now,
            reported: 0,
        });
        tally.count += n;
        tally.last = now;
    }

    /// `suppressed` records for the kinds whose count changed since they were last reported,
    /// when a report is due (the first at once, then after 1, 2, 4 … seconds) or `force`d.
    pub fn reports(&mut self, now: DateTime<Utc>, force: bool) -> Vec<EventKind> {
        let due = self.next_report.is_none_or(|at| now >= at);
        if !(due || force) {
            return vec![];
        }
        let max_bytes = self.max;
        let mut out: Vec<EventKind> = self
            .tally
            .iter_mut()
            .filter(|(_, t)| t.count != t.reported)
            .map(|(of, t)| {
                t.reported = t.count;
                EventKind::Suppressed {
                    of: of.to_string(),
                    count: t.count,
                    first: t.first,
                    last: t.last,
                    max_bytes,
                }
            })
            .collect();
        // Each group's sample record stands for what was left out since the last one, so
        // readers add up `count` as they do for folded records.
        for ((_, name), group) in self.groups.iter_mut() {
            let Some(mut sample) = group.sample.take() else {
                continue;
            };
            let now_or = |t: Option<DateTime<Utc>>| t.unwrap_or(now);
            sample.set_folded(
                std::mem::take(&mut group.count),
                now_or(group.first.take()),
                now_or(group.last.take()),
            );
            if let EventKind::Dns { sample_of, .. } | EventKind::Blocked { sample_of, .. } =
                &mut sample
            {
                *sample_of = Some(name.clone());
            }
            out.push(sample);
        }
        if !out.is_empty() && due {
            self.next_report = Some(now + self.backoff);
            self.backoff = self.backoff * 2;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice() -> EventKind {
        EventKind::Notice {
            message: "x".into(),
        }
    }

    fn t0() -> DateTime<Utc> {
        "2025-03-04T10:15:00Z".parse().unwrap()
    }

    fn counts(records: &[EventKind]) -> Vec<(String, u64)> {
        records
            .iter()
            .map(|r| match r {
                EventKind::Suppressed { of, count, .. } => (of.clone(), *count),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn past_the_cap_events_are_counted_per_kind_and_reported_with_backoff() {
        let mut budget = Budget::new(100, 40);
        assert!(budget.admit(&notice(), 60, t0()));
        assert!(!budget.admit(&notice(), 1, t0()));
        // The first report comes at once.
        assert_eq!(counts(&budget.reports(t0(), false)), [("notice".into(), 1)]);
        let mut folded = dns("f.denied.test", "refused");
        folded.set_folded(500, t0(), t0());
        assert!(!budget.admit(&folded, 200, t0()));
        assert!(!budget.admit(&notice(), 1, t0()));
        // Not yet due: nothing; due after a second: both changed kinds, with totals so far.
        assert!(budget.reports(t0(), false).is_empty());
        let second = t0() + Duration::seconds(1);
        assert_eq!(
            counts(&budget.reports(second, false)),
            [("dns".into(), 500), ("notice".into(), 2)]
        );
        // Then two seconds; an unchanged kind is not repeated.
        assert!(!budget.admit(&notice(), 1, second));
        assert!(budget
            .reports(second + Duration::milliseconds(1500), false)
            .is_empty());
        assert_eq!(
            counts(&budget.reports(second + Duration::seconds(2), false)),
            [("notice".into(), 3)]
        );
        // At the end every changed count, due or not; nothing when nothing changed.
        assert!(!budget.admit(&notice(), 1, second));
        assert_eq!(
            counts(&budget.reports(second + Duration::seconds(2), true)),
            [("notice".into(), 4)]
        );
        assert!(budget
            .reports(second + Duration::seconds(60), true)
            .is_empty());
    }

    #[test]
    fn past_the_cap_a_distinct_blocked_destination_is_still_described_from_the_reserve() {
        use crate::audit::test_events::blocked;
        let mut budget = Budget::new(1600, 0);
        assert!(budget.admit(&notice(), 1600, t0()));
        assert!(!budget.admit(&notice(), 10, t0()), "the cap is reached");
        // 100 bytes of reserve (1/16): one 60-byte record fits, the next does not.
        assert!(budget.admit(&blocked(4242), 60, t0()));
        assert!(!budget.admit(&blocked(4243), 60, t0()));
        // A folded repeat is only counted, reserve or not: in its address block's sample.
        let mut fresh = Budget::new(1600, 1600);
        let folded = crate::audit::test_events::folded(80, 9);
        assert!(!fresh.admit(&folded, 10, t0()));
        assert_eq!(
            samples(&fresh.reports(t0(), true)),
            [("192.0.0.0/8".into(), 9, "192.0.2.1".into())]
        );
    }

    fn dns(name: &str, decision: &str) -> EventKind {
        EventKind::Dns {
            name: name.into(),
            qtype: "A".into(),
            decision: decision.into(),
            answers: vec![],
            rcode: None,
            entry: None,
            sample_of: None,
            count: None,
            first: None,
            last: None,
        }
    }

    fn allowed(name: &str, entry: &str) -> EventKind {
        let mut kind = dns(name, "allowed");
        if let EventKind::Dns { entry: e, .. } = &mut kind {
            *e = Some(entry.into());
        }
        kind
    }

    /// The sample records among `records`: (group, count, the sample's name or address).
    fn samples(records: &[EventKind]) -> Vec<(String, u64, String)> {
        records
            .iter()
            .filter_map(|r| match r {
                EventKind::Dns {
                    sample_of: Some(g),
                    name,
                    ..
                } => Some((g.clone(), r.count(), name.clone())),
                EventKind::Blocked {
                    sample_of: Some(g),
                    dst,
                    ..
                } => Some((g.clone(), r.count(), dst.clone())),
                _ => None,
            })
            .collect()
    }

    fn suppressed_only(records: &[EventKind]) -> Vec<EventKind> {
        records
            .iter()
            .filter(|r| r.name() == "suppressed")
            .cloned()
            .collect()
    }

    /// Issue 23.3: past the cap, refused names are counted and use no reserve; each allowed
    /// name is written once (its next sighting is counted). A flood of distinct allowed names
    /// under one wildcard takes at most half the names' reserve and is then counted, exactly,
    /// in its entry's sample record: another entry's first lookup, and a few more of its
    /// names, are still written, and so is the first connect to another address block, which
    /// a flood of connects in one block cannot keep out either.
    #[test]
    fn past_the_cap_a_flood_under_one_entry_neither_hides_another_entry_nor_loses_its_count() {
        use crate::audit::test_events::blocked;
        let mut budget = Budget::new(16_000, 16_000);
        assert!(!budget.admit(&notice(), 1, t0()), "the cap is reached");
        for i in 0..10_000 {
            let refused = dns(&format!("f{i}.denied.test"), "refused");
            assert!(!budget.may_reserve(&refused));
            assert!(!budget.admit(&refused, 100, t0()));
        }
        // 1,000 bytes of reserve per class, 100 bytes a name: the flood's first names are
        // written, each once, until its entry holds half of what is left.
        let mut written = 0;
        for i in 0..10_000 {
            let name = allowed(&format!("r{i}.allowed.test"), "*.allowed.test");
            let may = budget.may_reserve(&name);
            if budget.admit(&name, 100, t0()) {
                assert!(may);
                written += 1;
                assert!(!budget.may_reserve(&name), "once");
                assert!(!budget.admit(&name, 100, t0()), "its next one is counted");
            }
        }
        assert!((1..=5).contains(&written), "{written} written");
        // Once the entry has spent its share, its further names are counted on the fast path
        // (`may_reserve` says no), never queued to crowd out another entry's first sighting.
        let queued = (10_000..20_000)
            .filter(|i| {
                budget.may_reserve(&allowed(&format!("r{i}.allowed.test"), "*.allowed.test"))
            })
            .count();
        assert_eq!(queued, 0, "a spent entry's names still go to the queue");
        // Another entry's first lookup, then its second name: both written.
        let other = allowed("api.other.test", "api.other.test");
        assert!(budget.may_reserve(&other));
        assert!(
            budget.admit(&other, 100, t0()),
            "another entry's first sighting"
        );
        assert!(budget.admit(&allowed("b.second.test", "*.second.test"), 100, t0()));
        assert!(budget.admit(&allowed("c.second.test", "*.second.test"), 100, t0()));
        // A first sighting of an entry is written even with the reserve spent.
        for i in 0..100 {
            budget.admit(
                &allowed(&format!("x{i}.second.test"), "*.second.test"),
                100,
                t0(),
            );
        }
        assert!(budget.admit(&allowed("late.test", "late.test"), 100, t0()));
        // Connects: a flood in one /8 does not keep the first connect to another out.
        let mut connects = 0;
        for port in 1..2000 {
            connects += u64::from(budget.admit(&blocked(port), 100, t0()));
        }
        assert!((1..=5).contains(&connects), "{connects}");
        let elsewhere = EventKind::Blocked {
            proto: "tcp".into(),
            dst: "198.51.100.7".into(),
            port: Some(22),
            name: None,
            sample_of: None,
            count: None,
            first: None,
            last: None,
        };
        assert!(budget.admit(&elsewhere, 100, t0()));
        // Counts are exact: the refused and the notice in `suppressed`, each entry's and
        // block's left-out records in its sample record, named by its first.
        let reports = budget.reports(t0(), true);
        assert_eq!(
            counts(&suppressed_only(&reports)),
            [("dns".into(), 10_000), ("notice".into(), 1)]
        );
        let sampled = samples(&reports);
        let flood = sampled
            .iter()
            .find(|(g, ..)| g == "*.allowed.test")
            .expect("the flood's sample record");
        // Every name of the flood not written, and the repeat of each one written.
        assert_eq!(flood.1, 10_000, "{sampled:?}");
        assert_eq!(flood.2, "r0.allowed.test");
        let block = sampled.iter().find(|(g, ..)| g == "192.0.0.0/8").unwrap();
        assert_eq!((block.1, block.2.as_str()), (1999 - connects, "192.0.2.1"));
        assert!(!sampled
            .iter()
            .any(|(g, ..)| g == "198.0.0.0/8" || g == "late.test"));
        // The next report stands for what came since, so the records add up.
        budget.admit(&allowed("r1.allowed.test", "*.allowed.test"), 100, t0());
        let again = samples(&budget.reports(t0() + Duration::seconds(5), true));
        assert_eq!(
            again,
            [("*.allowed.test".into(), 1, "r1.allowed.test".into())]
        );
    }

    #[test]
    fn the_writer_stops_at_the_cap_and_says_what_it_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let writer = Writer::open(&path, "s", Some(1000)).unwrap();
        assert!(!writer.suppress_if_full(&notice()));
        for _ in 0..990 {
            writer.write(notice()).unwrap();
        }
        // Past the cap, callers count without serializing or queueing.
        for _ in 0..10 {
            assert!(writer.suppress_if_full(&notice()));
        }
        writer.report_suppressed(true).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Event> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let written = lines.iter().filter(|e| e.kind.name() == "notice").count() as u64;
        let last = lines.last().unwrap();
        assert_eq!(last.kind.name(), "suppressed");
        assert_eq!(written + last.kind.count(), 1000);
        // The cap, plus the suppressed records themselves (two: the first and the last).
        assert_eq!(lines.len() as u64, written + 2, "{text}");
        let sealed = yolo_protocol::chain::SEAL_LEN;
        assert!(text.len() < 1000 + 2 * (200 + sealed), "{}", text.len());
        // A reopened writer (a restarted guard) keeps to the same budget.
        let again = Writer::open(&path, "s", Some(1000)).unwrap();
        again.write(notice()).unwrap();
        let after = std::fs::read_to_string(&path).unwrap();
        let added: Vec<Event> = after[text.len()..]
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(added.len(), 1, "{after}");
        assert_eq!(added[0].kind.name(), "suppressed");
        // Events the queue dropped count under their own kinds once the log is full.
        again
            .write_dropped(BTreeMap::from([("dns", 700), ("notice", 3)]))
            .unwrap();
        again.report_suppressed(true).unwrap();
        let last = std::fs::read_to_string(&path).unwrap();
        let reports: Vec<(String, u64)> = last
            .lines()
            .filter_map(|l| serde_json::from_str::<Event>(l).ok())
            .filter_map(|e| match e.kind {
                EventKind::Suppressed { of, count, .. } => Some((of, count)),
                _ => None,
            })
            .collect();
        assert_eq!(
            reports.last().cloned(),
            Some(("notice".to_string(), 4)),
            "{reports:?}"
        );
        assert!(reports.contains(&("dns".to_string(), 700)), "{reports:?}");
    }
}
