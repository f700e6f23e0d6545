//! A local Feature (`"./name"`): a folder that must sit under the `.devcontainer/` folder of
//! the config, as the spec's "locally referenced" addendum says. yolo is stricter than the
//! reference CLI (which checks the path's text only): the folder is resolved through symbolic
//! links, and a link anywhere in it that leads out of the Feature's folder is refused too:
//! the folder is copied (links as they are) into the image build, and must neither carry other
//! host files with it nor hold links that break in the copy.

use std::path::{Component, Path, PathBuf};

/// The `.devcontainer/` folder local Features of `config_file` must stay in: the nearest
/// ancestor of the config named `.devcontainer`, else `.devcontainer/` next to it (for a
/// `.devcontainer.json` at the repository root).
pub(crate) fn allowed_root(config_file: &Path) -> PathBuf {
    let dir = config_file.parent().unwrap_or_else(|| Path::new("."));
    dir.ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == ".devcontainer"))
        .map(Path::to_path_buf)
        .unwrap_or_else(|| dir.join(".devcontainer"))
}

/// Resolve `rel` (`./x`) against the config's folder; Err is a message for the user.
pub(crate) fn resolve(config_file: &Path, rel: &str) -> Result<PathBuf, String> {
    let dir = config_file.parent().unwrap_or_else(|| Path::new("."));
    let root = allowed_root(config_file);
    let joined = normalize(&dir.join(rel));
    if !joined.starts_with(normalize(&root)) || joined == normalize(&root) {
        return Err(format!(
            "a local Feature must be a folder under {}; \"{rel}\" leads out of it",
            root.display()
        ));
    }
    let real_root = root
        .canonicalize()
        .map_err(|e| format!("cannot read {}: {e}", root.display()))?;
    let real = joined.canonicalize().map_err(|e| {
        format!(
            "the Feature folder {} cannot be read: {e}; create it with a \
             devcontainer-feature.json and an install.sh",
            joined.display()
        )
    })?;
    if !real.starts_with(&real_root) {
        return Err(format!(
            "{} is a symbolic link to {}, outside {}; a local Feature must be inside it",
            joined.display(),
            real.display(),
            root.display()
        ));
    }
    if !real.is_dir() {
        return Err(format!("{} is not a folder", joined.display()));
    }
    check_links(&real, &real)?;
    Ok(joined)
}

/// Refuse a symbolic link in `dir` whose target is outside `root`, the Feature folder (or does
/// not exist): the folder is copied with its links as they are, which must still work there.
fn check_links(dir: &Path, root: &Path) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if kind.is_symlink() {
            match path.canonicalize() {
                Ok(target) if target.starts_with(root) => {}
                Ok(target) => {
                    return Err(format!(
                        "{} is a symbolic link to {}, outside the Feature folder {}; copy the \
                         file into the folder instead",
                        path.display(),
                        target.display(),
                        root.display()
                    ))
                }
                Err(_) => {
                    return Err(format!(
                        "{} is a symbolic link to nothing; remove it",
                        path.display()
                    ))
                }
            }
        } else if kind.is_dir() {
            check_links(&path, root)?;
        }
    }
    Ok(())
}

/// `a/./b/../c` → `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_under_devcontainer_are_allowed_and_escapes_refused() {
        let repo = tempfile::tempdir().unwrap();
        let dc = repo.path().join(".devcontainer");
        std::fs::create_dir_all(dc.join("feat")).unwrap();
        std::fs::create_dir_all(dc.join("sub/inner")).unwrap();
        std::fs::create_dir_all(repo.path().join("outside")).unwrap();
        let config = dc.join("devcontainer.json");
        assert_eq!(resolve(&config, "./feat").unwrap(), dc.join("feat"));
        // A config in a subfolder may reach its sibling folders under .devcontainer/.
        let nested = dc.join("sub/devcontainer.json");
        assert_eq!(resolve(&nested, "../feat").unwrap(), dc.join("feat"));
        assert_eq!(resolve(&nested, "./inner").unwrap(), dc.join("sub/inner"));

        let err = resolve(&config, "../outside").unwrap_err();
        assert!(err.contains("leads out"), "{err}");
        let err = resolve(&config, "./").unwrap_err();
        assert!(err.contains("leads out"), "{err}");
        let err = resolve(&config, "./missing").unwrap_err();
        assert!(err.contains("cannot be read"), "{err}");

        std::os::unix::fs::symlink(repo.path().join("outside"), dc.join("link")).unwrap();
        let err = resolve(&config, "./link").unwrap_err();
        assert!(err.contains("symbolic link"), "{err}");

        std::os::unix::fs::symlink("../install.sh", dc.join("sub/inner/ok")).unwrap();
        std::fs::write(dc.join("sub/install.sh"), "").unwrap();
        assert!(
            resolve(&config, "./sub").is_ok(),
            "a link inside the folder"
        );
        std::os::unix::fs::symlink("../sub/install.sh", dc.join("feat/sibling")).unwrap();
        let err = resolve(&config, "./feat").unwrap_err();
        assert!(err.contains("outside the Feature folder"), "{err}");
        std::fs::remove_file(dc.join("feat/sibling")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dc.join("feat/passwd")).unwrap();
        let err = resolve(&config, "./feat").unwrap_err();
        assert!(err.contains("outside the Feature folder"), "{err}");

        // .devcontainer.json at the root: local Features live in .devcontainer/.
        let root_config = repo.path().join(".devcontainer.json");
        assert_eq!(allowed_root(&root_config), dc);
        assert!(resolve(&root_config, "./outside")
            .unwrap_err()
            .contains("leads out"));
        assert_eq!(
            resolve(&root_config, "./.devcontainer/sub").unwrap(),
            dc.join("sub")
        );
    }
}
