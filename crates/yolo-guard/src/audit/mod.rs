//! The guard's audit log: how an event gets from the part that saw it (DNS, the NFLOG reader,
//! the file watcher, the exec supervisor) to the session log on the host.
//!
//! - `events`: the queue every producer emits into, and the one thread that writes;
//! - `fold`: repeats of one attempt folded into a record a second with a count;
//! - `writer`: the append-only file with its size cap.
//!
//! Not here: what an event means (`yolo_protocol::event`), or which events to emit.

pub(crate) mod events;
pub(crate) mod fold;
pub(crate) mod writer;

/// Events the unit tests of several modules build alike.
#[cfg(test)]
pub(crate) mod test_events {
    use yolo_protocol::event::EventKind;

    /// A first-of-its-key blocked TCP connect to a documentation address.
    pub(crate) fn blocked(port: u16) -> EventKind {
        blocked_times(port, None)
    }

    /// The same destination as a folded record of `count` attempts.
    pub(crate) fn folded(port: u16, count: u64) -> EventKind {
        blocked_times(port, Some(count))
    }

    fn blocked_times(port: u16, count: Option<u64>) -> EventKind {
        EventKind::Blocked {
            proto: "tcp".into(),
            dst: "192.0.2.1".into(),
            port: Some(port),
            name: None,
            sample_of: None,
            count,
            first: None,
            last: None,
        }
    }
}
