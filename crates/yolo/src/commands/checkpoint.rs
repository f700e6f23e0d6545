//! `yolo checkpoint [NAME]`, `yolo checkpoints [NAME]`, `yolo rollback [NAME@]N`: a session's
//! working tree recorded on a hidden ref, listed, and put back (`crate::checkpoint`). A copy's
//! (a named session, or any with a remote engine) is put back by making the copy anew; the
//! workspace session's, by writing the repository's folder back with its containers stopped.

use crate::checkpoint::{self, Checkpoint};
use crate::engine::Engine;
use crate::engine::Role;
use crate::error::{Error, Result};
use crate::project::Located;
use crate::remote_copy::Taking;
use crate::session::checkpoints::Kept;
use crate::session::{Hold, Session};
use yolo_protocol::event::EventKind;

/// `yolo checkpoint [NAME]`.
pub(crate) async fn execute(target: &crate::cli::Target) -> Result<i32> {
    let located = super::locate(target)?;
    super::known(&located)?;
    let kept = crate::session::checkpoints::check_session(&located)?;
    let taking = Taking::from_config()?;
    let session = Session::at(located, Hold::Lock("checkpoint")).await?;
    let cp =
        crate::session::checkpoints::take(None, &session, kept, &taking, "yolo checkpoint").await?;
    let flag = session.located.flag();
    eprintln!(
        "{} checkpoint {} ({}); `yolo rollback{flag} {}` puts the working tree back to it",
        console::style("yolo:").bold(),
        cp.number,
        &cp.commit[..cp.commit.len().min(12)],
        cp.number
    );
    Ok(0)
}

/// `yolo checkpoints [NAME] [--json]`.
pub(crate) fn list(target: &crate::cli::Target, json: bool) -> Result<i32> {
    let located = super::locate(target)?;
    super::known(&located)?;
    let kept = crate::session::checkpoints::check_session(&located)?;
    let repo = &kept.repo(&located);
    let all = if repo.exists() {
        checkpoint::list(repo, &located.devcontainer_id)?
    } else {
        Vec::new()
    };
    if json {
        crate::output::print(&all);
        return Ok(0);
    }
    if all.is_empty() {
        eprintln!(
            "yolo: no checkpoint for this session; `yolo checkpoint{}` takes one",
            located.flag()
        );
        return Ok(0);
    }
    let mut rows = Vec::new();
    let mut before: Option<&Checkpoint> = None;
    let empty = checkpoint::run(repo, &["hash-object", "-t", "tree", "/dev/null"])?;
    for cp in &all {
        let from = match before {
            Some(b) => b.tree.clone(),
            None => cp.parent.clone().unwrap_or_else(|| empty.clone()),
        };
        let changes = checkpoint::shortstat(repo, &from, &cp.tree)?;
        rows.push([
            cp.number.to_string(),
            cp.taken.clone(),
            crate::visible::escape_controls(&cp.what),
            cp.commit[..cp.commit.len().min(12)].to_string(),
            match changes.trim() {
                "" => "no change".to_string(),
                text => text.to_string(),
            },
        ]);
        before = Some(cp);
    }
    crate::output::print_table(
        [
            "N",
            "TAKEN",
            "FOR",
            "COMMIT",
            "CHANGES (FROM THE ONE BEFORE, OR HEAD, OR NOTHING)",
        ],
        &rows,
    );
    Ok(0)
}

/// `yolo rollback [NAME@]N [--yes]`: the session's containers removed (its agent with them),
/// then its copy made anew from checkpoint N.
pub(crate) async fn rollback(target: &crate::cli::Target, spec: &str, yes: bool) -> Result<i32> {
    let (name, number) = checkpoint::parse_spec(spec).map_err(Error::Usage)?;
    let target = match name {
        Some(name) if target.copy.as_ref().is_some_and(|c| *c != name) => {
            return Err(Error::Usage(format!(
                "{spec} names the session {name}, --copy another"
            )))
        }
        Some(name) => target.clone().with_copy(Some(name)),
        None => target.clone(),
    };
    let located = super::locate(&target)?;
    super::known(&located)?;
    let kept = crate::session::checkpoints::check_session(&located)?;
    let cp = checkpoint::find(&kept.repo(&located), &located.devcontainer_id, number)?;
    let what = match kept {
        Kept::Copy => format!(
            "the session's copy is made anew from checkpoint {number}: its containers are removed, and what the agent did since is gone from it (a `yolo sync{}` first keeps it on the branch)",
            located.flag()
        ),
        Kept::Store => format!(
            "the files of {} are put back as checkpoint {number} holds them: the session's containers are stopped, files made since are deleted and changed or deleted ones written back, yours too; ignored files and folders and .git are not touched",
            located.workspace.display()
        ),
    };
    confirm(&what, yes)?;
    let taking = Taking::from_config()?;
    let engine = super::engine().await?;
    let session = Session::at(located, Hold::Lock("rollback")).await?;
    let located = &session.located;
    match kept {
        Kept::Copy => rebuild_copy(&engine, located, &cp, &taking).await?,
        Kept::Store => rewrite_workspace(&engine, &session, &cp).await?,
    }
    if let Some(writer) = session.record()? {
        writer.write(EventKind::Notice {
            message: format!(
                "rolled back to checkpoint {number} (commit {})",
                &cp.commit[..cp.commit.len().min(12)]
            ),
        })?;
    }
    eprintln!(
        "{} back at checkpoint {number}; `yolo up{}` starts the session again",
        console::style("yolo:").bold(),
        located.flag()
    );
    Ok(0)
}

/// The workspace session's rollback: its containers that can write the folder stopped (the
/// agent's processes with them; the guard stays), then the folder written back.
async fn rewrite_workspace(engine: &Engine, session: &Session, cp: &Checkpoint) -> Result<()> {
    let located = &session.located;
    let _lock = crate::lock::acquire_checkpoints(&located.devcontainer_id, "rollback").await?;
    // A signal from here lets the rollback finish: a tree left half put back is worse.
    let _handled = crate::interrupt::Handled::enter();
    let made = engine.made_for(&located.owner()).await?;
    for c in made.containers.iter().filter(|c| c.role != Role::Guard) {
        engine.stop(&c.id).await?;
        if engine.inspect(&c.id).await.is_ok_and(|d| d.running) {
            return Err(Error::NotRunning(format!(
                "the container {} did not stop; nothing was rolled back",
                c.name
            )));
        }
    }
    let (workspace, id, cp) = (
        located.workspace.clone(),
        located.devcontainer_id.clone(),
        cp.clone(),
    );
    let (restored, warnings) = crate::session::checkpoints::blocking(move || {
        let mut warnings = Vec::new();
        let restored = checkpoint::workspace::restore(&workspace, &id, &cp, &mut warnings);
        (restored, warnings)
    })
    .await?;
    crate::session::checkpoints::say_warnings(&warnings, session.record()?.as_ref());
    restored
}

/// Asked on a terminal; without one, `--yes` must say it.
fn confirm(what: &str, yes: bool) -> Result<()> {
    use std::io::IsTerminal;
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Err(Error::Usage(format!(
            "{what}; run again with --yes to do it"
        )));
    }
    eprintln!("{what}.");
    let go = dialoguer::Confirm::new()
        .with_prompt("Roll back?")
        .default(false)
        .interact()
        .map_err(|e| Error::Usage(format!("no answer: {e}")))?;
    if go {
        Ok(())
    } else {
        Err(Error::NotApproved(
            "not rolled back; nothing changed".into(),
        ))
    }
}

/// A copy's rollback: its containers removed (the agent's processes with them), its volume
/// removed, and a new one filled with the checkpoint (`checkpoint::materialize`) through a
/// helper of the agent's image.
async fn rebuild_copy(
    engine: &Engine,
    located: &Located,
    cp: &Checkpoint,
    taking: &Taking,
) -> Result<()> {
    let found = engine.find(&located.owner()).await?;
    let Some(agent) = found.agent else {
        return Err(Error::NotRunning(format!(
            "the session{} has no agent container, whose image makes the copy anew: `yolo up{}` first",
            located.flag(),
            located.flag()
        )));
    };
    let image = agent.image.clone();
    let dir = tempfile::Builder::new()
        .prefix(".yolo-rollback-")
        .tempdir()
        .map_err(|e| Error::io(std::env::temp_dir(), e))?;
    checkpoint::materialize(&located.workspace, &located.devcontainer_id, cp, dir.path())?;
    crate::session::teardown::remove_all(engine, located, false).await?;
    let volume = crate::remote::workspace_volume(&located.devcontainer_id);
    engine.remove_volume(&volume).await?;
    engine
        .create_volume(&volume, &located.devcontainer_id)
        .await?;
    let source = dir.path().to_path_buf();
    let limits = taking.limits;
    let filled = engine
        .fill_volume_with(&volume, &located.devcontainer_id, &image, move |out| {
            crate::remote::pack_into(&source, out, limits)
        })
        .await;
    if let Err(e) = filled {
        // Half a copy is no copy: the next `up` makes one from the repository.
        let _ = engine.remove_volume(&volume).await;
        return Err(e);
    }
    Ok(())
}
