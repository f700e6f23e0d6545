//! A repository asks, the user grants. Turns a substituted `DevContainer` plus the user's config
//! and flags into a validated `RunSpec`, or a clear `Error::Refused` naming the file, the property,
//! the value and the grant that would allow it. Pure: no I/O.

use crate::devcontainer::model::DevContainer;
use crate::error::Result;
use crate::run_spec::{Limits, RunSpec};
use crate::user_config::UserConfig;
use std::path::Path;

/// What the command line adds to the user's config.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub grants: Vec<String>,
    pub trust_host_commands: bool,
    pub cpus: Option<f64>,
    pub memory: Option<String>,
    pub pids: Option<i64>,
    pub allow: Vec<String>,
}

pub struct Input<'a> {
    /// Already substituted.
    pub config: &'a DevContainer,
    pub config_file: &'a Path,
    pub workspace: &'a Path,
    pub devcontainer_id: &'a str,
    pub user: &'a UserConfig,
    pub flags: &'a Flags,
    /// Host uid/gid for `updateRemoteUserUID` (None on non-Linux hosts).
    pub host_ids: Option<(u32, u32)>,
    /// Named volumes yolo itself adds (agent state): (volume name, target).
    pub agent_volumes: Vec<(String, String)>,
}

pub fn evaluate(input: &Input) -> Result<RunSpec> {
    let _ = input;
    todo!("helper: policy")
}

/// Parse "4g", "512m", "8gb", "1024" (bytes) into bytes.
pub fn parse_size(text: &str) -> Option<i64> {
    let _ = text;
    todo!("helper: policy")
}

pub fn default_limits() -> Limits {
    Limits::default()
}
