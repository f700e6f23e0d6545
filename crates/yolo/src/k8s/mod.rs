//! Kubernetes: the session as one Pod (`render`, pure) and the cluster's API (`client`, the
//! only code here that does I/O). A sibling of `engine`: it takes the same `RunSpec` and guard
//! config, and knows nothing of the commands above it.

pub(crate) mod client;
pub(crate) mod render;

use crate::audit::Event;

/// The audit events in a guard's log: its JSON lines, in order. Lines that are not events
/// (the ready line, a message the guard printed) are skipped. `yolo audit --kube` feeds it the
/// log the API returns; the tests, the log `podman logs` prints: the same text.
pub(crate) fn events_from_log(text: &str) -> Vec<Event> {
    crate::audit::reader::parse(text).0
}
