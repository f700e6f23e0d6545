//! The guard's control protocol: one JSON line per request and per response over the guard's
//! Unix socket. The host reaches it with `docker exec <guard> yolo-guard ctl '<json>'`.
//!
//! Requests: `{"op":"allow","patterns":[..]}`, `{"op":"deny","patterns":[..]}`, `{"op":"status"}`.
//! Responses: `{"ok":true,..}` or `{"ok":false,"error":".."}`.

use crate::NetworkMode;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Request {
    /// Add patterns to the running allowlist.
    Allow { patterns: Vec<String> },
    /// Remove patterns, and take away the addresses only those names had opened.
    Deny { patterns: Vec<String> },
    /// The effective allowlist, the dynamic set elements and the counters.
    Status,
}

/// How the guard's error begins when its socket in the host's folder does not serve the peer
/// (its uid is not the host user's as the guard sees it, e.g. under a user namespace that maps
/// it elsewhere): the host then asks over `docker exec` instead.
pub const PEER_NOT_SERVED: &str = "this guard's control socket serves only the user who started it";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<NetworkMode>,
    /// The effective allowlist after the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patterns: Option<Vec<String>>,
    /// `deny`: the entries that were removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    /// `deny`: the addresses taken out of the dynamic sets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revoked: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elements: Vec<SetElement>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, Counter>,
}

impl Response {
    pub fn error(message: impl Into<String>) -> Response {
        Response {
            ok: false,
            error: Some(message.into()),
            ..Default::default()
        }
    }
}

/// One element of a dynamic set, as `yolo firewall` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetElement {
    pub set: String,
    /// The element as nft prints it: an address, a `addr . port` concatenation, a prefix.
    pub element: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_secs: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counter {
    pub packets: u64,
    pub bytes: u64,
}
