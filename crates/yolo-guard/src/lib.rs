//! The guard: the program in the guard container, which owns the network namespace the agent
//! joins, and the shim in the agent's. A map of the crate, from the top down:
//!
//! - `run`: `yolo-guard run`, the start-up in the order that fails closed (ruleset applied and
//!   verified, a build's frames sealed, resolver pointed at the guard), then serving until a
//!   stop from outside; the running guard's state, its DNS policy and what control requests do.
//! - `control`: the control sockets (JSON lines), both ends: the guard's and `yolo-guard ctl`.
//! - `dns`: the allowlist DNS forwarder, its per-sender queue, what it learnt (`names`), and
//!   /etc/resolv.conf.
//! - `exec`: the exec audit: the shim's seccomp filter in the agent, the guard's supervisor.
//! - `files`: the file audit: the workspace watcher.
//! - `firewall`: the `inet yolo` table (`ruleset`, pure), sent to the kernel and read back over
//!   netlink (`netlink`), the build's seal, what a deny revokes, the NFLOG reader.
//! - `proxy`: the HTTP proxy for inspected hosts (TLS with the session CA, hyper, the rules).
//! - `audit`: the path of every event to its log: queue, folding, the capped writer.
//! - `init`: what being PID 1 of the namespace takes: signals, orphans.
//! - `error`: the guard's error for its config and files, phrased for the host's user.
//!
//! Errors are typed by layer, each with a kind and a cause to match on and a message for the
//! host's user: `firewall::Error`, `run::StartError` (a step of the start-up failed: the agent
//! will not be started), `control::Error`, `exec::shim::Error`.
//!
//! Each layer imports only those below it. Not here: the allowlist grammar and the wire types
//! (`yolo_protocol`, shared with the CLI). This crate knows nothing of Docker or of the CLI: it
//! reads its config file and serves.

pub(crate) mod ask;
pub(crate) mod audit;
pub mod control;
pub(crate) mod dns;
pub(crate) mod error;
pub mod exec;
pub(crate) mod files;
pub(crate) mod firewall;
pub mod init;
pub(crate) mod proxy;
pub(crate) mod run;
#[cfg(test)]
pub(crate) mod testing;

pub use error::{line as error_line, Error, Result};
pub use firewall::batches::{Batches, Ruleset};
pub use run::{run, run_with, Cause, StartError};
