//! An image whose build needs the network: built with its RUN steps behind the guard (in its
//! build phase), the project then evaluated with the built image's metadata, the guard started
//! again for the session, the agent made and started in its namespaces.

use crate::audit::Writer;
use crate::bring_up::act::{Act, Ready};
use crate::bring_up::plan::{AgentStep, GuardStep};
use crate::engine::NetworkAttach;
use crate::error::Result;
use crate::session::state::WorkspaceState;

impl Act<'_> {
    pub(in crate::bring_up) async fn fresh_behind_guard(
        &self,
        agent: &AgentStep,
        guard: &GuardStep,
        writer: Writer,
        state: &mut WorkspaceState,
    ) -> Result<Ready> {
        let (guard_id, image) = self.build_behind_guard(guard, &writer).await?;
        // The image's metadata, now that the image is there, shapes the container: `act` (this
        // start with it) from here on. A refusal here fails the `up`, whose roll back removes
        // what was made.
        let merged = self.with_image_metadata(&image).await?;
        let act = self.with(merged.as_ref());
        let guard_id = match guard_id {
            Some(id) => {
                act.guard_after_build(&self.project.spec, id, &writer, state)
                    .await?
            }
            None => None,
        };
        let network = guard_id.map_or(NetworkAttach::None, NetworkAttach::Container);
        let container_id = act.agent(agent, &image, &network, state).await?;
        act.note_audit_off(&writer, &network)?;
        Ok(Ready {
            container_id,
            image,
            writer,
            merged,
            checkpointed: false,
        })
    }
}
