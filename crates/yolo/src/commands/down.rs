//! `yolo down`: stop the agent container, then its guard; `--remove` deletes everything yolo
//! made for the workspace, found by its labels whatever yolo's state says (a failed or killed
//! `up`'s leftovers too: a guard without its agent, a never-started agent, a second network);
//! `--volumes` also the named volumes.

use crate::cli::Target;
use crate::error::{Error, Result};
use crate::session::teardown::{remove_all, stop};
use crate::session::{Hold, Session};

/// `yolo down --all`: every session of the repository (the workspace session and the named
/// ones, of any config), found by their agents' labels, each taken down as `yolo down` takes
/// one, one after the other; a failure is said and the rest go on (the first is the error).
/// With `remove`, also the sessions whose containers are gone but whose volumes or networks
/// stay (a `down --remove` without `--volumes`), found through yolo's record of the sessions.
pub(crate) async fn execute_all(target: &Target, remove: bool, volumes: bool) -> Result<i32> {
    let located = super::locate(target)?;
    let engine = super::engine().await?;
    let workspace = located.workspace.display().to_string();
    let mut sessions = std::collections::BTreeSet::new();
    let mut ids = std::collections::BTreeSet::new();
    for c in engine.list_managed().await? {
        if c.role != crate::engine::Role::Agent || c.workspace.as_deref() != Some(&workspace) {
            continue;
        }
        // An agent without a session's name must be its config's workspace session; one
        // with another id was made by a yolo that did not label names: said, left alone.
        let config = c.config_file.clone().unwrap_or_default();
        let own_id = crate::devcontainer::id::devcontainer_id(&workspace, &config);
        if c.copy.is_none() && c.devcontainer_id.as_deref() != Some(own_id.as_str()) {
            eprintln!(
                "{} {} is a session yolo cannot name (made by an earlier version): left as it is; `docker rm -f {}` removes it",
                console::style("warning:").yellow().bold(),
                c.name,
                c.name
            );
            continue;
        }
        ids.extend(c.devcontainer_id.clone());
        sessions.insert((c.config_file, c.copy));
    }
    if remove {
        for (id, state) in crate::session::state::WorkspaceState::all_with_ids() {
            if state.workspace != workspace || ids.contains(&id) {
                continue;
            }
            // Its config is found again only when it is the repository's default one.
            let one = Target {
                workspace: Some(located.workspace.clone()),
                config: None,
                copy: state.copy.clone(),
            };
            let Ok(found) = super::locate(&one) else {
                continue;
            };
            if found.devcontainer_id != id {
                continue;
            }
            let made = engine.made_for(&found.owner()).await?;
            if made.containers.is_empty() && made.networks.is_empty() && made.volumes.is_empty() {
                continue;
            }
            ids.insert(id);
            sessions.insert((Some(found.config_file.display().to_string()), state.copy));
        }
    }
    if sessions.is_empty() {
        eprintln!(
            "{} no session of {} has a container",
            console::style("yolo:").bold(),
            located.workspace.display()
        );
        return Ok(0);
    }
    let mut first = None;
    for (config, copy) in sessions {
        let which = match &copy {
            Some(name) => format!("session {name}"),
            None => "the workspace session".to_string(),
        };
        eprintln!("{} {which}:", console::style("yolo:").bold());
        let one = Target {
            workspace: Some(located.workspace.clone()),
            config: config.map(std::path::PathBuf::from),
            copy,
        };
        if let Err(e) = Box::pin(execute(&one, remove, volumes)).await {
            eprintln!("{} {which}: {e}", console::style("error:").red().bold());
            first.get_or_insert(e);
        }
    }
    match first {
        Some(e) => Err(e),
        None => Ok(0),
    }
}

pub(crate) async fn execute(target: &Target, remove: bool, volumes: bool) -> Result<i32> {
    let located = super::locate(target)?;
    super::known(&located)?;
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
    let remote = located.copy_reason()?.is_some();
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
                    "{} the agent's work stays in its volume; run `yolo sync{}` once that is resolved",
                    console::style("yolo:").bold(),
                    located
                        .copy
                        .as_ref()
                        .map(|name| format!(" {name}"))
                        .unwrap_or_default()
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
