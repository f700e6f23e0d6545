//! `up` for a Compose config (../shared/DESIGN.md "Compose projects"): the dev service joins the
//! guard's network and PID namespaces; the other services sit on the project's networks, made
//! internal (no egress unless `compose-egress` grants it); the guard is attached to them, its DNS
//! answers their names from Docker's embedded DNS and their subnets are allowed, so the dev
//! service reaches its siblings by name and nothing else.
//!
//! Order: `prepare` (before any Docker work: the Compose CLI found, the project resolved and every
//! service checked), then `start` in place of the agent's image and container: the guard made
//! (not started), the project created (`up --no-start`), the guard attached to its networks and
//! started with the siblings allowed, the dev service limited, then everything started.

use super::network;
use crate::devcontainer::model::DevContainer;
use crate::engine::compose::{self, Cli, Compose, FilePlan};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::firewall::NetworkMode;
use crate::policy::{self, ServicesChecked};
use crate::project::Project;
use crate::run_spec::ComposeSpec;
use std::path::PathBuf;

/// A Compose project read and checked, ready to start.
pub(crate) struct Prepared {
    pub(crate) compose: Compose,
    pub(crate) spec: ComposeSpec,
    resolved: serde_yaml::Value,
    checked: ServicesChecked,
}

/// For a Compose config: find the Compose CLI, resolve the project with it and check every
/// service against the user's grants. Nothing is made; an invalid file is a config error naming
/// it, with Compose's own words.
pub(crate) async fn prepare(project: &Project) -> Result<Option<Prepared>> {
    let Some(spec) = project.spec.compose.clone() else {
        return Ok(None);
    };
    let cli = Cli::detect().await?;
    let compose = Compose::of(cli, &spec, &project.user.pass_env);
    let text = compose.config().await.map_err(|message| Error::Config {
        file: spec.files[0].clone(),
        line: None,
        column: None,
        property: None,
        message: format!("{} cannot read the Compose files: {message}", cli.name()),
    })?;
    let resolved: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|e| {
        Error::other(format!(
            "{} printed a project yolo cannot read: {e}",
            cli.name()
        ))
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
    let input = policy::Input {
        config: &scratch,
        config_file: &spec.files[0],
        workspace: &project.spec.workspace,
        devcontainer_id: &project.spec.devcontainer_id,
        user: &settings.user,
        flags: &flags,
        host_ids: None,
        agent_volumes: Vec::new(),
        metadata: &[],
    };
    let mut checked = policy::check_services(&input, &spec, &resolved)?;
    for grant in policy::check_env_files(&input, &env_files(&spec.files)?)? {
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

/// Every `env_file` of the Compose files as written, with the host path Compose reads: the
/// resolved project no longer names them (their lines are in `environment`). Relative paths
/// are the file's folder's, as Compose resolves them.
fn env_files(files: &[PathBuf]) -> Result<Vec<(String, String, PathBuf)>> {
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).map_err(|e| Error::io(file, e))?;
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|e| Error::Config {
            file: file.clone(),
            line: None,
            column: None,
            property: None,
            message: format!(
                "yolo cannot read this Compose file to check its env_file entries: {e}"
            ),
        })?;
        let dir = file.parent().unwrap_or(std::path::Path::new("/"));
        let Some(services) = doc.get("services").and_then(serde_yaml::Value::as_mapping) else {
            continue;
        };
        for (name, service) in services {
            let name = name.as_str().unwrap_or_default().to_string();
            let entries = match service.get("env_file") {
                Some(serde_yaml::Value::Sequence(items)) => items.clone(),
                Some(one) => vec![one.clone()],
                None => Vec::new(),
            };
            for entry in entries {
                let written = match &entry {
                    serde_yaml::Value::String(path) => path.clone(),
                    other => match other.get("path").and_then(serde_yaml::Value::as_str) {
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
    /// The session: the siblings' subnets and names (`extra`) on top of the allowlist, and the
    /// names Docker's embedded DNS answers.
    Session {
        extra: Vec<String>,
        names: Vec<String>,
    },
}

/// Where yolo writes the project file: its data folder, never the repository.
fn project_file_path(devcontainer_id: &str) -> PathBuf {
    crate::user_config::data_dir()
        .join("compose")
        .join(format!("{devcontainer_id}.json"))
}

/// Bring the project up with the guard `guard` (made, not started; None with `--network none`),
/// which `start_guard` starts: for the build of the services' images (their RUN steps in its
/// namespace), then, once it is attached to the project's networks, for the session. Returns
/// the dev service's container id. On failure, what Compose made is taken down again.
pub(crate) async fn start<F, Fut>(
    engine: &Engine,
    project: &Project,
    prepared: &Prepared,
    mode: NetworkMode,
    guard: Option<&str>,
    start_guard: F,
) -> Result<Started>
where
    F: Fn(GuardPhase) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let spec = &project.spec;
    let mut plan = FilePlan {
        spec,
        compose: &prepared.spec,
        checked: &prepared.checked,
        mode,
        guard: guard.map(|_| network::guard_name(project)),
        workspace_target: compose::workspace_target(
            &prepared.resolved,
            &prepared.spec.service,
            &spec.workspace,
        ),
        build_network: prepared
            .compose
            .cli
            .build_network(guard.map(|_| network::guard_name(project)).as_deref()),
        shim: None,
    };
    let path = project_file_path(&spec.devcontainer_id);
    write_file(&path, &prepared.resolved, &plan)?;
    let run = prepared.compose.with_file(&path);
    let result = bring_up(
        engine,
        project,
        prepared,
        &run,
        &mut plan,
        &path,
        start_guard,
    )
    .await;
    if result.is_err() {
        // What this start made goes; the guard is `up`'s to undo.
        if let Err(e) = run
            .run(&["down", "--volumes", "--remove-orphans", "--timeout", "5"])
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

/// What `start` made: the dev service's container, and why its execs are not recorded.
pub(crate) struct Started {
    pub(crate) id: String,
    pub(crate) audit_off: Option<String>,
}

fn write_file(path: &std::path::Path, resolved: &serde_yaml::Value, plan: &FilePlan) -> Result<()> {
    let file = compose::project_file(resolved, plan)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    let text = serde_json::to_string_pretty(&file).map_err(|e| Error::other(e.to_string()))?;
    std::fs::write(path, text).map_err(|e| Error::io(path, e))
}

/// The exec audit's shim for the dev service, once its image is here (built or pulled); or why
/// there is none.
async fn shim(
    engine: &Engine,
    project: &Project,
    prepared: &Prepared,
    run: &Compose,
    guard: bool,
) -> Result<std::result::Result<compose::Shim, String>> {
    let spec = &project.spec;
    if !guard {
        return Ok(Err("`--network none` runs no guard to record them".into()));
    }
    if !spec.exec_audit {
        return Ok(Err("`[audit] exec = false` in yolo's config".into()));
    }
    let name = &prepared.spec.service;
    let service = &prepared.resolved["services"][name.as_str()];
    let (entrypoint, command) = if spec.override_command {
        (Vec::new(), crate::engine::compose::keep_alive())
    } else {
        let image = service
            .get("image")
            .and_then(serde_yaml::Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| run.cli.image_name(&run.project, name));
        let image = engine.image_command(&image).await?;
        let Some(command) = compose::dev_command(service, image) else {
            return Ok(Err(format!(
                "yolo cannot tell what the service \"{name}\" runs (its image is not here yet, or its entrypoint or command is a string rather than a list)"
            )));
        };
        command
    };
    Ok(Ok(compose::Shim {
        host_dir: crate::engine::guard_image::shim_dir()?,
        entrypoint,
        command,
    }))
}

#[allow(clippy::too_many_arguments)]
async fn bring_up<F, Fut>(
    engine: &Engine,
    project: &Project,
    prepared: &Prepared,
    run: &Compose,
    plan: &mut FilePlan<'_>,
    path: &std::path::Path,
    start_guard: F,
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
    build(engine, project, prepared, run, guard, &start_guard).await?;
    let audit_off = match shim(engine, project, prepared, run, guard.is_some()).await? {
        Ok(shim) => {
            plan.shim = Some(shim);
            write_file(path, &prepared.resolved, plan)?;
            None
        }
        Err(why) => Some(why),
    };
    let mut create = vec!["up", "--no-start"];
    if project.settings.rebuild {
        create.push("--force-recreate");
    }
    let args = with(&create);
    run.run(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .await?;
    let mut extra = Vec::new();
    let siblings: Vec<String> = prepared
        .checked
        .services
        .iter()
        .filter(|s| **s != prepared.spec.service)
        .cloned()
        .collect();
    if let Some(guard) = guard {
        for net in engine.compose_networks(&run.project).await? {
            if net.egress {
                continue;
            }
            engine.connect_network(&net.name, guard).await?;
            extra.extend(net.subnets);
        }
        extra.extend(siblings.iter().cloned());
    }
    start_guard(GuardPhase::Session {
        extra,
        names: siblings,
    })
    .await?;
    engine
        .set_limits(&spec.container_name, &fit_to_host(engine, spec).await?)
        .await?;
    let args = with(&["up", "--detach", "--no-recreate"]);
    run.run(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .await?;
    Ok(Started {
        id: engine.inspect_id(&spec.container_name).await?,
        audit_off,
    })
}

/// Build the images of the services that start and build, when one is missing or `--rebuild`:
/// behind the guard started for the build (v1; the v2 plugin's BuildKit cannot join its
/// namespace, so there the RUN steps get no network), stopped again after it.
async fn build<F, Fut>(
    engine: &Engine,
    project: &Project,
    prepared: &Prepared,
    run: &Compose,
    guard: Option<&str>,
    start_guard: &F,
) -> Result<()>
where
    F: Fn(GuardPhase) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let starting = services(prepared);
    let mut builds = Vec::new();
    let mut missing = false;
    for name in &prepared.checked.services {
        let service = &prepared.resolved["services"][name.as_str()];
        if service.get("build").is_none() || !(starting.is_empty() || starting.contains(name)) {
            continue;
        }
        let image = service
            .get("image")
            .and_then(serde_yaml::Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| run.cli.image_name(&run.project, name));
        missing |= !engine.image_exists(&image).await?;
        builds.push(name.as_str());
    }
    if builds.is_empty() || !(missing || project.settings.rebuild) {
        return Ok(());
    }
    if let Some(_guard) = guard {
        start_guard(GuardPhase::Build).await?;
    }
    let mut args = vec!["build"];
    args.extend(builds);
    let built = run.run(&args).await;
    if let Some(guard) = guard {
        engine.stop(guard).await?;
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
