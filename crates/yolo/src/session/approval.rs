//! The repository's container definition can be edited by the agent through the workspace
//! mount. yolo keeps what the user last approved for the workspace folder (not for the config's
//! path: a config moved to `.devcontainer.json` or a new `.devcontainer/x/` is a change, not a
//! first use) and, when anything differs, shows the change and asks again; a non-interactive run
//! refuses unless the user accepts config changes.
//!
//! What is compared (`snapshot`): which config file yolo uses; the config's folder (all of
//! `.devcontainer/`-style folders, recursively, so local Features' folders too; the file alone
//! when it lies in the workspace root, with the `.devcontainer/` its local Features come from); the Dockerfile wherever it lies (resolved, after `project` checked where it leads) and
//! the context's `.dockerignore`; and the repository files `initializeCommand` runs (on the
//! host). Not compared: the rest of the build context (`COPY`/`ADD` sources), which can be
//! large and only shapes the image the agent already controls at run time.

use crate::devcontainer::model::LifecycleCommand;
use crate::error::{Error, Result};
use crate::project::Project;
use crate::run_spec::{ImageSource, RunSpec};
use crate::session::state::{Approval, ApprovedConfig, WorkspaceState};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

const MAX_FILE: u64 = 256 * 1024;

/// At most this many files named by `initializeCommand` are recorded (a command line is short;
/// this only bounds a pathological one).
const MAX_COMMAND_FILES: usize = 64;

/// Every input of the container definition, as the approval compares it.
pub(crate) fn snapshot(spec: &RunSpec) -> ApprovedConfig {
    let workspace = spec.workspace.as_path();
    let mut files = BTreeMap::new();
    config_folder(&mut files, &spec.config_file, workspace);
    if let ImageSource::Build(build) = &spec.image {
        // `project` resolved the Dockerfile and refused it if it leads out of the repository.
        let dockerfile = build
            .dockerfile_outside
            .clone()
            .unwrap_or_else(|| build.context.join(&build.dockerfile));
        add_input(&mut files, &dockerfile, workspace);
        add_input(&mut files, &build.context.join(".dockerignore"), workspace);
    }
    // The Compose files decide what runs as much as the config does (the Dockerfiles they
    // build from usually sit in the config's folder, recorded above).
    for file in spec.compose.iter().flat_map(|c| &c.files) {
        add_input(&mut files, file, workspace);
    }
    if let Some(command) = &spec.initialize_command {
        // The whole mounted folder is the agent's to write (the git root, when that is what
        // the config mounts), so the command's files are looked for there.
        let mounted = Path::new(&spec.workspace_mount.source);
        let root = match spec.workspace_mount.kind {
            crate::run_spec::MountKind::Bind if workspace.starts_with(mounted) => mounted,
            _ => workspace,
        };
        for path in command_files(command, root) {
            add_input(&mut files, &path, root);
        }
    }
    ApprovedConfig {
        config_file: relative(&spec.config_file, workspace),
        files,
        extra_ca: spec.extra_ca.clone(),
    }
}

/// A prompt that got no answer: Ctrl-C (the terminal was in raw mode, so it arrives as an
/// interrupted read) ends yolo like the signal would; anything else is a refusal.
fn no_answer(e: dialoguer::Error) -> Error {
    match e {
        dialoguer::Error::IO(io) if io.kind() == std::io::ErrorKind::Interrupted => {
            Error::interrupted(crate::interrupt::Signal::INT)
        }
        e => Error::NotApproved(format!("no answer ({e}); nothing was started")),
    }
}

/// The nearest folder above `workspace` that yolo has run an agent in (it has an approval).
fn agents_workspace_around(workspace: &Path) -> Result<Option<PathBuf>> {
    for outer in workspace.ancestors().skip(1) {
        if Approval::load(outer)?.approved.is_some() {
            return Ok(Some(outer.to_path_buf()));
        }
    }
    Ok(None)
}

/// The config folder's files: the folder (recursively) when the config lives in one, otherwise
/// the config file alone. Symlinks are recorded as links, not followed.
fn config_folder(files: &mut BTreeMap<String, String>, config_file: &Path, workspace: &Path) {
    let dir = config_file.parent().unwrap_or(workspace);
    if dir == workspace {
        add(files, config_file, workspace);
        // A `.devcontainer.json` at the root takes its local Features from `.devcontainer/`
        // (`devcontainer::features::local`): that folder is an input too.
        let features = dir.join(".devcontainer");
        if features.is_dir() {
            walk(files, &features, workspace);
        }
        return;
    }
    walk(files, dir, workspace);
}

/// Every file (and link) below `dir`.
fn walk(files: &mut BTreeMap<String, String>, dir: &Path, workspace: &Path) {
    let walker = ignore::WalkBuilder::new(dir)
        .standard_filters(false)
        .follow_links(false)
        .build();
    for entry in walker.flatten() {
        let kind = entry.file_type();
        if kind.is_some_and(|t| t.is_symlink()) {
            add_link(files, entry.path(), workspace);
        } else if kind.is_some_and(|t| t.is_file()) {
            add(files, entry.path(), workspace);
        }
    }
}

/// One named input: a regular file is read; a symlink is recorded as a link (where it leads is
/// what will be read) and, when it leads to a file inside the workspace, that file is read too.
/// A link out of the workspace is never followed: the host file is not the repository's.
fn add_input(files: &mut BTreeMap<String, String>, path: &Path, workspace: &Path) {
    let Ok(meta) = path.symlink_metadata() else {
        return;
    };
    if meta.is_symlink() {
        add_link(files, path, workspace);
        if let Ok(real) = path.canonicalize() {
            if real.starts_with(workspace) && real.is_file() {
                add(files, &real, workspace);
            }
        }
    } else if meta.is_file() {
        add(files, path, workspace);
    }
}

/// A link is part of the config too: where it leads is what Docker or the host will read.
fn add_link(files: &mut BTreeMap<String, String>, path: &Path, workspace: &Path) {
    let target = std::fs::read_link(path).unwrap_or_default();
    files.insert(
        relative(path, workspace),
        format!("symlink -> {}", target.display()),
    );
}

fn add(files: &mut BTreeMap<String, String>, path: &Path, workspace: &Path) {
    files.insert(relative(path, workspace), snapshot_text(path));
}

fn relative(path: &Path, workspace: &Path) -> String {
    path.strip_prefix(workspace)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Files the build and task tools an `initializeCommand` may call read from the folder they run
/// in (`make init` runs the Makefile, `npm run x` the scripts of package.json): part of the
/// approval for every folder the command names, the workspace first.
const TOOL_FILES: &[&str] = &[
    "Makefile",
    "GNUmakefile",
    "makefile",
    "justfile",
    "Justfile",
    ".justfile",
    "Taskfile.yml",
    "Taskfile.yaml",
    "package.json",
    ".npmrc",
    "Cargo.toml",
    ".cargo/config.toml",
    ".cargo/config",
    "pyproject.toml",
    "setup.py",
    "tox.ini",
    "noxfile.py",
    "Rakefile",
    "Gemfile",
    "composer.json",
    "build.gradle",
    "build.gradle.kts",
    "gradlew",
    "mvnw",
    "pom.xml",
];

/// Folders a command names that are looked into for `TOOL_FILES`, at most.
const MAX_COMMAND_DIRS: usize = 16;

/// The files below `root` (the mounted folder) that an `initializeCommand` may run on the host:
/// every word of every simple command (also inside `sh -c '...'`, and a file fed on standard
/// input) that names a file or link there, taken relative to `root` and to each folder the
/// command names before it (`cd scripts && ./init.sh`); and the `TOOL_FILES` of `root` and of
/// those folders. Guessing which word is the script missed `make init`, `env X=1 ./init.sh`
/// and `cd dir && ./x`, so every word counts; only the target of an output redirection does
/// not (`echo ok >> log` would change on every run).
fn command_files(command: &LifecycleCommand, root: &Path) -> Vec<PathBuf> {
    let mut words = Vec::new();
    for (_, argv) in command.commands("initializeCommand") {
        for arg in &argv {
            for simple in shell_commands(arg) {
                words.extend(simple);
            }
        }
    }
    let mut dirs = vec![root.to_path_buf()];
    let mut found: Vec<PathBuf> = Vec::new();
    let add = |path: PathBuf, found: &mut Vec<PathBuf>| {
        if found.len() < MAX_COMMAND_FILES && !found.contains(&path) {
            found.push(path);
        }
    };
    for word in &words {
        let word = word
            .replace("${PWD}", ".")
            .replace("$PWD", ".")
            .replace("$(pwd)", ".");
        for base in dirs.clone() {
            let Some(path) = crate::paths::normalize_path(&base.join(&word)) else {
                continue;
            };
            if !path.starts_with(root) {
                continue;
            }
            match path.symlink_metadata() {
                Ok(m) if m.is_dir() => {
                    if dirs.len() < MAX_COMMAND_DIRS && !dirs.contains(&path) {
                        dirs.push(path);
                    }
                }
                Ok(_) => add(path, &mut found),
                Err(_) => {}
            }
        }
    }
    for dir in &dirs {
        for name in TOOL_FILES {
            let path = dir.join(name);
            if path.symlink_metadata().is_ok() {
                add(path, &mut found);
            }
        }
    }
    found
}

/// A shell string split into simple commands (at `;`, `&`, `|`, parentheses and newlines), each
/// as its words with quotes removed, leading `NAME=value` assignments and redirections dropped;
/// a file given on standard input (`sh < init.sh`) is returned as a command of its own, since
/// it is read as a script as often as not. Not a shell parser: enough to find what a one-line
/// `initializeCommand` runs.
fn shell_commands(text: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    for simple in text.split(|c: char| ";&|()\n`".contains(c)) {
        let mut words = Vec::new();
        // The redirection whose file is the next word: `Some(true)` for input.
        let mut pending: Option<bool> = None;
        for word in simple.split_whitespace() {
            let word = word.replace(['\'', '"'], "");
            let op = word.trim_start_matches(|c: char| c.is_ascii_digit());
            if op.starts_with(['<', '>']) {
                let file = op.trim_start_matches(['<', '>', '&']);
                let input = op.starts_with('<');
                match file.is_empty() {
                    true => pending = Some(input),
                    false if input => commands.push(vec![file.to_string()]),
                    false => {}
                }
                continue;
            }
            if let Some(input) = pending.take() {
                if input {
                    commands.push(vec![word]);
                }
                continue;
            }
            let assignment = words.is_empty() && word.contains('=');
            if !word.is_empty() && !assignment {
                words.push(word);
            }
        }
        if !words.is_empty() {
            commands.push(words);
        }
    }
    commands
}

/// What the snapshot keeps of a file: its text, or for a large one its size and content hash, so
/// an edit that keeps the size is still a change (a size alone let a same-size edit through).
fn snapshot_text(path: &Path) -> String {
    match crate::digest::file(path, MAX_FILE) {
        Ok(d) => match d.bytes {
            Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            None => format!("<{} bytes, sha256 {}>", d.len, d.sha256),
        },
        Err(_) => String::new(),
    }
}

/// A readable diff between the approved and the current snapshot, with the repository's control
/// characters shown as escapes (`visible`), so the diff you approve is the change. Each line
/// starts with what yolo put there (`+`, `-`, a space, a header): the names and decoded values
/// put in a line are escaped where they go, newlines too.
pub(crate) fn diff(old: &ApprovedConfig, new: &ApprovedConfig) -> String {
    use crate::visible::escape_controls;
    let mut out = String::new();
    if old.config_file != new.config_file {
        out.push_str(&format!(
            "config file: you approved {}, yolo now uses {}\n",
            escape_controls(&old.config_file),
            escape_controls(&new.config_file)
        ));
    }
    let (old, new) = (&old.files, &new.files);
    let names: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for raw_name in names {
        let (a, b) = (old.get(raw_name), new.get(raw_name));
        let name = escape_controls(raw_name);
        if a == b {
            continue;
        }
        let (text_a, text_b) = (
            a.map(String::as_str).unwrap_or(""),
            b.map(String::as_str).unwrap_or(""),
        );
        let diff = similar::TextDiff::from_lines(text_a, text_b)
            .unified_diff()
            .context_radius(2)
            .header(&format!("a/{name}"), &format!("b/{name}"))
            .to_string();
        if diff.is_empty() {
            // An empty file came or went: no line changed, but the change must still show.
            let what = if a.is_none() { "added" } else { "removed" };
            out.push_str(&format!("{name}: empty file {what}\n"));
        }
        for line in diff.lines() {
            out.push_str(line);
            out.push('\n');
            // `"\u0030.0.0.0/1"` reads as 0.0.0.0/1: show what JSON will make of a changed line.
            if let Some(decoded) = line.strip_prefix('+').and_then(json_escapes_decoded) {
                let decoded = escape_controls(&decoded);
                out.push_str(&format!("+  (as JSON reads it: {decoded})\n"));
            }
        }
    }
    crate::visible::escape_lines(&out)
}

/// `line` with its JSON `\uXXXX` escapes decoded (surrogate pairs joined), when it has any.
fn json_escapes_decoded(line: &str) -> Option<String> {
    if !line.contains("\\u") {
        return None;
    }
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find("\\u") {
        out.push_str(&rest[..at]);
        let code = |s: &str| s.get(2..6).and_then(|h| u32::from_str_radix(h, 16).ok());
        match code(&rest[at..]) {
            Some(hi @ 0xD800..=0xDBFF) => match code(&rest[at + 6..]) {
                Some(lo @ 0xDC00..=0xDFFF) => {
                    let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                    out.push(char::from_u32(c).unwrap_or('\u{fffd}'));
                    rest = &rest[at + 12..];
                }
                _ => {
                    out.push('\u{fffd}');
                    rest = &rest[at + 6..];
                }
            },
            Some(c) => {
                out.push(char::from_u32(c).unwrap_or('\u{fffd}'));
                rest = &rest[at + 6..];
            }
            None => {
                out.push_str("\\u");
                rest = &rest[at + 2..];
            }
        }
    }
    out.push_str(rest);
    Some(out)
}

/// Check (and record) approval. The first use of a workspace records the current inputs as
/// approved: the policy has already refused anything dangerous, and there is nothing earlier to
/// compare with. After that, any difference — a moved config included — is asked about.
/// Whether yolo has no approval of this workspace's container definition yet (its first use,
/// which `check` approves by using it).
pub(crate) fn first_use(project: &Project, state: &WorkspaceState) -> Result<bool> {
    let spec = &project.spec;
    Ok(Approval::load(&spec.workspace)?.approved.is_none()
        && earlier_approval(spec, state).is_none())
}

pub(crate) fn check(project: &Project, state: &mut WorkspaceState) -> Result<()> {
    let spec = &project.spec;
    let mut approval = Approval::load(&spec.workspace)?;
    let current = snapshot(spec);
    let approved = approval
        .approved
        .take()
        .or_else(|| earlier_approval(spec, state));
    // Carried over (or superseded) now: the workspace's approval is the one record.
    state.approved = None;
    let first_use = approved.is_none();
    if let Some(approved) = approved.filter(|a| !a.same_definition(&current)) {
        ask(project, &diff(&approved, &current))?;
    } else if first_use {
        // A first use is approved by using it, unless an agent could have written the config:
        // it lies inside a folder yolo gave an agent before (`sub/.devcontainer/` planted
        // from a session in the repository).
        if let Some(outer) = agents_workspace_around(&spec.workspace)? {
            let header = format!(
                "yolo has not run this folder before, and it lies inside {}, which an agent could write: everything here is new\n",
                outer.display()
            );
            ask(
                project,
                &(header + &diff(&ApprovedConfig::default(), &current)),
            )?;
        }
    }
    approval.approved = Some(current);
    approval.save(&spec.workspace)
}

/// yolo itself (re)wrote `path`, an input (`devcontainer-lock.json`, written when the
/// Features resolved): the approved record takes its new content, so the next `up` does not
/// show yolo's own write as the repository's change. Nothing else of the record changes.
pub(crate) fn note_own_write(project: &Project, path: &Path) -> Result<()> {
    let workspace = &project.spec.workspace;
    let mut approval = Approval::load(workspace)?;
    let Some(approved) = approval.approved.as_mut() else {
        return Ok(());
    };
    let mut now = BTreeMap::new();
    add_input(&mut now, path, workspace);
    approved.files.remove(&relative(path, workspace));
    approved.files.extend(now);
    approval.save(workspace)
}

/// What an earlier yolo recorded per devcontainerId: this config's own record, else one of another
/// config of the same workspace (its path unknown), so an upgrade is no first use either.
fn earlier_approval(spec: &RunSpec, state: &WorkspaceState) -> Option<ApprovedConfig> {
    if let Some(files) = &state.approved {
        return Some(ApprovedConfig {
            config_file: relative(&spec.config_file, &spec.workspace),
            files: files.clone(),
            extra_ca: Vec::new(),
        });
    }
    let workspace = spec.workspace.display().to_string();
    WorkspaceState::all()
        .into_iter()
        .find(|s| s.workspace == workspace && s.approved.is_some())
        .and_then(|s| s.approved)
        .map(|files| ApprovedConfig {
            config_file: "(another config, approved by an earlier yolo)".into(),
            files,
            extra_ca: Vec::new(),
        })
}

/// Show `change` and ask; refuse when nobody can be asked and the user did not accept changes.
fn ask(project: &Project, change: &str) -> Result<()> {
    if project.settings.accept_config {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Err(Error::NotApproved(
            "the repository's dev container config changed since you last approved it; yolo refuses to continue without your approval: review the change, then run again with --accept-config (or answer yes in a terminal)".into(),
        )
        .with_lines("the change", change.lines()));
    }
    eprintln!("The dev container config changed since you last approved it:\n{change}");
    let yes = dialoguer::Confirm::new()
        .with_prompt("Accept this change?")
        .default(false)
        .interact()
        .map_err(no_answer)?;
    if !yes {
        return Err(Error::NotApproved(
            "change not accepted; nothing was started".into(),
        ));
    }
    Ok(())
}

/// Proof that `initializeCommand` may run: only [`confirm_host_command`] makes one, and
/// `hooks::initialize` will not run the command without it.
pub(crate) struct HostCommandApproval(());

/// `initializeCommand` when nobody can be asked about it (no terminal, no trust) and requests
/// are declined: it does not run, and this says so.
pub(crate) fn host_command_declined(project: &Project) -> Option<crate::run_spec::Declined> {
    let command = project.spec.initialize_command.as_ref()?;
    let nobody = !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal();
    if project.settings.trust_host_commands
        || !nobody
        || project.settings.user.requests != crate::policy::Requests::Decline
    {
        return None;
    }
    Some(crate::run_spec::Declined {
        file: project.spec.config_file.clone(),
        line: None,
        property: "initializeCommand".into(),
        value: format!("`{}`", shown_command(command)),
        reason: "it runs on your host, outside the container, and there is no terminal to ask in"
            .into(),
        grant: None,
        hint: Some(format!(
            "--trust-host-commands, --grant initialize-command, or trust_host_commands = true in {}",
            crate::user_config::UserConfig::path().display()
        )),
    })
}

fn shown_command(command: &crate::devcontainer::model::LifecycleCommand) -> String {
    command
        .commands("initializeCommand")
        .into_iter()
        .map(|(_, argv)| argv.join(" "))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Right before `initializeCommand` would run on the host: go on when the user trusts host
/// commands, else ask in a terminal; with nobody to ask, decline it (`None`: it does not run,
/// `host_command_declined`) or, under `[policy] requests = "refuse"`, refuse (77); refuse when
/// the answer is no. Asked only on the path that runs it (a new start), never when a running
/// container is reused.
pub(crate) fn confirm_host_command(project: &Project) -> Result<Option<HostCommandApproval>> {
    let Some(command) = &project.spec.initialize_command else {
        return Ok(Some(HostCommandApproval(())));
    };
    if project.settings.trust_host_commands {
        return Ok(Some(HostCommandApproval(())));
    }
    if host_command_declined(project).is_some() {
        return Ok(None);
    }
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        let shown = command
            .commands("initializeCommand")
            .into_iter()
            .map(|(_, argv)| argv.join(" "))
            .collect::<Vec<_>>()
            .join("; ");
        return Err(Error::Refused {
            file: project.spec.config_file.clone(),
            property: "initializeCommand".into(),
            value: format!("`{shown}`"),
            reason: "it runs on your host, outside the container".into(),
            grant: format!(
                "--trust-host-commands, or trust_host_commands = true in {}",
                crate::user_config::UserConfig::path().display()
            ),
        });
    }
    // JSON escapes C0 controls but not C1 ones or bidi overrides: those are made visible too.
    let shown =
        crate::visible::escape_controls(&serde_json::to_string(command).unwrap_or_default());
    eprintln!(
        "The repository wants to run this on YOUR machine (not in the container):\n  {shown}"
    );
    let yes = dialoguer::Confirm::new()
        .with_prompt("Run it on the host?")
        .default(false)
        .interact()
        .map_err(no_answer)?;
    if !yes {
        return Err(Error::NotApproved(
            "initializeCommand not approved; nothing was started".into(),
        ));
    }
    Ok(Some(HostCommandApproval(())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) -> PathBuf {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn the_files_an_initialize_command_names_in_the_workspace_are_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap().join("repo");
        let init = write(&ws, "scripts/init.sh", "echo hi\n");
        let dc = write(&ws, ".devcontainer/init.sh", "echo dc\n");
        write(dir.path(), "outside.sh", "echo out\n");
        let shell = LifecycleCommand::Shell(
            "./scripts/init.sh --flag && X=1 bash .devcontainer/init.sh; /bin/true ../outside.sh"
                .into(),
        );
        assert_eq!(command_files(&shell, &ws), [init.clone(), dc.clone()]);
        let redirected = LifecycleCommand::Shell("sh < scripts/init.sh 2>&1".into());
        assert_eq!(command_files(&redirected, &ws), std::slice::from_ref(&init));
        let args = LifecycleCommand::Args(vec!["bash".into(), ".devcontainer/init.sh".into()]);
        assert_eq!(command_files(&args, &ws), [dc]);
        let nested = LifecycleCommand::Args(vec![
            "/bin/bash".into(),
            "-c".into(),
            "cd . && ./scripts/init.sh".into(),
        ]);
        assert_eq!(command_files(&nested, &ws), [init]);
        // What a command writes through a redirection is no input (it changes every run).
        write(&ws, "log", "ran\n");
        for text in ["echo ran >> log", "echo ran >log", "ls missing.sh"] {
            let none = LifecycleCommand::Shell(text.into());
            assert!(command_files(&none, &ws).is_empty(), "{text}");
        }
    }

    #[test]
    fn local_features_are_inputs_wherever_the_config_lies() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        write(&ws, ".devcontainer/hello/install.sh", "echo hi\n");
        write(&ws, "README.md", "not an input\n");
        for config in [".devcontainer/devcontainer.json", ".devcontainer.json"] {
            let file = write(&ws, config, "{}");
            let mut files = BTreeMap::new();
            config_folder(&mut files, &file, &ws);
            assert!(
                files.contains_key(".devcontainer/hello/install.sh"),
                "{config}: {:?}",
                files.keys()
            );
            assert!(!files.contains_key("README.md"));
        }
    }

    /// Every line of the diff starts with what yolo put there: a newline in a file's name or in
    /// a decoded JSON escape cannot start a line that reads as unchanged or as yolo's.
    #[test]
    fn a_newline_in_a_name_or_a_decoded_value_cannot_start_a_line_of_the_diff() {
        let old = ApprovedConfig::default();
        let mut new = ApprovedConfig::default();
        new.files.insert(
            "x\n yolo: nothing changed".into(),
            "{\"a\": \"\\u000a \\\"unchanged\\\": 1\"}\n".into(),
        );
        let text = diff(&old, &new);
        for line in text.lines() {
            assert!(
                ["+", "-", "@@", " "].iter().any(|p| line.starts_with(p))
                    && !line.starts_with(" yolo")
                    && !line.starts_with(" \"unchanged"),
                "{line:?} in\n{text}"
            );
        }
        assert!(text.contains("x\\n yolo: nothing changed"), "{text}");
        assert!(
            text.contains("(as JSON reads it: {\"a\": \"\\n \\\"unchanged"),
            "{text}"
        );
    }

    #[test]
    fn a_changed_line_with_json_escapes_shows_what_json_reads() {
        let old = ApprovedConfig::default();
        let mut new = ApprovedConfig::default();
        new.files.insert(
            "devcontainer.json".into(),
            "{\"\\u0063ustomizations\": {\"allow\": [\"\\u0030.0.0.0/1\", \"\\ud83d\\ude00\"]}}\n"
                .into(),
        );
        let text = diff(&old, &new);
        assert!(
            text.contains("+  (as JSON reads it: {\"customizations\": {\"allow\": [\"0.0.0.0/1\", \"\u{1f600}\"]}})"),
            "{text}"
        );
        assert_eq!(json_escapes_decoded("no escapes"), None);
        assert_eq!(
            json_escapes_decoded("\\u001b]0;x").as_deref(),
            Some("\u{1b}]0;x")
        );
    }

    #[test]
    fn every_word_and_the_tools_files_of_every_folder_named_are_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let init = write(&ws, "scripts/init.sh", "echo hi\n");
        let makefile = write(&ws, "Makefile", "init:\n");
        let sub_make = write(&ws, "tools/Makefile", "init:\n");
        let package = write(&ws, "web/package.json", "{}\n");
        let files = |text: &str| command_files(&LifecycleCommand::Shell(text.into()), &ws);
        // The forms a red team found missed: each names what runs, one way or another.
        assert_eq!(
            files("cd scripts && ./init.sh"),
            [init.clone(), makefile.clone()]
        );
        assert_eq!(files("make init"), std::slice::from_ref(&makefile));
        assert_eq!(
            files("make -C tools init"),
            [makefile.clone(), sub_make.clone()]
        );
        assert_eq!(
            files("env X=1 ./scripts/init.sh"),
            [init.clone(), makefile.clone()]
        );
        assert_eq!(
            files("exec ./scripts/init.sh"),
            [init.clone(), makefile.clone()]
        );
        assert_eq!(
            files("bash -o errexit scripts/init.sh"),
            [init.clone(), makefile.clone()]
        );
        assert_eq!(
            files("bash $PWD/scripts/init.sh"),
            [init.clone(), makefile.clone()]
        );
        assert_eq!(
            files("sh -c \"sh scripts/init.sh\""),
            [init.clone(), makefile.clone()]
        );
        assert_eq!(
            files("cd web && npm run setup"),
            [makefile.clone(), package.clone()]
        );
        let args = LifecycleCommand::Args(vec![
            "/usr/bin/env".into(),
            "bash".into(),
            "scripts/init.sh".into(),
        ]);
        assert_eq!(command_files(&args, &ws), [init, makefile]);
    }

    #[test]
    fn a_link_out_of_the_workspace_is_recorded_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("repo");
        let secret = write(&root, "id_rsa", "PRIVATE KEY");
        let inside = write(&ws, "docker/Dockerfile", "FROM debian\n");
        std::os::unix::fs::symlink(&secret, ws.join("out")).unwrap();
        std::os::unix::fs::symlink(&inside, ws.join("in")).unwrap();
        let mut files = BTreeMap::new();
        add_input(&mut files, &ws.join("out"), &ws);
        add_input(&mut files, &ws.join("in"), &ws);
        assert_eq!(
            files,
            BTreeMap::from([
                ("docker/Dockerfile".into(), "FROM debian\n".into()),
                ("in".into(), format!("symlink -> {}", inside.display())),
                ("out".into(), format!("symlink -> {}", secret.display())),
            ])
        );
    }

    #[test]
    fn a_moved_config_shows_both_paths_in_the_diff() {
        let file = |path: &str| ApprovedConfig {
            config_file: path.into(),
            files: BTreeMap::from([(path.to_string(), "{}\n".to_string())]),
            extra_ca: Vec::new(),
        };
        let diff = diff(
            &file(".devcontainer/devcontainer.json"),
            &file(".devcontainer.json"),
        );
        assert!(
            diff.starts_with("config file: you approved .devcontainer/devcontainer.json, yolo now uses .devcontainer.json\n"),
            "{diff}"
        );
        assert!(diff.contains("+++ b/.devcontainer.json"), "{diff}");
        assert!(
            diff.contains("--- a/.devcontainer/devcontainer.json"),
            "{diff}"
        );
    }

    #[test]
    fn a_large_file_changes_with_its_content_not_only_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let big = vec![b'a'; MAX_FILE as usize + 1];
        let mut edited = big.clone();
        edited[10] = b'b';
        let (big_path, edited_path) = (write("big", &big), write("edited", &edited));
        assert_ne!(snapshot_text(&big_path), snapshot_text(&edited_path));
        assert!(snapshot_text(&big_path).starts_with(&format!("<{} bytes, sha256 ", big.len())));
        assert_eq!(snapshot_text(&write("small", b"small")), "small");
    }
}
