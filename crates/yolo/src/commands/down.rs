//! `yolo down`: stop the agent container, then its guard; `--remove` deletes both and yolo's
//! network; `--volumes` also the named volumes.

use super::session;
use crate::audit::EventKind;
use crate::cli::Target;
use crate::engine::Found;
use crate::error::Result;
use crate::state::WorkspaceState;

pub(crate) async fn execute(target: &Target, remove: bool, volumes: bool) -> Result<i32> {
    let located = super::locate(target)?;
    let engine = super::engine().await?;
    let mut state = WorkspaceState::load(&located.devcontainer_id)?;
    super::watched::report_and_print(&located.devcontainer_id, session::current(&state)?.as_ref());
    let Found { agent, guard } = engine.find(&super::owner(&located)).await?;
    if agent.is_none() && guard.is_none() {
        eprintln!("yolo: no container for {}", located.workspace.display());
    }
    // The agent first: it must never run on without its guard.
    for c in [&agent, &guard].into_iter().flatten() {
        if remove {
            engine.remove(&c.id).await?;
        } else {
            engine.stop(&c.id).await?;
        }
    }
    if remove {
        if let Some(a) = &agent {
            if volumes {
                for name in &a.volumes {
                    engine.remove_volume(name).await?;
                }
            }
            // yolo's own network (a network the user named in their config has another name).
            engine
                .remove_network(&super::network::own_network(&a.name))
                .await?;
        }
        state.created_hooks_done_for = None;
        state.post_start_done_for = None;
        state.allowlist = None;
    }
    close_session(&mut state, if remove { "down --remove" } else { "down" })?;
    state.save(&located.devcontainer_id)?;
    if let Some(a) = &agent {
        let what = if remove { "removed" } else { "stopped" };
        eprintln!("yolo: {} {what}", a.name);
    }
    Ok(0)
}

fn close_session(state: &mut WorkspaceState, reason: &str) -> Result<()> {
    if let Some(writer) = session::current(state)? {
        writer.write(EventKind::SessionStop {
            reason: reason.into(),
        })?;
    }
    state.session = None;
    Ok(())
}
