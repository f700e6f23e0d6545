//! DNS: the agent's only resolver, and what it teaches the firewall.
//!
//! - `forwarder`: the allowlist forwarder (listeners, upstream, audit), asking a [`Policy`]
//!   what a name may reach and opening the answer's addresses before it is returned;
//! - `ask`: lookups held for the user's answer (`[firewall] on_refused = "ask"`);
//! - `fairq`: the listener's queue of received queries, served in turn per sender;
//! - `names`: what DNS taught the guard (which name resolved to which address, until when);
//! - `resolv_conf`: the upstream servers the engine named, and the file pointed at the guard.
//!
//! Not here: which names are allowed (the allowlist, `yolo_protocol::allowlist`) or how
//! addresses get into the kernel's sets (`firewall`).

mod fairq;
pub(crate) mod forwarder;
pub(crate) mod names;
pub(crate) mod resolv_conf;

pub(crate) use forwarder::{BoxFuture, DnsOptions, Forwarder, Listeners, Policy};
