//! Creating, finding, starting, stopping and removing yolo's containers and volumes.

use super::hardening::{self, hardened_host_config, Hardening};
use super::types::{
    Container, ContainerDetails, Found, Made, NetworkAttach, Owner, ProjectNetwork, Role,
};
use super::{is_not_found, is_not_modified, labels, message, Engine};
use crate::error::{Dependency, Error, Result};
use crate::firewall::NetworkMode;
use crate::run_spec::{Limits, PortPublish, RunSpec};
use bollard::models::{
    ContainerCreateBody, ContainerSummary, DeviceMapping, HostConfig, ResourcesUlimits,
};
use bollard::query_parameters::{
    CreateContainerOptions, InspectContainerOptions, ListContainersOptions, ListVolumesOptions,
    LogsOptions, RemoveContainerOptions, RemoveVolumeOptions, StartContainerOptions,
    StopContainerOptions, WaitContainerOptions,
};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use yolo_protocol::SHIM_PATH;

use crate::policy::DEFAULT_CAPS;

/// The keep-alive command used when `overrideCommand` is true (the reference CLI's idea): it
/// exits cleanly on SIGTERM so `yolo down` is quick.
/// `entrypoints` (each a program that sets something up and returns, or execs its arguments)
/// run in order by a shell that then execs the command: `sh -c '<ep1>\n<ep2>\nexec "$@"' -
/// <entrypoint> <cmd>`. Unchanged without any.
pub(super) fn chain_entrypoints(
    entrypoints: &[String],
    entrypoint: Vec<String>,
    cmd: Vec<String>,
) -> (Vec<String>, Vec<String>) {
    if entrypoints.is_empty() {
        return (entrypoint, cmd);
    }
    let script = format!("{}\nexec \"$@\"", entrypoints.join("\n"));
    let chained = vec!["/bin/sh".into(), "-c".into(), script, "-".into()];
    (chained, entrypoint.into_iter().chain(cmd).collect())
}

pub(crate) fn keep_alive() -> Vec<String> {
    vec![
        "/bin/sh".into(),
        "-c".into(),
        "echo Container started; trap 'exit 0' TERM; while sleep 1000 & wait $!; do :; done".into(),
    ]
}

impl Engine {
    /// The agent and guard containers of a workspace + config file, running or not.
    pub(crate) async fn find(&self, owner: &Owner) -> Result<Found> {
        let mut found = Found::default();
        for c in self.list(labels::owned_by(owner)).await? {
            let slot = match c.role {
                Role::Agent => &mut found.agent,
                Role::Guard => &mut found.guard,
                Role::Service => continue,
            };
            if slot.is_none() {
                *slot = Some(c);
            }
        }
        Ok(found)
    }

    /// Remove `containers` (the agents first: one must never run on without its guard) and
    /// then `networks`, going on past a failure: what was removed, by name, and the failures.
    pub(crate) async fn remove_in_order(
        &self,
        mut containers: Vec<&Container>,
        networks: &[&ProjectNetwork],
    ) -> (Vec<String>, Vec<Error>) {
        containers.sort_by_key(|c| c.role != Role::Agent);
        let (mut removed, mut failed) = (Vec::new(), Vec::new());
        for c in containers {
            match self.remove(&c.id).await {
                Ok(()) => removed.push(c.name.clone()),
                Err(e) => failed.push(e),
            }
        }
        for n in networks {
            match self.remove_network(&n.id).await {
                Ok(()) => removed.push(format!("network {}", n.name)),
                Err(e) => failed.push(e),
            }
        }
        (removed, failed)
    }

    /// Remove the containers labelled for `owner` that have no role: the helpers that mount a
    /// copy's volume to fill or read it (`Engine::volume_helper`), one left by a yolo that was
    /// killed while it used it (it would keep the volume from being removed). Their names.
    pub(crate) async fn remove_helpers(&self, owner: &Owner) -> Result<Vec<String>> {
        let list = self.list_labelled(labels::owned_by(owner)).await?;
        let mut removed = Vec::new();
        for c in list {
            let roleless = c
                .labels
                .as_ref()
                .is_none_or(|l| !l.contains_key(labels::ROLE));
            if let (true, Some(id)) = (roleless, c.id) {
                self.remove(&id).await?;
                let name = c.names.unwrap_or_default().into_iter().next();
                removed.push(name.unwrap_or(id).trim_start_matches('/').to_string());
            }
        }
        Ok(removed)
    }

    /// Everything yolo made for `owner`'s workspace, by its labels: containers in any state,
    /// networks, volumes.
    pub(crate) async fn made_for(&self, owner: &Owner) -> Result<Made> {
        let filters = labels::owned_by(owner);
        let options = ListVolumesOptions {
            filters: Some(HashMap::from([("label".to_string(), filters.clone())])),
        };
        let volumes = self
            .docker
            .list_volumes(Some(options))
            .await
            .map_err(|e| Error::docker("listing volumes", message(&e)))?;
        Ok(Made {
            containers: self.list(filters.clone()).await?,
            networks: self.networks(filters).await?,
            volumes: volumes
                .volumes
                .unwrap_or_default()
                .into_iter()
                .map(|v| v.name)
                .collect(),
        })
    }

    /// All networks yolo made (every project's).
    pub(crate) async fn managed_networks(&self) -> Result<Vec<ProjectNetwork>> {
        self.networks(labels::managed()).await
    }

    /// All containers yolo manages (agents and guards of every project).
    pub(crate) async fn list_managed(&self) -> Result<Vec<Container>> {
        self.list(labels::managed()).await
    }

    async fn list(&self, label_filters: Vec<String>) -> Result<Vec<Container>> {
        let list = self.list_labelled(label_filters).await?;
        Ok(list.into_iter().filter_map(listed).collect())
    }

    /// The containers, in any state, carrying every label of `label_filters`, as the engine
    /// lists them (for `engine/`'s own reading).
    pub(super) async fn list_labelled(
        &self,
        label_filters: Vec<String>,
    ) -> Result<Vec<ContainerSummary>> {
        let options = ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([("label".to_string(), label_filters)])),
            ..Default::default()
        };
        self.docker
            .list_containers(Some(options))
            .await
            .map_err(|e| Error::docker("listing containers", message(&e)))
    }

    /// Everything the engine says of container `id` (a name or an id).
    pub(super) async fn inspect_raw(
        &self,
        id: &str,
    ) -> Result<bollard::models::ContainerInspectResponse> {
        self.docker
            .inspect_container(id, None::<InspectContainerOptions>)
            .await
            .map_err(|e| Error::docker(format!("inspecting container {id}"), message(&e)))
    }

    pub(crate) async fn inspect(&self, id: &str) -> Result<ContainerDetails> {
        let info = self.inspect_raw(id).await?;
        let state = info.state.unwrap_or_default();
        let config = info.config.unwrap_or_default();
        let host = info.host_config.unwrap_or_default();
        let label = |key: &str| config.labels.as_ref().and_then(|l| l.get(key)).cloned();
        let agent_of = (label(labels::MANAGED).as_deref() == Some("true")
            && label(labels::ROLE).as_deref() == Some(Role::Agent.label()))
        .then(|| label(labels::ID))
        .flatten();
        Ok(ContainerDetails {
            running: state.running.unwrap_or(false),
            paused: state.paused.unwrap_or(false),
            exit_code: state.exit_code.unwrap_or_default(),
            started_at: state.started_at.unwrap_or_default(),
            env: env_map(config.env.unwrap_or_default()),
            user: config.user.filter(|u| !u.is_empty()),
            cpus: host.nano_cpus.map(|n| n as f64 / 1e9),
            memory_bytes: host.memory,
            pids: host.pids_limit,
            supervised: config
                .labels
                .as_ref()
                .is_some_and(|l| l.get(labels::EXEC_AUDIT).is_some_and(|v| v == "shim")),
            agent_of,
        })
    }

    /// Create the agent container (not started), joined to `network`, labelled for `mode`; its
    /// id, and whether its first program is the shim's `start`, which waits for the guard's
    /// supervisor (so the container may be started before the guard is ready).
    /// A storage driver that refuses the writable-layer limit after all (overlay2 on xfs
    /// without `pquota`) gets the container without it, and a warning.
    pub(crate) async fn create_agent(
        &self,
        spec: &RunSpec,
        image: &str,
        network: &NetworkAttach,
        mode: NetworkMode,
    ) -> Result<(String, bool)> {
        let creating = || format!("creating container {}", spec.container_name);
        let shim = self.shim_plan(spec, image, network).await?;
        // Without the shim, the Features' entrypoints still run first.
        let chained = match (&shim, spec.entrypoints.is_empty()) {
            (None, false) => Some(self.start_command(spec, image).await?),
            _ => None,
        };
        let agent_body = |spec: &RunSpec| {
            agent_body(spec, image, network, mode, shim.as_ref(), chained.as_ref())
        };
        let body = agent_body(spec);
        let waits = shim.is_some();
        let id = match self
            .create(&spec.container_name, spec.platform.as_deref(), body)
            .await
        {
            Err(e) if spec.disk_bytes.is_some() && e.contains("storage-opt") => {
                eprintln!(
                    "{} the storage driver refused a disk limit ({e}); the container's writable layer is not limited",
                    console::style("warning:").yellow().bold()
                );
                let unlimited = RunSpec {
                    disk_bytes: None,
                    ..spec.clone()
                };
                let body = agent_body(&unlimited);
                self.create(&spec.container_name, spec.platform.as_deref(), body)
                    .await
                    .map_err(|e| Error::docker(creating(), e))
            }
            other => other.map_err(|e| Error::docker(creating(), e)),
        }?;
        self.check_limits(
            &id,
            &spec.container_name,
            &spec.limits,
            spec.limits_required,
        )
        .await?;
        Ok((id, waits))
    }

    /// Read back the CPU, memory and process limits of the container just made: an engine
    /// that cannot enforce one may drop it without an error (rootless Podman on cgroup v1 and
    /// Docker on a kernel without the controller create the container with none). Required
    /// (`[limits] required`, the default), a dropped limit removes the container and fails;
    /// otherwise it is a warning. One inspect, whatever the engine: the check is of what the
    /// engine recorded, not of which engine it is.
    pub(super) async fn check_limits(
        &self,
        id: &str,
        name: &str,
        limits: &Limits,
        required: bool,
    ) -> Result<()> {
        let host = self.inspect_raw(id).await?.host_config.unwrap_or_default();
        let dropped = hardening::dropped_limits(&host, limits);
        if dropped.is_empty() {
            return Ok(());
        }
        let list = match dropped.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => String::new(),
        };
        let what = format!(
            "the engine made {name} without its {list} limit{}",
            if dropped.len() > 1 { "s" } else { "" }
        );
        if required {
            // The reason first, whatever the removal says: the container is not started.
            let left = match self.remove(id).await {
                Ok(()) => String::new(),
                Err(e) => format!(
                    "\n  (and {name} could not be removed: {e}; `yolo down --remove` removes it)"
                ),
            };
            return Err(Error::dependency(Dependency::Limits, format!(
                "{what} (rootless Podman on cgroup v1, or without the cgroup controllers delegated to your user, drops them without an error); \
                 yolo does not run an agent unlimited unless told to. Give the engine the controllers (docs/podman.md, \"Limits\"), or set `required = false` under [limits] in {} to run without them{left}",
                crate::user_config::UserConfig::path().display()
            )));
        }
        eprintln!(
            "{} {what}; running without (`[limits] required = false`)",
            console::style("warning:").yellow().bold()
        );
        Ok(())
    }

    /// How the agent starts through the exec audit's shim; `None` without the audit or without
    /// a guard to register with (`--network none`).
    async fn shim_plan(
        &self,
        spec: &RunSpec,
        image: &str,
        network: &NetworkAttach,
    ) -> Result<Option<ShimPlan>> {
        if !spec.exec_audit || !matches!(network, NetworkAttach::Container(_)) {
            return Ok(None);
        }
        let host_path = super::guard_image::shim_dir()?;
        // A remote engine cannot bind the host folder: the shim goes in a volume.
        let volume = match spec.remote_engine {
            true => Some(
                self.shim_volume(&host_path, &spec.devcontainer_id, image)
                    .await?,
            ),
            false => None,
        };
        let (entrypoint, cmd) = self.start_command(spec, image).await?;
        Ok(Some(ShimPlan {
            host_path,
            volume,
            entrypoint,
            cmd,
            proc_readonly: self.read_only_proc_is_safe().await,
        }))
    }

    /// What the agent container runs: yolo's keep-alive (`overrideCommand`, the default) or
    /// the image's entrypoint and command, with the `entrypoint`s of the image metadata
    /// (Features) run first, in order, as the reference CLI does.
    async fn start_command(
        &self,
        spec: &RunSpec,
        image: &str,
    ) -> Result<(Vec<String>, Vec<String>)> {
        let (entrypoint, cmd) = if spec.override_command {
            (vec![], keep_alive())
        } else {
            // An entrypoint given at create replaces the image's command too: both are named.
            let config = self
                .docker
                .inspect_image(image)
                .await
                .map_err(|e| Error::docker(format!("inspecting image {image}"), message(&e)))?
                .config
                .unwrap_or_default();
            (
                config.entrypoint.unwrap_or_default(),
                config.cmd.unwrap_or_default(),
            )
        };
        if entrypoint.is_empty() && cmd.is_empty() {
            return Err(Error::dependency(Dependency::Image, format!(
                "the image {image} names no command to run and the config sets `overrideCommand: false`; give the image a CMD or remove the setting"
            )));
        }
        Ok(chain_entrypoints(&spec.entrypoints, entrypoint, cmd))
    }

    /// Create a container; the error is Docker's message.
    pub(super) async fn create(
        &self,
        name: &str,
        platform: Option<&str>,
        body: ContainerCreateBody,
    ) -> Result<String, String> {
        let options = CreateContainerOptions {
            name: Some(name.to_string()),
            // The agent's `--platform`; the guard runs on the engine's own.
            platform: platform.unwrap_or_default().to_string(),
        };
        match self.docker.create_container(Some(options), body).await {
            Ok(r) => Ok(r.id),
            Err(e) => Err(message(&e)),
        }
    }

    pub(crate) async fn start(&self, id: &str) -> Result<()> {
        self.docker
            .start_container(id, None::<StartContainerOptions>)
            .await
            .map_err(|e| Error::docker(format!("starting container {id}"), message(&e)))
    }

    /// Freeze every process of container `id` (the cgroup freezer) until [`Engine::unpause`].
    pub(crate) async fn pause(&self, id: &str) -> Result<()> {
        self.docker
            .pause_container(id)
            .await
            .map_err(|e| Error::docker(format!("pausing container {id}"), message(&e)))
    }

    pub(crate) async fn unpause(&self, id: &str) -> Result<()> {
        self.docker
            .unpause_container(id)
            .await
            .map_err(|e| Error::docker(format!("unpausing container {id}"), message(&e)))
    }

    pub(crate) async fn stop(&self, id: &str) -> Result<()> {
        let options = StopContainerOptions {
            t: Some(5),
            ..Default::default()
        };
        match self.docker.stop_container(id, Some(options)).await {
            Ok(()) => Ok(()),
            // Gone, or stopped already.
            Err(e) if is_not_found(&e) || is_not_modified(&e) => Ok(()),
            Err(e) => Err(Error::docker(
                format!("stopping container {id}"),
                message(&e),
            )),
        }
    }

    pub(crate) async fn remove(&self, id: &str) -> Result<()> {
        self.remove_container(id, false).await
    }

    /// Remove a container; with `anonymous_volumes`, the volumes its image's `VOLUME`s made
    /// with it (a named volume is never removed so).
    pub(crate) async fn remove_container(&self, id: &str, anonymous_volumes: bool) -> Result<()> {
        let options = RemoveContainerOptions {
            force: true,
            v: anonymous_volumes,
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

    /// Create a named volume of the project with yolo's labels; an existing volume is kept
    /// as it is.
    pub(crate) async fn create_volume(&self, name: &str, devcontainer_id: &str) -> Result<()> {
        let options = bollard::models::VolumeCreateRequest {
            name: Some(name.to_string()),
            labels: Some(labels::volume(devcontainer_id).into_iter().collect()),
            ..Default::default()
        };
        self.docker
            .create_volume(options)
            .await
            .map(|_| ())
            .map_err(|e| Error::docker(format!("creating volume {name}"), message(&e)))
    }

    pub(crate) async fn remove_volume(&self, name: &str) -> Result<()> {
        match self
            .docker
            .remove_volume(name, None::<RemoveVolumeOptions>)
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

    /// Whether the container is stopped or stops within `timeout`. Docker may record that a
    /// container stopped a moment after a command exec'd in it was killed with it.
    pub(crate) async fn stops_within(&self, id: &str, timeout: Duration) -> bool {
        use futures_util::StreamExt;
        let mut wait = self
            .docker
            .wait_container(id, Some(WaitContainerOptions::default()));
        match tokio::time::timeout(timeout, wait.next()).await {
            Ok(Some(Ok(_))) => true,
            // It stopped with a non-zero exit code.
            Ok(Some(Err(bollard::errors::Error::DockerContainerWaitError { .. }))) => true,
            _ => false,
        }
    }

    /// The last `lines` lines a container printed (empty when they cannot be read).
    pub(crate) async fn logs_tail(&self, id: &str, lines: usize) -> Vec<String> {
        use futures_util::StreamExt;
        let options = LogsOptions {
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

/// A listed container in yolo's words; None for one without a role yolo knows (VS Code's own
/// container for the same folder, say).
fn listed(c: ContainerSummary) -> Option<Container> {
    let labels = c.labels.unwrap_or_default();
    let role = labels.get(labels::ROLE).and_then(|r| Role::from_label(r))?;
    let state = c.state.map(|s| s.to_string()).unwrap_or_default();
    let name = c.names.unwrap_or_default().into_iter().next();
    let volumes = c
        .mounts
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.typ.as_deref() == Some("volume"))
        .filter_map(|m| m.name)
        .collect();
    let mut ports: Vec<PortPublish> = c
        .ports
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| {
            Some(PortPublish {
                host: p.public_port?,
                container: p.private_port,
            })
        })
        .collect();
    // Docker lists a binding once per address family.
    ports.sort_by_key(|p| (p.container, p.host));
    ports.dedup();
    Some(Container {
        id: c.id.unwrap_or_default(),
        name: name.unwrap_or_default().trim_start_matches('/').to_string(),
        role,
        running: state == "running",
        state,
        status: c.status.unwrap_or_default(),
        image: c.image.unwrap_or_default(),
        devcontainer_id: labels.get(labels::ID).cloned(),
        workspace: labels
            .get(labels::LOCAL_FOLDER)
            .filter(|w| !w.is_empty())
            .or_else(|| labels.get(labels::COPY_OF))
            .cloned(),
        config_file: labels
            .get(labels::CONFIG_FILE)
            .filter(|c| !c.is_empty())
            .or_else(|| labels.get(labels::COPY_CONFIG))
            .cloned(),
        // Only a name yolo could have given (an image's label is the repository's).
        copy: labels
            .get(labels::COPY)
            .filter(|c| crate::cli::is_copy_name(c))
            .cloned(),
        config_hash: labels.get(labels::CONFIG_HASH).cloned(),
        network: labels
            .get(labels::NETWORK)
            .and_then(|n| labels::network_mode(n)),
        volumes,
        ports,
    })
}

/// `K=V` lines to a map (a line without `=` is dropped).
fn env_map(list: Vec<String>) -> BTreeMap<String, String> {
    list.into_iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// How the agent container starts through the exec audit's shim (`Engine::shim_plan`).
pub(crate) struct ShimPlan {
    /// The shim's folder on the host, mounted read-only as the folder of `SHIM_PATH`.
    host_path: std::path::PathBuf,
    /// With a remote engine, the volume holding the shim, mounted instead of `host_path`.
    volume: Option<String>,
    /// What the shim then runs: the image's entrypoint and command, or yolo's keep-alive.
    entrypoint: Vec<String>,
    cmd: Vec<String>,
    /// Mount the agent's `/proc` read-only ([`PROC_READONLY`]).
    proc_readonly: bool,
}

/// The agent's read-only `/proc` paths: Docker's own list with `/proc` itself first. One
/// process of the agent cannot then write another's memory through `/proc/<pid>/mem` (a write
/// open fails with EROFS), which is how a launcher would change a program's arguments after the
/// exec supervisor recorded them; the filter refuses the other two ways (`process_vm_writev`,
/// ptrace's writes). Docker's list is repeated because setting the field replaces it.
pub(crate) const PROC_READONLY: [&str; 6] = [
    "/proc",
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

fn agent_body(
    spec: &RunSpec,
    image: &str,
    network: &NetworkAttach,
    mode: NetworkMode,
    shim: Option<&ShimPlan>,
    chained: Option<&(Vec<String>, Vec<String>)>,
) -> ContainerCreateBody {
    let env: Vec<String> = spec
        .container_env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let (entrypoint, cmd) = match shim {
        // The shim first: the filter is on before the container's first program, which waits
        // for the guard's supervisor (`start`; see `yolo-guard`'s `exec::shim`).
        Some(plan) => {
            let mut entrypoint = vec![SHIM_PATH.to_string(), "start".into()];
            entrypoint.extend(plan.entrypoint.iter().cloned());
            (Some(entrypoint), Some(plan.cmd.clone()))
        }
        None => match chained {
            Some((entrypoint, cmd)) => (Some(entrypoint.clone()), Some(cmd.clone())),
            None => {
                let cmd = spec.override_command.then(keep_alive);
                (cmd.as_ref().map(|_| vec![]), cmd)
            }
        },
    };
    let mut labels = labels::agent(spec, mode);
    if shim.is_some() {
        labels.insert(labels::EXEC_AUDIT.into(), "shim".into());
    }
    // A container in another's network namespace takes that one's name, hosts and ports.
    let own_namespace = network.owns_namespace();
    let exposed = hardening::exposed(&spec.ports);
    ContainerCreateBody {
        image: Some(image.to_string()),
        // No image HEALTHCHECK: Docker would run it in the container by itself, around the
        // exec audit's shim, and from the container's start (before the guard is ready).
        healthcheck: Some(bollard::models::HealthConfig {
            test: Some(vec!["NONE".into()]),
            ..Default::default()
        }),
        user: spec.container_user.clone(),
        env: Some(env),
        labels: Some(labels.into_iter().collect()),
        entrypoint,
        cmd,
        working_dir: None,
        hostname: spec.hostname.clone().filter(|_| own_namespace),
        exposed_ports: (own_namespace && !exposed.is_empty()).then_some(exposed),
        host_config: Some(agent_host_config(spec, network, shim)),
        ..Default::default()
    }
}

fn agent_host_config(
    spec: &RunSpec,
    network: &NetworkAttach,
    shim: Option<&ShimPlan>,
) -> HostConfig {
    let mut cap_add: Vec<String> = DEFAULT_CAPS.iter().map(|c| c.to_string()).collect();
    cap_add.extend(spec.cap_add.iter().cloned());
    let hardening = Hardening {
        cap_add,
        security_opt: spec.security_opt.clone(),
        limits: spec.limits,
        // With the shim, the guard (PID 1 of the namespace joined below) reaps; an init of the
        // agent's own would be a process without the exec filter.
        init: spec.init && shim.is_none(),
        network: network.clone(),
        ports: spec.ports.clone(),
    };
    let mut own = vec![spec.workspace_mount.clone()];
    // Docker mounts parents before children, so these land over the workspace bind.
    let protected: Vec<crate::run_spec::Mount> = spec
        .protected
        .iter()
        .map(|p| crate::run_spec::Mount {
            kind: crate::run_spec::MountKind::Bind,
            source: p.host.to_string_lossy().into_owned(),
            target: p.target.clone(),
            read_only: p.read_only,
        })
        .collect();
    // A copy's protected paths are on the engine's machine, checked there (`protect_copy`):
    // whether this machine has the same paths says nothing, so they are always mounts (which
    // fail rather than make a missing source), as a real remote engine gets them.
    let on_engine = spec.uses_copy();
    if !on_engine {
        own.extend(protected.iter().cloned());
    }
    if let Some(plan) = shim {
        let (kind, source) = match &plan.volume {
            Some(volume) => (crate::run_spec::MountKind::Volume, volume.clone()),
            None => (
                crate::run_spec::MountKind::Bind,
                plan.host_path.to_string_lossy().into_owned(),
            ),
        };
        own.push(crate::run_spec::Mount {
            kind,
            source,
            target: super::guard_image::shim_mount_point().into(),
            read_only: true,
        });
    }
    let (mut mounts, binds) = hardening::own_mounts(&own);
    if on_engine {
        mounts.extend(protected.iter().map(hardening::mount));
    }
    mounts.extend(spec.mounts.iter().map(hardening::mount));
    // The guard's PID namespace as well as its network: the exec supervisor is its PID 1
    // (notifications then carry pids it can read), and the guard's end ends every process
    // of the agent. A granted `--pid host` keeps the host's.
    let pid_mode = match (spec.host_modes.get("pid"), network) {
        (Some(mode), _) => Some(mode.clone()),
        (None, NetworkAttach::Container(guard)) => Some(format!("container:{guard}")),
        (None, _) => None,
    };
    HostConfig {
        mounts: Some(mounts),
        binds: Some(binds),
        privileged: Some(spec.privileged),
        pid_mode,
        ipc_mode: spec.host_modes.get("ipc").cloned(),
        uts_mode: spec.host_modes.get("uts").cloned(),
        userns_mode: spec.host_modes.get("userns").cloned(),
        extra_hosts: (!spec.extra_hosts.is_empty() && network.owns_namespace())
            .then(|| spec.extra_hosts.clone()),
        shm_size: spec.shm_size,
        ulimits: (!spec.ulimits.is_empty()).then(|| {
            spec.ulimits
                .iter()
                .map(|u| ResourcesUlimits {
                    name: Some(u.name.clone()),
                    soft: Some(u.soft),
                    hard: Some(u.hard),
                })
                .collect()
        }),
        sysctls: (!spec.sysctls.is_empty()).then(|| spec.sysctls.clone().into_iter().collect()),
        storage_opt: spec
            .disk_bytes
            .map(|bytes| HashMap::from([("size".to_string(), bytes.to_string())])),
        devices: (!spec.devices.is_empty())
            .then(|| spec.devices.iter().map(|d| device(d)).collect()),
        device_requests: spec.gpus.as_ref().map(|gpus| vec![gpu_request(gpus)]),
        readonly_paths: shim
            .filter(|plan| plan.proc_readonly)
            .map(|_| PROC_READONLY.iter().map(|p| p.to_string()).collect()),
        ..hardened_host_config(&hardening)
    }
}

/// `--gpus`: the device request `docker run --gpus` makes (the `gpu` capability, which the
/// engine hands to the runtime that claims it, NVIDIA's). `-1` is the engine's "all".
fn gpu_request(gpus: &crate::run_spec::Gpus) -> bollard::models::DeviceRequest {
    let count = match gpus {
        crate::run_spec::Gpus::All => -1,
        crate::run_spec::Gpus::Count(n) => i64::from(*n),
    };
    bollard::models::DeviceRequest {
        driver: Some(String::new()),
        count: Some(count),
        capabilities: Some(vec![vec!["gpu".to_string()]]),
        ..Default::default()
    }
}

/// `--device HOST[:CONTAINER[:PERMISSIONS]]`.
fn device(text: &str) -> DeviceMapping {
    let mut parts = text.split(':');
    let host = parts.next().unwrap_or_default().to_string();
    let container = parts
        .next()
        .map(str::to_string)
        .unwrap_or_else(|| host.clone());
    let perms = parts.next().unwrap_or("rwm").to_string();
    DeviceMapping {
        path_on_host: Some(host),
        path_in_container: Some(container),
        cgroup_permissions: Some(perms),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::run_spec::{Hooks, ImageSource, Limits, Mount, MountKind, PortPublish};

    #[test]
    fn granted_gpus_are_the_engines_device_request() {
        let mut spec = spec();
        let none = agent_host_config(&spec, &NetworkAttach::None, None);
        assert!(none.device_requests.is_none());
        spec.gpus = Some(crate::run_spec::Gpus::Count(2));
        let host = agent_host_config(&spec, &NetworkAttach::None, None);
        let requests = host.device_requests.unwrap();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].count, Some(2));
        assert_eq!(
            requests[0].capabilities,
            Some(vec![vec!["gpu".to_string()]])
        );
        spec.gpus = Some(crate::run_spec::Gpus::All);
        let host = agent_host_config(&spec, &NetworkAttach::None, None);
        assert_eq!(host.device_requests.unwrap()[0].count, Some(-1));
    }

    pub(in crate::engine) fn spec() -> RunSpec {
        let bind = |source: &str, target: &str| Mount {
            kind: MountKind::Bind,
            source: source.into(),
            target: target.into(),
            read_only: false,
        };
        RunSpec {
            workspace: "/home/me/repo".into(),
            config_file: "/home/me/repo/.devcontainer/devcontainer.json".into(),
            devcontainer_id: "0abc".into(),
            copy: None,
            remote_engine: false,
            container_name: "yolo-repo-0abc".into(),
            image: ImageSource::Image("debian:bookworm-slim".into()),
            container_env: BTreeMap::from([("A".into(), "1".into())]),
            remote_env: BTreeMap::new(),
            container_user: Some("dev".into()),
            remote_user: None,
            update_uid: None,
            override_command: true,
            user_env_probe: Default::default(),
            extra_ca: Vec::new(),
            workspace_mount: bind("/home/me/repo", "/workspace"),
            workspace_folder: "/workspace".into(),
            protected: vec![],
            mounts: vec![Mount {
                kind: MountKind::Volume,
                source: "cache".into(),
                target: "/cache".into(),
                read_only: true,
            }],
            cap_add: vec!["SYS_PTRACE".into()],
            privileged: false,
            security_opt: vec![],
            limits: Limits::default(),
            cpus_chosen_by: Default::default(),
            disk_bytes: Some(1 << 30),
            limits_required: true,
            ports: vec![PortPublish {
                host: 18080,
                container: 8080,
            }],
            relays: Vec::new(),
            labels: BTreeMap::from([
                ("team".into(), "core".into()),
                (labels::LOCAL_FOLDER.into(), "/elsewhere".into()),
            ]),
            hostname: Some("box".into()),
            extra_hosts: vec!["db:192.0.2.1".into()],
            host_modes: BTreeMap::from([("pid".into(), "host".into())]),
            devices: vec!["/dev/fuse".into()],
            hooks: Hooks::default(),
            entrypoints: Vec::new(),
            metadata_label: String::new(),
            initialize_command: None,
            config_hash: "h".into(),
            grants_used: vec![],
            shutdown_action: "stopContainer".into(),
            firewall_allow: vec![],
            firewall_presets: vec![],
            default_agent: None,
            init: true,
            shm_size: None,
            compose: None,
            exec_audit: true,
            ulimits: vec![],
            sysctls: BTreeMap::new(),
            platform: None,
            env_files: vec![],
            notes: vec![],
            declined: vec![],
            gpus: None,
        }
    }

    /// With the exec audit the shim is the container's first program, read-only, the agent
    /// joins the guard's PID namespace and runs no init of its own.
    /// An image's HEALTHCHECK would be run by Docker inside the agent's container, around the
    /// shim, from its start on: it is switched off.
    #[test]
    fn the_images_healthcheck_is_switched_off() {
        let guard = NetworkAttach::Container("g1".into());
        let body = agent_body(&spec(), "img", &guard, NetworkMode::Firewall, None, None);
        assert_eq!(
            body.healthcheck.and_then(|h| h.test),
            Some(vec!["NONE".to_string()])
        );
    }

    #[test]
    fn with_the_exec_audit_the_shim_starts_the_agent_in_the_guards_pid_namespace() {
        let guard = NetworkAttach::Container("g1".into());
        let mut own_pid = spec();
        own_pid.host_modes.remove("pid");
        let plan = ShimPlan {
            host_path: "/data/bin/shim-abc".into(),
            volume: None,
            entrypoint: vec!["/docker-entrypoint.sh".into()],
            cmd: vec!["serve".into()],
            proc_readonly: true,
        };
        let body = agent_body(
            &own_pid,
            "img",
            &guard,
            NetworkMode::Firewall,
            Some(&plan),
            None,
        );
        assert_eq!(
            body.entrypoint,
            Some(vec![
                SHIM_PATH.to_string(),
                "start".into(),
                "/docker-entrypoint.sh".into()
            ])
        );
        assert_eq!(body.cmd, Some(vec!["serve".to_string()]));
        assert_eq!(body.labels.unwrap()[labels::EXEC_AUDIT], "shim");
        let host = body.host_config.unwrap();
        assert_eq!(host.pid_mode.as_deref(), Some("container:g1"));
        assert_eq!(host.init, Some(false));
        let mounts = hardening::mounted(&host);
        // Its folder, not the file: a mount point cannot be renamed away and replaced.
        let shim = mounts
            .iter()
            .find(|(_, target, _)| target == "/.yolo")
            .expect("the shim's folder is mounted");
        assert!(shim.2, "read-only");
        assert_eq!(shim.0, "/data/bin/shim-abc");
        // Without the shim, a granted host PID namespace stays the host's.
        let host = agent_body(&spec(), "img", &guard, NetworkMode::Firewall, None, None)
            .host_config
            .unwrap();
        assert_eq!(host.pid_mode.as_deref(), Some("host"));
    }

    #[test]
    fn the_agent_is_labelled_so_vs_code_and_yolo_find_it() {
        let guard = NetworkAttach::Container("g1".into());
        let body = agent_body(&spec(), "img", &guard, NetworkMode::Firewall, None, None);
        let labels = body.labels.unwrap();
        for (key, value) in [
            ("devcontainer.local_folder", "/home/me/repo"),
            (
                "devcontainer.config_file",
                "/home/me/repo/.devcontainer/devcontainer.json",
            ),
            ("dev.yolo.managed", "true"),
            ("dev.yolo.id", "0abc"),
            ("dev.yolo.config-hash", "h"),
            ("dev.yolo.role", "agent"),
            ("dev.yolo.network", "firewall"),
            // The repository's own label stays; yolo's keys win over a planted one.
            ("team", "core"),
        ] {
            assert_eq!(labels.get(key).map(String::as_str), Some(value), "{key}");
        }
    }

    #[test]
    fn the_agent_joins_its_guard_hardened_with_only_its_grants_added() {
        let guard = NetworkAttach::Container("g1".into());
        let body = agent_body(&spec(), "img", &guard, NetworkMode::Firewall, None, None);
        let host = body.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("container:g1"));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
        let caps = host.cap_add.clone().unwrap();
        assert_eq!(caps.len(), DEFAULT_CAPS.len() + 1);
        assert!(caps.contains(&"SYS_PTRACE".to_string()));
        assert_eq!(
            host.security_opt,
            Some(vec!["no-new-privileges:true".to_string()])
        );
        assert_eq!(host.memory_swap, host.memory);
        assert_eq!(host.privileged, Some(false));
        assert_eq!(host.pid_mode.as_deref(), Some("host"));
        assert_eq!(host.devices.as_ref().map(|d| d.len()), Some(1));
        let disk = host.storage_opt.clone().unwrap_or_default();
        assert_eq!(disk.get("size").map(String::as_str), Some("1073741824"));
        let mounts = hardening::mounted(&host);
        assert_eq!(mounts[0].1, "/workspace");
        assert!(!mounts[0].2);
        assert_eq!(mounts[1], ("cache".into(), "/cache".into(), true));
        // Name, hosts and ports belong to the guard, whose namespace the agent shares.
        assert_eq!(body.hostname, None);
        assert_eq!(host.extra_hosts, None);
        assert_eq!(host.port_bindings, None);
        assert_eq!(body.exposed_ports, None);
        let labels = body.labels.unwrap();
        assert_eq!(labels[labels::ROLE], "agent");
        assert_eq!(labels[labels::NETWORK], "firewall");
        assert_eq!(labels[labels::MANAGED], "true");
        assert_eq!(body.cmd, Some(keep_alive()));
        assert_eq!(body.entrypoint, Some(vec![]));
        assert_eq!(body.user.as_deref(), Some("dev"));
        assert_eq!(body.env, Some(vec!["A=1".to_string()]));
    }

    #[test]
    fn feature_entrypoints_run_first_then_the_command() {
        let (entrypoint, cmd) = chain_entrypoints(&[], vec!["/e".into()], vec!["c".into()]);
        assert_eq!(
            (entrypoint, cmd),
            (vec!["/e".to_string()], vec!["c".to_string()])
        );
        let eps = [
            "/usr/local/share/docker-init.sh".to_string(),
            "/b.sh".into(),
        ];
        let (entrypoint, cmd) = chain_entrypoints(&eps, vec![], keep_alive());
        assert_eq!(
            entrypoint,
            [
                "/bin/sh",
                "-c",
                "/usr/local/share/docker-init.sh\n/b.sh\nexec \"$@\"",
                "-"
            ]
        );
        assert_eq!(cmd, keep_alive());
        let mut spec = spec();
        spec.entrypoints = eps.to_vec();
        let chained = chain_entrypoints(&eps, vec!["/e".into()], vec!["c".into()]);
        let body = agent_body(
            &spec,
            "img",
            &NetworkAttach::None,
            NetworkMode::None,
            None,
            Some(&chained),
        );
        assert_eq!(body.entrypoint.unwrap()[0], "/bin/sh");
        assert_eq!(body.cmd.unwrap(), ["/e", "c"]);
    }

    #[test]
    fn without_network_the_agent_has_none() {
        let body = agent_body(
            &spec(),
            "img",
            &NetworkAttach::None,
            NetworkMode::None,
            None,
            None,
        );
        let host = body.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        assert_eq!(host.port_bindings, None);
        assert_eq!(body.labels.unwrap()[labels::NETWORK], "none");
    }

    #[test]
    fn a_device_reads_host_container_and_permissions() {
        let d = device("/dev/sda:/dev/xvda:r");
        assert_eq!(d.path_on_host.as_deref(), Some("/dev/sda"));
        assert_eq!(d.path_in_container.as_deref(), Some("/dev/xvda"));
        assert_eq!(d.cgroup_permissions.as_deref(), Some("r"));
        let d = device("/dev/fuse");
        assert_eq!(d.path_in_container.as_deref(), Some("/dev/fuse"));
        assert_eq!(d.cgroup_permissions.as_deref(), Some("rwm"));
    }

    #[test]
    fn a_listed_container_reads_its_labels_and_volumes() {
        let summary = ContainerSummary {
            id: Some("c1".into()),
            names: Some(vec!["/yolo-repo-0abc".into()]),
            image: Some("img".into()),
            state: Some(bollard::models::ContainerSummaryStateEnum::RUNNING),
            status: Some("Up 3 minutes".into()),
            labels: Some(HashMap::from([
                (labels::ROLE.into(), "agent".into()),
                (labels::NETWORK.into(), "open".into()),
                (labels::CONFIG_HASH.into(), "h".into()),
                (labels::ID.into(), "0abc".into()),
            ])),
            mounts: Some(vec![
                bollard::models::MountPoint {
                    typ: Some("volume".into()),
                    name: Some("cache".into()),
                    ..Default::default()
                },
                bollard::models::MountPoint {
                    typ: Some("bind".into()),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        };
        let c = listed(summary.clone()).unwrap();
        assert_eq!(c.name, "yolo-repo-0abc");
        assert_eq!((c.role, c.running), (Role::Agent, true));
        assert_eq!(c.state, "running");
        assert_eq!(c.network, Some(NetworkMode::Open));
        assert_eq!(c.config_hash.as_deref(), Some("h"));
        assert_eq!(c.devcontainer_id.as_deref(), Some("0abc"));
        assert_eq!(c.volumes, ["cache"]);
        // Without yolo's role (VS Code's own container for the folder): not yolo's.
        let mut other = summary;
        other.labels.as_mut().unwrap().remove(labels::ROLE);
        assert_eq!(listed(other), None);
    }
}
