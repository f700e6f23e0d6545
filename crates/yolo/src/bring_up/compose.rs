//! `up` for a Compose config (docs/architecture.md "Compose projects"): the dev service joins the
//! guard's network and PID namespaces; the other services sit on the project's networks, made
//! internal (no egress unless `compose-egress` grants it); the guard is attached to them, its DNS
//! answers their names from Docker's embedded DNS and their subnets are allowed, so the dev
//! service reaches its siblings by name and nothing else.
//!
//! Order: `prepare` (before any Docker work: the Compose CLI found, the project resolved and every
//! service checked), then `start` in place of the agent's image and container: the guard made
//! (not started), the project created (`up --no-start`), the guard attached to its networks and
//! started with the siblings allowed, the dev service limited, then everything started.

use super::features::{self, Fetched};
use super::network;
use crate::devcontainer::model::DevContainer;
use crate::engine::compose::{self, Cli, Compose, FilePlan};
use crate::engine::{Engine, NetworkAttach};
use crate::error::{Cause, Error, Failure, Result};
use crate::firewall::NetworkMode;
use crate::policy::{self, ServicesChecked};
use crate::project::Project;
use crate::run_spec::ComposeSpec;
use std::path::PathBuf;

/// A Compose project read and checked, ready to start.
pub(crate) struct Prepared {
    pub(crate) compose: Compose,
    pub(crate) spec: ComposeSpec,
    resolved: serde_yaml_ng::Value,
    checked: ServicesChecked,
}

impl Prepared {
    /// What the dev service asked for and its container is made without.
    pub(crate) fn declined(&self) -> &[crate::run_spec::Declined] {
        &self.checked.declined
    }
}

/// For a Compose config: find the Compose CLI, resolve the project with it and check every
/// service against the user's grants. Nothing is made; an invalid file is a config error naming
/// it, with Compose's own words.
pub(crate) async fn prepare(project: &Project) -> Result<Option<Prepared>> {
    let Some(spec) = project.spec.compose.clone() else {
        return Ok(None);
    };
    let dotenv = spec.project_dir.join(".env");
    if let Ok(text) = crate::digest::read_to_string(&dotenv) {
        policy::check_compose_dotenv(&dotenv, &text)?;
    }
    let cli = Cli::detect().await?;
    let compose = Compose::of(cli, &spec, &project.user.pass_env);
    let text = compose.config().await.map_err(|message| Error::Config {
        file: spec.files[0].clone(),
        line: None,
        column: None,
        property: None,
        message: format!("{} cannot read the Compose files: {message}", cli.name()),
    })?;
    let resolved: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).map_err(|e| {
        Error::failed(
            Failure::ComposeProject,
            Cause::of(
                format!("{} printed a project yolo cannot read", cli.name()),
                e,
            ),
        )
    })?;
    let settings = &project.settings;
    // The grant checks take an evaluation's input; only the grants, the workspace and the file
    // to name matter to them.
    let scratch = DevContainer {
        image: Some("compose".into()),
        ..Default::default()
    };
    let flags = policy::Flags {
        grants: settings.grants.clone(),
        ..Default::default()
    };
    let workspace = &project.spec.workspace;
    let input = |facts| policy::Input {
        config: &scratch,
        config_file: &spec.files[0],
        workspace,
        devcontainer_id: &project.spec.devcontainer_id,
        user: &settings.user,
        flags: &flags,
        host_ids: None,
        agent_volumes: Vec::new(),
        metadata: &[],
        facts,
    };
    // Where every host path a check meets really leads, looked at before it runs.
    let facts = crate::policy_facts::for_compose(
        workspace,
        policy::compose_host_paths(workspace, &resolved),
    );
    let mut checked = policy::check_services(&input(&facts), &spec, &resolved)?;
    let guard = &settings.guard;
    let guard_images = [guard.image.as_deref(), Some(guard.base_image.as_str())];
    policy::check_built_image_names(&spec.files[0], &resolved, &guard_images)?;
    check_builds(&spec, &resolved, &settings.grants)?;
    // Files reached through `extends` are read by Compose too: their env_file entries count.
    let all_files =
        policy::compose_files_extended(&spec.files, |f| crate::digest::read_to_string(f).ok());
    let extended = &all_files[spec.files.len()..];
    let env_files = env_files(&all_files)?;
    let facts = crate::policy_facts::for_compose(
        workspace,
        extended
            .iter()
            .cloned()
            .chain(env_files.iter().map(|(_, _, path)| path.clone())),
    );
    let extended = policy::check_extended_files(&input(&facts), extended)?;
    for grant in extended
        .into_iter()
        .chain(policy::check_env_files(&input(&facts), &env_files)?)
    {
        if !checked.grants_used.contains(&grant) {
            checked.grants_used.push(grant);
        }
    }
    Ok(Some(Prepared {
        compose,
        spec,
        resolved,
        checked,
    }))
}

/// A Compose service's Dockerfile uses no BuildKit syntax: Compose builds run with the classic
/// builder (its RUN steps behind the guard), and yolo lowers BuildKit syntax only for the
/// Dockerfile of devcontainer.json's `build` (which it sends to Docker itself). Refused before
/// anything starts, each use named, rather than by the builder's `unknown instruction`.
fn needs_no_buildkit(
    text: &str,
    shown: &str,
    file: &std::path::Path,
    property: &str,
) -> Result<()> {
    let lines = match crate::dockerfile_lower::lower(text) {
        Ok(lowered) if !lowered.changed => return Ok(()),
        Ok(lowered) => lowered.uses,
        Err(found) => found.iter().map(|f| f.line).collect(),
    };
    let shown_lines: Vec<String> = lines.iter().map(|l| format!("{shown}:{l}")).collect();
    Err(crate::error::Error::Unsupported {
        file: file.to_path_buf(),
        property: property.to_string(),
        message: format!(
            "the service's Dockerfile uses BuildKit syntax ({}), which Docker's classic builder cannot run; yolo builds Compose services with the classic builder so that their RUN steps stay behind its firewall, and lowers BuildKit syntax only for a devcontainer.json \"build\" Dockerfile. Build the service's image yourself with BuildKit (`docker compose build`), give the service that \"image\" instead of \"build\", or use devcontainer.json's \"build\" for the agent's container",
            shown_lines.join(", ")
        ),
    })
}

/// Every service's Dockerfile (its file, or `dockerfile_inline`) downloads nothing through the
/// daemon (`ADD <url>`) unless the user grants `remote-add`.
fn check_builds(
    spec: &ComposeSpec,
    resolved: &serde_yaml_ng::Value,
    grants: &policy::Grants,
) -> Result<()> {
    let Some(services) = resolved
        .get("services")
        .and_then(serde_yaml_ng::Value::as_mapping)
    else {
        return Ok(());
    };
    for (name, service) in services {
        let name = name.as_str().unwrap_or_default();
        let property = format!("services.{name}.build");
        let (context, dockerfile, inline) = match service.get("build") {
            Some(serde_yaml_ng::Value::String(context)) => (context.as_str(), "Dockerfile", None),
            Some(build) => (
                build
                    .get("context")
                    .and_then(serde_yaml_ng::Value::as_str)
                    .unwrap_or("."),
                build
                    .get("dockerfile")
                    .and_then(serde_yaml_ng::Value::as_str)
                    .unwrap_or("Dockerfile"),
                build
                    .get("dockerfile_inline")
                    .and_then(serde_yaml_ng::Value::as_str),
            ),
            None => continue,
        };
        match inline {
            Some(text) => needs_no_buildkit(
                text,
                &format!("{property}.dockerfile_inline"),
                &spec.files[0],
                &property,
            )
            .and_then(|()| {
                policy::check_remote_adds(
                    text,
                    &format!("{property}.dockerfile_inline"),
                    &spec.files[0],
                    &property,
                    grants,
                    false,
                )
            })?,
            None => {
                let path = spec.project_dir.join(context).join(dockerfile);
                // An unreadable file passes: the build says why it cannot read it.
                if let Ok(text) = crate::digest::read_to_string(&path) {
                    let shown = path.display().to_string();
                    needs_no_buildkit(&text, &shown, &spec.files[0], &property)?;
                    policy::check_remote_adds(
                        &text,
                        &shown,
                        &spec.files[0],
                        &property,
                        grants,
                        false,
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// Every `env_file` of the Compose files as written, with the host path Compose reads: the
/// resolved project no longer names them (their lines are in `environment`). Relative paths
/// are the file's folder's, as Compose resolves them.
fn env_files(files: &[PathBuf]) -> Result<Vec<(String, String, PathBuf)>> {
    let mut found = Vec::new();
    for file in files {
        let text = crate::digest::read_to_string(file).map_err(|e| Error::io(file, e))?;
        let doc: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&text).map_err(|e| Error::Config {
                file: file.clone(),
                line: None,
                column: None,
                property: None,
                message: format!(
                    "yolo cannot read this Compose file to check its env_file entries: {e}"
                ),
            })?;
        let dir = file.parent().unwrap_or(std::path::Path::new("/"));
        let Some(services) = doc
            .get("services")
            .and_then(serde_yaml_ng::Value::as_mapping)
        else {
            continue;
        };
        for (name, service) in services {
            let name = name.as_str().unwrap_or_default().to_string();
            let entries = match service.get("env_file") {
                Some(serde_yaml_ng::Value::Sequence(items)) => items.clone(),
                Some(one) => vec![one.clone()],
                None => Vec::new(),
            };
            for entry in entries {
                let written = match &entry {
                    serde_yaml_ng::Value::String(path) => path.clone(),
                    other => match other.get("path").and_then(serde_yaml_ng::Value::as_str) {
                        Some(path) => path.to_string(),
                        None => continue,
                    },
                };
                found.push((name.clone(), written.clone(), dir.join(&written)));
            }
        }
    }
    Ok(found)
}

/// The services `up` starts: `runServices` (the dev service always among them), else all.
fn services(prepared: &Prepared) -> Vec<String> {
    match &prepared.spec.run_services {
        None => Vec::new(),
        Some(list) => {
            let mut all = list.clone();
            if !all.contains(&prepared.spec.service) {
                all.push(prepared.spec.service.clone());
            }
            all
        }
    }
}

/// What the guard is started with.
pub(crate) enum GuardPhase {
    /// While the services' images build in its namespace: the build's allowlist.
    Build,
    /// The session: the siblings' subnets and names (`extra`) on top of the allowlist, the
    /// names Docker's embedded DNS answers, and the dev service's published ports (its image's
    /// label may have added some).
    Session {
        extra: Vec<String>,
        names: Vec<String>,
        /// The siblings' ports the guard relays (`RunSpec::relays` naming a service).
        relays: Vec<yolo_protocol::Relay>,
        published: Vec<u16>,
    },
}

/// Where yolo writes the project file: its data folder, never the repository.
fn project_file_path(devcontainer_id: &str) -> PathBuf {
    crate::store::compose_file(devcontainer_id)
}

/// Bring the project up with the guard named `guard` (made, not started; None with `--network
/// none`),
/// which `start_guard` starts: for the builds (the services' images with their RUN steps in its
/// namespace, then the Features on the dev service's image), then, once it is attached to the
/// project's networks, for the session. The dev service is made from the project evaluated
/// with its image's `devcontainer.metadata` label and the Features' entries, returned as
/// `Started::merged` when that differs from `project`. On failure, what Compose made is taken
/// down again.
pub(crate) async fn start<F, Fut>(
    engine: &Engine,
    project: &Project,
    prepared: &Prepared,
    fetched: &Fetched,
    mode: NetworkMode,
    guard: Option<&str>,
    start_guard: F,
) -> Result<Started>
where
    F: Fn(GuardPhase) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let path = project_file_path(&project.spec.devcontainer_id);
    let run = prepared.compose.with_file(&path);
    let result = async {
        // The services' builds read the file too: written first with what is known now.
        let plan = file_plan(project, prepared, mode, guard.is_some());
        write_file(&path, &prepared.resolved, &plan)?;
        let Built { merged, image } = build(
            engine,
            project,
            prepared,
            fetched,
            &run,
            guard,
            &start_guard,
        )
        .await?;
        let now = merged.as_ref().unwrap_or(project);
        // Docker fixes a container's published ports when it is made: the guard, made before
        // the image's label was read, is made again when the label forwards other ports.
        if let (Some(guard), false) = (guard, now.spec.ports == project.spec.ports) {
            engine.remove(guard).await?;
            network::create_guard(engine, now, true).await?;
        }
        // Volumes a label or a Feature asks for: made (and labelled) before Compose names them.
        super::volumes::create(engine, &now.spec).await?;
        let mut plan = file_plan(now, prepared, mode, guard.is_some());
        plan.image = image;
        let started = bring_up(engine, now, prepared, &run, &mut plan, &path, &start_guard).await?;
        Ok(Started { merged, ..started })
    }
    .await;
    if result.is_err() {
        // What this start made goes; the guard is `up`'s to undo.
        if let Err(e) = run
            .run_quiet(&["down", "--volumes", "--remove-orphans", "--timeout", "5"])
            .await
        {
            eprintln!(
                "{} could not take the Compose project down again: {e}",
                console::style("warning:").yellow().bold()
            );
        }
    }
    result
}

fn file_plan<'a>(
    project: &'a Project,
    prepared: &'a Prepared,
    mode: NetworkMode,
    guard: bool,
) -> FilePlan<'a> {
    let spec = &project.spec;
    let guard = guard.then(|| network::guard_name(project));
    // `[build] network = "none"`: the services' RUN steps get no network either.
    let build_guard = guard
        .as_deref()
        .filter(|_| !project.settings.build.no_network);
    FilePlan {
        spec,
        compose: &prepared.spec,
        checked: &prepared.checked,
        mode,
        build_network: prepared.compose.cli.build_network(build_guard),
        guard,
        workspace_target: compose::workspace_target(
            &prepared.resolved,
            &prepared.spec.service,
            &spec.workspace,
        ),
        shim: None,
        command: None,
        image: None,
    }
}

/// What `start` made: the dev service's container, and why its execs are not recorded.
pub(crate) struct Started {
    pub(crate) id: String,
    pub(crate) audit_off: Option<String>,
    /// The project evaluated with the dev service image's metadata, when that changed it.
    pub(crate) merged: Option<Project>,
}

fn write_file(
    path: &std::path::Path,
    resolved: &serde_yaml_ng::Value,
    plan: &FilePlan,
) -> Result<()> {
    let file = compose::project_file(resolved, plan)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    let text = serde_json::to_string_pretty(&file)
        .map_err(|e| Error::failed(Failure::Serialize, Cause::bare(e)))?;
    std::fs::write(path, text).map_err(|e| Error::io(path, e))
}

impl Prepared {
    /// The image of the dev service as Compose names it (its `image`, else the one Compose
    /// builds): before yolo installs Features on it.
    pub(crate) fn dev_image(&self) -> String {
        self.image_of(&self.spec.service)
    }

    fn image_of(&self, name: &str) -> String {
        self.resolved["services"][name]
            .get("image")
            .and_then(serde_yaml_ng::Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| self.compose.cli.image_name(&self.compose.project, name))
    }
}

/// What the dev service runs, the Features' entrypoints first: the keep-alive with
/// `overrideCommand`, else its own or its image's entrypoint and command; why not, when yolo
/// cannot tell.
async fn dev_start(
    engine: &Engine,
    project: &Project,
    prepared: &Prepared,
    image: &str,
) -> Result<std::result::Result<(Vec<String>, Vec<String>), String>> {
    let spec = &project.spec;
    let name = &prepared.spec.service;
    let service = &prepared.resolved["services"][name.as_str()];
    let (entrypoint, command) = if spec.override_command {
        (Vec::new(), compose::keep_alive())
    } else {
        let image = engine.image_command(image).await?;
        let Some(command) = compose::dev_command(service, image) else {
            return Ok(Err(format!(
                "yolo cannot tell what the service \"{name}\" runs (its image is not here yet, or its entrypoint or command is a string that does not split into words)"
            )));
        };
        command
    };
    Ok(Ok(compose::chain_entrypoints(
        &spec.entrypoints,
        entrypoint,
        command,
    )))
}

/// How the dev service starts: through the exec audit's shim, or why not (then, with Features'
/// entrypoints to run first, the command yolo sets in the file).
async fn start_plan(
    engine: &Engine,
    project: &Project,
    prepared: &Prepared,
    plan: &mut FilePlan<'_>,
) -> Result<Option<String>> {
    let spec = &project.spec;
    let image = plan.image.clone().unwrap_or_else(|| prepared.dev_image());
    let why = if plan.guard.is_none() {
        Some("`--network none` runs no guard to record them".to_string())
    } else if !spec.exec_audit {
        Some("`[audit] exec = false` in yolo's config".to_string())
    } else {
        None
    };
    match (why, dev_start(engine, project, prepared, &image).await?) {
        (None, Ok((entrypoint, command))) => {
            plan.shim = Some(compose::Shim {
                host_dir: crate::engine::guard_image::shim_dir()?,
                entrypoint,
                command,
            });
            Ok(None)
        }
        (None, Err(why)) => Ok(Some(why)),
        (Some(why), started) => {
            if let (Ok(command), false) = (started, spec.entrypoints.is_empty()) {
                plan.command = Some(command);
            }
            Ok(Some(why))
        }
    }
}

async fn bring_up<F, Fut>(
    engine: &Engine,
    project: &Project,
    prepared: &Prepared,
    run: &Compose,
    plan: &mut FilePlan<'_>,
    path: &std::path::Path,
    start_guard: &F,
) -> Result<Started>
where
    F: Fn(GuardPhase) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let spec = &project.spec;
    let services = services(prepared);
    let with = |args: &[&str]| -> Vec<String> {
        args.iter()
            .map(|a| a.to_string())
            .chain(services.iter().cloned())
            .collect()
    };
    let guard_name = plan.guard.clone();
    let guard = guard_name.as_deref();
    let audit_off = start_plan(engine, project, prepared, plan).await?;
    write_file(path, &prepared.resolved, plan)?;
    let mut create = vec!["up", "--no-start"];
    if project.settings.rebuild {
        create.push("--force-recreate");
    }
    let args = with(&create);
    run.run(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .await?;
    // The agent's `/proc` read-only, as for a single container (`ShimPlan::proc_readonly`):
    // Compose has no setting for it, so yolo makes the dev service's container again with it.
    if plan.shim.is_some() && engine.read_only_proc_is_safe().await {
        engine.compose_read_only_proc(&spec.container_name).await?;
    }
    // What Compose joined, read back: only the project's own networks, walled.
    let attachments = engine.compose_attachments(&run.project).await?;
    if let Some(a) = compose::foreign_attachment(
        &attachments,
        &spec.devcontainer_id,
        &prepared.checked.egress,
    ) {
        return Err(foreign_network_error(&prepared.spec.files[0], a));
    }
    let mut extra = Vec::new();
    let siblings: Vec<String> = prepared
        .checked
        .services
        .iter()
        .filter(|s| **s != prepared.spec.service)
        .cloned()
        .collect();
    if let Some(guard) = guard {
        for net in engine
            .compose_networks(&run.project, &spec.devcontainer_id)
            .await?
        {
            if net.egress {
                continue;
            }
            engine.connect_network(&net.name, guard).await?;
            extra.extend(net.subnets);
        }
        extra.extend(siblings.iter().cloned());
    }
    let mut relays = Vec::new();
    for sibling in &spec.relays {
        if siblings.contains(&sibling.host) && guard.is_some() {
            relays.push(yolo_protocol::Relay {
                listen: sibling.port,
                host: sibling.host.clone(),
                port: sibling.port,
            });
        } else {
            eprintln!(
                "{} {}: port {} of {} is not forwarded: {}",
                console::style("note:").yellow(),
                sibling.property,
                sibling.port,
                sibling.host,
                if guard.is_some() {
                    "the Compose project has no such service"
                } else {
                    "there is no guard to relay it"
                }
            );
        }
    }
    start_guard(GuardPhase::Session {
        extra,
        names: siblings,
        relays,
        published: spec.ports.iter().map(|p| p.container).collect(),
    })
    .await?;
    engine
        .set_limits(
            &spec.container_name,
            &fit_to_host(engine, spec).await?,
            spec.limits_required,
        )
        .await?;
    let args = with(&["up", "--detach", "--no-recreate"]);
    run.run(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .await?;
    Ok(Started {
        id: engine.inspect_id(&spec.container_name).await?,
        audit_off,
        merged: None,
    })
}

/// A service Compose attached to a network that is not the project's own (or not walled).
fn foreign_network_error(file: &std::path::Path, a: &compose::Attachment) -> Error {
    let reason = if a.owner.is_some() && !a.walled {
        "the engine made this network of the project without the wall yolo asked for (an internal bridge holding no address of the host); yolo does not start the project on it"
    } else {
        "the network is not one this project made (another project's, or one made outside yolo), and a service on it would reach what sits there; remove it from the Compose files"
    };
    Error::Forbidden {
        file: file.to_path_buf(),
        property: format!("service \"{}\": networks", a.service),
        value: format!("the network {}", a.network),
        reason: reason.into(),
    }
}

/// What the builds made.
struct Built {
    /// The project evaluated with the dev service image's label and the Features' entries,
    /// when that changed it.
    merged: Option<Project>,
    /// The dev service's image with the Features installed, when there are Features.
    image: Option<String>,
}

/// The builds before the project is created, behind the guard started for them (and stopped
/// again after; none with `[build] network = "none"`):
/// - the images of the services that start and build, when one is missing or `--rebuild` (v1
///   runs their RUN steps in the guard's namespace; the v2 plugin's BuildKit cannot join it,
///   so there they get no network);
/// - the dev service's image pulled when it is not here, its `devcontainer.metadata` label
///   read and merged with the Features' entries (a request nobody granted fails here, naming
///   the image or the Feature), and the Features installed on it in a build of their own, as
///   for an image config (skipped when nothing changed).
async fn build<F, Fut>(
    engine: &Engine,
    project: &Project,
    prepared: &Prepared,
    fetched: &Fetched,
    run: &Compose,
    guard: Option<&str>,
    start_guard: &F,
) -> Result<Built>
where
    F: Fn(GuardPhase) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let guard = guard.filter(|_| !project.settings.build.no_network);
    let rebuild = project.settings.rebuild;
    let starting = services(prepared);
    let mut builds = Vec::new();
    let mut missing = false;
    for name in &prepared.checked.services {
        let service = &prepared.resolved["services"][name.as_str()];
        if service.get("build").is_none() || !(starting.is_empty() || starting.contains(name)) {
            continue;
        }
        missing |= !engine.image_exists(&prepared.image_of(name)).await?;
        builds.push(name.as_str());
    }
    let mut guard_up = false;
    let built = async {
        if !builds.is_empty() && (missing || rebuild) {
            if guard.is_some() {
                start_guard(GuardPhase::Build).await?;
                guard_up = true;
            }
            let mut args = vec!["build"];
            args.extend(builds.iter().copied());
            run.run(&args).await?;
        }
        let base = prepared.dev_image();
        if !engine.image_exists(&base).await? {
            run.run(&["pull", prepared.spec.service.as_str()])
                .await
                .map_err(|e| match e {
                    Error::Docker { action, message, .. } => Error::Docker {
                        action,
                        message,
                        hint: Some(format!(
                            "the image {base} of the service \"{}\" is not on the engine and could not be pulled: check its name, `docker login` to its registry, or give the service a `build`",
                            prepared.spec.service
                        )),
                    },
                    other => other,
                })?;
        }
        let merged = features::with_metadata(engine, project, &base, fetched).await?;
        let now = merged.as_ref().unwrap_or(project);
        let mut image = None;
        if !fetched.is_empty() {
            if let (Some(_), false) = (guard, guard_up) {
                if features::build_needed(engine, now, &base, fetched, rebuild).await? {
                    start_guard(GuardPhase::Build).await?;
                    guard_up = true;
                }
            }
            let network = match guard {
                Some(id) if guard_up => NetworkAttach::Container(id.to_string()),
                _ => NetworkAttach::None,
            };
            image = Some(features::install(engine, now, &base, fetched, &network, rebuild).await?);
        }
        Ok(Built { merged, image })
    }
    .await;
    if let (Some(guard), true) = (guard, guard_up) {
        let stopped = engine.stop(guard).await;
        let built = built?;
        stopped?;
        return Ok(built);
    }
    built
}

/// The spec's limits with its CPUs fitted to the engine's machine, as `up` fits its own
/// container's (`policy::fit_cpus`).
async fn fit_to_host(
    engine: &Engine,
    spec: &crate::run_spec::RunSpec,
) -> Result<crate::run_spec::Limits> {
    let host = engine.host_facts().await?;
    let (cpus, why) = policy::fit_cpus(spec.limits.cpus, spec.cpus_chosen_by, host.cpus);
    if let Some(why) = why {
        eprintln!("{} {why}", console::style("yolo:").bold());
    }
    Ok(crate::run_spec::Limits {
        cpus,
        ..spec.limits
    })
}
