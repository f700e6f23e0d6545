//! Finding the devcontainer.json of a workspace, like the reference CLI.
//!
//! The search order is the reference CLI's (`.devcontainer/devcontainer.json`, then
//! `.devcontainer.json`) followed by VS Code's one-level subfolders. Only files are considered;
//! nothing is parsed here.
use crate::error::{Error, Result};
use std::io;
use std::path::{Path, PathBuf};

/// Where a config may live, relative to the workspace, in the order they are tried.
const PRIMARY: &str = ".devcontainer/devcontainer.json";
const SECONDARY: &str = ".devcontainer.json";
const SUBFOLDER_PATTERN: &str = ".devcontainer/<folder>/devcontainer.json";

/// `explicit` (relative to the cwd) if given; else `.devcontainer/devcontainer.json`, then
/// `.devcontainer.json`, then a single `.devcontainer/*/devcontainer.json`. With several and
/// none chosen: `Error::Discovery` listing them and asking for `--config`. Returns a canonical path.
///
/// A discovered config (not an explicit one) must resolve inside the workspace: the repository,
/// and so the agent, controls `.devcontainer/`, and a symlink there must not make yolo read a host
/// file as the config or build from a host folder.
pub(crate) fn find_config(workspace: &Path, explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        return explicit_config(path);
    }
    let workspace = std::fs::canonicalize(workspace).map_err(|e| {
        Error::Discovery(format!(
            "cannot open the workspace folder {}: {e}",
            workspace.display()
        ))
    })?;
    let found = match first_existing(&workspace)? {
        Some(path) => path,
        None => single_subfolder_config(&workspace)?,
    };
    let canonical = std::fs::canonicalize(&found).map_err(|e| Error::io(&found, e))?;
    if !canonical.starts_with(&workspace) {
        return Err(Error::Discovery(format!(
            "{} resolves to {}, outside the workspace {}; yolo only uses a discovered config that \
             lives in the repository. If you trust that file, pass it with --config <path>",
            relative(&workspace, &found),
            canonical.display(),
            workspace.display()
        )));
    }
    Ok(canonical)
}

/// The folder a command run in `start` is about: `start` when it holds a config (any of the
/// discovered locations), else the nearest folder above it that does, up to and including the
/// git root (the nearest ancestor holding `.git`), as git finds `.git` from a subfolder. The
/// search never leaves the repository (a config in `$HOME` or `/` is not the project's), and
/// outside a git repository only `start` is looked at. Nothing found: `start`, so the
/// "no devcontainer.json" error names the folder the user is in.
///
/// The reference CLI and VS Code take the folder they are given; walking up is yolo's, for the
/// everyday `cd src && yolo up`.
pub(crate) fn config_root(start: &Path) -> Result<PathBuf> {
    let Some(git_root) = start.ancestors().find(|d| d.join(".git").exists()) else {
        return Ok(start.to_path_buf());
    };
    for dir in start.ancestors() {
        if first_existing(dir)?.is_some() || !subfolder_configs(dir)?.is_empty() {
            return Ok(dir.to_path_buf());
        }
        if dir == git_root {
            break;
        }
    }
    Ok(start.to_path_buf())
}

fn explicit_config(path: &Path) -> Result<PathBuf> {
    let canonical = std::fs::canonicalize(path).map_err(|e| {
        let reason = if e.kind() == io::ErrorKind::NotFound {
            "no such file".to_string()
        } else {
            e.to_string()
        };
        Error::Discovery(format!("--config {}: {reason}", path.display()))
    })?;
    if !canonical.is_file() {
        return Err(Error::Discovery(format!(
            "--config {}: not a file; give the path of a devcontainer.json",
            path.display()
        )));
    }
    Ok(canonical)
}

/// The first of the two fixed locations that holds a file.
fn first_existing(workspace: &Path) -> Result<Option<PathBuf>> {
    for candidate in [PRIMARY, SECONDARY] {
        let path = workspace.join(candidate);
        if is_file(&path)? {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// `.devcontainer/*/devcontainer.json`: exactly one, or a Discovery error.
fn single_subfolder_config(workspace: &Path) -> Result<PathBuf> {
    let mut found = subfolder_configs(workspace)?;
    match found.len() {
        0 => Err(Error::Discovery(format!(
            "no devcontainer.json found in {}: looked for {PRIMARY}, {SECONDARY} and \
             {SUBFOLDER_PATTERN}. Create one with `yolo init`, or pass --config <path>",
            workspace.display()
        ))),
        1 => Ok(found.remove(0)),
        _ => {
            let list: Vec<String> = found.iter().map(|p| relative(workspace, p)).collect();
            Err(Error::Discovery(format!(
                "{} has several dev container configs; choose one with --config <path>",
                workspace.display(),
            ))
            .with_lines("found", list))
        }
    }
}

/// Every `.devcontainer/<folder>/devcontainer.json` that is a file, sorted so listings are stable.
fn subfolder_configs(workspace: &Path) -> Result<Vec<PathBuf>> {
    let dir = workspace.join(".devcontainer");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        // No folder (or `.devcontainer` is a file): nothing to find here.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(Vec::new())
        }
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&dir, e))?;
        let candidate = entry.path().join("devcontainer.json");
        if is_file(&candidate)? {
            found.push(candidate);
        }
    }
    found.sort();
    Ok(found)
}

/// Like `Path::is_file`, but a permission problem is reported instead of read as "absent".
fn is_file(path: &Path) -> Result<bool> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(meta.is_file()),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(Error::io(path, e)),
    }
}

fn relative(base: &Path, path: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn workspace() -> tempfile::TempDir {
        tempfile::tempdir().expect("temp dir")
    }

    fn touch(root: &Path, rel: &str) -> PathBuf {
        let path = root.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("mkdir");
        }
        fs::write(&path, "{}").expect("write");
        path
    }

    fn canonical(path: &Path) -> PathBuf {
        fs::canonicalize(path).expect("canonicalize")
    }

    fn discovery_message(result: Result<PathBuf>) -> String {
        match result {
            Err(Error::Discovery(message)) => message,
            other => panic!("expected a Discovery error, got {other:?}"),
        }
    }

    #[test]
    fn a_subfolder_finds_the_config_up_to_the_git_root() {
        let ws = workspace();
        let repo = ws.path().join("repo");
        fs::create_dir_all(repo.join(".git")).unwrap();
        fs::create_dir_all(repo.join("src/deep")).unwrap();
        let deep = repo.join("src/deep");
        assert_eq!(
            config_root(&deep).unwrap(),
            deep,
            "nothing found: where we are"
        );
        touch(ws.path(), ".devcontainer.json"); // above the git root: never used
        assert_eq!(config_root(&deep).unwrap(), deep);
        touch(&repo, ".devcontainer/devcontainer.json");
        assert_eq!(config_root(&deep).unwrap(), repo);
        touch(&repo, "src/.devcontainer/x/devcontainer.json"); // the nearest wins
        assert_eq!(config_root(&deep).unwrap(), repo.join("src"));
        assert_eq!(config_root(&repo).unwrap(), repo);
    }

    #[test]
    fn outside_a_git_repository_only_the_folder_itself_counts() {
        let ws = workspace();
        touch(ws.path(), ".devcontainer.json");
        let sub = ws.path().join("sub");
        fs::create_dir_all(&sub).unwrap();
        assert_eq!(config_root(&sub).unwrap(), sub);
    }

    #[test]
    fn primary_location_wins_over_all_others() {
        let ws = workspace();
        let primary = touch(ws.path(), ".devcontainer/devcontainer.json");
        touch(ws.path(), ".devcontainer.json");
        touch(ws.path(), ".devcontainer/a/devcontainer.json");
        touch(ws.path(), ".devcontainer/b/devcontainer.json");
        assert_eq!(find_config(ws.path(), None).unwrap(), canonical(&primary));
    }

    #[test]
    fn root_file_wins_over_subfolders() {
        let ws = workspace();
        let root = touch(ws.path(), ".devcontainer.json");
        touch(ws.path(), ".devcontainer/a/devcontainer.json");
        touch(ws.path(), ".devcontainer/b/devcontainer.json");
        assert_eq!(find_config(ws.path(), None).unwrap(), canonical(&root));
    }

    #[test]
    fn single_subfolder_config_is_used() {
        let ws = workspace();
        let only = touch(ws.path(), ".devcontainer/python/devcontainer.json");
        // A subfolder without a config and a stray file do not count.
        fs::create_dir_all(ws.path().join(".devcontainer/empty")).unwrap();
        touch(ws.path(), ".devcontainer/Dockerfile");
        assert_eq!(find_config(ws.path(), None).unwrap(), canonical(&only));
    }

    #[test]
    fn several_subfolder_configs_are_listed_sorted() {
        let ws = workspace();
        touch(ws.path(), ".devcontainer/rust/devcontainer.json");
        touch(ws.path(), ".devcontainer/node/devcontainer.json");
        let message = find_config(ws.path(), None).unwrap_err().to_string();
        let expected = "has several dev container configs; choose one with --config <path>\n  \
                        found:\n    \
                        .devcontainer/node/devcontainer.json\n    \
                        .devcontainer/rust/devcontainer.json";
        assert!(message.ends_with(expected), "{message}");
    }

    #[test]
    fn none_found_says_where_it_looked_and_suggests_init() {
        let ws = workspace();
        let message = discovery_message(find_config(ws.path(), None));
        assert!(
            message.starts_with("no devcontainer.json found in "),
            "{message}"
        );
        assert!(message.contains(
            "looked for .devcontainer/devcontainer.json, .devcontainer.json and \
             .devcontainer/<folder>/devcontainer.json"
        ));
        assert!(message.contains("`yolo init`"), "{message}");
    }

    #[test]
    fn a_directory_named_like_the_config_is_not_a_config() {
        let ws = workspace();
        fs::create_dir_all(ws.path().join(".devcontainer/devcontainer.json")).unwrap();
        let root = touch(ws.path(), ".devcontainer.json");
        assert_eq!(find_config(ws.path(), None).unwrap(), canonical(&root));
    }

    #[test]
    fn explicit_path_is_used_even_when_others_exist() {
        let ws = workspace();
        touch(ws.path(), ".devcontainer/devcontainer.json");
        let chosen = touch(ws.path(), "other/custom.json");
        let given = ws.path().join("other/../other/custom.json");
        assert_eq!(
            find_config(ws.path(), Some(&given)).unwrap(),
            canonical(&chosen)
        );
    }

    #[test]
    fn explicit_path_must_exist() {
        let ws = workspace();
        let missing = ws.path().join("nope.json");
        let message = discovery_message(find_config(ws.path(), Some(&missing)));
        assert_eq!(
            message,
            format!("--config {}: no such file", missing.display())
        );
    }

    #[test]
    fn explicit_path_must_be_a_file() {
        let ws = workspace();
        let message = discovery_message(find_config(ws.path(), Some(ws.path())));
        assert!(message.ends_with("not a file; give the path of a devcontainer.json"));
    }

    #[cfg(unix)]
    #[test]
    fn discovered_symlink_leaving_the_workspace_is_refused() {
        let outside = workspace();
        let target = touch(outside.path(), "host.json");
        let ws = workspace();
        fs::create_dir_all(ws.path().join(".devcontainer")).unwrap();
        std::os::unix::fs::symlink(&target, ws.path().join(".devcontainer/devcontainer.json"))
            .unwrap();
        let message = discovery_message(find_config(ws.path(), None));
        assert!(message.contains("outside the workspace"), "{message}");
        // The user can still choose it deliberately.
        let explicit = ws.path().join(".devcontainer/devcontainer.json");
        assert_eq!(
            find_config(ws.path(), Some(&explicit)).unwrap(),
            canonical(&target)
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlink_inside_the_workspace_is_fine() {
        let ws = workspace();
        let target = touch(ws.path(), "configs/dev.json");
        fs::create_dir_all(ws.path().join(".devcontainer")).unwrap();
        std::os::unix::fs::symlink(&target, ws.path().join(".devcontainer/devcontainer.json"))
            .unwrap();
        assert_eq!(find_config(ws.path(), None).unwrap(), canonical(&target));
    }
}
