//! The workspace's copy on a remote engine (`engine::remote`): the agent works on a copy of the
//! repository in a volume. `seed` makes the copy when the volume is new; `bring_back` brings its
//! commits and uncommitted files back as the branch `yolo/<name>` of the local repository
//! (`remote`, which holds the git side), for `yolo sync` and `yolo down`; `collect_events`
//! copies the guard's events out of their volume.
//!
//! The copy is the agent's, so what comes back is bounded (`settings::SyncLimits`: a file too
//! large is left out and named, an archive too large stops the sync) and streamed from the
//! engine into a temporary folder, never held in memory; and the files the host runs that it
//! changed on the branch are flagged as the local path flags them (`watched::report_copy`).

use crate::audit::{EventKind, Writer};
use crate::devcontainer::names;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::project::{Located, Project};
use crate::remote::{self, Brought, Returned};
use crate::settings::SyncLimits;
use crate::user_config::UserConfig;

/// What a sync takes from the copy and looks at in it, from the user's config.
pub(crate) struct Taking {
    pub(crate) limits: SyncLimits,
    /// `[workspace] watch`.
    pub(crate) watch: Vec<String>,
    /// `[workspace] checkpoint_every_exec`.
    pub(crate) every_exec: bool,
}

impl Taking {
    pub(crate) fn from_config() -> Result<Taking> {
        let user = UserConfig::load()?;
        Ok(Taking {
            limits: SyncLimits::resolve(&user)?,
            watch: crate::settings::watch_list(&user)?,
            every_exec: user.workspace.checkpoint_every_exec.unwrap_or(false),
        })
    }
}

/// With a remote engine, the workspace volume made and the repository copied into it, through
/// a helper container of `image` (an image the engine has: the guard's or the agent's), when
/// the volume does not exist yet: a kept volume holds the agent's work and is never
/// overwritten. Called before the first container that mounts it is made (Docker would make
/// the volume empty, unlabelled).
pub(crate) async fn seed(engine: &Engine, project: &Project, image: &str) -> Result<()> {
    let spec = &project.spec;
    let volume = &spec.workspace_mount.source;
    if !spec.uses_copy() || engine.volume_exists(volume).await? {
        return Ok(());
    }
    let workspace = spec.workspace.clone();
    let id = spec.devcontainer_id.clone();
    let limits = Taking::from_config()?.limits;
    let why = project
        .located()
        .copy_reason()?
        .unwrap_or_else(|| "the engine is remote".into());
    eprintln!(
        "{} copying {} into the volume {volume}: {why}",
        console::style("yolo:").bold(),
        spec.workspace.display(),
    );
    engine.create_volume(volume, &spec.devcontainer_id).await?;
    // The archive also goes to `remote::preview` as it is written, on a thread of its own: the
    // start's checkpoint is what the copy holds, without reading it back from the engine.
    let checkpoints = matches!(
        crate::session::checkpoints::check_session(project.located()),
        Ok(crate::session::checkpoints::Kept::Copy)
    );
    let copied = engine
        .fill_volume_with(volume, &spec.devcontainer_id, image, move |out| {
            if !checkpoints {
                return remote::pack_into(&workspace, out, limits);
            }
            let (reader, writer) = std::io::pipe().map_err(|e| Error::io(&workspace, e))?;
            let repo = workspace.clone();
            let previewing = std::thread::spawn(move || {
                let mut reader = reader;
                let preview =
                    remote::preview_as(&repo, &mut reader, limits, remote::Layout::Entries);
                // What the preview left unread, so the writer never waits on it.
                let _ = std::io::copy(&mut reader, &mut std::io::sink());
                preview
            });
            let mut tee = Tee {
                out,
                copy: Some(writer),
            };
            let packed = remote::pack_into(&workspace, &mut tee, limits);
            drop(tee.copy.take());
            match &packed {
                // Its git work goes on while the containers start; the checkpoint waits for
                // it.
                Ok(_) => crate::session::checkpoints::seeded(&id, previewing),
                // Ended (its input is closed) before yolo exits, so its folder goes with it.
                Err(_) => {
                    let _ = previewing.join();
                }
            }
            packed
        })
        .await;
    let skipped = match copied {
        Ok(skipped) => skipped,
        Err(e) => {
            // The start's reading of a copy that failed is of no use: ended, its folder gone.
            crate::session::checkpoints::forget_seeded(&spec.devcontainer_id);
            // Half a copy is no copy: the next `up` makes it again.
            let _ = engine.remove_volume(volume).await;
            return Err(e);
        }
    };
    for s in &skipped {
        eprintln!(
            "{} {} ({}) was left out of the copy: it is larger than {}, the largest file yolo copies to the remote engine ([workspace] sync_max_file); the agent does not see it, and if git tracks it, the branch `yolo sync` writes records it as deleted",
            console::style("warning:").yellow().bold(),
            crate::visible::escape_controls(&s.path),
            remote::size_words(s.size),
            remote::size_words(limits.max_file)
        );
    }
    // What the copy holds of the files the host runs: the first sync compares with it.
    let recorded = remote::copy_baseline(&spec.workspace, &project.settings.watch)
        .and_then(|scan| crate::watched::start_copy(&spec.devcontainer_id, &scan));
    if let Err(e) = recorded {
        eprintln!(
            "{} could not record the files your host runs in the copy: {e}",
            console::style("warning:").yellow().bold()
        );
    }
    Ok(())
}

/// What is written to `out` also goes to `copy` while `copy` takes it (its reader may stop).
struct Tee<'a> {
    out: &'a mut dyn std::io::Write,
    copy: Option<std::io::PipeWriter>,
}

impl std::io::Write for Tee<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        if let Some(copy) = &mut self.copy {
            if copy.write_all(&buf[..n]).is_err() {
                self.copy = None;
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// The agent's work as the branch, printed with what was left out and the files the host
/// runs it changed (those also to `writer`'s audit log); `None` when this workspace has no copy
/// (no agent container mounting the volume).
pub(crate) async fn bring_back(
    engine: &Engine,
    located: &Located,
    taking: &Taking,
    writer: Option<&Writer>,
) -> Result<Option<Brought>> {
    let Some(copy) = CopyAt::find(engine, located).await? else {
        return Ok(None);
    };
    let branch = match &located.copy {
        Some(name) => format!("yolo/{name}"),
        None => remote::branch_name(&names::container_name(
            &located.workspace,
            &located.devcontainer_id,
        )),
    };
    let repo = located.workspace.clone();
    let (limits, watch) = (taking.limits, taking.watch.clone());
    let Returned {
        brought,
        skipped,
        watched,
    } = copy
        .read(engine, move |tar| {
            remote::bring_back(&repo, tar, &branch, limits, &watch)
        })
        .await
        .map_err(|e| match (e, &located.copy) {
            // The command to run again names the session.
            (Error::Conflict(why), Some(name)) => {
                Error::Conflict(why.replace("`yolo sync`", &format!("`yolo sync {name}`")))
            }
            (e, _) => e,
        })?;
    for s in &skipped {
        let message = format!(
            "{} ({}) was left out of the agent's work: it is larger than {}, the largest file `yolo sync` takes ([workspace] sync_max_file); the branch keeps what its commit has there",
            crate::visible::escape_controls(&s.path),
            remote::size_words(s.size),
            remote::size_words(limits.max_file)
        );
        eprintln!("{} {message}", console::style("warning:").yellow().bold());
        if let Some(writer) = writer {
            writer.write(EventKind::Notice { message })?;
        }
    }
    let branch = match &brought {
        Brought::Updated { branch, .. } | Brought::UpToDate { branch } => branch.clone(),
    };
    match crate::watched::report_copy(&located.devcontainer_id, &watched, writer) {
        Ok(report) => eprint!(
            "{}",
            crate::watched::summary_for_branch(&report.changes, &branch)
        ),
        Err(e) => eprintln!(
            "{} could not check the files your host runs on {branch}: {e}",
            console::style("warning:").yellow().bold()
        ),
    }
    match &brought {
        Brought::Updated { branch, commit } => eprintln!(
            "{} the agent's work is on the branch {branch} ({}); your branch and files are untouched. Look: `git log -p HEAD..{branch}`; take it: `git merge {branch}`",
            console::style("yolo:").bold(),
            &commit[..commit.len().min(12)]
        ),
        Brought::UpToDate { branch } => eprintln!(
            "{} {branch} already holds the agent's work",
            console::style("yolo:").bold()
        ),
    }
    Ok(Some(brought))
}

/// [`collect_events`] every `every` until the returned task is dropped (the audit shipper,
/// which follows the local copies); a failed copy is tried again at the next round.
pub(crate) fn keep_collecting(located: Located, every: std::time::Duration) -> AbortOnDrop {
    AbortOnDrop(tokio::spawn(async move {
        let Ok(engine) = Engine::connect().await else {
            return;
        };
        loop {
            let _ = collect_events(&engine, &located).await;
            tokio::time::sleep(every).await;
        }
    }))
}

/// Where the session's copy is read: a container mounting its volume (the session's agent,
/// or a helper made for the read), and the volume's place in it.
struct CopyAt {
    container: String,
    target: String,
    /// The container is a helper, removed once read.
    helper: bool,
}

impl CopyAt {
    /// The session's agent container and where the copy's volume is mounted in it; without
    /// one (`down --remove` took the containers and kept the volume, as it does when the work
    /// could not be brought back), a helper mounting the volume. `None` when there is no copy.
    async fn find(engine: &Engine, located: &Located) -> Result<Option<CopyAt>> {
        let volume = remote::workspace_volume(&located.devcontainer_id);
        if let Some(agent) = engine.find(&located.owner()).await?.agent {
            if let Some(target) = engine.volume_mount_point(&agent.id, &volume).await? {
                return Ok(Some(CopyAt {
                    container: agent.id,
                    target,
                    helper: false,
                }));
            }
        }
        if located.copy_reason()?.is_none() || !engine.volume_exists(&volume).await? {
            return Ok(None);
        }
        // Any image does for a container that is never started: the guard's, which yolo makes
        // without a registry.
        let guard =
            crate::settings::GuardSettings::resolve(&crate::user_config::UserConfig::load()?)?;
        let image = engine
            .ensure_guard_image(&guard.base_image, guard.image.as_deref())
            .await?;
        let (container, target) = engine
            .volume_reader(&volume, &located.devcontainer_id, &image)
            .await?;
        Ok(Some(CopyAt {
            container,
            target,
            helper: true,
        }))
    }

    /// The copy's archive handed to `read`; a helper is removed after, whatever the read gave.
    async fn read<T: Send + 'static>(
        self,
        engine: &Engine,
        read: impl FnOnce(&mut dyn std::io::Read) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        // A helper is removed even after a Ctrl-C (within `interrupt::CLEANUP`).
        let _handled = self.helper.then(crate::interrupt::Handled::enter);
        let out = engine
            .download_with(&self.container, &self.target, read)
            .await;
        if self.helper {
            let removed = engine.remove_container(&self.container, true).await;
            let out = out?;
            removed?;
            return Ok(out);
        }
        out
    }
}

/// What `yolo sync` would bring from the session's copy ([`remote::preview`]), read from the
/// agent container's volume as `bring_back` reads it; `None` when there is no copy.
pub(crate) async fn preview(
    engine: &Engine,
    located: &Located,
    taking: &Taking,
) -> Result<Option<remote::Preview>> {
    let Some(copy) = CopyAt::find(engine, located).await? else {
        return Ok(None);
    };
    let repo = located.workspace.clone();
    let limits = taking.limits;
    copy.read(engine, move |tar| remote::preview(&repo, tar, limits))
        .await
        .map(Some)
}

/// A task aborted when this is dropped.
pub(crate) struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// With a remote engine, the guard's event files (network, execs, files), copied from its
/// events volume into the local data folder where `yolo audit` and the reports read them: each
/// file here gets the whole lines the guard added since (`remote::store_event_files`). Does
/// nothing with this machine's engine, named sessions included (the guard writes the data
/// folder itself).
pub(crate) async fn collect_events(engine: &Engine, located: &Located) -> Result<()> {
    if crate::engine::remote::remote_reason()?.is_none() {
        return Ok(());
    }
    let volume = remote::events_volume(&located.devcontainer_id);
    let Some(guard) = engine.find(&located.owner()).await?.guard else {
        return Ok(());
    };
    let Some(folder) = engine.volume_mount_point(&guard.id, &volume).await? else {
        return Ok(());
    };
    let dir = crate::audit::network_dir();
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    engine
        .download_with(&guard.id, &folder, move |tar| {
            remote::store_event_files(tar, &dir).map(|_| ())
        })
        .await
}
