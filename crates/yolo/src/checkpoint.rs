//! Checkpoints (`yolo checkpoint`, `checkpoints`, `rollback`): a session's whole working tree
//! (tracked and untracked files, not the ignored ones, none larger than `[workspace]
//! sync_max_file`) recorded as a commit of the repository on a hidden ref,
//! `refs/yolo/checkpoints/<session id>/<N>`, its parent the commit `HEAD` was then (the agent's,
//! for a copy). Number 0 is taken when a session starts. Git plumbing on the host, hooks off
//! (`remote::git`): nothing of the working tree's own config runs.
//!
//! Putting a working tree back ([`restore_worktree`]) deletes what the checkpoint does not hold
//! and writes what it does through a temporary index (`read-tree`, `checkout-index`), so the
//! user's own index is untouched and git, not yolo, writes the files: it does not write
//! beyond a symbolic link (it replaces the link), and yolo's deletions do not follow one.
//! Ignored files (build output, `node_modules`) are never looked at, deleted or written.
//!
//! Written by hand on `git` (no crate): the same git the user runs, with the same ignore rules.

use crate::error::{Dependency, Error, Result};
use crate::remote::{git, git_missing};
use std::path::Path;

/// One recorded checkpoint.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Checkpoint {
    pub(crate) number: u32,
    pub(crate) commit: String,
    pub(crate) tree: String,
    /// `HEAD` when it was taken (`None`: a repository without a commit yet).
    pub(crate) parent: Option<String>,
    /// When it was taken (the commit's time, RFC 3339).
    pub(crate) taken: String,
    /// What it was taken for (`session start`, `yolo checkpoint`).
    pub(crate) what: String,
}

/// A working tree as a tree object, and what was left out.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub(crate) tree: String,
    /// `HEAD` (`None` without a commit).
    pub(crate) head: Option<String>,
    /// Untracked files larger than the limit, not in the tree (relative paths).
    pub(crate) left_out: Vec<String>,
}

/// `git` in `repo` with `args`; its stdout, trimmed. `index`: a temporary index in place of
/// the repository's.
fn run(repo: &Path, args: &[&str], index: Option<&Path>) -> Result<String> {
    let mut cmd = git(repo);
    cmd.args(args);
    if let Some(index) = index {
        cmd.env("GIT_INDEX_FILE", index);
    }
    let out = cmd.output().map_err(git_missing)?;
    if !out.status.success() {
        return Err(Error::dependency(
            Dependency::Git,
            format!(
                "git {} failed in {}: {}",
                args.first().copied().unwrap_or_default(),
                repo.display(),
                crate::visible::escape_controls(String::from_utf8_lossy(&out.stderr).trim())
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

/// Whether `repo` is the top of a git working tree (checkpoints need one).
pub(crate) fn is_repository(repo: &Path) -> bool {
    run(repo, &["rev-parse", "--show-toplevel"], None)
        .ok()
        .and_then(|top| std::fs::canonicalize(top).ok())
        .is_some_and(|top| std::fs::canonicalize(repo).is_ok_and(|r| r == top))
}

/// The working tree of `repo` as a tree object: tracked and untracked files as they are now
/// (not the ignored ones), through a copy of the repository's index (so only what changed is
/// hashed, and the real index is untouched); untracked files larger than `max_file` are left
/// out and named.
pub(crate) fn snapshot_worktree(repo: &Path, max_file: u64) -> Result<Snapshot> {
    let head = run(repo, &["rev-parse", "--verify", "--quiet", "HEAD"], None).ok();
    let temp = tempfile::tempdir().map_err(|e| Error::io(std::env::temp_dir(), e))?;
    let index = temp.path().join("index");
    let real = run(repo, &["rev-parse", "--git-path", "index"], None)?;
    let real = repo.join(real);
    if real.exists() {
        std::fs::copy(&real, &index).map_err(|e| Error::io(&real, e))?;
    }
    let untracked = run(
        repo,
        &["ls-files", "-z", "--others", "--exclude-standard"],
        Some(&index),
    )?;
    let left_out: Vec<String> = untracked
        .split('\0')
        .filter(|p| !p.is_empty())
        .filter(|p| {
            std::fs::symlink_metadata(repo.join(p)).is_ok_and(|m| m.is_file() && m.len() > max_file)
        })
        .map(str::to_string)
        .collect();
    let mut args: Vec<String> = ["add", "-A", "--", "."].map(String::from).to_vec();
    args.extend(left_out.iter().map(|p| format!(":(exclude,literal){p}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(repo, &args, Some(&index))?;
    let tree = run(repo, &["write-tree"], Some(&index))?;
    Ok(Snapshot {
        tree,
        head,
        left_out,
    })
}

/// The refs of session `id`'s checkpoints.
fn prefix(id: &str) -> String {
    format!("refs/yolo/checkpoints/{id}/")
}

/// Session `id`'s checkpoints, oldest first.
pub(crate) fn list(repo: &Path, id: &str) -> Result<Vec<Checkpoint>> {
    let listed = run(
        repo,
        &[
            "for-each-ref",
            "--format=%(refname)%00%(objectname)%00%(committerdate:iso-strict)%00%(contents:subject)",
            &prefix(id),
        ],
        None,
    )?;
    let mut out = Vec::new();
    for line in listed.lines() {
        let fields: Vec<&str> = line.split('\0').collect();
        let [name, commit, taken, subject] = fields.as_slice() else {
            continue;
        };
        let Some(number) = name
            .strip_prefix(&prefix(id))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let tree = run(repo, &["rev-parse", &format!("{commit}^{{tree}}")], None)?;
        let parent = run(
            repo,
            &["rev-parse", "--verify", "--quiet", &format!("{commit}^")],
            None,
        )
        .ok();
        out.push(Checkpoint {
            number,
            commit: commit.to_string(),
            tree,
            parent,
            taken: taken.to_string(),
            what: subject
                .split_once(": ")
                .map(|(_, what)| what.to_string())
                .unwrap_or_default(),
        });
    }
    out.sort_by_key(|c| c.number);
    Ok(out)
}

/// Record `tree` as session `id`'s next checkpoint (0 for the first), its parent `parent`.
pub(crate) fn record(
    repo: &Path,
    id: &str,
    tree: &str,
    parent: Option<&str>,
    what: &str,
) -> Result<Checkpoint> {
    let number = list(repo, id)?.last().map_or(0, |c| c.number + 1);
    let message = format!("yolo checkpoint {number}: {what}");
    let mut args = vec!["commit-tree", tree, "-m", &message];
    if let Some(parent) = parent {
        args.extend(["-p", parent]);
    }
    let commit = run(repo, &args, None)?;
    // Made, never moved: an existing ref of that number (another yolo at the same moment) is
    // an error, not overwritten.
    let zero = "0".repeat(commit.len());
    let name = format!("{}{number}", prefix(id));
    run(repo, &["update-ref", &name, &commit, &zero], None)?;
    Ok(Checkpoint {
        number,
        commit,
        tree: tree.to_string(),
        parent: parent.map(str::to_string),
        taken: chrono::Utc::now().to_rfc3339(),
        what: what.to_string(),
    })
}

/// Checkpoint `number` of session `id`, or an error naming those there are.
pub(crate) fn find(repo: &Path, id: &str, number: u32) -> Result<Checkpoint> {
    let all = list(repo, id)?;
    all.iter()
        .find(|c| c.number == number)
        .cloned()
        .ok_or_else(|| {
            let have: Vec<String> = all.iter().map(|c| c.number.to_string()).collect();
            Error::NotFound(format!(
                "no checkpoint {number}{}",
                if have.is_empty() {
                    " (this session has none: `yolo checkpoint` takes one)".to_string()
                } else {
                    format!(" (there are {})", have.join(", "))
                }
            ))
        })
}

/// What changed from `from` to `to` (trees or commits), as `git diff-tree --shortstat` says.
pub(crate) fn shortstat(repo: &Path, from: &str, to: &str) -> Result<String> {
    run(repo, &["diff-tree", "-r", "--shortstat", from, to], None)
}

/// What [`restore_worktree`] did.
#[derive(Debug, Default)]
pub(crate) struct Restored {
    /// Files removed (in the working tree, not in the checkpoint).
    pub(crate) removed: Vec<String>,
    /// Paths not removed: below a symbolic link, or not a file any more.
    pub(crate) kept: Vec<String>,
}

/// Put `repo`'s working tree back to the tree `checkpoint`: what the working tree holds now
/// and the checkpoint does not is removed, then every file of the checkpoint is written by
/// git through a temporary index. Ignored files, untracked files over `max_file` and the
/// repository's index and `HEAD` are left as they are.
pub(crate) fn restore_worktree(repo: &Path, checkpoint: &str, max_file: u64) -> Result<Restored> {
    let now = snapshot_worktree(repo, max_file)?;
    let added = run(
        repo,
        &[
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--name-only",
            "--diff-filter=A",
            checkpoint,
            &now.tree,
        ],
        None,
    )?;
    let mut restored = Restored::default();
    for rel in added.split('\0').filter(|p| !p.is_empty()) {
        if remove_below(repo, rel) {
            restored.removed.push(rel.to_string());
        } else {
            restored.kept.push(rel.to_string());
        }
    }
    let temp = tempfile::tempdir().map_err(|e| Error::io(std::env::temp_dir(), e))?;
    let index = temp.path().join("index");
    run(repo, &["read-tree", checkpoint], Some(&index))?;
    run(repo, &["checkout-index", "-a", "-f"], Some(&index))?;
    Ok(restored)
}

/// A working tree of checkpoint `cp` of the repository `repo` in the empty folder `dir`, for a
/// copy made anew: its `HEAD` detached at the checkpoint's parent (the agent's commit then),
/// its files the checkpoint's (what was uncommitted then is uncommitted again).
pub(crate) fn materialize(repo: &Path, id: &str, cp: &Checkpoint, dir: &Path) -> Result<()> {
    let here = format!("{}{}", prefix(id), cp.number);
    run(dir, &["init", "-q"], None)?;
    let source = repo.display().to_string();
    run(
        dir,
        &[
            "fetch",
            "-q",
            "--no-tags",
            &source,
            &format!("{here}:refs/yolo/checkpoint"),
        ],
        None,
    )?;
    if let Some(parent) = &cp.parent {
        run(dir, &["checkout", "-q", "--detach", parent], None)?;
    }
    run(dir, &["read-tree", "-u", "--reset", &cp.tree], None)?;
    if cp.parent.is_some() {
        run(dir, &["reset", "-q"], None)?;
    }
    run(dir, &["update-ref", "-d", "refs/yolo/checkpoint"], None)?;
    Ok(())
}

/// Remove the file (or link) `rel` below `root`, unless a folder on the way is a symbolic
/// link or not a folder (then nothing is touched, `false`); the folders it leaves empty go
/// too.
fn remove_below(root: &Path, rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    let Some((name, folders)) = parts.split_last() else {
        return false;
    };
    let mut dir = root.to_path_buf();
    for folder in folders {
        if matches!(*folder, "" | "." | "..") {
            return false;
        }
        dir.push(folder);
        if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
            return false;
        }
    }
    let path = dir.join(name);
    let removable = std::fs::symlink_metadata(&path).is_ok_and(|m| !m.is_dir());
    if !removable || std::fs::remove_file(&path).is_err() {
        return false;
    }
    // Empty folders it leaves: removed up to the root (`remove_dir` refuses a non-empty one).
    let mut up = path.parent().map(Path::to_path_buf);
    while let Some(folder) = up {
        if folder == root || std::fs::remove_dir(&folder).is_err() {
            break;
        }
        up = folder.parent().map(Path::to_path_buf);
    }
    true
}

/// A `[NAME@]N` of `yolo rollback`: the session's name (if given) and the number.
pub(crate) fn parse_spec(text: &str) -> std::result::Result<(Option<String>, u32), String> {
    let (name, number) = match text.rsplit_once('@') {
        Some((name, number)) => (Some(name), number),
        None => (None, text),
    };
    let number = number.parse::<u32>().map_err(|_| {
        format!(
            "{:?} is not a checkpoint: give N or NAME@N (`yolo checkpoints` lists them)",
            crate::visible::escape_controls(text)
        )
    })?;
    match name {
        Some(name) if !crate::cli::is_copy_name(name) => Err(format!(
            "{:?} is not a session name",
            crate::visible::escape_controls(name)
        )),
        name => Ok((name.map(str::to_string), number)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        run(r, &["init", "-q", "-b", "main"], None).unwrap();
        std::fs::write(r.join(".gitignore"), "ignored/\n").unwrap();
        std::fs::write(r.join("tracked.txt"), "one\n").unwrap();
        std::fs::write(r.join("gone.txt"), "here\n").unwrap();
        run(r, &["add", "-A"], None).unwrap();
        run(r, &["commit", "-q", "-m", "first"], None).unwrap();
        std::fs::write(r.join("untracked.txt"), "mine\n").unwrap();
        std::fs::create_dir(r.join("ignored")).unwrap();
        std::fs::write(r.join("ignored/build.o"), "obj\n").unwrap();
        dir
    }

    #[test]
    fn a_checkpoint_puts_back_tracked_and_untracked_files_and_leaves_ignored_ones() {
        let dir = repo();
        let r = dir.path();
        let index_before = std::fs::read(r.join(".git/index")).unwrap();
        let snap = snapshot_worktree(r, 1 << 20).unwrap();
        let first = record(r, "s1", &snap.tree, snap.head.as_deref(), "session start").unwrap();
        assert_eq!(first.number, 0);
        assert_eq!(std::fs::read(r.join(".git/index")).unwrap(), index_before);
        // The agent changes a tracked file, deletes one tracked and one untracked, adds files,
        // and its build writes ignored output.
        std::fs::write(r.join("tracked.txt"), "changed\n").unwrap();
        std::fs::remove_file(r.join("gone.txt")).unwrap();
        std::fs::remove_file(r.join("untracked.txt")).unwrap();
        std::fs::create_dir_all(r.join("new/deep")).unwrap();
        std::fs::write(r.join("new/deep/file.txt"), "new\n").unwrap();
        std::fs::write(r.join("ignored/more.o"), "obj\n").unwrap();
        let later = snapshot_worktree(r, 1 << 20).unwrap();
        let second = record(
            r,
            "s1",
            &later.tree,
            later.head.as_deref(),
            "yolo checkpoint",
        )
        .unwrap();
        assert_eq!(second.number, 1);
        assert_eq!(list(r, "s1").unwrap().len(), 2);
        assert!(shortstat(r, &first.tree, &second.tree)
            .unwrap()
            .contains("4 files changed"));
        let restored = restore_worktree(r, &first.tree, 1 << 20).unwrap();
        assert_eq!(restored.removed, ["new/deep/file.txt"]);
        assert_eq!(
            std::fs::read_to_string(r.join("tracked.txt")).unwrap(),
            "one\n"
        );
        assert_eq!(
            std::fs::read_to_string(r.join("gone.txt")).unwrap(),
            "here\n"
        );
        assert_eq!(
            std::fs::read_to_string(r.join("untracked.txt")).unwrap(),
            "mine\n"
        );
        assert!(!r.join("new").exists(), "the folders it left empty go");
        assert!(
            r.join("ignored/more.o").exists(),
            "ignored output is never touched"
        );
        // And forward again.
        restore_worktree(r, &second.tree, 1 << 20).unwrap();
        assert_eq!(
            std::fs::read_to_string(r.join("tracked.txt")).unwrap(),
            "changed\n"
        );
        assert!(!r.join("gone.txt").exists());
        assert!(find(r, "s1", 7).is_err());
        assert_eq!(list(r, "other").unwrap(), []);
    }

    /// ATTACK: after the checkpoint the agent replaces a folder with a link to somewhere
    /// outside the repository; putting the folder back must not write or delete anything
    /// there.
    #[test]
    fn a_folder_made_a_link_is_not_written_through() {
        let dir = repo();
        let r = dir.path();
        std::fs::create_dir(r.join("dir")).unwrap();
        std::fs::write(r.join("dir/file.txt"), "in the repo\n").unwrap();
        let snap = snapshot_worktree(r, 1 << 20).unwrap();
        let cp = record(r, "s", &snap.tree, snap.head.as_deref(), "session start").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep.txt"), "the host's\n").unwrap();
        std::fs::remove_dir_all(r.join("dir")).unwrap();
        std::os::unix::fs::symlink(outside.path(), r.join("dir")).unwrap();
        restore_worktree(r, &cp.tree, 1 << 20).unwrap();
        assert!(std::fs::symlink_metadata(r.join("dir")).unwrap().is_dir());
        assert_eq!(
            std::fs::read_to_string(r.join("dir/file.txt")).unwrap(),
            "in the repo\n"
        );
        let names: Vec<_> = std::fs::read_dir(outside.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["keep.txt"], "nothing written or removed outside");
        assert!(!remove_below(r, "dir/../../etc/passwd"));
    }

    #[test]
    fn a_large_untracked_file_is_left_out_and_named() {
        let dir = repo();
        let r = dir.path();
        std::fs::write(r.join("big.bin"), vec![0u8; 2048]).unwrap();
        let snap = snapshot_worktree(r, 1024).unwrap();
        assert_eq!(snap.left_out, ["big.bin"]);
        let files = run(r, &["ls-tree", "-r", "--name-only", &snap.tree], None).unwrap();
        assert!(
            !files.contains("big.bin") && files.contains("untracked.txt"),
            "{files}"
        );
    }

    #[test]
    fn a_rollback_names_a_number_and_maybe_a_session() {
        assert_eq!(parse_spec("3"), Ok((None, 3)));
        assert_eq!(parse_spec("fix-tests@0"), Ok((Some("fix-tests".into()), 0)));
        assert!(parse_spec("x").is_err());
        assert!(parse_spec("../x@1").is_err());
    }
}
