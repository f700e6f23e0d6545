//! The firewall guard container: its image (see `guard_image` for where the program comes
//! from), the per-project network, creation with only NET_ADMIN + NET_BIND_SERVICE, copying the
//! guard config in, and waiting until the guard says its ruleset is verified.

use super::exec::{ExecRequest, Output};
use super::guard_image::{self, GuardSource, Platform, GUARD_BINARY};
use super::hardening::{self, hardened_host_config, Hardening};
use super::types::{NetworkAttach, Owner, ProjectNetwork};
use super::{is_not_found, labels, message, Engine};
use crate::error::{Cause, Dependency, Error, Failure, Result};
use crate::run_spec::{Limits, Mount, MountKind, PortPublish};
use bollard::models::{ContainerCreateBody, HostConfig, NetworkCreateRequest};
use bollard::query_parameters::{
    BuildImageOptions, InspectNetworkOptions, ListImagesOptions, ListNetworksOptions, LogsOptions,
    RemoveImageOptions,
};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The guard image's base when the user names none: nothing, since the guard needs no program
/// or file from an image (it speaks netlink itself), so preparing the image pulls nothing.
pub(crate) const DEFAULT_BASE: &str = "scratch";
/// What `yolo-guard` prints on stdout once the ruleset is verified and DNS is listening.
const READY_LINE: &str = crate::firewall::GUARD_READY_LINE;
/// Where the guard writes network events (bind mount of a host folder).
pub(crate) const GUARD_LOG_DIR: &str = "/var/log/yolo";
/// Where the guard sees the workspace, read-only (`GuardSpec::workspace`).
pub(crate) const GUARD_WORKSPACE_DIR: &str = "/yolo/workspace";
const GUARD_CONFIG_PATH: &str = "/etc/yolo/guard.json";
/// GUARD_CONFIG_PATH's folder, where a guard made by this version has its host config folder.
const GUARD_CONFIG_DIR: &str = "/etc/yolo";
/// GUARD_CONFIG_PATH's file name.
const GUARD_CONFIG_FILE: &str = "guard.json";
/// Docker's bridge option for inter-container communication on one network.
const ICC: &str = "com.docker.network.bridge.enable_icc";
/// The guard's capabilities: its ruleset (NET_ADMIN), DNS on port 53 (NET_BIND_SERVICE), and
/// reading the agent's processes for the exec audit (SYS_PTRACE: `process_vm_readv`, a brief
/// `PTRACE_SEIZE` at each exec, `/proc/<pid>` of another container's processes).
const GUARD_CAPS: &[&str] = &["NET_ADMIN", "NET_BIND_SERVICE", "SYS_PTRACE"];
/// Added for a guard an image is built behind: its seal takes every queue of its interfaces
/// with an AF_XDP socket (NET_RAW) before the build, whose pages it pins (IPC_LOCK, so the
/// host's locked-memory limit for root is not the bound).
const BUILD_GUARD_CAPS: &[&str] = &["NET_RAW", "IPC_LOCK"];
/// The guard's own limits, whatever the project's: 1 CPU, 256 MiB, 256 processes.
const GUARD_LIMITS: Limits = Limits {
    cpus: 1.0,
    memory_bytes: 256 * 1024 * 1024,
    pids: 256,
};

/// The guard container of a project.
pub(crate) struct GuardSpec {
    pub(crate) name: String,
    pub(crate) image: String,
    /// The project's bridge network, which the guard joins (and the agent through it).
    pub(crate) network: String,
    pub(crate) owner: Owner,
    pub(crate) ports: Vec<PortPublish>,
    /// The agent shares the guard's /etc/hostname and /etc/hosts, so these go on the guard.
    pub(crate) hostname: Option<String>,
    pub(crate) extra_hosts: Vec<String>,
    /// Host folder mounted at GUARD_LOG_DIR.
    pub(crate) log_dir: PathBuf,
    /// A remote engine's: the volume mounted at GUARD_LOG_DIR instead of `log_dir`, which the
    /// CLI copies back (`remote_copy::collect_events`).
    pub(crate) events_volume: Option<String>,
    /// A remote engine's: the workspace copy's volume, mounted read-only at
    /// GUARD_WORKSPACE_DIR instead of `workspace` for the file watcher.
    pub(crate) workspace_volume: Option<String>,
    /// Host folder mounted read-only at the config's folder (`/etc/yolo`): the host writes the
    /// guard's config there before each start (`write_guard_config`), no copy into the
    /// container on the start's critical path.
    pub(crate) config_dir: Option<PathBuf>,
    /// The workspace's host folder, mounted read-only at GUARD_WORKSPACE_DIR for the file
    /// watcher (always, since the guard outlives one session's settings).
    pub(crate) workspace: Option<PathBuf>,
    /// `[limits] required`: the guard's own limits dropped by the engine fail its creation.
    pub(crate) limits_required: bool,
    /// `network` is the bridge other projects' guards share: said to the guard in its
    /// environment (`yolo_protocol::SHARED_BRIDGE_ENV`), which a build it cannot seal fails.
    pub(crate) shared_bridge: bool,
    /// An image is built behind it first (its RUN steps share its namespace).
    pub(crate) builds: bool,
    /// The spare network namespace it joins (`engine::spares`, its id) instead of being
    /// attached to `network` itself; then it has no ports, hostname or extra hosts (those are
    /// the namespace owner's).
    pub(crate) netns: Option<String>,
}

impl Engine {
    /// The OS and architecture of the engine's daemon (where the guard will run).
    async fn platform(&self) -> Result<Platform> {
        let version = self.version().await?;
        Ok(Platform {
            os: version.os.unwrap_or_else(|| "linux".into()),
            arch: version.arch.unwrap_or_default(),
        })
    }

    /// The guard image: the user's, or built once per yolo version and guard digest (again
    /// when the base image setting changed).
    pub(crate) async fn ensure_guard_image(
        &self,
        base: &str,
        configured: Option<&str>,
    ) -> Result<String> {
        let platform = self.platform().await?;
        let source =
            guard_image::select(configured, &guard_image::Carried::this_build(), &platform)?;
        let tag = guard_image::tag(&source);
        if let GuardSource::Configured(_) = source {
            return Ok(tag);
        }
        if let Ok(img) = self.docker.inspect_image(&tag).await {
            let current = img
                .config
                .and_then(|c| c.labels)
                .and_then(|l| l.get(labels::GUARD_BASE).cloned());
            if current.as_deref() == Some(base) {
                return Ok(tag);
            }
        }
        let Some(tar) = guard_image::context(&source)? else {
            return Ok(tag);
        };
        // Once more when the image store changed under the build: another build or a removal
        // of the same layers at the same moment (two first `up`s on one machine) makes the
        // engine lose a layer it was about to reuse. Nothing else is tried again.
        let mut attempts = 0;
        loop {
            attempts += 1;
            match self
                .build_guard_image(&tag, base, &source, tar.clone())
                .await
            {
                Err(e) if attempts < 2 && super::images::cache_vanished(&e.to_string()) => continue,
                other => break other?,
            }
        }
        self.remove_stale_guard_images(&tag).await;
        Ok(tag)
    }

    /// One build of the guard image `tag` from `tar` (its context).
    async fn build_guard_image(
        &self,
        tag: &str,
        base: &str,
        source: &GuardSource,
        tar: Vec<u8>,
    ) -> Result<()> {
        let options = BuildImageOptions {
            t: Some(tag.to_string()),
            buildargs: Some(HashMap::from([("BASE".to_string(), base.to_string())])),
            labels: Some(labels::guard_image(base).into_iter().collect()),
            rm: true,
            forcerm: true,
            ..Default::default()
        };
        let bar =
            super::images::spinner(&format!("building the firewall guard image {tag} (once)"));
        let mut stream =
            self.docker
                .build_image(options, None, Some(bollard::body_full(tar.into())));
        let mut tail = Vec::new();
        while let Some(item) = stream.next().await {
            let info = item.map_err(|e| {
                bar.finish_and_clear();
                Error::docker("building the guard image", message(&e))
            })?;
            if let Some(detail) = info.error_detail {
                bar.finish_and_clear();
                return Err(Error::Docker {
                    action: format!("building the guard image {tag} from {base}"),
                    message: detail.message.unwrap_or_default(),
                    hint: Some(build_hint(source).into()),
                }
                .with_lines("last output", tail));
            }
            if let Some(line) = info
                .stream
                .as_deref()
                .map(str::trim)
                .filter(|l| !l.is_empty())
            {
                bar.set_message(format!("building {tag}: {line}"));
                tail.push(console::strip_ansi_codes(line).into_owned());
                if tail.len() > 15 {
                    tail.remove(0);
                }
            }
        }
        bar.finish_and_clear();
        Ok(())
    }

    /// Remove the guard images older binaries and bases left behind (`guard_image::stale`).
    /// Best effort: whatever fails stays, and without force Docker keeps an image a container
    /// still uses (a guard that has not been recreated yet).
    async fn remove_stale_guard_images(&self, tag: &str) {
        let Some(built) = self.docker.inspect_image(tag).await.ok().and_then(|i| i.id) else {
            return;
        };
        let options = ListImagesOptions {
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![labels::GUARD_BASE.to_string()],
            )])),
            ..Default::default()
        };
        let Ok(listed) = self.docker.list_images(Some(options)).await else {
            return;
        };
        let images: Vec<guard_image::ListedImage> = listed
            .into_iter()
            .map(|i| guard_image::ListedImage {
                id: i.id,
                tags: i.repo_tags,
                labels: i.labels.into_iter().collect(),
            })
            .collect();
        for name in guard_image::stale(&built, tag, &labels::guard_image_marks(), &images) {
            let _ = self
                .docker
                .remove_image(&name, None::<RemoveImageOptions>, None)
                .await;
        }
    }

    /// The project's own bridge network (isolated from other projects' by Docker), where the
    /// shared one cannot be made (Podman has no switch for inter-container communication).
    pub(crate) async fn ensure_network(&self, name: &str, owner: &Owner) -> Result<()> {
        match self
            .docker
            .inspect_network(name, None::<InspectNetworkOptions>)
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if is_not_found(&e) => {}
            Err(e) => {
                let message = message(&e);
                // Docker lets two networks share a name; then it finds neither by it.
                let hint = message.contains("ambiguous").then(|| {
                    "more than one network has this name (left by an older yolo); `yolo down --remove` removes them".to_string()
                });
                return Err(Error::Docker {
                    action: format!("inspecting network {name}"),
                    message,
                    hint,
                });
            }
        }
        let request = NetworkCreateRequest {
            name: name.to_string(),
            driver: Some("bridge".into()),
            labels: Some(labels::project(owner).into_iter().collect()),
            ..Default::default()
        };
        match self.create_network(request).await {
            Ok(()) => Ok(()),
            // Created concurrently by another yolo: fine.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) => Ok(()),
            Err(e) => Err(Error::docker(
                format!("creating network {name}"),
                message(&e),
            )),
        }
    }

    /// Create a network, trying again while the engine trips over another network's interface
    /// going away under it: Docker and Podman list the host's interfaces to pick a free subnet,
    /// and one removed meanwhile (another session's `down`) fails the create with "no such
    /// network interface". Twenty sessions starting and stopping at once meet it.
    async fn create_network(
        &self,
        request: NetworkCreateRequest,
    ) -> std::result::Result<(), bollard::errors::Error> {
        let mut tries = 0;
        loop {
            match self.docker.create_network(request.clone()).await {
                Err(e) if tries < 8 && message(&e).contains("no such network interface") => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100 * tries)).await;
                }
                other => return other.map(|_| ()),
            }
        }
    }

    /// The bridge network every project's guard is on (docs/architecture.md, "One network for
    /// all guards"): made once, with inter-container communication off, so one project's
    /// containers cannot reach another's. A network of that name that lets its containers talk
    /// to each other, or is not a bridge, is refused rather than joined. Docker (API 1.41)
    /// lets two networks share a name, so two yolos making it at once take a lock first.
    pub(crate) async fn ensure_shared_network(&self, name: &str) -> Result<()> {
        if self.check_shared_network(name).await? {
            return Ok(());
        }
        let _lock = crate::lock::acquire_network(name).await?;
        if self.check_shared_network(name).await? {
            return Ok(());
        }
        let request = NetworkCreateRequest {
            name: name.to_string(),
            driver: Some("bridge".into()),
            options: Some(HashMap::from([(ICC.to_string(), "false".to_string())])),
            labels: Some(labels::shared_network().into_iter().collect()),
            ..Default::default()
        };
        match self.create_network(request).await {
            Ok(()) => Ok(()),
            Err(e) => Err(Error::docker(
                format!("creating network {name}"),
                message(&e),
            )),
        }
    }

    /// Whether the shared network is there (false: to be made); an error when a network of
    /// its name would let projects reach each other.
    async fn check_shared_network(&self, name: &str) -> Result<bool> {
        let network = match self
            .docker
            .inspect_network(name, None::<InspectNetworkOptions>)
            .await
        {
            Ok(network) => network,
            Err(e) if is_not_found(&e) => return Ok(false),
            Err(e) => {
                let message = message(&e);
                let hint = message.contains("ambiguous").then(|| {
                    format!("more than one network is named {name}; remove the ones no container uses with `docker network rm <id>`")
                });
                return Err(Error::Docker {
                    action: format!("inspecting network {name}"),
                    message,
                    hint,
                });
            }
        };
        let icc = network
            .options
            .as_ref()
            .and_then(|o| o.get(ICC))
            .map(String::as_str);
        // IPv6 on it would let neighbour discovery (which the guard's input accepts) run
        // between projects; an internal one has no way out.
        let ipv6 = network.enable_ipv6.unwrap_or(false);
        let internal = network.internal.unwrap_or(false);
        if network.driver.as_deref() != Some("bridge") || icc != Some("false") || ipv6 || internal {
            return Err(Error::dependency(Dependency::GuardNetwork, format!(
                "the network {name} is not one yolo made (driver {}, {ICC} {}, IPv6 {ipv6}, internal {internal}), and yolo puts every project's guard on it; remove it with `docker network rm {name}`, or name another network in [firewall] docker_network",
                network.driver.as_deref().unwrap_or("none"),
                icc.unwrap_or("not set"),
            )));
        }
        Ok(true)
    }

    /// yolo's networks carrying `label_filters`, with the containers attached now.
    pub(crate) async fn networks(&self, label_filters: Vec<String>) -> Result<Vec<ProjectNetwork>> {
        let options = ListNetworksOptions {
            filters: Some(HashMap::from([("label".to_string(), label_filters)])),
        };
        let listed = self
            .docker
            .list_networks(Some(options))
            .await
            .map_err(|e| Error::docker("listing networks", message(&e)))?;
        let mut out = Vec::new();
        for n in listed {
            let id = n.id.unwrap_or_default();
            // The list leaves out the attached containers; a network gone meanwhile is skipped.
            let Ok(inspected) = self
                .docker
                .inspect_network(&id, None::<InspectNetworkOptions>)
                .await
            else {
                continue;
            };
            out.push(ProjectNetwork {
                id,
                name: n.name.unwrap_or_default(),
                devcontainer_id: n.labels.and_then(|l| l.get(labels::ID).cloned()),
                attached: inspected.containers.map_or(0, |c| c.len()),
            });
        }
        Ok(out)
    }

    /// Remove a network by name or id; one already gone is fine.
    pub(crate) async fn remove_network(&self, name: &str) -> Result<()> {
        match self.docker.remove_network(name).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(Error::docker(
                format!("removing network {name}"),
                message(&e),
            )),
        }
    }

    /// Create the guard (not started); its program is baked into the image.
    pub(crate) async fn create_guard(&self, spec: &GuardSpec) -> Result<String> {
        let id = self
            .create(&spec.name, None, guard_body(spec))
            .await
            .map_err(|e| Error::docker(format!("creating the guard container {}", spec.name), e))?;
        self.check_limits(&id, &spec.name, &GUARD_LIMITS, spec.limits_required)
            .await?;
        Ok(id)
    }

    /// Write the guard's config; the guard reads it when it starts. Into `config_dir` (the host
    /// folder bound at the config's folder) when the guard has one and it is there; otherwise
    /// copied into the container (a guard made by an earlier version).
    pub(crate) async fn update_guard_config(
        &self,
        id: &str,
        config_dir: &Path,
        config_json: &str,
    ) -> Result<()> {
        if config_dir.is_dir() {
            // Whole or not at all: the guard may be read by a start right after.
            let path = config_dir.join(GUARD_CONFIG_FILE);
            let temp = config_dir.join(format!(".{GUARD_CONFIG_FILE}.{}", std::process::id()));
            std::fs::write(&temp, config_json).map_err(|e| Error::io(&temp, e))?;
            return std::fs::rename(&temp, &path).map_err(|e| Error::io(&path, e));
        }
        let pack = |e: std::io::Error| {
            Error::failed(Failure::Archive, Cause::of("packing the guard's config", e))
        };
        let mut tar = tar::Builder::new(Vec::new());
        let path = GUARD_CONFIG_PATH.trim_start_matches('/');
        guard_image::append(&mut tar, path, 0o644, config_json.as_bytes()).map_err(pack)?;
        let tar = tar.into_inner().map_err(pack)?;
        self.upload(
            id,
            "/",
            tar,
            "copying files into the guard container".into(),
        )
        .await
    }

    /// Wait for the guard's ready line; fail (closed) if it exits or takes too long.
    pub(crate) async fn wait_guard_ready(
        &self,
        id: &str,
        session: &str,
        timeout: Duration,
    ) -> Result<()> {
        // The ready line names the session the guard started with: a restarted guard's log
        // still holds the previous run's line, which must not let the agent start before the
        // new ruleset is in.
        let expected = format!("{READY_LINE} {session}");
        let options = LogsOptions {
            follow: true,
            stdout: true,
            stderr: true,
            tail: "all".into(),
            ..Default::default()
        };
        let mut logs = self.docker.logs(id, Some(options));
        let mut seen = Vec::new();
        let wait = async {
            while let Some(item) = logs.next().await {
                let Ok(chunk) = item else { break };
                for line in chunk.to_string().lines() {
                    if line.trim() == expected {
                        return true;
                    }
                    seen.push(line.trim_end().to_string());
                }
            }
            false
        };
        let ready = tokio::time::timeout(timeout, wait).await.unwrap_or(false);
        if ready {
            return Ok(());
        }
        Err(Error::dependency(
            Dependency::Guard,
            "the firewall guard did not become ready, so nothing of the agent was run (fail closed).",
        )
        .with_lines("guard output", seen))
    }

    /// Run `yolo-guard ctl '<json>'` in the guard and return its stdout, within `limit`.
    /// The fallback for engines whose host cannot reach the guard's socket in the log folder:
    /// the process runs in the PID namespace the agent shares, so the agent's root can stop or
    /// kill it (never forge its answer: it holds capabilities the agent lacks); the limit
    /// turns that into an error instead of a hang.
    pub(crate) async fn guard_ctl(
        &self,
        id: &str,
        request: &str,
        secret: bool,
        limit: Duration,
    ) -> Result<String> {
        // A request with secrets goes in the exec's environment, never its argv: the agent
        // shares the guard's PID namespace and reads every argv there.
        let req = if secret {
            ExecRequest {
                argv: vec![
                    GUARD_BINARY.into(),
                    "ctl".into(),
                    yolo_protocol::CTL_FROM_ENV.into(),
                ],
                env: vec![format!("{}={request}", yolo_protocol::CTL_REQUEST_ENV)],
                ..Default::default()
            }
        } else {
            ExecRequest {
                argv: vec![GUARD_BINARY.into(), "ctl".into(), request.into()],
                ..Default::default()
            }
        };
        let exec = self.exec(id, &req, Output::Capture);
        let result = tokio::time::timeout(limit, exec).await.map_err(|_| {
            Error::dependency(Dependency::Guard, format!(
                "the firewall guard did not answer within {} s (`docker exec {id} {GUARD_BINARY} ctl`); \
                 check it with `yolo status`, and `yolo up` restarts it",
                limit.as_secs_f64()
            ))
        })??;
        let text = String::from_utf8_lossy(&result.captured).into_owned();
        // 1: the guard answered and refused; the caller reads why from the answer.
        if !matches!(result.exit_code, 0 | 1) {
            return Err(Error::dependency(
                Dependency::Guard,
                format!(
                    "the firewall guard could not take the request: {}",
                    crate::visible::escape_controls(text.trim())
                ),
            ));
        }
        Ok(text)
    }
}

impl Engine {
    /// A container's name (without Docker's leading `/`).
    pub(crate) async fn container_name(&self, id: &str) -> Result<String> {
        let info = self.inspect_raw(id).await?;
        Ok(info
            .name
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string())
    }
}

/// What to check when the guard image does not build, by what it is built from.
fn build_hint(source: &GuardSource) -> &'static str {
    match source {
        GuardSource::FromSource => "this engine builds the guard from source: it must reach Docker Hub (the rust image and the base image) and crates.io; or set guard_image = \"...\" in your yolo config to a guard image prebuilt for this engine",
        GuardSource::Embedded | GuardSource::Configured(_) => "the guard image is the yolo-guard binary on guard_base_image (by default scratch, which needs nothing); if your yolo config sets guard_base_image, name an image that is present locally, or remove the key",
    }
}

fn guard_body(spec: &GuardSpec) -> ContainerCreateBody {
    // In a spare's namespace, these are the spare's (Docker refuses them on a joiner); a spec
    // with them is never given one (`bring_up::network::create_guard`).
    let own = spec.netns.is_none();
    let exposed = hardening::exposed(&spec.ports);
    let hardening = Hardening {
        cap_add: GUARD_CAPS
            .iter()
            .chain(if spec.builds { BUILD_GUARD_CAPS } else { &[] })
            .map(|c| c.to_string())
            .collect(),
        security_opt: vec![],
        limits: GUARD_LIMITS,
        // `yolo-guard` itself is PID 1 of the namespace the agent joins: the kernel keeps the
        // agent's root from killing, stopping or tracing it, and it reaps (see `init` there).
        init: false,
        network: match &spec.netns {
            Some(holder) => NetworkAttach::Container(holder.clone()),
            None => NetworkAttach::Network(spec.network.clone()),
        },
        ports: spec.ports.clone(),
    };
    let log_dir = match &spec.events_volume {
        Some(volume) => Mount {
            kind: MountKind::Volume,
            source: volume.clone(),
            target: GUARD_LOG_DIR.into(),
            read_only: false,
        },
        None => Mount {
            kind: MountKind::Bind,
            source: spec.log_dir.display().to_string(),
            target: GUARD_LOG_DIR.into(),
            read_only: false,
        },
    };
    let workspace = spec.workspace.as_ref().map(|dir| Mount {
        kind: MountKind::Bind,
        source: dir.display().to_string(),
        target: GUARD_WORKSPACE_DIR.into(),
        read_only: true,
    });
    let workspace = workspace.or_else(|| {
        spec.workspace_volume.as_ref().map(|volume| Mount {
            kind: MountKind::Volume,
            source: volume.clone(),
            target: GUARD_WORKSPACE_DIR.into(),
            read_only: true,
        })
    });
    let config_dir = spec.config_dir.as_ref().map(|dir| Mount {
        kind: MountKind::Bind,
        source: dir.display().to_string(),
        target: GUARD_CONFIG_DIR.into(),
        read_only: true,
    });
    let all: Vec<Mount> = std::iter::once(log_dir)
        .chain(workspace)
        .chain(config_dir)
        .collect();
    let (mounts, binds) = hardening::own_mounts(&all);
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        hostname: spec.hostname.clone().filter(|_| own),
        cmd: Some(vec![
            GUARD_BINARY.into(),
            "run".into(),
            "--config".into(),
            GUARD_CONFIG_PATH.into(),
        ]),
        entrypoint: Some(vec![]),
        env: {
            let env: Vec<String> = [
                spec.shared_bridge
                    .then(|| format!("{}=1", yolo_protocol::SHARED_BRIDGE_ENV)),
                spec.netns
                    .is_some()
                    .then(|| format!("{}=1", yolo_protocol::NETNS_HOLDER_ENV)),
            ]
            .into_iter()
            .flatten()
            .collect();
            (!env.is_empty()).then_some(env)
        },
        labels: Some(labels::guard(&spec.owner).into_iter().collect()),
        exposed_ports: (own && !exposed.is_empty()).then_some(exposed),
        host_config: Some(HostConfig {
            extra_hosts: (own && !spec.extra_hosts.is_empty()).then(|| spec.extra_hosts.clone()),
            mounts: Some(mounts),
            binds: Some(binds),
            ..hardened_host_config(&hardening)
        }),
        ..Default::default()
    }
}

/// The host folder bound read-only at the guard's config folder, made empty: one per guard
/// (`name`), under `root`. A guard container made with it reads the config the host writes
/// there (`Engine::update_guard_config`).
pub(crate) fn config_dir(root: &Path, name: &str) -> Result<PathBuf> {
    let dir = root.join("guards").join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    Ok(dir)
}

/// Where `config_dir` puts the folder of guard `name` (which may not be there).
pub(crate) fn config_dir_of(root: &Path, name: &str) -> PathBuf {
    root.join("guards").join(name)
}

/// The host folder for the guard's network events: writable by the guard's root, which has no
/// CAP_DAC_OVERRIDE (so it cannot write into a non-root user's 0755 folder).
pub(crate) fn log_dir(root: &Path) -> Result<PathBuf> {
    let dir = root.join("network");
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    // Unix modes mean nothing to a Windows host's folder that Docker Desktop shares.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777))
            .map_err(|e| Error::io(&dir, e))?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> GuardSpec {
        GuardSpec {
            name: "yolo-repo-0abc-guard".into(),
            image: "yolo-guard:1".into(),
            network: "yolo-repo-0abc-net".into(),
            owner: Owner {
                workspace: "/home/me/repo".into(),
                config_file: "/home/me/repo/.devcontainer/devcontainer.json".into(),
                devcontainer_id: "0abc".into(),
            },
            ports: vec![PortPublish {
                host: 18080,
                container: 8080,
            }],
            hostname: Some("box".into()),
            extra_hosts: vec!["db:192.0.2.1".into()],
            log_dir: "/data/network".into(),
            events_volume: None,
            workspace_volume: None,
            workspace: Some("/home/me/repo".into()),
            config_dir: Some("/home/me/.local/share/yolo/guards/g".into()),
            limits_required: true,
            shared_bridge: false,
            builds: false,
            netns: None,
        }
    }

    /// In a spare's namespace the guard asks for nothing a joiner may not have (Docker refuses
    /// the create), and keeps everything else of its own: caps, limits, mounts.
    #[test]
    fn a_guard_in_a_spares_namespace_joins_it_and_keeps_the_rest() {
        let joined = guard_body(&GuardSpec {
            netns: Some("holder1".into()),
            ..spec()
        });
        let host = joined.host_config.clone().unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("container:holder1"));
        assert_eq!(host.port_bindings, None);
        assert_eq!(host.extra_hosts, None);
        assert_eq!(joined.exposed_ports, None);
        assert_eq!(joined.hostname, None);
        let own = guard_body(&spec());
        let own_host = own.host_config.unwrap();
        assert_eq!(own_host.network_mode.as_deref(), Some("yolo-repo-0abc-net"));
        assert_eq!(host.cap_add, own_host.cap_add);
        assert_eq!(host.memory, own_host.memory);
        assert_eq!(hardening::mounted(&host), hardening::mounted(&own_host));
        assert_eq!(joined.labels, own.labels);
        // It holds its holder to the guard's life (`yolo_protocol::NETNS_HOLDER_ENV`).
        let holder_env = format!("{}=1", yolo_protocol::NETNS_HOLDER_ENV);
        assert!(joined.env.unwrap().contains(&holder_env));
        assert!(!own.env.unwrap_or_default().contains(&holder_env));
    }

    #[test]
    fn a_failed_guard_build_hints_at_what_its_source_needs() {
        let from_source = build_hint(&GuardSource::FromSource);
        for needed in ["Docker Hub", "rust", "crates.io", "guard_image"] {
            assert!(from_source.contains(needed), "{needed}: {from_source}");
        }
        assert!(!from_source.contains("nftables"), "{from_source}");
        let embedded = build_hint(&GuardSource::Embedded);
        assert!(embedded.contains("guard_base_image"), "{embedded}");
    }

    /// The host writes the config into a folder bound read-only where the guard reads it: no
    /// copy into the container before each start, and nothing in the guard can change it.
    #[test]
    fn the_guards_config_folder_is_bound_read_only() {
        let mounts = hardening::mounted(&guard_body(&spec()).host_config.unwrap());
        let config = mounts
            .iter()
            .find(|(_, target, _)| target == GUARD_CONFIG_DIR)
            .expect("config folder mounted");
        assert!(config.2, "read-only");
        assert_eq!(config.0, "/home/me/.local/share/yolo/guards/g");
        assert!(GUARD_CONFIG_PATH.starts_with(GUARD_CONFIG_DIR));
        assert!(GUARD_CONFIG_PATH.ends_with(GUARD_CONFIG_FILE));
    }

    #[test]
    fn the_guard_holds_only_its_three_capabilities_and_its_own_limits() {
        let host = guard_body(&spec()).host_config.unwrap();
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(
            host.cap_add,
            Some(vec![
                "NET_ADMIN".to_string(),
                "NET_BIND_SERVICE".to_string(),
                "SYS_PTRACE".to_string()
            ])
        );
        // A guard an image is built behind also holds the queues its RUN steps would use.
        let building = GuardSpec {
            builds: true,
            netns: None,
            ..spec()
        };
        let caps = guard_body(&building).host_config.unwrap().cap_add.unwrap();
        assert_eq!(
            caps,
            [
                "NET_ADMIN",
                "NET_BIND_SERVICE",
                "SYS_PTRACE",
                "NET_RAW",
                "IPC_LOCK"
            ]
        );
        assert_eq!(
            host.security_opt,
            Some(vec!["no-new-privileges:true".to_string()])
        );
        assert_eq!(host.init, Some(false));
        assert_eq!(host.memory, Some(256 * 1024 * 1024));
        assert_eq!(host.memory_swap, host.memory);
        assert_eq!(host.pids_limit, Some(256));
        assert_eq!(host.nano_cpus, Some(1_000_000_000));
        assert_eq!(host.privileged, None);
    }

    #[test]
    fn a_guard_on_the_shared_bridge_is_told_so_in_its_environment() {
        assert_eq!(guard_body(&spec()).env, None);
        let shared = GuardSpec {
            shared_bridge: true,
            ..spec()
        };
        assert_eq!(
            guard_body(&shared).env,
            Some(vec!["YOLO_SHARED_BRIDGE=1".to_string()])
        );
    }

    #[test]
    fn the_guard_owns_the_network_name_hosts_and_ports() {
        let body = guard_body(&spec());
        let host = body.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("yolo-repo-0abc-net"));
        assert_eq!(body.hostname.as_deref(), Some("box"));
        assert_eq!(host.extra_hosts, Some(vec!["db:192.0.2.1".to_string()]));
        let bindings = host.port_bindings.clone().unwrap();
        let binding = &bindings["8080/tcp"].as_ref().unwrap()[0];
        assert_eq!(binding.host_ip.as_deref(), Some("127.0.0.1"));
        assert_eq!(body.exposed_ports, Some(vec!["8080/tcp".to_string()]));
        let mounts = hardening::mounted(&host);
        assert_eq!(mounts.len(), 3);
        assert_eq!(
            mounts[0],
            ("/data/network".into(), GUARD_LOG_DIR.into(), false)
        );
        assert_eq!(
            mounts[1],
            ("/home/me/repo".into(), GUARD_WORKSPACE_DIR.into(), true)
        );
        let labels = body.labels.unwrap();
        assert_eq!(labels[labels::ROLE], "guard");
        assert_eq!(labels[labels::ID], "0abc");
        assert_eq!(
            body.cmd,
            Some(vec![
                GUARD_BINARY.to_string(),
                "run".into(),
                "--config".into(),
                GUARD_CONFIG_PATH.into()
            ])
        );
    }
}
