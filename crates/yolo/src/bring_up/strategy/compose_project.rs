//! A Compose project in place of the agent's image and container: the guard made (or kept),
//! started by `compose::start` once attached to the project's networks, with the siblings'
//! subnets and names allowed on top of this session's allowlist.

use crate::audit::{EventKind, Writer};
use crate::bring_up::act::{Act, Ready};
use crate::bring_up::compose::{self, GuardPhase, Prepared};
use crate::bring_up::plan::GuardStep;
use crate::bring_up::{features, network};
use crate::error::Result;
use crate::firewall::PHASE_BUILD;
use crate::session::state::WorkspaceState;

impl Act<'_> {
    /// The Compose project `prepared` started with the guard of `guard`, in the session of
    /// `writer`; `image_name` is what the session was opened with.
    pub(in crate::bring_up) async fn fresh_compose(
        &self,
        prepared: &Prepared,
        guard: &GuardStep,
        writer: Writer,
        image_name: String,
        state: &mut WorkspaceState,
    ) -> Result<Ready> {
        features::record(&writer, self.fetched)?;
        let started = self.start_compose(prepared, guard, &writer, state).await?;
        if let Some(why) = started.audit_off {
            writer.write(EventKind::Notice {
                message: format!("the exec audit is off in this session: {why}"),
            })?;
        }
        Ok(Ready {
            container_id: started.id,
            image: image_name,
            writer,
            merged: started.merged,
            checkpointed: false,
        })
    }

    async fn start_compose(
        &self,
        prepared: &Prepared,
        guard: &GuardStep,
        writer: &Writer,
        state: &mut WorkspaceState,
    ) -> Result<compose::Started> {
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
        let start_guard = |phase: GuardPhase| {
            let guard_id = guard_id.clone();
            async move {
                let Some(id) = guard_id else {
                    return Ok(());
                };
                let (allow, names, published, relays, phase) = match phase {
                    GuardPhase::Build => (
                        self.build_allow(writer)?,
                        Vec::new(),
                        None,
                        Vec::new(),
                        Some(PHASE_BUILD),
                    ),
                    GuardPhase::Session {
                        extra,
                        names,
                        relays,
                        published,
                    } => {
                        let mut allow = self.allow.to_vec();
                        allow.extend(extra);
                        (allow, names, Some(published), relays, None)
                    }
                };
                let mut config = self.guard_config(writer, allow, phase);
                config.local_names = names;
                config.relays = relays;
                if let Some(published) = published {
                    config.published_ports = published;
                }
                network::start_guard(self.engine, self.project, &id, &config).await
            }
        };
        let started = compose::start(
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
