//! The guard's HTTP proxy for the hosts that need more than the address allowlist: those with a
//! credential to put in place, or with method and path rules (issue 25). The ruleset's `nat`
//! chain redirects the agent's TCP to an inspected address on 443 and 80 to the proxy's ports
//! in the guard's (shared) namespace; the proxy checks where it was going, terminates TLS for
//! the SNI name with the session CA, asks the rules about each request and forwards it over a
//! verified connection of its own.
//!
//! - `rules`: the decision over one request's head (forward, swap a credential, check a push
//!   first, or refuse with a 403 body). Pure.
//! - `refusal`: why a request is refused, and the 403's body (shared by `rules` and `git`).
//! - `git`: git smart HTTP: which requests are pushes, and the receive-pack commands' refs.
//! - `credentials`: the real values, in memory only.
//! - `audit`: the proxy's records as `http`, `credential_misuse` and `blocked` events;
//! - `names`: which names the guard answered with which addresses;
//! - `passthrough`: a non-inspected host at an inspected address, spliced through untouched;
//! - `tls`: the session CA's leaves towards the agent, the verified client towards the hosts;
//! - `body`: the bodies passed on (a push's held start, counted, small frames joined);
//! - `upstream`: the proxy's connections to the host (HTTP/1.1 unless HTTP/2 is needed, kept
//!   per agent connection);
//! - `serve`: the transport (listeners, HTTP/1.1 and HTTP/2, streaming, upgrades).

pub(crate) mod audit;
pub(crate) mod body;
pub(crate) mod credentials;
pub(crate) mod dial;
pub(crate) mod git;
pub(crate) mod names;
pub(crate) mod passthrough;
pub(crate) mod refusal;
pub(crate) mod rules;
pub(crate) mod serve;
pub(crate) mod tls;
pub(crate) mod upstream;

#[cfg(test)]
pub(crate) mod proxy_tests;
