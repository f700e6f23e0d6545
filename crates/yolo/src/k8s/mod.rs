//! Kubernetes: the session as one Pod (`render`, pure) and the cluster's API (`client`, the
//! only code here that does I/O). A sibling of `engine`: it takes the same `RunSpec` and guard
//! config, and knows nothing of the commands above it.

pub(crate) mod client;
pub(crate) mod render;

use crate::audit::Event;
use crate::error::{Error, Result};
use std::path::Path;

/// The audit events in a guard's log: its JSON lines, in order. Lines that are not events
/// (the ready line, a message the guard printed) are skipped. `yolo audit --kube` feeds it the
/// log the API returns; the tests, the log `podman logs` prints: the same text.
pub(crate) fn events_from_log(text: &str) -> Vec<Event> {
    crate::audit::reader::parse(text).0
}

/// The audit events of the guard of `pod`, each exec with its exit: from the cluster's API,
/// or from `log` (a file, `-` for stdin) when given.
pub(crate) async fn guard_events(
    pod: &str,
    namespace: Option<&str>,
    log: Option<&Path>,
) -> Result<Vec<Event>> {
    let text = match log {
        Some(path) if path == Path::new("-") => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| Error::io("stdin", e))?;
            text
        }
        Some(path) => std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?,
        None => {
            let (client, namespace) =
                client::connect(namespace, None, client::Purpose::Audit).await?;
            client::guard_log(&client, &namespace, pod).await?
        }
    };
    Ok(crate::audit::reader::join_exits(
        events_from_log(&text),
        false,
    ))
}
