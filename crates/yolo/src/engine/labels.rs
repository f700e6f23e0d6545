//! Label keys. `devcontainer.*` are the reference CLI's, so VS Code and `devcontainer exec`
//! find yolo's container; `dev.yolo.*` are yolo's own.

pub const LOCAL_FOLDER: &str = "devcontainer.local_folder";
pub const CONFIG_FILE: &str = "devcontainer.config_file";
pub const MANAGED: &str = "dev.yolo.managed";
pub const ID: &str = "dev.yolo.id";
pub const WORKSPACE: &str = "dev.yolo.workspace";
pub const CONFIG_HASH: &str = "dev.yolo.config-hash";
/// The network mode the agent container was made for: firewall, open, none.
pub const NETWORK: &str = "dev.yolo.network";
/// `agent` for the project container, `guard` for the firewall guard.
pub const ROLE: &str = "dev.yolo.role";
/// Extra labels for every object yolo creates, `k=v[,k=v]` (tests use it to clean up).
pub const EXTRA_LABELS_ENV: &str = "YOLO_LABELS";

/// Labels from `YOLO_LABELS`.
pub fn extra() -> Vec<(String, String)> {
    std::env::var(EXTRA_LABELS_ENV)
        .unwrap_or_default()
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}
