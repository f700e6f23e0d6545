//! Agent presets: how to run each agent unattended, which host env vars it may see, where it keeps
//! its login state, and which network presets it needs.

use crate::error::Result;
use crate::user_config::UserConfig;

#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    pub name: String,
    /// argv for unattended ("YOLO") mode; user args are appended.
    pub command: Vec<String>,
    /// Host env vars passed through when set (API keys), and only those.
    pub env: Vec<String>,
    /// Firewall presets (names of files in firewall/) the agent needs.
    pub presets: Vec<String>,
    /// Extra domains the agent needs beyond its presets.
    pub domains: Vec<String>,
    /// Folder under the remote user's home kept in a named volume, e.g. `.claude`.
    pub state_dir: String,
    /// How to install it, for the "not in the image" message.
    pub install_hint: String,
}

/// The built-in presets: claude, codex, gemini, aider, opencode.
pub fn presets() -> Vec<Agent> {
    todo!("helper: agents")
}

/// A preset or a user-defined agent (user config wins). Unknown: error listing the known names.
pub fn resolve(name: &str, user: &UserConfig) -> Result<Agent> {
    let _ = (name, user);
    todo!("helper: agents")
}

/// Every agent (presets + user's), for mounting their state volumes at container creation.
pub fn all(user: &UserConfig) -> Vec<Agent> {
    let _ = user;
    todo!("helper: agents")
}

/// Named volume holding an agent's state for a workspace: `yolo-<agent>-<devcontainerId>`.
pub fn state_volume(agent: &str, devcontainer_id: &str) -> String {
    format!("yolo-{agent}-{devcontainer_id}")
}
