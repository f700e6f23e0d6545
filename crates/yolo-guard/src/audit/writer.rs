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
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use yolo_protocol::event::{Event, EventKind};

pub struct Writer {
    session: String,
    /// Stamped on every event (`GuardConfig::phase`).
    phase: Option<String>,
    path: PathBuf,
    state: Mutex<(File, Budget)>,
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
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        // A restarted guard continues the same session's file, and its budget.
        let used = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Writer {
            session: session.to_string(),
            phase: None,
            path: path.to_path_buf(),
            state: Mutex::new((file, Budget::new(max_bytes.unwrap_or(u64::MAX), used))),
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
        let (file, budget) = &mut *state;
        if budget.admit(&event.kind, line.len() as u64, event.ts) {
            return file.write_all(&line).map_err(|e| Error::io(&self.path, e));
        }
        self.full.store(true, Ordering::Relaxed);
        let due = budget.reports(event.ts, false);
        self.append(file, due)
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
        state.1.suppress(kind.name(), kind.count(), Utc::now());
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
        let (file, budget) = &mut *state;
        if budget.take(line.len() as u64) {
            return file.write_all(&line).map_err(|e| Error::io(&self.path, e));
        }
        self.full.store(true, Ordering::Relaxed);
        for (of, n) in dropped {
            budget.suppress(of, n, event.ts);
        }
        let due = budget.reports(event.ts, false);
        self.append(file, due)
    }

    /// Due `suppressed` records (call it now and then); with `last`, every changed count.
    pub fn report_suppressed(&self, last: bool) -> Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (file, budget) = &mut *state;
        let due = budget.reports(Utc::now(), last);
        self.append(file, due)
    }

    fn append(&self, file: &mut File, kinds: Vec<EventKind>) -> Result<()> {
        for kind in kinds {
            let line = Event::now(&self.session, kind)
                .in_phase(self.phase.as_deref())
                .to_line();
            file.write_all(&line)
                .map_err(|e| Error::io(&self.path, e))?;
        }
        Ok(())
    }
}

/// What a reserve past the cap is kept for: the first sighting of something the agent reached
/// or tried to reach. Each class has a reserve of its own, so a flood of one (connects to
/// random addresses, lookups of random names under an allowed wildcard) cannot use up another's,
/// and a flood of anything else (refused names, repeats) uses none.
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
        if let Some((class, key)) = reserved(kind) {
            let sighting = self.sighting(class, &key);
            let first = !self.sighted.contains(&sighting);
            let left = self.reserve(class);
            if first && bytes <= *left {
                *left -= bytes;
                self.sighted.insert(sighting);
                return true;
            }
        }
        self.suppress(kind.name(), kind.count(), now);
        false
    }

    /// Whether `kind` might still be written past the cap: a first sighting not yet written
    /// while its class has reserve left.
    pub fn may_reserve(&mut self, kind: &EventKind) -> bool {
        let Some((class, key)) = reserved(kind) else {
            return false;
        };
        let sighting = self.sighting(class, &key);
        !self.sighted.contains(&sighting) && *self.reserve(class) > 0
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
        let out: Vec<EventKind> = self
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
        let folded = EventKind::Blocked {
            proto: "tcp".into(),
            dst: "192.0.2.1".into(),
            port: Some(80),
            name: None,
            count: Some(500),
            first: None,
            last: None,
        };
        assert!(!budget.admit(&folded, 200, t0()));
        assert!(!budget.admit(&notice(), 1, t0()));
        // Not yet due: nothing; due after a second: both changed kinds, with totals so far.
        assert!(budget.reports(t0(), false).is_empty());
        let second = t0() + Duration::seconds(1);
        assert_eq!(
            counts(&budget.reports(second, false)),
            [("blocked".into(), 500), ("notice".into(), 2)]
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
        // A folded repeat is only counted, reserve or not.
        let mut fresh = Budget::new(1600, 1600);
        let folded = crate::audit::test_events::folded(80, 9);
        assert!(!fresh.admit(&folded, 10, t0()));
        assert_eq!(counts(&fresh.reports(t0(), true)), [("blocked".into(), 9)]);
    }

    fn dns(name: &str, decision: &str) -> EventKind {
        EventKind::Dns {
            name: name.into(),
            qtype: "A".into(),
            decision: decision.into(),
            answers: vec![],
            rcode: None,
            count: None,
            first: None,
            last: None,
        }
    }

    /// Past the cap, refused names are counted and use no reserve; each allowed name is
    /// written once from a reserve of its own (its next sighting is counted), and connects
    /// to new destinations have theirs, which a flood of allowed names does not use up.
    #[test]
    fn past_the_cap_each_allowed_name_and_destination_is_written_once_from_its_own_reserve() {
        use crate::audit::test_events::blocked;
        let mut budget = Budget::new(16_000, 16_000);
        assert!(!budget.admit(&notice(), 1, t0()), "the cap is reached");
        for i in 0..10_000 {
            let refused = dns(&format!("f{i}.denied.test"), "refused");
            assert!(!budget.may_reserve(&refused));
            assert!(!budget.admit(&refused, 100, t0()));
        }
        // 1,000 bytes of reserve per class: ten 100-byte allowed names.
        for i in 0..10 {
            let name = dns(&format!("n{i}.allowed.test"), "allowed");
            assert!(budget.may_reserve(&name));
            assert!(budget.admit(&name, 100, t0()), "allowed name {i}");
            assert!(!budget.may_reserve(&name), "once");
            assert!(
                !budget.admit(&name, 100, t0()),
                "its next sighting is counted"
            );
        }
        assert!(!budget.admit(&dns("n10.allowed.test", "allowed"), 100, t0()));
        // The connections' reserve is untouched by the names'.
        assert!(budget.admit(&blocked(4242), 100, t0()));
        assert!(
            !budget.admit(&blocked(4242), 100, t0()),
            "one destination once"
        );
        assert!(budget.admit(&blocked(4243), 100, t0()));
        assert_eq!(
            counts(&budget.reports(t0(), true)),
            [
                ("blocked".into(), 1),
                ("dns".into(), 10_000 + 10 + 1),
                ("notice".into(), 1)
            ]
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
        assert!(text.len() < 1000 + 2 * 200, "{}", text.len());
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
