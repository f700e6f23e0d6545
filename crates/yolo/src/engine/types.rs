//! The values engine/ hands out and takes in, in yolo's words: what it found (`Container`,
//! `ContainerDetails`, `Report`) and how a container joins a network (`NetworkAttach`). They
//! stand in for bollard's models, which never leave engine/.

use crate::firewall::NetworkMode;
use crate::run_spec::RunSpec;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Which workspace and devcontainer.json yolo's objects belong to: what `Engine::find` matches
/// and what the labels of everything made for the project name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) workspace: PathBuf,
    pub(crate) config_file: PathBuf,
    /// `${devcontainerId}` of the two.
    pub(crate) devcontainer_id: String,
}

impl Owner {
    pub(crate) fn of(spec: &RunSpec) -> Owner {
        Owner {
            workspace: spec.workspace.clone(),
            config_file: spec.config_file.clone(),
            devcontainer_id: spec.devcontainer_id.clone(),
        }
    }
}

/// What a yolo container is for (label `dev.yolo.role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The project container the agent works in.
    Agent,
    /// The firewall guard that owns the agent's network namespace.
    Guard,
    /// Another service of the project's Compose config (not the agent's).
    Service,
}

impl Role {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Guard => "guard",
            Role::Service => "service",
        }
    }

    pub(crate) fn from_label(text: &str) -> Option<Role> {
        match text {
            "agent" => Some(Role::Agent),
            "guard" => Some(Role::Guard),
            "service" => Some(Role::Service),
            _ => None,
        }
    }
}

/// A yolo container as listed by the engine, running or not.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Container {
    pub(crate) id: String,
    /// Without Docker's leading `/`.
    pub(crate) name: String,
    pub(crate) role: Role,
    pub(crate) running: bool,
    /// Docker's state word: created, running, exited, ...
    pub(crate) state: String,
    /// Docker's own words, e.g. "Up 3 minutes".
    pub(crate) status: String,
    pub(crate) image: String,
    /// The devcontainerId it was made for (`dev.yolo.id`).
    pub(crate) devcontainer_id: Option<String>,
    /// The host folder it was made for (`devcontainer.local_folder`).
    pub(crate) workspace: Option<String>,
    /// The devcontainer.json it was made from (`devcontainer.config_file`).
    pub(crate) config_file: Option<String>,
    /// The named session it belongs to (`dev.yolo.copy`; agents only).
    pub(crate) copy: Option<String>,
    /// Hash of the config it was made from (`dev.yolo.config-hash`; agents only).
    pub(crate) config_hash: Option<String>,
    /// The network mode it was made for (`dev.yolo.network`; agents only). None when the label
    /// is missing or unknown.
    pub(crate) network: Option<NetworkMode>,
    /// Named volumes mounted in it.
    pub(crate) volumes: Vec<String>,
    /// The ports it publishes now (host side on 127.0.0.1), as Docker reports them: the
    /// guard's, which publishes the agent's ports. Empty when it is not running.
    pub(crate) ports: Vec<crate::run_spec::PortPublish>,
}

/// yolo's containers for one workspace and config file.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Found {
    pub(crate) agent: Option<Container>,
    pub(crate) guard: Option<Container>,
}

/// A network yolo made (label `dev.yolo.managed`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProjectNetwork {
    pub(crate) id: String,
    pub(crate) name: String,
    /// The devcontainerId it was made for (`dev.yolo.id`).
    pub(crate) devcontainer_id: Option<String>,
    /// How many containers are attached to it now (a stopped one is not).
    pub(crate) attached: usize,
}

/// Everything yolo made for one workspace, found by its labels (`dev.yolo.id`) whatever
/// yolo's state file says: containers in any state and of any role, networks, volumes.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Made {
    pub(crate) containers: Vec<Container>,
    pub(crate) networks: Vec<ProjectNetwork>,
    /// Named volumes labelled for the workspace.
    pub(crate) volumes: Vec<String>,
}

/// What inspecting one container tells (what `up`, `exec` and `status` need of it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ContainerDetails {
    pub(crate) running: bool,
    /// Paused (`docker pause`, or a checkpoint's pause left behind): running, but no exec.
    pub(crate) paused: bool,
    pub(crate) exit_code: i64,
    /// When the current (or last) start happened, in Docker's RFC 3339 text.
    pub(crate) started_at: String,
    /// The container's environment (image and `containerEnv`).
    pub(crate) env: BTreeMap<String, String>,
    /// The container's configured user; None when unset.
    pub(crate) user: Option<String>,
    /// CPU limit in cores, memory limit in bytes, process limit, as set on the container.
    pub(crate) cpus: Option<f64>,
    pub(crate) memory_bytes: Option<i64>,
    pub(crate) pids: Option<i64>,
    /// Its commands start through the exec audit's shim (`dev.yolo.exec-audit`).
    pub(crate) supervised: bool,
    /// The devcontainerId whose agent it is (`dev.yolo.id` on a container yolo made with
    /// `dev.yolo.role=agent`); None for any other container.
    pub(crate) agent_of: Option<String>,
}

/// How a container joins the network (Docker's network mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NetworkAttach {
    /// Into another container's network namespace (`container:<id>`): the agent into its
    /// guard's, so the guard's ruleset is the agent's.
    Container(String),
    /// Onto a named network: the guard onto the project's bridge.
    Network(String),
    /// No network but loopback (`--network none`).
    None,
}

impl NetworkAttach {
    /// Docker's `NetworkMode` value.
    pub(crate) fn mode(&self) -> String {
        match self {
            NetworkAttach::Container(id) => format!("container:{id}"),
            NetworkAttach::Network(name) => name.clone(),
            NetworkAttach::None => "none".into(),
        }
    }

    /// Ports can be published only by a container with a network namespace of its own.
    pub(crate) fn owns_namespace(&self) -> bool {
        matches!(self, NetworkAttach::Network(_))
    }
}

/// What the engine says about itself (`yolo doctor`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Report {
    pub(crate) version: String,
    pub(crate) api_version: String,
    pub(crate) os: String,
    pub(crate) arch: String,
    pub(crate) runtimes: Vec<String>,
    pub(crate) default_runtime: String,
    pub(crate) cgroup_driver: String,
    pub(crate) cgroup_version: String,
    /// Whether the kernel enforces process and memory limits (None: not reported).
    pub(crate) pids_limit: Option<bool>,
    pub(crate) memory_limit: Option<bool>,
    /// The engine machine's kernel release (`6.1.0-18-amd64`).
    pub(crate) kernel: String,
    pub(crate) host: HostFacts,
}

impl Report {
    /// The engine's runtime that serves GPU device requests (NVIDIA's), if it has one: what a
    /// `gpu` grant needs (`docker info`'s Runtimes).
    pub(crate) fn gpu_runtime(&self) -> Option<&str> {
        self.runtimes
            .iter()
            .map(String::as_str)
            .find(|r| r.contains("nvidia"))
    }

    /// Whether the engine's API is at least `major.minor`.
    pub(crate) fn api_at_least(&self, major: u32, minor: u32) -> bool {
        let mut parts = self
            .api_version
            .split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0));
        let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        (a, b) >= (major, minor)
    }

    /// Whether the kernel is at least `major.minor`; None when its release is unreadable.
    pub(crate) fn kernel_at_least(&self, major: u32, minor: u32) -> Option<bool> {
        kernel_at_least(&self.kernel, major, minor)
    }
}

/// Whether a kernel release (`6.1.0-18-amd64`) is at least `major.minor`; None when unreadable.
fn kernel_at_least(release: &str, major: u32, minor: u32) -> Option<bool> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let have_major: u32 = parts.next()?.parse().ok()?;
    let have_minor: u32 = parts.next()?.parse().ok()?;
    Some((have_major, have_minor) >= (major, minor))
}

/// What the engine's machine has, for fitting a container's limits to it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct HostFacts {
    /// Cores the engine sees (`NCPU`).
    pub(crate) cpus: i64,
    /// overlay2, btrfs, zfs, devicemapper, vfs...
    pub(crate) storage_driver: String,
    /// The file system under overlay2 ("xfs", "extfs"...), when the driver says.
    pub(crate) backing_fs: Option<String>,
}

impl HostFacts {
    /// Whether the storage driver can limit a container's writable layer (`storage-opt size`):
    /// overlay2 only on xfs (mounted with `pquota`, which the engine does not report, so a
    /// refusal is still possible), btrfs, zfs and devicemapper always.
    pub(crate) fn can_limit_disk(&self) -> bool {
        match self.storage_driver.as_str() {
            "overlay2" => self.backing_fs.as_deref() == Some("xfs"),
            "btrfs" | "zfs" | "devicemapper" => true,
            _ => false,
        }
    }

    /// The storage setup in words, for messages.
    pub(crate) fn storage(&self) -> String {
        match &self.backing_fs {
            Some(fs) => format!("{} on {fs}", self.storage_driver),
            None => self.storage_driver.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn kernel_releases_compare_by_major_and_minor() {
        assert_eq!(kernel_at_least("6.1.0-18-amd64", 5, 19), Some(true));
        assert_eq!(kernel_at_least("5.19.0", 5, 19), Some(true));
        assert_eq!(kernel_at_least("5.15.0-91-generic", 5, 19), Some(false));
        assert_eq!(kernel_at_least("4.19.0", 5, 19), Some(false));
        assert_eq!(kernel_at_least("", 5, 19), None);
    }

    use super::*;

    #[test]
    fn the_gpu_runtime_is_nvidias_among_the_engines() {
        let report = |runtimes: &[&str]| Report {
            version: "27".into(),
            api_version: "1.47".into(),
            os: "linux".into(),
            arch: "x86_64".into(),
            runtimes: runtimes.iter().map(|r| r.to_string()).collect(),
            default_runtime: "runc".into(),
            cgroup_driver: "systemd".into(),
            cgroup_version: "2".into(),
            pids_limit: None,
            memory_limit: None,
            kernel: "6.1.0".into(),
            host: HostFacts {
                cpus: 2,
                storage_driver: "overlay2".into(),
                backing_fs: None,
            },
        };
        assert_eq!(
            report(&["io.containerd.runc.v2", "runc"]).gpu_runtime(),
            None
        );
        assert_eq!(report(&["runc", "nvidia"]).gpu_runtime(), Some("nvidia"));
    }

    #[test]
    fn disk_limits_where_the_storage_driver_has_them() {
        let facts = |driver: &str, fs: Option<&str>| HostFacts {
            cpus: 2,
            storage_driver: driver.into(),
            backing_fs: fs.map(String::from),
        };
        assert!(facts("overlay2", Some("xfs")).can_limit_disk());
        assert!(!facts("overlay2", Some("extfs")).can_limit_disk());
        assert!(facts("btrfs", None).can_limit_disk());
        assert!(!facts("vfs", None).can_limit_disk());
        assert_eq!(
            facts("overlay2", Some("extfs")).storage(),
            "overlay2 on extfs"
        );
    }
}
