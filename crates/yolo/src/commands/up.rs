//! `yolo up`: find the project's containers, plan what to do with them (`plan`, pure), then do
//! it (`carry_out`): the image, the guard (verified) before the agent, the session, then the
//! lifecycle hooks. Idempotent: a second `up` reuses what the first made.

use crate::agents::Agent;
use crate::audit::{EventKind, Writer};
use crate::bring_up::{features, hooks, network, volumes};
use crate::cli::Target;
use crate::engine::{Container, Engine, Found, Made, NetworkAttach, Owner, Role};
use crate::error::{Error, Result};
use crate::firewall::control::Request;
use crate::firewall::{mode_name, NetworkMode, PHASE_BUILD};
use crate::interrupt;
use crate::project::Project;
use crate::run_spec::{ImageSource, MountKind, RunSpec};
use crate::session::state::WorkspaceState;
use crate::session::{approval, record, Session};
use crate::settings::UpSettings;
use crate::user_config::UserConfig;
use crate::watched;
use std::fmt;

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
}

pub(crate) async fn execute(
    target: &Target,
    settings: UpSettings,
    user: UserConfig,
    json: bool,
) -> Result<i32> {
    let engine = super::engine_soon();
    let located = super::locate(target)?;
    let mut project = Project::load(&located, settings, user)?;
    let engine = engine.await?;
    let outcome = up(&engine, &mut project, &[]).await?;
    if json {
        crate::output::print(&json_output(&engine, &project, &outcome).await?);
    } else {
        print_outcome(&outcome);
    }
    Ok(0)
}

/// `up --json` (docs/json-output.md): the container and network objects `status` and
/// `firewall` show too, built the same way.
async fn json_output(engine: &Engine, project: &Project, o: &Outcome) -> Result<crate::output::Up> {
    use crate::output::{Container, Network, Up};
    let spec = &project.spec;
    let found = engine.find(&Owner::of(spec)).await?;
    let agent = found.agent.ok_or_else(|| {
        Error::NotRunning(format!(
            "{} disappeared right after `yolo up`; run `yolo up` again",
            o.container_name
        ))
    })?;
    let state = Session::read(&spec.devcontainer_id)?.state;
    Ok(Up {
        container: Container::from_found(&agent, state.exec.as_ref()),
        session: o.session.clone(),
        action: o.action.clone(),
        reason: o.reason.clone(),
        stale: o.stale,
        network: Network::of(&o.network, found.guard.as_ref())
            .ask_allowlist(engine, found.guard.as_ref())
            .await,
    })
}

/// The image and the folder are the repository's words: shown, not obeyed.
fn print_outcome(o: &Outcome) {
    use crate::visible::escape_controls;
    let state = console::style(&o.action).green();
    let why = o
        .reason
        .as_ref()
        .map(|r| format!("; {r}"))
        .unwrap_or_default();
    eprintln!(
        "{} {} {state} ({}{why}), workspace at {}; `yolo exec`, `yolo shell` or `yolo run <agent>` to use it",
        console::style("yolo:").bold(),
        o.container_name,
        escape_controls(&o.image),
        escape_controls(&o.workspace_folder)
    );
    if o.stale {
        eprintln!(
            "{} the dev container config changed since this container was created; run `yolo up --rebuild` to recreate it",
            console::style("warning:").yellow().bold()
        );
    }
}

/// Why the agent's execs are not recorded in this session, if they are not.
fn exec_audit_off(spec: &RunSpec, network: &NetworkAttach) -> Option<&'static str> {
    if !matches!(network, NetworkAttach::Container(_)) {
        Some("`--network none` runs no guard to record them")
    } else if spec.host_modes.contains_key("pid") {
        Some("the container is in the host's PID namespace (a granted --pid host)")
    } else if !spec.exec_audit {
        Some("`[audit] exec = false` in yolo's config")
    } else {
        None
    }
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
    let mut session = Session::lock(&project.spec.devcontainer_id, "up").await?;
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
    // What changed in the files the host runs since yolo last looked (say, in VS Code between
    // two runs) goes to the session it happened in.
    session.report_watched()?;
    let first_use = approval::first_use(project, &session.state)?;
    approval::check(project, &mut session.state)?;
    session.save()?;
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
    let options = PlanOptions {
        mode,
        rebuild: project.settings.rebuild,
        config_hash: spec.config_hash.clone(),
        session_open: session.state.session.is_some(),
    };
    let plan = plan(&found, &options);
    let act = Act {
        engine,
        project: &*project,
        mode,
        allow: &allow,
        fetched: &fetched,
        compose: prepared.as_ref(),
        reread_compose,
        first_use,
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

/// After a failed or interrupted `carry_out`: remove the containers and networks that were not
/// there before it (found by labels, so whatever step failed, and whatever order `Act::fresh`
/// makes things in), the agent first; close the session it opened. What existed before and was
/// kept stays (stopped, if `up` had stopped it); what the plan recreates was removed before the
/// new one was made and is not brought back. Nothing here may hide the original error: a failure
/// is a warning.
async fn roll_back(
    engine: &Engine,
    project: &Project,
    before: &Made,
    session: &mut Session,
    session_before: Option<String>,
    error: &Error,
) {
    let spec = &project.spec;
    let warn = |what: String| {
        eprintln!(
            "{} could not undo this `yolo up` completely: {what}; `yolo down --remove` removes what is left",
            console::style("warning:").yellow().bold()
        )
    };
    let now = match engine.made_for(&Owner::of(spec)).await {
        Ok(now) => now,
        Err(e) => return warn(e.to_string()),
    };
    let made: Vec<&Container> = now
        .containers
        .iter()
        .filter(|c| !before.containers.iter().any(|b| b.id == c.id))
        .collect();
    let new_networks: Vec<_> = now
        .networks
        .iter()
        .filter(|n| !before.networks.iter().any(|b| b.id == n.id))
        .collect();
    let (mut removed, failed) = engine.remove_in_order(made, &new_networks).await;
    for e in failed {
        warn(e.to_string());
    }
    // A guard that was there before but that this `up` (re)started, say with a build's wider
    // allowlist, serves nothing once no agent runs: stopped, so it keeps no opening.
    let agent_runs = now.containers.iter().any(|c| {
        c.role == Role::Agent && c.running && before.containers.iter().any(|b| b.id == c.id)
    });
    if !agent_runs {
        for c in now.containers.iter().filter(|c| {
            c.role == Role::Guard && c.running && before.containers.iter().any(|b| b.id == c.id)
        }) {
            match engine.stop(&c.id).await {
                Ok(()) => removed.push(format!("{} (stopped)", c.name)),
                Err(e) => warn(e.to_string()),
            }
        }
    }
    if session.state.session.is_some() && session.state.session != session_before {
        if let Err(e) = session.close(&format!("yolo up failed: {error}")) {
            warn(e.to_string());
        }
    }
    if let Err(e) = session.save() {
        warn(e.to_string());
    }
    if !removed.is_empty() {
        eprintln!(
            "{} undid what this `yolo up` had made: {}",
            console::style("yolo:").bold(),
            removed.join(", ")
        );
    }
}

/// The network mode of this start: the one asked for, else the one the existing agent container
/// was made for (a `yolo run` after `yolo up --network none` must not quietly turn the network
/// on, nor recreate the container), else the default (firewall).
pub(crate) fn network_mode(asked: Option<NetworkMode>, agent: Option<&Container>) -> NetworkMode {
    asked
        .or_else(|| agent.and_then(|a| a.network))
        .unwrap_or_default()
}

/// What `plan` needs besides the containers found: plain values, no flags.
#[derive(Debug, Clone)]
pub(crate) struct PlanOptions {
    /// The network mode asked for.
    pub(crate) mode: NetworkMode,
    /// Recreate the containers (and rebuild the image).
    pub(crate) rebuild: bool,
    /// The config hash of the RunSpec; an agent made from another is stale.
    pub(crate) config_hash: String,
    /// Whether yolo's state has a session open for the workspace.
    pub(crate) session_open: bool,
}

/// What `up` does with the project's containers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Plan {
    /// The agent runs in the open session: keep both containers; the guard's allowlist is
    /// brought up to date live.
    Reuse {
        agent: String,
        image: String,
        /// None with `--network none`.
        guard: Option<String>,
        stale: bool,
    },
    /// A new session: the guard starts with this session's config (verified), then the agent.
    Fresh {
        agent: AgentStep,
        guard: GuardStep,
        stale: bool,
    },
}

/// The agent container in a new session.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AgentStep {
    /// Start the existing container, stopped first when it runs (it must not stay up in the
    /// old namespace while its guard restarts).
    Start {
        id: String,
        image: String,
        running: bool,
        reason: Reason,
    },
    /// Remove the existing container, make a new one.
    Recreate { id: String, reason: Reason },
    /// Make the first one.
    Create,
}

/// The guard container in a new session.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GuardStep {
    /// Start the existing guard (stopped first when it runs) so it reads the new config.
    Start { id: String, running: bool },
    /// Remove the existing guard, make a new one.
    Recreate { id: String, reason: Reason },
    /// Make the first one.
    Create,
    /// `--network none` needs no guard: remove it.
    Remove { id: String },
    /// None there and none needed.
    Nothing,
}

/// Why a container is started again or recreated, in the user's words.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reason {
    /// `--rebuild`.
    Rebuild,
    /// The agent was made for another network mode (None: its label is missing or unknown).
    NetworkChanged {
        from: Option<NetworkMode>,
        to: NetworkMode,
    },
    /// The agent's guard is gone: Docker joins a namespace by container id, so a new guard
    /// needs a new agent container.
    GuardMissing,
    /// The agent runs but its guard does not: it has had no network (fail closed).
    GuardDown,
    /// The agent runs but yolo has no open session for it (its state was lost).
    NoSession,
    /// The agent container exists, stopped.
    Stopped,
    /// The guard's agent container is gone: a new one gets a new guard, whose network is
    /// chosen for it.
    AgentMissing,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Rebuild => write!(f, "--rebuild"),
            Reason::NetworkChanged {
                from: Some(from),
                to,
            } => write!(
                f,
                "the network mode changed from {} to {}",
                mode_name(*from),
                mode_name(*to)
            ),
            Reason::NetworkChanged { from: None, to } => {
                write!(f, "the network mode changed to {}", mode_name(*to))
            }
            Reason::GuardMissing => write!(f, "its firewall guard was gone"),
            Reason::GuardDown => write!(f, "its firewall guard was not running"),
            Reason::NoSession => write!(f, "it ran without an open yolo session"),
            Reason::Stopped => write!(f, "it was stopped"),
            Reason::AgentMissing => write!(f, "its agent container was gone"),
        }
    }
}

impl Plan {
    /// created, started or running: what happens to the agent container.
    pub(crate) fn action(&self) -> &'static str {
        match self {
            Plan::Reuse { .. } => "running",
            Plan::Fresh {
                agent: AgentStep::Start { .. },
                ..
            } => "started",
            Plan::Fresh { .. } => "created",
        }
    }

    /// Why the agent is started again or recreated.
    pub(crate) fn reason(&self) -> Option<&Reason> {
        match self {
            Plan::Fresh {
                agent: AgentStep::Start { reason, .. } | AgentStep::Recreate { reason, .. },
                ..
            } => Some(reason),
            _ => None,
        }
    }

    /// The config changed since the agent was made, and the agent is kept.
    pub(crate) fn stale(&self) -> bool {
        match self {
            Plan::Reuse { stale, .. } | Plan::Fresh { stale, .. } => *stale,
        }
    }
}

/// Decide what to do with the containers found, without touching anything.
pub(crate) fn plan(found: &Found, options: &PlanOptions) -> Plan {
    let needs_guard = options.mode != NetworkMode::None;
    let (agent, guard) = (found.agent.as_ref(), found.guard.as_ref());
    if let Some(reason) = reset_reason(agent, options) {
        // Both go: a new agent container needs a new guard and the other way round.
        return Plan::Fresh {
            agent: match agent {
                Some(a) => AgentStep::Recreate {
                    id: a.id.clone(),
                    reason: reason.clone(),
                },
                None => AgentStep::Create,
            },
            guard: guard_step(guard, needs_guard, Some(reason)),
            stale: false,
        };
    }
    let stale = agent.is_some_and(|a| a.config_hash.as_deref() != Some(&options.config_hash));
    let guard_down = needs_guard && !guard.is_some_and(|g| g.running);
    if let Some(a) = agent.filter(|a| a.running && options.session_open && !guard_down) {
        return Plan::Reuse {
            agent: a.id.clone(),
            image: a.image.clone(),
            guard: guard.filter(|_| needs_guard).map(|g| g.id.clone()),
            stale,
        };
    }
    let agent_step = agent.map_or(AgentStep::Create, |a| fresh_agent(a, guard, needs_guard));
    // A new agent container gets a new guard too: the guard's network was chosen for the
    // agent it was made with (network::own_bridge_reason), and this one may hold what that
    // choice excluded (a NET_RAW grant on the bridge other projects share).
    let reset = agent.is_none().then_some(Reason::AgentMissing);
    Plan::Fresh {
        stale: stale && !matches!(agent_step, AgentStep::Recreate { .. }),
        agent: agent_step,
        guard: guard_step(guard, needs_guard, reset),
    }
}

/// Why both containers must be made again, if they must: `--rebuild`, or an agent made for
/// another network mode.
fn reset_reason(agent: Option<&Container>, options: &PlanOptions) -> Option<Reason> {
    if options.rebuild {
        return Some(Reason::Rebuild);
    }
    agent
        .filter(|a| a.network != Some(options.mode))
        .map(|a| Reason::NetworkChanged {
            from: a.network,
            to: options.mode,
        })
}

/// The guard in a new session: recreated when `reset` says so, else started (or made).
fn guard_step(guard: Option<&Container>, needs_guard: bool, reset: Option<Reason>) -> GuardStep {
    match (guard, needs_guard, reset) {
        (Some(g), true, Some(reason)) => GuardStep::Recreate {
            id: g.id.clone(),
            reason,
        },
        (Some(g), true, None) => GuardStep::Start {
            id: g.id.clone(),
            running: g.running,
        },
        (None, true, _) => GuardStep::Create,
        (Some(g), false, _) => GuardStep::Remove { id: g.id.clone() },
        (None, false, _) => GuardStep::Nothing,
    }
}

/// An existing agent in a new session: started again, or recreated when its guard is gone.
fn fresh_agent(agent: &Container, guard: Option<&Container>, needs_guard: bool) -> AgentStep {
    let guard_gone = needs_guard && guard.is_none();
    let guard_down = needs_guard && !guard.is_some_and(|g| g.running);
    let reason = match (agent.running, guard_down) {
        (true, true) => Reason::GuardDown,
        (true, false) => Reason::NoSession,
        (false, _) if guard_gone => Reason::GuardMissing,
        (false, _) => Reason::Stopped,
    };
    if guard_gone {
        AgentStep::Recreate {
            id: agent.id.clone(),
            reason,
        }
    } else {
        AgentStep::Start {
            id: agent.id.clone(),
            image: agent.image.clone(),
            running: agent.running,
            reason,
        }
    }
}

/// The agent container, running, in the session of `writer`.
struct Ready {
    container_id: String,
    image: String,
    writer: Writer,
    /// The project evaluated with the metadata of the image a pull or build just made, when
    /// that differs from the one planned with: what the container was created from.
    merged: Option<Project>,
}

/// What carrying out a plan needs.
struct Act<'a> {
    engine: &'a Engine,
    project: &'a Project,
    mode: NetworkMode,
    allow: &'a [String],
    /// The Features, fetched, in install order.
    fetched: &'a features::Fetched,
    /// A Compose config, read and checked.
    compose: Option<&'a crate::bring_up::compose::Prepared>,
    /// The Compose files are read and checked again after initializeCommand.
    reread_compose: bool,
    /// This `up` is the workspace's first (`approval::first_use`).
    first_use: bool,
}

impl Act<'_> {
    async fn carry_out(&self, plan: &Plan, state: &mut WorkspaceState) -> Result<Ready> {
        match plan {
            Plan::Reuse {
                agent,
                image,
                guard,
                ..
            } => {
                let writer =
                    record::current(state)?.ok_or_else(|| Error::other("no open session"))?;
                if let Some(guard) = guard {
                    self.sync_allowlist(guard, state).await?;
                }
                Ok(Ready {
                    container_id: agent.clone(),
                    image: image.clone(),
                    writer,
                    merged: None,
                })
            }
            Plan::Fresh { agent, guard, .. } => self.fresh(agent, guard, state).await,
        }
    }

    /// Open a new session and (re)start everything in order: the old containers out, the
    /// agent's image (built behind the guard), the guard with this session's config (verified),
    /// the agent joined to it.
    async fn fresh(
        &self,
        agent: &AgentStep,
        guard: &GuardStep,
        state: &mut WorkspaceState,
    ) -> Result<Ready> {
        let spec = &self.project.spec;
        // initializeCommand is about to run: the only moment to ask (or, with nobody to ask
        // and no trust, refuse) — before anything is removed, opened or built.
        let approved = approval::confirm_host_command(self.project)?;
        self.clear_out(agent, guard).await?;
        // An agent that was still running until now (its guard was down, or yolo lost its
        // session) could have rewritten an input while the user read the prompt: compared
        // again now that it is stopped, before anything of it runs on the host.
        if spec.initialize_command.is_some() {
            approval::check(self.project, state)?;
        }
        let image_name = match agent {
            AgentStep::Start { image, .. } => image.clone(),
            _ => image_label(&spec.image),
        };
        let writer = record::open(
            self.project,
            state,
            &image_name,
            mode_name(self.mode),
            self.allow,
            "closed by a new start",
        )?;
        state.save(&spec.devcontainer_id)?;
        hooks::initialize(self.project, &writer, approved).await?;
        let reread;
        let compose = if self.reread_compose {
            // Checked by the policy first: a refused file is not recorded as approved.
            reread = crate::bring_up::compose::prepare(self.project).await?;
            if self.first_use {
                // The first use approves what it uses, the generated files included.
                for file in spec.compose.iter().flat_map(|c| &c.files) {
                    approval::note_own_write(self.project, file)?;
                }
            } else {
                // What the command wrote can follow from files the agent writes: a change
                // to the Compose files is shown and asked about like any other.
                approval::check(self.project, state)?;
            }
            reread.as_ref()
        } else {
            self.compose
        };
        // The protected folders the repository lacks: made here, by the user, empty, so the
        // agent cannot be the one to create them (policy::protect); before the guard starts,
        // so its file watcher does not record yolo's own doing as the session's.
        for path in spec.protected.iter().filter(|p| p.create_dir) {
            std::fs::create_dir_all(&path.host).map_err(|e| Error::io(&path.host, e))?;
        }
        // After the host's own initializeCommand: what it writes is not the agent's doing.
        self.watch()?;
        if let Some(prepared) = compose {
            features::record(&writer, self.fetched)?;
            let started = self.fresh_compose(prepared, guard, &writer, state).await?;
            if let Some(why) = started.audit_off {
                writer.write(EventKind::Notice {
                    message: format!("the exec audit is off in this session: {why}"),
                })?;
            }
            return Ok(Ready {
                container_id: started.id,
                image: image_name,
                writer,
                merged: started.merged,
            });
        }
        let settings = &self.project.settings;
        let new_image = !matches!(agent, AgentStep::Start { .. });
        let behind_guard = new_image
            && !settings.build.no_network
            && (self
                .engine
                .build_needed(&spec.image, settings.rebuild)
                .await?
                || self.features_build_needed().await?);
        if new_image {
            features::record(&writer, self.fetched)?;
        }
        // The image's metadata, once the image is there, shapes the container: `merged` and
        // `act` (this start with it) from then on. A refusal here fails the `up`, whose roll
        // back removes what was made.
        let merged: Option<Project>;
        let act: Act;
        let (guard_id, image) = if behind_guard {
            let (guard_id, image) = self.build_behind_guard(guard, &writer).await?;
            merged = self.with_image_metadata(&image).await?;
            act = self.with(merged.as_ref());
            let guard_id = match guard_id {
                Some(id) => act.guard_after_build(spec, id, &writer, state).await?,
                None => None,
            };
            (guard_id, image)
        } else {
            // A pull, an offline build or nothing: the image first, so a failing pull or build
            // leaves no guard behind. A build here has no network (`[build] network = "none"`).
            let image = match agent {
                AgentStep::Start { image, .. } => image.clone(),
                _ => {
                    let base = self
                        .engine
                        .ensure_image(
                            &spec.image,
                            settings.rebuild,
                            &spec.devcontainer_id,
                            &NetworkAttach::None,
                        )
                        .await?;
                    features::install(
                        self.engine,
                        self.project,
                        &base,
                        self.fetched,
                        &NetworkAttach::None,
                        settings.rebuild,
                    )
                    .await?
                }
            };
            merged = self.with_image_metadata(&image).await?;
            act = self.with(merged.as_ref());
            // The guard made (not started) first: the agent is created while it starts. A
            // new agent whose first program is the shim's `start` is started as soon as the
            // guard runs (it needs the guard's namespaces, nothing more): that program waits
            // for the guard's supervisor, which opens last, once the firewall holds. Any other
            // agent starts only once the guard says it is ready.
            let guard_id = act.make_guard(guard, false).await?;
            let network = guard_id
                .clone()
                .map_or(NetworkAttach::None, NetworkAttach::Container);
            let (launched, made) = tokio::join!(
                act.launch_guard(guard_id.as_deref(), &writer),
                act.make_agent(agent, &image, &network, state)
            );
            launched?;
            let (id, waits) = made?;
            if let Some(guard_id) = &guard_id {
                state.allowlist = Some(act.allow.to_vec());
                let ready = network::wait_guard(self.engine, guard_id, writer.session());
                if waits {
                    let (ready, started) = tokio::join!(ready, self.engine.start(&id));
                    ready?;
                    started?;
                } else {
                    ready.await?;
                    self.engine.start(&id).await?;
                }
            } else {
                self.engine.start(&id).await?;
            }
            act.note_audit_off(&writer, &network)?;
            return Ok(Ready {
                container_id: id,
                image,
                writer,
                merged,
            });
        };
        let network = guard_id.map_or(NetworkAttach::None, NetworkAttach::Container);
        let container_id = act.agent(agent, &image, &network, state).await?;
        act.note_audit_off(&writer, &network)?;
        Ok(Ready {
            container_id,
            image,
            writer,
            merged,
        })
    }

    /// A notice on the session's record when the agent's execs are not recorded.
    fn note_audit_off(&self, writer: &Writer, network: &NetworkAttach) -> Result<()> {
        if let Some(why) = exec_audit_off(&self.project.spec, network) {
            writer.write(EventKind::Notice {
                message: format!("the exec audit is off in this session: {why}"),
            })?;
        }
        Ok(())
    }

    /// The guard of this start made, or a kept one stopped (so it reads the new session's
    /// config when it starts); its id, or None without one. `builds`: an image is built behind
    /// it first.
    async fn make_guard(&self, step: &GuardStep, builds: bool) -> Result<Option<String>> {
        match step {
            GuardStep::Start { id, running } => {
                if *running {
                    self.engine.stop(id).await?;
                }
                Ok(Some(id.clone()))
            }
            GuardStep::Recreate { .. } | GuardStep::Create => Ok(Some(
                network::create_guard(self.engine, self.project, builds).await?,
            )),
            GuardStep::Remove { .. } | GuardStep::Nothing => Ok(None),
        }
    }

    /// Start the guard `make_guard` made with this session's config (not waiting until it is
    /// ready: `network::wait_guard` does). False without a guard.
    async fn launch_guard(&self, id: Option<&str>, writer: &Writer) -> Result<bool> {
        let Some(id) = id else {
            return Ok(false);
        };
        let allow = self.allow.to_vec();
        let config = network::guard_config(self.project, self.mode, writer.session(), allow, None);
        network::launch_guard(self.engine, self.project, id, &config).await?;
        Ok(true)
    }

    /// The agent container, made (not started): a new one, or the stopped one kept.
    async fn make_agent(
        &self,
        step: &AgentStep,
        image: &str,
        network: &NetworkAttach,
        state: &mut WorkspaceState,
    ) -> Result<(String, bool)> {
        let (engine, spec) = (self.engine, &self.project.spec);
        if let AgentStep::Start { id, .. } = step {
            return Ok((id.clone(), false));
        }
        state.created_hooks_done_for = None;
        state.post_start_done_for = None;
        state.save(&spec.devcontainer_id)?;
        // A remote engine: the repository copied into its volume, if new (docs/remote.md).
        super::sync::seed(engine, self.project, image).await?;
        volumes::create(self.engine, &self.project.spec).await?;
        let mut spec = self.fit_to_host().await?;
        if crate::remote::uses_copy(&spec) {
            spec.protected = engine.protect_copy(&spec, image).await?;
        }
        engine.create_agent(&spec, image, network, self.mode).await
    }

    /// This start with `project` instead, when there is one.
    fn with<'b>(&'b self, project: Option<&'b Project>) -> Act<'b> {
        Act {
            engine: self.engine,
            project: project.unwrap_or(self.project),
            mode: self.mode,
            allow: self.allow,
            fetched: self.fetched,
            compose: self.compose,
            reread_compose: self.reread_compose,
            first_use: self.first_use,
        }
    }

    /// The project with the metadata of the agent's `image`: its label; with Features, the
    /// base image's label and the Features' entries, as they were checked before planning (the
    /// image with Features repeats them in its label, for VS Code).
    async fn with_image_metadata(&self, image: &str) -> Result<Option<Project>> {
        if self.fetched.is_empty() {
            return crate::bring_up::metadata::with_image(self.engine, self.project, image).await;
        }
        let base = image_label(&self.project.spec.image);
        features::with_metadata(self.engine, self.project, &base, self.fetched).await
    }

    /// Whether installing the Features runs their scripts (a build): the base image is made
    /// first if missing (a pull runs nothing; a base that needs a build is built behind the
    /// guard anyway, so this is not asked then).
    async fn features_build_needed(&self) -> Result<bool> {
        if self.fetched.is_empty() {
            return Ok(false);
        }
        let spec = &self.project.spec;
        let rebuild = self.project.settings.rebuild;
        let base = self
            .engine
            .ensure_image(
                &spec.image,
                rebuild,
                &spec.devcontainer_id,
                &NetworkAttach::None,
            )
            .await?;
        features::build_needed(self.engine, self.project, &base, self.fetched, rebuild).await
    }

    /// A Compose project in place of the agent's image and container: the guard made (or kept),
    /// started by `compose::start` once attached to the project's networks, with the
    /// siblings' subnets and names allowed on top of this session's allowlist.
    async fn fresh_compose(
        &self,
        prepared: &crate::bring_up::compose::Prepared,
        guard: &GuardStep,
        writer: &Writer,
        state: &mut WorkspaceState,
    ) -> Result<crate::bring_up::compose::Started> {
        // By name from here on: `compose::start` may make it again.
        let guard_id = match guard {
            GuardStep::Start { id, running } => {
                if *running {
                    self.engine.stop(id).await?;
                }
                Some(network::guard_name(self.project))
            }
            GuardStep::Recreate { .. } | GuardStep::Create => {
                // A Compose guard runs the services' builds whenever one is needed.
                network::create_guard(self.engine, self.project, true).await?;
                Some(network::guard_name(self.project))
            }
            GuardStep::Remove { .. } | GuardStep::Nothing => None,
        };
        let start_guard = |phase: crate::bring_up::compose::GuardPhase| {
            let guard_id = guard_id.clone();
            async move {
                let Some(id) = guard_id else {
                    return Ok(());
                };
                let (allow, names, published, phase) = match phase {
                    crate::bring_up::compose::GuardPhase::Build => (
                        self.build_allow(writer)?,
                        Vec::new(),
                        None,
                        Some(PHASE_BUILD),
                    ),
                    crate::bring_up::compose::GuardPhase::Session {
                        extra,
                        names,
                        published,
                    } => {
                        let mut allow = self.allow.to_vec();
                        allow.extend(extra);
                        (allow, names, Some(published), None)
                    }
                };
                let mut config =
                    network::guard_config(self.project, self.mode, writer.session(), allow, phase);
                config.local_names = names;
                if let Some(published) = published {
                    config.published_ports = published;
                }
                network::start_guard(self.engine, self.project, &id, &config).await
            }
        };
        let started = crate::bring_up::compose::start(
            self.engine,
            self.project,
            prepared,
            self.fetched,
            self.mode,
            guard_id.as_deref(),
            start_guard,
        )
        .await?;
        if guard_id.is_some() {
            // The siblings' patterns stay out: a live sync must never deny them.
            state.allowlist = Some(self.allow.to_vec());
        }
        Ok(started)
    }

    /// The spec with its limits fitted to the engine's machine: CPUs leave the host a core
    /// (unless the user asked for them), and the disk limit only where the driver has one.
    async fn fit_to_host(&self) -> Result<RunSpec> {
        let mut spec = self.project.spec.clone();
        let host = self.engine.host_facts().await?;
        let (cpus, why) = crate::policy::fit_cpus(spec.limits.cpus, spec.cpus_chosen_by, host.cpus);
        if let Some(why) = why {
            eprintln!("{} {why}", console::style("yolo:").bold());
        }
        spec.limits.cpus = cpus;
        if !host.can_limit_disk() {
            spec.disk_bytes = None;
        }
        Ok(spec)
    }

    /// The baseline of the files the host runs, before anything of this session can write them.
    fn watch(&self) -> Result<()> {
        let spec = &self.project.spec;
        let mount = &spec.workspace_mount;
        if mount.kind != MountKind::Bind {
            return Ok(());
        }
        watched::start(
            &spec.devcontainer_id,
            std::path::Path::new(&mount.source),
            &self.project.settings.watch,
        )
    }

    /// What goes before a new session: removed what is recreated or not needed, stopped a
    /// running agent. The agent first: it must never run on without its guard.
    async fn clear_out(&self, agent: &AgentStep, guard: &GuardStep) -> Result<()> {
        let engine = self.engine;
        match agent {
            AgentStep::Start {
                id,
                running,
                reason,
                ..
            } => {
                self.warn_if_guard_down(reason);
                if *running {
                    engine.stop(id).await?;
                }
            }
            AgentStep::Recreate { id, reason } => {
                self.warn_if_guard_down(reason);
                engine.remove(id).await?;
            }
            AgentStep::Create => {}
        }
        if let GuardStep::Recreate { id, .. } | GuardStep::Remove { id } = guard {
            engine.remove(id).await?;
        }
        Ok(())
    }

    fn warn_if_guard_down(&self, reason: &Reason) {
        if *reason == Reason::GuardDown {
            eprintln!(
                "{} the firewall guard of {} is not running, so its agent container has had no network (fail closed); restarting both",
                console::style("warning:").yellow().bold(),
                self.project.spec.container_name
            );
        }
    }

    /// Start the agent container, or make it (fresh hook state, volumes) joined to `network`.
    async fn agent(
        &self,
        step: &AgentStep,
        image: &str,
        network: &NetworkAttach,
        state: &mut WorkspaceState,
    ) -> Result<String> {
        let (id, _) = self.make_agent(step, image, network, state).await?;
        self.engine.start(&id).await?;
        Ok(id)
    }

    /// Build the image with its RUN steps in the guard's network namespace (`none` without a
    /// guard), the guard holding the project's allowlist plus the build's own (`[build]`) and
    /// stamping its events `phase: build`; the guard's id, still in its build phase, for
    /// `guard_after_build` to start again with the agent's config (a new namespace with empty
    /// sets, so nothing the build opened stays open for the agent). A failed build stops the
    /// guard it started (and removes one made for it).
    async fn build_behind_guard(
        &self,
        step: &GuardStep,
        writer: &Writer,
    ) -> Result<(Option<String>, String)> {
        let spec = &self.project.spec;
        let allow = self.build_allow(writer)?;
        let guard = self
            .start_guard(step, writer, allow, Some(PHASE_BUILD))
            .await?;
        let network = guard
            .clone()
            .map_or(NetworkAttach::None, NetworkAttach::Container);
        let rebuild = self.project.settings.rebuild;
        let built = match self
            .engine
            .ensure_image(&spec.image, rebuild, &spec.devcontainer_id, &network)
            .await
        {
            Ok(base) => {
                features::install(
                    self.engine,
                    self.project,
                    &base,
                    self.fetched,
                    &network,
                    rebuild,
                )
                .await
            }
            Err(e) => Err(e),
        };
        let image = match built {
            Ok(image) => image,
            Err(e) => {
                if let Some(id) = &guard {
                    self.drop_build_guard(step, id).await;
                }
                return Err(e);
            }
        };
        Ok((guard, image))
    }

    /// The guard that ran the build (`id`), restarted for the session of this start (`self`:
    /// the project with the built image's metadata). Docker fixes a container's published ports
    /// when it is made: when the image's label forwards other ports than planned, the guard is
    /// made again (nothing runs in its namespace yet).
    async fn guard_after_build(
        &self,
        planned: &RunSpec,
        id: String,
        writer: &Writer,
        state: &mut WorkspaceState,
    ) -> Result<Option<String>> {
        // A guard that built is on a bridge of the project's own (`network::own_bridge_reason`),
        // so grants the image's metadata adds cannot put the agent on the shared one.
        if planned.ports == self.project.spec.ports {
            let again = GuardStep::Start { id, running: true };
            return self.guard(&again, writer, state).await;
        }
        self.engine.remove(&id).await?;
        self.guard(&GuardStep::Create, writer, state).await
    }

    /// What a build's RUN steps may reach: with the firewall, the allowlist plus the build's own
    /// (`[build]`), noted in the log; otherwise the session's list as it is.
    fn build_allow(&self, writer: &Writer) -> Result<Vec<String>> {
        match self.mode {
            NetworkMode::Firewall => {
                let allow = network::build_allowlist(self.project, self.allow)?;
                self.note_build_additions(&allow, writer)?;
                Ok(allow)
            }
            NetworkMode::Open | NetworkMode::None => Ok(self.allow.to_vec()),
        }
    }

    /// The session_start lists the agent's allowlist; the log also says what the build adds.
    fn note_build_additions(&self, build_allow: &[String], writer: &Writer) -> Result<()> {
        let extra: Vec<&str> = build_allow
            .iter()
            .filter(|p| !self.allow.contains(p))
            .map(String::as_str)
            .collect();
        let extra = if extra.is_empty() {
            "nothing".to_string()
        } else {
            extra.join(" ")
        };
        writer.write(EventKind::Notice {
            message: format!(
                "the image builds behind the firewall; besides the allowlist, its RUN steps may reach: {extra}"
            ),
        })
    }

    /// After a failed build: the guard stopped, and removed if this start made it.
    async fn drop_build_guard(&self, step: &GuardStep, id: &str) {
        let made = matches!(step, GuardStep::Create | GuardStep::Recreate { .. });
        let result = if made {
            self.engine.remove(id).await
        } else {
            self.engine.stop(id).await
        };
        if let Err(e) = result {
            eprintln!(
                "{} the firewall guard started for the failed build was not {}: {e}",
                console::style("warning:").yellow().bold(),
                if made { "removed" } else { "stopped" }
            );
        }
    }

    /// Bring the guard up with this session's config; its id, or None without one.
    async fn guard(
        &self,
        step: &GuardStep,
        writer: &Writer,
        state: &mut WorkspaceState,
    ) -> Result<Option<String>> {
        let id = self
            .start_guard(step, writer, self.allow.to_vec(), None)
            .await?;
        if id.is_some() {
            state.allowlist = Some(self.allow.to_vec());
        }
        Ok(id)
    }

    /// Start (or make and start) the guard with `allow` in `phase`; its id, or None without one.
    async fn start_guard(
        &self,
        step: &GuardStep,
        writer: &Writer,
        allow: Vec<String>,
        phase: Option<&str>,
    ) -> Result<Option<String>> {
        let Some(id) = self.make_guard(step, phase.is_some()).await? else {
            return Ok(None);
        };
        let config = network::guard_config(self.project, self.mode, writer.session(), allow, phase);
        network::start_guard(self.engine, self.project, &id, &config).await?;
        Ok(Some(id))
    }

    /// Bring a running guard from the allowlist it was given to the one configured now.
    /// Patterns the user added live with `yolo allow` were never in the old list, so they stay.
    async fn sync_allowlist(&self, guard: &str, state: &mut WorkspaceState) -> Result<()> {
        let now = self.allow;
        if state.allowlist.as_deref() == Some(now) {
            return Ok(());
        }
        let before = state.allowlist.as_deref().unwrap_or_default();
        let added: Vec<String> = now
            .iter()
            .filter(|p| !before.contains(p))
            .cloned()
            .collect();
        let removed: Vec<String> = before
            .iter()
            .filter(|p| !now.contains(p))
            .cloned()
            .collect();
        if !added.is_empty() {
            network::control(self.engine, guard, &Request::Allow { patterns: added }).await?;
        }
        if !removed.is_empty() {
            network::control(self.engine, guard, &Request::Deny { patterns: removed }).await?;
        }
        state.allowlist = Some(now.to_vec());
        Ok(())
    }
}

/// The agents whose domains the allowlist includes: those named, else the repository's default.
pub(super) fn with_default_agent(project: &Project, agents: &[Agent]) -> Vec<Agent> {
    if !agents.is_empty() {
        return agents.to_vec();
    }
    project
        .spec
        .default_agent
        .as_deref()
        .and_then(|name| crate::agents::resolve(name, &project.user).ok())
        .into_iter()
        .collect()
}

fn image_label(source: &ImageSource) -> String {
    match source {
        ImageSource::Image(name) => name.clone(),
        ImageSource::Build(b) => b.tag.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "hash-now";

    fn container(role: Role, id: &str, running: bool) -> Container {
        Container {
            id: id.into(),
            name: format!("yolo-repo-{id}"),
            role,
            running,
            state: if running { "running" } else { "exited" }.into(),
            status: String::new(),
            image: "img:1".into(),
            devcontainer_id: Some("0abc".into()),
            workspace: Some("/repo".into()),
            config_hash: (role == Role::Agent).then(|| HASH.into()),
            network: (role == Role::Agent).then_some(NetworkMode::Firewall),
            volumes: vec![],
            ports: vec![],
        }
    }

    fn agent(running: bool) -> Option<Container> {
        Some(container(Role::Agent, "a1", running))
    }

    fn guard(running: bool) -> Option<Container> {
        Some(container(Role::Guard, "g1", running))
    }

    /// A case: what was found, and the options (firewall, session open, current hash).
    struct Case {
        found: Found,
        options: PlanOptions,
    }

    fn found(agent: Option<Container>, guard: Option<Container>) -> Case {
        Case {
            found: Found { agent, guard },
            options: PlanOptions {
                mode: NetworkMode::Firewall,
                rebuild: false,
                config_hash: HASH.into(),
                session_open: true,
            },
        }
    }

    impl Case {
        fn mode(mut self, mode: NetworkMode) -> Self {
            self.options.mode = mode;
            self
        }
        fn rebuild(mut self) -> Self {
            self.options.rebuild = true;
            self
        }
        fn no_session(mut self) -> Self {
            self.options.session_open = false;
            self
        }
        fn config_changed(mut self) -> Self {
            self.options.config_hash = "hash-edited".into();
            self
        }
        fn agent_made_for(mut self, network: Option<NetworkMode>) -> Self {
            self.found.agent.as_mut().unwrap().network = network;
            self
        }
        fn plan(&self) -> Plan {
            plan(&self.found, &self.options)
        }
    }

    fn start(running: bool, reason: Reason) -> AgentStep {
        AgentStep::Start {
            id: "a1".into(),
            image: "img:1".into(),
            running,
            reason,
        }
    }

    fn recreate(reason: Reason) -> AgentStep {
        AgentStep::Recreate {
            id: "a1".into(),
            reason,
        }
    }

    fn fresh(agent: AgentStep, guard: GuardStep) -> Plan {
        Plan::Fresh {
            agent,
            guard,
            stale: false,
        }
    }

    #[test]
    fn the_network_mode_asked_for_wins_else_the_containers_is_kept() {
        let mut none = container(Role::Agent, "a1", true);
        none.network = Some(NetworkMode::None);
        assert_eq!(network_mode(None, Some(&none)), NetworkMode::None);
        assert_eq!(
            network_mode(Some(NetworkMode::Open), Some(&none)),
            NetworkMode::Open
        );
        assert_eq!(network_mode(None, None), NetworkMode::Firewall);
        none.network = None; // made by another yolo: the default
        assert_eq!(network_mode(None, Some(&none)), NetworkMode::Firewall);
    }

    #[test]
    fn nothing_yet_creates_the_guard_then_the_agent() {
        let plan = found(None, None).plan();
        assert_eq!(plan, fresh(AgentStep::Create, GuardStep::Create));
        assert_eq!((plan.action(), plan.reason()), ("created", None));
    }

    #[test]
    fn nothing_yet_without_network_creates_no_guard() {
        let plan = found(None, None).mode(NetworkMode::None).plan();
        assert_eq!(plan, fresh(AgentStep::Create, GuardStep::Nothing));
    }

    #[test]
    fn a_running_agent_in_the_open_session_is_reused_with_its_guard() {
        let plan = found(agent(true), guard(true)).plan();
        let reuse = Plan::Reuse {
            agent: "a1".into(),
            image: "img:1".into(),
            guard: Some("g1".into()),
            stale: false,
        };
        assert_eq!(plan, reuse);
        assert_eq!((plan.action(), plan.reason()), ("running", None));
    }

    #[test]
    fn a_changed_config_is_reported_stale_not_recreated() {
        let plan = found(agent(true), guard(true)).config_changed().plan();
        assert!(matches!(plan, Plan::Reuse { stale: true, .. }), "{plan:?}");
        let plan = found(agent(false), guard(false)).config_changed().plan();
        assert!(
            matches!(
                plan,
                Plan::Fresh {
                    stale: true,
                    agent: AgentStep::Start { .. },
                    ..
                }
            ),
            "{plan:?}"
        );
    }

    #[test]
    fn without_network_the_agent_is_reused_alone() {
        let mut case = found(agent(true), None).mode(NetworkMode::None);
        case = case.agent_made_for(Some(NetworkMode::None));
        let plan = case.plan();
        let reuse = Plan::Reuse {
            agent: "a1".into(),
            image: "img:1".into(),
            guard: None,
            stale: false,
        };
        assert_eq!(plan, reuse);
    }

    #[test]
    fn a_stopped_agent_is_started_after_its_guard() {
        let plan = found(agent(false), guard(false)).plan();
        let step = GuardStep::Start {
            id: "g1".into(),
            running: false,
        };
        assert_eq!(plan, fresh(start(false, Reason::Stopped), step));
        assert_eq!(plan.action(), "started");
        assert_eq!(plan.reason().unwrap().to_string(), "it was stopped");
    }

    #[test]
    fn a_running_agent_without_a_session_is_stopped_and_restarted_with_its_guard() {
        let plan = found(agent(true), guard(true)).no_session().plan();
        let step = GuardStep::Start {
            id: "g1".into(),
            running: true,
        };
        assert_eq!(plan, fresh(start(true, Reason::NoSession), step));
    }

    #[test]
    fn a_running_agent_whose_guard_died_is_restarted_with_it() {
        let plan = found(agent(true), guard(false)).plan();
        let step = GuardStep::Start {
            id: "g1".into(),
            running: false,
        };
        assert_eq!(plan, fresh(start(true, Reason::GuardDown), step));
        assert_eq!(
            plan.reason().unwrap().to_string(),
            "its firewall guard was not running"
        );
    }

    #[test]
    fn a_missing_guard_means_a_new_agent_container() {
        // Docker joins a namespace by container id: the old agent cannot join a new guard.
        let plan = found(agent(false), None).plan();
        assert_eq!(
            plan,
            fresh(recreate(Reason::GuardMissing), GuardStep::Create)
        );
        assert_eq!(plan.action(), "created");
        let plan = found(agent(true), None).plan();
        assert_eq!(plan, fresh(recreate(Reason::GuardDown), GuardStep::Create));
        // Recreated from the current config: not stale.
        let plan = found(agent(false), None).config_changed().plan();
        assert!(!plan.stale(), "{plan:?}");
    }

    #[test]
    fn a_missing_agent_means_a_new_guard_too() {
        let plan = found(None, guard(true)).plan();
        assert_eq!(
            plan,
            fresh(
                AgentStep::Create,
                GuardStep::Recreate {
                    id: "g1".into(),
                    reason: Reason::AgentMissing
                }
            )
        );
    }

    #[test]
    fn rebuild_recreates_both() {
        let plan = found(agent(true), guard(true))
            .rebuild()
            .config_changed()
            .plan();
        let step = GuardStep::Recreate {
            id: "g1".into(),
            reason: Reason::Rebuild,
        };
        assert_eq!(plan, fresh(recreate(Reason::Rebuild), step));
        assert_eq!(plan.reason().unwrap().to_string(), "--rebuild");
        // A guard left without its agent goes too.
        let plan = found(None, guard(false)).rebuild().plan();
        let step = GuardStep::Recreate {
            id: "g1".into(),
            reason: Reason::Rebuild,
        };
        assert_eq!(plan, fresh(AgentStep::Create, step));
    }

    #[test]
    fn rebuild_without_network_removes_the_guard() {
        let plan = found(agent(false), guard(false))
            .rebuild()
            .mode(NetworkMode::None)
            .plan();
        let step = GuardStep::Remove { id: "g1".into() };
        assert_eq!(plan, fresh(recreate(Reason::Rebuild), step));
    }

    #[test]
    fn another_network_mode_recreates_both() {
        let plan = found(agent(true), guard(true))
            .mode(NetworkMode::Open)
            .plan();
        let reason = Reason::NetworkChanged {
            from: Some(NetworkMode::Firewall),
            to: NetworkMode::Open,
        };
        let step = GuardStep::Recreate {
            id: "g1".into(),
            reason: reason.clone(),
        };
        assert_eq!(plan, fresh(recreate(reason), step));
        assert_eq!(
            plan.reason().unwrap().to_string(),
            "the network mode changed from firewall to open"
        );
        // An agent without a (known) network label was made by another yolo: recreated.
        let plan = found(agent(true), guard(true)).agent_made_for(None).plan();
        assert_eq!(
            plan.reason(),
            Some(&Reason::NetworkChanged {
                from: None,
                to: NetworkMode::Firewall
            })
        );
    }

    #[test]
    fn without_network_a_stray_guard_is_removed_on_a_new_start() {
        let plan = found(agent(false), guard(true))
            .agent_made_for(Some(NetworkMode::None))
            .mode(NetworkMode::None)
            .plan();
        let step = GuardStep::Remove { id: "g1".into() };
        assert_eq!(plan, fresh(start(false, Reason::Stopped), step));
    }
}
