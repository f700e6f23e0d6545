//! Checkpoints of a session taken with its engine (`crate::checkpoint` does the git). Of a copy
//! (a named session, or any with a remote engine): the copy read from its volume as `yolo diff`
//! reads it, refs in the repository. Of a workspace session: the repository's folder read with
//! the session's containers frozen, refs in yolo's own store (`checkpoint::workspace`).

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

/// The reading of session `devcontainer_id`'s new copy, when its copy failed: waited for, so
/// its temporary folder is gone before yolo exits.
pub(crate) fn forget_seeded(devcontainer_id: &str) {
    let found = SEEDED.lock().ok().and_then(|mut seeded| {
        let at = seeded.iter().position(|(id, _)| id == devcontainer_id)?;
        Some(seeded.swap_remove(at).1)
    });
    if let Some(previewing) = found {
        let _ = previewing.join();
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

/// Where a session's checkpoints are kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kept {
    /// A copy's: refs of the repository.
    Copy,
    /// A workspace session's: refs of yolo's store (`checkpoint::workspace`).
    Store,
}

impl Kept {
    /// The git repository holding the refs of `located`'s checkpoints.
    pub(crate) fn repo(self, located: &Located) -> std::path::PathBuf {
        match self {
            Kept::Copy => located.workspace.clone(),
            Kept::Store => checkpoint::workspace::store(&located.devcontainer_id),
        }
    }
}

/// Where `located`'s checkpoints are kept, or why it has none.
pub(crate) fn check_session(located: &Located) -> Result<Kept> {
    if located.copy_reason()?.is_none() {
        // The repository's folder is read by git, as git would read it. Once there is a
        // store, whatever the agent did to the repository's `.git` keeps none of it from
        // being listed or rolled back.
        if !checkpoint::workspace::has_store(&located.devcontainer_id)
            && !checkpoint::is_repository(&located.workspace)
        {
            return Err(Error::Usage(format!(
                "{} is not the top of a git repository: yolo records a workspace session's checkpoints with git, by its ignore rules",
                located.workspace.display()
            )));
        }
        return Ok(Kept::Store);
    }
    if !checkpoint::is_repository(&located.workspace) {
        return Err(Error::Usage(format!(
            "{} is not the top of a git repository: checkpoints are commits of it",
            located.workspace.display()
        )));
    }
    Ok(Kept::Copy)
}

/// The session's containers that can write its folder (the agent, any Compose service),
/// frozen while `read` runs, then thawed, whatever `read` did. Every one of them must be
/// paused or not running before `read` starts (one that could not be paused fails it); the
/// caller holds the store's lock, so no other checkpoint thaws them meanwhile. A signal
/// meanwhile lets this finish (`interrupt::Handled`): the containers are never left paused.
pub(crate) async fn frozen<T: Send + 'static>(
    engine: Option<&Engine>,
    located: &Located,
    read: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let _handled = crate::interrupt::Handled::enter();
    let engine = match engine {
        Some(engine) => engine.clone(),
        None => crate::commands::engine().await?,
    };
    let owner = located.owner();
    let writers = |made: crate::engine::Made| {
        made.containers
            .into_iter()
            .filter(|c| c.role != crate::engine::Role::Guard)
            .collect::<Vec<_>>()
    };
    let mut paused = Vec::new();
    let mut failed = None;
    for c in writers(engine.made_for(&owner).await?) {
        if c.state != "running" {
            continue;
        }
        match pause_retrying(&engine, &c.id).await {
            Ok(()) => paused.push(c.id.clone()),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if failed.is_none() {
        // None runs now (one started meanwhile would be read as running).
        match engine.made_for(&owner).await {
            Ok(made) => {
                if let Some(c) = writers(made).iter().find(|c| c.state == "running") {
                    failed = Some(Error::Conflict(format!(
                        "the container {} kept running while yolo paused the session's containers; no checkpoint was taken, try again",
                        c.name
                    )));
                }
            }
            Err(e) => failed = Some(e),
        }
    }
    let read = match failed {
        Some(e) => Err(e),
        None => blocking(read).await.and_then(|read| read),
    };
    for id in &paused {
        if let Err(e) = engine.unpause(id).await {
            eprintln!(
                "{} the container {id} stays paused: {e}; `docker unpause {id}` resumes it",
                console::style("warning:").yellow().bold()
            );
        }
    }
    read
}

/// Pause container `id`, tried three times: the cgroup freezer gives up ("unable to freeze")
/// when a process of the container keeps it busy on a loaded machine (an agent in a tight loop
/// of system calls did, under two test runs at once), and thaws what it froze; a later try
/// usually succeeds.
async fn pause_retrying(engine: &Engine, id: &str) -> Result<()> {
    let mut tries = 0;
    loop {
        tries += 1;
        match engine.pause(id).await {
            Err(e) if tries < 3 && e.to_string().contains("freeze") => {
                tokio::time::sleep(std::time::Duration::from_millis(150 * tries)).await;
            }
            other => return other,
        }
    }
}

/// The session's containers a checkpoint left paused (one cut off past `interrupt::CLEANUP`, or
/// a yolo killed while it read) resumed, once no checkpoint holds them: a checkpoint under way
/// is waited for. A paused agent fails every exec, and `up` cannot start it. Whether any was.
pub(crate) async fn resume_paused(engine: &Engine, located: &Located) -> Result<bool> {
    let _lock = crate::lock::acquire_checkpoints(&located.devcontainer_id, "resume").await?;
    let made = engine.made_for(&located.owner()).await?;
    let paused: Vec<_> = made
        .containers
        .iter()
        .filter(|c| c.state == "paused")
        .collect();
    for c in &paused {
        engine.unpause(&c.id).await?;
        eprintln!(
            "{} {} was paused (by a checkpoint cut off before it ended, or by hand); resumed",
            console::style("yolo:").bold(),
            c.name
        );
    }
    Ok(!paused.is_empty())
}

/// `work` on a thread that may block (git), its end awaited; a thread that panicked is an
/// error of yolo's state, not a panic here.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        Error::failed(
            crate::error::Failure::State,
            crate::error::Cause::bare(std::io::Error::other(e.to_string())),
        )
    })
}

/// What git could not take or do, said on stderr and as a `notice` in the session's log.
pub(crate) fn say_warnings(warnings: &[String], writer: Option<&crate::audit::Writer>) {
    for said in warnings.iter().filter(|w| !w.is_empty()) {
        let said = crate::visible::escape_controls(said);
        eprintln!("{} git: {said}", console::style("warning:").yellow().bold());
        if let Some(writer) = writer {
            let _ = writer.write(EventKind::Notice {
                message: format!("checkpoint: git: {said}"),
            });
        }
    }
}

/// Record the session's working tree as its next checkpoint; said on stderr and in its log.
pub(crate) async fn take(
    engine: Option<&Engine>,
    session: &Session,
    kept: Kept,
    taking: &Taking,
    what: &str,
) -> Result<Checkpoint> {
    let located = &session.located;
    let (cp, left_out) = match kept {
        Kept::Copy => {
            let (tree, head, left_out) = snapshot(engine, located, taking).await?;
            let cp = checkpoint::record(
                &located.workspace,
                &located.devcontainer_id,
                &tree,
                head.as_deref(),
                what,
            )?;
            (cp, left_out)
        }
        Kept::Store => {
            let _lock =
                crate::lock::acquire_checkpoints(&located.devcontainer_id, "checkpoint").await?;
            let (workspace, id) = (located.workspace.clone(), located.devcontainer_id.clone());
            let (reason, start) = (what.to_string(), what == AT_START);
            let (cp, warnings) = frozen(engine, located, move || {
                let mut warnings = Vec::new();
                checkpoint::workspace::take(&workspace, &id, &reason, start, &mut warnings)
                    .map(|cp| (cp, warnings))
            })
            .await?;
            say_warnings(&warnings, session.record()?.as_ref());
            (cp, Vec::new())
        }
    };
    for path in &left_out {
        eprintln!(
            "{} {} is larger than [workspace] sync_max_file: not in checkpoint {}",
            console::style("warning:").yellow().bold(),
            crate::visible::escape_controls(path),
            cp.number
        );
    }
    if let Some(writer) = session.record()? {
        writer.write(taken_notice(&cp, what))?;
    }
    Ok(cp)
}

/// The session log's line for checkpoint `cp`, taken for `what`.
fn taken_notice(cp: &Checkpoint, what: &str) -> EventKind {
    EventKind::Notice {
        message: format!(
            "checkpoint {} taken ({what}): commit {}",
            cp.number,
            &cp.commit[..cp.commit.len().min(12)]
        ),
    }
}

/// The workspace session's first checkpoint, taken while its new containers are made and
/// before any of them starts (nothing else writes the folder then, so nothing is paused):
/// whether it was (a failure is a warning, as in [`at_start`]). A copy's is taken after.
pub(crate) async fn before_start(located: &Located, writer: &crate::audit::Writer) -> bool {
    let (located, workspace, id) = (
        located.clone(),
        located.workspace.clone(),
        located.devcontainer_id.clone(),
    );
    let Ok(_lock) = crate::lock::acquire_checkpoints(&id, "up").await else {
        return false;
    };
    let taken = tokio::task::spawn_blocking(move || {
        if !matches!(check_session(&located), Ok(Kept::Store)) {
            return None;
        }
        let mut warnings = Vec::new();
        let taken = checkpoint::workspace::take(&workspace, &id, AT_START, true, &mut warnings);
        Some((taken, warnings))
    })
    .await
    .ok()
    .flatten();
    let Some((taken, warnings)) = taken else {
        return false;
    };
    say_warnings(&warnings, Some(writer));
    match taken {
        Ok(cp) => {
            let _ = writer.write(taken_notice(&cp, AT_START));
            true
        }
        Err(e) => {
            eprintln!(
                "{} no checkpoint at the session's start: {e}",
                console::style("warning:").yellow().bold()
            );
            true
        }
    }
}

/// What the checkpoint taken when a session starts is for.
const AT_START: &str = "session start";

/// The checkpoint taken when a session starts (`yolo up`): a failure is a warning, never the
/// end of `up`; a folder that is not a git repository's top has none (`check_session`).
pub(crate) async fn at_start(engine: &Engine, session: &Session) {
    let Ok(kept) = check_session(&session.located) else {
        return;
    };
    let taken = match Taking::from_config() {
        Ok(taking) => take(Some(engine), session, kept, &taking, AT_START).await,
        Err(e) => Err(e),
    };
    if let Err(e) = taken {
        eprintln!(
            "{} no checkpoint at the session's start: {e}",
            console::style("warning:").yellow().bold()
        );
    }
}

/// With `[workspace] checkpoint_every_exec`, a checkpoint before the command `argv` starts in
/// the session (`yolo exec`, an agent's `yolo run`): a failure is a warning, the command
/// runs.
pub(crate) async fn before_command(engine: &Engine, session: &Session, argv: &[String]) {
    let taking = match Taking::from_config() {
        Ok(taking) if taking.every_exec => taking,
        _ => return,
    };
    let Ok(kept) = check_session(&session.located) else {
        return;
    };
    let mut what = format!(
        "before {}",
        shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_default()
    );
    if what.len() > 200 {
        let cut = (0..=200)
            .rev()
            .find(|&i| what.is_char_boundary(i))
            .unwrap_or(0);
        what.truncate(cut);
        what.push('…');
    }
    let what = what.replace(['\n', '\r'], " ");
    match take(Some(engine), session, kept, &taking, &what).await {
        Ok(cp) => eprintln!(
            "{} checkpoint {} before this command; `yolo rollback{} {}` undoes it",
            console::style("yolo:").bold(),
            cp.number,
            session.located.flag(),
            cp.number
        ),
        Err(e) => eprintln!(
            "{} no checkpoint before this command: {e}",
            console::style("warning:").yellow().bold()
        ),
    }
}
