//! The network side as the CLI sees it: the allowlist presets it merges, and the shared types of
//! `yolo_protocol` it hands to the guard. The ruleset, DNS and nftables live in the `yolo-guard`
//! crate; the CLI reaches the running guard only through its control socket.

pub mod presets;

pub use yolo_protocol::allowlist;
pub use yolo_protocol::control;
pub use yolo_protocol::{GuardConfig, NetworkMode, GUARD_CONTROL_SOCKET, GUARD_READY_LINE};
