//! Checkpoints of a session (`yolo checkpoint`, `checkpoints`, `rollback`). Of a copy: the
//! copy's whole working tree (tracked and untracked files, not the ignored ones, within
//! `[workspace] sync_max_file`/`sync_max_total`, read as `yolo sync` reads it) recorded as a
//! commit of the repository on a hidden ref, `refs/yolo/checkpoints/<session id>/<N>`, its
//! parent the agent's commit then. Numbers go on across the sessions of one name; each new
//! session's first is taken at its start. A rollback makes the copy anew from one
//! ([`materialize`]).
//!
//! For a copy the refs are the repository's: it is then out of the agent's reach, so the refs,
//! objects and config git reads here are the user's. A workspace session's agent can write the
//! repository's `.git`, so its checkpoints are kept in a store of yolo's own
//! ([`workspace`]), with the same refs.
//!
//! Git plumbing on the host (`remote::git`: hooks off), without the user's global and system
//! config (no filter or smudge of theirs runs on the agent's files) and without replace refs.
//! Written by hand on `git` (no crate): the same git and ignore rules as `yolo sync`.

pub(crate) mod workspace;

use crate::error::{Error, Result};
use crate::remote::git;
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

/// `git` in `repo` with `args`; its stdout, trimmed.
pub(crate) fn run(repo: &Path, args: &[&str]) -> Result<String> {
    let out = crate::remote::succeeded(
        git(repo)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_NO_REPLACE_OBJECTS", "1"),
        &format!(
            "git {} failed in {}",
            args.first().copied().unwrap_or_default(),
            repo.display()
        ),
    )?;
    Ok(String::from_utf8_lossy(&out).trim_end().to_string())
}

/// Whether `repo` is the top of a git working tree (checkpoints need one).
pub(crate) fn is_repository(repo: &Path) -> bool {
    run(repo, &["rev-parse", "--show-toplevel"])
        .ok()
        .and_then(|top| std::fs::canonicalize(top).ok())
        .is_some_and(|top| std::fs::canonicalize(repo).is_ok_and(|r| r == top))
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
            "--format=%(refname)%00%(objectname)%00%(tree)%00%(parent)%00%(committerdate:iso-strict)%00%(contents:subject)",
            &prefix(id),
        ])?;
    let mut out = Vec::new();
    for line in listed.lines() {
        let fields: Vec<&str> = line.split('\0').collect();
        let [name, commit, tree, parent, taken, subject] = fields.as_slice() else {
            continue;
        };
        let Some(number) = name
            .strip_prefix(&prefix(id))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        out.push(Checkpoint {
            number,
            commit: commit.to_string(),
            tree: tree.to_string(),
            // The first parent (yolo's commits have at most one).
            parent: parent
                .split(' ')
                .next()
                .filter(|p| !p.is_empty())
                .map(str::to_string),
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
    let number = match list(repo, id)?.last() {
        None => 0,
        Some(last) => last.number.checked_add(1).ok_or_else(|| {
            Error::Usage("this session has as many checkpoints as there can be".into())
        })?,
    };
    let message = format!("yolo checkpoint {number}: {what}");
    let mut args = vec!["commit-tree", tree, "-m", &message];
    if let Some(parent) = parent {
        args.extend(["-p", parent]);
    }
    let commit = run(repo, &args)?;
    // Made, never moved: an existing ref of that number (another yolo at the same moment) is
    // an error, not overwritten.
    let zero = "0".repeat(commit.len());
    let name = format!("{}{number}", prefix(id));
    run(repo, &["update-ref", &name, &commit, &zero])?;
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
    run(repo, &["diff-tree", "-r", "--shortstat", from, to])
}

/// A working tree of checkpoint `cp` of the repository `repo` in the empty folder `dir`, for a
/// copy made anew: its `HEAD` detached at the checkpoint's parent (the agent's commit then),
/// its files the checkpoint's (what was uncommitted then is uncommitted again).
pub(crate) fn materialize(repo: &Path, id: &str, cp: &Checkpoint, dir: &Path) -> Result<()> {
    let here = format!("{}{}", prefix(id), cp.number);
    run(dir, &["init", "-q"])?;
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
    )?;
    if let Some(parent) = &cp.parent {
        run(dir, &["checkout", "-q", "--detach", parent])?;
    }
    run(dir, &["read-tree", "-u", "--reset", &cp.tree])?;
    if cp.parent.is_some() {
        run(dir, &["reset", "-q"])?;
    }
    run(dir, &["update-ref", "-d", "refs/yolo/checkpoint"])?;
    Ok(())
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

    /// A repository with one commit, and a tree of other content in its objects.
    fn repo() -> (tempfile::TempDir, String, String) {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        run(r, &["init", "-q", "-b", "main"]).unwrap();
        std::fs::write(r.join("a.txt"), "one\n").unwrap();
        run(r, &["add", "-A"]).unwrap();
        run(r, &["commit", "-q", "-m", "first"]).unwrap();
        let head = run(r, &["rev-parse", "HEAD"]).unwrap();
        std::fs::write(r.join("a.txt"), "two\n").unwrap();
        std::fs::write(r.join("b.txt"), "untracked\n").unwrap();
        run(r, &["add", "-A"]).unwrap();
        let tree = run(r, &["write-tree"]).unwrap();
        run(r, &["reset", "-q"]).unwrap();
        (dir, head, tree)
    }

    #[test]
    fn checkpoints_are_numbered_refs_listed_in_order() {
        let (dir, head, tree) = repo();
        let r = dir.path();
        let first = record(r, "s1", &tree, Some(&head), "session start").unwrap();
        let second = record(r, "s1", &tree, Some(&head), "yolo checkpoint").unwrap();
        assert_eq!((first.number, second.number), (0, 1));
        let all = list(r, "s1").unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].what, "yolo checkpoint");
        assert_eq!(all[0].parent.as_deref(), Some(head.as_str()));
        assert_eq!(all[0].tree, tree);
        assert!(shortstat(r, &head, &tree)
            .unwrap()
            .contains("2 files changed"));
        assert_eq!(list(r, "other").unwrap(), []);
        let missing = find(r, "s1", 7).unwrap_err().to_string();
        assert!(missing.contains("there are 0, 1"), "{missing}");
        // No branch moved, nothing staged.
        assert_eq!(run(r, &["rev-parse", "HEAD"]).unwrap(), head);
        assert_eq!(run(r, &["diff", "--cached", "--name-only"]).unwrap(), "");
    }

    /// A copy made from a checkpoint: HEAD detached at the agent's commit then, the files the
    /// checkpoint's, what was uncommitted uncommitted again.
    #[test]
    fn a_checkpoint_is_materialized_as_the_copy_it_was() {
        let (dir, head, tree) = repo();
        let r = dir.path();
        let cp = record(r, "s", &tree, Some(&head), "yolo checkpoint").unwrap();
        let out = tempfile::tempdir().unwrap();
        materialize(r, "s", &cp, out.path()).unwrap();
        let o = out.path();
        assert_eq!(std::fs::read_to_string(o.join("a.txt")).unwrap(), "two\n");
        assert_eq!(
            std::fs::read_to_string(o.join("b.txt")).unwrap(),
            "untracked\n"
        );
        assert_eq!(run(o, &["rev-parse", "HEAD"]).unwrap(), head);
        let status = run(o, &["status", "--porcelain"]).unwrap();
        assert!(
            status.contains(" M a.txt") && status.contains("?? b.txt"),
            "{status}"
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
