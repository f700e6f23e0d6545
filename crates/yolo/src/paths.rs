//! Lexical path helpers: no symlink is resolved and nothing is read (see the module docs of
//! `policy` for why the engine must resolve paths itself), but for `real_path` and `git_root`,
//! which `policy_facts` uses to read what the policy is handed.

use std::path::{Component, Path, PathBuf};

/// Fold `.` and `..` without touching the disk; `None` for relative paths.
pub(crate) fn normalize_path(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
        }
    }
    Some(out)
}

/// Where `path` (absolute, folded) really leads on the host: its deepest existing ancestor
/// resolved through links, the rest appended. A host path a repository names can pass through a
/// link the agent planted (`./data -> /home/me`), and Docker follows it; a part that does not
/// exist yet (which Docker would create) is under whatever its existing parent really is. Reads
/// the disk: `policy_facts` looks before the policy's checks, which get the answer as a fact.
pub(crate) fn real_path(path: &Path) -> PathBuf {
    real_path_within(path, 40)
}

/// `real_path`, following at most `links` dangling links (a loop ends there).
fn real_path_within(path: &Path, links: usize) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path.to_path_buf();
    loop {
        let resolved = match at.canonicalize() {
            Ok(real) => Some(real),
            // A dangling link still says where a write through it would go.
            Err(_) if links > 0 && at.is_symlink() => std::fs::read_link(&at).ok().map(|target| {
                let joined = at.parent().unwrap_or(Path::new("/")).join(target);
                real_path_within(&normalize_path(&joined).unwrap_or(joined), links - 1)
            }),
            Err(_) => None,
        };
        if let Some(real) = resolved {
            return rest.iter().rev().fold(real, |p, name| p.join(name));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The nearest ancestor of `workspace` (itself included) that holds `.git`.
pub(crate) fn git_root(workspace: &Path) -> Option<PathBuf> {
    workspace
        .ancestors()
        .find(|dir| dir.join(".git").exists())
        .map(Path::to_path_buf)
}

/// A relative path with forward slashes (what the Engine API wants).
pub(crate) fn slash_path(path: &Path) -> String {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Container paths are always absolute (and always `/`-separated, whatever the host).
pub(crate) fn is_container_path(target: &str) -> bool {
    target.starts_with('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_folds_dots_and_refuses_relative_paths() {
        let n = |p: &str| normalize_path(Path::new(p));
        assert_eq!(n("/a/./b/../c/"), Some(PathBuf::from("/a/c")));
        assert_eq!(n("/../.."), Some(PathBuf::from("/")));
        assert_eq!(n("a/b"), None);
        assert_eq!(slash_path(Path::new("a/./b")), "a/b");
    }
}

#[cfg(all(test, unix))]
mod real_path_tests {
    use super::*;

    #[test]
    fn links_are_followed_also_dangling_and_under_a_missing_tail() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("out")).unwrap();
        std::fs::create_dir(root.join("repo")).unwrap();
        std::os::unix::fs::symlink(root.join("out"), root.join("repo/live")).unwrap();
        std::os::unix::fs::symlink(root.join("gone/deeper"), root.join("repo/dangling")).unwrap();
        std::os::unix::fs::symlink("loop", root.join("repo/loop")).unwrap();
        assert_eq!(real_path(&root.join("repo/live/x/y")), root.join("out/x/y"));
        assert_eq!(
            real_path(&root.join("repo/dangling/x")),
            root.join("gone/deeper/x")
        );
        assert_eq!(
            real_path(&root.join("repo/plain/x")),
            root.join("repo/plain/x")
        );
        assert!(real_path(&root.join("repo/loop/x")).starts_with(&root));
    }
}
