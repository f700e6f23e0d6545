//! Carrying out a plan (`plan`): reuse what runs, or open a new session and bring everything
//! up in order. The steps live in the files named after them (`image`, `guard`, `agent`,
//! `compose`), the three ways the containers come up in `strategy`; this file holds the order.

use super::plan::image_label;
use super::plan::{AgentStep, GuardStep, Plan};
use super::{features, hooks};
use crate::audit::{EventKind, Writer};
use crate::engine::{Engine, NetworkAttach};
use crate::error::{Error, Failure, Result};
use crate::firewall::{mode_name, NetworkMode};
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
    /// The new session's first checkpoint was taken on the way (`image_first`: while the
    /// guard started, before the agent did), so `up` takes none after.
    pub(super) checkpointed: bool,
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
    /// The session's HTTP settings for the guard's proxy, when it inspects any host.
    pub(super) http: Option<&'a crate::http_session::Prepared>,
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
                    checkpointed: false,
                })
            }
            Plan::Fresh { agent, guard, .. } => self.fresh(agent, guard, state).await,
        }
    }

    /// Open a new session and (re)start everything in order: the old containers out, the
    /// session opened, `initializeCommand` run, then the containers by one of the strategies
    /// (`strategy`): a Compose project, an image built behind the guard, or an image made
    /// first.
    pub(super) async fn fresh(
        &self,
        agent: &AgentStep,
        guard: &GuardStep,
        state: &mut WorkspaceState,
    ) -> Result<Ready> {
        // initializeCommand is about to run: the only moment to ask (or, with nobody to ask
        // and no trust, refuse) — before anything is removed, opened or built.
        let approved = approval::confirm_host_command(self.project)?;
        self.clear_out(agent, guard).await?;
        // An agent that was still running until now (its guard was down, or yolo lost its
        // session) could have rewritten an input while the user read the prompt: compared
        // again now that it is stopped, before anything of it runs on the host.
        if self.project.spec.initialize_command.is_some() {
            approval::check(self.project, state)?;
        }
        let image_name = match agent {
            AgentStep::Start { image, .. } => image.clone(),
            _ => image_label(&self.project.spec.image),
        };
        let writer = self.open_session(&image_name, state)?;
        if let Some(approved) = approved {
            hooks::initialize(self.project, &writer, approved).await?;
        }
        let reread = self.compose_after_initialize(state).await?;
        self.make_protected_folders()?;
        // After the host's own initializeCommand: what it writes is not the agent's doing.
        self.watch()?;
        if let Some(prepared) = reread.as_ref().or(self.compose) {
            return self
                .fresh_compose(prepared, guard, writer, image_name, state)
                .await;
        }
        let new_image = !matches!(agent, AgentStep::Start { .. });
        let behind_guard = new_image && self.build_needs_network().await?;
        if new_image {
            features::record(&writer, self.fetched)?;
        }
        if behind_guard {
            self.fresh_behind_guard(agent, guard, writer, state).await
        } else {
            self.fresh_image_first(agent, guard, writer, state).await
        }
    }

    /// The new session's record, opened for `image_name` (the one before closed).
    fn open_session(&self, image_name: &str, state: &mut WorkspaceState) -> Result<Writer> {
        let writer = record::open(
            self.project,
            state,
            image_name,
            mode_name(self.mode),
            self.allow,
            "closed by a new start",
        )?;
        state.save(&self.project.spec.devcontainer_id)?;
        Ok(writer)
    }

    /// The Compose project read and checked again after initializeCommand (when `up` said so),
    /// which may have written its files.
    async fn compose_after_initialize(
        &self,
        state: &mut WorkspaceState,
    ) -> Result<Option<crate::bring_up::compose::Prepared>> {
        if !self.reread_compose {
            return Ok(None);
        }
        // Checked by the policy first: a refused file is not recorded as approved.
        let reread = crate::bring_up::compose::prepare(self.project).await?;
        if self.first_use {
            // The first use approves what it uses, the generated files included.
            for file in self.project.spec.compose.iter().flat_map(|c| &c.files) {
                approval::note_own_write(self.project, file)?;
            }
        } else {
            // What the command wrote can follow from files the agent writes: a change to the
            // Compose files is shown and asked about like any other.
            approval::check(self.project, state)?;
        }
        Ok(reread)
    }

    /// The protected folders the repository lacks: made here, by the user, empty, so the agent
    /// cannot be the one to create them (policy::protect); before the guard starts, so its file
    /// watcher does not record yolo's own doing as the session's.
    fn make_protected_folders(&self) -> Result<()> {
        for path in self.project.spec.protected.iter().filter(|p| p.create_dir) {
            std::fs::create_dir_all(&path.host).map_err(|e| Error::io(&path.host, e))?;
        }
        Ok(())
    }

    /// Whether the new image's build (its own or the Features') runs steps that may reach the
    /// network, so it is built behind the guard: not with `[build] network = "none"`.
    async fn build_needs_network(&self) -> Result<bool> {
        let settings = &self.project.settings;
        if settings.build.no_network {
            return Ok(false);
        }
        Ok(self
            .engine
            .build_needed(&self.project.spec.image, settings.rebuild)
            .await?
            || self.features_build_needed().await?)
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
            // The spare network namespace it joined, if it did (`engine::spares`).
            let guard = super::network::guard_name(self.project);
            engine
                .remove_holder(&crate::engine::spares::holder_name(&guard))
                .await?;
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
            http: self.http,
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
