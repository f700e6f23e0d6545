//! The guard's HTTP proxy for the hosts that need more than the address allowlist: those with a
//! credential to put in place, or with method and path rules (issue 25).
//!
//! - `rules`: the decision over one request's head (forward, swap a credential, check a push
//!   first, or refuse with a 403 body). Pure.
//! - `git`: git smart HTTP: which requests are pushes, and the receive-pack commands' refs.
//! - `credentials`: the real values, in memory only.

// Until the transport (the proxy's listener, on its own branch) calls the decision, only the
// tests do.
#![cfg_attr(not(test), allow(dead_code))]

pub(crate) mod credentials;
pub(crate) mod git;
pub(crate) mod rules;
