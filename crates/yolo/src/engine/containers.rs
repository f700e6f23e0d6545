//! Creating, finding, starting, stopping and removing yolo's containers.

use super::{is_not_found, labels, message, Engine};
use crate::error::{Error, Result};
use crate::run_spec::{MountKind, RunSpec};
use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, ContainerSummary, HostConfig, Mount, MountType,
    PortBinding,
};
use bollard::query_parameters::{
    CreateContainerOptions, InspectContainerOptions, ListContainersOptions, RemoveContainerOptions,
    StartContainerOptions, StopContainerOptions,
};
use std::collections::HashMap;
use std::path::Path;

/// Capabilities an ordinary dev container needs, added back after dropping all. Each one is
/// justified in docs/security-model.md. Not in the list (Docker gives them by default): NET_RAW
/// (raw sockets: packet crafting), MKNOD, SETFCAP, SETPCAP, SYS_CHROOT, AUDIT_WRITE,
/// NET_BIND_SERVICE (Docker lets unprivileged users bind low ports in containers anyway).
pub const DEFAULT_CAPS: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
];

/// The keep-alive command used when `overrideCommand` is true (the reference CLI's idea): it
/// exits cleanly on SIGTERM so `yolo down` is quick.
pub fn keep_alive() -> Vec<String> {
    vec![
        "/bin/sh".into(),
        "-c".into(),
        "echo Container started; trap 'exit 0' TERM; while sleep 1000 & wait $!; do :; done".into(),
    ]
}

/// How the container joins the network.
#[derive(Debug, Clone, Default)]
pub struct Network {
    /// `container:<guard>` once the firewall owns the namespace; None = Docker's default bridge.
    pub mode: Option<String>,
    /// Whether to publish ports on this container (not when it joins another's namespace).
    pub publish: bool,
    /// Value of the `dev.yolo.network` label.
    pub label: String,
}

impl Engine {
    /// yolo's container for a workspace + config file, running or not.
    pub async fn find_container(
        &self,
        workspace: &Path,
        config_file: &Path,
        role: &str,
    ) -> Result<Option<ContainerSummary>> {
        let filters = HashMap::from([(
            "label".to_string(),
            vec![
                format!("{}={}", labels::LOCAL_FOLDER, workspace.display()),
                format!("{}={}", labels::CONFIG_FILE, config_file.display()),
                format!("{}={role}", labels::ROLE),
            ],
        )]);
        let options = ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        };
        let list = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|e| Error::docker("listing containers", message(&e)))?;
        Ok(list.into_iter().next())
    }

    /// All containers yolo manages.
    pub async fn list_managed(&self) -> Result<Vec<ContainerSummary>> {
        let filters = HashMap::from([(
            "label".to_string(),
            vec![format!("{}=true", labels::MANAGED)],
        )]);
        let options = ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        };
        self.docker
            .list_containers(Some(options))
            .await
            .map_err(|e| Error::docker("listing containers", message(&e)))
    }

    pub async fn inspect(&self, id: &str) -> Result<ContainerInspectResponse> {
        self.docker
            .inspect_container(id, None::<InspectContainerOptions>)
            .await
            .map_err(|e| Error::docker(format!("inspecting container {id}"), message(&e)))
    }

    pub async fn create_container(
        &self,
        spec: &RunSpec,
        image: &str,
        network: &Network,
    ) -> Result<String> {
        let body = container_body(spec, image, network);
        let options = CreateContainerOptions {
            name: Some(spec.container_name.clone()),
            ..Default::default()
        };
        let created = self.docker.create_container(Some(options), body).await;
        match created {
            Ok(r) => Ok(r.id),
            Err(e) => Err(Error::docker(
                format!("creating container {}", spec.container_name),
                message(&e),
            )),
        }
    }

    pub async fn start(&self, id: &str) -> Result<()> {
        self.docker
            .start_container(id, None::<StartContainerOptions>)
            .await
            .map_err(|e| Error::docker(format!("starting container {id}"), message(&e)))
    }

    pub async fn stop(&self, id: &str) -> Result<()> {
        let options = StopContainerOptions {
            t: Some(5),
            ..Default::default()
        };
        match self.docker.stop_container(id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            // 304: already stopped.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 304, ..
            }) => Ok(()),
            Err(e) => Err(Error::docker(
                format!("stopping container {id}"),
                message(&e),
            )),
        }
    }

    pub async fn remove(&self, id: &str) -> Result<()> {
        let options = RemoveContainerOptions {
            force: true,
            v: false,
            ..Default::default()
        };
        match self.docker.remove_container(id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(Error::docker(
                format!("removing container {id}"),
                message(&e),
            )),
        }
    }

    pub async fn remove_volume(&self, name: &str) -> Result<()> {
        match self
            .docker
            .remove_volume(name, None::<bollard::query_parameters::RemoveVolumeOptions>)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(Error::docker(
                format!("removing volume {name}"),
                message(&e),
            )),
        }
    }
}

fn container_body(spec: &RunSpec, image: &str, network: &Network) -> ContainerCreateBody {
    let mut labels: HashMap<String, String> = spec.labels.clone().into_iter().collect();
    labels.insert(labels::ROLE.into(), "agent".into());
    labels.insert(labels::NETWORK.into(), network.label.clone());
    labels.extend(labels::extra());
    let env: Vec<String> = spec
        .container_env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let cmd = spec.override_command.then(keep_alive);
    let exposed: Vec<String> = spec
        .ports
        .iter()
        .map(|p| format!("{}/tcp", p.container))
        .collect();
    ContainerCreateBody {
        image: Some(image.to_string()),
        user: spec.container_user.clone(),
        env: Some(env),
        labels: Some(labels),
        entrypoint: cmd.as_ref().map(|_| vec![]),
        cmd,
        working_dir: None,
        hostname: if network.mode.is_some() {
            None
        } else {
            spec.hostname.clone()
        },
        exposed_ports: (network.publish && !exposed.is_empty()).then_some(exposed),
        host_config: Some(host_config(spec, network)),
        ..Default::default()
    }
}

fn host_config(spec: &RunSpec, network: &Network) -> HostConfig {
    let mut mounts = vec![to_mount(&spec.workspace_mount)];
    mounts.extend(spec.mounts.iter().map(to_mount));
    let mut cap_add: Vec<String> = DEFAULT_CAPS.iter().map(|c| c.to_string()).collect();
    cap_add.extend(spec.cap_add.iter().cloned());
    let mut security_opt = vec!["no-new-privileges:true".to_string()];
    security_opt.extend(spec.security_opt.iter().cloned());
    let port_bindings = network.publish.then(|| {
        spec.ports
            .iter()
            .map(|p| {
                let binding = PortBinding {
                    host_ip: Some("127.0.0.1".into()),
                    host_port: Some(p.host.to_string()),
                };
                (format!("{}/tcp", p.container), Some(vec![binding]))
            })
            .collect()
    });
    HostConfig {
        mounts: Some(mounts),
        cap_drop: Some(vec!["ALL".into()]),
        cap_add: Some(cap_add),
        security_opt: Some(security_opt),
        privileged: Some(spec.privileged),
        init: Some(spec.init),
        pids_limit: Some(spec.limits.pids),
        memory: Some(spec.limits.memory_bytes),
        // Equal to memory: no swap on top of the limit.
        memory_swap: Some(spec.limits.memory_bytes),
        nano_cpus: Some((spec.limits.cpus * 1e9) as i64),
        port_bindings,
        network_mode: network
            .mode
            .clone()
            .or_else(|| spec.host_modes.get("network").cloned()),
        pid_mode: spec.host_modes.get("pid").cloned(),
        ipc_mode: spec.host_modes.get("ipc").cloned(),
        uts_mode: spec.host_modes.get("uts").cloned(),
        userns_mode: spec.host_modes.get("userns").cloned(),
        extra_hosts: (!spec.extra_hosts.is_empty() && network.mode.is_none())
            .then(|| spec.extra_hosts.clone()),
        shm_size: spec.shm_size,
        devices: (!spec.devices.is_empty())
            .then(|| spec.devices.iter().map(|d| device(d)).collect()),
        ..Default::default()
    }
}

fn device(text: &str) -> bollard::models::DeviceMapping {
    let mut parts = text.split(':');
    let host = parts.next().unwrap_or_default().to_string();
    let container = parts
        .next()
        .map(str::to_string)
        .unwrap_or_else(|| host.clone());
    let perms = parts.next().unwrap_or("rwm").to_string();
    bollard::models::DeviceMapping {
        path_on_host: Some(host),
        path_in_container: Some(container),
        cgroup_permissions: Some(perms),
    }
}

fn to_mount(m: &crate::run_spec::Mount) -> Mount {
    let typ = match m.kind {
        MountKind::Bind => MountType::BIND,
        MountKind::Volume => MountType::VOLUME,
        MountKind::Tmpfs => MountType::TMPFS,
    };
    Mount {
        target: Some(m.target.clone()),
        source: (m.kind != MountKind::Tmpfs).then(|| m.source.clone()),
        typ: Some(typ),
        read_only: Some(m.read_only),
        ..Default::default()
    }
}

impl Engine {
    /// Create a named volume with labels; an existing volume is kept as it is.
    pub async fn create_volume(
        &self,
        name: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> Result<()> {
        let options = bollard::models::VolumeCreateRequest {
            name: Some(name.to_string()),
            labels: Some(labels.clone().into_iter().collect()),
            ..Default::default()
        };
        self.docker
            .create_volume(options)
            .await
            .map(|_| ())
            .map_err(|e| Error::docker(format!("creating volume {name}"), message(&e)))
    }
}

impl Engine {
    /// The last `lines` lines a container printed (empty when they cannot be read).
    pub async fn logs_tail(&self, id: &str, lines: usize) -> Vec<String> {
        use futures_util::StreamExt;
        let options = bollard::query_parameters::LogsOptions {
            stdout: true,
            stderr: true,
            tail: lines.to_string(),
            ..Default::default()
        };
        let mut out = Vec::new();
        let mut stream = self.docker.logs(id, Some(options));
        while let Some(Ok(chunk)) = stream.next().await {
            out.extend(chunk.to_string().lines().map(str::to_string));
        }
        out
    }
}

/// A listed container's id.
pub fn id_of(c: &ContainerSummary) -> String {
    c.id.clone().unwrap_or_default()
}

/// Whether a listed container is running.
pub fn is_running(c: &ContainerSummary) -> bool {
    c.state.as_ref().map(|s| s.to_string()).as_deref() == Some("running")
}
