//! `yolo down`: stop the agent container, then its guard; `--remove` deletes everything yolo
//! made for the workspace, found by its labels whatever yolo's state says (a failed or killed
//! `up`'s leftovers too: a guard without its agent, a never-started agent, a second network);
//! `--volumes` also the named volumes.

use crate::cli::Target;
use crate::engine::{Engine, Found, Made, Role};
use crate::error::{Error, Result};
use crate::project::Located;
use crate::session::{Hold, Session};

pub(crate) async fn execute(target: &Target, remove: bool, volumes: bool) -> Result<i32> {
    let located = super::locate(target)?;
    let engine = super::engine().await?;
    let hold = if remove {
        // What --remove takes away does not depend on the state.
        Hold::LockAfresh {
            command: "down",
            why: "removing by labels",
        }
    } else {
        Hold::Lock("down")
    };
    let mut session = Session::at(located, hold).await?;
    session.report_watched()?;
    let located = session.located.clone();
    // A remote engine's copy: the agent stops first (it must not change the copy while it is
    // read, nor keep running when the sync fails), then its work comes back before anything
    // goes; a conflict stops `down --remove --volumes` (nothing is lost: run `yolo sync` once
    // resolved). The archive endpoint reads a stopped container's volume.
    let remote = crate::engine::remote::remote_reason()?.is_some();
    let mut stopped = None;
    if remote {
        let taking = crate::remote_copy::Taking::from_config();
        stopped = Some(stop(&engine, &located).await);
        let warn = |e: &Error| eprintln!("{} {e}", console::style("warning:").yellow().bold());
        if let Err(e) = crate::remote_copy::collect_events(&engine, &located).await {
            warn(&e);
        }
        let writer = session.record()?;
        let brought = match taking {
            Ok(taking) => {
                crate::remote_copy::bring_back(&engine, &located, &taking, writer.as_ref()).await
            }
            Err(e) => Err(e),
        };
        match brought {
            Ok(_) => {}
            // Removing the copy would lose what could not be brought back.
            Err(e) if remove && volumes => return Err(e),
            Err(e) => {
                warn(&e);
                eprintln!(
                    "{} the agent's work stays in its volume; run `yolo sync` once that is resolved",
                    console::style("yolo:").bold()
                );
            }
        }
    }
    let result = if remove {
        session.state.created_hooks_done_for = None;
        session.state.post_start_done_for = None;
        session.state.allowlist = None;
        // Whether the stop above worked or not, the removal forces.
        remove_all(&engine, &located, volumes).await
    } else {
        match stopped {
            Some(result) => result,
            None => stop(&engine, &located).await,
        }
    };
    // The session ends even when one removal failed: the rest went, and the next `up` starts
    // a new one.
    session.close(if remove { "down --remove" } else { "down" })?;
    session.save()?;
    result.map(|()| 0)
}

/// Stop the agent, then its guard (it must never run on without its guard), then the other
/// services of a Compose project, unless its `shutdownAction` is `none` (read from the agent's
/// label: `down` does not read the config).
async fn stop(engine: &Engine, located: &Located) -> Result<()> {
    let owner = located.owner();
    let Found { agent, guard } = engine.find(&owner).await?;
    if agent.is_none() && guard.is_none() {
        eprintln!("yolo: no container for {}", located.workspace.display());
    }
    for c in [&agent, &guard].into_iter().flatten() {
        engine.stop(&c.id).await?;
    }
    if let Some(a) = &agent {
        eprintln!("yolo: {} stopped", a.name);
    }
    let keep = match &agent {
        Some(a) => engine
            .container_label(&a.id, crate::engine::labels::COMPOSE_SHUTDOWN)
            .await?
            .is_some_and(|v| v == "none"),
        None => false,
    };
    let services: Vec<_> = engine
        .made_for(&owner)
        .await?
        .containers
        .into_iter()
        .filter(|c| c.role == Role::Service && c.running)
        .collect();
    if keep && !services.is_empty() {
        eprintln!("yolo: the other Compose services keep running (shutdownAction \"none\")");
        return Ok(());
    }
    for c in &services {
        engine.stop(&c.id).await?;
        eprintln!("yolo: {} stopped", c.name);
    }
    Ok(())
}

/// Remove every container yolo made for the workspace (agents first), yolo's own network(s)
/// for it (never a network the user named in their config), and with `volumes` the named
/// volumes of its agent containers and those labelled for it. Goes on past a failure and
/// returns the first.
async fn remove_all(engine: &Engine, located: &Located, volumes: bool) -> Result<()> {
    let Made {
        containers,
        networks,
        volumes: labelled,
    } = engine.made_for(&located.owner()).await?;
    let own = crate::bring_up::network::own_network(&crate::devcontainer::names::container_name(
        &located.workspace,
        &located.devcontainer_id,
    ));
    let own_project =
        crate::devcontainer::names::container_name(&located.workspace, &located.devcontainer_id);
    let networks: Vec<_> = networks
        .into_iter()
        .filter(|n| {
            n.name == own
                // A Compose project's, named after the project (the agent's name).
                || n.name.starts_with(&format!("{own_project}_"))
                || containers
                    .iter()
                    .any(|c| n.name == format!("{}-net", c.name))
        })
        .collect();
    if containers.is_empty() && networks.is_empty() {
        eprintln!("yolo: no container for {}", located.workspace.display());
    }
    let (mut removed, failed) = engine
        .remove_in_order(
            containers.iter().collect(),
            &networks.iter().collect::<Vec<_>>(),
        )
        .await;
    let mut first_error: Option<Error> = failed.into_iter().next();
    let mut keep = |result: Result<()>| -> bool {
        match result {
            Ok(()) => true,
            Err(e) => {
                first_error.get_or_insert(e);
                false
            }
        }
    };
    if volumes {
        let mut names: Vec<&String> = containers
            .iter()
            .filter(|c| c.role == Role::Agent)
            .flat_map(|c| &c.volumes)
            .chain(&labelled)
            .collect();
        names.sort();
        names.dedup();
        for name in names {
            if keep(engine.remove_volume(name).await) {
                removed.push(format!("volume {name}"));
            }
        }
    }
    // The host folders of the guards' configs (`engine::guard_config_dir`), once their guard
    // is gone.
    let data = crate::store::root();
    for guard in containers.iter().filter(|c| c.role == Role::Guard) {
        let dir = crate::engine::guard_config_dir_of(&data, &guard.name);
        if dir.is_dir() && removed.iter().any(|r| r.contains(&guard.name)) {
            keep(std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e)));
        }
    }
    if !removed.is_empty() {
        eprintln!("yolo: removed {}", removed.join(", "));
    }
    first_error.map_or(Ok(()), Err)
}
