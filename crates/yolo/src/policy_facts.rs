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
    entries: &[(
        crate::devcontainer::metadata::Origin,
        crate::devcontainer::metadata::Entry,
    )],
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
    // Where each bind in the repository really leads: a planted link out of it is a host bind.
    for path in policy::bind_sources(config, entries) {
        let real = crate::paths::real_path(&path);
        facts.real_paths.insert(path, real);
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

/// The walk here against the one `policy::protect` makes over its result: repositories made on
/// disk, evaluated with the facts read from them.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::devcontainer::model::DevContainer;
    use crate::error::{Error, Result};
    use crate::policy::{Flags, UserLayer};
    use crate::run_spec::{Protected, RunSpec};

    /// A workspace on disk with `files` (a trailing `/` makes a folder).
    fn repo(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            let path = dir.path().join(f.trim_end_matches('/'));
            if f.ends_with('/') {
                std::fs::create_dir_all(&path).unwrap();
            } else {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, "x").unwrap();
            }
        }
        dir
    }

    fn spec_in(dir: &tempfile::TempDir) -> Result<RunSpec> {
        let ws = dir.path().canonicalize().unwrap();
        evaluate_in(&ws, &ws.join(".devcontainer/devcontainer.json"), None)
    }

    /// An image config in `ws`, evaluated with the facts read there (and `read_only` as the
    /// user's list, else the default one).
    fn evaluate_in(
        ws: &Path,
        config_file: &Path,
        read_only: Option<Vec<String>>,
    ) -> Result<RunSpec> {
        let config: DevContainer =
            serde_json::from_value(serde_json::json!({"image": "debian:bookworm-slim"})).unwrap();
        let mut user = UserLayer::default();
        if let Some(list) = read_only {
            user.read_only = list;
        }
        let facts = for_evaluation(&config, &[], ws, config_file, &user.read_only);
        policy::evaluate(&policy::Input {
            config: &config,
            config_file,
            workspace: ws,
            devcontainer_id: "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdef",
            user: &user,
            flags: &Flags::default(),
            host_ids: Some((1000, 1000)),
            agent_volumes: vec![],
            metadata: &[],
            facts: &facts,
        })
    }

    /// A refusal's (property, value).
    fn refused(result: Result<RunSpec>) -> (String, String, String) {
        match result {
            Err(Error::Refused {
                property, value, ..
            }) => (property, value, String::new()),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    fn protected_in(dir: &tempfile::TempDir) -> Result<Vec<Protected>> {
        spec_in(dir).map(|spec| spec.protected)
    }

    /// Each target, with the default workspace folder (`/workspaces/<temp dir name>`) shown
    /// as `/workspace`.
    fn targets(list: &[Protected]) -> Vec<(String, bool, bool)> {
        let shown = |t: &str| match t.strip_prefix("/workspaces/") {
            Some(rest) => match rest.split_once('/') {
                Some((_, below)) => format!("/workspace/{below}"),
                None => "/workspace".into(),
            },
            None => t.to_string(),
        };
        list.iter()
            .map(|p| (shown(&p.target), p.read_only, p.create_dir))
            .collect()
    }

    #[test]
    fn the_defaults_cover_git_the_config_and_editors_with_git_anchored() {
        let dir = repo(&[
            ".git/hooks/",
            ".git/config",
            ".devcontainer/devcontainer.json",
        ]);
        let got = targets(&protected_in(&dir).unwrap());
        let want = [
            ("/workspace/.git", false, false),
            ("/workspace/.git/hooks", true, false),
            ("/workspace/.git/config", true, false),
            ("/workspace/.git/info", true, true),
            ("/workspace/.git/modules", true, true),
            ("/workspace/.git/worktrees", true, true),
            ("/workspace/.devcontainer", true, false),
            ("/workspace/.vscode", true, true),
            ("/workspace/.idea", true, true),
        ];
        let want: Vec<_> = want
            .iter()
            .map(|(t, r, c)| (t.to_string(), *r, *c))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_submodules_git_folder_is_writable_but_what_git_runs_from_it_is_not() {
        let dir = repo(&[
            ".git/hooks/",
            ".git/config",
            ".git/modules/libs/a/HEAD",
            ".git/modules/libs/a/objects/",
            ".git/modules/libs/a/hooks/",
            ".git/modules/libs/a/modules/b/HEAD",
            "libs/a/.git",
            "libs/a/b/.git",
        ]);
        std::fs::write(
            dir.path().join(".git/modules/libs/a/config"),
            "[core]\n\tbare = false\n\tworktree = ../../../../libs/a\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join(".git/modules/libs/a/modules/b/config"),
            "[core]\n\tworktree = \"../../../../../../libs/a/b\"\n",
        )
        .unwrap();
        let got = targets(&protected_in(&dir).unwrap());
        let has = |t: &str, ro: bool| {
            assert!(
                got.iter()
                    .any(|(target, r, _)| target == &format!("/workspace/{t}") && *r == ro),
                "{t} read_only={ro} in {got:#?}"
            )
        };
        has(".git/modules", true);
        has(".git/worktrees", true);
        has(".git/modules/libs/a", false);
        has(".git/modules/libs/a/config", true);
        has(".git/modules/libs/a/hooks", true);
        has(".git/modules/libs/a/info", true);
        has(".git/modules/libs/a/modules", true);
        has(".git/modules/libs/a/modules/b", false);
        has(".git/modules/libs/a/modules/b/config", true);
        has("libs", false);
        has("libs/a", false);
        has("libs/a/.git", true);
        has("libs/a/b", false);
        has("libs/a/b/.git", true);
    }

    #[test]
    fn a_planted_link_in_a_submodule_is_refused() {
        let dir = repo(&[".git/hooks/", ".git/config", ".git/modules/a/HEAD"]);
        std::os::unix::fs::symlink("/etc", dir.path().join(".git/modules/a/hooks")).unwrap();
        let (_, value, _) = refused(spec_in(&dir));
        assert!(value.contains("modules/a/hooks"), "{value}");
    }

    #[test]
    fn a_worktree_git_file_is_left_alone() {
        let dir = repo(&[".git", ".devcontainer/devcontainer.json"]);
        let got = targets(&protected_in(&dir).unwrap());
        assert!(got.iter().all(|(t, _, _)| !t.contains(".git")), "{got:?}");
        assert!(got.iter().any(|(t, _, _)| t == "/workspace/.devcontainer"));
    }

    #[test]
    fn a_planted_link_is_refused() {
        let dir = repo(&[".git/hooks/", ".git/config"]);
        std::os::unix::fs::symlink("/etc", dir.path().join(".vscode")).unwrap();
        let (property, value, _) = refused(spec_in(&dir));
        assert_eq!(property, "the workspace");
        assert!(value.contains(".vscode"), "{value}");
    }

    #[test]
    fn the_list_is_the_users() {
        let dir = repo(&[".git/hooks/", ".git/config", "tools/run.sh"]);
        let ws = dir.path().canonicalize().unwrap();
        let read_only = vec!["tools/run.sh".into(), "absent-file".into()];
        let spec = evaluate_in(&ws, &ws.join(".devcontainer.json"), Some(read_only)).unwrap();
        let got = targets(&spec.protected);
        let want: Vec<_> = [
            ("/workspace/tools", false, false),
            ("/workspace/tools/run.sh", true, false),
        ]
        .iter()
        .map(|(t, r, c)| (t.to_string(), *r, *c))
        .collect();
        assert_eq!(
            got, want,
            "an absent file is not invented; .git is not protected"
        );
    }
}
