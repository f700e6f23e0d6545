//! Checkpoints of a workspace session (the agent works on the repository itself): its working
//! tree, tracked and untracked files, recorded in a git store of yolo's own, never in the
//! repository's `.git`, which the agent can write (a checkpoint kept there could be made to
//! hold what the agent chose, and a rollback to write it on the host).
//!
//! The store is a bare repository in yolo's data folder, `checkpoints/<devcontainerId>.git`,
//! out of every container's reach. Git is run with the store as `GIT_DIR`, the repository's
//! folder as its work tree and the store's own index, so only the files are read:
//!
//! - **Taking one.** The session's containers (the agent and any Compose service, all that can
//!   write the folder) are frozen first (`docker pause`), so nothing changes while git reads;
//!   then `git add --all` and `write-tree`, recorded as for copies (`crate::checkpoint`:
//!   `refs/yolo/checkpoints/<id>/<N>`, here in the store). Ignored files are not recorded,
//!   by the repository's `.gitignore` files and the `.git/info/exclude` of the session's
//!   start; git reads links as links and never follows one.
//! - **Ignored stays ignored.** When a session starts, the paths then ignored
//!   (`ls-files --others --ignored --directory`) are added, anchored, to the store's own
//!   exclude file, for good. A rollback reads the tree with these on top of whatever
//!   `.gitignore` the agent left: what was ignored when a session started (`node_modules/`,
//!   `.env`) is never recorded, deleted or written, even if the agent un-ignored it.
//! - **Byte for byte.** The store's `info/attributes` turns every attribute off
//!   (`-text -filter ...`): the repository's `.gitattributes` changes no line ending, runs no
//!   filter, in either direction. No global or system git config is read.
//! - **Rollback.** The session's containers are stopped (the agent's processes with them),
//!   the tree is read once more (`add --all`: the index is what is there now) and then
//!   `read-tree -u --reset` to the checkpoint: files made since are deleted, changed and
//!   deleted ones written back, folders emptied by it removed. Git removes a link standing
//!   where a folder must be before writing into it (it never writes through a link on the
//!   way), and deletes a link itself, never what it leads to. `.git` is never touched.
//!
//! Left out: a nested repository (an untracked folder with its own `.git`) is recorded as git
//! records one, its commit, not its files; a path holding a newline cannot be written as an
//! exclude pattern, so one ignored at the start is protected only while the repository's own
//! rules ignore it.

use crate::checkpoint::{self, Checkpoint};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The store of session `devcontainer_id`'s checkpoints.
pub(crate) fn store(devcontainer_id: &str) -> PathBuf {
    crate::store::root()
        .join("checkpoints")
        .join(format!("{devcontainer_id}.git"))
}

/// Every attribute off: the files go in and out as they are.
const ATTRIBUTES: &str = "* -text -eol -filter -diff -merge -ident -working-tree-encoding -crlf\n";

/// The store, made when there is none.
fn open(devcontainer_id: &str) -> Result<PathBuf> {
    open_at(store(devcontainer_id))
}

/// The store at `store`, made when there is none.
fn open_at(store: PathBuf) -> Result<PathBuf> {
    if store.join("HEAD").is_file() {
        return Ok(store);
    }
    let parent = store.parent().expect("in the checkpoints folder");
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    // Made aside and moved in place: a store is whole or not there.
    let made = tempfile::Builder::new()
        .prefix(".store-")
        .tempdir_in(parent)
        .map_err(|e| Error::io(parent, e))?;
    checkpoint::run(made.path(), &["init", "-q", "--bare"])?;
    let info = made.path().join("info");
    std::fs::create_dir_all(&info).map_err(|e| Error::io(&info, e))?;
    std::fs::write(info.join("attributes"), ATTRIBUTES)
        .map_err(|e| Error::io(info.join("attributes"), e))?;
    match std::fs::rename(made.path(), &store) {
        Ok(()) => {
            let _ = made.keep();
        }
        // Another yolo made it meanwhile.
        Err(_) if store.join("HEAD").is_file() => {}
        Err(e) => return Err(Error::io(&store, e)),
    }
    Ok(store)
}

/// Git with the store as its repository and `workspace` as its work tree, in a process group
/// of its own (a Ctrl-C at the terminal does not stop it halfway through a rollback: yolo
/// lets it finish, `interrupt::Handled`).
fn git(store: &Path, workspace: &Path) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = crate::remote::git(store);
    cmd.args(["-c", "core.symlinks=true"])
        .args(["-c", "core.autocrlf=false"])
        .args(["-c", "core.safecrlf=false"])
        .args(["-c", "core.untrackedCache=false"])
        .args(["-c", "core.splitIndex=false"])
        .args(["-c", "core.quotePath=false"])
        .args(["-c", "advice.addEmbeddedRepo=false"])
        .env("GIT_DIR", store)
        .env("GIT_WORK_TREE", workspace)
        .env("GIT_INDEX_FILE", store.join("index"))
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .process_group(0);
    cmd
}

fn run(store: &Path, workspace: &Path, args: &[&str], what: &str) -> Result<Vec<u8>> {
    crate::remote::succeeded(git(store, workspace).args(args), what)
}

/// Git with `args` on the NUL-separated `paths` (literal, given on its stdin).
fn with_paths(
    store: &Path,
    workspace: &Path,
    args: &[&str],
    paths: &[u8],
    index: Option<&Path>,
) -> Result<std::process::Output> {
    let mut cmd = git(store, workspace);
    if let Some(index) = index {
        cmd.env("GIT_INDEX_FILE", index);
    }
    cmd.args(args)
        .args(["--pathspec-from-file=-", "--pathspec-file-nul"])
        .env("GIT_LITERAL_PATHSPECS", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(crate::remote::git_missing)
        .and_then(|mut child| {
            use std::io::Write;
            // A git that ends before reading it all is still waited for; what it said is
            // its answer.
            if let Some(mut stdin) = child.stdin.take() {
                let _ = stdin.write_all(paths);
            }
            child.wait_with_output().map_err(|e| Error::io(store, e))
        })
}

/// `git add --all` of the whole tree into the store's index, going on past what git cannot
/// take (a file it may not read, an empty nested repository, a name git refuses such as
/// `git~1`): those are left as the index had them, and said. Before it, the paths the index
/// holds that are now ignored leave it, so what is ignored is never deleted by a rollback
/// however it came into the index (a checkpoint taken while the agent had un-ignored it).
fn add_all(store: &Path, workspace: &Path, warnings: &mut Vec<String>) -> Result<()> {
    let ignored = run(
        store,
        workspace,
        &[
            "ls-files",
            "-z",
            "--cached",
            "--ignored",
            "--exclude-standard",
        ],
        "git cannot list the working tree",
    )?;
    if !ignored.is_empty() {
        let out = with_paths(
            store,
            workspace,
            &["rm", "-r", "-q", "--cached", "--ignore-unmatch"],
            &ignored,
            None,
        )?;
        if !out.status.success() {
            warnings.push(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
    }
    let out = git(store, workspace)
        .args(["add", "--all", "--ignore-errors", "--", "."])
        .output()
        .map_err(crate::remote::git_missing)?;
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    match out.status.code() {
        Some(0) => {}
        // Some paths could not be added; the rest are.
        Some(1) => warnings.push(said),
        _ => {
            return Err(Error::dependency(
                crate::error::Dependency::Git,
                format!(
                    "git cannot read the working tree: {}",
                    crate::visible::escape_controls(&said)
                ),
            ))
        }
    }
    Ok(())
}

/// The patterns the store's exclude file holds: the repository's `.git/info/exclude` and the
/// user's own git excludes file as the session starts, then every path ignored when a session
/// started.
fn write_excludes(store: &Path, workspace: &Path) -> Result<()> {
    let info = store.join("info");
    let exclude = info.join("exclude");
    let kept = info.join("yolo-ignored");
    let mut ignored: std::collections::BTreeSet<Vec<u8>> = match std::fs::read(&kept) {
        Ok(bytes) => bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::to_vec)
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Default::default(),
        // Never started afresh by mistake: the list only grows.
        Err(e) => return Err(Error::io(&kept, e)),
    };
    // The repository's own, and the user's (`core.excludesFile`, which the store's git does
    // not read: no global config), each read as a plain file, at most 1 MiB.
    let mut rules = read_plain(workspace, &[".git", "info", "exclude"]);
    if let Some(file) = user_excludes_file() {
        // The user's own file, out of the agent's reach: links followed (stow, home-manager).
        use std::io::Read;
        if let Ok(f) = std::fs::File::open(&file) {
            if f.metadata().is_ok_and(|m| m.is_file()) {
                rules.push(b'\n');
                let _ = f.take(1 << 20).read_to_end(&mut rules);
            }
        }
    }
    // Every path ignored now, whatever the store's index holds (a fresh index).
    let empty = tempfile::tempdir().map_err(|e| Error::io(std::env::temp_dir(), e))?;
    // The list so far stays in it while the new one is made (a failure below leaves it).
    let mut before = Vec::new();
    for p in &ignored {
        before.extend_from_slice(p);
        before.push(b'\n');
    }
    std::fs::write(&exclude, [&rules[..], b"\n", &before[..]].concat())
        .map_err(|e| Error::io(&exclude, e))?;
    let listed = crate::remote::succeeded(
        git(store, workspace)
            .env("GIT_INDEX_FILE", empty.path().join("index"))
            .args([
                "ls-files",
                "-z",
                "--others",
                "--ignored",
                "--exclude-standard",
                "--directory",
            ]),
        "git cannot list the repository's ignored files",
    )?;
    for path in listed.split(|&b| b == 0).filter(|p| !p.is_empty()) {
        if let Some(pattern) = pattern_of(path) {
            ignored.insert(pattern);
        }
    }
    let mut list = Vec::new();
    for p in &ignored {
        list.extend_from_slice(p);
        list.push(b'\n');
    }
    crate::store::replace(&kept, &list).map_err(|e| Error::io(&kept, e))?;
    std::fs::write(&exclude, [&rules[..], b"\n", &list[..]].concat())
        .map_err(|e| Error::io(&exclude, e))
}

/// The user's git excludes file (`core.excludesFile` of their global config), if set.
fn user_excludes_file() -> Option<PathBuf> {
    let out = Command::new("git")
        .args(["config", "--global", "--path", "--get", "core.excludesFile"])
        .env_remove("GIT_DIR")
        .env_remove("GIT_CONFIG_GLOBAL")
        .output()
        .ok()?;
    let path = String::from_utf8(out.stdout).ok()?;
    let path = path.trim();
    (out.status.success() && path.starts_with('/')).then(|| PathBuf::from(path))
}

/// `path` (relative, as git lists it, `/` at the end for a folder) as an exclude pattern
/// matching it alone, as a folder or as anything put in its place (no `/` at the end: a file
/// or link standing where an ignored folder was is ignored too, so a checkpoint never records
/// one that a rollback would write over the folder): anchored, its special characters
/// escaped, byte for byte; `None` for one with a newline, which no pattern can hold.
fn pattern_of(path: &[u8]) -> Option<Vec<u8>> {
    let path = path.strip_suffix(b"/").unwrap_or(path);
    if path.is_empty() || path.contains(&b'\n') || path.contains(&b'\r') {
        return None;
    }
    let mut out = vec![b'/'];
    for &c in path {
        if matches!(
            c,
            b'*' | b'?' | b'[' | b']' | b'\\' | b'!' | b'#' | b' ' | b'\t'
        ) {
            out.push(b'\\');
        }
        out.push(c);
    }
    Some(out)
}

/// The bytes of the regular file `below` (names) under the folder `root`, at most 1 MiB,
/// opened name by name never through a link (the agent can make any of them one) and without
/// waiting on a FIFO; empty when there is none.
fn read_plain(root: &Path, below: &[&str]) -> Vec<u8> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Some((last, folders)) = below.split_last() else {
        return Vec::new();
    };
    let Ok(mut dir) = rustix::fs::open(root, flags | OFlags::DIRECTORY, Mode::empty()) else {
        return Vec::new();
    };
    for name in folders {
        match rustix::fs::openat(&dir, *name, flags | OFlags::DIRECTORY, Mode::empty()) {
            Ok(next) => dir = next,
            Err(_) => return Vec::new(),
        }
    }
    let Ok(fd) = rustix::fs::openat(&dir, *last, flags | OFlags::NONBLOCK, Mode::empty()) else {
        return Vec::new();
    };
    let file = std::fs::File::from(fd);
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Vec::new();
    }
    let mut bytes = Vec::new();
    let _ = file.take(1 << 20).read_to_end(&mut bytes);
    bytes
}

/// Record the working tree of `workspace` as the next checkpoint of session
/// `devcontainer_id`. `start`: the session is starting (its ignored paths are added to the
/// store's, and the last checkpoint is its start when it holds the same tree). The session's
/// containers must be frozen or stopped. What git could not take is in `warnings`.
pub(crate) fn take(
    workspace: &Path,
    devcontainer_id: &str,
    what: &str,
    start: bool,
    warnings: &mut Vec<String>,
) -> Result<Checkpoint> {
    take_in(
        &open(devcontainer_id)?,
        workspace,
        devcontainer_id,
        what,
        start,
        warnings,
    )
}

/// [`take`] with the store at `store`.
fn take_in(
    store: &Path,
    workspace: &Path,
    devcontainer_id: &str,
    what: &str,
    start: bool,
    warnings: &mut Vec<String>,
) -> Result<Checkpoint> {
    let store = store.to_path_buf();
    if start || !store.join("info").join("yolo-ignored").exists() {
        write_excludes(&store, workspace)?;
    }
    add_all(&store, workspace, warnings)?;
    // The `.gitignore` files the tree's own rules ignore (a tool's `.venv/.gitignore` of `*`,
    // one that ignores itself) are recorded too, as a rollback reads them (its first pass):
    // else a rollback to this very checkpoint would delete them and what they hide.
    add_ignore_files(&store, workspace, warnings)?;
    let tree = run(
        &store,
        workspace,
        &["write-tree"],
        "git cannot record the tree",
    )?;
    let tree = String::from_utf8_lossy(&tree).trim().to_string();
    // A session that starts on the tree of the last checkpoint (an `up` after a `down`,
    // nothing changed between) has it as its start: `yolo checkpoints` is not filled with
    // copies of one tree.
    if start {
        if let Some(last) = checkpoint::list(&store, devcontainer_id)?.pop() {
            if last.tree == tree {
                return Ok(last);
            }
        }
    }
    // No parent: the repository's commits are not in the store (and its HEAD is the agent's
    // to move).
    checkpoint::record(&store, devcontainer_id, &tree, None, what)
}

/// Whether session `devcontainer_id` has a store of checkpoints.
pub(crate) fn has_store(devcontainer_id: &str) -> bool {
    store(devcontainer_id).join("HEAD").is_file()
}

/// Put the working tree of `workspace` back to checkpoint `cp` of the store of
/// `devcontainer_id`. The session's containers must be stopped. Twice: the first puts the
/// checkpoint's `.gitignore` files back (and deletes the others, even one that ignores
/// itself), so the second reads the tree by the checkpoint's ignore rules, not the agent's,
/// and deletes what the agent hid behind one. What git could not do is in `warnings`.
pub(crate) fn restore(
    workspace: &Path,
    devcontainer_id: &str,
    cp: &Checkpoint,
    warnings: &mut Vec<String>,
) -> Result<()> {
    restore_in(&open(devcontainer_id)?, workspace, cp, warnings)
}

/// [`restore`] with the store at `store`.
fn restore_in(
    store: &Path,
    workspace: &Path,
    cp: &Checkpoint,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let store = store.to_path_buf();
    let target = without_protected(&store, workspace, &cp.tree)?;
    for pass in 0..2 {
        add_all(&store, workspace, warnings)?;
        if pass == 0 {
            add_ignore_files(&store, workspace, warnings)?;
        }
        let out = git(&store, workspace)
            .args(["read-tree", "-u", "--reset", &target])
            .output()
            .map_err(crate::remote::git_missing)?;
        let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if !out.status.success() {
            return Err(Error::dependency(
                crate::error::Dependency::Git,
                format!(
                    "git cannot put the working tree back: {}",
                    crate::visible::escape_controls(&said)
                ),
            ));
        }
        if !said.is_empty() {
            warnings.push(said);
        }
    }
    Ok(())
}

/// The tree `tree` without the paths the store's exclude file protects (ignored when a
/// session started): a rollback to a checkpoint taken before they were ignored writes nothing
/// over them (`.env` as it was then over the user's, a file over their folder).
fn without_protected(store: &Path, workspace: &Path, tree: &str) -> Result<String> {
    let scratch = tempfile::tempdir().map_err(|e| Error::io(std::env::temp_dir(), e))?;
    let index = scratch.path().join("index");
    let exclude = store.join("info").join("exclude");
    let in_scratch = |args: &[&str]| -> Result<Vec<u8>> {
        crate::remote::succeeded(
            git(store, workspace)
                .env("GIT_INDEX_FILE", &index)
                .args(args),
            "git cannot read the checkpoint",
        )
    };
    in_scratch(&["read-tree", tree])?;
    let from = format!("--exclude-from={}", exclude.display());
    let protected = in_scratch(&["ls-files", "-z", "--cached", "--ignored", &from])?;
    if protected.is_empty() {
        return Ok(tree.to_string());
    }
    let out = with_paths(
        store,
        workspace,
        &["rm", "-r", "-q", "--cached"],
        &protected,
        Some(&index),
    )?;
    if !out.status.success() {
        return Err(Error::dependency(
            crate::error::Dependency::Git,
            format!(
                "git cannot leave the ignored paths out of the checkpoint: {}",
                crate::visible::escape_controls(String::from_utf8_lossy(&out.stderr).trim())
            ),
        ));
    }
    let written = in_scratch(&["write-tree"])?;
    Ok(String::from_utf8_lossy(&written).trim().to_string())
}

/// Every `.gitignore` file of the tree into the index, ignored ones too, but none inside a
/// path ignored when a session started: the read-tree after it puts the checkpoint's back and
/// deletes the rest.
fn add_ignore_files(store: &Path, workspace: &Path, warnings: &mut Vec<String>) -> Result<()> {
    let listed = run(
        store,
        workspace,
        &[
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--",
            ":(glob)**/.gitignore",
        ],
        "git cannot list the ignore files",
    )?;
    let kept = std::fs::read(store.join("info").join("yolo-ignored")).unwrap_or_default();
    let protected: Vec<&[u8]> = kept
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let mut paths = Vec::new();
    for path in listed.split(|&b| b == 0).filter(|p| !p.is_empty()) {
        let inside = protected.iter().any(|p| {
            pattern_of(path).is_some_and(|own| {
                own == *p || (own.starts_with(p) && own.get(p.len()) == Some(&b'/'))
            })
        });
        if !inside {
            paths.extend_from_slice(path);
            paths.push(0);
        }
    }
    if paths.is_empty() {
        return Ok(());
    }
    let out = with_paths(
        store,
        workspace,
        &["add", "--force", "--ignore-errors"],
        &paths,
        None,
    )?;
    if !out.status.success() {
        warnings.push(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ignored_path_is_an_anchored_pattern_matching_it_alone() {
        assert_eq!(
            pattern_of(b"node_modules/").as_deref(),
            Some(&b"/node_modules"[..])
        );
        assert_eq!(
            pattern_of(b"a b/!x#[1]*?").as_deref(),
            Some(&br"/a\ b/\!x\#\[1\]\*\?"[..])
        );
        assert_eq!(pattern_of(b"bad\nname"), None);
        assert_eq!(pattern_of(b"caf\xe9").as_deref(), Some(&b"/caf\xe9"[..]));
    }

    struct Repo {
        _dir: tempfile::TempDir,
        ws: PathBuf,
        store: PathBuf,
    }

    impl Repo {
        fn new() -> Repo {
            let dir = tempfile::tempdir().unwrap();
            let ws = dir.path().join("repo");
            std::fs::create_dir(&ws).unwrap();
            checkpoint::run(&ws, &["init", "-q", "-b", "main"]).unwrap();
            let store = open_at(dir.path().join("store.git")).unwrap();
            Repo {
                _dir: dir,
                ws,
                store,
            }
        }
        fn write(&self, path: &str, text: &str) {
            let path = self.ws.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        fn read(&self, path: &str) -> Option<String> {
            std::fs::read_to_string(self.ws.join(path)).ok()
        }
        fn take(&self, start: bool) -> (Checkpoint, Vec<String>) {
            let mut warnings = Vec::new();
            let cp = take_in(&self.store, &self.ws, "s", "t", start, &mut warnings).unwrap();
            (cp, warnings)
        }
        fn restore(&self, cp: &Checkpoint) -> Vec<String> {
            let mut warnings = Vec::new();
            restore_in(&self.store, &self.ws, cp, &mut warnings).unwrap();
            warnings
        }
    }

    /// What git cannot take (an empty nested repository, a name git refuses, a FIFO where a
    /// file was) is said, and the rest is recorded and put back: the agent cannot stop every
    /// checkpoint and rollback with one of them.
    #[test]
    fn what_git_cannot_take_is_said_and_the_rest_is_recorded() {
        let r = Repo::new();
        r.write("a.txt", "one\n");
        r.write("fifo", "a file for now\n");
        let (first, _) = r.take(true);
        checkpoint::run(&r.ws.join("empty"), &["init", "-q"]).ok();
        std::fs::create_dir_all(r.ws.join("empty")).unwrap();
        checkpoint::run(&r.ws.join("empty"), &["init", "-q"]).unwrap();
        r.write("git~1/x", "refused name\n");
        r.write(".GIT/y", "refused name\n");
        std::fs::remove_file(r.ws.join("fifo")).unwrap();
        let fifo =
            std::ffi::CString::new(r.ws.join("fifo").as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        r.write("a.txt", "two\n");
        r.write("b.txt", "new\n");
        let (second, warnings) = r.take(false);
        assert!(!warnings.is_empty(), "nothing said");
        assert_ne!(first.tree, second.tree);
        let warnings = r.restore(&first);
        let _ = warnings;
        assert_eq!(r.read("a.txt").as_deref(), Some("one\n"));
        assert!(r.read("b.txt").is_none());
    }

    /// The agent hides a file of its own behind the ignore rules (an edited `.gitignore`, and
    /// a new `.gitignore` that ignores itself): a rollback reads the tree by the checkpoint's
    /// rules and deletes both, and the folder the user ignored stays.
    #[test]
    fn a_rollback_deletes_what_the_agent_hid_behind_an_ignore_file() {
        let r = Repo::new();
        r.write(".gitignore", "build/\n");
        r.write("src/main.rs", "fn main() {}\n");
        r.write("build/out.o", "the user's\n");
        let (start, _) = r.take(true);
        r.write(".gitignore", "build/\nsrc/evil.js\n");
        r.write("src/evil.js", "agent\n");
        r.write("lib/.gitignore", ".gitignore\nhidden.sh\n");
        r.write("lib/hidden.sh", "agent\n");
        r.write("build/agent.o", "agent, in an ignored folder\n");
        r.restore(&start);
        assert_eq!(r.read(".gitignore").as_deref(), Some("build/\n"));
        for gone in ["src/evil.js", "lib/hidden.sh", "lib/.gitignore"] {
            assert!(r.read(gone).is_none(), "{gone} is still there");
        }
        assert_eq!(r.read("build/out.o").as_deref(), Some("the user's\n"));
        assert_eq!(
            r.read("build/agent.o").as_deref(),
            Some("agent, in an ignored folder\n")
        );
    }

    /// What was ignored when a session started is never deleted nor written over: not when a
    /// checkpoint recorded it while the agent had un-ignored it, nor when the agent put a
    /// file in the place of the ignored folder for a checkpoint to record.
    #[test]
    fn what_was_ignored_at_a_start_is_never_deleted_or_written_over() {
        let r = Repo::new();
        r.write("README", "r\n");
        let (empty, _) = r.take(true);
        // The agent un-ignores nothing yet: node_modules is not ignored and is recorded.
        r.write("node_modules/dep.js", "dep\n");
        let _ = r.take(false);
        // The user ignores it; a new session starts; the agent swaps the user's ignored
        // folder `cache` for a file, and a checkpoint is taken.
        r.write(".gitignore", "node_modules/\ncache/\n");
        r.write("cache/data", "the user's cache\n");
        let _ = r.take(true);
        std::fs::rename(r.ws.join("cache"), r.ws.join("aside")).unwrap();
        r.write("cache", "a file in its place\n");
        let (swapped, _) = r.take(false);
        std::fs::remove_file(r.ws.join("cache")).unwrap();
        std::fs::rename(r.ws.join("aside"), r.ws.join("cache")).unwrap();
        // Back to either: node_modules and the folder stay as they are.
        for cp in [&swapped, &empty] {
            r.restore(cp);
            assert_eq!(r.read("node_modules/dep.js").as_deref(), Some("dep\n"));
            assert_eq!(r.read("cache/data").as_deref(), Some("the user's cache\n"));
        }
    }

    /// A rollback to a checkpoint taken before a path was ignored writes nothing over it:
    /// not the `.env` of then over the user's, not a file of then over their folder.
    #[test]
    fn a_rollback_to_an_older_checkpoint_writes_nothing_over_what_is_ignored_now() {
        let r = Repo::new();
        r.write("README", "r\n");
        r.write(".env", "old\n");
        r.write("cache", "old file\n");
        let (old, _) = r.take(true);
        std::fs::remove_file(r.ws.join("cache")).unwrap();
        r.write("cache/data", "precious\n");
        r.write(".env", "secret\n");
        r.write(".gitignore", ".env\ncache/\n");
        let _ = r.take(true);
        r.restore(&old);
        assert_eq!(r.read(".env").as_deref(), Some("secret\n"));
        assert_eq!(r.read("cache/data").as_deref(), Some("precious\n"));
        assert_eq!(r.read("README").as_deref(), Some("r\n"));
    }

    /// A folder a tool made with a `.gitignore` of `*` (a `.venv`) is recorded with it, so a
    /// rollback to that very checkpoint keeps both; one that ignores itself at the top is
    /// recorded too.
    #[test]
    fn an_ignore_file_that_ignores_itself_is_recorded_and_kept() {
        let r = Repo::new();
        r.write("README", "r\n");
        let (start, _) = r.take(true);
        r.write(".venv/.gitignore", "*\n");
        r.write(".venv/lib.py", "x\n");
        let (cp, _) = r.take(false);
        r.restore(&cp);
        assert_eq!(r.read(".venv/.gitignore").as_deref(), Some("*\n"));
        assert_eq!(r.read(".venv/lib.py").as_deref(), Some("x\n"));
        // Back to the start: the folder the session made goes, with what it hid.
        r.restore(&start);
        assert!(r.read(".venv/lib.py").is_none());
        assert!(r.read(".venv/.gitignore").is_none());
    }
}
