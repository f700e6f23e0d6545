//! Checkpoints of a workspace session (the agent works on the repository itself): its working
//! tree, tracked and untracked files, recorded in a git store of yolo's own, never in the
//! repository's `.git`, which the agent can write (a checkpoint kept there could be made to
//! hold what the agent chose, and a rollback to write it on the host).
//!
//! The store is a bare repository in yolo's data folder, `checkpoints/<devcontainerId>.git`,
//! out of every container's reach. Git is run with the store as `GIT_DIR`, the repository's
//! folder as its work tree and the store's own index, so only the files are read:
//!
//! - **Taking one.** The session's containers (the agent and any Compose service, all that can
//!   write the folder) are frozen first (`docker pause`), so nothing changes while git reads;
//!   then `git add --all` and `write-tree`, recorded as for copies (`crate::checkpoint`:
//!   `refs/yolo/checkpoints/<id>/<N>`, here in the store). Ignored files are not recorded,
//!   by the repository's `.gitignore` files and the `.git/info/exclude` of the session's
//!   start; git reads links as links and never follows one.
//! - **Ignored stays ignored.** When a session starts, the paths then ignored
//!   (`ls-files --others --ignored --directory`) are added, anchored, to the store's own
//!   exclude file, for good. A rollback reads the tree with these on top of whatever
//!   `.gitignore` the agent left: what was ignored when a session started (`node_modules/`,
//!   `.env`) is never recorded, deleted or written, even if the agent un-ignored it.
//! - **Byte for byte.** The store's `info/attributes` turns every attribute off
//!   (`-text -filter ...`): the repository's `.gitattributes` changes no line ending, runs no
//!   filter, in either direction. No global or system git config is read.
//! - **Rollback.** The session's containers are stopped (the agent's processes with them),
//!   the tree is read once more (`add --all`: the index is what is there now) and then
//!   `read-tree -u --reset` to the checkpoint: files made since are deleted, changed and
//!   deleted ones written back, folders emptied by it removed. Git removes a link standing
//!   where a folder must be before writing into it (it never writes through a link on the
//!   way), and deletes a link itself, never what it leads to. `.git` is never touched.
//!
//! Left out: a nested repository (an untracked folder with its own `.git`) is recorded as git
//! records one, its commit, not its files; a path holding a newline cannot be written as an
//! exclude pattern, so one ignored at the start is protected only while the repository's own
//! rules ignore it.

use crate::checkpoint::{self, Checkpoint};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The store of session `devcontainer_id`'s checkpoints.
pub(crate) fn store(devcontainer_id: &str) -> PathBuf {
    crate::store::root()
        .join("checkpoints")
        .join(format!("{devcontainer_id}.git"))
}

/// Every attribute off: the files go in and out as they are.
const ATTRIBUTES: &str = "* -text -eol -filter -diff -merge -ident -working-tree-encoding -crlf\n";

/// The store, made when there is none.
fn open(devcontainer_id: &str) -> Result<PathBuf> {
    let store = store(devcontainer_id);
    if store.join("HEAD").is_file() {
        return Ok(store);
    }
    let parent = store.parent().expect("in the checkpoints folder");
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    // Made aside and moved in place: a store is whole or not there.
    let made = tempfile::Builder::new()
        .prefix(".store-")
        .tempdir_in(parent)
        .map_err(|e| Error::io(parent, e))?;
    checkpoint::run(made.path(), &["init", "-q", "--bare"])?;
    let info = made.path().join("info");
    std::fs::create_dir_all(&info).map_err(|e| Error::io(&info, e))?;
    std::fs::write(info.join("attributes"), ATTRIBUTES)
        .map_err(|e| Error::io(info.join("attributes"), e))?;
    match std::fs::rename(made.path(), &store) {
        Ok(()) => {
            let _ = made.keep();
        }
        // Another yolo made it meanwhile.
        Err(_) if store.join("HEAD").is_file() => {}
        Err(e) => return Err(Error::io(&store, e)),
    }
    Ok(store)
}

/// Git with the store as its repository and `workspace` as its work tree.
fn git(store: &Path, workspace: &Path) -> Command {
    let mut cmd = crate::remote::git(store);
    cmd.args(["-c", "core.symlinks=true"])
        .args(["-c", "core.autocrlf=false"])
        .args(["-c", "core.safecrlf=false"])
        .args(["-c", "core.untrackedCache=false"])
        .args(["-c", "core.splitIndex=false"])
        .args(["-c", "advice.addEmbeddedRepo=false"])
        .env("GIT_DIR", store)
        .env("GIT_WORK_TREE", workspace)
        .env("GIT_INDEX_FILE", store.join("index"))
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_NO_REPLACE_OBJECTS", "1");
    cmd
}

fn run(store: &Path, workspace: &Path, args: &[&str], what: &str) -> Result<Vec<u8>> {
    crate::remote::succeeded(git(store, workspace).args(args), what)
}

/// The patterns the store's exclude file holds: the repository's `.git/info/exclude` as the
/// session started, then every path ignored when a session started.
fn write_excludes(store: &Path, workspace: &Path) -> Result<()> {
    let exclude = store.join("info").join("exclude");
    let kept = store.join("info").join("yolo-ignored");
    let mut ignored: std::collections::BTreeSet<String> = std::fs::read_to_string(&kept)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    // The repository's own, read as a plain file (not through a link), at most 1 MiB.
    let repository = read_plain(&workspace.join(".git").join("info").join("exclude"));
    std::fs::write(&exclude, format!("{repository}\n")).map_err(|e| Error::io(&exclude, e))?;
    let listed = run(
        store,
        workspace,
        &[
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--directory",
        ],
        "git cannot list the repository's ignored files",
    )?;
    for path in listed.split(|&b| b == 0).filter(|p| !p.is_empty()) {
        if let Some(pattern) = pattern_of(&String::from_utf8_lossy(path)) {
            ignored.insert(pattern);
        }
    }
    let list: String = ignored.iter().map(|p| format!("{p}\n")).collect();
    crate::store::replace(&kept, list.as_bytes()).map_err(|e| Error::io(&kept, e))?;
    std::fs::write(&exclude, format!("{repository}\n{list}")).map_err(|e| Error::io(&exclude, e))
}

/// `path` (relative, `/` at the end for a folder) as an exclude pattern matching it alone:
/// anchored, its special characters escaped; `None` for one with a newline, which no pattern
/// can hold.
fn pattern_of(path: &str) -> Option<String> {
    if path.contains('\n') || path.contains('\r') || path.is_empty() {
        return None;
    }
    let mut out = String::from("/");
    for c in path.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\' | '!' | '#' | ' ') {
            out.push('\\');
        }
        out.push(c);
    }
    Some(out)
}

/// A regular file's text (not through a link), at most 1 MiB; empty when there is none.
fn read_plain(path: &Path) -> String {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read;
    let Ok(fd) = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return String::new();
    };
    let file = std::fs::File::from(fd);
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return String::new();
    }
    let mut text = String::new();
    let _ = file.take(1 << 20).read_to_string(&mut text);
    text
}

/// Record the working tree of `workspace` as the next checkpoint of session
/// `devcontainer_id`. `start`: the session is starting (its ignored paths are added to the
/// store's, and the last checkpoint is its start when it holds the same tree). The session's
/// containers must be frozen or stopped.
pub(crate) fn take(
    workspace: &Path,
    devcontainer_id: &str,
    what: &str,
    start: bool,
) -> Result<Checkpoint> {
    let store = open(devcontainer_id)?;
    if start || !store.join("info").join("yolo-ignored").exists() {
        write_excludes(&store, workspace)?;
    }
    run(
        &store,
        workspace,
        &["add", "--all", "--", "."],
        "git cannot read the working tree",
    )?;
    let tree = run(
        &store,
        workspace,
        &["write-tree"],
        "git cannot record the tree",
    )?;
    let tree = String::from_utf8_lossy(&tree).trim().to_string();
    // A session that starts on the tree of the last checkpoint (an `up` after a `down`,
    // nothing changed between) has it as its start: `yolo checkpoints` is not filled with
    // copies of one tree.
    if start {
        if let Some(last) = checkpoint::list(&store, devcontainer_id)?.pop() {
            if last.tree == tree {
                return Ok(last);
            }
        }
    }
    // No parent: the repository's commits are not in the store (and its HEAD is the agent's
    // to move).
    checkpoint::record(&store, devcontainer_id, &tree, None, what)
}

/// Put the working tree of `workspace` back to checkpoint `cp` of the store of
/// `devcontainer_id`. The session's containers must be stopped.
pub(crate) fn restore(workspace: &Path, devcontainer_id: &str, cp: &Checkpoint) -> Result<()> {
    let store = open(devcontainer_id)?;
    // The index is what is there now (ignored paths left out), so what the checkpoint lacks
    // is deleted.
    run(
        &store,
        workspace,
        &["add", "--all", "--", "."],
        "git cannot read the working tree",
    )?;
    run(
        &store,
        workspace,
        &["read-tree", "-u", "--reset", &cp.tree],
        "git cannot put the working tree back",
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ignored_path_is_an_anchored_pattern_matching_it_alone() {
        assert_eq!(
            pattern_of("node_modules/").as_deref(),
            Some("/node_modules/")
        );
        assert_eq!(
            pattern_of("a b/!x#[1]*?").as_deref(),
            Some("/a\\ b/\\!x\\#\\[1\\]\\*\\?")
        );
        assert_eq!(pattern_of("bad\nname"), None);
    }
}
