//! What `policy` needs to know of the host's disk, read here before it runs and handed to it as
//! `policy::Facts` (the policy itself reads nothing): the workspace's git root; what exists of
//! the paths `[workspace] read_only` protects, links not followed, and the submodules' git
//! folders and working-tree pointers below `.git/modules`; where the host paths a Compose
//! project names really lead (`paths::real_path`).
//!
//! The walk below the protected folders follows the one `policy::protect` makes over these
//! facts: the same roots (`policy::protected_roots`), every folder leading to an entry, each
//! submodule's `config`, `hooks`, `info`, `modules` and pointer, to `MAX_MODULE_DEPTH`.

use crate::paths::normalize_path;
use crate::policy::{self, Facts, Kind, MAX_MODULE_DEPTH};
use std::path::{Path, PathBuf};

/// The facts of one evaluation of `config` for `workspace`: its git root and what is protected
/// below the workspace mount's source (`read_only`, and the config file when it lies there).
pub(crate) fn for_evaluation(
    config: &crate::devcontainer::model::DevContainer,
    workspace: &Path,
    config_file: &Path,
    read_only: &[String],
) -> Facts {
    let mut facts = Facts {
        git_root: crate::paths::git_root(workspace),
        ..Facts::default()
    };
    if let Some(source) = policy::workspace_source(config, workspace) {
        look_protected(&mut facts, &source, workspace, config_file, read_only);
    }
    facts
}

/// The facts the Compose checks need: the workspace's git root and where each of `paths`
/// really leads.
pub(crate) fn for_compose(workspace: &Path, paths: impl IntoIterator<Item = PathBuf>) -> Facts {
    let mut facts = Facts {
        git_root: crate::paths::git_root(workspace),
        ..Facts::default()
    };
    for path in paths {
        let folded = normalize_path(&path).unwrap_or(path);
        let real = crate::paths::real_path(&folded);
        facts.real_paths.insert(folded, real);
    }
    facts
}

fn look_protected(
    facts: &mut Facts,
    source: &Path,
    workspace: &Path,
    config_file: &Path,
    read_only: &[String],
) {
    for root in policy::protected_roots(source, workspace) {
        look(facts, &root.join(".git"));
        for entry in read_only {
            look_along(facts, &root, Path::new(entry.trim_end_matches('/')));
        }
        if facts.kind(&root.join(".git")) == Some(Kind::Dir) {
            look_modules(facts, source, &root.join(".git/modules"), 0);
        }
        facts.looked.insert(root);
    }
    if let Ok(rel) = config_file.strip_prefix(source) {
        look_along(facts, source, rel);
    }
}

/// Every folder from `root` down to `root/rel`, and that path.
fn look_along(facts: &mut Facts, root: &Path, rel: &Path) {
    let mut at = root.to_path_buf();
    for part in rel.components() {
        at.push(part);
        look(facts, &at);
    }
}

/// The submodules' git folders below `modules`, what git runs from each, the pointer in its
/// working tree (and the folders leading to it), and their own submodules.
fn look_modules(facts: &mut Facts, source: &Path, modules: &Path, depth: usize) {
    let gitdirs = submodule_git_dirs(modules);
    for gitdir in &gitdirs {
        look(facts, gitdir);
        for name in ["config", "hooks", "info", "modules"] {
            look(facts, &gitdir.join(name));
        }
        if let Some(pointer) = submodule_pointer(gitdir) {
            if let Ok(rel) = pointer.strip_prefix(source) {
                look_along(facts, source, rel);
            }
            facts.pointers.insert(gitdir.clone(), pointer);
        }
        if depth + 1 < MAX_MODULE_DEPTH {
            look_modules(facts, source, &gitdir.join("modules"), depth + 1);
        }
    }
    facts.submodules.insert(modules.to_path_buf(), gitdirs);
}

/// What `path` is, links not followed; nothing recorded when it does not exist.
fn look(facts: &mut Facts, path: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    let kind = if meta.file_type().is_symlink() {
        Kind::Link
    } else if meta.is_dir() {
        Kind::Dir
    } else {
        Kind::File
    };
    facts.kinds.insert(path.to_path_buf(), kind);
}

/// The git folders below a `modules` folder: a submodule's name may hold slashes, so a folder
/// that is not a git folder (no `HEAD`) is searched further down.
pub(crate) fn submodule_git_dirs(modules: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        dirs.sort();
        for d in dirs {
            if d.join("HEAD").is_file() {
                out.push(d);
            } else if depth < MAX_MODULE_DEPTH {
                walk(&d, depth + 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(modules, 0, &mut out);
    out
}

/// The `.git` file in a submodule's working tree that points at `gitdir`: the working tree is
/// the `core.worktree` of the git folder's config, relative to the git folder.
fn submodule_pointer(gitdir: &Path) -> Option<PathBuf> {
    let config = crate::digest::read_to_string(&gitdir.join("config")).ok()?;
    let mut in_core = false;
    for line in config.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_core = line
                .trim_start_matches('[')
                .trim_end_matches(']')
                .trim()
                .eq_ignore_ascii_case("core");
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if in_core && key.trim().eq_ignore_ascii_case("worktree") {
            let value = value.trim().trim_matches('"');
            let tree = normalize_path(&gitdir.join(value))?;
            return Some(tree.join(".git"));
        }
    }
    None
}
