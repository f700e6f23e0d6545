//! The user's own config file (`<config dir>/config.toml`, `YOLO_CONFIG_DIR` overrides the dir):
//! grants, limits, allowlist additions, user-defined agents. This is where trust comes from;
//! the repository's devcontainer.json only asks.

use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct UserConfig {
    /// Grants, in the same words as `--grant` (see `policy::Grant`).
    pub grants: Vec<String>,
    /// Run `initializeCommand` on the host without asking.
    pub trust_host_commands: bool,
    pub limits: UserLimits,
    pub firewall: UserFirewall,
    /// User-defined agents, by name; a name equal to a preset adjusts it (a `command` replaces
    /// the preset's, `env` and `domains` add to its lists, `state_dir` replaces it).
    pub agents: BTreeMap<String, UserAgent>,
    /// Base image of the firewall guard (default `debian:bookworm-slim`).
    pub guard_base_image: Option<String>,
    /// A ready guard image to use instead of building one (it must hold
    /// `/usr/local/bin/yolo-guard` and `nft`): for engines this yolo carries no guard for.
    pub guard_image: Option<String>,
    /// Host environment variables a devcontainer.json may read with `${localEnv:VAR}`, besides
    /// the harmless ones yolo always allows (see `project::SAFE_LOCAL_ENV`).
    pub pass_env: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct UserLimits {
    pub cpus: Option<f64>,
    pub memory: Option<String>,
    pub pids: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct UserFirewall {
    pub allow: Vec<String>,
    pub presets: Vec<String>,
    /// Upstream resolver for the guard, `ADDR[:PORT]`.
    pub upstream_dns: Option<String>,
    /// Minimum lifetime of an allowed address in seconds (default 300).
    pub ttl_floor: Option<u64>,
    /// Answer denied names with NXDOMAIN instead of REFUSED.
    pub deny_with_nxdomain: bool,
    /// Open private/loopback/link-local answers of allowed names (internal services).
    pub allow_internal_answers: bool,
    /// Put the project on this existing Docker network instead of a network of its own.
    pub docker_network: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct UserAgent {
    /// argv of the unattended command, e.g. ["my-agent", "--yes"].
    pub command: Vec<String>,
    /// Host environment variables passed through when set.
    pub env: Vec<String>,
    /// Domains the agent needs.
    pub domains: Vec<String>,
    /// Folder (relative to the remote user's home) kept in a named volume.
    pub state_dir: Option<String>,
}

/// Folder of the user's config: `YOLO_CONFIG_DIR`, else the platform config dir.
pub fn config_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("YOLO_CONFIG_DIR") {
        return PathBuf::from(dir);
    }
    directories::ProjectDirs::from("", "", "yolo")
        .map(|d| d.config_dir().to_path_buf())
        .unwrap_or_else(|| PathBuf::from(".yolo-config"))
}

/// Folder of yolo's data (audit logs, approvals): `YOLO_DATA_DIR`, else the platform data dir.
pub fn data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("YOLO_DATA_DIR") {
        return PathBuf::from(dir);
    }
    directories::ProjectDirs::from("", "", "yolo")
        .map(|d| d.data_dir().to_path_buf())
        .unwrap_or_else(|| PathBuf::from(".yolo-data"))
}

impl UserConfig {
    pub fn path() -> PathBuf {
        config_dir().join("config.toml")
    }

    /// Load the user's config; a missing file is an empty config.
    pub fn load() -> Result<Self> {
        Self::load_from(&Self::path())
    }

    pub fn load_from(path: &Path) -> Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(Error::io(path, e)),
        };
        toml::from_str(&text).map_err(|e| Error::UserConfig {
            file: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })
    }
}
