//! The network side: allowlist patterns and presets, the nftables ruleset (as typed values), and
//! the guard that runs inside the guard container. Only this module knows nftables.

pub mod allowlist;
pub mod guard;
pub mod presets;
pub mod ruleset;

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;

/// NFLOG group the ruleset logs dropped packets to.
pub const NFLOG_GROUP: u16 = 7;
/// Mark the guard sets (SO_MARK) on its own upstream DNS sockets; the ruleset accepts it.
pub const GUARD_MARK: u32 = 0x796f6c6f; // "yolo"

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    /// Domain allowlist (default).
    #[default]
    Firewall,
    /// No filtering; DNS and connections are still logged.
    Open,
    /// No network at all but loopback.
    None,
}

/// Everything the guard needs, written by the host CLI as JSON into the guard container.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GuardConfig {
    pub session: String,
    pub mode: NetworkMode,
    /// Allowlist patterns: `example.com`, `*.example.com`, CIDRs, `host:port`, `cidr:port`.
    pub allow: Vec<String>,
    /// Upstream resolvers; empty = the nameservers in the guard's /etc/resolv.conf.
    pub upstream: Vec<SocketAddr>,
    /// Minimum lifetime of an allowed address, seconds.
    pub ttl_floor_secs: u64,
    /// Answer denied names NXDOMAIN instead of REFUSED.
    pub deny_nxdomain: bool,
    /// Ports published on the host (input accepted).
    pub published_ports: Vec<u16>,
    /// Where to append audit events (bind-mounted session log).
    pub audit_path: PathBuf,
    /// Unix socket for `yolo allow/deny/firewall` (reached with docker exec).
    pub control_socket: PathBuf,
    /// Open private, loopback and link-local answers of allowed names too. Off by default: a
    /// name pointing at the host or its other containers is DNS rebinding. The user turns it
    /// on for internal services (and the tests, whose servers live on a Docker bridge).
    #[serde(default)]
    pub allow_internal_answers: bool,
}

/// Where the guard listens for DNS (the agent's resolver); also `[::1]:53` when IPv6 exists.
pub const DNS_LISTEN: &str = "127.0.0.1:53";
pub const DNS_LISTEN_V6: &str = "[::1]:53";
/// Created by the guard once the ruleset is verified and DNS answers; the host waits for it
/// (`docker exec <guard> test -e /run/yolo/ready`) before starting the agent.
pub const GUARD_READY_FILE: &str = "/run/yolo/ready";
/// The line the guard prints on stdout at the same moment (for `docker logs` watchers).
/// Followed by a space and the session id of the config the guard started with.
pub const GUARD_READY_LINE: &str = "yolo-guard ready";
/// Default control socket inside the guard container; `yolo guard-ctl` uses it unless
/// `YOLO_GUARD_CONTROL` names another. Put this path in `GuardConfig.control_socket`.
pub const GUARD_CONTROL_SOCKET: &str = "/run/yolo/control.sock";
