//! Checkpoints of a session's copy taken with its engine (`crate::checkpoint` does the git):
//! the copy read from its volume as `yolo diff` reads it, for a named session or any with a
//! remote engine. A workspace session on a local engine has none (`crate::checkpoint` says
//! why).

use crate::checkpoint::{self, Checkpoint};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::project::Located;
use crate::remote::Preview;
use crate::remote_copy::Taking;
use crate::session::Session;
use yolo_protocol::event::EventKind;

/// The copies this process made (`remote_copy::seed`), read as they were written: the start's
/// checkpoint of a new copy is taken from here instead of read back from the engine.
static SEEDED: std::sync::Mutex<Vec<(String, Previewing)>> = std::sync::Mutex::new(Vec::new());

/// The thread reading a new copy's archive as it is written.
pub(crate) type Previewing = std::thread::JoinHandle<Result<Preview>>;

/// What the new copy of session `devcontainer_id` holds, for its first checkpoint.
pub(crate) fn seeded(devcontainer_id: &str, preview: Previewing) {
    if let Ok(mut seeded) = SEEDED.lock() {
        seeded.push((devcontainer_id.to_string(), preview));
    }
}

/// The working tree of `located`'s session as a tree object, and the commit `HEAD` is.
pub(crate) async fn snapshot(
    engine: Option<&Engine>,
    located: &Located,
    taking: &Taking,
) -> Result<(String, Option<String>, Vec<String>)> {
    let made_here = SEEDED.lock().ok().and_then(|mut seeded| {
        let at = seeded
            .iter()
            .position(|(id, _)| *id == located.devcontainer_id)?;
        Some(seeded.swap_remove(at).1)
    });
    if let Some(previewing) = made_here {
        let preview = tokio::task::spawn_blocking(move || previewing.join())
            .await
            .ok()
            .and_then(|joined| joined.ok())
            .ok_or_else(|| {
                Error::failed(
                    crate::error::Failure::State,
                    crate::error::Cause::bare(std::io::Error::other("the copy's reading stopped")),
                )
            })??;
        let left_out = preview.skipped.into_iter().map(|s| s.path).collect();
        return Ok((preview.tree, Some(preview.head), left_out));
    }
    let engine = match engine {
        Some(engine) => engine.clone(),
        None => crate::commands::engine().await?,
    };
    let preview = crate::remote_copy::preview(&engine, located, taking)
        .await?
        .ok_or_else(|| {
            Error::NotRunning(format!(
                "the session{} has no copy to take a checkpoint of (`yolo up{}` makes one)",
                located.flag(),
                located.flag()
            ))
        })?;
    let left_out = preview.skipped.into_iter().map(|s| s.path).collect();
    Ok((preview.tree, Some(preview.head), left_out))
}

/// A session yolo can keep checkpoints of (one on a copy), or why not.
pub(crate) fn check_session(located: &Located) -> Result<()> {
    if located.copy_reason()?.is_none() {
        return Err(Error::Usage(format!(
            "the workspace session of {} works on the repository itself, whose .git the agent can write: yolo keeps no checkpoint of it (one it cannot trust would be written back on the host); run the agent in a named session (`yolo up --copy NAME`), whose copy has checkpoints",
            located.workspace.display()
        )));
    }
    if !checkpoint::is_repository(&located.workspace) {
        return Err(Error::Usage(format!(
            "{} is not the top of a git repository: checkpoints are commits of it",
            located.workspace.display()
        )));
    }
    Ok(())
}

/// Record the session's working tree as its next checkpoint; said on stderr and in its log.
pub(crate) async fn take(
    engine: Option<&Engine>,
    session: &Session,
    taking: &Taking,
    what: &str,
) -> Result<Checkpoint> {
    let located = &session.located;
    let (tree, head, left_out) = snapshot(engine, located, taking).await?;
    let cp = checkpoint::record(
        &located.workspace,
        &located.devcontainer_id,
        &tree,
        head.as_deref(),
        what,
    )?;
    for path in &left_out {
        eprintln!(
            "{} {} is larger than [workspace] sync_max_file: not in checkpoint {}",
            console::style("warning:").yellow().bold(),
            crate::visible::escape_controls(path),
            cp.number
        );
    }
    if let Some(writer) = session.record()? {
        writer.write(EventKind::Notice {
            message: format!(
                "checkpoint {} taken ({what}): commit {}",
                cp.number,
                &cp.commit[..cp.commit.len().min(12)]
            ),
        })?;
    }
    Ok(cp)
}

/// The checkpoint taken when a session on a copy starts (`yolo up`): a failure is a warning,
/// never the end of `up`; a workspace session has none (`check_session`).
pub(crate) async fn at_start(engine: &Engine, session: &Session) {
    if check_session(&session.located).is_err() {
        return;
    }
    let taken = match Taking::from_config() {
        Ok(taking) => take(Some(engine), session, &taking, "session start").await,
        Err(e) => Err(e),
    };
    if let Err(e) = taken {
        eprintln!(
            "{} no checkpoint at the session's start: {e}",
            console::style("warning:").yellow().bold()
        );
    }
}
