//! The network side as the CLI sees it: the allowlist presets it merges, and the shared types of
//! `yolo_protocol` it hands to the guard. The ruleset, DNS and nftables live in the `yolo-guard`
//! crate; the CLI reaches the running guard only through its control socket.

pub(crate) mod guard_socket;
pub(crate) mod presets;
pub(crate) mod suggest;

pub(crate) use yolo_protocol::allowlist;
pub(crate) use yolo_protocol::control;
pub(crate) use yolo_protocol::{
    FileWatch, GuardConfig, NetworkMode, DEFAULT_MAX_SESSION_LOG, GUARD_CONTROL_SOCKET,
    GUARD_READY_LINE, PHASE_BUILD,
};

/// A network mode in the user's words (`--network`, `yolo status`, the `dev.yolo.network` label).
pub(crate) fn mode_name(mode: NetworkMode) -> &'static str {
    match mode {
        NetworkMode::Firewall => "firewall",
        NetworkMode::Open => "open",
        NetworkMode::Learn => "learn",
        NetworkMode::None => "none",
    }
}
