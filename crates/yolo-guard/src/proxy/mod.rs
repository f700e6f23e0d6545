//! The guard's HTTP proxy for inspected hosts (those with a credential or method/path rules).
//! The ruleset's `nat` chain redirects the agent's TCP to an inspected address on 443 and 80
//! to the proxy's ports in the guard's (shared) namespace; the proxy checks where it was
//! going, terminates TLS for the SNI name with the session CA, asks the rules about each
//! request and forwards it over a verified connection of its own.
//!
//! - `audit`: the proxy's records as `http`, `credential_misuse` and `blocked` events;
//! - `names`: which inspected names the guard answered with which addresses;
//! - `tls`: the session CA's leaves towards the agent, the verified client towards the hosts;
//! - `serve`: the transport (listeners, HTTP/1.1 and HTTP/2, streaming, upgrades).

pub(crate) mod audit;
pub(crate) mod names;
pub(crate) mod serve;
pub(crate) mod tls;

#[cfg(test)]
mod proxy_tests;
