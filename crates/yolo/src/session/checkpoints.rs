//! Checkpoints of a session's working tree taken with its engine (`crate::checkpoint` does
//! the git): the repository's own working tree for a workspace session, the copy (read from
//! its volume as `yolo diff` reads it) for a named one or any with a remote engine.

use crate::checkpoint::{self, Checkpoint};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::project::Located;
use crate::remote_copy::Taking;
use crate::session::Session;
use yolo_protocol::event::EventKind;

/// The working tree of `located`'s session as a tree object, and the commit `HEAD` is.
pub(crate) async fn snapshot(
    engine: Option<&Engine>,
    located: &Located,
    taking: &Taking,
) -> Result<(String, Option<String>, Vec<String>)> {
    if located.copy_reason()?.is_none() {
        let snap = checkpoint::snapshot_worktree(&located.workspace, taking.limits.max_file)?;
        return Ok((snap.tree, snap.head, snap.left_out));
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

/// A repository yolo can keep checkpoints in, or why not.
pub(crate) fn check_repository(located: &Located) -> Result<()> {
    if checkpoint::is_repository(&located.workspace) {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{} is not the top of a git repository: checkpoints are commits of it (`git init` makes one)",
        located.workspace.display()
    )))
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

/// The checkpoint taken when a session starts (`yolo up`): a failure is a warning, never the
/// end of `up`; a workspace that is no git repository has none.
pub(crate) async fn at_start(engine: &Engine, session: &Session) {
    if !checkpoint::is_repository(&session.located.workspace) {
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
