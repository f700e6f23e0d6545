//! One yolo at a time per workspace for whatever makes or removes its containers: `up`, the
//! `up` part of `run`, `down`. Two at once used to leave two networks with one name (Docker
//! does not refuse that) and a workspace no later `up` could use. The lock is advisory
//! (`flock` on Unix, `LockFileEx` on Windows) on `<data dir>/workspaces/<id>.lock`, so the
//! system releases it when yolo dies however it dies; the file is never removed (removing a
//! lock file lets a third process lock a fresh one while the second still holds the old).
//! The holder writes its pid and command into it for the waiting one's message.

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::PathBuf;
use std::time::Duration;

/// How often a waiting yolo tries again (a poll, so Ctrl-C ends the wait at once).
const RETRY: Duration = Duration::from_millis(200);

/// The held lock; released when dropped.
#[derive(Debug)]
pub(crate) struct WorkspaceLock {
    _file: File,
}

/// Take the workspace's lock for `command` (`up`, `down`...), waiting for another yolo that
/// holds it, with one line saying so.
pub(crate) async fn acquire(devcontainer_id: &str, command: &str) -> Result<WorkspaceLock> {
    acquire_at(
        crate::store::workspace_lock(devcontainer_id),
        command,
        "on this workspace",
    )
    .await
}

/// The lock for making the network all guards share (`Engine::ensure_shared_network`): one
/// for all workspaces, held for the one request.
pub(crate) async fn acquire_network(name: &str) -> Result<WorkspaceLock> {
    let path = crate::store::network_lock(name);
    acquire_at(path, "up", &format!("making the network {name}")).await
}

/// The lock for claiming a spare network namespace on network `name` (`engine::spares`): two
/// `up`s never rename the same one. Held for a list and a rename, so waited for in full (a
/// blocking `flock` on a thread of its own), not polled: twenty `up`s at once queue on it.
pub(crate) async fn acquire_spare_claim(name: &str) -> Result<WorkspaceLock> {
    wait_for(spares_lock_path(name, "claim")).await
}

/// The lock of making spares (on any network), only if it is free now (`None`: another yolo
/// is making them): one top-up at a time.
pub(crate) fn try_spare_making() -> Result<Option<WorkspaceLock>> {
    let path = spares_lock_path("spares", "make");
    let file = open_lock_file(&path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(WorkspaceLock { _file: file })),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(Error::io(&path, e)),
    }
}

/// The same lock, waited for: `down --remove` of the last session lets a top-up under way
/// finish before it removes the spares, so none is made after it.
pub(crate) async fn acquire_spare_making() -> Result<WorkspaceLock> {
    wait_for(spares_lock_path("spares", "make")).await
}

fn spares_lock_path(name: &str, what: &str) -> PathBuf {
    crate::store::root()
        .join("spares")
        .join(format!("{name}.{what}.lock"))
}

/// The lock at `path`, waited for in full: a blocking `flock` on a thread of its own, for
/// locks held a moment (no line said while waiting).
async fn wait_for(path: PathBuf) -> Result<WorkspaceLock> {
    let file = open_lock_file(&path)?;
    tokio::task::spawn_blocking(move || file.lock().map(|()| WorkspaceLock { _file: file }))
        .await
        .map_err(|e| Error::io(&path, std::io::Error::other(e)))?
        .map_err(|e| Error::io(&path, e))
}

/// The lock file at `path`, made (with its folder) if missing, never truncated.
fn open_lock_file(path: &std::path::Path) -> Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| Error::io(path, e))
}

/// The lock of a workspace session's checkpoint store (`checkpoint::workspace`): one
/// checkpoint or rollback at a time, so no two overlap their pauses of the session's
/// containers.
pub(crate) async fn acquire_checkpoints(
    devcontainer_id: &str,
    command: &str,
) -> Result<WorkspaceLock> {
    let path = crate::store::root()
        .join("checkpoints")
        .join(format!("{devcontainer_id}.lock"));
    acquire_at(path, command, "on this session's checkpoints").await
}

async fn acquire_at(path: PathBuf, command: &str, scope: &str) -> Result<WorkspaceLock> {
    let mut file = open_lock_file(&path)?;
    let mut tries = 0;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) => {
                tries += 1;
                // Said on the second try: a wait that short needs no line, and by then the
                // holder has written who it is (it writes right after it locks).
                if tries == 2 {
                    eprintln!(
                        "{} waiting for {}…",
                        console::style("yolo:").bold(),
                        holder(&mut file, scope)
                    );
                }
                tokio::time::sleep(RETRY).await;
            }
            Err(TryLockError::Error(e)) => return Err(Error::io(&path, e)),
        }
    }
    let mine = format!("{} {command}\n", std::process::id());
    let written = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(mine.as_bytes()));
    written.map_err(|e| Error::io(&path, e))?;
    Ok(WorkspaceLock { _file: file })
}

/// "another yolo up on this workspace (pid N)" from what the holder wrote, or less when it
/// wrote nothing yet.
fn holder(file: &mut File, scope: &str) -> String {
    let mut text = String::new();
    let _ = file.rewind().and_then(|()| file.read_to_string(&mut text));
    describe(&text, scope)
}

fn describe(text: &str, scope: &str) -> String {
    let mut words = text.split_whitespace();
    match (
        words.next().and_then(|p| p.parse::<u32>().ok()),
        words.next(),
    ) {
        (Some(pid), Some(command)) => {
            format!("another yolo {command} {scope} (pid {pid})")
        }
        (Some(pid), None) => format!("another yolo {scope} (pid {pid})"),
        _ => format!("another yolo {scope}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_waiting_message_names_the_holder_when_it_can() {
        let here = "on this workspace";
        assert_eq!(
            describe("4242 up\n", here),
            "another yolo up on this workspace (pid 4242)"
        );
        assert_eq!(
            describe("4242", here),
            "another yolo on this workspace (pid 4242)"
        );
        assert_eq!(describe("", here), "another yolo on this workspace");
        assert_eq!(describe("garbage", here), "another yolo on this workspace");
        assert_eq!(
            describe("7 up\n", "making the network yolo-guards"),
            "another yolo up making the network yolo-guards (pid 7)"
        );
    }
}
