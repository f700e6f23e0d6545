//! The agent's image: pulled, or built behind the guard (its RUN steps in the guard's network
//! namespace, with the build's allowlist), then the Features on top; and the image's metadata
//! label read once it is there.

use super::act::Act;
use super::plan::image_label;
use super::plan::GuardStep;
use super::{features, network};
use crate::audit::{EventKind, Writer};
use crate::engine::NetworkAttach;
use crate::error::Result;
use crate::firewall::{NetworkMode, PHASE_BUILD};
use crate::project::Project;
use crate::run_spec::RunSpec;
use crate::session::state::WorkspaceState;

impl Act<'_> {
    /// The project with the metadata of the agent's `image`: its label; with Features, the
    /// base image's label and the Features' entries, as they were checked before planning (the
    /// image with Features repeats them in its label, for VS Code).
    pub(super) async fn with_image_metadata(&self, image: &str) -> Result<Option<Project>> {
        if self.fetched.is_empty() {
            return crate::bring_up::metadata::with_image(self.engine, self.project, image).await;
        }
        let base = image_label(&self.project.spec.image);
        features::with_metadata(self.engine, self.project, &base, self.fetched).await
    }

    /// Whether installing the Features runs their scripts (a build): the base image is made
    /// first if missing (a pull runs nothing; a base that needs a build is built behind the
    /// guard anyway, so this is not asked then).
    pub(super) async fn features_build_needed(&self) -> Result<bool> {
        if self.fetched.is_empty() {
            return Ok(false);
        }
        let base = self.base_image_offline().await?;
        let rebuild = self.project.settings.rebuild;
        features::build_needed(self.engine, self.project, &base, self.fetched, rebuild).await
    }

    /// The base image (before the Features), pulled or built with no network for its steps.
    pub(super) async fn base_image_offline(&self) -> Result<String> {
        let spec = &self.project.spec;
        self.engine
            .ensure_image(
                &spec.image,
                self.project.settings.rebuild,
                &spec.devcontainer_id,
                &NetworkAttach::None,
            )
            .await
    }

    /// Build the image with its RUN steps in the guard's network namespace (`none` without a
    /// guard), the guard holding the project's allowlist plus the build's own (`[build]`) and
    /// stamping its events `phase: build`; the guard's id, still in its build phase, for
    /// `guard_after_build` to start again with the agent's config (a new namespace with empty
    /// sets, so nothing the build opened stays open for the agent). A failed build stops the
    /// guard it started (and removes one made for it).
    pub(super) async fn build_behind_guard(
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
    pub(super) async fn guard_after_build(
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
    pub(super) fn build_allow(&self, writer: &Writer) -> Result<Vec<String>> {
        match self.mode {
            NetworkMode::Firewall => {
                let allow = network::build_allowlist(self.project, self.allow)?;
                self.note_build_additions(&allow, writer)?;
                Ok(allow)
            }
            NetworkMode::Open | NetworkMode::Learn | NetworkMode::None => Ok(self.allow.to_vec()),
        }
    }

    /// The session_start lists the agent's allowlist; the log also says what the build adds.
    pub(super) fn note_build_additions(
        &self,
        build_allow: &[String],
        writer: &Writer,
    ) -> Result<()> {
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
    pub(super) async fn drop_build_guard(&self, step: &GuardStep, id: &str) {
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
}
