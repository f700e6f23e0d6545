//! `RunSpec`: everything the engine needs to build and run a project container, after the
//! repository's requests were checked against the user's grants. Produced only by `policy`;
//! consumed by `engine` and `commands`. Nothing here is unchecked repository input.

use crate::devcontainer::model::LifecycleCommand;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One request of the repository yolo declined: left out of the container, named to the user
/// (`up` prints them, `up --json` and the session log carry them).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Declined {
    /// The file that asked (devcontainer.json, or the one the property names).
    pub(crate) file: PathBuf,
    /// The line of the property in `file`, where yolo found it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<usize>,
    /// `capAdd[0]`, `runArgs[3]`, `privileged (asked by Feature "x")`...
    pub(crate) property: String,
    /// What it asked for, in words (`capability SYS_PTRACE`).
    pub(crate) value: String,
    /// Why yolo does not honour it without a grant.
    pub(crate) reason: String,
    /// The grant that would honour it, as typed after `--grant`; `None`: no grant can (or
    /// `hint` says what to do first).
    pub(crate) grant: Option<String>,
    /// What to do instead, when a grant alone would not do (a path built from a variable yolo
    /// withheld: which one to pass, and the grant of the path it then makes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hint: Option<String>,
}

/// The GPUs a container gets: the engine's device request of the `gpu` capability.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) enum Gpus {
    All,
    Count(u32),
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct RunSpec {
    /// The host folder yolo was started for (canonical).
    pub(crate) workspace: PathBuf,
    /// The devcontainer.json in use (canonical).
    pub(crate) config_file: PathBuf,
    /// `${devcontainerId}` for this workspace and config file (a named session's own id).
    pub(crate) devcontainer_id: String,
    /// The named session's name (`--copy NAME`), put on the agent as `dev.yolo.copy`;
    /// `None`: the workspace session. Not in the config hash (the id already differs).
    #[serde(skip)]
    pub(crate) copy: Option<String>,
    /// The engine is on another machine (`engine::remote::remote_reason`): the guard's events
    /// and config and the exec audit's shim go through volumes, not this machine's folders. A
    /// named session on this machine's engine works on a copy too, but keeps the host folders.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) remote_engine: bool,
    /// Docker container name, e.g. `yolo-myrepo-1a2b3c4d`.
    pub(crate) container_name: String,
    pub(crate) image: ImageSource,
    pub(crate) container_env: BTreeMap<String, String>,
    /// Environment of commands run in the container (`remoteEnv`); `None` unsets.
    pub(crate) remote_env: BTreeMap<String, Option<String>>,
    pub(crate) container_user: Option<String>,
    pub(crate) remote_user: Option<String>,
    /// Make the remote user's uid/gid match these host ids (Linux, `updateRemoteUserUID`).
    pub(crate) update_uid: Option<(u32, u32)>,
    /// How the remote user's environment is read for hooks and `exec` (`userEnvProbe`). Not
    /// in the config hash: it shapes no container.
    #[serde(skip)]
    pub(crate) user_env_probe: UserEnvProbe,
    /// Fingerprints of the user's extra CA certificates the container trusts (`ca`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) extra_ca: Vec<String>,
    /// Replace the image's command with a keep-alive loop.
    pub(crate) override_command: bool,
    /// Bind mount of the repository: host source (never moved by the repo) -> container target.
    pub(crate) workspace_mount: Mount,
    /// Folder commands run in, inside the container.
    pub(crate) workspace_folder: String,
    /// Further mounts: named volumes, tmpfs, and host binds only when granted.
    pub(crate) mounts: Vec<Mount>,
    /// Paths of the workspace mounted read-only over it (and the folders anchoring them), in
    /// the order they are mounted: see `policy::protect`.
    pub(crate) protected: Vec<Protected>,
    /// Capabilities added back on top of yolo's default set (granted by the user).
    pub(crate) cap_add: Vec<String>,
    pub(crate) privileged: bool,
    /// Extra security options (granted by the user); `no-new-privileges` is always set.
    pub(crate) security_opt: Vec<String>,
    pub(crate) limits: Limits,
    /// Who chose `limits.cpus`: the engine's core count caps it differently (`fit_to_host`).
    #[serde(skip)]
    pub(crate) cpus_chosen_by: Chooser,
    /// `[limits] disk`: the writable layer's size where the storage driver can limit it. Part of
    /// the config hash: a container made without the limit (or with another) is stale.
    pub(crate) disk_bytes: Option<i64>,
    /// `[limits] required`: an engine that drops a CPU, memory or process limit (rootless
    /// Podman on cgroup v1) fails the `up` instead of a warning. The user's, never the
    /// repository's.
    #[serde(skip)]
    pub(crate) limits_required: bool,
    pub(crate) ports: Vec<PortPublish>,
    /// Compose siblings' ports forwarded through the guard (`forwardPorts: ["db:5432"]`), each
    /// also in `ports` (the guard publishes it and relays to the sibling); checked against the
    /// project's services when it starts (`bring_up::compose`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) relays: Vec<SiblingPort>,
    /// Labels set on the container (devcontainer.*, yolo's own, and safe `--label` runArgs).
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) hostname: Option<String>,
    /// `--add-host` entries, "name:ip".
    pub(crate) extra_hosts: Vec<String>,
    /// Host-level docker options granted by the user (`--network`, `--pid`, ...): name -> value.
    pub(crate) host_modes: BTreeMap<String, String>,
    /// Devices granted by the user (`--device`).
    pub(crate) devices: Vec<String>,
    pub(crate) hooks: Hooks,
    /// The `entrypoint`s of metadata entries (the image's label, Features), in order. Each is
    /// a program that must run at container start and then exec its arguments: the spec chains
    /// them in front of the container's command (`ep1 && ep2 ... && <command>` in the
    /// reference CLI). Collected by `policy::metadata`; the container start chains them.
    pub(crate) entrypoints: Vec<String>,
    /// The merged `devcontainer.metadata` label (a JSON array: the image's entries, the
    /// Features', devcontainer.json's own last), as the reference CLI puts it on its
    /// containers so VS Code's attach sees the same settings. Set by `Project`; not hashed (it
    /// repeats inputs the hash already covers, plus editor settings that do not shape the
    /// container).
    #[serde(skip)]
    pub(crate) metadata_label: String,
    /// `initializeCommand`: runs on the HOST, on a new start only, after
    /// `session::approval::confirm_host_command` (trusted, or the user said yes).
    pub(crate) initialize_command: Option<LifecycleCommand>,
    /// sha256 of the effective config (this struct minus volatile fields): a change means the
    /// container is stale.
    pub(crate) config_hash: String,
    /// Grants the user gave that this run used, for the audit log.
    pub(crate) grants_used: Vec<String>,
    /// `none` or `stopContainer` (default).
    pub(crate) shutdown_action: String,
    /// Firewall requests merged from the repository (used by the firewall).
    pub(crate) firewall_allow: Vec<String>,
    pub(crate) firewall_presets: Vec<String>,
    /// `customizations.yolo.agent`.
    pub(crate) default_agent: Option<String>,
    /// Whether the container gets `--init` (not with the exec audit: the guard, PID 1 of the
    /// namespace the agent joins, reaps; an init of the agent's would run unsupervised).
    pub(crate) init: bool,
    /// The exec audit: the shim starts the container's command and every `docker exec`, and
    /// the guard records each program (`[audit] exec`).
    #[serde(default)]
    pub(crate) exec_audit: bool,
    /// Extra shm size in bytes (`--shm-size`).
    pub(crate) shm_size: Option<i64>,
    /// `--ulimit` from runArgs (`policy::run_extras`). Left out of the hash when empty, as are
    /// the next three, so containers made before they existed are not stale.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) ulimits: Vec<Ulimit>,
    /// `--sysctl` from runArgs: IPC-namespaced ones only.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) sysctls: BTreeMap<String, String>,
    /// `--platform` from runArgs: for the pull, the build and the container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) platform: Option<String>,
    /// `--env-file` from runArgs: (property, host path). `crate::env_file` reads them after
    /// the policy, into `container_env` under what the config sets itself.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) env_files: Vec<(String, PathBuf)>,
    /// What the policy accepted and ignores, for the user (`--name`).
    #[serde(skip)]
    pub(crate) notes: Vec<String>,
    /// The repository's requests yolo left out for want of a grant (`[policy] requests =
    /// "decline"`, the default): none of them reaches the engine. Not hashed: a declined
    /// request does not shape the container.
    #[serde(skip)]
    pub(crate) declined: Vec<Declined>,
    /// GPUs granted (`--grant gpu[=N|all]`): the engine's device request, `None` for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) gpus: Option<Gpus>,
    /// A Compose config (`dockerComposeFile` + `service`): the agent runs in that service, which
    /// Compose creates; `image` is then only its label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) compose: Option<ComposeSpec>,
}

/// One `--ulimit`: -1 is unlimited.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Ulimit {
    pub(crate) name: String,
    pub(crate) soft: i64,
    pub(crate) hard: i64,
}

/// The Compose network yolo adds for the services granted `compose-egress`: a name no
/// repository's network may take.
pub(crate) const COMPOSE_EGRESS_NETWORK: &str = "yolo-egress";

/// What `dockerComposeFile`, `service` and `runServices` ask for, paths resolved. What the files
/// say is read (and checked service by service) only when `up` runs: `bring_up::compose`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct ComposeSpec {
    /// The Compose files, absolute, in the order given (later ones override earlier ones).
    pub(crate) files: Vec<PathBuf>,
    /// The folder of the first file: Compose's project directory.
    pub(crate) project_dir: PathBuf,
    /// Compose's project name: the agent container's name, stable per workspace.
    pub(crate) project_name: String,
    /// The dev service: the agent's container.
    pub(crate) service: String,
    /// `runServices`; `None`: every service.
    pub(crate) run_services: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) enum ImageSource {
    /// Use (and pull if missing) this image.
    Image(String),
    Build(BuildSpec),
}

/// `userEnvProbe`: the shell whose environment commands in the container get, as VS Code and
/// the reference CLI run it (`-lic`, `-lc`, `-ic`), or none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum UserEnvProbe {
    None,
    LoginShell,
    InteractiveShell,
    #[default]
    LoginInteractiveShell,
}

impl UserEnvProbe {
    pub(crate) fn parse(value: &str) -> Option<UserEnvProbe> {
        Some(match value {
            "none" => UserEnvProbe::None,
            "loginShell" => UserEnvProbe::LoginShell,
            "interactiveShell" => UserEnvProbe::InteractiveShell,
            "loginInteractiveShell" => UserEnvProbe::LoginInteractiveShell,
            _ => return None,
        })
    }

    /// The shell's flag; `None` for no probe.
    pub(crate) fn flag(self) -> Option<&'static str> {
        match self {
            UserEnvProbe::None => None,
            UserEnvProbe::LoginShell => Some("-lc"),
            UserEnvProbe::InteractiveShell => Some("-ic"),
            UserEnvProbe::LoginInteractiveShell => Some("-lic"),
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct BuildSpec {
    /// Host folder sent as the build context.
    pub(crate) context: PathBuf,
    /// Dockerfile path relative to the context (forward slashes), as the Engine API wants it.
    pub(crate) dockerfile: String,
    /// When the Dockerfile lives outside the context, its host path (yolo adds it to the tar).
    pub(crate) dockerfile_outside: Option<PathBuf>,
    pub(crate) args: BTreeMap<String, String>,
    pub(crate) target: Option<String>,
    /// `--platform` of `build.options` (left out of the hash when unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) platform: Option<String>,
    pub(crate) cache_from: Vec<String>,
    pub(crate) labels: BTreeMap<String, String>,
    /// Deterministic tag, e.g. `yolo-myrepo-<devcontainerId prefix>:latest`.
    pub(crate) tag: String,
    /// The user's extra CA certificates the build trusts (`ca`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) extra_ca: Option<Box<BuildCa>>,
}

/// The user's extra CA certificates in a build.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct BuildCa {
    /// Their fingerprints (what the build hash sees).
    pub(crate) fingerprints: Vec<String>,
    /// Their files, `(path in the context, content)`: added to the context, with the Dockerfile
    /// rewritten to use them (`ca::rewrite_dockerfile`).
    #[serde(skip)]
    pub(crate) files: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct Mount {
    pub(crate) kind: MountKind,
    /// Host path (bind), volume name (volume), empty (tmpfs).
    pub(crate) source: String,
    pub(crate) target: String,
    pub(crate) read_only: bool,
}

/// A path of the workspace bound over itself in the container: read-only (a protected path) or
/// read-write (a folder on the way to one, bound so it cannot be renamed away).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Protected {
    pub(crate) host: PathBuf,
    pub(crate) target: String,
    pub(crate) read_only: bool,
    /// Absent on the host: created as an empty folder before the container (a mount point must
    /// exist, and the agent must not be the one to create it). Not part of the config hash: it
    /// flips once the first `up` made the folder, and the container is no less current for it.
    #[serde(skip)]
    pub(crate) create_dir: bool,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum MountKind {
    Bind,
    Volume,
    Tmpfs,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub(crate) struct Limits {
    pub(crate) cpus: f64,
    pub(crate) memory_bytes: i64,
    pub(crate) pids: i64,
}

/// Who set a limit: yolo's default, the repository, or the user (config or flag).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Chooser {
    #[default]
    Default,
    Repository,
    User,
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
pub(crate) struct PortPublish {
    /// Port on the host's 127.0.0.1.
    pub(crate) host: u16,
    pub(crate) container: u16,
}

/// One `forwardPorts` entry naming a Compose sibling (`RunSpec::relays`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct SiblingPort {
    /// The property that asked, for notes (`forwardPorts[1]`).
    pub(crate) property: String,
    pub(crate) host: String,
    pub(crate) port: u16,
}

/// The lifecycle hooks that run in the container, each a list: the spec collects a hook from
/// every metadata entry (the image's label, each Feature, devcontainer.json last) and runs them
/// all, in that order.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub(crate) struct Hooks {
    pub(crate) on_create: Vec<Hook>,
    pub(crate) update_content: Vec<Hook>,
    pub(crate) post_create: Vec<Hook>,
    pub(crate) post_start: Vec<Hook>,
    pub(crate) post_attach: Vec<Hook>,
}

/// One hook's command and where it came from.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Hook {
    /// `None`: devcontainer.json's own; else a short name of the image label entry or Feature
    /// that asked (`policy::metadata`), shown in the hook's output and audit name.
    pub(crate) origin: Option<String>,
    pub(crate) command: LifecycleCommand,
}

impl Hook {
    /// The commands to run, each with its name for output and the audit log: the property
    /// (`postCreateCommand`, `postCreateCommand:key` for the object form), followed by the
    /// origin in parentheses when not devcontainer.json's.
    pub(crate) fn commands(&self, property: &str) -> Vec<(String, Vec<String>)> {
        let mut commands = self.command.commands(property);
        if let Some(origin) = &self.origin {
            for (name, _) in &mut commands {
                *name = format!("{name} ({origin})");
            }
        }
        commands
    }
}

/// The volume holding a workspace's copy: `yolo-workspace-<devcontainerId>`.
pub(crate) fn workspace_volume(devcontainer_id: &str) -> String {
    format!("yolo-workspace-{devcontainer_id}")
}

/// The volume the guard writes its events to with a remote engine: `yolo-events-<id>`.
pub(crate) fn events_volume(devcontainer_id: &str) -> String {
    format!("yolo-events-{devcontainer_id}")
}

impl RunSpec {
    /// Whether this spec runs on a copy of the repository in its volume (a named session, or
    /// any with a remote engine).
    pub(crate) fn uses_copy(&self) -> bool {
        self.workspace_mount.kind == MountKind::Volume
            && self.workspace_mount.source == workspace_volume(&self.devcontainer_id)
    }
}
