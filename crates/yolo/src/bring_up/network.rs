//! The project's network side for `up`/`run`: the effective allowlist, the guard's config, and
//! bringing the guard up (verified) before the agent container may start.

use crate::agents::Agent;
use crate::audit::file_log_name;
use crate::engine::{log_dir, Engine, GuardSpec, Owner, GUARD_LOG_DIR, GUARD_WORKSPACE_DIR};
use crate::error::{Cause, Error, Failure, Result};
use crate::firewall::allowlist::Allowlist;
use crate::firewall::guard_socket;
use crate::firewall::{presets, FileWatch, GuardConfig, NetworkMode, GUARD_CONTROL_SOCKET};
use crate::project::Project;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use yolo_protocol::ExecAudit;

/// How long the guard may take from start to "ready" before yolo gives up (fail closed).
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// The merged allowlist: the agents' presets and domains, the repository's
/// `customizations.yolo.firewall`, the user's config and `--allow` flags (policy merged those
/// last three into the RunSpec). Every source was checked before (the repository's by policy,
/// the user's config and flags by `settings`, the built-in presets and agents by their tests),
/// so an error here is yolo's own bug.
pub(crate) fn allowlist(project: &Project, agents: &[Agent]) -> Result<Vec<String>> {
    let spec = &project.spec;
    let mut preset_names: Vec<String> = agents.iter().flat_map(|a| a.presets.clone()).collect();
    preset_names.extend(spec.firewall_presets.iter().cloned());
    let mut sources: Vec<Vec<String>> = Vec::new();
    for name in &preset_names {
        sources.push(presets::load(name).map_err(|m| Error::failed(Failure::Allowlist, m))?);
    }
    sources.push(agents.iter().flat_map(|a| a.domains.clone()).collect());
    sources.push(spec.firewall_allow.clone());
    let refs: Vec<&[String]> = sources.iter().map(Vec::as_slice).collect();
    let merged = Allowlist::merge(&refs)
        .map_err(|e| Error::failed(Failure::Allowlist, Cause::of("the merged allowlist", e)))?;
    Ok(merged.patterns())
}

/// What the guard allows while an image builds: the project's allowlist `allow` plus the
/// user's `[build]` presets and patterns. Only these additions are the build's own; the guard
/// is started again with `allow` alone before the agent joins it.
pub(crate) fn build_allowlist(project: &Project, allow: &[String]) -> Result<Vec<String>> {
    let build = &project.settings.build;
    let mut sources: Vec<Vec<String>> = vec![allow.to_vec()];
    for name in &build.presets {
        sources.push(presets::load(name).map_err(|m| Error::failed(Failure::Allowlist, m))?);
    }
    sources.push(build.allow.clone());
    let refs: Vec<&[String]> = sources.iter().map(Vec::as_slice).collect();
    let merged = Allowlist::merge(&refs)
        .map_err(|e| Error::failed(Failure::Allowlist, Cause::of("the build's allowlist", e)))?;
    Ok(merged.patterns())
}

/// The resolvers Docker gives a container on its default bridge: the host's nameservers without
/// the loopback ones (systemd-resolved's real list when the host points at its stub). Not
/// Docker's embedded DNS (127.0.0.11): it forwards from inside the container's own network
/// namespace, unmarked, so the firewall rightly drops its queries.
fn default_upstream() -> Vec<SocketAddr> {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let found = usable_nameservers(
        &read("/etc/resolv.conf"),
        &read("/run/systemd/resolve/resolv.conf"),
    );
    if found.is_empty() {
        eprintln!(
            "{} the host has no nameserver the guard can reach (only loopback ones); names will not resolve in the container until you set --upstream-dns or upstream_dns in your yolo config",
            console::style("warning:").yellow().bold()
        );
    }
    found
}

/// Nameservers from a resolv.conf, loopback ones dropped; the systemd one when the first has
/// nothing else.
pub(crate) fn usable_nameservers(
    etc_resolv_conf: &str,
    systemd_resolv_conf: &str,
) -> Vec<SocketAddr> {
    let usable = |text: &str| -> Vec<SocketAddr> {
        yolo_protocol::resolv_conf_nameservers(text)
            .into_iter()
            .filter(|a| !a.ip().is_loopback())
            .collect()
    };
    let found = usable(etc_resolv_conf);
    if found.is_empty() {
        usable(systemd_resolv_conf)
    } else {
        found
    }
}

pub(crate) fn guard_name(project: &Project) -> String {
    format!("{}-guard", project.spec.container_name)
}

/// The Docker network the project's guard is on: the user's choice; else the one every
/// project's guard shares (inter-container communication off), unless [`own_bridge_reason`]
/// gives the project one of its own.
pub(crate) fn network_name(engine: &Engine, project: &Project, builds: bool) -> Network {
    let named = project.settings.guard.docker_network.as_deref();
    network_for(engine, named, &project.spec, builds)
}

/// [`network_name`] for `spec`, with the user's `[firewall] docker_network`, `named`;
/// `builds`: an image is built behind the guard first.
fn network_for(
    engine: &Engine,
    named: Option<&str>,
    spec: &crate::run_spec::RunSpec,
    builds: bool,
) -> Network {
    match named {
        Some(name) => Network::Named(name.to_string()),
        None if own_bridge_reason(engine.is_podman(), spec, builds).is_some() => Network::Own(
            crate::devcontainer::names::own_network(&spec.container_name),
        ),
        None => Network::Shared(shared_network()),
    }
}

/// Why a project's guard gets a bridge of its own instead of the shared one, if it does. On the
/// shared bridge, isolation between projects rests on two things (docs/architecture.md, "One
/// network for all guards"): nothing in a guard's namespace holds NET_RAW, NET_ADMIN or a way
/// to them (so no frame is forged there), and each guard accepts its published ports from the
/// gateway alone. Where the first cannot hold, the project is alone on its segment, as before.
/// `builds`: an image is built behind the guard.
pub(crate) fn own_bridge_reason(
    podman: bool,
    spec: &crate::run_spec::RunSpec,
    builds: bool,
) -> Option<&'static str> {
    if builds {
        // RUN steps hold NET_RAW, which opens AF_XDP sockets: their frames leave through
        // `__dev_direct_xmit`, which no netdev egress hook sees, so no seal keeps them off the
        // segment (an attack run did it on Linux 6.18). Alone on it, they meet only the host.
        Some("an image is built behind the guard, whose RUN steps hold NET_RAW")
    } else if podman {
        Some("Podman cannot turn inter-container communication off")
    } else if spec.privileged
        || !spec.cap_add.is_empty()
        || !spec.devices.is_empty()
        || !spec.security_opt.is_empty()
    {
        // Not only NET_RAW and NET_ADMIN: SYS_PTRACE reaches the guard (the agent shares its
        // PID namespace) and through it NET_ADMIN, SYS_ADMIN reaches nearly anything; no
        // grant is judged harmless here.
        Some("the agent is granted capabilities, devices or security options beyond yolo's own set")
    } else if spec.compose.is_some() {
        // The dev service's capabilities come from the Compose files, read later, and the
        // guard runs the services' builds.
        Some("a Compose project")
    } else {
        None
    }
}

/// Which network the guard is on, and so how it is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Network {
    /// `[firewall] docker_network`: made (as the project's) if missing.
    Named(String),
    /// The project's own (`down --remove` deletes it).
    Own(String),
    /// The guards' shared network: made once, never deleted by yolo.
    Shared(String),
}

impl Network {
    pub(crate) fn name(&self) -> &str {
        match self {
            Network::Named(n) | Network::Own(n) | Network::Shared(n) => n,
        }
    }
}

/// The network all projects' guards share: `yolo-guards`, or with `YOLO_LABELS` (a test's,
/// a benchmark's) one of that label set's own, which its clean-up removes.
pub(crate) fn shared_network() -> String {
    match crate::engine::labels::extra_digest() {
        d if d.is_empty() => "yolo-guards".to_string(),
        d => format!("yolo-guards-{d}"),
    }
}

pub(crate) fn guard_config(
    project: &Project,
    mode: NetworkMode,
    session: &str,
    allow: Vec<String>,
    phase: Option<&str>,
) -> GuardConfig {
    let guard = &project.settings.guard;
    let upstream = match project.settings.upstream_dns {
        Some(addr) => vec![addr],
        // Decided here rather than read by the guard from its /etc/resolv.conf: the agent
        // shares that file and its root can write it.
        None => default_upstream(),
    };
    GuardConfig {
        session: session.to_string(),
        mode,
        allow,
        upstream,
        ttl_floor_secs: guard.ttl_floor_secs,
        deny_nxdomain: guard.deny_nxdomain,
        ask_timeout_secs: guard.ask_timeout_secs,
        published_ports: project.spec.ports.iter().map(|p| p.container).collect(),
        audit_path: PathBuf::from(GUARD_LOG_DIR).join(format!("{session}.jsonl")),
        control_socket: PathBuf::from(GUARD_CONTROL_SOCKET),
        // In the log folder the host binds from its data folder: not with a remote engine,
        // whose guard logs to a volume there.
        host_control_socket: (!project.spec.remote_engine).then(|| {
            PathBuf::from(GUARD_LOG_DIR).join(guard_socket::socket_name(&guard_name(project)))
        }),
        control_uids: host_uid().into_iter().collect(),
        allow_internal_answers: guard.allow_internal_answers,
        max_session_log: guard.max_session_log,
        phase: phase.map(str::to_string),
        // The agent's session, not a build: its shims register here (whether the agent has
        // one is `[audit] exec`; a guard without a shim to serve only waits).
        exec_audit: (phase.is_none() && mode != NetworkMode::None).then(|| ExecAudit {
            log_path: PathBuf::from(GUARD_LOG_DIR).join(crate::audit::exec_log_name(session)),
            max_bytes: guard.max_exec_log,
            allow_traced: guard.allow_traced_exec,
        }),
        file_watch: file_watch(project, session, phase),
        local_names: Vec::new(),
        audit_to_stdout: false,
        http: Default::default(),
        http_roots_pem: None,
        relays: Vec::new(),
        gateway: None,
    }
}

/// The host user's uid, which the guard's host control socket serves (`None` off Unix).
fn host_uid() -> Option<u32> {
    #[cfg(unix)]
    // SAFETY: getuid cannot fail and touches no memory.
    return Some(unsafe { libc::getuid() });
    #[cfg(not(unix))]
    None
}

/// The file watcher's settings: on unless `[audit] files = false`, for a session (an image
/// build's guard has nothing to watch: a build does not write the workspace), and only when
/// the workspace is a host folder the guard has mounted (or, with a remote engine, the copy's
/// volume: `crate::remote`).
fn file_watch(project: &Project, session: &str, phase: Option<&str>) -> Option<FileWatch> {
    let settings = &project.settings;
    let watched = guard_workspace(project).is_some() || project.spec.uses_copy();
    if !settings.guard.files || phase.is_some() || !watched {
        return None;
    }
    Some(FileWatch {
        root: PathBuf::from(GUARD_WORKSPACE_DIR),
        log_path: PathBuf::from(GUARD_LOG_DIR).join(file_log_name(session)),
        sensitive: sensitive_globs(&settings.user.read_only, &settings.watch),
        max_bytes: settings.guard.max_session_log,
    })
}

/// The paths the host executes, as globs: the read-only list (each entry, and what is below it)
/// and the watched globs, as the user configured them.
fn sensitive_globs(read_only: &[String], watch: &[String]) -> Vec<String> {
    let entries = read_only.iter().flat_map(|entry| {
        let path = globset::escape(entry.trim_end_matches('/'));
        [format!("{path}/**"), path]
    });
    // The folders the watched globs reach into: a link put there (`.cargo -> elsewhere`)
    // changes what the host reads without a change below the folder's own path.
    let folders = yolo_protocol::folder_patterns(watch);
    entries
        .chain(watch.iter().cloned())
        .chain(folders)
        .collect()
}

/// The workspace's host folder, mounted read-only in the guard for its file watcher; `None`
/// when the workspace is not a host folder (a volume).
fn guard_workspace(project: &Project) -> Option<PathBuf> {
    let mount = &project.spec.workspace_mount;
    (mount.kind == crate::run_spec::MountKind::Bind).then(|| PathBuf::from(&mount.source))
}

/// Create the guard (container, network, config) without starting it.
/// `builds`: an image is built behind it first (then it gets a bridge of the project's own).
pub(crate) async fn create_guard(
    engine: &Engine,
    project: &Project,
    builds: bool,
) -> Result<String> {
    let guard = &project.settings.guard;
    let network = network_name(engine, project, builds);
    let owner = Owner::of(&project.spec);
    // Independent, and the network's creation is one of the slower calls of a cold `up`.
    let made = async {
        match &network {
            Network::Shared(name) => engine.ensure_shared_network(name).await,
            Network::Named(name) | Network::Own(name) => engine.ensure_network(name, &owner).await,
        }
    };
    // A spare network namespace, made ahead on the shared network, when one is ready: joining
    // it costs a third of an attach to the bridge (`engine::spares`).
    // Never on a network of the project's own, nor where it would have one but for
    // `docker_network` (`spare_fits`).
    let takes_spare = !matches!(network, Network::Own(_)) && spare_fits(engine, project, builds);
    let claim = async {
        if !takes_spare {
            return None;
        }
        match engine
            .claim_spare(network.name(), &guard_name(project))
            .await
        {
            Ok(claimed) => claimed,
            // A spare only saves time: without one, the guard is attached itself.
            Err(e) => {
                eprintln!(
                    "{} no spare network namespace taken: {e}",
                    console::style("warning:").yellow().bold()
                );
                None
            }
        }
    };
    if takes_spare {
        // The next guard's spare, made once this `up` has ended.
        crate::commands::prepare::spawn_top_up(guard.spares);
    }
    let (image, made, netns) = tokio::join!(
        engine.ensure_guard_image(&guard.base_image, guard.image.as_deref()),
        made,
        claim
    );
    let made = image.and_then(|image| made.map(|()| image));
    // From here on, whatever fails gives the claimed holder up (`forget_holder`).
    let made = match made {
        Ok(image) => create_in(engine, project, builds, &network, image, netns.clone()).await,
        Err(e) => Err(e),
    };
    if made.is_err() {
        forget_holder(engine, project, netns.as_deref()).await;
    }
    made
}

/// [`create_guard`] once its image and network are there: the guard made, in the spare's
/// namespace `netns` when it claimed one.
async fn create_in(
    engine: &Engine,
    project: &Project,
    builds: bool,
    network: &Network,
    image: String,
    netns: Option<String>,
) -> Result<String> {
    let guard = &project.settings.guard;
    let owner = Owner::of(&project.spec);
    // The guard publishes the agent's ports: a busy host port is swapped for a free one here.
    let (ports, notes) = super::ports::fit(&project.spec.ports);
    for note in notes {
        eprintln!("{} {note}", console::style("yolo:").bold());
    }
    // A remote engine: the guard's events go to a volume and its config is copied in
    // (docs/remote.md). A session on a copy: the guard sees the copy's volume.
    let remote = project.spec.remote_engine;
    let events_volume = remote.then(|| crate::remote::events_volume(&project.spec.devcontainer_id));
    crate::remote_copy::seed(engine, project, &image).await?;
    if let Some(volume) = &events_volume {
        engine
            .create_volume(volume, &project.spec.devcontainer_id)
            .await?;
    }
    let mut spec = GuardSpec {
        name: guard_name(project),
        image,
        network: network.name().to_string(),
        owner,
        ports,
        hostname: project.spec.hostname.clone(),
        extra_hosts: project.spec.extra_hosts.clone(),
        log_dir: log_dir(&crate::store::root())?,
        events_volume,
        workspace_volume: project
            .spec
            .uses_copy()
            .then(|| project.spec.workspace_mount.source.clone()),
        workspace: guard_workspace(project),
        limits_required: project.spec.limits_required,
        shared_bridge: matches!(network, Network::Shared(_)),
        builds,
        netns,
        config_dir: if remote {
            // A folder left by a guard of the same name on a local engine would be written
            // instead of the copy this guard reads (`Engine::update_guard_config`).
            let stale =
                crate::engine::guard_config_dir_of(&crate::store::root(), &guard_name(project));
            if stale.exists() {
                std::fs::remove_dir_all(&stale).map_err(|e| Error::io(&stale, e))?;
            }
            None
        } else {
            Some(crate::engine::guard_config_dir(
                &crate::store::root(),
                &guard_name(project),
            )?)
        },
    };
    match engine.create_guard(&spec).await {
        // The image went between its check and now (`docker image prune`, another yolo's or a
        // test's clean-up of an image that carried the same tag): made again, once.
        // The shared network went between its check and now (`docker network prune`): made
        // again, once.
        Err(e)
            if matches!(network, Network::Shared(_))
                && e.to_string().contains("network")
                && e.to_string().contains("not found") =>
        {
            if let Network::Shared(name) = &network {
                engine.ensure_shared_network(name).await?;
            }
            engine.create_guard(&spec).await
        }
        Err(e) if e.to_string().contains("No such image") => {
            spec.image = engine
                .ensure_guard_image(&guard.base_image, guard.image.as_deref())
                .await?;
            engine.create_guard(&spec).await
        }
        other => other,
    }
}

/// Whether the project's guard may join a spare network namespace: it asks for nothing that
/// only a namespace's owner can have (published ports, a hostname, extra hosts), and the
/// engine is this machine's Docker (a remote engine's spares would be made there by a yolo
/// that may never run again; Podman's guards each get a network of their own).
/// Nor where the project would get a bridge of its own without `[firewall] docker_network`
/// (a build behind the guard, grants beyond yolo's own set, Compose: `own_bridge_reason`), nor
/// with a namespace of the host's granted (with the host's PID namespace the agent would see
/// the holder, and could stop it to keep the namespace past its guard).
fn spare_fits(engine: &Engine, project: &Project, builds: bool) -> bool {
    let spec = &project.spec;
    !spec.remote_engine
        && own_bridge_reason(engine.is_podman(), spec, builds).is_none()
        && spec.host_modes.is_empty()
        && spec.ports.is_empty()
        && spec.hostname.is_none()
        && spec.extra_hosts.is_empty()
}

/// The holder this start claimed, removed when its guard could not be made: a spare is not
/// handed back (its name is the session's now), and the next `up` claims another.
async fn forget_holder(engine: &Engine, project: &Project, netns: Option<&str>) {
    if netns.is_some() {
        let holder = crate::engine::spares::holder_name(&guard_name(project));
        let _ = engine.remove_holder(&holder).await;
    }
}

/// Start the guard with a fresh config and wait until it has verified its ruleset.
pub(crate) async fn start_guard(
    engine: &Engine,
    project: &Project,
    id: &str,
    config: &GuardConfig,
) -> Result<()> {
    launch_guard(engine, project, id, config).await?;
    wait_guard(engine, id, &config.session).await
}

/// `start_guard`'s first half: the config in, the guard started (not yet ready).
pub(crate) async fn launch_guard(
    engine: &Engine,
    project: &Project,
    id: &str,
    config: &GuardConfig,
) -> Result<()> {
    let json = serde_json::to_string_pretty(config)
        .map_err(|e| Error::failed(Failure::Serialize, Cause::bare(e)))?;
    let dir = crate::engine::guard_config_dir_of(&crate::store::root(), &guard_name(project));
    engine.update_guard_config(id, &dir, &json).await?;
    // A guard in a spare's namespace cannot start outside it: the holder first (stopped by
    // `down` with its guard). No holder: nothing done.
    engine
        .start_holder(&crate::engine::spares::holder_name(&guard_name(project)))
        .await?;
    engine.start(id).await
}

/// `start_guard`'s second half: until the guard of `session` says it is ready.
pub(crate) async fn wait_guard(engine: &Engine, id: &str, session: &str) -> Result<()> {
    engine.wait_guard_ready(id, session, READY_TIMEOUT).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_gets_a_bridge_of_its_own_where_the_shared_one_cannot_hold() {
        let plain = crate::policy::test_support::ok(serde_json::json!({"image": "debian"}));
        assert_eq!(own_bridge_reason(false, &plain, false), None);
        // A build's RUN steps (NET_RAW, AF_XDP) are never on the shared bridge.
        assert!(own_bridge_reason(false, &plain, true)
            .unwrap()
            .contains("built behind the guard"));
        assert!(own_bridge_reason(true, &plain, false)
            .unwrap()
            .contains("Podman"));
        // Any grant beyond yolo's own set: NET_RAW and NET_ADMIN forge frames, SYS_PTRACE
        // reaches the guard's NET_ADMIN through the shared PID namespace.
        for cap in ["NET_RAW", "cap_net_admin", "SYS_PTRACE", "SYS_ADMIN", "all"] {
            let mut spec = plain.clone();
            spec.cap_add = vec![cap.into()];
            let why = own_bridge_reason(false, &spec, false).unwrap();
            assert!(why.contains("capabilities"), "{cap}: {why}");
        }
        let mut spec = plain.clone();
        spec.devices = vec!["/dev/fuse".into()];
        assert!(own_bridge_reason(false, &spec, false).is_some());
        let mut spec = plain.clone();
        spec.security_opt = vec!["seccomp=unconfined".into()];
        assert!(own_bridge_reason(false, &spec, false).is_some());
        let mut spec = plain.clone();
        spec.privileged = true;
        assert!(own_bridge_reason(false, &spec, false).is_some());
    }

    /// The guard matches these as the watcher does: ignoring case, `*` across `/`.
    #[test]
    fn the_sensitive_globs_cover_the_read_only_and_the_watched_lists() {
        let read_only = crate::policy::DEFAULT_READ_ONLY.map(String::from).to_vec();
        let watch: Vec<String> = crate::watched::DEFAULT_WATCH
            .iter()
            .map(|g| g.to_string())
            .collect();
        let mut set = globset::GlobSetBuilder::new();
        for g in sensitive_globs(&read_only, &watch) {
            set.add(
                globset::GlobBuilder::new(&g)
                    .case_insensitive(true)
                    .build()
                    .unwrap(),
            );
        }
        let set = set.build().unwrap();
        for path in [
            ".git/hooks/pre-commit",
            ".git/config",
            ".devcontainer",
            ".devcontainer/devcontainer.json",
            ".envrc",
            "sub/dir/Makefile",
            "crates/x/build.rs",
            // A watched folder itself: made a link, it changes what the host reads.
            ".cargo",
            "sub/.vscode",
        ] {
            assert!(set.is_match(path), "{path}");
        }
        for path in [
            "src/main.rs",
            "target/debug/x",
            ".git/configs",
            ".git/index",
            "sub/tools",
        ] {
            assert!(!set.is_match(path), "{path}");
        }
    }

    #[test]
    fn default_upstream_is_the_hosts_nameservers_without_loopback() {
        let etc = "search lan\nnameserver 127.0.0.53\noptions edns0\n";
        let systemd = "nameserver 192.0.2.1\nnameserver 2001:db8::53\n";
        let got = usable_nameservers(etc, systemd);
        assert_eq!(
            got,
            vec![
                "192.0.2.1:53".parse().unwrap(),
                "[2001:db8::53]:53".parse().unwrap()
            ]
        );
        let direct = usable_nameservers("nameserver 198.51.100.1\nnameserver ::1\n", systemd);
        assert_eq!(
            direct,
            vec!["198.51.100.1:53".parse::<SocketAddr>().unwrap()]
        );
        assert!(usable_nameservers("nameserver 127.0.0.1\n", "").is_empty());
    }
}
