//! An image pulled, built without network (`[build] network = "none"`) or already there: made
//! first, so a failing pull or build leaves no guard behind; then the guard made and started
//! while the agent is created, the agent started once the guard may hold it.

use crate::audit::Writer;
use crate::bring_up::act::{Act, Ready};
use crate::bring_up::features;
use crate::bring_up::network;
use crate::bring_up::plan::{AgentStep, GuardStep};
use crate::engine::NetworkAttach;
use crate::error::Result;
use crate::session::state::WorkspaceState;

impl Act<'_> {
    pub(in crate::bring_up) async fn fresh_image_first(
        &self,
        agent: &AgentStep,
        guard: &GuardStep,
        writer: Writer,
        state: &mut WorkspaceState,
    ) -> Result<Ready> {
        let image = self.image_without_network(agent).await?;
        // The image's metadata shapes the container: `act` (this start with it) from here on.
        let merged = self.with_image_metadata(&image).await?;
        let act = self.with(merged.as_ref());
        // The guard made (not started) first: the agent is created while it starts. A new
        // agent whose first program is the shim's `start` is started as soon as the guard runs
        // (it needs the guard's namespaces, nothing more): that program waits for the guard's
        // supervisor, which opens last, once the firewall holds. Any other agent starts only
        // once the guard says it is ready.
        let guard_id = act.make_guard(guard, false).await?;
        let network = guard_id
            .clone()
            .map_or(NetworkAttach::None, NetworkAttach::Container);
        // The new session's first checkpoint of the workspace session's folder is read
        // meanwhile too: no container of the session runs yet, so nothing else writes there.
        let (launched, made, checkpointed) = tokio::join!(
            act.launch_guard(guard_id.as_deref(), &writer),
            act.make_agent(agent, &image, &network, state),
            crate::session::checkpoints::before_start(self.project.located(), &writer)
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
        Ok(Ready {
            container_id: id,
            image,
            writer,
            merged,
            checkpointed,
        })
    }

    /// The agent's image with no network for its build: the kept container's, or pulled or
    /// built offline, with the Features on top.
    async fn image_without_network(&self, agent: &AgentStep) -> Result<String> {
        if let AgentStep::Start { image, .. } = agent {
            return Ok(image.clone());
        }
        let base = self.base_image_offline().await?;
        features::install(
            self.engine,
            self.project,
            &base,
            self.fetched,
            &NetworkAttach::None,
            self.project.settings.rebuild,
        )
        .await
    }
}
