//! Lexical path helpers: no symlink is resolved and nothing is read but the existence of `.git`
//! (see the module docs of `policy` for why the engine must resolve paths itself).

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
pub(super) fn is_container_path(target: &str) -> bool {
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
