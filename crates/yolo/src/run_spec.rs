//! `RunSpec`: everything the engine needs to build and run a project container, after the
//! repository's requests were checked against the user's grants. Produced only by `policy`;
//! consumed by `engine` and `commands`. Nothing here is unchecked repository input.

use crate::devcontainer::model::LifecycleCommand;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunSpec {
    /// The host folder yolo was started for (canonical).
    pub workspace: PathBuf,
    /// The devcontainer.json in use (canonical).
    pub config_file: PathBuf,
    /// `${devcontainerId}` for this workspace and config file.
    pub devcontainer_id: String,
    /// Docker container name, e.g. `yolo-myrepo-1a2b3c4d`.
    pub container_name: String,
    pub image: ImageSource,
    pub container_env: BTreeMap<String, String>,
    /// Environment of commands run in the container (`remoteEnv`); `None` unsets.
    pub remote_env: BTreeMap<String, Option<String>>,
    pub container_user: Option<String>,
    pub remote_user: Option<String>,
    /// Make the remote user's uid/gid match these host ids (Linux, `updateRemoteUserUID`).
    pub update_uid: Option<(u32, u32)>,
    /// Replace the image's command with a keep-alive loop.
    pub override_command: bool,
    /// Bind mount of the repository: host source (never moved by the repo) -> container target.
    pub workspace_mount: Mount,
    /// Folder commands run in, inside the container.
    pub workspace_folder: String,
    /// Further mounts: named volumes, tmpfs, and host binds only when granted.
    pub mounts: Vec<Mount>,
    /// Capabilities added back on top of yolo's default set (granted by the user).
    pub cap_add: Vec<String>,
    pub privileged: bool,
    /// Extra security options (granted by the user); `no-new-privileges` is always set.
    pub security_opt: Vec<String>,
    pub limits: Limits,
    pub ports: Vec<PortPublish>,
    /// Labels set on the container (devcontainer.*, yolo's own, and safe `--label` runArgs).
    pub labels: BTreeMap<String, String>,
    pub hostname: Option<String>,
    /// `--add-host` entries, "name:ip".
    pub extra_hosts: Vec<String>,
    /// Host-level docker options granted by the user (`--network`, `--pid`, ...): name -> value.
    pub host_modes: BTreeMap<String, String>,
    /// Devices granted by the user (`--device`).
    pub devices: Vec<String>,
    pub hooks: Hooks,
    /// `initializeCommand`: runs on the HOST, on a new start only, after
    /// `commands::approval::confirm_host_command` (trusted, or the user said yes).
    pub initialize_command: Option<LifecycleCommand>,
    /// sha256 of the effective config (this struct minus volatile fields): a change means the
    /// container is stale.
    pub config_hash: String,
    /// Grants the user gave that this run used, for the audit log.
    pub grants_used: Vec<String>,
    /// `none` or `stopContainer` (default).
    pub shutdown_action: String,
    /// Firewall requests merged from the repository (used by the firewall).
    pub firewall_allow: Vec<String>,
    pub firewall_presets: Vec<String>,
    /// `customizations.yolo.agent`.
    pub default_agent: Option<String>,
    /// Whether the container gets `--init`.
    pub init: bool,
    /// Extra shm size in bytes (`--shm-size`).
    pub shm_size: Option<i64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub enum ImageSource {
    /// Use (and pull if missing) this image.
    Image(String),
    Build(BuildSpec),
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BuildSpec {
    /// Host folder sent as the build context.
    pub context: PathBuf,
    /// Dockerfile path relative to the context (forward slashes), as the Engine API wants it.
    pub dockerfile: String,
    /// When the Dockerfile lives outside the context, its host path (yolo adds it to the tar).
    pub dockerfile_outside: Option<PathBuf>,
    pub args: BTreeMap<String, String>,
    pub target: Option<String>,
    pub cache_from: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// Deterministic tag, e.g. `yolo-myrepo-<devcontainerId prefix>:latest`.
    pub tag: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Mount {
    pub kind: MountKind,
    /// Host path (bind), volume name (volume), empty (tmpfs).
    pub source: String,
    pub target: String,
    pub read_only: bool,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MountKind {
    Bind,
    Volume,
    Tmpfs,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Limits {
    pub cpus: f64,
    pub memory_bytes: i64,
    pub pids: i64,
}

impl Default for Limits {
    /// Laptop defaults, documented in docs/security-model.md.
    fn default() -> Self {
        Limits {
            cpus: 2.0,
            memory_bytes: 4 * 1024 * 1024 * 1024,
            pids: 1024,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct PortPublish {
    /// Port on the host's 127.0.0.1.
    pub host: u16,
    pub container: u16,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Hooks {
    pub on_create: Option<LifecycleCommand>,
    pub update_content: Option<LifecycleCommand>,
    pub post_create: Option<LifecycleCommand>,
    pub post_start: Option<LifecycleCommand>,
    pub post_attach: Option<LifecycleCommand>,
}
