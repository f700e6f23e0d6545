//! The guard's path to the audit log. DNS answers must not wait on the disk, and a flood of
//! queries or garbage packets must not fill it: events go through a bounded queue to one writer
//! thread, and noisy kinds (malformed packets) are capped per second with a count of the rest.

use crate::writer::Writer;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use yolo_protocol::event::EventKind;

/// Events waiting for the disk before new ones are counted and dropped.
const QUEUE: usize = 8192;
/// Malformed-packet events recorded per second; the rest are only counted.
pub const MALFORMED_PER_SEC: u32 = 20;

pub struct Events {
    tx: SyncSender<EventKind>,
    dropped: AtomicU64,
    malformed: RateCap,
}

impl Events {
    /// Events written to `writer` by a background thread.
    pub fn to_writer(writer: Writer) -> Arc<Events> {
        let (events, rx) = Events::channel();
        let drain = Arc::clone(&events);
        std::thread::Builder::new()
            .name("yolo-audit".into())
            .spawn(move || drain.drain(rx, writer))
            .ok();
        events
    }

    /// Events left in a channel, for tests and for callers that print them.
    pub fn channel() -> (Arc<Events>, Receiver<EventKind>) {
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let events = Events {
            tx,
            dropped: AtomicU64::new(0),
            malformed: RateCap::new(MALFORMED_PER_SEC),
        };
        (Arc::new(events), rx)
    }

    pub fn emit(&self, kind: EventKind) {
        match self.tx.try_send(kind) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Emit a malformed-input event unless this second's budget is spent.
    pub fn emit_malformed(&self, kind: EventKind) {
        if let Some(suppressed) = self.malformed.admit(Instant::now()) {
            if suppressed > 0 {
                self.emit(guard_event(
                    "dns_malformed_suppressed",
                    [("count", suppressed.into())],
                ));
            }
            self.emit(kind);
        }
    }

    fn drain(&self, rx: Receiver<EventKind>, writer: Writer) {
        let mut failed = false;
        loop {
            let kind = match rx.recv_timeout(Duration::from_secs(1)) {
                Ok(kind) => Some(kind),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            };
            let dropped = self.dropped.swap(0, Ordering::Relaxed);
            if dropped > 0 {
                let _ = writer.write(guard_event("events_dropped", [("count", dropped.into())]));
            }
            if let Some(kind) = kind {
                // A failing disk must not kill the guard; say it once on stderr (docker logs).
                if let Err(e) = writer.write(kind) {
                    if !failed {
                        eprintln!("yolo-guard: cannot write the audit log: {e}");
                        failed = true;
                    }
                }
            }
        }
    }
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

/// At most `per_sec` admissions per wall-clock second.
struct RateCap {
    per_sec: u32,
    state: Mutex<(Instant, u32, u64)>,
}

impl RateCap {
    fn new(per_sec: u32) -> Self {
        RateCap {
            per_sec,
            state: Mutex::new((Instant::now(), 0, 0)),
        }
    }

    /// `Some(suppressed since the last admission)` when admitted, `None` when over the cap.
    fn admit(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (start, count, suppressed) = &mut *state;
        if now.duration_since(*start) >= Duration::from_secs(1) {
            *start = now;
            *count = 0;
        }
        if *count >= self.per_sec {
            *suppressed += 1;
            return None;
        }
        *count += 1;
        Some(std::mem::take(suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_cap_counts_what_it_suppresses() {
        let cap = RateCap::new(2);
        let t0 = Instant::now();
        assert_eq!(cap.admit(t0), Some(0));
        assert_eq!(cap.admit(t0), Some(0));
        assert_eq!(cap.admit(t0), None);
        assert_eq!(cap.admit(t0), None);
        assert_eq!(cap.admit(t0 + Duration::from_millis(1500)), Some(2));
    }

    #[test]
    fn a_full_queue_counts_instead_of_blocking() {
        let (events, rx) = Events::channel();
        for _ in 0..QUEUE + 5 {
            events.emit(EventKind::Notice {
                message: "x".into(),
            });
        }
        assert_eq!(events.dropped.load(Ordering::Relaxed), 5);
        drop(rx);
    }
}
