//! Bringing a session up (`yolo up`, and `yolo run` before its agent), one step per file:
//! - `plan`: what to do with the containers found, pure;
//! - `act`: the plan carried out, in order, by one of the `strategy` files (a Compose project,
//!   an image built behind the guard, or an image made first); `rollback` undoes a failed or
//!   interrupted one;
//! - `image` (pull, or build behind the guard), `features`, `metadata` (the image's label);
//! - `compose` (a Compose project's services), `network` (allowlist, guard config, bridges),
//!   `guard` (the guard container), `agent` (the agent container), `ports`, `volumes`;
//! - `hooks`: the lifecycle commands, on the host and in the container.
//!
//! `up` below is the sequence: the workspace's `Session` (lock, state, watched files), the
//! image's metadata, approval, Features, Compose, the allowlist, the plan, then `act`.

mod act;
pub(crate) mod agent;
pub(crate) mod attach;
pub(crate) mod compose;
pub(crate) mod features;
mod guard;
pub(crate) mod hooks;
mod image;
pub(crate) mod metadata;
pub(crate) mod network;
mod plan;
pub(crate) mod pod;
pub(crate) mod ports;
mod rollback;
mod strategy;
pub(crate) mod volumes;

use crate::agents::Agent;
use crate::engine::{Engine, Owner};
use crate::error::{Error, Result};
use crate::firewall::{mode_name, NetworkMode};
use crate::interrupt;
use crate::project::Project;
use crate::session::{approval, Hold, Session};
use act::Act;
use plan::{image_label, network_mode, plan, Plan, PlanOptions};
use rollback::roll_back;

/// What `up` did: printed for humans, and the source of `up --json` (`output::Up`).
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) container_id: String,
    pub(crate) container_name: String,
    pub(crate) image: String,
    pub(crate) workspace_folder: String,
    pub(crate) remote_user: Option<String>,
    pub(crate) session: String,
    /// created, started, running
    pub(crate) action: String,
    /// Why the container was started or recreated (none for a first create or a reuse).
    pub(crate) reason: Option<String>,
    /// The config changed since the container was made (and `--rebuild` was not given).
    pub(crate) stale: bool,
    /// firewall, open or none.
    pub(crate) network: String,
    /// The repository's requests the container was made without (`policy`, and an
    /// `initializeCommand` nobody could approve).
    pub(crate) declined: Vec<crate::run_spec::Declined>,
    /// The credentials the guard adds on their hosts, the agent holding stand-ins (issue 25):
    /// their names and hosts, never a value.
    pub(crate) credentials: Vec<crate::output::KeptOutside>,
}

/// The credentials this session's guard holds (those its config names, as the state kept
/// them), with their hosts, for `up` to say which keys stay outside.
fn kept_outside(
    prepared: Option<&crate::http_session::Prepared>,
    state: Option<&crate::session::state::HttpState>,
) -> Vec<crate::output::KeptOutside> {
    let (Some(prepared), Some(state)) = (prepared, state) else {
        return Vec::new();
    };
    prepared
        .session
        .config
        .credentials
        .iter()
        .filter(|c| state.credentials.contains(&c.name))
        .map(|c| crate::output::KeptOutside {
            name: c.name.clone(),
            hosts: c.hosts.iter().map(|h| h.to_string()).collect(),
        })
        .collect()
}

/// Bring the project's container up; shared by `up` and `run` (which adds its agent, whose
/// domains join the allowlist).
///
/// One `up` at a time per workspace (`lock`): a second waits. A failed or interrupted `up`
/// removes what it made (`roll_back`).
///
/// `project` ends up evaluated with the image's `devcontainer.metadata` label
/// (`Project::with_metadata`): read before planning when the image is there, so the config hash
/// is the same on every `up`, and again once a pull or build made it, before the agent
/// container is created from it.
pub(crate) async fn up(
    engine: &Engine,
    project: &mut Project,
    agents: &[Agent],
) -> Result<Outcome> {
    let mut session = Session::at(project.located().clone(), Hold::Lock("up")).await?;
    let engine = &engine.for_platform(project.spec.platform.as_deref());
    let image = image_label(&project.spec.image);
    // What yolo made for this workspace is read alongside the image's label: which containers
    // are yolo's does not depend on the label (`Owner` is the workspace and its config).
    let owner = Owner::of(&project.spec);
    let (merged, found) = tokio::join!(
        crate::bring_up::metadata::with_image(engine, project, &image),
        engine.find(&owner)
    );
    if let Some(merged) = merged? {
        *project = merged;
    }
    let mut found = found;
    let paused = |found: &Result<crate::engine::Found>| {
        found.as_ref().is_ok_and(|f| {
            [&f.agent, &f.guard]
                .into_iter()
                .flatten()
                .any(|c| c.state == "paused")
        })
    };
    // What changed in the files the host runs since yolo last looked (say, in VS Code between
    // two runs) goes to the session it happened in.
    session.report_watched()?;
    let first_use = approval::first_use(project, &session.state)?;
    approval::check(project, &mut session.state)?;
    session.save()?;
    // A session a checkpoint left paused, resumed: only once the config is approved (a
    // refused one leaves it as it was).
    if paused(&found)
        && crate::session::checkpoints::resume_paused(engine, project.located()).await?
    {
        found = engine.find(&owner).await;
    }
    // The Features, fetched on the host before any container is made; what they ask for meets
    // the policy with the image's metadata now, so a refusal leaves nothing made or built.
    let fetched = features::fetch(project).await?;
    // A Compose project is read and every service checked before anything is made too; the
    // image whose label counts is then its dev service's (when Compose has made it already).
    // With an initializeCommand, which may write the Compose files (from a template, say), they
    // are read again once it has run (`Act::fresh`), as the reference CLI reads them; now only
    // if they are all there already.
    let reread_compose =
        project.spec.initialize_command.is_some() && project.spec.compose.is_some();
    let missing = project
        .spec
        .compose
        .iter()
        .flat_map(|c| &c.files)
        .any(|f| !f.exists());
    let prepared = if reread_compose && missing {
        None
    } else {
        crate::bring_up::compose::prepare(project).await?
    };
    let image = prepared.as_ref().map_or(image, |p| p.dev_image());
    if !fetched.is_empty() || prepared.is_some() {
        if let Some(merged) = features::with_metadata(engine, project, &image, &fetched).await? {
            *project = merged;
        }
    }
    let spec = &project.spec;
    // Checked before any Docker work, so a bad pattern changes nothing.
    let allow = network::allowlist(project, &with_default_agent(project, agents))?;

    let found = found?;
    let mode = network_mode(project.settings.network, found.agent.as_ref());
    if project.settings.network.is_none() && mode != NetworkMode::default() {
        eprintln!(
            "{} {} keeps its network mode {}; pass --network to change it",
            console::style("yolo:").bold(),
            spec.container_name,
            mode_name(mode)
        );
    }
    if mode == NetworkMode::Learn {
        eprintln!(
            "{} network learn: nothing is filtered and every name the agent looks up is recorded; `yolo firewall suggest` turns the session into an allowlist",
            console::style("yolo:").bold(),
        );
    }
    let options = PlanOptions {
        mode,
        rebuild: project.settings.rebuild,
        config_hash: spec.config_hash.clone(),
        session_open: session.state.session.is_some(),
    };
    let plan = plan(&found, &options);
    // The credentials are read on the host now, before any Docker work: a bad section changes
    // nothing. Without a guard (`--network none`) nothing is inspected.
    let http = match mode {
        NetworkMode::None => None,
        _ => crate::http_session::prepare(project, agents)?,
    };
    let act = Act {
        engine,
        project: &*project,
        mode,
        allow: &allow,
        fetched: &fetched,
        compose: prepared.as_ref(),
        reread_compose,
        first_use,
        http: http.as_ref(),
    };
    // From here on a signal is handled: the hooks' commands are stopped in the container
    // (`Engine::exec`), and what this `up` made is removed.
    let _handled = interrupt::Handled::enter();
    // A reuse makes nothing (and stays one Docker call away from done).
    let before = match plan {
        Plan::Fresh { .. } => Some(engine.made_for(&Owner::of(spec)).await?),
        Plan::Reuse { .. } => None,
    };
    let session_before = session.state.session.clone();
    let carried = tokio::select! {
        // The signal first: one already received must stop `up` before it removes anything.
        biased;
        signal = interrupt::received() => Err(Error::interrupted(signal)),
        ready = act.carry_out(&plan, &mut session.state) => ready,
    };
    let mut ready = match (carried, before) {
        (Ok(ready), _) => ready,
        (Err(e), Some(before)) => {
            roll_back(engine, project, &before, &mut session, session_before, &e).await;
            return Err(e);
        }
        (Err(e), None) => return Err(e),
    };
    if let Some(merged) = ready.merged.take() {
        *project = merged;
    }
    let project = &*project;
    let spec = &project.spec;
    let fresh = matches!(plan, Plan::Fresh { .. });
    // The session's events shipped as they happen (`[audit] otlp_endpoint`, `ocsf_file`): a
    // process of its own that reads the log; one that runs already for the session keeps it.
    if project.settings.export.any() {
        let shipper = crate::audit::export::ship::spawn(
            ready.writer.session(),
            &spec.workspace,
            &spec.config_file,
            spec.copy.as_deref(),
        );
        if let Err(e) = shipper {
            eprintln!(
                "{} the audit export could not start: {e}; the local log is kept as always",
                console::style("warning:").yellow().bold()
            );
        }
    }
    let mut declined = spec.declined.clone();
    // What the Compose dev service asked for and its container was made without.
    for d in prepared.iter().flat_map(|p| p.declined()) {
        if !declined.contains(d) {
            declined.push(d.clone());
        }
    }
    if fresh {
        declined.extend(approval::host_command_declined(project));
    }
    print_declined(&declined);
    // The session record says what its container was made without.
    if fresh {
        for d in &declined {
            ready.writer.write(crate::audit::EventKind::Notice {
                message: format!("declined: {}", declined_line(d)),
            })?;
        }
    }
    match &http {
        Some(prepared) => {
            // The guard is ready: its proxy gets the session's secrets (a kept guard only if a
            // restart lost them), before any hook of the container runs.
            let guard = engine.find(&Owner::of(spec)).await?.guard;
            if let Some(guard) = guard.filter(|g| g.running) {
                crate::http_session::after_up(
                    engine,
                    project,
                    &guard.id,
                    fresh,
                    prepared,
                    &mut session.state,
                )
                .await?;
            }
        }
        None if fresh => session.state.http = None,
        None => {}
    }
    session.save()?;
    // A new session starts with a checkpoint of its working tree (`yolo rollback N`).
    if session.state.session != session_before && !ready.checkpointed {
        crate::session::checkpoints::at_start(engine, &session).await;
    }
    let credentials = kept_outside(http.as_ref(), session.state.http.as_ref());
    let warnings: Vec<String> = spec
        .container_env
        .iter()
        .filter_map(|(var, value)| crate::http_session::secret_warning(var, value))
        .collect();
    crate::http_session::warn(&warnings, Some(&ready.writer));

    let outcome = Outcome {
        container_id: ready.container_id.clone(),
        container_name: spec.container_name.clone(),
        image: ready.image,
        workspace_folder: spec.workspace_folder.clone(),
        remote_user: project.remote_user(),
        session: ready.writer.session().to_string(),
        action: plan.action().to_string(),
        reason: plan.reason().map(|r| r.to_string()),
        stale: plan.stale(),
        network: mode_name(mode).to_string(),
        declined,
        credentials,
    };
    let result = hooks::in_container(
        engine,
        project,
        &mut session.state,
        &ready.container_id,
        &ready.writer,
    )
    .await;
    session.save()?;
    result?;
    Ok(outcome)
}

/// One declined request on one line: where, what, why, and the grant that would honour it.
fn declined_line(d: &crate::run_spec::Declined) -> String {
    use crate::visible::escape_controls as v;
    let at = match d.line {
        Some(line) => format!("{}:{line}", d.file.display()),
        None => d.file.display().to_string(),
    };
    let honour = match (&d.grant, &d.hint) {
        (_, Some(hint)) => format!("; to honour it: {}", v(hint)),
        (Some(grant), None) => format!(
            "; to honour it: --grant {}",
            v(&crate::error::shell_word(grant))
        ),
        (None, None) => String::new(),
    };
    format!(
        "{}: \"{}\" asks for {}: {}{honour}",
        v(&at),
        v(&d.property),
        v(&d.value),
        v(&d.reason)
    )
}

/// The one block `up` prints for what the container was made without, with the flags that
/// would honour all the grantable ones at once.
fn print_declined(declined: &[crate::run_spec::Declined]) {
    if declined.is_empty() {
        return;
    }
    let n = declined.len();
    let (requests, were, them) = if n == 1 {
        ("request", "was", "it")
    } else {
        ("requests", "were", "them")
    };
    let mut block = format!(
        "{} {n} {requests} of the repository {were} declined; the container runs without {them}:",
        console::style("yolo:").bold()
    );
    for d in declined {
        block.push_str(&format!("\n  - {}", declined_line(d)));
    }
    let mut grants: Vec<String> = Vec::new();
    for grant in declined
        .iter()
        .filter(|d| d.hint.is_none())
        .filter_map(|d| d.grant.as_ref())
    {
        let flag = format!("--grant {}", crate::error::shell_word(grant));
        if !grants.contains(&flag) {
            grants.push(flag);
        }
    }
    if !grants.is_empty() {
        block.push_str(&format!(
            "\n  to honour them: yolo up {} (or [policy] requests = \"refuse\" in {} to stop instead)",
            crate::visible::escape_controls(&grants.join(" ")),
            crate::user_config::UserConfig::path().display()
        ));
    }
    eprintln!("{block}");
}

pub(crate) use crate::project::with_default_agent;
