//! The guard's path to the audit log. DNS answers must not wait on the disk, and a flood of
//! queries or packets must neither fill it nor hide a distinct attempt: events are folded
//! (`fold`: the first of a kind of attempt is written at once, repeats become one record a
//! second with a count), then go through a bounded queue to one writer thread, which writes
//! them within the session log's cap (`writer::Budget`).

use super::fold::Fold;
use super::writer::Writer;
use chrono::Utc;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use yolo_protocol::event::EventKind;

/// Events waiting for the disk before new ones are counted and dropped.
const QUEUE: usize = 8192;
/// The same for first sightings (`writer::reserved`: an allowed name, a blocked destination, a
/// sensitive file), counted apart: a flood of other events (refused names) that fills the
/// queue must not decide which of them are lost.
const SIGHTINGS_QUEUE: usize = 4096;
/// How often repeats are written as aggregated records.
pub const FLUSH: Duration = Duration::from_secs(1);
/// The writer thread's longest sleep.
const TICK: Duration = Duration::from_millis(200);

pub struct Events {
    /// Bounded by `queued`, not by the channel: a bounded std channel allocates and touches
    /// all its [`QUEUE`] slots up front (2 MiB resident in an idle guard); this one grows in
    /// small blocks and gives them back as the writer drains.
    tx: Sender<EventKind>,
    /// Events sent and not yet taken by the writer thread: others, and first sightings.
    queued: [AtomicUsize; 2],
    /// Events the full queue refused, per kind.
    dropped: Mutex<BTreeMap<&'static str, u64>>,
    fold: Mutex<Fold>,
    /// Where the writer thread writes; asked first, so past the cap nothing is queued.
    writer: Option<Arc<Writer>>,
    finishing: AtomicBool,
    finished: (Mutex<bool>, Condvar),
}

impl Events {
    /// Events written to `writer` by a background thread.
    pub fn to_writer(writer: Writer) -> Arc<Events> {
        let writer = Arc::new(writer);
        let (events, rx) = Events::with_writer(Some(Arc::clone(&writer)));
        let drain = Arc::clone(&events);
        std::thread::Builder::new()
            .name("yolo-audit".into())
            .spawn(move || drain.drain(rx, writer))
            .ok();
        events
    }

    /// Events left in a channel, for tests. Repeats stay in the fold (nothing flushes it).
    #[cfg(test)]
    pub fn channel() -> (Arc<Events>, Receiver<EventKind>) {
        Events::with_writer(None)
    }

    fn with_writer(writer: Option<Arc<Writer>>) -> (Arc<Events>, Receiver<EventKind>) {
        let (tx, rx) = mpsc::channel();
        let events = Events {
            tx,
            queued: [AtomicUsize::new(0), AtomicUsize::new(0)],
            dropped: Mutex::new(BTreeMap::new()),
            fold: Mutex::new(Fold::default()),
            writer,
            finishing: AtomicBool::new(false),
            finished: (Mutex::new(false), Condvar::new()),
        };
        (Arc::new(events), rx)
    }

    pub fn emit(&self, kind: EventKind) {
        let passed = self
            .fold
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .offer(kind, Utc::now());
        let Some(kind) = passed else { return };
        if self
            .writer
            .as_ref()
            .is_some_and(|w| w.suppress_if_full(&kind))
        {
            return;
        }
        self.send(kind);
    }

    /// Raw events folded into aggregated records so far.
    pub fn folded(&self) -> u64 {
        self.fold.lock().unwrap_or_else(|p| p.into_inner()).folded()
    }

    fn send(&self, kind: EventKind) {
        let lane = lane(&kind);
        let limit = [QUEUE, SIGHTINGS_QUEUE][lane];
        let full = self.queued[lane].fetch_add(1, Ordering::Relaxed) >= limit;
        let refused = if full {
            Err(kind)
        } else {
            self.tx.send(kind).map_err(|e| e.0)
        };
        if let Err(kind) = refused {
            self.queued[lane].fetch_sub(1, Ordering::Relaxed);
            let mut dropped = self.dropped.lock().unwrap_or_else(|p| p.into_inner());
            *dropped.entry(kind.name()).or_default() += kind.count();
        }
    }

    /// At shutdown: write what is queued, the pending aggregates and the final `suppressed`
    /// counts, waiting at most `limit` for the writer thread.
    pub fn finish(&self, limit: Duration) {
        self.finishing.store(true, Ordering::Relaxed);
        let (done, signal) = &self.finished;
        let done = done.lock().unwrap_or_else(|p| p.into_inner());
        let _ = signal.wait_timeout_while(done, limit, |done| !*done);
    }

    fn drain(&self, rx: Receiver<EventKind>, writer: Arc<Writer>) {
        let mut failed = false;
        let mut write = |kind: EventKind| {
            // A failing disk must not kill the guard; say it once on stderr (docker logs).
            if let Err(e) = writer.write(kind) {
                if !failed {
                    eprintln!("yolo-guard: cannot write the audit log: {e}");
                    failed = true;
                }
            }
        };
        let mut next_flush = Instant::now() + FLUSH;
        loop {
            match rx.recv_timeout(TICK) {
                Ok(kind) => {
                    self.queued[lane(&kind)].fetch_sub(1, Ordering::Relaxed);
                    write(kind)
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
            let finishing = self.finishing.load(Ordering::Relaxed);
            if finishing {
                while let Ok(kind) = rx.try_recv() {
                    self.queued[lane(&kind)].fetch_sub(1, Ordering::Relaxed);
                    write(kind);
                }
            }
            let dropped =
                std::mem::take(&mut *self.dropped.lock().unwrap_or_else(|p| p.into_inner()));
            if !dropped.is_empty() {
                let _ = writer.write_dropped(dropped);
            }
            if finishing || Instant::now() >= next_flush {
                next_flush = Instant::now() + FLUSH;
                let folded = self
                    .fold
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .flush(Utc::now());
                for kind in folded {
                    write(kind);
                }
                let _ = writer.report_suppressed(finishing);
            }
            if finishing {
                let (done, signal) = &self.finished;
                *done.lock().unwrap_or_else(|p| p.into_inner()) = true;
                signal.notify_all();
                return;
            }
        }
    }
}

/// The queue's lane of `kind`: 1 for first sightings, 0 for the rest.
fn lane(kind: &EventKind) -> usize {
    usize::from(super::writer::is_sighting(kind))
}

/// `Guard { status, details }` from literal pairs.
pub fn guard_event<const N: usize>(
    status: &str,
    details: [(&str, serde_json::Value); N],
) -> EventKind {
    let details: BTreeMap<String, serde_json::Value> = details
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    EventKind::Guard {
        status: status.to_string(),
        details,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::test_events::blocked;

    #[test]
    fn a_full_queue_counts_instead_of_blocking() {
        let (events, rx) = Events::channel();
        for _ in 0..QUEUE + 5 {
            events.emit(EventKind::Notice {
                message: "x".into(),
            });
        }
        assert_eq!(
            *events.dropped.lock().unwrap(),
            BTreeMap::from([("notice", 5)])
        );
        drop(rx);
    }

    /// The whole path to the file: a flood of one attempt and one distinctive attempt after
    /// it come out as the two firsts and aggregates that add up to the flood, by the end.
    #[test]
    fn a_flood_is_folded_and_the_distinct_attempt_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let events = Events::to_writer(Writer::open(&path, "s", Some(1 << 20)).unwrap());
        for _ in 0..2000 {
            events.emit(blocked(80));
        }
        events.emit(blocked(4242));
        events.finish(Duration::from_secs(5));
        let lines: Vec<yolo_protocol::event::Event> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let total = |port: u16| -> u64 {
            lines
                .iter()
                .filter(|e| serde_json::to_value(&e.kind).unwrap()["port"] == port)
                .map(|e| e.kind.count())
                .sum()
        };
        assert_eq!((total(80), total(4242)), (2000, 1));
        assert!(lines.len() <= 4, "{lines:?}");
        assert_eq!(events.folded(), 1999);
    }
}
