//! A repository asks, the user grants. Turns a substituted `DevContainer` plus the user's config
//! and flags into a validated `RunSpec`, or a clear `Error::Refused` naming the file, the property,
//! the value and the grant that would allow it.
//!
//! Pure: no Docker, no file reads. The one exception is `Path::exists` to find the git root of the
//! workspace (the nearest ancestor holding `.git`), which a repository may mount as its workspace.
//!
//! What this module deliberately does not do: resolve symlinks. All path checks are lexical (after
//! `.`/`..` folding), so the engine must canonicalize bind sources and build contexts before use
//! and refuse any that resolve elsewhere (a repository can plant symlinks in the workspace).
//!
//! Behaviour choices worth knowing (see also the item docs):
//! - `init: false` is ignored: yolo always runs an init so the agent's orphans are reaped and
//!   signals reach it.
//! - `--name` in runArgs is refused: yolo names its containers so it can find them again.
//! - `--workdir`/`-w`, `--rm`, `--cap-drop` and `--init` in runArgs are accepted and ignored:
//!   yolo runs every command in `workspaceFolder`, manages the container's lifetime, drops every
//!   capability and always sets an init.
//! - `-e NAME` without a value is refused: it would copy a host variable (a secret, perhaps) into
//!   the container.
//! - `no-new-privileges` (any spelling that keeps it on) is accepted and dropped: yolo always sets
//!   it. Every other security option needs a grant.

use crate::devcontainer::model::{AppPort, DevContainer, MountEntry, PortEntry, YoloCustomization};
use crate::devcontainer::names::{container_name, image_tag};
use crate::error::{Error, Result};
use crate::run_spec::{
    BuildSpec, Hooks, ImageSource, Limits, Mount, MountKind, PortPublish, RunSpec,
};
use crate::user_config::UserConfig;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

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

/// Label yolo stores the config hash under; left out of the hash itself.
pub const CONFIG_HASH_LABEL: &str = "dev.yolo.config-hash";
/// Sockets that hand out root on the host to whoever can write to them.
const DOCKER_SOCKETS: [&str; 2] = ["/var/run/docker.sock", "/run/docker.sock"];
const SOCKET_NAMES: [&str; 3] = ["docker.sock", "podman.sock", "containerd.sock"];

// ---------------------------------------------------------------------------------------------
// Grants
// ---------------------------------------------------------------------------------------------

/// One thing the user grants, parsed once from `--grant NAME` or `grants = [..]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    Privileged,
    /// Any capability (`None`) or exactly this one (normalized, e.g. `SYS_PTRACE`).
    CapAdd(Option<String>),
    /// Any security option (`None`) or exactly this one.
    SecurityOpt(Option<String>),
    /// Any host bind mount (`None`) or this path and everything below it.
    HostMount(Option<PathBuf>),
    HostNetwork,
    HostPid,
    HostIpc,
    HostUserns,
    HostUts,
    Device,
    DockerSocket,
    /// Accept a changed `.devcontainer/` (used by the approval step, not here).
    ConfigChange,
    /// Run `initializeCommand` on the host (same as `trust_host_commands`).
    InitializeCommand,
}

/// Every grant name, as typed (the `=VALUE` forms narrow the first three).
pub const GRANT_NAMES: [&str; 13] = [
    "privileged",
    "cap-add[=CAP]",
    "security-opt[=OPT]",
    "host-mount[=PATH]",
    "host-network",
    "host-pid",
    "host-ipc",
    "host-userns",
    "host-uts",
    "device",
    "docker-socket",
    "config-change",
    "initialize-command",
];

impl FromStr for Grant {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        let text = text.trim();
        let (name, value) = match text.split_once('=') {
            Some((n, v)) => (n, Some(v.trim())),
            None => (text, None),
        };
        let unknown = || {
            format!(
                "unknown grant \"{text}\"; valid grants: {}",
                GRANT_NAMES.join(", ")
            )
        };
        let no_value = |g: Grant| match value {
            None => Ok(g),
            Some(_) => Err(format!("grant \"{name}\" takes no value (got \"{text}\")")),
        };
        match name {
            "cap-add" => value_grant(value, name, |v| Ok(Grant::CapAdd(Some(normalize_cap(v)))))
                .map(|g| g.unwrap_or(Grant::CapAdd(None))),
            "security-opt" => value_grant(value, name, |v| Ok(Grant::SecurityOpt(Some(v.into()))))
                .map(|g| g.unwrap_or(Grant::SecurityOpt(None))),
            "host-mount" => value_grant(value, name, |v| {
                normalize_path(Path::new(v))
                    .map(|p| Grant::HostMount(Some(p)))
                    .ok_or_else(|| format!("grant \"{text}\": the path must be absolute"))
            })
            .map(|g| g.unwrap_or(Grant::HostMount(None))),
            "privileged" => no_value(Grant::Privileged),
            "host-network" => no_value(Grant::HostNetwork),
            "host-pid" => no_value(Grant::HostPid),
            "host-ipc" => no_value(Grant::HostIpc),
            "host-userns" => no_value(Grant::HostUserns),
            "host-uts" => no_value(Grant::HostUts),
            "device" => no_value(Grant::Device),
            "docker-socket" => no_value(Grant::DockerSocket),
            "config-change" => no_value(Grant::ConfigChange),
            "initialize-command" => no_value(Grant::InitializeCommand),
            _ => Err(unknown()),
        }
    }
}

/// `name=VALUE` with an empty VALUE is a typo, not "any".
fn value_grant(
    value: Option<&str>,
    name: &str,
    make: impl FnOnce(&str) -> std::result::Result<Grant, String>,
) -> std::result::Result<Option<Grant>, String> {
    match value {
        None => Ok(None),
        Some("") => Err(format!(
            "grant \"{name}=\" needs a value after '=' (or drop the '=')"
        )),
        Some(v) => make(v).map(Some),
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grant::Privileged => f.write_str("privileged"),
            Grant::CapAdd(None) => f.write_str("cap-add"),
            Grant::CapAdd(Some(c)) => write!(f, "cap-add={c}"),
            Grant::SecurityOpt(None) => f.write_str("security-opt"),
            Grant::SecurityOpt(Some(o)) => write!(f, "security-opt={o}"),
            Grant::HostMount(None) => f.write_str("host-mount"),
            Grant::HostMount(Some(p)) => write!(f, "host-mount={}", p.display()),
            Grant::HostNetwork => f.write_str("host-network"),
            Grant::HostPid => f.write_str("host-pid"),
            Grant::HostIpc => f.write_str("host-ipc"),
            Grant::HostUserns => f.write_str("host-userns"),
            Grant::HostUts => f.write_str("host-uts"),
            Grant::Device => f.write_str("device"),
            Grant::DockerSocket => f.write_str("docker-socket"),
            Grant::ConfigChange => f.write_str("config-change"),
            Grant::InitializeCommand => f.write_str("initialize-command"),
        }
    }
}

/// The user's grants from the config file and the command line, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grants {
    pub grants: Vec<Grant>,
    pub trust_host_commands: bool,
}

impl Grants {
    /// Parse `grants` of the user's config and `--grant` flags; an unknown name is an error
    /// listing the valid ones.
    pub fn from_user(user: &UserConfig, flags: &Flags) -> Result<Grants> {
        let mut grants = Vec::new();
        for text in &user.grants {
            let grant = text.parse::<Grant>().map_err(|message| Error::UserConfig {
                file: UserConfig::path(),
                message: format!("\"grants\": {message}"),
            })?;
            grants.push(grant);
        }
        for text in &flags.grants {
            grants.push(
                text.parse::<Grant>()
                    .map_err(|m| Error::other(format!("--grant: {m}")))?,
            );
        }
        let trust = user.trust_host_commands
            || flags.trust_host_commands
            || grants.contains(&Grant::InitializeCommand);
        Ok(Grants {
            grants,
            trust_host_commands: trust,
        })
    }

    pub fn contains(&self, grant: &Grant) -> bool {
        self.grants.contains(grant)
    }

    /// The first grant that allows `need`.
    fn find(&self, need: &Need) -> Option<&Grant> {
        self.grants.iter().find(|g| need.allowed_by(g))
    }
}

/// Something a repository asks for that only a grant allows.
#[derive(Debug, Clone, PartialEq)]
enum Need {
    Privileged,
    Cap(String),
    SecurityOpt(String),
    HostMount(PathBuf),
    HostNetwork,
    HostPid,
    HostIpc,
    HostUserns,
    HostUts,
    Device,
    DockerSocket,
}

impl Need {
    fn allowed_by(&self, grant: &Grant) -> bool {
        match (self, grant) {
            (Need::Privileged, Grant::Privileged) => true,
            (Need::Cap(c), Grant::CapAdd(g)) => g.as_ref().is_none_or(|g| g == c),
            (Need::SecurityOpt(o), Grant::SecurityOpt(g)) => g.as_ref().is_none_or(|g| g == o),
            (Need::HostMount(p), Grant::HostMount(g)) => {
                g.as_ref().is_none_or(|g| p.starts_with(g))
            }
            (Need::HostNetwork, Grant::HostNetwork)
            | (Need::HostPid, Grant::HostPid)
            | (Need::HostIpc, Grant::HostIpc)
            | (Need::HostUserns, Grant::HostUserns)
            | (Need::HostUts, Grant::HostUts)
            | (Need::Device, Grant::Device)
            | (Need::DockerSocket, Grant::DockerSocket) => true,
            _ => false,
        }
    }

    /// The narrowest grant that allows this, as the user would type it.
    fn narrowest(&self) -> Grant {
        match self {
            Need::Privileged => Grant::Privileged,
            Need::Cap(c) => Grant::CapAdd(Some(c.clone())),
            Need::SecurityOpt(o) => Grant::SecurityOpt(Some(o.clone())),
            Need::HostMount(p) => Grant::HostMount(Some(p.clone())),
            Need::HostNetwork => Grant::HostNetwork,
            Need::HostPid => Grant::HostPid,
            Need::HostIpc => Grant::HostIpc,
            Need::HostUserns => Grant::HostUserns,
            Need::HostUts => Grant::HostUts,
            Need::Device => Grant::Device,
            Need::DockerSocket => Grant::DockerSocket,
        }
    }
}

/// The exact words that grant `grant`: the flag and the config line.
pub fn grant_hint(grant: &Grant) -> String {
    format!(
        "--grant {grant}, or grants = [\"{grant}\"] in {}",
        UserConfig::path().display()
    )
}

/// `CAP_SYS_PTRACE`, `sys_ptrace` -> `SYS_PTRACE`.
pub fn normalize_cap(cap: &str) -> String {
    let upper = cap.trim().to_ascii_uppercase();
    upper
        .strip_prefix("CAP_")
        .map(str::to_string)
        .unwrap_or(upper)
}

// ---------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------

/// Check the repository's requests against the user's grants and build the `RunSpec`.
/// The first refusal wins; nothing is half-applied because nothing here has side effects.
pub fn evaluate(input: &Input) -> Result<RunSpec> {
    let grants = Grants::from_user(input.user, input.flags)?;
    let mut eval = Eval::new(input, &grants);
    let mut spec = eval.base_spec()?;
    eval.apply_security(&mut spec)?;
    eval.apply_mounts(&mut spec)?;
    eval.apply_run_args(&mut spec)?;
    spec.limits = eval.limits()?;
    spec.ports = eval.ports(&spec)?;
    spec.initialize_command = eval.initialize_command()?;
    spec.grants_used = eval.used.clone();
    spec.config_hash = config_hash(&spec);
    spec.labels
        .insert(CONFIG_HASH_LABEL.into(), spec.config_hash.clone());
    Ok(spec)
}

/// sha256 (hex) of the canonical JSON of `spec` without the hash itself, so a changed effective
/// config means a stale container. `grants_used` is sorted so grant order does not matter.
pub fn config_hash(spec: &RunSpec) -> String {
    let mut canonical = spec.clone();
    canonical.config_hash.clear();
    canonical.labels.remove(CONFIG_HASH_LABEL);
    canonical.grants_used.sort();
    let json = serde_json::to_vec(&canonical).unwrap_or_default();
    hex::encode(Sha256::digest(&json))
}

struct Eval<'a> {
    input: &'a Input<'a>,
    grants: &'a Grants,
    config: &'a DevContainer,
    git_root: Option<PathBuf>,
    used: Vec<String>,
    /// `--cpus`/`--memory`/`--pids-limit` from runArgs: one layer of `limits`.
    run_limits: LimitLayer,
    /// `-p` from runArgs, with the property that asked, for `ports`.
    run_ports: Vec<(String, PortPublish)>,
}

impl<'a> Eval<'a> {
    fn new(input: &'a Input<'a>, grants: &'a Grants) -> Self {
        Eval {
            input,
            grants,
            config: input.config,
            git_root: git_root(input.workspace),
            used: Vec::new(),
            run_limits: LimitLayer::default(),
            run_ports: Vec::new(),
        }
    }

    fn file(&self) -> PathBuf {
        self.input.config_file.to_path_buf()
    }

    fn config_error(&self, property: &str, message: impl Into<String>) -> Error {
        Error::Config {
            file: self.file(),
            line: None,
            column: None,
            property: Some(property.to_string()),
            message: message.into(),
        }
    }

    /// Allow `need` if a grant covers it (and remember that grant), else refuse.
    fn require(&mut self, need: Need, property: &str, value: &str, reason: &str) -> Result<()> {
        match self.grants.find(&need) {
            Some(grant) => {
                let name = grant.to_string();
                if !self.used.contains(&name) {
                    self.used.push(name);
                }
                Ok(())
            }
            None => Err(Error::Refused {
                file: self.file(),
                property: property.to_string(),
                value: value.to_string(),
                reason: reason.to_string(),
                grant: grant_hint(&need.narrowest()),
            }),
        }
    }

    fn workspace_str(&self) -> String {
        self.input.workspace.to_string_lossy().into_owned()
    }

    fn yolo(&self) -> Option<&'a YoloCustomization> {
        self.config
            .customizations
            .as_ref()
            .and_then(|c| c.yolo.as_ref())
    }

    fn base_spec(&mut self) -> Result<RunSpec> {
        let c = self.config;
        let (workspace_mount, workspace_folder) = self.workspace()?;
        let update = c.update_remote_user_uid.unwrap_or(true);
        Ok(RunSpec {
            workspace: self.input.workspace.to_path_buf(),
            config_file: self.file(),
            devcontainer_id: self.input.devcontainer_id.to_string(),
            container_name: container_name(self.input.workspace, self.input.devcontainer_id),
            image: self.image_source()?,
            container_env: c.container_env.clone(),
            remote_env: c.remote_env.clone(),
            container_user: c.container_user.clone(),
            remote_user: c.remote_user.clone(),
            update_uid: if update { self.input.host_ids } else { None },
            override_command: c.override_command.unwrap_or(true),
            workspace_mount,
            workspace_folder,
            mounts: Vec::new(),
            cap_add: Vec::new(),
            privileged: false,
            security_opt: Vec::new(),
            limits: Limits::default(),
            ports: Vec::new(),
            labels: self.base_labels(),
            hostname: None,
            extra_hosts: Vec::new(),
            host_modes: BTreeMap::new(),
            devices: Vec::new(),
            hooks: self.hooks(),
            initialize_command: None,
            config_hash: String::new(),
            grants_used: Vec::new(),
            shutdown_action: self.shutdown_action()?,
            firewall_allow: self.firewall_allow(),
            firewall_presets: self.firewall_presets(),
            default_agent: self.yolo().and_then(|y| y.agent.clone()),
            // Always: the agent spawns many processes; an init reaps them and forwards signals.
            init: true,
            shm_size: None,
        })
    }

    fn base_labels(&self) -> BTreeMap<String, String> {
        let workspace = self.workspace_str();
        let mut labels = BTreeMap::new();
        labels.insert("devcontainer.local_folder".into(), workspace.clone());
        labels.insert(
            "devcontainer.config_file".into(),
            self.input.config_file.to_string_lossy().into_owned(),
        );
        labels.insert("dev.yolo.managed".into(), "true".into());
        labels.insert("dev.yolo.id".into(), self.input.devcontainer_id.into());
        labels.insert("dev.yolo.workspace".into(), workspace);
        labels
    }

    fn hooks(&self) -> Hooks {
        let c = self.config;
        Hooks {
            on_create: c.on_create_command.clone(),
            update_content: c.update_content_command.clone(),
            post_create: c.post_create_command.clone(),
            post_start: c.post_start_command.clone(),
            post_attach: c.post_attach_command.clone(),
        }
    }

    fn shutdown_action(&self) -> Result<String> {
        match self.config.shutdown_action.as_deref() {
            None => Ok("stopContainer".into()),
            Some(a @ ("none" | "stopContainer")) => Ok(a.into()),
            Some(other) => Err(self.config_error(
                "shutdownAction",
                format!("\"{other}\" is not one of \"none\", \"stopContainer\""),
            )),
        }
    }

    fn firewall_allow(&self) -> Vec<String> {
        let repo = self
            .yolo()
            .map(|y| y.firewall.allow.as_slice())
            .unwrap_or_default();
        let user = &self.input.user.firewall.allow;
        dedup([repo, user.as_slice(), self.input.flags.allow.as_slice()])
    }

    fn firewall_presets(&self) -> Vec<String> {
        let repo = self
            .yolo()
            .map(|y| y.firewall.presets.as_slice())
            .unwrap_or_default();
        dedup([repo, self.input.user.firewall.presets.as_slice()])
    }

    fn initialize_command(
        &mut self,
    ) -> Result<Option<crate::devcontainer::model::LifecycleCommand>> {
        let Some(command) = &self.config.initialize_command else {
            return Ok(None);
        };
        if !self.grants.trust_host_commands {
            let shown = command
                .commands("initializeCommand")
                .into_iter()
                .map(|(_, argv)| argv.join(" "))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(Error::Refused {
                file: self.file(),
                property: "initializeCommand".into(),
                value: format!("`{shown}`"),
                reason: "it runs on your host, outside the container".into(),
                grant: format!(
                    "--trust-host-commands, or trust_host_commands = true in {}",
                    UserConfig::path().display()
                ),
            });
        }
        let name = if self.grants.contains(&Grant::InitializeCommand) {
            "initialize-command"
        } else {
            "trust-host-commands"
        };
        if !self.used.iter().any(|u| u == name) {
            self.used.push(name.into());
        }
        Ok(Some(command.clone()))
    }
}

/// Concatenate lists, dropping repeats, keeping first-seen order.
fn dedup<const N: usize>(lists: [&[String]; N]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in lists.into_iter().flatten() {
        if !out.contains(item) {
            out.push(item.clone());
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// privileged, capAdd, securityOpt
// ---------------------------------------------------------------------------------------------

impl Eval<'_> {
    fn apply_security(&mut self, spec: &mut RunSpec) -> Result<()> {
        if self.config.privileged == Some(true) {
            self.grant_privileged(spec, "privileged")?;
        }
        for (i, cap) in self.config.cap_add.iter().enumerate() {
            self.grant_cap(spec, &format!("capAdd[{i}]"), cap)?;
        }
        for (i, opt) in self.config.security_opt.iter().enumerate() {
            self.grant_security_opt(spec, &format!("securityOpt[{i}]"), opt)?;
        }
        Ok(())
    }

    fn grant_privileged(&mut self, spec: &mut RunSpec, property: &str) -> Result<()> {
        let reason = "a privileged container can take over the host";
        self.require(Need::Privileged, property, "privileged mode", reason)?;
        spec.privileged = true;
        Ok(())
    }

    fn grant_cap(&mut self, spec: &mut RunSpec, property: &str, cap: &str) -> Result<()> {
        let cap = normalize_cap(cap);
        if cap.is_empty() || !cap.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(self.config_error(property, format!("\"{cap}\" is not a capability name")));
        }
        let reason = "yolo drops every capability so the agent cannot escape its sandbox";
        self.require(
            Need::Cap(cap.clone()),
            property,
            &format!("capability {cap}"),
            reason,
        )?;
        if !spec.cap_add.contains(&cap) {
            spec.cap_add.push(cap);
        }
        Ok(())
    }

    fn grant_security_opt(&mut self, spec: &mut RunSpec, property: &str, opt: &str) -> Result<()> {
        let opt = opt.trim();
        if keeps_no_new_privileges(opt) {
            return Ok(());
        }
        let reason = "security options can switch off the sandbox (seccomp, AppArmor, SELinux)";
        let value = format!("security option {opt}");
        self.require(Need::SecurityOpt(opt.into()), property, &value, reason)?;
        if !spec.security_opt.iter().any(|o| o == opt) {
            spec.security_opt.push(opt.into());
        }
        Ok(())
    }
}

/// `no-new-privileges`, `no-new-privileges=true`, `no-new-privileges:true`: what yolo sets anyway.
fn keeps_no_new_privileges(opt: &str) -> bool {
    matches!(
        opt.strip_prefix("no-new-privileges"),
        Some("" | "=true" | ":true")
    )
}

// ---------------------------------------------------------------------------------------------
// Workspace and mounts
// ---------------------------------------------------------------------------------------------

/// A parsed mount request (`mounts` entry, `workspaceMount`, `-v`, `--mount`, `--tmpfs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountRequest {
    pub kind: MountKind,
    pub source: String,
    pub target: String,
    pub read_only: bool,
}

/// Parse the Docker `--mount` string form: `type=bind,source=/a,target=/b[,readonly]`.
/// Options that only tune performance are accepted and dropped; options that could reach the
/// host (`volume-opt`, `volume-driver`) or that yolo cannot carry are errors.
pub fn parse_mount_string(text: &str) -> std::result::Result<MountRequest, String> {
    let mut kind = None;
    let (mut source, mut target, mut read_only) = (String::new(), None, false);
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = match part.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (part, None),
        };
        match key {
            "type" => kind = Some(mount_kind(value.unwrap_or_default())?),
            "source" | "src" => source = value.unwrap_or_default().to_string(),
            "target" | "destination" | "dst" => target = value.map(str::to_string),
            "readonly" | "ro" => read_only = parse_bool_option(part, value)?,
            "consistency" | "volume-nocopy" | "tmpfs-size" | "tmpfs-mode" => {}
            "volume-opt" | "volume-driver" => {
                return Err(format!("\"{key}\" is not accepted: a volume driver option can mount any host path"));
            }
            _ => {
                return Err(format!(
                    "unknown mount option \"{key}\"; accepted: type, source (src), target (dst, destination), readonly (ro), consistency"
                ))
            }
        }
    }
    let kind = kind.unwrap_or(MountKind::Volume);
    let target = target
        .filter(|t| !t.is_empty())
        .ok_or("the mount has no target")?;
    Ok(MountRequest {
        kind,
        source,
        target,
        read_only,
    })
}

fn mount_kind(text: &str) -> std::result::Result<MountKind, String> {
    match text {
        "bind" => Ok(MountKind::Bind),
        "volume" => Ok(MountKind::Volume),
        "tmpfs" => Ok(MountKind::Tmpfs),
        other => Err(format!(
            "mount type \"{other}\" is not supported; use bind, volume or tmpfs"
        )),
    }
}

fn parse_bool_option(part: &str, value: Option<&str>) -> std::result::Result<bool, String> {
    match value {
        None | Some("true") | Some("1") => Ok(true),
        Some("false") | Some("0") => Ok(false),
        Some(_) => Err(format!("\"{part}\": expected true or false")),
    }
}

/// Parse `-v`/`--volume`: `name:/target[:opts]`, `/host:/target[:opts]`, or `/target`
/// (an anonymous volume). A source that looks like a path is a host bind.
pub fn parse_volume_arg(text: &str) -> std::result::Result<MountRequest, String> {
    let parts: Vec<&str> = text.split(':').collect();
    let (source, target, opts) = match parts.as_slice() {
        [target] => ("", *target, ""),
        [source, target] => (*source, *target, ""),
        [source, target, opts] => (*source, *target, *opts),
        _ => return Err(format!("\"{text}\" is not SOURCE:TARGET[:OPTIONS]")),
    };
    if target.is_empty() {
        return Err(format!("\"{text}\" has no target"));
    }
    let mut read_only = false;
    for opt in opts.split(',').filter(|o| !o.is_empty()) {
        match opt {
            "ro" => read_only = true,
            "rw" | "z" | "Z" | "cached" | "delegated" | "consistent" | "nocopy" => {}
            _ => {
                return Err(format!(
                    "volume option \"{opt}\" is not supported; accepted: ro, rw, z, Z"
                ))
            }
        }
    }
    let is_path = source.starts_with('/') || source.starts_with('.') || source.starts_with('~');
    let kind = if is_path {
        MountKind::Bind
    } else {
        MountKind::Volume
    };
    Ok(MountRequest {
        kind,
        source: source.into(),
        target: target.into(),
        read_only,
    })
}

/// Docker volume names: `[a-zA-Z0-9][a-zA-Z0-9_.-]*`.
fn valid_volume_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

/// Fold `.` and `..` without touching the disk; `None` for relative paths.
pub fn normalize_path(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
        }
    }
    Some(out)
}

/// The nearest ancestor of `workspace` (itself included) that holds `.git`.
pub fn git_root(workspace: &Path) -> Option<PathBuf> {
    workspace
        .ancestors()
        .find(|dir| dir.join(".git").exists())
        .map(Path::to_path_buf)
}

fn is_docker_socket(path: &Path) -> bool {
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| SOCKET_NAMES.contains(&n));
    named || DOCKER_SOCKETS.iter().any(|s| Path::new(s) == path)
}

/// A folder that holds the Docker socket: binding it hands the socket over too.
fn contains_docker_socket(path: &Path) -> bool {
    DOCKER_SOCKETS
        .iter()
        .any(|s| Path::new(s).starts_with(path) && Path::new(s) != path)
}

fn is_container_path(target: &str) -> bool {
    target.starts_with('/')
}

impl Eval<'_> {
    /// The workspace bind and the folder commands run in.
    fn workspace(&mut self) -> Result<(Mount, String)> {
        let mut mount = Mount {
            kind: MountKind::Bind,
            source: self.workspace_str(),
            target: "/workspace".into(),
            read_only: false,
        };
        if let Some(text) = &self.config.workspace_mount {
            mount = self.workspace_mount(text)?;
        }
        let folder = match &self.config.workspace_folder {
            Some(folder) if is_container_path(folder) => folder.clone(),
            Some(folder) => {
                return Err(self.config_error(
                    "workspaceFolder",
                    format!("\"{folder}\" must be an absolute path in the container"),
                ))
            }
            None => default_folder(&mount, self.input.workspace),
        };
        Ok((mount, folder))
    }

    fn workspace_mount(&mut self, text: &str) -> Result<Mount> {
        let property = "workspaceMount";
        let req = parse_mount_string(text).map_err(|m| self.config_error(property, m))?;
        if req.kind != MountKind::Bind {
            return Err(Error::Unsupported {
                file: self.file(),
                property: property.into(),
                message: "only a bind mount of the repository (type=bind) is supported".into(),
            });
        }
        if !is_container_path(&req.target) {
            return Err(self.config_error(property, "the target must be an absolute path"));
        }
        let source = self.host_path(property, &req.source)?;
        let own = source == self.input.workspace || Some(&source) == self.git_root.as_ref();
        if !own {
            self.require_host_path(property, &source, &req.target)?;
        }
        Ok(Mount {
            kind: MountKind::Bind,
            source: source.to_string_lossy().into_owned(),
            target: req.target,
            read_only: req.read_only,
        })
    }

    /// A host path from the repository, absolute and with `..` folded.
    fn host_path(&self, property: &str, source: &str) -> Result<PathBuf> {
        normalize_path(Path::new(source)).ok_or_else(|| {
            self.config_error(
                property,
                format!("the host path \"{source}\" must be absolute"),
            )
        })
    }

    /// A bind of a host path other than the workspace: the socket needs `docker-socket`, any
    /// other path `host-mount` (and a folder holding the socket needs both).
    fn require_host_path(&mut self, property: &str, source: &Path, target: &str) -> Result<()> {
        let value = format!(
            "a bind mount of the host's {} at {target}",
            source.display()
        );
        if is_docker_socket(source) || contains_docker_socket(source) {
            let reason = "the Docker socket gives root on the host";
            self.require(Need::DockerSocket, property, &value, reason)?;
            if is_docker_socket(source) {
                return Ok(());
            }
        }
        let reason =
            "yolo mounts only the repository, to keep other host files out of the agent's reach";
        self.require(
            Need::HostMount(source.to_path_buf()),
            property,
            &value,
            reason,
        )
    }

    fn apply_mounts(&mut self, spec: &mut RunSpec) -> Result<()> {
        for (i, entry) in self.config.mounts.iter().enumerate() {
            let property = format!("mounts[{i}]");
            let req = match entry {
                MountEntry::Text(text) => parse_mount_string(text),
                MountEntry::Object(o) => mount_kind(&o.kind).map(|kind| MountRequest {
                    kind,
                    source: o.source.clone().unwrap_or_default(),
                    target: o.target.clone(),
                    read_only: false,
                }),
            }
            .map_err(|m| self.config_error(&property, m))?;
            self.add_mount(spec, &property, req)?;
        }
        for (name, target) in &self.input.agent_volumes {
            let mount = Mount {
                kind: MountKind::Volume,
                source: name.clone(),
                target: target.clone(),
                read_only: false,
            };
            push_mount(spec, mount);
        }
        Ok(())
    }

    /// Admit one mount request: volumes and tmpfs freely, host binds only when granted.
    fn add_mount(&mut self, spec: &mut RunSpec, property: &str, req: MountRequest) -> Result<()> {
        if !is_container_path(&req.target) {
            let message = format!("the target \"{}\" must be an absolute path", req.target);
            return Err(self.config_error(property, message));
        }
        let source = match req.kind {
            MountKind::Tmpfs => String::new(),
            MountKind::Volume if req.source.is_empty() || valid_volume_name(&req.source) => {
                req.source
            }
            MountKind::Volume => {
                let message = format!("\"{}\" is not a valid volume name", req.source);
                return Err(self.config_error(property, message));
            }
            MountKind::Bind => {
                let source = self.host_path(property, &req.source)?;
                // Binding the repository again elsewhere exposes nothing new.
                if source != self.input.workspace {
                    self.require_host_path(property, &source, &req.target)?;
                }
                source.to_string_lossy().into_owned()
            }
        };
        let mount = Mount {
            kind: req.kind,
            source,
            target: req.target,
            read_only: req.read_only,
        };
        push_mount(spec, mount);
        Ok(())
    }
}

fn push_mount(spec: &mut RunSpec, mount: Mount) {
    if !spec.mounts.contains(&mount) {
        spec.mounts.push(mount);
    }
}

/// The mount's target, plus the workspace's place below the mounted folder (when the repository
/// mounts its git root and yolo was started in a subfolder).
fn default_folder(mount: &Mount, workspace: &Path) -> String {
    let below = workspace
        .strip_prefix(&mount.source)
        .ok()
        .map(slash_path)
        .unwrap_or_default();
    if below.is_empty() {
        mount.target.clone()
    } else {
        format!("{}/{below}", mount.target.trim_end_matches('/'))
    }
}

/// A relative path with forward slashes (what the Engine API wants).
fn slash_path(path: &Path) -> String {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

// ---------------------------------------------------------------------------------------------
// Images
// ---------------------------------------------------------------------------------------------

impl Eval<'_> {
    fn image_source(&mut self) -> Result<ImageSource> {
        let c = self.config;
        let build = c.build.as_ref();
        let dockerfile = build
            .and_then(|b| b.dockerfile.as_deref())
            .or(c.docker_file.as_deref());
        match (dockerfile, &c.image) {
            (Some(dockerfile), _) => self.build_spec(dockerfile).map(ImageSource::Build),
            (None, Some(image)) if !image.trim().is_empty() => {
                Ok(ImageSource::Image(image.clone()))
            }
            (None, _) if build.is_some() => {
                Err(self.config_error("build.dockerfile", "\"build\" needs a \"dockerfile\""))
            }
            (None, _) => Err(self.config_error(
                "image",
                "devcontainer.json needs \"image\" or \"build.dockerfile\"",
            )),
        }
    }

    fn config_dir(&self) -> PathBuf {
        self.input
            .config_file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// A path of the build, relative to the config file's folder; outside the repository it needs
    /// `host-mount`, because the build context is sent to Docker and can be copied into the image.
    fn build_path(&mut self, property: &str, relative: &str) -> Result<PathBuf> {
        let joined = self.config_dir().join(relative);
        let path = normalize_path(&joined).ok_or_else(|| {
            self.config_error(
                property,
                format!("\"{relative}\" does not resolve to an absolute path"),
            )
        })?;
        let roots = [
            Some(self.input.workspace.to_path_buf()),
            self.git_root.clone(),
            Some(self.config_dir()),
        ];
        if !roots.iter().flatten().any(|root| path.starts_with(root)) {
            let value = format!("the host folder {} outside the repository", path.display());
            let reason = "files outside the repository could be copied into the image";
            self.require(Need::HostMount(path.clone()), property, &value, reason)?;
        }
        Ok(path)
    }

    fn build_spec(&mut self, dockerfile: &str) -> Result<BuildSpec> {
        let c = self.config;
        let build = c.build.clone().unwrap_or_default();
        let df_property = if c
            .build
            .as_ref()
            .and_then(|b| b.dockerfile.as_ref())
            .is_some()
        {
            "build.dockerfile"
        } else {
            "dockerFile"
        };
        let dockerfile_path = self.build_path(df_property, dockerfile)?;
        let context = match build.context.as_deref().or(c.context.as_deref()) {
            Some(ctx) => self.build_path("build.context", ctx)?,
            None => dockerfile_path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
        };
        let (dockerfile, dockerfile_outside) = match dockerfile_path.strip_prefix(&context) {
            Ok(rel) if !rel.as_os_str().is_empty() => (slash_path(rel), None),
            _ => (
                ".yolo.Dockerfile".to_string(),
                Some(dockerfile_path.clone()),
            ),
        };
        let mut spec = BuildSpec {
            context,
            dockerfile,
            dockerfile_outside,
            args: build.args.clone(),
            target: build.target.clone(),
            cache_from: build.cache_from.0.clone(),
            labels: BTreeMap::new(),
            tag: image_tag(self.input.workspace, self.input.devcontainer_id),
        };
        self.apply_build_options(&mut spec, &build.options)?;
        spec.labels.insert("dev.yolo.managed".into(), "true".into());
        spec.labels
            .insert("dev.yolo.id".into(), self.input.devcontainer_id.into());
        Ok(spec)
    }

    /// `build.options`: `--build-arg K=V`, `--label K=V`, `--target T` are applied; `--no-cache`
    /// and `--pull` are accepted and ignored (`yolo up --rebuild` decides about caches).
    fn apply_build_options(&mut self, spec: &mut BuildSpec, options: &[String]) -> Result<()> {
        let mut i = 0;
        while i < options.len() {
            let property = format!("build.options[{i}]");
            let (flag, inline) = match options[i].split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
                _ => (options[i].as_str(), None),
            };
            let takes_value = matches!(flag, "--build-arg" | "--label" | "--target");
            let value = match inline {
                Some(v) => v,
                None if takes_value => {
                    i += 1;
                    let next = options.get(i).cloned();
                    next.ok_or_else(|| {
                        self.config_error(&property, format!("{flag} needs a value"))
                    })?
                }
                None => String::new(),
            };
            self.apply_build_option(spec, &property, flag, value)?;
            i += 1;
        }
        Ok(())
    }

    fn apply_build_option(
        &self,
        spec: &mut BuildSpec,
        property: &str,
        flag: &str,
        value: String,
    ) -> Result<()> {
        match flag {
            "--build-arg" => {
                let (k, v) = value.split_once('=').ok_or_else(|| {
                    self.config_error(property, format!("--build-arg \"{value}\" needs NAME=VALUE"))
                })?;
                spec.args.insert(k.into(), v.into());
            }
            "--label" => {
                let (k, v) = value.split_once('=').unwrap_or((value.as_str(), ""));
                self.check_label_key(property, k)?;
                spec.labels.insert(k.into(), v.into());
            }
            "--target" => spec.target = Some(value),
            "--no-cache" | "--pull" => {}
            other => {
                return Err(self.config_error(
                    property,
                    format!("yolo does not apply the build option \"{other}\"; accepted: --build-arg, --label, --target, --no-cache, --pull"),
                ))
            }
        }
        Ok(())
    }

    /// The repository may not pose as yolo or move where tools think the container belongs.
    fn check_label_key(&self, property: &str, key: &str) -> Result<()> {
        if key.is_empty() {
            return Err(self.config_error(property, "a label needs a name"));
        }
        if key.starts_with("devcontainer.") || key.starts_with("dev.yolo.") {
            return Err(self.config_error(
                property,
                format!("the label \"{key}\" is reserved: yolo sets devcontainer.* and dev.yolo.* labels itself"),
            ));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// runArgs
// ---------------------------------------------------------------------------------------------

/// How a `docker run` option takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    Value,
    /// A boolean switch; `--flag=false` is accepted.
    Switch,
}

struct RunFlag {
    /// Long names; the first is the canonical one.
    names: &'static [&'static str],
    short: Option<char>,
    arity: Arity,
}

const fn flag(names: &'static [&'static str], short: Option<char>, arity: Arity) -> RunFlag {
    RunFlag {
        names,
        short,
        arity,
    }
}

/// Every `docker run` option yolo understands. Anything else is refused: an option yolo does not
/// know is an option it cannot judge.
const RUN_FLAGS: &[RunFlag] = &[
    flag(&["env"], Some('e'), Arity::Value),
    flag(&["label"], Some('l'), Arity::Value),
    flag(&["memory"], Some('m'), Arity::Value),
    flag(&["cpus"], None, Arity::Value),
    flag(&["pids-limit"], None, Arity::Value),
    flag(&["hostname"], Some('h'), Arity::Value),
    flag(&["add-host"], None, Arity::Value),
    flag(&["shm-size"], None, Arity::Value),
    flag(&["init"], None, Arity::Switch),
    flag(&["user"], Some('u'), Arity::Value),
    flag(&["workdir"], Some('w'), Arity::Value),
    flag(&["publish"], Some('p'), Arity::Value),
    flag(&["tmpfs"], None, Arity::Value),
    flag(&["cap-drop"], None, Arity::Value),
    flag(&["rm"], None, Arity::Switch),
    flag(&["privileged"], None, Arity::Switch),
    flag(&["cap-add"], None, Arity::Value),
    flag(&["security-opt"], None, Arity::Value),
    flag(&["network", "net"], None, Arity::Value),
    flag(&["pid"], None, Arity::Value),
    flag(&["ipc"], None, Arity::Value),
    flag(&["uts"], None, Arity::Value),
    flag(&["userns"], None, Arity::Value),
    flag(&["volume"], Some('v'), Arity::Value),
    flag(&["mount"], None, Arity::Value),
    flag(&["device"], None, Arity::Value),
    flag(&["name"], None, Arity::Value),
];

/// One parsed `runArgs` option: its index in `runArgs`, canonical long name, and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunArg {
    pub index: usize,
    pub flag: &'static str,
    /// The value; for switches `None` means on, `Some("false")` off.
    pub value: Option<String>,
}

fn accepted_run_flags() -> String {
    RUN_FLAGS
        .iter()
        .filter(|f| f.names[0] != "name")
        .map(|f| match f.short {
            Some(s) => format!("--{} (-{s})", f.names[0]),
            None => format!("--{}", f.names[0]),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parse `runArgs` the way `docker run` does: `--flag=value`, `--flag value`, `-e X`, `-eX`.
/// Errors carry the index of the offending entry.
pub fn parse_run_args(args: &[String]) -> std::result::Result<Vec<RunArg>, (usize, String)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let index = i;
        let (spec, inline) = split_run_flag(&args[i]).map_err(|m| (i, m))?;
        let value = match (spec.arity, inline) {
            (Arity::Switch, v) => v,
            (Arity::Value, Some(v)) => Some(v),
            (Arity::Value, None) => {
                let next = args
                    .get(i + 1)
                    .ok_or_else(|| (i, format!("--{} needs a value", spec.names[0])))?;
                i += 1;
                Some(next.clone())
            }
        };
        out.push(RunArg {
            index,
            flag: spec.names[0],
            value,
        });
        i += 1;
    }
    Ok(out)
}

fn split_run_flag(text: &str) -> std::result::Result<(&'static RunFlag, Option<String>), String> {
    let unknown = || {
        format!(
            "yolo does not accept the docker run option \"{text}\"; it accepts only: {}. No grant can allow other options",
            accepted_run_flags()
        )
    };
    if let Some(long) = text.strip_prefix("--") {
        let (name, value) = match long.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (long, None),
        };
        let spec = RUN_FLAGS
            .iter()
            .find(|f| f.names.contains(&name))
            .ok_or_else(unknown)?;
        return Ok((spec, value));
    }
    let Some(short) = text.strip_prefix('-').filter(|s| !s.is_empty()) else {
        return Err(format!(
            "\"{text}\" is not an option: runArgs holds docker run options only"
        ));
    };
    let mut chars = short.chars();
    let letter = chars.next();
    let spec = RUN_FLAGS
        .iter()
        .find(|f| f.short.is_some() && f.short == letter)
        .ok_or_else(unknown)?;
    let tail = chars.as_str();
    match (spec.arity, tail) {
        (_, "") => Ok((spec, None)),
        (Arity::Value, tail) => Ok((
            spec,
            Some(tail.strip_prefix('=').unwrap_or(tail).to_string()),
        )),
        (Arity::Switch, _) => Err(unknown()),
    }
}

impl Eval<'_> {
    fn apply_run_args(&mut self, spec: &mut RunSpec) -> Result<()> {
        let args = parse_run_args(&self.config.run_args)
            .map_err(|(i, m)| self.config_error(&format!("runArgs[{i}]"), m))?;
        for arg in args {
            let property = format!("runArgs[{}]", arg.index);
            self.apply_run_arg(spec, &property, arg.flag, arg.value)?;
        }
        Ok(())
    }

    fn apply_run_arg(
        &mut self,
        spec: &mut RunSpec,
        property: &str,
        flag: &str,
        value: Option<String>,
    ) -> Result<()> {
        let text = value.clone().unwrap_or_default();
        let error = |message: String| self.config_error(property, message);
        match flag {
            "env" => {
                let (k, v) = text.split_once('=').ok_or_else(|| error(format!(
                    "-e {text} would copy the host's {text} into the container; give it a value (NAME=VALUE)"
                )))?;
                if k.is_empty() {
                    return Err(error(format!("-e \"{text}\" has no variable name")));
                }
                spec.container_env.insert(k.into(), v.into());
            }
            "label" => {
                let (k, v) = text.split_once('=').unwrap_or((text.as_str(), ""));
                self.check_label_key(property, k)?;
                spec.labels.insert(k.into(), v.into());
            }
            "memory" => self.run_limits.memory = Some(check_memory(&text).map_err(error)?),
            "cpus" => self.run_limits.cpus = Some(check_cpus_text(&text).map_err(error)?),
            "pids-limit" => self.run_limits.pids = Some(check_pids_text(&text).map_err(error)?),
            "shm-size" => spec.shm_size = Some(check_memory(&text).map_err(error)?),
            "hostname" => spec.hostname = Some(check_hostname(&text).map_err(error)?),
            "add-host" => spec.extra_hosts.push(check_add_host(&text).map_err(error)?),
            "user" if !text.is_empty() => spec.container_user = Some(text),
            "publish" => {
                let port = parse_app_port(&text).map_err(error)?;
                self.run_ports.push((property.to_string(), port));
            }
            "tmpfs" => {
                let target = text.split(':').next().unwrap_or_default().to_string();
                let req = MountRequest { kind: MountKind::Tmpfs, source: String::new(), target, read_only: false };
                self.add_mount(spec, property, req)?;
            }
            "volume" => {
                let req = parse_volume_arg(&text).map_err(error)?;
                self.add_mount(spec, property, req)?;
            }
            "mount" => {
                let req = parse_mount_string(&text).map_err(error)?;
                self.add_mount(spec, property, req)?;
            }
            "privileged" if switch_on(value.as_deref()).map_err(error)? => {
                self.grant_privileged(spec, property)?
            }
            "cap-add" => self.grant_cap(spec, property, &text)?,
            "security-opt" => self.grant_security_opt(spec, property, &text)?,
            "device" => self.grant_device(spec, property, &text)?,
            "network" | "pid" | "ipc" | "uts" | "userns" => {
                self.grant_namespace(spec, property, flag, &text)?
            }
            "name" => {
                return Err(error(format!(
                    "--name {text}: yolo names its containers itself (here \"{}\") so it can find them again; remove --name",
                    spec.container_name
                )))
            }
            "init" | "rm" => {
                switch_on(value.as_deref()).map_err(error)?;
            }
            // Accepted, no effect: see the module docs.
            _ => {}
        }
        Ok(())
    }

    fn grant_device(&mut self, spec: &mut RunSpec, property: &str, device: &str) -> Result<()> {
        if device.is_empty() {
            return Err(self.config_error(property, "--device needs a device path"));
        }
        let reason = "a host device gives the container direct access to hardware";
        self.require(
            Need::Device,
            property,
            &format!("the host device {device}"),
            reason,
        )?;
        if !spec.devices.iter().any(|d| d == device) {
            spec.devices.push(device.into());
        }
        Ok(())
    }

    /// `--network`, `--pid`, `--ipc`, `--uts`, `--userns`: sharing a namespace with the host (or
    /// another container) needs the matching grant; yolo manages the network itself.
    fn grant_namespace(
        &mut self,
        spec: &mut RunSpec,
        property: &str,
        flag: &str,
        value: &str,
    ) -> Result<()> {
        let shares = value == "host" || value.starts_with("container:");
        if !shares {
            return match (flag, value) {
                ("ipc", "private" | "shareable" | "none") => Ok(()),
                ("network", _) => Err(self.config_error(
                    property,
                    format!("--network {value}: yolo manages the container's network (it sits behind yolo's firewall); remove the option"),
                )),
                _ => Err(self.config_error(
                    property,
                    format!("--{flag} {value}: yolo accepts only \"host\" or \"container:NAME\" here (with a grant)"),
                )),
            };
        }
        let (need, reason) = match flag {
            "network" => (
                Need::HostNetwork,
                "the host's network bypasses yolo's firewall",
            ),
            "pid" => (
                Need::HostPid,
                "sharing process ids lets the agent see and signal other processes",
            ),
            "ipc" => (
                Need::HostIpc,
                "sharing IPC exposes other processes' shared memory",
            ),
            "uts" => (
                Need::HostUts,
                "sharing the UTS namespace lets the agent rename the host",
            ),
            _ => (
                Need::HostUserns,
                "without a user namespace the container's root is the host's root",
            ),
        };
        self.require(need, property, &format!("--{flag}={value}"), reason)?;
        spec.host_modes.insert(flag.into(), value.into());
        Ok(())
    }
}

/// A switch's inline value: none or `true` is on, `false` is off.
fn switch_on(value: Option<&str>) -> std::result::Result<bool, String> {
    match value {
        None | Some("true") | Some("1") => Ok(true),
        Some("false") | Some("0") => Ok(false),
        Some(other) => Err(format!("expected true or false, got \"{other}\"")),
    }
}

fn check_hostname(text: &str) -> std::result::Result<String, String> {
    let ok = !text.is_empty()
        && text.len() <= 63
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if ok {
        Ok(text.into())
    } else {
        Err(format!("\"{text}\" is not a valid hostname"))
    }
}

/// `name:ip` (or docker's newer `name=ip`), returned as `name:ip`.
fn check_add_host(text: &str) -> std::result::Result<String, String> {
    let (name, ip) = text
        .split_once('=')
        .or_else(|| text.split_once(':'))
        .ok_or_else(|| format!("--add-host \"{text}\" needs NAME:IP"))?;
    if name.is_empty() || ip.is_empty() {
        return Err(format!("--add-host \"{text}\" needs NAME:IP"));
    }
    Ok(format!("{name}:{ip}"))
}

// ---------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------

/// One source of limits; later layers override earlier ones field by field.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct LimitLayer {
    cpus: Option<f64>,
    memory: Option<i64>,
    pids: Option<i64>,
}

impl LimitLayer {
    fn apply(self, limits: &mut Limits) {
        limits.cpus = self.cpus.unwrap_or(limits.cpus);
        limits.memory_bytes = self.memory.unwrap_or(limits.memory_bytes);
        limits.pids = self.pids.unwrap_or(limits.pids);
    }
}

/// Docker refuses less than 6 MiB of memory.
const MIN_MEMORY: i64 = 6 * 1024 * 1024;

fn check_memory(text: &str) -> std::result::Result<i64, String> {
    match parse_size(text) {
        Some(bytes) if bytes >= MIN_MEMORY => Ok(bytes),
        Some(_) => Err(format!("\"{text}\" is less than the 6m Docker needs")),
        None => Err(format!("\"{text}\" is not a size like 512m, 4g or 8gb")),
    }
}

fn check_cpus(cpus: f64) -> std::result::Result<f64, String> {
    if cpus.is_finite() && cpus > 0.0 && cpus <= 1024.0 {
        Ok(cpus)
    } else {
        Err(format!(
            "{cpus} is not a CPU count (a number above 0, like 2 or 0.5)"
        ))
    }
}

fn check_cpus_text(text: &str) -> std::result::Result<f64, String> {
    let cpus = text
        .trim()
        .parse::<f64>()
        .map_err(|_| format!("\"{text}\" is not a CPU count"))?;
    check_cpus(cpus)
}

fn check_pids(pids: i64) -> std::result::Result<i64, String> {
    if pids > 0 {
        Ok(pids)
    } else {
        Err(format!(
            "{pids} is not a process limit (a whole number above 0)"
        ))
    }
}

fn check_pids_text(text: &str) -> std::result::Result<i64, String> {
    let pids = text
        .trim()
        .parse::<i64>()
        .map_err(|_| format!("\"{text}\" is not a process limit"))?;
    check_pids(pids)
}

/// Parse "4g", "4gb", "4GiB", "512m", "1024k", "1.5g", "100" (bytes) into bytes; units are
/// powers of 1024, as in Docker. Negative, fractional bytes, overflow and garbage: `None`.
pub fn parse_size(text: &str) -> Option<i64> {
    let text = text.trim().to_ascii_lowercase();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    if split == 0 {
        return None;
    }
    let (number, unit) = text.split_at(split);
    let shift = match unit.trim_start() {
        "" | "b" => 0,
        "k" | "kb" | "ki" | "kib" => 10,
        "m" | "mb" | "mi" | "mib" => 20,
        "g" | "gb" | "gi" | "gib" => 30,
        "t" | "tb" | "ti" | "tib" => 40,
        "p" | "pb" | "pi" | "pib" => 50,
        _ => return None,
    };
    size_bytes(number, shift)
}

fn size_bytes(number: &str, shift: u32) -> Option<i64> {
    if let Ok(whole) = number.parse::<i64>() {
        return whole.checked_mul(1i64.checked_shl(shift)?);
    }
    let value = number.parse::<f64>().ok()? * (1u64 << shift) as f64;
    (value.is_finite() && value >= 0.0 && value < i64::MAX as f64 && value.fract() == 0.0)
        .then_some(value as i64)
}

pub fn default_limits() -> Limits {
    Limits::default()
}

impl Eval<'_> {
    /// defaults < hostRequirements < customizations.yolo.limits < runArgs < user config < flags.
    fn limits(&self) -> Result<Limits> {
        let mut limits = Limits::default();
        self.host_requirements()?.apply(&mut limits);
        self.yolo_limits()?.apply(&mut limits);
        self.run_limits.apply(&mut limits);
        user_limits(self.input.user)?.apply(&mut limits);
        flag_limits(self.input.flags)?.apply(&mut limits);
        Ok(limits)
    }

    fn host_requirements(&self) -> Result<LimitLayer> {
        let Some(req) = &self.config.host_requirements else {
            return Ok(LimitLayer::default());
        };
        let cpus = req.cpus.map(check_cpus).transpose();
        let memory = req.memory.as_deref().map(check_memory).transpose();
        Ok(LimitLayer {
            cpus: cpus.map_err(|m| self.config_error("hostRequirements.cpus", m))?,
            memory: memory.map_err(|m| self.config_error("hostRequirements.memory", m))?,
            pids: None,
        })
    }

    fn yolo_limits(&self) -> Result<LimitLayer> {
        let Some(yolo) = self.yolo() else {
            return Ok(LimitLayer::default());
        };
        let l = &yolo.limits;
        let at = |field: &str| format!("customizations.yolo.limits.{field}");
        Ok(LimitLayer {
            cpus: l
                .cpus
                .map(check_cpus)
                .transpose()
                .map_err(|m| self.config_error(&at("cpus"), m))?,
            memory: l
                .memory
                .as_deref()
                .map(check_memory)
                .transpose()
                .map_err(|m| self.config_error(&at("memory"), m))?,
            pids: l
                .pids
                .map(check_pids)
                .transpose()
                .map_err(|m| self.config_error(&at("pids"), m))?,
        })
    }
}

fn user_limits(user: &UserConfig) -> Result<LimitLayer> {
    let error = |field: &str, m: String| Error::UserConfig {
        file: UserConfig::path(),
        message: format!("[limits] {field}: {m}"),
    };
    let l = &user.limits;
    Ok(LimitLayer {
        cpus: l
            .cpus
            .map(check_cpus)
            .transpose()
            .map_err(|m| error("cpus", m))?,
        memory: l
            .memory
            .as_deref()
            .map(check_memory)
            .transpose()
            .map_err(|m| error("memory", m))?,
        pids: l
            .pids
            .map(check_pids)
            .transpose()
            .map_err(|m| error("pids", m))?,
    })
}

fn flag_limits(flags: &Flags) -> Result<LimitLayer> {
    let error = |flag: &str, m: String| Error::other(format!("--{flag}: {m}"));
    Ok(LimitLayer {
        cpus: flags
            .cpus
            .map(check_cpus)
            .transpose()
            .map_err(|m| error("cpus", m))?,
        memory: flags
            .memory
            .as_deref()
            .map(check_memory)
            .transpose()
            .map_err(|m| error("memory", m))?,
        pids: flags
            .pids
            .map(check_pids)
            .transpose()
            .map_err(|m| error("pids", m))?,
    })
}

// ---------------------------------------------------------------------------------------------
// Ports
// ---------------------------------------------------------------------------------------------

fn parse_port(text: &str) -> std::result::Result<u16, String> {
    match text.trim().parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => Err(format!("\"{text}\" is not a port number (1-65535)")),
    }
}

/// `appPort`/`-p` string forms: `"3000"`, `"8080:80"`, `"127.0.0.1:8080:80"`, with an optional
/// `/tcp`. The host side always binds 127.0.0.1, whatever address the repository names.
pub fn parse_app_port(text: &str) -> std::result::Result<PortPublish, String> {
    let spec = text.strip_suffix("/tcp").unwrap_or(text);
    if spec.contains('/') {
        return Err(format!("\"{text}\": only TCP ports can be published"));
    }
    let parts: Vec<&str> = spec.split(':').collect();
    let (host, container) = match parts.as_slice() {
        [port] => (*port, *port),
        [host, container] => (*host, *container),
        [ip, host, container] if is_local_address(ip) || ip.is_empty() || *ip == "0.0.0.0" => {
            (*host, *container)
        }
        [ip, _, _] => {
            return Err(format!(
                "\"{text}\": yolo publishes ports on 127.0.0.1 only, not {ip}"
            ))
        }
        _ => {
            return Err(format!(
                "\"{text}\" is not PORT, HOST:CONTAINER or IP:HOST:CONTAINER"
            ))
        }
    };
    Ok(PortPublish {
        host: parse_port(host)?,
        container: parse_port(container)?,
    })
}

fn is_local_address(host: &str) -> bool {
    matches!(host, "localhost" | "127.0.0.1" | "::1" | "[::1]")
}

impl Eval<'_> {
    /// forwardPorts, then appPort, then `-p` runArgs; repeats dropped, and one host port may
    /// not point at two container ports.
    fn ports(&self, spec: &RunSpec) -> Result<Vec<PortPublish>> {
        let mut requested: Vec<(String, PortPublish)> = Vec::new();
        for (i, entry) in self.config.forward_ports.iter().enumerate() {
            let property = format!("forwardPorts[{i}]");
            let port = self
                .forward_port(entry, spec)
                .map_err(|m| self.config_error(&property, m))?;
            requested.push((property, port));
        }
        let app: Vec<(String, &PortEntry)> = match &self.config.app_port {
            None => Vec::new(),
            Some(AppPort::One(e)) => vec![("appPort".into(), e)],
            Some(AppPort::Many(v)) => v
                .iter()
                .enumerate()
                .map(|(i, e)| (format!("appPort[{i}]"), e))
                .collect(),
        };
        for (property, entry) in app {
            let port = match entry {
                PortEntry::Number(n) => parse_port(&n.to_string()).map(|p| PortPublish {
                    host: p,
                    container: p,
                }),
                PortEntry::Text(t) => parse_app_port(t),
            }
            .map_err(|m| self.config_error(&property, m))?;
            requested.push((property, port));
        }
        requested.extend(self.run_ports.iter().cloned());
        self.merge_ports(requested)
    }

    /// A number, or `"host:port"` where host is this container (the spec allows naming other
    /// Compose services, which yolo cannot reach).
    fn forward_port(
        &self,
        entry: &PortEntry,
        spec: &RunSpec,
    ) -> std::result::Result<PortPublish, String> {
        let port = match entry {
            PortEntry::Number(n) => parse_port(&n.to_string())?,
            PortEntry::Text(text) => {
                match text.rsplit_once(':') {
                    None => parse_port(text)?,
                    Some((host, port)) => {
                        let own = is_local_address(host)
                            || spec.hostname.as_deref() == Some(host)
                            || host == spec.container_name;
                        if !own {
                            return Err(format!("\"{text}\": yolo forwards only ports of this container, not of {host}"));
                        }
                        parse_port(port)?
                    }
                }
            }
        };
        Ok(PortPublish {
            host: port,
            container: port,
        })
    }

    fn merge_ports(&self, requested: Vec<(String, PortPublish)>) -> Result<Vec<PortPublish>> {
        let mut out: Vec<PortPublish> = Vec::new();
        for (property, port) in requested {
            if out.contains(&port) {
                continue;
            }
            if let Some(other) = out.iter().find(|p| p.host == port.host) {
                return Err(self.config_error(
                    &property,
                    format!(
                        "host port {} already forwards to container port {}",
                        port.host, other.container
                    ),
                ));
            }
            out.push(port);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const WS: &str = "/home/me/src/My Repo";
    const CFG: &str = "/home/me/src/My Repo/.devcontainer/devcontainer.json";
    const ID: &str = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdef";

    struct Case {
        config: serde_json::Value,
        user: UserConfig,
        flags: Flags,
        workspace: PathBuf,
        config_file: PathBuf,
    }

    fn case(config: serde_json::Value) -> Case {
        Case {
            config,
            user: UserConfig::default(),
            flags: Flags::default(),
            workspace: WS.into(),
            config_file: CFG.into(),
        }
    }

    impl Case {
        fn grant(mut self, grants: &[&str]) -> Self {
            self.flags.grants = grants.iter().map(|g| g.to_string()).collect();
            self
        }

        fn run(&self) -> Result<RunSpec> {
            let config: DevContainer = serde_json::from_value(self.config.clone()).unwrap();
            let input = Input {
                config: &config,
                config_file: &self.config_file,
                workspace: &self.workspace,
                devcontainer_id: ID,
                user: &self.user,
                flags: &self.flags,
                host_ids: Some((1000, 1000)),
                agent_volumes: vec![("yolo-claude-x".into(), "/home/node/.claude".into())],
            };
            evaluate(&input)
        }
    }

    fn ok(config: serde_json::Value) -> RunSpec {
        case(config).run().unwrap()
    }

    fn with_image(mut extra: serde_json::Value) -> serde_json::Value {
        extra["image"] = json!("debian:bookworm-slim");
        extra
    }

    /// Unpacks a refusal: (property, value, grant).
    fn refused(result: Result<RunSpec>) -> (String, String, String) {
        match result {
            Err(Error::Refused {
                property,
                value,
                grant,
                reason,
                ..
            }) => {
                assert!(!reason.is_empty());
                (property, value, grant)
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    /// Unpacks a config error: (property, message).
    fn config_err(result: Result<RunSpec>) -> (String, String) {
        match result {
            Err(Error::Config {
                property, message, ..
            }) => (property.unwrap_or_default(), message),
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    fn assert_grant_text(grant: &str, name: &str) {
        assert!(grant.contains(&format!("--grant {name}")), "{grant}");
        assert!(grant.contains(&format!("grants = [\"{name}\"]")), "{grant}");
    }

    // ----- grants -----

    #[test]
    fn grants_parse_and_print() {
        assert_eq!("privileged".parse::<Grant>(), Ok(Grant::Privileged));
        assert_eq!(
            "cap-add=cap_sys_ptrace".parse::<Grant>(),
            Ok(Grant::CapAdd(Some("SYS_PTRACE".into())))
        );
        assert_eq!("cap-add".parse::<Grant>(), Ok(Grant::CapAdd(None)));
        assert_eq!(
            "host-mount=/data/../srv/".parse::<Grant>(),
            Ok(Grant::HostMount(Some("/srv".into())))
        );
        for name in [
            "security-opt=seccomp=unconfined",
            "host-network",
            "config-change",
        ] {
            assert_eq!(name.parse::<Grant>().unwrap().to_string(), name);
        }
        assert!("host-mount=relative".parse::<Grant>().is_err());
        assert!("cap-add=".parse::<Grant>().is_err());
        assert!("privileged=yes".parse::<Grant>().is_err());
    }

    #[test]
    fn unknown_grant_lists_valid_ones() {
        let message = case(with_image(json!({})))
            .grant(&["root"])
            .run()
            .unwrap_err()
            .to_string();
        assert!(message.contains("unknown grant \"root\""), "{message}");
        assert!(
            message.contains("host-network") && message.contains("docker-socket"),
            "{message}"
        );
        let mut c = case(with_image(json!({})));
        c.user.grants = vec!["nope".into()];
        assert!(matches!(c.run(), Err(Error::UserConfig { .. })));
    }

    // ----- defaults -----

    #[test]
    fn minimal_image_gets_safe_defaults() {
        let spec = ok(with_image(json!({})));
        assert_eq!(
            spec.image,
            ImageSource::Image("debian:bookworm-slim".into())
        );
        assert_eq!(
            spec.workspace_mount,
            Mount {
                kind: MountKind::Bind,
                source: WS.into(),
                target: "/workspace".into(),
                read_only: false
            }
        );
        assert_eq!(spec.workspace_folder, "/workspace");
        assert_eq!(spec.limits, Limits::default());
        assert!(spec.init && spec.override_command && !spec.privileged);
        assert_eq!(spec.shutdown_action, "stopContainer");
        assert_eq!(spec.update_uid, Some((1000, 1000)));
        assert!(
            spec.cap_add.is_empty() && spec.security_opt.is_empty() && spec.grants_used.is_empty()
        );
        assert_eq!(spec.container_name, "yolo-my-repo-01234567");
        assert_eq!(
            spec.mounts,
            [Mount {
                kind: MountKind::Volume,
                source: "yolo-claude-x".into(),
                target: "/home/node/.claude".into(),
                read_only: false
            }]
        );
    }

    #[test]
    fn labels_let_vs_code_find_the_container() {
        let spec = ok(with_image(json!({})));
        assert_eq!(spec.labels["devcontainer.local_folder"], WS);
        assert_eq!(spec.labels["devcontainer.config_file"], CFG);
        assert_eq!(spec.labels["dev.yolo.managed"], "true");
        assert_eq!(spec.labels["dev.yolo.id"], ID);
        assert_eq!(spec.labels["dev.yolo.workspace"], WS);
        assert_eq!(spec.labels[CONFIG_HASH_LABEL], spec.config_hash);
    }

    #[test]
    fn init_false_is_ignored_and_other_flags_are_copied() {
        let spec = ok(with_image(json!({
            "init": false, "overrideCommand": false, "updateRemoteUserUID": false,
            "shutdownAction": "none", "containerUser": "root", "remoteUser": "dev",
            "containerEnv": {"A": "1"}, "remoteEnv": {"B": null},
            "postCreateCommand": "make", "customizations": {"yolo": {"agent": "codex"}}
        })));
        assert!(spec.init);
        assert!(!spec.override_command);
        assert_eq!(spec.update_uid, None);
        assert_eq!(spec.shutdown_action, "none");
        assert_eq!(spec.container_user.as_deref(), Some("root"));
        assert_eq!(spec.remote_user.as_deref(), Some("dev"));
        assert_eq!(spec.container_env["A"], "1");
        assert_eq!(spec.remote_env["B"], None);
        assert!(spec.hooks.post_create.is_some() && spec.hooks.on_create.is_none());
        assert_eq!(spec.default_agent.as_deref(), Some("codex"));
    }

    #[test]
    fn bad_shutdown_action_and_missing_image_are_config_errors() {
        let (property, _) =
            config_err(case(with_image(json!({"shutdownAction": "stopCompose"}))).run());
        assert_eq!(property, "shutdownAction");
        let (property, _) = config_err(case(json!({})).run());
        assert_eq!(property, "image");
        let (property, _) = config_err(case(json!({"build": {"context": ".."}})).run());
        assert_eq!(property, "build.dockerfile");
    }

    // ----- privileged, capAdd, securityOpt -----

    #[test]
    fn privileged_is_refused_then_granted() {
        let c = case(with_image(json!({"privileged": true})));
        let (property, value, grant) = refused(c.run());
        assert_eq!(property, "privileged");
        assert_eq!(value, "privileged mode");
        assert_grant_text(&grant, "privileged");
        let spec = c.grant(&["privileged"]).run().unwrap();
        assert!(spec.privileged);
        assert_eq!(spec.grants_used, ["privileged"]);
        assert!(!ok(with_image(json!({"privileged": false}))).privileged);
    }

    #[test]
    fn cap_add_is_refused_normalized_then_granted() {
        let c = case(with_image(json!({"capAdd": ["NET_RAW", "CAP_SYS_PTRACE"]})));
        let (property, value, grant) = refused(c.run());
        assert_eq!(property, "capAdd[0]");
        assert_eq!(value, "capability NET_RAW");
        assert_grant_text(&grant, "cap-add=NET_RAW");
        let (property, value, _) =
            refused(case(c.config.clone()).grant(&["cap-add=net_raw"]).run());
        assert_eq!(
            (property.as_str(), value.as_str()),
            ("capAdd[1]", "capability SYS_PTRACE")
        );
        let spec = case(c.config.clone())
            .grant(&["cap-add=NET_RAW", "cap-add=sys_ptrace"])
            .run()
            .unwrap();
        assert_eq!(spec.cap_add, ["NET_RAW", "SYS_PTRACE"]);
        assert_eq!(spec.grants_used, ["cap-add=NET_RAW", "cap-add=SYS_PTRACE"]);
        let spec = case(c.config.clone()).grant(&["cap-add"]).run().unwrap();
        assert_eq!(spec.grants_used, ["cap-add"]);
    }

    #[test]
    fn security_opt_is_refused_except_no_new_privileges() {
        let c = case(with_image(
            json!({"securityOpt": ["no-new-privileges:true", "seccomp=unconfined"]}),
        ));
        let (property, value, grant) = refused(c.run());
        assert_eq!(property, "securityOpt[1]");
        assert_eq!(value, "security option seccomp=unconfined");
        assert_grant_text(&grant, "security-opt=seccomp=unconfined");
        let spec = case(c.config.clone())
            .grant(&["security-opt"])
            .run()
            .unwrap();
        assert_eq!(spec.security_opt, ["seccomp=unconfined"]);
        let (_, value, _) = refused(
            case(with_image(
                json!({"securityOpt": ["no-new-privileges=false"]}),
            ))
            .run(),
        );
        assert!(value.contains("no-new-privileges=false"));
    }

    // ----- mounts -----

    #[test]
    fn mount_strings_parse() {
        let m = parse_mount_string("source=/a,target=/b,type=bind,readonly,consistency=cached")
            .unwrap();
        assert_eq!(
            m,
            MountRequest {
                kind: MountKind::Bind,
                source: "/a".into(),
                target: "/b".into(),
                read_only: true
            }
        );
        let m = parse_mount_string("type=volume,src=cache,dst=/c").unwrap();
        assert_eq!(
            (m.kind, m.source.as_str(), m.target.as_str(), m.read_only),
            (MountKind::Volume, "cache", "/c", false)
        );
        assert_eq!(
            parse_mount_string("type=tmpfs,target=/t").unwrap().kind,
            MountKind::Tmpfs
        );
        assert!(parse_mount_string("type=bind,source=/a,target=/b,ro=false")
            .is_ok_and(|m| !m.read_only));
        assert!(parse_mount_string("type=bind,source=/a").is_err());
        assert!(parse_mount_string("type=npipe,source=/a,target=/b").is_err());
        assert!(parse_mount_string("type=bind,source=/a,target=/b,bogus=1").is_err());
        let m = parse_mount_string("type=volume,source=v,target=/v,volume-opt=device=/etc");
        assert!(m.unwrap_err().contains("any host path"));
    }

    #[test]
    fn volume_args_parse() {
        let v = parse_volume_arg("cache:/cache:ro").unwrap();
        assert_eq!((v.kind, v.read_only), (MountKind::Volume, true));
        assert_eq!(
            parse_volume_arg("/etc:/host-etc").unwrap().kind,
            MountKind::Bind
        );
        assert_eq!(parse_volume_arg("./x:/x").unwrap().kind, MountKind::Bind);
        assert_eq!(parse_volume_arg("/anon").unwrap().source, "");
        assert!(parse_volume_arg("a:/b:weird").is_err());
        assert!(parse_volume_arg("a:b:c:d").is_err());
    }

    #[test]
    fn named_volumes_and_tmpfs_are_allowed() {
        let spec = ok(with_image(json!({"mounts": [
            "source=node_modules,target=/workspace/node_modules,type=volume",
            {"type": "tmpfs", "target": "/scratch"},
            {"type": "volume", "source": "cache", "target": "/cache"}
        ]})));
        let kinds: Vec<_> = spec
            .mounts
            .iter()
            .map(|m| (m.kind, m.source.as_str(), m.target.as_str()))
            .collect();
        assert_eq!(
            kinds[..3],
            [
                (MountKind::Volume, "node_modules", "/workspace/node_modules"),
                (MountKind::Tmpfs, "", "/scratch"),
                (MountKind::Volume, "cache", "/cache"),
            ]
        );
        assert!(spec.grants_used.is_empty());
    }

    #[test]
    fn host_bind_is_refused_then_granted_by_path() {
        let c = case(with_image(
            json!({"mounts": ["source=/home/me/.ssh,target=/root/.ssh,type=bind"]}),
        ));
        let (property, value, grant) = refused(c.run());
        assert_eq!(property, "mounts[0]");
        assert!(value.contains("/home/me/.ssh at /root/.ssh"), "{value}");
        assert_grant_text(&grant, "host-mount=/home/me/.ssh");
        let spec = case(c.config.clone())
            .grant(&["host-mount=/home/me"])
            .run()
            .unwrap();
        assert_eq!(spec.mounts[0].source, "/home/me/.ssh");
        assert_eq!(spec.grants_used, ["host-mount=/home/me"]);
        assert!(case(c.config.clone())
            .grant(&["host-mount=/home/me/data"])
            .run()
            .is_err());
    }

    #[test]
    fn host_bind_object_form_and_dotdot_escape_are_refused() {
        let c = case(with_image(
            json!({"mounts": [{"type": "bind", "source": "/etc", "target": "/e"}]}),
        ));
        assert_eq!(refused(c.run()).0, "mounts[0]");
        let c = case(with_image(
            json!({"mounts": ["type=bind,source=/data/../home/me/.ssh,target=/s"]}),
        ));
        let (_, value, _) = refused(c.grant(&["host-mount=/data"]).run());
        assert!(value.contains("/home/me/.ssh"), "{value}");
        let (property, _) = config_err(
            case(with_image(
                json!({"mounts": ["type=bind,source=rel,target=/s"]}),
            ))
            .run(),
        );
        assert_eq!(property, "mounts[0]");
        let (_, message) = config_err(
            case(with_image(
                json!({"mounts": ["type=volume,source=a/b,target=/s"]}),
            ))
            .run(),
        );
        assert!(message.contains("volume name"));
    }

    #[test]
    fn binding_the_workspace_again_is_allowed() {
        let spec = ok(with_image(
            json!({"mounts": [format!("type=bind,source={WS},target=/src")]}),
        ));
        assert_eq!(spec.mounts[0].target, "/src");
        assert!(spec.grants_used.is_empty());
    }

    #[test]
    fn docker_socket_needs_its_own_grant() {
        let c = case(with_image(
            json!({"mounts": ["source=/var/run/docker.sock,target=/var/run/docker.sock,type=bind"]}),
        ));
        let (_, value, grant) = refused(c.run());
        assert!(value.contains("docker.sock"));
        assert_grant_text(&grant, "docker-socket");
        assert!(case(c.config.clone()).grant(&["host-mount"]).run().is_err());
        let spec = case(c.config.clone())
            .grant(&["docker-socket"])
            .run()
            .unwrap();
        assert_eq!(spec.grants_used, ["docker-socket"]);
        // A folder holding the socket hands it over too.
        let c = case(with_image(
            json!({"mounts": ["source=/run,target=/hostrun,type=bind"]}),
        ));
        assert_grant_text(&refused(c.grant(&["host-mount"]).run()).2, "docker-socket");
        let c = case(with_image(
            json!({"runArgs": ["-v", "/run/user/1000/docker.sock:/d.sock"]}),
        ));
        assert_grant_text(&refused(c.run()).2, "docker-socket");
    }

    #[test]
    fn agent_volumes_are_named_volumes() {
        let spec = ok(with_image(json!({})));
        assert_eq!(spec.mounts.last().unwrap().kind, MountKind::Volume);
    }

    // ----- workspace -----

    #[test]
    fn workspace_folder_and_mount_target_move() {
        let spec = ok(with_image(json!({"workspaceFolder": "/src/app"})));
        assert_eq!(
            (
                spec.workspace_mount.target.as_str(),
                spec.workspace_folder.as_str()
            ),
            ("/workspace", "/src/app")
        );
        let mount = format!("source={WS},target=/src,type=bind,consistency=cached");
        let spec = ok(with_image(json!({"workspaceMount": mount})));
        assert_eq!(spec.workspace_mount.target, "/src");
        assert_eq!(spec.workspace_folder, "/src");
        assert!(!spec.workspace_mount.read_only);
        let spec = ok(with_image(
            json!({"workspaceMount": format!("{mount},readonly")}),
        ));
        assert!(spec.workspace_mount.read_only);
        let (property, _) = config_err(case(with_image(json!({"workspaceFolder": "rel"}))).run());
        assert_eq!(property, "workspaceFolder");
    }

    #[test]
    fn workspace_mount_elsewhere_needs_host_mount() {
        let c = case(with_image(
            json!({"workspaceMount": "source=/home/me,target=/w,type=bind"}),
        ));
        let (property, _, grant) = refused(c.run());
        assert_eq!(property, "workspaceMount");
        assert_grant_text(&grant, "host-mount=/home/me");
        assert_eq!(
            c.grant(&["host-mount"])
                .run()
                .unwrap()
                .workspace_mount
                .source,
            "/home/me"
        );
        let volume = case(with_image(
            json!({"workspaceMount": "source=v,target=/w,type=volume"}),
        ));
        assert!(matches!(volume.run(), Err(Error::Unsupported { .. })));
    }

    #[test]
    fn workspace_mount_of_git_root_is_allowed() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(".git")).unwrap();
        let workspace = root.path().join("sub");
        let mut c = case(with_image(json!({
            "workspaceMount": format!("source={},target=/repo,type=bind", root.path().display())
        })));
        c.workspace = workspace.clone();
        c.config_file = workspace.join(".devcontainer/devcontainer.json");
        let spec = c.run().unwrap();
        assert_eq!(spec.workspace_mount.source, root.path().to_string_lossy());
        assert_eq!(spec.workspace_folder, "/repo/sub");
        assert!(spec.grants_used.is_empty());
    }

    // ----- initializeCommand -----

    #[test]
    fn initialize_command_needs_trust() {
        let c = case(with_image(json!({"initializeCommand": "echo hi"})));
        let (property, value, grant) = refused(c.run());
        assert_eq!(property, "initializeCommand");
        assert!(value.contains("echo hi"), "{value}");
        assert!(
            grant.contains("--trust-host-commands") && grant.contains("trust_host_commands = true")
        );
        let mut trusted = case(c.config.clone());
        trusted.flags.trust_host_commands = true;
        let spec = trusted.run().unwrap();
        assert!(spec.initialize_command.is_some());
        assert_eq!(spec.grants_used, ["trust-host-commands"]);
        let spec = case(c.config.clone())
            .grant(&["initialize-command"])
            .run()
            .unwrap();
        assert_eq!(spec.grants_used, ["initialize-command"]);
        let mut by_config = case(c.config.clone());
        by_config.user.trust_host_commands = true;
        assert!(by_config.run().is_ok());
    }

    // ----- runArgs -----

    fn run_args(args: &[&str]) -> Case {
        case(with_image(json!({ "runArgs": args })))
    }

    #[test]
    fn run_args_parse_forms() {
        let args: Vec<String> = [
            "--env=A=B",
            "-e",
            "C=D",
            "-eE=F",
            "--memory",
            "2g",
            "-m=1g",
            "--init",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let parsed = parse_run_args(&args).unwrap();
        let flat: Vec<(usize, &str, Option<&str>)> = parsed
            .iter()
            .map(|a| (a.index, a.flag, a.value.as_deref()))
            .collect();
        assert_eq!(
            flat,
            [
                (0, "env", Some("A=B")),
                (1, "env", Some("C=D")),
                (3, "env", Some("E=F")),
                (4, "memory", Some("2g")),
                (6, "memory", Some("1g")),
                (7, "init", None),
            ]
        );
        assert_eq!(
            parse_run_args(&["--net=host".into()]).unwrap()[0].flag,
            "network"
        );
        assert_eq!(parse_run_args(&["-e".into()]).unwrap_err().0, 0);
        assert!(parse_run_args(&["-it".into()]).is_err());
    }

    #[test]
    fn safe_run_args_are_applied() {
        let spec = run_args(&[
            "--env=A=B",
            "-e",
            "C=D=E",
            "--label",
            "team=web",
            "-l",
            "flag",
            "--hostname",
            "box",
            "--add-host",
            "db:10.0.0.2",
            "--shm-size",
            "1g",
            "--user",
            "bob",
            "-w",
            "/x",
            "--init",
            "-v",
            "cache:/cache",
            "--tmpfs",
            "/tmp:size=64m",
            "--mount",
            "type=volume,src=v,dst=/v",
            "--cap-drop",
            "ALL",
            "--rm",
            "--ipc=private",
            "-p",
            "8080:80",
            "--security-opt",
            "no-new-privileges",
        ])
        .run()
        .unwrap();
        assert_eq!(spec.container_env["A"], "B");
        assert_eq!(spec.container_env["C"], "D=E");
        assert_eq!(spec.labels["team"], "web");
        assert_eq!(spec.labels["flag"], "");
        assert_eq!(spec.hostname.as_deref(), Some("box"));
        assert_eq!(spec.extra_hosts, ["db:10.0.0.2"]);
        assert_eq!(spec.shm_size, Some(1 << 30));
        assert_eq!(spec.container_user.as_deref(), Some("bob"));
        let targets: Vec<&str> = spec.mounts.iter().map(|m| m.target.as_str()).collect();
        assert_eq!(targets, ["/home/node/.claude", "/cache", "/tmp", "/v"]);
        assert_eq!(
            spec.ports,
            [PortPublish {
                host: 8080,
                container: 80
            }]
        );
        assert!(spec.grants_used.is_empty() && spec.host_modes.is_empty());
    }

    #[test]
    fn dangerous_run_args_are_refused_with_their_index() {
        let cases: &[(&[&str], &str, &str)] = &[
            (&["--init", "--privileged"], "runArgs[1]", "privileged"),
            (
                &["--cap-add", "sys_admin"],
                "runArgs[0]",
                "cap-add=SYS_ADMIN",
            ),
            (&["--cap-add=SYS_ADMIN"], "runArgs[0]", "cap-add=SYS_ADMIN"),
            (
                &["--security-opt", "apparmor=unconfined"],
                "runArgs[0]",
                "security-opt=apparmor=unconfined",
            ),
            (
                &["--security-opt=label=disable"],
                "runArgs[0]",
                "security-opt=label=disable",
            ),
            (&["--network", "host"], "runArgs[0]", "host-network"),
            (&["--net=container:other"], "runArgs[0]", "host-network"),
            (&["--pid=host"], "runArgs[0]", "host-pid"),
            (&["--ipc", "host"], "runArgs[0]", "host-ipc"),
            (&["--uts=host"], "runArgs[0]", "host-uts"),
            (&["--userns=host"], "runArgs[0]", "host-userns"),
            (
                &["-e", "A=1", "-v", "/etc:/etc"],
                "runArgs[2]",
                "host-mount=/etc",
            ),
            (
                &["--mount", "type=bind,source=/srv,target=/srv"],
                "runArgs[0]",
                "host-mount=/srv",
            ),
            (&["--device", "/dev/kvm"], "runArgs[0]", "device"),
        ];
        for (args, property, grant_name) in cases {
            let (p, value, grant) = refused(run_args(args).run());
            assert_eq!(&p, property, "{args:?}");
            assert!(!value.is_empty());
            assert_grant_text(&grant, grant_name);
            assert!(
                run_args(args).grant(&[grant_name]).run().is_ok(),
                "{args:?}"
            );
        }
    }

    #[test]
    fn granted_run_args_land_in_the_spec() {
        let spec = run_args(&[
            "--privileged",
            "--network=host",
            "--pid",
            "host",
            "--device",
            "/dev/kvm",
            "--cap-add",
            "NET_ADMIN",
        ])
        .grant(&[
            "privileged",
            "host-network",
            "host-pid",
            "device",
            "cap-add",
        ])
        .run()
        .unwrap();
        assert!(spec.privileged);
        assert_eq!(spec.host_modes["network"], "host");
        assert_eq!(spec.host_modes["pid"], "host");
        assert_eq!(spec.devices, ["/dev/kvm"]);
        assert_eq!(spec.cap_add, ["NET_ADMIN"]);
        assert_eq!(
            spec.grants_used,
            [
                "privileged",
                "host-network",
                "host-pid",
                "device",
                "cap-add"
            ]
        );
        assert!(!run_args(&["--privileged=false"]).run().unwrap().privileged);
    }

    #[test]
    fn forbidden_run_args_are_config_errors() {
        let cases: &[(&[&str], &str, &str)] = &[
            (&["--foo"], "runArgs[0]", "--env (-e)"),
            (&["-e", "A=1", "--gpus", "all"], "runArgs[2]", "No grant"),
            (&["--name", "x"], "runArgs[0]", "names its containers"),
            (&["-e", "AWS_SECRET"], "runArgs[0]", "copy the host's"),
            (
                &["--network", "mynet"],
                "runArgs[0]",
                "manages the container's network",
            ),
            (&["--pid", "weird"], "runArgs[0]", "\"host\""),
            (&["--label", "dev.yolo.id=evil"], "runArgs[0]", "reserved"),
            (
                &["-l", "devcontainer.local_folder=/"],
                "runArgs[0]",
                "reserved",
            ),
            (&["bash"], "runArgs[0]", "not an option"),
            (&["--memory"], "runArgs[0]", "needs a value"),
            (&["--memory", "lots"], "runArgs[0]", "not a size"),
            (&["--cpus", "0"], "runArgs[0]", "CPU count"),
            (&["--pids-limit", "-1"], "runArgs[0]", "process limit"),
            (&["--hostname", "a b"], "runArgs[0]", "hostname"),
            (&["--add-host", "nohost"], "runArgs[0]", "NAME:IP"),
            (&["-p", "10.0.0.1:80:80"], "runArgs[0]", "127.0.0.1"),
        ];
        for (args, property, needle) in cases {
            let (p, message) = config_err(
                run_args(args)
                    .grant(&["privileged", "host-network", "host-pid"])
                    .run(),
            );
            assert_eq!(&p, property, "{args:?}");
            assert!(message.contains(needle), "{args:?}: {message}");
        }
    }

    // ----- limits -----

    #[test]
    fn parse_size_units() {
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("100b"), Some(100));
        assert_eq!(parse_size("1024k"), Some(1 << 20));
        assert_eq!(parse_size("512m"), Some(512 << 20));
        assert_eq!(parse_size("4g"), Some(4 << 30));
        assert_eq!(parse_size("4gb"), Some(4 << 30));
        assert_eq!(parse_size("4GiB"), Some(4 << 30));
        assert_eq!(parse_size(" 8 GB "), Some(8 << 30));
        assert_eq!(parse_size("1.5g"), Some(3 << 29));
        for bad in [
            "",
            "-1g",
            "g",
            "4x",
            "4gbb",
            "1.2.3m",
            "0.5",
            "99999999999p",
            "+4g",
            "4 g b",
        ] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
    }

    #[test]
    fn limits_precedence() {
        let config = json!({
            "image": "x",
            "hostRequirements": {"cpus": 3, "memory": "8gb"},
            "customizations": {"yolo": {"limits": {"cpus": 4, "pids": 300}}},
            "runArgs": ["--cpus", "5", "--pids-limit", "400"]
        });
        let spec = ok(config.clone());
        assert_eq!(
            spec.limits,
            Limits {
                cpus: 5.0,
                memory_bytes: 8 << 30,
                pids: 400
            }
        );
        let mut c = case(config.clone());
        c.user.limits.memory = Some("2g".into());
        c.user.limits.cpus = Some(1.0);
        c.flags.cpus = Some(0.5);
        assert_eq!(
            c.run().unwrap().limits,
            Limits {
                cpus: 0.5,
                memory_bytes: 2 << 30,
                pids: 400
            }
        );
        c.flags.pids = Some(10);
        c.flags.memory = Some("1g".into());
        assert_eq!(
            c.run().unwrap().limits,
            Limits {
                cpus: 0.5,
                memory_bytes: 1 << 30,
                pids: 10
            }
        );
        let only_host = ok(json!({"image": "x", "hostRequirements": {"memory": "6g"}}));
        assert_eq!(
            only_host.limits,
            Limits {
                memory_bytes: 6 << 30,
                ..Limits::default()
            }
        );
        let only_yolo =
            ok(json!({"image": "x", "customizations": {"yolo": {"limits": {"memory": "3g"}}}}));
        assert_eq!(only_yolo.limits.memory_bytes, 3 << 30);
    }

    #[test]
    fn invalid_limits_name_their_source() {
        let (p, _) =
            config_err(case(json!({"image": "x", "hostRequirements": {"memory": "lots"}})).run());
        assert_eq!(p, "hostRequirements.memory");
        let (p, _) = config_err(
            case(json!({"image": "x", "customizations": {"yolo": {"limits": {"pids": 0}}}})).run(),
        );
        assert_eq!(p, "customizations.yolo.limits.pids");
        let (p, _) = config_err(
            case(json!({"image": "x", "customizations": {"yolo": {"limits": {"memory": "1k"}}}}))
                .run(),
        );
        assert_eq!(p, "customizations.yolo.limits.memory");
        let mut c = case(with_image(json!({})));
        c.user.limits.memory = Some("-4g".into());
        assert!(matches!(c.run(), Err(Error::UserConfig { .. })));
        let mut c = case(with_image(json!({})));
        c.flags.cpus = Some(f64::NAN);
        assert!(c.run().unwrap_err().to_string().starts_with("--cpus"));
    }

    // ----- ports -----

    #[test]
    fn forward_ports_and_app_port() {
        let spec = ok(with_image(json!({
            "forwardPorts": [3000, "localhost:5000", "127.0.0.1:3000"],
            "appPort": [8080, "9090:90", "127.0.0.1:7000:70"]
        })));
        let pairs: Vec<(u16, u16)> = spec.ports.iter().map(|p| (p.host, p.container)).collect();
        assert_eq!(
            pairs,
            [
                (3000, 3000),
                (5000, 5000),
                (8080, 8080),
                (9090, 90),
                (7000, 70)
            ]
        );
        let spec = ok(with_image(json!({"appPort": "8000:80"})));
        assert_eq!(
            spec.ports,
            [PortPublish {
                host: 8000,
                container: 80
            }]
        );
        let spec = ok(with_image(json!({"appPort": 4000})));
        assert_eq!(
            spec.ports,
            [PortPublish {
                host: 4000,
                container: 4000
            }]
        );
        let spec = ok(with_image(
            json!({"runArgs": ["--hostname", "box"], "forwardPorts": ["box:81"]}),
        ));
        assert_eq!(
            spec.ports,
            [PortPublish {
                host: 81,
                container: 81
            }]
        );
    }

    #[test]
    fn bad_ports_are_config_errors() {
        let cases = [
            (json!({"forwardPorts": [0]}), "forwardPorts[0]"),
            (json!({"forwardPorts": ["db:5432"]}), "forwardPorts[0]"),
            (json!({"forwardPorts": [1, "x:y:z"]}), "forwardPorts[1]"),
            (json!({"appPort": "80:http"}), "appPort"),
            (json!({"appPort": [80, "53/udp"]}), "appPort[1]"),
            (json!({"appPort": ["8080:80", "8080:81"]}), "appPort[1]"),
            (json!({"appPort": "70000"}), "appPort"),
        ];
        for (config, property) in cases {
            let (p, _) = config_err(case(with_image(config.clone())).run());
            assert_eq!(p, property, "{config}");
        }
    }

    // ----- image -----

    #[test]
    fn build_paths_are_relative_to_the_config_folder() {
        let spec = ok(
            json!({"build": {"dockerfile": "Dockerfile", "args": {"A": "1"}, "target": "dev", "cacheFrom": "img:cache"}}),
        );
        let ImageSource::Build(build) = spec.image else {
            panic!("not a build")
        };
        assert_eq!(build.context, PathBuf::from(format!("{WS}/.devcontainer")));
        assert_eq!(build.dockerfile, "Dockerfile");
        assert_eq!(build.dockerfile_outside, None);
        assert_eq!(build.args["A"], "1");
        assert_eq!(build.target.as_deref(), Some("dev"));
        assert_eq!(build.cache_from, ["img:cache"]);
        assert_eq!(build.tag, "yolo-my-repo-0123456789ab:latest");
        assert_eq!(build.labels["dev.yolo.managed"], "true");
        assert_eq!(build.labels["dev.yolo.id"], ID);
    }

    #[test]
    fn build_context_and_legacy_forms() {
        let spec = ok(json!({"build": {"dockerfile": "Dockerfile", "context": ".."}}));
        let ImageSource::Build(build) = spec.image else {
            panic!()
        };
        assert_eq!(build.context, PathBuf::from(WS));
        assert_eq!(build.dockerfile, ".devcontainer/Dockerfile");
        let spec = ok(json!({"dockerFile": "../docker/Dockerfile.dev", "context": "../app"}));
        let ImageSource::Build(build) = spec.image else {
            panic!()
        };
        assert_eq!(build.context, PathBuf::from(format!("{WS}/app")));
        assert_eq!(build.dockerfile, ".yolo.Dockerfile");
        assert_eq!(
            build.dockerfile_outside,
            Some(PathBuf::from(format!("{WS}/docker/Dockerfile.dev")))
        );
        let spec = ok(json!({"image": "ignored", "build": {"dockerfile": "Dockerfile"}}));
        assert!(matches!(spec.image, ImageSource::Build(_)));
    }

    #[test]
    fn build_context_outside_the_repository_needs_host_mount() {
        let c = case(json!({"build": {"dockerfile": "Dockerfile", "context": "../../.."}}));
        let (property, value, grant) = refused(c.run());
        assert_eq!(property, "build.context");
        assert!(value.contains("/home/me"), "{value}");
        assert_grant_text(&grant, "host-mount=/home/me");
        assert!(c.grant(&["host-mount=/home"]).run().is_ok());
        let (property, _, _) =
            refused(case(json!({"build": {"dockerfile": "/etc/Dockerfile"}})).run());
        assert_eq!(property, "build.dockerfile");
    }

    #[test]
    fn build_options() {
        let spec = ok(
            json!({"build": {"dockerfile": "Dockerfile", "args": {"A": "1"}, "options": [
                "--build-arg", "A=2", "--build-arg=B=3", "--label", "x=y", "--target=prod", "--no-cache", "--pull"
            ]}}),
        );
        let ImageSource::Build(build) = spec.image else {
            panic!()
        };
        assert_eq!(build.args["A"], "2");
        assert_eq!(build.args["B"], "3");
        assert_eq!(build.labels["x"], "y");
        assert_eq!(build.target.as_deref(), Some("prod"));
        for (options, property) in [
            (json!(["--network=host"]), "build.options[0]"),
            (
                json!(["--target", "t", "--secret", "id=x"]),
                "build.options[2]",
            ),
            (json!(["--build-arg"]), "build.options[0]"),
            (json!(["--build-arg", "NOVALUE"]), "build.options[0]"),
            (json!(["--label", "dev.yolo.id=x"]), "build.options[0]"),
        ] {
            let config = json!({"build": {"dockerfile": "Dockerfile", "options": options}});
            assert_eq!(config_err(case(config).run()).0, property, "{options}");
        }
    }

    // ----- hash and firewall -----

    #[test]
    fn config_hash_is_stable_and_sensitive() {
        let config = with_image(json!({"runArgs": ["-e", "A=1"], "forwardPorts": [3000]}));
        let a = ok(config.clone());
        let b = ok(config.clone());
        assert_eq!(a.config_hash, b.config_hash);
        assert_eq!(a.config_hash.len(), 64);
        assert_eq!(config_hash(&a), a.config_hash);
        let changed = ok(with_image(
            json!({"runArgs": ["-e", "A=2"], "forwardPorts": [3000]}),
        ));
        assert_ne!(a.config_hash, changed.config_hash);
        let mut limited = case(config);
        limited.flags.pids = Some(99);
        assert_ne!(limited.run().unwrap().config_hash, a.config_hash);
    }

    #[test]
    fn config_hash_ignores_grant_order() {
        let config = with_image(json!({"privileged": true, "capAdd": ["NET_RAW"]}));
        let a = case(config.clone())
            .grant(&["privileged", "cap-add"])
            .run()
            .unwrap();
        let b = case(config)
            .grant(&["cap-add", "privileged"])
            .run()
            .unwrap();
        assert_eq!(a.config_hash, b.config_hash);
    }

    #[test]
    fn firewall_requests_merge_in_order() {
        let mut c = case(with_image(json!({"customizations": {"yolo": {"firewall": {
            "allow": ["a.example", "b.example"], "presets": ["npm"]
        }}}})));
        c.user.firewall.allow = vec!["b.example".into(), "c.example".into()];
        c.user.firewall.presets = vec!["pypi".into(), "npm".into()];
        c.flags.allow = vec!["d.example".into(), "a.example".into()];
        let spec = c.run().unwrap();
        assert_eq!(
            spec.firewall_allow,
            ["a.example", "b.example", "c.example", "d.example"]
        );
        assert_eq!(spec.firewall_presets, ["npm", "pypi"]);
    }
}
