//! Paths of the repository that the host executes later (git hooks and config, the dev container
//! definition, editor settings) are mounted read-only over the workspace, so the agent cannot
//! plant something the host runs on its next `git commit` or when the editor opens the folder.
//!
//! The list is the user's (`[workspace] read_only` in config.toml), never the repository's. Each
//! entry becomes a read-only bind of the same host path at its place in the container. A bind
//! mount point cannot be renamed, replaced or removed from inside (EBUSY), and every folder
//! between the workspace and an entry (`.git` for `.git/hooks`) is bound too (read-write), so the
//! agent cannot move the protected path aside and put its own in its place. An entry that does
//! not exist yet is created on the host as an empty folder before the container starts (a mount
//! point must exist; the agent could otherwise create the folder itself), unless it is a file
//! (an entry without a trailing `/` that is absent is left alone: yolo will not invent a file).
//!
//! `.git/modules/` is read-only as a whole (no submodule can be added from inside), but the git
//! folder of each submodule already there is bound read-write again so commits inside it keep
//! working, with its own `config`, `hooks/`, `info/` and `modules/` read-only in turn, and the
//! submodule's `.git` file (its pointer to that folder, found through `core.worktree`) read-only
//! too: rewritten, it would send the host's git to a folder the agent filled.
//!
//! Not here: looking at the disk (what exists, links, the submodules' git folders come in as
//! `Facts`, read by `policy_facts` below the folders `protected_roots` names), creating those
//! folders (a side effect, `bring_up::act` does it) and the paths the agent may legitimately
//! edit but the host also runs (`.envrc`, `Makefile`): those are flagged by the file audit, not
//! blocked.

use super::facts::Kind;
use super::Eval;
use crate::error::{Error, Result};
use crate::paths::slash_path;
use crate::run_spec::{Mount, MountKind, Protected};
use std::path::{Component, Path, PathBuf};

/// The default list: what git, VS Code, JetBrains IDEs and yolo itself run from a repository.
/// `.git/modules/` and `.git/worktrees/` hold the git folders of submodules and linked worktrees,
/// each with a `config` and `hooks` of its own that the host's git runs (`git status` in the
/// superproject looks into every submodule).
pub(crate) const DEFAULT_READ_ONLY: [&str; 8] = [
    ".git/hooks/",
    ".git/config",
    ".git/info/",
    ".git/modules/",
    ".git/worktrees/",
    ".devcontainer/",
    ".vscode/",
    ".idea/",
];

/// An entry of the list is a relative path inside the repository, without `..`.
pub(crate) fn check_entry(entry: &str) -> std::result::Result<(), String> {
    let path = Path::new(entry.trim_end_matches('/'));
    if entry.trim().is_empty() || path.as_os_str().is_empty() {
        return Err("an entry must name a path".into());
    }
    if !path.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(format!(
            "\"{entry}\" must be a path relative to the repository, without \"..\" or \".\""
        ));
    }
    Ok(())
}

impl Eval<'_> {
    /// The protected paths under the workspace mount: the user's entries, relative to the mounted
    /// folder and (when yolo runs in a subfolder of it) to the workspace, plus the config file
    /// yolo found when it lies in the mounted folder.
    pub(super) fn protected(&self, mount: &Mount) -> Result<Vec<Protected>> {
        if mount.kind != MountKind::Bind {
            return Ok(Vec::new());
        }
        let source = PathBuf::from(&mount.source);
        let roots = protected_roots(&source, self.input.workspace);
        if let Some(unseen) = roots.iter().find(|r| !self.input.facts.looked.contains(*r)) {
            return Err(Error::Failed {
                what: crate::error::Failure::State,
                cause: format!(
                    "yolo did not look at {} before checking the paths it protects there",
                    unseen.display()
                )
                .into(),
            });
        }
        let mut out: Vec<Protected> = Vec::new();
        for root in &roots {
            for entry in &self.input.user.read_only {
                self.protect(&source, &mount.target, root, entry, &mut out)?;
            }
            let modules = self.input.user.read_only.iter().any(|e| {
                let e = e.trim_end_matches('/');
                e == ".git/modules" || e == ".git"
            });
            if modules && self.is_dir(&root.join(".git")) {
                self.reopen_submodules(
                    &source,
                    &mount.target,
                    &root.join(".git/modules"),
                    0,
                    &mut out,
                )?;
            }
        }
        if let Ok(rel) = self.input.config_file.strip_prefix(&source) {
            let entry = rel.to_string_lossy().into_owned();
            self.protect(&source, &mount.target, &source, &entry, &mut out)?;
        }
        Ok(out)
    }

    /// Add `entry` (below `root`) and the folders leading to it, once each.
    fn protect(
        &self,
        source: &Path,
        target: &str,
        root: &Path,
        entry: &str,
        out: &mut Vec<Protected>,
    ) -> Result<()> {
        let wants_dir = entry.ends_with('/');
        let rel = Path::new(entry.trim_end_matches('/'));
        // A worktree's or submodule's `.git` is a file pointing elsewhere: nothing to protect
        // in it here (that folder is not mounted).
        if rel.starts_with(".git") && !self.is_dir(&root.join(".git")) {
            return Ok(());
        }
        let mut host = root.to_path_buf();
        let components: Vec<_> = rel.components().collect();
        for (i, part) in components.iter().enumerate() {
            host.push(part);
            let last = i + 1 == components.len();
            let kind = self.input.facts.kind(&host);
            if kind == Some(Kind::Link) {
                return Err(self.planted_link(&host));
            }
            let exists = kind.is_some();
            let is_dir = kind == Some(Kind::Dir);
            if !last && exists && !is_dir {
                return Ok(()); // `.git` is a file (handled above) or a file is in the way.
            }
            if !exists && last && !wants_dir {
                return Ok(()); // an absent file: not invented
            }
            let read_only = last;
            let container = container_path(source, target, &host);
            if out
                .iter()
                .any(|p| p.read_only && container.starts_with(&format!("{}/", p.target)))
            {
                return Ok(()); // inside a read-only path already
            }
            if let Some(known) = out.iter_mut().find(|p| p.target == container) {
                known.read_only |= read_only;
                continue;
            }
            out.push(Protected {
                host: host.clone(),
                target: container,
                read_only,
                create_dir: !exists,
            });
        }
        Ok(())
    }

    /// Inside the read-only `modules` folder of a git folder: each submodule's git folder bound
    /// read-write again, with what git runs from it read-only (and its own submodules the same
    /// way, to `MAX_MODULE_DEPTH`).
    fn reopen_submodules(
        &self,
        source: &Path,
        target: &str,
        modules: &Path,
        depth: usize,
        out: &mut Vec<Protected>,
    ) -> Result<()> {
        for gitdir in self.input.facts.submodules(modules) {
            self.reject_link(gitdir)?;
            push(out, source, target, gitdir, false, false);
            for (name, dir) in [
                ("config", false),
                ("hooks", true),
                ("info", true),
                ("modules", true),
            ] {
                let host = gitdir.join(name);
                self.reject_link(&host)?;
                let exists = self.input.facts.kind(&host).is_some();
                if exists || dir {
                    push(out, source, target, &host, true, !exists);
                }
            }
            // The pointer and the folders leading to it, anchored like any entry (a folder of
            // the working tree could otherwise be moved aside with the pointer in it).
            if let Some(rel) = self
                .input
                .facts
                .pointers
                .get(gitdir)
                .and_then(|p| p.strip_prefix(source).ok().map(Path::to_path_buf))
            {
                let entry = slash_path(&rel);
                if check_entry(&entry).is_ok() {
                    self.protect(source, target, source, &entry, out)?;
                }
            }
            if depth + 1 < MAX_MODULE_DEPTH {
                self.reopen_submodules(source, target, &gitdir.join("modules"), depth + 1, out)?;
            }
        }
        Ok(())
    }

    fn reject_link(&self, host: &Path) -> Result<()> {
        match self.input.facts.kind(host) {
            Some(Kind::Link) => Err(self.planted_link(host)),
            _ => Ok(()),
        }
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.input.facts.kind(path) == Some(Kind::Dir)
    }

    fn planted_link(&self, host: &Path) -> Error {
        Error::Refused {
            file: self.file(),
            property: "the workspace".into(),
            value: format!("{} as a symbolic link", host.display()),
            reason: "yolo mounts this path read-only over the workspace, and a link would mount wherever it points on your machine".into(),
            grant: "nothing: replace the link with the folder or file itself (or take the path out of [workspace] read_only in your yolo config)".into(),
        }
    }
}

/// How deep submodules of submodules are followed (and a submodule's name, holding slashes,
/// searched for below `modules`).
pub(crate) const MAX_MODULE_DEPTH: usize = 8;

/// The folders whose entries are protected when `source` is mounted: it, and the workspace
/// when yolo runs in a folder below it.
pub(crate) fn protected_roots(source: &Path, workspace: &Path) -> Vec<PathBuf> {
    let mut roots = vec![source.to_path_buf()];
    if workspace != source && workspace.starts_with(source) {
        roots.push(workspace.to_path_buf());
    }
    roots
}

/// Add a bind of `host` over itself, replacing an entry with the same target.
fn push(
    out: &mut Vec<Protected>,
    source: &Path,
    target: &str,
    host: &Path,
    read_only: bool,
    create_dir: bool,
) {
    let container = container_path(source, target, host);
    out.retain(|p| p.target != container);
    out.push(Protected {
        host: host.to_path_buf(),
        target: container,
        read_only,
        create_dir,
    });
}

/// Where `host` (below the mounted folder `source`) appears in the container.
fn container_path(source: &Path, target: &str, host: &Path) -> String {
    let rel = slash_path(host.strip_prefix(source).unwrap_or(host));
    format!("{}/{rel}", target.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use serde_json::json;

    /// The policy judges the facts it is handed, and reads nothing itself: a link there is
    /// refused though the workspace does not exist on this machine.
    #[test]
    fn the_facts_alone_decide() {
        let c = case(with_image(json!({})));
        let config = serde_json::from_value(c.config.clone()).unwrap();
        let ws = Path::new(WS);
        let mut facts = super::super::test_support::nothing_on_disk(&config, ws);
        for (path, kind) in [(".git", Kind::Dir), (".git/hooks", Kind::Link)] {
            facts.kinds.insert(ws.join(path), kind);
        }
        let (_, value, _) = refused(case(with_image(json!({}))).with_facts(facts.clone()).run());
        assert!(value.contains(".git/hooks as a symbolic link"), "{value}");
        // A folder never looked at is not taken for an empty one.
        facts.looked.clear();
        let error = case(with_image(json!({})))
            .with_facts(facts)
            .run()
            .unwrap_err();
        assert!(error.to_string().contains("did not look at"), "{error}");
    }

    #[test]
    fn entries_are_relative_paths() {
        assert!(check_entry(".git/hooks/").is_ok());
        for bad in ["", "/etc", "../up", "a/../b", "./x"] {
            assert!(check_entry(bad).is_err(), "{bad}");
        }
    }
}
