//! Undoing a failed or interrupted `up`: what it made goes, the session it opened closes.

use crate::engine::{Container, Engine, Made, Owner, Role};
use crate::error::Error;
use crate::project::Project;
use crate::session::Session;

/// After a failed or interrupted `carry_out`: remove the containers and networks that were not
/// there before it (found by labels, so whatever step failed, and whatever order `Act::fresh`
/// makes things in), the agent first; close the session it opened. What existed before and was
/// kept stays (stopped, if `up` had stopped it); what the plan recreates was removed before the
/// new one was made and is not brought back. Nothing here may hide the original error: a failure
/// is a warning.
pub(super) async fn roll_back(
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
            "{} could not undo this `yolo up` completely: {what}; `yolo down{} --remove` removes what is left",
            console::style("warning:").yellow().bold(),
            crate::project::copy_flag(spec.copy.as_deref())
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
    let mut made_guards: Vec<String> = made
        .iter()
        .filter(|c| c.role == Role::Guard)
        .map(|c| c.name.clone())
        .collect();
    // A start cut off after it claimed a spare but before its guard existed: the holder is
    // named for the guard it was to have.
    if !before.containers.iter().any(|c| c.role == Role::Guard) {
        made_guards.push(crate::bring_up::network::guard_name(project));
        made_guards.sort();
        made_guards.dedup();
    }
    let (mut removed, failed) = engine.remove_in_order(made, &new_networks).await;
    for e in failed {
        warn(e.to_string());
    }
    // The spare network namespace a new guard joined (`engine::spares`).
    for guard in made_guards {
        let holder = crate::engine::spares::holder_name(&guard);
        match engine.remove_holder(&holder).await {
            Ok(true) => removed.push(holder),
            Ok(false) => {}
            Err(e) => warn(e.to_string()),
        }
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
