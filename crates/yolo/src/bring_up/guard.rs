//! The guard container of a session: made, given this session's config and started (verified
//! ready) before the agent; its allowlist brought up to date live when the session is reused.
//! The config itself and the network side are `network`'s.

use super::act::Act;
use super::network;
use super::plan::{GuardStep, Reason};
use crate::audit::Writer;
use crate::error::Result;
use crate::firewall::control::Request;
use crate::session::state::WorkspaceState;

impl Act<'_> {
    /// The guard of this start made, or a kept one stopped (so it reads the new session's
    /// config when it starts); its id, or None without one. `builds`: an image is built behind
    /// it first.
    pub(super) async fn make_guard(
        &self,
        step: &GuardStep,
        builds: bool,
    ) -> Result<Option<String>> {
        match step {
            GuardStep::Start { id, running } => {
                if *running {
                    self.engine.stop(id).await?;
                    // Its namespace holder ends with it, a moment later: waited for, so that
                    // the start finds it stopped and starts it afresh, listening again.
                    let holder =
                        crate::engine::spares::holder_name(&network::guard_name(self.project));
                    self.engine.stop_holder(&holder).await?;
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
    pub(super) async fn launch_guard(&self, id: Option<&str>, writer: &Writer) -> Result<bool> {
        let Some(id) = id else {
            return Ok(false);
        };
        let allow = self.allow.to_vec();
        let config = self.guard_config(writer, allow, None);
        network::launch_guard(self.engine, self.project, id, &config).await?;
        Ok(true)
    }

    /// The guard's config for this session (`phase`: an image build's, which inspects nothing:
    /// its proxy is the session's alone).
    pub(super) fn guard_config(
        &self,
        writer: &Writer,
        allow: Vec<String>,
        phase: Option<&str>,
    ) -> crate::firewall::GuardConfig {
        let mut config =
            network::guard_config(self.project, self.mode, writer.session(), allow, phase);
        if let (Some(http), None) = (self.http, phase) {
            config.http = http.session.config.clone();
            config.http_roots_pem = Some(http.roots_pem.clone());
        }
        config
    }

    pub(super) fn warn_if_guard_down(&self, reason: &Reason) {
        if *reason == Reason::GuardDown {
            eprintln!(
                "{} the firewall guard of {} is not running, so its agent container has had no network (fail closed); restarting both",
                console::style("warning:").yellow().bold(),
                self.project.spec.container_name
            );
        }
    }

    /// Bring the guard up with this session's config; its id, or None without one.
    pub(super) async fn guard(
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
    pub(super) async fn start_guard(
        &self,
        step: &GuardStep,
        writer: &Writer,
        allow: Vec<String>,
        phase: Option<&str>,
    ) -> Result<Option<String>> {
        let Some(id) = self.make_guard(step, phase.is_some()).await? else {
            return Ok(None);
        };
        let config = self.guard_config(writer, allow, phase);
        network::start_guard(self.engine, self.project, &id, &config).await?;
        Ok(Some(id))
    }

    /// Bring a running guard from the allowlist it was given to the one configured now.
    /// Patterns the user added live with `yolo allow` were never in the old list, so they stay.
    pub(super) async fn sync_allowlist(
        &self,
        guard: &str,
        state: &mut WorkspaceState,
    ) -> Result<()> {
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
            self.engine
                .control(guard, &Request::Allow { patterns: added })
                .await?;
        }
        if !removed.is_empty() {
            self.engine
                .control(guard, &Request::Deny { patterns: removed })
                .await?;
        }
        state.allowlist = Some(now.to_vec());
        Ok(())
    }
}
