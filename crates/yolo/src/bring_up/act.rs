//! Carrying out a plan (`plan`): reuse what runs, or open a new session and bring everything
//! up in order. The steps live in the files named after them (`image`, `guard`, `agent`,
//! `compose`); this file holds the order.

use super::plan::image_label;
use super::plan::{AgentStep, GuardStep, Plan};
use super::{features, hooks, network};
use crate::audit::{EventKind, Writer};
use crate::engine::{Engine, NetworkAttach};
use crate::error::{Error, Failure, Result};
use crate::firewall::{mode_name, NetworkMode, PHASE_BUILD};
use crate::project::Project;
use crate::run_spec::RunSpec;
use crate::session::state::WorkspaceState;
use crate::session::{approval, record};

/// The agent container, running, in the session of `writer`.
pub(super) struct Ready {
    pub(super) container_id: String,
    pub(super) image: String,
    pub(super) writer: Writer,
    /// The project evaluated with the metadata of the image a pull or build just made, when
    /// that differs from the one planned with: what the container was created from.
    pub(super) merged: Option<Project>,
}

/// What carrying out a plan needs.
pub(super) struct Act<'a> {
    pub(super) engine: &'a Engine,
    pub(super) project: &'a Project,
    pub(super) mode: NetworkMode,
    pub(super) allow: &'a [String],
    /// The Features, fetched, in install order.
    pub(super) fetched: &'a features::Fetched,
    /// A Compose config, read and checked.
    pub(super) compose: Option<&'a crate::bring_up::compose::Prepared>,
    /// The Compose files are read and checked again after initializeCommand.
    pub(super) reread_compose: bool,
    /// This `up` is the workspace's first (`approval::first_use`).
    pub(super) first_use: bool,
}

impl Act<'_> {
    pub(super) async fn carry_out(&self, plan: &Plan, state: &mut WorkspaceState) -> Result<Ready> {
        match plan {
            Plan::Reuse {
                agent,
                image,
                guard,
                ..
            } => {
                let writer = record::current(state)?
                    .ok_or_else(|| Error::failed(Failure::State, "no open session"))?;
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
    pub(super) async fn fresh(
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

    /// What goes before a new session: removed what is recreated or not needed, stopped a
    /// running agent. The agent first: it must never run on without its guard.
    pub(super) async fn clear_out(&self, agent: &AgentStep, guard: &GuardStep) -> Result<()> {
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

    /// This start with `project` instead, when there is one.
    pub(super) fn with<'b>(&'b self, project: Option<&'b Project>) -> Act<'b> {
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

    /// A notice on the session's record when the agent's execs are not recorded.
    pub(super) fn note_audit_off(&self, writer: &Writer, network: &NetworkAttach) -> Result<()> {
        if let Some(why) = exec_audit_off(&self.project.spec, network) {
            writer.write(EventKind::Notice {
                message: format!("the exec audit is off in this session: {why}"),
            })?;
        }
        Ok(())
    }
}

/// Why the agent's execs are not recorded in this session, if they are not.
pub(super) fn exec_audit_off(spec: &RunSpec, network: &NetworkAttach) -> Option<&'static str> {
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

impl Act<'_> {
    /// A Compose project in place of the agent's image and container: the guard made (or kept),
    /// started by `compose::start` once attached to the project's networks, with the
    /// siblings' subnets and names allowed on top of this session's allowlist.
    pub(super) async fn fresh_compose(
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
}
