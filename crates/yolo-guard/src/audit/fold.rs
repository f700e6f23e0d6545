//! Aggregation of repeated events, so a flood of identical attempts costs one line per second
//! instead of one per packet, while every distinct attempt still reaches the log at once.
//!
//! The key is the whole event: for `blocked`/`connection` that is (destination, port, protocol,
//! last name), for `dns` (name, type, decision, answers, code). The first occurrence of a key is
//! written as it is; later ones are counted and [`Fold::flush`] turns them into one record of
//! the same kind with `count`, `first` and `last`. Readers add up `count` (one for a record
//! without it), so nothing is lost, only folded.
//!
//! Memory is bounded by [`MAX_KEYS`]: past it a new key is not tracked but written through, so
//! a flood of distinct attempts is never folded away; the size cap (`writer::Budget`) is what
//! bounds the disk then. Pure: time comes from the caller.

use chrono::{DateTime, Duration, Utc};
use std::collections::HashMap;
use yolo_protocol::event::EventKind;

/// Keys tracked at once.
pub const MAX_KEYS: usize = 4096;
/// A key not seen for this long is forgotten (its next occurrence is written in full again).
pub const IDLE: Duration = Duration::seconds(10);

struct Entry {
    kind: EventKind,
    /// Occurrences since the last flush, and when the first and last of them happened.
    pending: u64,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
}

pub struct Fold {
    keys: HashMap<Vec<u8>, Entry>,
    max_keys: usize,
    /// Raw events folded into aggregated records since the start (for the log's readers this is
    /// the sum of `count`; kept for tests and the guard's own accounting).
    folded: u64,
}

impl Default for Fold {
    fn default() -> Self {
        Fold::new(MAX_KEYS)
    }
}

impl Fold {
    pub fn new(max_keys: usize) -> Fold {
        Fold {
            keys: HashMap::new(),
            max_keys,
            folded: 0,
        }
    }

    /// `Some(kind)` to write now (first of its key, or a kind never folded); `None` when it
    /// was counted into its key's next aggregated record.
    pub fn offer(&mut self, kind: EventKind, now: DateTime<Utc>) -> Option<EventKind> {
        if !foldable(&kind) {
            return Some(kind);
        }
        let key = serde_json::to_vec(&key_of(&kind)).unwrap_or_default();
        if let Some(entry) = self.keys.get_mut(&key) {
            if entry.pending == 0 {
                entry.first = now;
            }
            entry.pending += 1;
            entry.last = now;
            self.folded += 1;
            return None;
        }
        if self.keys.len() < self.max_keys {
            let entry = Entry {
                kind: kind.clone(),
                pending: 0,
                first: now,
                last: now,
            };
            self.keys.insert(key, entry);
        }
        Some(kind)
    }

    /// One aggregated record per key that repeated since the last flush; forget idle keys.
    pub fn flush(&mut self, now: DateTime<Utc>) -> Vec<EventKind> {
        let mut out = Vec::new();
        self.keys.retain(|_, entry| {
            if entry.pending > 0 {
                out.push(aggregate(
                    &entry.kind,
                    entry.pending,
                    entry.first,
                    entry.last,
                ));
                entry.pending = 0;
                return true;
            }
            now - entry.last < IDLE
        });
        // Stable order for readers and tests: by first occurrence.
        out.sort_by_key(|k| k.folded().and_then(|f| f.first));
        out
    }

    /// Raw events folded so far.
    pub fn folded(&self) -> u64 {
        self.folded
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.keys.len()
    }
}

/// What makes two events the same attempt: the whole event, but for an `http` record its
/// sizes and duration, which differ from one request to the next (a flood of the same request
/// folds; the aggregated record keeps the first one's numbers).
fn key_of(kind: &EventKind) -> std::borrow::Cow<'_, EventKind> {
    match kind {
        EventKind::Http { .. } => {
            let mut key = kind.clone();
            if let EventKind::Http {
                bytes_up,
                bytes_down,
                duration_ms,
                ..
            } = &mut key
            {
                (*bytes_up, *bytes_down, *duration_ms) = (0, 0, 0);
            }
            std::borrow::Cow::Owned(key)
        }
        _ => std::borrow::Cow::Borrowed(kind),
    }
}

/// The kinds an agent can repeat at will (network attempts and DNS queries), not yet folded.
fn foldable(kind: &EventKind) -> bool {
    kind.folded().is_some_and(|f| f.count.is_none())
}

fn aggregate(kind: &EventKind, n: u64, from: DateTime<Utc>, to: DateTime<Utc>) -> EventKind {
    let mut kind = kind.clone();
    kind.set_folded(n, from, to);
    kind
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::test_events::blocked;

    fn t0() -> DateTime<Utc> {
        "2025-03-04T10:15:00Z".parse().unwrap()
    }

    fn ms(n: i64) -> Duration {
        Duration::milliseconds(n)
    }

    #[test]
    fn the_first_of_a_key_passes_and_repeats_fold_into_one_record() {
        let mut fold = Fold::default();
        let mut written = vec![];
        for i in 0..2000 {
            written.extend(fold.offer(blocked(80), t0() + ms(i)));
        }
        // The distinctive attempt after the flood is written at once, not folded.
        written.extend(fold.offer(blocked(4242), t0() + ms(2000)));
        assert_eq!(written, [blocked(80), blocked(4242)]);
        let flushed = fold.flush(t0() + ms(2500));
        let EventKind::Blocked {
            port,
            count,
            first,
            last,
            ..
        } = &flushed[..].first().cloned().expect("one aggregated record")
        else {
            panic!("{flushed:?}")
        };
        assert_eq!(flushed.len(), 1, "{flushed:?}");
        assert_eq!(*port, Some(80));
        assert_eq!(*count, Some(1999));
        assert_eq!((*first, *last), (Some(t0() + ms(1)), Some(t0() + ms(1999))));
        assert_eq!(fold.folded(), 1999);
        // Nothing new: nothing to flush, and the counts restart per record.
        assert!(fold.flush(t0() + ms(3000)).is_empty());
        assert_eq!(fold.offer(blocked(80), t0() + ms(3100)), None);
        let again = fold.flush(t0() + ms(3500));
        assert_eq!(again[0].count(), 1);
    }

    #[test]
    fn idle_keys_are_forgotten_and_written_in_full_again() {
        let mut fold = Fold::default();
        assert!(fold.offer(blocked(80), t0()).is_some());
        assert!(fold.flush(t0() + ms(500)).is_empty());
        assert_eq!(fold.len(), 1);
        assert!(fold.flush(t0() + IDLE + ms(1)).is_empty());
        assert_eq!(fold.len(), 0);
        assert!(fold.offer(blocked(80), t0() + IDLE + ms(2)).is_some());
    }

    #[test]
    fn past_the_key_cap_new_keys_are_written_not_lost() {
        let mut fold = Fold::new(2);
        assert!(fold.offer(blocked(1), t0()).is_some());
        assert!(fold.offer(blocked(2), t0()).is_some());
        // Untracked: every occurrence is written.
        assert!(fold.offer(blocked(3), t0()).is_some());
        assert!(fold.offer(blocked(3), t0()).is_some());
        assert_eq!(fold.len(), 2);
        assert_eq!(fold.offer(blocked(1), t0()), None);
    }

    #[test]
    fn other_kinds_and_aggregates_pass_untouched() {
        let mut fold = Fold::default();
        let notice = EventKind::Notice {
            message: "x".into(),
        };
        assert_eq!(fold.offer(notice.clone(), t0()), Some(notice.clone()));
        assert_eq!(fold.offer(notice.clone(), t0()), Some(notice));
        let aggregated = aggregate(&blocked(80), 5, t0(), t0());
        assert!(fold.offer(aggregated.clone(), t0()).is_some());
        assert!(fold.offer(aggregated, t0()).is_some());
    }

    #[test]
    fn dns_folds_by_name_type_and_decision() {
        let dns = |name: &str, decision: &str| EventKind::Dns {
            name: name.into(),
            qtype: "A".into(),
            decision: decision.into(),
            answers: vec![],
            rcode: Some("REFUSED".into()),
            entry: None,
            sample_of: None,
            count: None,
            first: None,
            last: None,
        };
        let mut fold = Fold::default();
        assert!(fold.offer(dns("a.test", "refused"), t0()).is_some());
        assert!(fold.offer(dns("a.test", "refused"), t0()).is_none());
        assert!(fold.offer(dns("b.test", "refused"), t0()).is_some());
        assert!(fold.offer(dns("a.test", "error"), t0()).is_some());
        let flushed = fold.flush(t0() + ms(1));
        assert_eq!(flushed.len(), 1);
        assert_eq!(serde_json::to_value(&flushed[0]).unwrap()["name"], "a.test");
    }
}
