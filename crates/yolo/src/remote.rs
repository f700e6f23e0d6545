//! The remote path's local half: with an engine on another machine (`engine::remote`) the
//! repository cannot be bind-mounted, so it is copied, with its `.git`, into a named volume
//! (`to_volume` rewrites the RunSpec, `pack_into` streams the tar), and the agent's work comes back as
//! a branch of the local repository (`bring_back`). No Docker here: `commands::sync` moves the
//! tars.
//!
//! What comes back from the volume is the agent's, and the agent is root in its container: the
//! tree it returns is hostile input. `bring_back` therefore
//! - unpacks it into a private temporary folder with the `tar` crate (which refuses entries
//!   with `..`, absolute paths and writes through a symlink that leaves the folder), never
//!   over the user's working tree;
//! - throws away everything of the returned `.git` that git would execute or follow: its
//!   `config` (written afresh), `hooks/`, `info/`, `commondir`, `gitdir`, `modules/`,
//!   `worktrees/`, the object alternates, and every symlink inside `.git` (a link there would
//!   make the local git read a host folder); a `.git` that is a file or a link is refused;
//! - takes only the commit its `HEAD` names (never its ref names), fetched with hooks off into
//!   a temporary ref of the local repository;
//! - records the uncommitted files with git plumbing (a temporary `GIT_INDEX_FILE`, `add`,
//!   `write-tree`, `commit-tree`), symlinks stored as links, never followed;
//! - moves one ref only, `refs/heads/yolo/<name>` (`branch_name`), by compare-and-swap, and
//!   only forward: never the checked-out branch, never the working tree, never a branch the
//!   user has added commits to.
//!
//! Written by hand over the `git` program rather than a git library: the user's git is what
//! will read the result, and `git fetch`/`commit-tree` are the stable interface to it.

use crate::error::{Cause, Dependency, Error, Failure, Result};
use crate::run_spec::{Mount, MountKind, RunSpec};
use crate::settings::SyncLimits;
use crate::watched::Baseline;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) use crate::run_spec::{events_volume, workspace_volume};

/// The guard's event files in `tar` (a download of its log folder, read as it comes), each
/// brought up to date in `dir`: the guard only appends, so what the copy holds past the
/// file here (whole lines) is appended to it, and a copy no longer than it changes nothing.
/// Only each regular file directly in the folder whose name is a plain `*.jsonl`; anything
/// else (links, folders, odd names) is skipped: the guard shares its namespaces with the agent.
/// Streamed, never in memory whole; one file at a time per `dir` (a lock beside the files,
/// taken for each file, waited for [`LOCK_WAIT`] at most: the file is then left for the next
/// copy). A copy that does not begin with the file here (a volume made again, a file changed
/// here) is not added to it: said, and left for the user.
pub(crate) fn store_event_files(tar: &mut dyn Read, dir: &Path) -> Result<Vec<String>> {
    let bad = |e: std::io::Error| {
        Error::dependency(
            Dependency::Guard,
            Cause::of("the guard's events from the engine cannot be read", e),
        )
    };
    let mut stored = Vec::new();
    // One copy at a time into `dir` (an attached run, the shipper and `yolo audit` may all
    // collect at once): each reads the size here and adds what follows it, which two at once
    // would both add.
    let lock_path = dir.join(".remote-copy.lock");
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io(&lock_path, e))?;
    let mut archive = tar::Archive::new(tar);
    for entry in archive.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let path = entry.path().map_err(bad)?.into_owned();
        let parts: Vec<_> = path.components().collect();
        let [_, std::path::Component::Normal(name)] = parts.as_slice() else {
            continue;
        };
        let Some(name) = name.to_str().map(str::to_string) else {
            continue;
        };
        let plain = name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !plain || !name.ends_with(".jsonl") || name.starts_with('.') {
            continue;
        }
        let path = dir.join(&name);
        let Some(_held) = lock_within(&lock_file, LOCK_WAIT) else {
            continue;
        };
        let local = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if entry.size() <= local {
            continue;
        }
        // The guard only appends: the first `local` bytes are those here already, and only
        // what follows them is added, in place, so a reader (the shipper, `yolo audit`) sees
        // the file grow and never shrink or change under it.
        if !begins_with_file(&mut entry, &path, local).map_err(bad)? {
            eprintln!(
                "{} the guard's {name} on the engine does not begin with {}: it is not added to (move that file away to take the engine's whole)",
                console::style("warning:").yellow().bold(),
                path.display()
            );
            continue;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        append_whole_lines(&mut entry, &mut file, &path, bad)?;
        stored.push(name);
    }
    Ok(stored)
}

/// How long a copy waits for another to finish with a file.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The lock on `file`, held until the guard is dropped; `None` when another holds it past
/// `wait`.
fn lock_within(file: &std::fs::File, wait: std::time::Duration) -> Option<Unlock<'_>> {
    let until = std::time::Instant::now() + wait;
    loop {
        match file.try_lock() {
            Ok(()) => return Some(Unlock(file)),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(_) => return None,
        }
    }
}

/// Unlocks its file when dropped.
struct Unlock<'a>(&'a std::fs::File);

impl Drop for Unlock<'_> {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Whether the first `len` bytes of `from` are those of the file at `path` (read past in
/// `from` either way).
fn begins_with_file(from: &mut dyn Read, path: &Path, len: u64) -> std::io::Result<bool> {
    let mut here = match std::fs::File::open(path) {
        Ok(file) => file.take(len),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(len == 0),
        Err(e) => return Err(e),
    };
    let mut from = from.take(len);
    let (mut a, mut b) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    let mut same = true;
    loop {
        let n = from.read(&mut a)?;
        if n == 0 {
            return Ok(same);
        }
        if same {
            match here.read_exact(&mut b[..n]) {
                Ok(()) => same = a[..n] == b[..n],
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => same = false,
                Err(e) => return Err(e),
            }
        }
    }
}

/// What `from` holds up to its last newline, appended to `to` as it is read (a line the guard
/// was writing when the copy was taken comes next time, whole).
fn append_whole_lines(
    from: &mut dyn Read,
    to: &mut std::fs::File,
    path: &Path,
    bad: impl Fn(std::io::Error) -> Error,
) -> Result<()> {
    use std::io::Write;
    let mut buf = vec![0u8; 64 * 1024];
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let n = from.read(&mut buf).map_err(&bad)?;
        if n == 0 {
            return Ok(());
        }
        carry.extend_from_slice(&buf[..n]);
        if let Some(end) = carry.iter().rposition(|b| *b == b'\n') {
            to.write_all(&carry[..=end])
                .map_err(|e| Error::io(path, e))?;
            carry.drain(..=end);
        }
    }
}

/// The branch the agent's work comes back to: `yolo/<container name without "yolo-">`, stable
/// per workspace and config.
pub(crate) fn branch_name(container_name: &str) -> String {
    format!(
        "yolo/{}",
        container_name
            .strip_prefix("yolo-")
            .unwrap_or(container_name)
    )
}

/// The spec for a remote engine: the workspace bind becomes the copy's volume at the same
/// place. The protected paths stay as this machine's paths; `Engine::protect_copy` turns them
/// into the same paths in the volume's folder on the engine's machine when the agent is made.
/// Any other host bind is refused, named.
pub(crate) fn to_volume(spec: &mut RunSpec, workspace: &Path, why: &str) -> Result<()> {
    // A remote engine cannot bind this machine's folders at all; this machine's engine can,
    // but not the repository's own (the copy is the agent's; the user's tree is never its).
    if !spec.remote_engine {
        bind_outside(spec, workspace, why)?;
    }
    if let Some(bind) = spec
        .mounts
        .iter()
        .find(|m| m.kind == MountKind::Bind && spec.remote_engine)
    {
        return Err(Error::dependency(Dependency::RemoteEngine, format!(
            "{why}, so the host folder {} cannot be mounted at {} (a bind mount from devcontainer.json, a grant or the extra CA setting); remove it, or use a local engine (YOLO_REMOTE=0 if the engine shares this disk)",
            crate::visible::escape_controls(&bind.source),
            bind.target
        )));
    }
    if spec.compose.is_some() {
        return Err(Error::dependency(Dependency::RemoteEngine, format!(
            "{why}: a Compose project (dockerComposeFile) cannot run on a copy yet (its files and bind mounts are read from the repository on this machine); run the workspace session, without --copy, on this machine's engine"
        )));
    }
    let mount = &spec.workspace_mount;
    if mount.kind != MountKind::Bind {
        // A volume workspace already holds no host file: nothing to copy or bring back.
        return Ok(());
    }
    if Path::new(&mount.source) != workspace {
        return Err(Error::dependency(Dependency::RemoteEngine, format!(
            "{why}: the workspace is copied into a volume, and workspaceMount binds {} instead of the repository {}; remove workspaceMount or run yolo in that folder",
            crate::visible::escape_controls(&mount.source),
            workspace.display()
        )));
    }
    if !workspace.join(".git").is_dir() {
        return Err(not_a_repository(workspace, why));
    }
    // A named session's copy needs no read-only paths: nothing the agent writes there reaches
    // the host's tree until the user checks its branch out (`yolo diff` flags those files).
    if spec.copy.is_some() {
        spec.protected.clear();
    }
    spec.workspace_mount = Mount {
        kind: MountKind::Volume,
        source: workspace_volume(&spec.devcontainer_id),
        target: mount.target.clone(),
        read_only: mount.read_only,
    };
    Ok(())
}

/// A named session on this machine's engine binds host folders, but none that is, is in or
/// holds the repository, as written or as its links lead. The engine is handed the folder the
/// links led to when it was looked at here, so a link changed after the look leads nowhere
/// new; and no bind may be inside another the agent can write, where the agent could put a
/// link on its way before the next session's look.
fn bind_outside(spec: &mut RunSpec, workspace: &Path, why: &str) -> Result<()> {
    let refused = |bind: &Mount, what: &str| {
        Error::dependency(Dependency::WorkspaceCopy, format!(
            "{why}, so {} cannot be mounted at {}: {what}; remove that mount, or run the workspace session (without --copy)",
            crate::visible::escape_controls(&bind.source),
            bind.target
        ))
    };
    let near = |a: &Path, b: &Path| a.starts_with(b) || b.starts_with(a);
    let mut resolved = Vec::new();
    for bind in spec.mounts.iter_mut().filter(|m| m.kind == MountKind::Bind) {
        let written = Path::new(&bind.source).to_path_buf();
        let real = std::fs::canonicalize(&written).unwrap_or_else(|_| written.clone());
        if near(&written, workspace) || near(&real, workspace) {
            return Err(refused(
                bind,
                "it is the repository, inside it or holds it, and the agent of a copy never reaches your working tree",
            ));
        }
        resolved.push((written, real.clone(), bind.read_only));
        bind.source = real.to_string_lossy().into_owned();
    }
    for (i, bind) in spec
        .mounts
        .iter()
        .filter(|m| m.kind == MountKind::Bind)
        .enumerate()
    {
        let (written, real, _) = &resolved[i];
        let under = resolved.iter().enumerate().any(|(j, (w, r, read_only))| {
            let inside = |a: &Path, b: &Path| a != b && a.starts_with(b);
            j != i && !read_only && (inside(written, w) || inside(real, r))
        });
        if under {
            return Err(refused(
                bind,
                "it is inside another folder bound writable into the container, where the agent could change what it leads to",
            ));
        }
    }
    Ok(())
}

fn not_a_repository(workspace: &Path, why: &str) -> Error {
    Error::NotFound(format!(
        "{} is not the root of a git repository (no .git folder): {why}, so yolo copies the repository into a volume and brings the agent's work back as a git branch, which needs git; run `git init` and commit, or start yolo at the repository's root",
        workspace.display()
    ))
}

/// The workspace folder written to `out` as a tar whose entries are relative (the engine
/// unpacks it into the mount point), `.git` included, symlinks stored as links, entry by entry
/// as it is read: never the whole archive in memory. Within `limits`, as `yolo sync` takes the
/// copy back: a working tree file over `max_file` is left out (returned, to be named), and an
/// archive past `max_total` stops the copy with an error.
pub(crate) fn pack_into(
    workspace: &Path,
    out: &mut dyn std::io::Write,
    limits: SyncLimits,
) -> Result<Vec<Skipped>> {
    use crate::fs_at::{Kind, Step};
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    let mut counted = Counted {
        inner: out,
        written: 0,
    };
    let mut tar = tar::Builder::new(&mut counted);
    tar.mode(tar::HeaderMode::Complete);
    let mut skipped = Vec::new();
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |e| Error::io(path, e)
    };
    // The root as the folder it names.
    let root = rustix::fs::stat(workspace).map_err(|e| Error::io(workspace, e.into()))?;
    let mut header = header_of(&root, tar::EntryType::Directory);
    tar.append_data(&mut header, "./", std::io::empty())
        .map_err(io(workspace))?;
    // Below it, folder by folder through descriptors (`fs_at`): an entry is looked at and
    // opened in the folder it was listed in, never through a link, so an agent swapping a
    // folder or file for a link meanwhile (a workspace session of the same repository runs
    // while a copy or checkpoint is made) sends the link, never what it points to; a FIFO is
    // never waited on. What went meanwhile is left out when it is one of git's passing files.
    let mut failed: Option<Error> = None;
    let mut unread: Option<Error> = None;
    crate::fs_at::walk(
        workspace,
        usize::MAX - 1,
        |entry| {
            let dest = Path::new(".").join(entry.rel);
            let shown = || crate::visible::escape_controls(&entry.rel.to_string_lossy());
            let gone = |e: &std::io::Error| is_gone(e, entry.rel);
            let step = (|| -> Result<Step> {
                let st = match rustix::fs::statat(entry.dir, entry.name, AtFlags::SYMLINK_NOFOLLOW)
                {
                    Err(e) if gone(&e.into()) => return Ok(Step::Skip),
                    st => st.map_err(|e| Error::io(&dest, e.into()))?,
                };
                // What it is now, which must be what it was when its folder was listed.
                if Kind::of_mode(st.st_mode) != entry.kind {
                    return Err(Error::io(&dest, replaced(rustix::io::Errno::LOOP.into())));
                }
                let in_git = entry.rel.components().next()
                    == Some(std::path::Component::Normal(".git".as_ref()));
                let size = if entry.kind == Kind::File {
                    st.st_size as u64
                } else {
                    0
                };
                if entry.kind == Kind::File && size > limits.max_file && !in_git {
                    skipped.push(Skipped {
                        path: entry.rel.to_string_lossy().into_owned(),
                        size,
                    });
                    return Ok(Step::Skip);
                }
                if tar.get_ref().written + size + 1024 > limits.max_total {
                    return Err(Error::dependency(Dependency::SyncLimit, format!(
                        "the repository is larger than {} (at {}), the most yolo copies into the remote engine's volume ([workspace] sync_max_total); nothing was copied. Remove what is large from the folder, or raise sync_max_total in your yolo config",
                        size_words(limits.max_total),
                        shown()
                    )));
                }
                match entry.kind {
                    Kind::Dir => {
                        let mut header = header_of(&st, tar::EntryType::Directory);
                        tar.append_data(&mut header, &dest, std::io::empty())
                            .map_err(io(&dest))?;
                    }
                    Kind::File => {
                        // Opened where it was listed, not through a link, not waiting on a
                        // FIFO put in its place; it must still be the file looked at.
                        let fd = match rustix::fs::openat(
                            entry.dir,
                            entry.name,
                            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                            Mode::empty(),
                        ) {
                            Err(e) if gone(&e.into()) => return Ok(Step::Skip),
                            fd => fd.map_err(|e| Error::io(&dest, replaced(e.into())))?,
                        };
                        let now = rustix::fs::fstat(&fd).map_err(|e| Error::io(&dest, e.into()))?;
                        if FileType::from_raw_mode(now.st_mode) != FileType::RegularFile
                            || (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino)
                        {
                            return Err(Error::io(
                                &dest,
                                std::io::Error::other(
                                    "it was replaced while the copy was read; make it again",
                                ),
                            ));
                        }
                        // The size checked above, and exactly that many bytes after the header
                        // (a file that grows meanwhile, a live log, is cut there; one that
                        // shrinks is padded with zeros), so the stream stays whole and within
                        // the limits.
                        use std::io::Read;
                        let file = std::fs::File::from(fd);
                        let mut header = header_of(&st, tar::EntryType::Regular);
                        header.set_size(size);
                        let exact = file.take(size).chain(std::io::repeat(0)).take(size);
                        tar.append_data(&mut header, &dest, exact)
                            .map_err(io(&dest))?;
                    }
                    Kind::Symlink => {
                        let target = match crate::fs_at::read_link_at(entry.dir, entry.name) {
                            Err(e) if gone(&e) => return Ok(Step::Skip),
                            // `EINVAL`: no longer a link.
                            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                                return Err(Error::io(
                                    &dest,
                                    replaced(rustix::io::Errno::LOOP.into()),
                                ));
                            }
                            target => target.map_err(io(&dest))?,
                        };
                        let mut header = header_of(&st, tar::EntryType::Symlink);
                        tar.append_link(&mut header, &dest, &target)
                            .map_err(io(&dest))?;
                    }
                    Kind::Other => {
                        // A FIFO or device: its header only. A socket means nothing in a
                        // copy and has no tar form: left out.
                        let kind = match FileType::from_raw_mode(st.st_mode) {
                            FileType::Fifo => tar::EntryType::Fifo,
                            FileType::CharacterDevice => tar::EntryType::Char,
                            FileType::BlockDevice => tar::EntryType::Block,
                            _ => return Ok(Step::Skip),
                        };
                        let mut header = header_of(&st, kind);
                        let dev = st.st_rdev;
                        header
                            .set_device_major(rustix::fs::major(dev))
                            .and_then(|()| header.set_device_minor(rustix::fs::minor(dev)))
                            .map_err(io(&dest))?;
                        tar.append_data(&mut header, &dest, std::io::empty())
                            .map_err(io(&dest))?;
                    }
                }
                Ok(Step::Enter)
            })();
            step.unwrap_or_else(|e| {
                failed = Some(e);
                Step::Stop
            })
        },
        |rel, e| {
            if unread.is_none() && !is_gone(&e, rel) {
                unread = Some(Error::io(workspace.join(rel), replaced(e)));
            }
        },
    );
    if let Some(e) = failed.or(unread) {
        return Err(e);
    }
    tar.finish().map_err(io(workspace))?;
    Ok(skipped)
}

/// A tar header for what `st` describes, as `HeaderMode::Complete` writes one (mode, owner,
/// time), its size 0.
fn header_of(st: &rustix::fs::Stat, kind: tar::EntryType) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(st.st_mode & 0o7777);
    header.set_uid(st.st_uid as u64);
    header.set_gid(st.st_gid as u64);
    header.set_mtime(st.st_mtime.max(0) as u64);
    header.set_size(0);
    header
}

/// `ELOOP` or `ENOTDIR` from an open that does not follow links means something else (a
/// link) was put where a file or folder was.
fn replaced(e: std::io::Error) -> std::io::Error {
    let changed = [rustix::io::Errno::LOOP, rustix::io::Errno::NOTDIR]
        .map(|n| Some(n.raw_os_error()))
        .contains(&e.raw_os_error());
    if changed {
        std::io::Error::other("it was replaced while the copy was read; make it again")
    } else {
        e
    }
}

/// A file or folder that went between its listing and its reading and is one git makes for a
/// moment (a `.lock`, a `tmp_` pack, an `incoming-` folder): left out. Anything else that goes
/// (a pack a `git gc` removed) still fails the copy, which the next `up` makes again.
fn is_gone(e: &std::io::Error, path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    e.kind() == std::io::ErrorKind::NotFound
        && (name.ends_with(".lock") || name.starts_with("tmp_") || name.starts_with("incoming-"))
}

/// A writer counting what goes through it.
struct Counted<'a> {
    inner: &'a mut dyn std::io::Write,
    written: u64,
}

impl std::io::Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// What `bring_back` did to the branch.
#[derive(Debug, PartialEq)]
pub(crate) enum Brought {
    /// The branch moved to this commit.
    Updated { branch: String, commit: String },
    /// The branch already held everything.
    UpToDate { branch: String },
}

/// A file of the copy's working tree left out: larger than `[workspace] sync_max_file`.
#[derive(Debug, PartialEq)]
pub(crate) struct Skipped {
    /// Relative to the repository.
    pub(crate) path: String,
    pub(crate) size: u64,
}

/// What `bring_back` brought, left out and saw.
#[derive(Debug)]
pub(crate) struct Returned {
    pub(crate) brought: Brought,
    /// Left out, too large: the branch keeps what its commit has at those paths.
    pub(crate) skipped: Vec<Skipped>,
    /// The files the host runs (`[workspace] watch`) as the branch's tree now has them, for
    /// `commands::watched` to compare with what the copy held before.
    pub(crate) watched: Baseline,
}

/// The agent's work in `tar` (a download of the volume's mount point, entries under one
/// top folder, read as it comes) as `refs/heads/<branch>` of the repository at `repo`, within
/// `limits`; the `watch` globs are looked at in what comes back. See the module doc.
pub(crate) fn bring_back(
    repo: &Path,
    tar: &mut dyn Read,
    branch: &str,
    limits: SyncLimits,
    watch: &[String],
) -> Result<Returned> {
    check_branch(repo, branch)?;
    let Made {
        _temp,
        tree,
        head,
        written,
        skipped,
    } = make_tree(repo, tar, limits, "sync", Layout::Folder)?;
    let mut watched = Baseline::scan(&tree, watch);
    keep_on_branch(repo, &written, &mut watched)?;
    let brought = advance(repo, branch, &head, &written)?;
    Ok(Returned {
        brought,
        skipped,
        watched,
    })
}

/// The copy in `tar` unpacked and made into the local repository's objects.
struct Made {
    /// Holds the unpacked copy until dropped.
    _temp: tempfile::TempDir,
    /// The copy's working tree, unpacked.
    tree: PathBuf,
    /// The copy's `HEAD`, fetched.
    head: String,
    /// The tree of its working tree (tracked and untracked, not ignored).
    written: String,
    skipped: Vec<Skipped>,
}

/// Unpack `tar` within `limits`, strip the copy's git config, fetch its `HEAD` into the local
/// repository (through a temporary ref named for `what` and this process) and make its working
/// tree a tree object there.
fn make_tree(
    repo: &Path,
    tar: &mut dyn Read,
    limits: SyncLimits,
    what: &str,
    layout: Layout,
) -> Result<Made> {
    let temp = tempfile::Builder::new()
        .prefix(&format!(".yolo-{what}-"))
        .tempdir()
        .map_err(|e| Error::io(std::env::temp_dir(), e))?;
    let Unpacked { top: tree, skipped } = unpack_as(tar, temp.path(), limits, layout)?;
    let git_dir = tree.join(".git");
    sanitize_git_dir(&git_dir)?;
    // `pack_into`'s own archive is of this repository: its `HEAD` is here already (nothing to
    // fetch, which costs more than the rest when many sessions start at once).
    let known = match layout {
        Layout::Entries => head_already_here(repo, &git_dir),
        Layout::Folder => None,
    };
    let head = match known {
        Some(head) => head,
        None => {
            let incoming = format!("refs/yolo-{what}/{}", std::process::id());
            let head = fetch_head(repo, &git_dir, &incoming);
            let _ = git(repo).args(["update-ref", "-d", &incoming]).output();
            head?
        }
    };
    let written = worktree_tree(repo, &tree, &head, &skipped)?;
    Ok(Made {
        _temp: temp,
        tree,
        head,
        written,
        skipped,
    })
}

/// What [`bring_back`] would write, without moving any branch: the tree of the agent's work
/// and the commit to compare it with (where the agent's history meets your `HEAD`).
#[derive(Debug)]
pub(crate) struct Preview {
    pub(crate) base: String,
    /// The copy's `HEAD` (the agent's last commit).
    pub(crate) head: String,
    pub(crate) tree: String,
    pub(crate) skipped: Vec<Skipped>,
}

/// The agent's work in `tar`, as [`bring_back`] reads it (the same limits, the copy's git
/// config stripped, hooks off), made into a tree of the repository at `repo` and nothing
/// else: no ref is left (its objects wait for git's gc).
pub(crate) fn preview(repo: &Path, tar: &mut dyn Read, limits: SyncLimits) -> Result<Preview> {
    preview_as(repo, tar, limits, Layout::Folder)
}

/// How an archive of the copy lays its entries out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Layout {
    /// Below one folder, the copy's own (the engine's archive of a folder).
    Folder,
    /// Relative to the copy's root (`pack_into`'s, as the copy is made).
    Entries,
}

/// [`preview`] of an archive laid out as `layout` says.
pub(crate) fn preview_as(
    repo: &Path,
    tar: &mut dyn Read,
    limits: SyncLimits,
    layout: Layout,
) -> Result<Preview> {
    let Made {
        head,
        written,
        skipped,
        ..
    } = make_tree(repo, tar, limits, "diff", layout)?;
    let base = git(repo)
        .args(["merge-base", "HEAD", &head])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| head.clone());
    Ok(Preview {
        base,
        head,
        tree: written,
        skipped,
    })
}

/// `git diff` of the local repository between `base` and `tree` with `args` (`--stat`,
/// `--name-only -z`...): its output, as bytes (the agent wrote the files; the caller escapes).
pub(crate) fn diff_of(repo: &Path, base: &str, tree: &str, args: &[&str]) -> Result<Vec<u8>> {
    let mut cmd = git(repo);
    cmd.args([
        "-c",
        "diff.external=",
        "-c",
        "core.pager=cat",
        "diff",
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
    ])
    .args(args)
    .args([base, tree, "--"]);
    succeeded(&mut cmd, "git diff failed")
}

/// What `cmd` (a git command) printed; when it fails, an error saying `what`, with git's own
/// words (escaped: they may quote the agent's file names).
pub(crate) fn succeeded(cmd: &mut Command, what: &str) -> Result<Vec<u8>> {
    let out = cmd.output().map_err(git_missing)?;
    if !out.status.success() {
        return Err(Error::dependency(
            Dependency::Git,
            format!(
                "{what}: {}",
                crate::visible::escape_controls(String::from_utf8_lossy(&out.stderr).trim())
            ),
        ));
    }
    Ok(out.stdout)
}

/// Only the watched files the tree `written` holds: an ignored file of the copy (`.env`), or
/// anything of its `.git`, does not reach the branch.
fn keep_on_branch(repo: &Path, written: &str, watched: &mut Baseline) -> Result<()> {
    if watched.files.is_empty() {
        return Ok(());
    }
    let listed = succeeded(
        git(repo)
            .env("GIT_LITERAL_PATHSPECS", "1")
            .args([
                "ls-tree",
                "-r",
                "-z",
                "--name-only",
                "--full-tree",
                written,
                "--",
            ])
            .args(watched.files.keys()),
        "git cannot list the files of the agent's work",
    )?;
    let on_branch: std::collections::HashSet<&[u8]> = listed
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .collect();
    watched
        .files
        .retain(|path, _| on_branch.contains(path.as_bytes()));
    Ok(())
}

/// The watched files of the workspace at `root` as a copy made now holds them: only those a
/// branch made of the working tree would hold (tracked, or untracked and not ignored), as the
/// copy's record after each sync, so a file the branch then lacks is one it deletes.
pub(crate) fn copy_baseline(root: &Path, patterns: &[String]) -> Result<Baseline> {
    let mut scan = Baseline::scan(root, patterns);
    let on_branch = on_a_branch(root, scan.files.keys())?;
    scan.files.retain(|path, _| on_branch.contains(path));
    Ok(scan)
}

/// Which of `paths` (relative to the repository at `repo`) a branch made of its working tree
/// would hold: tracked, or untracked and not ignored (what `worktree_tree` adds).
pub(crate) fn on_a_branch<'a>(
    repo: &Path,
    paths: impl Iterator<Item = &'a String>,
) -> Result<std::collections::HashSet<String>> {
    let wanted: std::collections::HashSet<&[u8]> = paths.map(|p| p.as_bytes()).collect();
    if wanted.is_empty() {
        return Ok(Default::default());
    }
    // The whole list, filtered here: the paths can be many and long (past PATH_MAX), more than
    // a command line takes.
    let out = git(repo)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output()
        .map_err(git_missing)?;
    if !out.status.success() {
        return Err(Error::dependency(
            Dependency::Git,
            format!(
                "git cannot list the files of {}: {}",
                repo.display(),
                crate::visible::escape_controls(String::from_utf8_lossy(&out.stderr).trim())
            ),
        ));
    }
    Ok(out
        .stdout
        .split(|&b| b == 0)
        .filter(|p| wanted.contains(p))
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect())
}

/// The branch's name is yolo's own, but checked as git would.
fn check_branch(repo: &Path, branch: &str) -> Result<()> {
    let ok = git(repo)
        .args(["check-ref-format", "--branch", branch])
        .output()
        .map_err(git_missing)?
        .status
        .success();
    if !ok || branch.contains("..") {
        return Err(Error::failed(
            Failure::InvalidName,
            format!("\"{branch}\" is not a valid branch name"),
        ));
    }
    if !repo.join(".git").exists() {
        return Err(not_a_repository(repo, "the engine is remote"));
    }
    Ok(())
}

/// What `unpack` made: the one top folder Docker's archive puts the mount point's content in,
/// and the files it left out.
struct Unpacked {
    top: PathBuf,
    skipped: Vec<Skipped>,
}

/// The archive read as it comes, at most `max` bytes: past it reading fails (and says so).
struct Capped<'a> {
    inner: &'a mut dyn Read,
    read: u64,
    max: u64,
    over: bool,
}

impl Read for Capped<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.read >= self.max {
            self.over = true;
            return Err(std::io::Error::other("over the size limit"));
        }
        let room = usize::try_from(self.max - self.read).unwrap_or(usize::MAX);
        let n = buf.len().min(room);
        let got = self.inner.read(&mut buf[..n])?;
        self.read += got as u64;
        Ok(got)
    }
}

/// Unpack `tar` into `dest` entry by entry as it is read, within `limits`: a working tree
/// file over `max_file` is left out (its content read past, never held), the archive read
/// past `max_total` stops everything.
#[cfg(test)]
fn unpack(tar: &mut dyn Read, dest: &Path, limits: SyncLimits) -> Result<Unpacked> {
    unpack_as(tar, dest, limits, Layout::Folder)
}

/// [`unpack`] of an archive laid out as `layout` says (entries relative to the copy's root go
/// below a folder of their own, `copy`).
fn unpack_as(
    tar: &mut dyn Read,
    dest: &Path,
    limits: SyncLimits,
    layout: Layout,
) -> Result<Unpacked> {
    let bad = |e: std::io::Error| {
        Error::dependency(
            Dependency::WorkspaceCopy,
            Cause::of(
                "the copy of the workspace the engine sent back cannot be unpacked safely",
                e,
            ),
        )
    };
    let mut capped = Capped {
        inner: tar,
        read: 0,
        max: limits.max_total,
        over: false,
    };
    let mut current = String::new();
    let mut skipped = Vec::new();
    let root = match layout {
        Layout::Folder => dest.to_path_buf(),
        Layout::Entries => {
            let root = dest.join("copy");
            std::fs::create_dir(&root).map_err(|e| Error::io(&root, e))?;
            root
        }
    };
    let unpacked = unpack_entries(
        &mut capped,
        &root,
        layout,
        limits,
        &mut current,
        &mut skipped,
    );
    if capped.over {
        return Err(Error::dependency(Dependency::SyncLimit, format!(
            "the copy of the workspace is larger than {} (at {}), the most `yolo sync` reads of it ([workspace] sync_max_total); nothing was brought back. Remove what is large from the copy (`yolo exec -- du -ah . | sort -h | tail`), or raise sync_max_total in your yolo config",
            size_words(limits.max_total),
            crate::visible::escape_controls(&current)
        )));
    }
    unpacked.map_err(bad)?;
    // A folder the agent made read-only must not keep the temporary copy from going.
    writable(dest)?;
    let mut tops = std::fs::read_dir(dest)
        .map_err(|e| Error::io(dest, e))?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()));
    match (tops.next(), tops.next()) {
        (Some(top), None) => Ok(Unpacked {
            top: top.path(),
            skipped,
        }),
        _ => Err(bad(std::io::Error::other("not one folder"))),
    }
}

/// The loop of `unpack`; `current` names the entry being read, for the error.
fn unpack_entries(
    tar: &mut dyn Read,
    dest: &Path,
    layout: Layout,
    limits: SyncLimits,
    current: &mut String,
    skipped: &mut Vec<Skipped>,
) -> std::io::Result<()> {
    let mut archive = tar::Archive::new(tar);
    archive.set_preserve_permissions(false);
    archive.set_unpack_xattrs(false);
    archive.set_preserve_mtime(false);
    archive.set_overwrite(true);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        // Below the top folder, as the repository names it.
        let rel: PathBuf = match layout {
            Layout::Folder => path.components().skip(1).collect(),
            // `./name`, as `pack_into` writes it.
            Layout::Entries => path
                .components()
                .skip_while(|c| *c == std::path::Component::CurDir)
                .collect(),
        };
        *current = rel.to_string_lossy().into_owned();
        let header = entry.header();
        let kind = header.entry_type();
        // A sparse entry's size in the archive is its data; the file it makes is this long.
        let size = header
            .as_gnu()
            .filter(|_| kind.is_gnu_sparse())
            .and_then(|gnu| gnu.real_size().ok())
            .unwrap_or(0)
            .max(entry.size());
        let in_git = rel.components().next() == Some(std::path::Component::Normal(".git".as_ref()));
        if (kind.is_file() || kind.is_gnu_sparse()) && size > limits.max_file && !in_git {
            skipped.push(Skipped {
                path: current.clone(),
                size,
            });
            // The next entry reads past its content.
            continue;
        }
        // `unpack_in` skips `..` and absolute paths and fails on a path through a link out of
        // `dest` (which a real folder's archive cannot hold: the engine forged it).
        entry.unpack_in(dest)?;
        if kind.is_dir() {
            // Made with the archive's mode, maybe read-only: opened for the files to come
            // (not through a link: a folder the entry found in place as a link is left alone).
            let made = dest.join(
                path.components()
                    .filter(|c| matches!(c, std::path::Component::Normal(_)))
                    .collect::<PathBuf>(),
            );
            if std::fs::symlink_metadata(&made).is_ok_and(|m| m.is_dir()) {
                owner_rwx(&made)?;
            }
        }
    }
    Ok(())
}

/// `path`'s mode with the owner's read, write and search bits added.
fn owner_rwx(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::symlink_metadata(path)?.permissions().mode() | 0o700;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// A size for people: "100 MiB", "4 GiB", "1536 KiB".
pub(crate) fn size_words(bytes: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    if bytes >= 1 << 20 {
        return format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64);
    }
    format!("{bytes} bytes")
}

/// Every folder under `dir` (links not followed) writable and searchable by us.
fn writable(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::symlink_metadata(dir).map_err(|e| Error::io(dir, e))?;
        let mode = meta.permissions().mode() | 0o700;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
            .map_err(|e| Error::io(dir, e))?;
    }
    for entry in std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .flatten()
    {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            writable(&entry.path())?;
        }
    }
    Ok(())
}

/// Remove what git would run or follow from the returned `.git`, and give it a config of ours.
fn sanitize_git_dir(git_dir: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(git_dir).map_err(|_| {
        Error::dependency(
            Dependency::WorkspaceCopy,
            "the workspace copy has no .git folder any more (the agent removed it); nothing to bring back",
        )
    })?;
    if !meta.is_dir() {
        return Err(Error::dependency(
            Dependency::WorkspaceCopy,
            "the workspace copy's .git is not a folder (a file or a link, made in the container); yolo does not follow it",
        ));
    }
    for name in [
        "config",
        "hooks",
        "info",
        "commondir",
        "gitdir",
        "modules",
        "worktrees",
        "objects/info",
        "shallow",
        "index",
    ] {
        let path = git_dir.join(name);
        let _ = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
            Ok(_) => std::fs::remove_file(&path),
            Err(_) => Ok(()),
        };
    }
    remove_links(git_dir)?;
    let config = git_dir.join("config");
    std::fs::write(
        &config,
        "[core]\n\trepositoryformatversion = 0\n\tbare = true\n",
    )
    .map_err(|e| Error::io(&config, e))
}

/// Every symlink under `dir` removed (none followed).
fn remove_links(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .flatten()
    {
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| Error::io(&path, e))?;
        if kind.is_symlink() {
            std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
        } else if kind.is_dir() {
            remove_links(&path)?;
        }
    }
    Ok(())
}

/// The commit `HEAD` of the (sanitized) `git_dir` names, when `repo` has it already.
fn head_already_here(repo: &Path, git_dir: &Path) -> Option<String> {
    let mut resolve = git(repo);
    resolve
        .arg(format!("--git-dir={}", git_dir.display()))
        .args(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]);
    let out = resolve.output().ok().filter(|o| o.status.success())?;
    let head = String::from_utf8_lossy(&out.stdout).trim().to_string();
    rev_parse(repo, &format!("{head}^{{commit}}"))
        .ok()
        .filter(|here| *here == head)
}

/// The commit the copy's `HEAD` names, fetched into `incoming` of the local repository.
fn fetch_head(repo: &Path, git_dir: &Path, incoming: &str) -> Result<String> {
    let spec = format!("+HEAD:{incoming}");
    let fetched = git(repo)
        .args(["fetch", "--quiet", "--no-tags", "--no-recurse-submodules"])
        .args(["--no-write-fetch-head", "--no-auto-gc"])
        .arg(git_dir)
        .arg(&spec)
        .output()
        .map_err(git_missing)?;
    if !fetched.status.success() {
        return Err(Error::dependency(
            Dependency::Git,
            format!(
                "the agent's commits could not be read from the copy of the repository: {}",
                String::from_utf8_lossy(&fetched.stderr).trim()
            ),
        ));
    }
    rev_parse(repo, &format!("{incoming}^{{commit}}"))
}

/// The tree of the copy's working tree (its uncommitted files included), staged on `head`'s;
/// the `skipped` paths keep what `head` has (they are not in the unpacked copy, and must not
/// read as deleted).
fn worktree_tree(repo: &Path, tree: &Path, head: &str, skipped: &[Skipped]) -> Result<String> {
    let index_dir = tempfile::tempdir().map_err(|e| Error::io(std::env::temp_dir(), e))?;
    let index = index_dir.path().join("index");
    let run = |args: &[&str]| -> Result<String> {
        let out = git(repo)
            .env("GIT_INDEX_FILE", &index)
            .env("GIT_WORK_TREE", tree)
            .args(args)
            .output()
            .map_err(git_missing)?;
        if !out.status.success() {
            return Err(Error::dependency(
                Dependency::Git,
                format!(
                    "recording the agent's uncommitted files failed (git {}): {}",
                    args.first().unwrap_or(&""),
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    run(&["read-tree", head])?;
    let specs = index_dir.path().join("pathspecs");
    let mut list = b".\0".to_vec();
    for s in skipped {
        list.extend_from_slice(format!(":(exclude,literal){}\0", s.path).as_bytes());
    }
    std::fs::write(&specs, list).map_err(|e| Error::io(&specs, e))?;
    let from_file = format!("--pathspec-from-file={}", specs.display());
    run(&["add", "--all", &from_file, "--pathspec-file-nul"])?;
    run(&["write-tree"])
}

/// The subject of the commit yolo records the uncommitted files in.
const SNAPSHOT_SUBJECT: &str = "yolo: the agent's uncommitted changes";

/// Move `refs/heads/<branch>` forward to hold `head` (the copy's HEAD) and the working tree
/// `tree`: a commit recording the uncommitted files goes on top (on the branch's own earlier
/// record, when the agent has made no commit since). Never the checked-out branch, never over
/// a commit that is not the agent's or yolo's record.
fn advance(repo: &Path, branch: &str, head: &str, tree: &str) -> Result<Brought> {
    let full = format!("refs/heads/{branch}");
    let current = rev_parse(repo, &format!("{full}^{{commit}}")).ok();
    let checked_out = git(repo)
        .args(["symbolic-ref", "-q", "HEAD"])
        .output()
        .map_err(git_missing)?;
    if String::from_utf8_lossy(&checked_out.stdout).trim() == full {
        return Err(Error::Conflict(format!(
            "{branch} is checked out in {}; yolo sync would change the files under you. Switch to another branch (`git switch -`), then run `yolo sync` again",
            repo.display()
        )));
    }
    let tree_of = |commit: &str| rev_parse(repo, &format!("{commit}^{{tree}}"));
    let up_to_date = || Brought::UpToDate {
        branch: branch.into(),
    };
    // What the branch holds beyond the agent's HEAD must be yolo's own records, else it is
    // the user's work.
    let parents: Vec<String> = match &current {
        None => vec![head.to_string()],
        Some(tip) => {
            if !only_snapshots(repo, head, tip)? {
                return Err(Error::Conflict(format!(
                    "{branch} has commits the container's copy does not (made here since the last sync, or the agent rewrote its history); yolo will not overwrite them. Rename {branch} (`git branch -m {branch} {branch}-mine`), then run `yolo sync` again"
                )));
            }
            if is_ancestor(repo, head, tip)? {
                if tree_of(tip)? == tree {
                    return Ok(up_to_date());
                }
                vec![tip.clone()]
            } else {
                // New agent commits: the record goes on them, the earlier record kept as a
                // second parent so the branch only moves forward.
                vec![head.to_string(), tip.clone()]
            }
        }
    };
    let commit = if parents.len() == 1 && parents[0] == head && tree_of(head)? == tree {
        head.to_string()
    } else {
        let mut args = vec!["commit-tree".to_string(), tree.to_string()];
        for p in &parents {
            args.push("-p".into());
            args.push(p.clone());
        }
        args.push("-m".into());
        args.push(format!(
            "{SNAPSHOT_SUBJECT}\n\nRecorded by `yolo sync` from the container's working tree."
        ));
        let out = git(repo).args(&args).output().map_err(git_missing)?;
        if !out.status.success() {
            return Err(Error::dependency(
                Dependency::Git,
                format!(
                    "recording the agent's uncommitted files failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            ));
        }
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    if current.as_deref() == Some(commit.as_str()) {
        return Ok(up_to_date());
    }
    let old = current.unwrap_or_else(|| "0".repeat(commit.len()));
    let out = git(repo)
        .args(["update-ref", "-m", "yolo sync", &full, &commit, &old])
        .output()
        .map_err(git_missing)?;
    if !out.status.success() {
        return Err(Error::Conflict(format!(
            "{branch} changed while yolo sync ran: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(Brought::Updated {
        branch: branch.into(),
        commit,
    })
}

/// Whether every commit of `tip` not in `head` is a record yolo made.
fn only_snapshots(repo: &Path, head: &str, tip: &str) -> Result<bool> {
    let out = git(repo)
        .args(["log", "--format=%ae%x09%s", &format!("{head}..{tip}")])
        .output()
        .map_err(git_missing)?;
    if !out.status.success() {
        return Err(Error::dependency(
            Dependency::Git,
            format!(
                "git cannot compare the branch with the agent's work: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .all(|l| l == format!("yolo@localhost\t{SNAPSHOT_SUBJECT}")))
}

fn is_ancestor(repo: &Path, ancestor: &str, of: &str) -> Result<bool> {
    Ok(git(repo)
        .args(["merge-base", "--is-ancestor", ancestor, of])
        .output()
        .map_err(git_missing)?
        .status
        .success())
}

fn rev_parse(repo: &Path, what: &str) -> Result<String> {
    let out = git(repo)
        .args(["rev-parse", "--verify", "--quiet", what])
        .output()
        .map_err(git_missing)?;
    if !out.status.success() {
        return Err(Error::dependency(
            Dependency::Git,
            format!("git cannot find {what}"),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `git` on the local repository, with nothing of the copy's able to run: hooks off, no
/// fsmonitor, no submodule recursion, a fixed identity for the commit yolo records.
pub(crate) fn git(repo: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(repo)
        .args(["-c", "core.hooksPath=/dev/null"])
        .args(["-c", "core.fsmonitor=false"])
        .args(["-c", "submodule.recurse=false"])
        .args(["-c", "protocol.file.allow=always"])
        // No `git gc` or maintenance started by yolo's calls: other sessions copy this `.git`.
        .args(["-c", "gc.auto=0", "-c", "maintenance.auto=false"])
        .env("GIT_AUTHOR_NAME", "yolo")
        .env("GIT_AUTHOR_EMAIL", "yolo@localhost")
        .env("GIT_COMMITTER_NAME", "yolo")
        .env("GIT_COMMITTER_EMAIL", "yolo@localhost")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE");
    cmd
}

pub(crate) fn git_missing(e: std::io::Error) -> Error {
    Error::dependency(
        Dependency::Git,
        Cause::around(
            "git could not be run (",
            e,
            "): with a remote engine yolo brings the agent's work back as a git branch, which needs git on this machine",
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tar entry named `name` as given, bypassing the builder's checks (a hostile engine's).
    fn raw(
        tar: &mut tar::Builder<Vec<u8>>,
        name: &str,
        kind: tar::EntryType,
        link: &str,
        data: &[u8],
    ) {
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        header.set_entry_type(kind);
        header.set_size(data.len() as u64);
        header.set_mode(if kind == tar::EntryType::Directory {
            0o555
        } else {
            0o644
        });
        header.set_cksum();
        tar.append(&header, data).unwrap();
    }

    const LIMITS: SyncLimits = SyncLimits {
        max_file: 1 << 20,
        max_total: 8 << 20,
    };

    /// A reader of `size` zero bytes that never holds them: an endless sparse file's archive.
    struct Zeros(u64);

    impl Read for Zeros {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(usize::try_from(self.0).unwrap_or(usize::MAX));
            buf[..n].fill(0);
            self.0 -= n as u64;
            Ok(n)
        }
    }

    /// The archive of a top folder holding `small` and a `big` file of `size` zero bytes, as a
    /// reader that makes the big file's content as it is read.
    fn with_big_file(size: u64, big: &str) -> impl Read {
        let mut head = tar::Builder::new(Vec::new());
        raw(&mut head, "repo/", tar::EntryType::Directory, "", b"");
        raw(
            &mut head,
            "repo/small",
            tar::EntryType::Regular,
            "",
            b"kept",
        );
        let mut header = tar::Header::new_gnu();
        header.set_path(format!("repo/{big}")).unwrap();
        header.set_size(size);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        let mut start = head.into_inner().unwrap();
        // `into_inner` wrote the end blocks: the big entry goes in their place.
        start.truncate(start.len() - 1024);
        start.extend_from_slice(header.as_bytes());
        let pad = (512 - size % 512) % 512;
        let mut end = tar::Builder::new(Vec::new());
        raw(
            &mut end,
            "repo/after",
            tar::EntryType::Regular,
            "",
            b"after",
        );
        let end = end.into_inner().unwrap();
        std::io::Cursor::new(start)
            .chain(Zeros(size + pad))
            .chain(std::io::Cursor::new(end))
    }

    #[test]
    fn a_huge_file_is_read_past_and_named_and_a_huge_copy_stops_the_sync() {
        // 2 GiB of zeros, streamed: were it held, this test would need 2 GiB.
        let root = tempfile::tempdir().unwrap();
        let limits = SyncLimits {
            max_file: 1 << 20,
            max_total: 4 << 30,
        };
        let mut tar = with_big_file(2 << 30, "sparse.img");
        let unpacked = unpack(&mut tar, root.path(), limits).unwrap();
        assert_eq!(
            unpacked.skipped,
            [Skipped {
                path: "sparse.img".into(),
                size: 2 << 30
            }]
        );
        assert!(!unpacked.top.join("sparse.img").exists());
        assert_eq!(
            std::fs::read_to_string(unpacked.top.join("small")).unwrap(),
            "kept"
        );
        assert_eq!(
            std::fs::read_to_string(unpacked.top.join("after")).unwrap(),
            "after"
        );
        // Files of .git count in the total only (leaving one out would lose commits).
        let git = tempfile::tempdir().unwrap();
        let mut tar = with_big_file(2 << 20, ".git/objects/pack/p.pack");
        let unpacked = unpack(&mut tar, git.path(), limits).unwrap();
        assert!(unpacked.skipped.is_empty());
        assert!(unpacked.top.join(".git/objects/pack/p.pack").exists());
        // Past the total: stopped, named.
        let over = tempfile::tempdir().unwrap();
        let limits = SyncLimits {
            max_file: 1 << 20,
            max_total: 64 << 20,
        };
        let mut tar = with_big_file(1 << 30, "sparse.img");
        let error = unpack(&mut tar, over.path(), limits).err().unwrap();
        assert!(
            matches!(
                error,
                Error::Dependency {
                    on: Dependency::SyncLimit,
                    ..
                }
            ),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains("larger than 64 MiB (at sparse.img)"),
            "{message}"
        );
        assert!(message.contains("sync_max_total"), "{message}");
    }

    /// The first copy streams: a sparse file over `max_file` is left out by name (never read),
    /// one under it but over `max_total` stops the copy, and what is written is a tar of the
    /// rest, `.git` included.
    #[test]
    fn the_first_copy_leaves_out_what_is_too_large() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join(".git/objects")).unwrap();
        std::fs::write(ws.join(".git/objects/pack"), vec![7u8; 3 << 20]).unwrap();
        std::fs::write(ws.join("Makefile"), "all:\n").unwrap();
        std::os::unix::fs::symlink("Makefile", ws.join("link")).unwrap();
        std::fs::File::create(ws.join("disk.img"))
            .unwrap()
            .set_len(2 << 30)
            .unwrap();
        let mut out = Vec::new();
        let skipped = pack_into(ws, &mut out, LIMITS).unwrap();
        assert_eq!(
            skipped,
            [Skipped {
                path: "disk.img".into(),
                size: 2 << 30
            }]
        );
        let mut names = Vec::new();
        for entry in tar::Archive::new(&out[..]).entries().unwrap() {
            let entry = entry.unwrap();
            names.push(entry.path().unwrap().to_string_lossy().into_owned());
        }
        for name in [".git/objects/pack", "Makefile", "link"] {
            assert!(names.iter().any(|n| n == name), "{name}: {names:?}");
        }
        // A `.git` file past `max_file` is never left out; past the total, nothing goes.
        let limits = SyncLimits {
            max_file: 1 << 20,
            max_total: 2 << 20,
        };
        let message = pack_into(ws, &mut std::io::sink(), limits)
            .err()
            .unwrap()
            .to_string();
        assert!(
            message.contains("larger than 2 MiB (at .git/objects/pack)"),
            "{message}"
        );
        assert!(message.contains("sync_max_total"), "{message}");
    }

    /// A named session on this machine's engine binds host folders, but none that is, is in or
    /// holds the repository (through a link too); a remote engine binds none. The copy's
    /// read-only paths go with a name.
    #[test]
    fn a_copy_binds_no_folder_of_the_repository_and_a_remote_engine_none() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let ws = root.join("repo");
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(ws.join("data")).unwrap();
        std::fs::create_dir_all(root.join("cache")).unwrap();
        std::os::unix::fs::symlink(ws.join("data"), root.join("link")).unwrap();
        let attempt = |source: &Path, remote_engine: bool| {
            let mut spec = crate::policy::test_support::ok(serde_json::json!({"image": "debian"}));
            spec.workspace_mount.source = ws.to_string_lossy().into_owned();
            spec.copy = Some("one".into());
            spec.remote_engine = remote_engine;
            spec.protected.push(crate::run_spec::Protected {
                host: ws.join(".git/hooks"),
                target: "/workspaces/repo/.git/hooks".into(),
                read_only: true,
                create_dir: false,
            });
            spec.mounts.push(Mount {
                kind: MountKind::Bind,
                source: source.to_string_lossy().into_owned(),
                target: "/x".into(),
                read_only: false,
            });
            to_volume(&mut spec, &ws, "the session one works on a copy").map(|()| spec)
        };
        let spec = attempt(&root.join("cache"), false).unwrap();
        assert_eq!(spec.workspace_mount.kind, MountKind::Volume);
        // The engine is handed where the link led when it was looked at.
        std::os::unix::fs::symlink(root.join("cache"), root.join("to-cache")).unwrap();
        let spec = attempt(&root.join("to-cache"), false).unwrap();
        let bind = spec.mounts.iter().find(|m| m.target == "/x").unwrap();
        assert_eq!(bind.source, root.join("cache").to_string_lossy());
        assert!(spec.protected.is_empty(), "{:?}", spec.protected);
        for inside in [ws.join("data"), ws.clone(), root.clone(), root.join("link")] {
            let message = attempt(&inside, false).err().unwrap().to_string();
            assert!(
                message.contains("never reaches your working tree"),
                "{message}"
            );
        }
        let message = attempt(&root.join("cache"), true)
            .err()
            .unwrap()
            .to_string();
        assert!(message.contains("cannot be mounted"), "{message}");
        // A bind inside another the agent writes is refused; inside a read-only one it is not.
        std::fs::create_dir_all(root.join("cache/pip")).unwrap();
        for (read_only, refused) in [(false, true), (true, false)] {
            let mut spec = crate::policy::test_support::ok(serde_json::json!({"image": "debian"}));
            spec.workspace_mount.source = ws.to_string_lossy().into_owned();
            spec.copy = Some("one".into());
            for (source, target, read_only) in
                [("cache", "/cache", read_only), ("cache/pip", "/pip", true)]
            {
                spec.mounts.push(Mount {
                    kind: MountKind::Bind,
                    source: root.join(source).to_string_lossy().into_owned(),
                    target: target.into(),
                    read_only,
                });
            }
            let result = to_volume(&mut spec, &ws, "the session one works on a copy");
            let message = result.err().map(|e| e.to_string()).unwrap_or_default();
            assert_eq!(
                message.contains("inside another folder bound writable"),
                refused,
                "{message}"
            );
        }
    }

    /// ATTACK (from a workspace session of the same repository, whose agent changes the tree
    /// while a copy or checkpoint of it is read): a file or folder swapped for a link to a host
    /// file or folder, back and forth as fast as it goes, never brings what the link points to
    /// into the archive; a file swapped for a FIFO never holds the copy. Each pack either
    /// succeeds with the link stored as a link, or fails saying what was replaced.
    #[test]
    fn swapping_files_for_links_or_fifos_while_the_copy_is_read_leaks_nothing() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("host");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("id_ed25519"), "HOST-SECRET-KEY\n").unwrap();
        let ws = dir.path().join("repo");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("Makefile"), "all:\n").unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let swapper = {
            let (ws, outside, stop) = (ws.clone(), outside.clone(), stop.clone());
            std::thread::spawn(move || {
                let (file, folder, fifo) = (ws.join("a.txt"), ws.join("sub"), ws.join("b.txt"));
                let staged = ws.join(".staged");
                while !stop.load(Ordering::Relaxed) {
                    // A file, then a link to the host's key in its place (renamed over it,
                    // as an attacker would, so the name is never missing).
                    std::fs::write(&staged, "plain\n").unwrap();
                    std::fs::rename(&staged, &file).unwrap();
                    std::os::unix::fs::symlink(outside.join("id_ed25519"), &staged).unwrap();
                    std::fs::rename(&staged, &file).unwrap();
                    // A folder, then a link to the host's folder.
                    let _ = std::fs::remove_file(&folder);
                    std::fs::create_dir(&folder).unwrap();
                    std::fs::write(folder.join("inner"), "x\n").unwrap();
                    std::fs::remove_dir_all(&folder).unwrap();
                    std::os::unix::fs::symlink(&outside, &folder).unwrap();
                    // A file, then a FIFO.
                    std::fs::write(&staged, "plain\n").unwrap();
                    std::fs::rename(&staged, &fifo).unwrap();
                    let _ = std::fs::remove_file(&staged);
                    let path =
                        std::ffi::CString::new(staged.as_os_str().as_encoded_bytes()).unwrap();
                    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0);
                    std::fs::rename(&staged, &fifo).unwrap();
                }
            })
        };
        let (done, finished) = std::sync::mpsc::channel();
        let packer = {
            let ws = ws.clone();
            std::thread::spawn(move || {
                let mut packed = 0;
                for _ in 0..400 {
                    let mut out = Vec::new();
                    match pack_into(&ws, &mut out, LIMITS) {
                        Ok(_) => {
                            packed += 1;
                            let text = String::from_utf8_lossy(&out).into_owned();
                            assert!(
                                !text.contains("HOST-SECRET-KEY"),
                                "the host's key was copied"
                            );
                        }
                        Err(e) => {
                            let message = e.to_string();
                            assert!(
                                message.contains("replaced") || message.contains("No such file"),
                                "{message}"
                            );
                        }
                    }
                }
                done.send(packed).unwrap();
            })
        };
        let packed = finished
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("a pack waited on a FIFO");
        stop.store(true, Ordering::Relaxed);
        packer.join().unwrap();
        swapper.join().unwrap();
        assert!(packed > 0, "no pack got through");
    }

    /// Only git's passing files may go while the copy is read; a pack that goes fails it.
    #[test]
    fn only_gits_passing_files_may_go_while_the_copy_is_read() {
        let gone = std::io::Error::from(std::io::ErrorKind::NotFound);
        for passing in [
            ".git/packed-refs.lock",
            ".git/objects/pack/tmp_pack_x",
            ".git/objects/incoming-1",
        ] {
            assert!(is_gone(&gone, Path::new(passing)), "{passing}");
        }
        assert!(!is_gone(&gone, Path::new(".git/objects/pack/pack-1.pack")));
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert!(!is_gone(&denied, Path::new("index.lock")));
    }

    /// The archive the copy is made from, read as it is (`Layout::Entries`), is the working
    /// tree: tracked and untracked files, ignored ones left out, `HEAD` the repository's.
    #[test]
    fn the_copys_own_archive_previews_as_its_working_tree() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t", "-C"])
                .arg(ws)
                .args(args)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(ws.join(".gitignore"), "out/\n").unwrap();
        std::fs::write(ws.join("tracked.txt"), "one\n").unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-qm", "first"]);
        std::fs::write(ws.join("tracked.txt"), "two\n").unwrap();
        std::fs::write(ws.join("new.txt"), "new\n").unwrap();
        std::fs::create_dir(ws.join("out")).unwrap();
        std::fs::write(ws.join("out/build.o"), "obj\n").unwrap();
        let mut tar = Vec::new();
        pack_into(ws, &mut tar, LIMITS).unwrap();
        let preview = preview_as(ws, &mut &tar[..], LIMITS, Layout::Entries).unwrap();
        assert_eq!(preview.head, git(&["rev-parse", "HEAD"]));
        let names = git(&["ls-tree", "-r", "--name-only", &preview.tree]);
        assert_eq!(names, ".gitignore\nnew.txt\ntracked.txt");
        let tracked = git(&["cat-file", "-p", &format!("{}:tracked.txt", preview.tree)]);
        assert_eq!(tracked, "two");
        // The engine's layout (one top folder) is not this one.
        assert!(preview_as(ws, &mut &tar[..], LIMITS, Layout::Folder).is_err());
    }

    #[test]
    fn a_hostile_archive_writes_nothing_outside_its_folder() {
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        // `..` is skipped; a write through a link out of the folder fails the whole copy.
        let dest = root.path().join("dest");
        std::fs::create_dir(&dest).unwrap();
        let mut tar = tar::Builder::new(Vec::new());
        raw(&mut tar, "repo/", tar::EntryType::Directory, "", b"");
        raw(
            &mut tar,
            "repo/../../outside/escaped",
            tar::EntryType::Regular,
            "",
            b"x",
        );
        raw(
            &mut tar,
            "repo/link",
            tar::EntryType::Symlink,
            outside.to_str().unwrap(),
            b"",
        );
        raw(
            &mut tar,
            "repo/link/through",
            tar::EntryType::Regular,
            "",
            b"x",
        );
        let message = unpack(&mut &tar.into_inner().unwrap()[..], &dest, LIMITS)
            .err()
            .unwrap()
            .to_string();
        assert!(message.contains("cannot be unpacked safely"), "{message}");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);

        // A link stays a link, and a read-only folder is removable with the rest.
        let dest = root.path().join("dest2");
        std::fs::create_dir(&dest).unwrap();
        let mut tar = tar::Builder::new(Vec::new());
        raw(&mut tar, "repo/", tar::EntryType::Directory, "", b"");
        raw(
            &mut tar,
            "repo/../../outside/escaped",
            tar::EntryType::Regular,
            "",
            b"x",
        );
        raw(
            &mut tar,
            "repo/link",
            tar::EntryType::Symlink,
            outside.to_str().unwrap(),
            b"",
        );
        raw(&mut tar, "repo/ro/", tar::EntryType::Directory, "", b"");
        raw(
            &mut tar,
            "repo/ro/file",
            tar::EntryType::Regular,
            "",
            b"kept",
        );
        let top = unpack(&mut &tar.into_inner().unwrap()[..], &dest, LIMITS)
            .unwrap()
            .top;
        assert_eq!(top, dest.join("repo"));
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        assert_eq!(
            std::fs::read_to_string(top.join("ro/file")).unwrap(),
            "kept"
        );
        assert!(std::fs::symlink_metadata(top.join("link"))
            .unwrap()
            .is_symlink());
        std::fs::remove_dir_all(&dest).unwrap();
    }

    #[test]
    fn only_plain_jsonl_files_of_the_guard_are_taken() {
        let mut tar = tar::Builder::new(Vec::new());
        raw(&mut tar, "yolo/", tar::EntryType::Directory, "", b"");
        raw(
            &mut tar,
            "yolo/s1.jsonl",
            tar::EntryType::Regular,
            "",
            b"{}\n",
        );
        raw(
            &mut tar,
            "yolo/s1-exec.jsonl",
            tar::EntryType::Regular,
            "",
            b"{}\n",
        );
        raw(
            &mut tar,
            "yolo/../x.jsonl",
            tar::EntryType::Regular,
            "",
            b"no",
        );
        raw(
            &mut tar,
            "yolo/sub/s2.jsonl",
            tar::EntryType::Regular,
            "",
            b"no",
        );
        raw(
            &mut tar,
            "yolo/.hidden.jsonl",
            tar::EntryType::Regular,
            "",
            b"no",
        );
        raw(
            &mut tar,
            "yolo/notes.txt",
            tar::EntryType::Regular,
            "",
            b"no",
        );
        raw(
            &mut tar,
            "yolo/link.jsonl",
            tar::EntryType::Symlink,
            "/etc/passwd",
            b"",
        );
        let dir = tempfile::tempdir().unwrap();
        // A longer copy here is kept.
        std::fs::write(dir.path().join("s1-exec.jsonl"), "{}\n{}\n").unwrap();
        let stored = store_event_files(&mut &tar.into_inner().unwrap()[..], dir.path()).unwrap();
        assert_eq!(stored, ["s1.jsonl"]);
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|name| name != ".remote-copy.lock")
            .collect();
        names.sort();
        assert_eq!(names, ["s1-exec.jsonl", "s1.jsonl"]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("s1-exec.jsonl")).unwrap(),
            "{}\n{}\n"
        );
    }

    /// Copies of the guard's log taken at different times, stored at once and in any order
    /// (an attached run, the shipper and `yolo audit` collect on their own): the file here only
    /// grows, a line at a time, and ends as the longest copy's whole lines.
    #[test]
    fn copies_stored_at_once_only_ever_grow_the_file() {
        let lines: Vec<String> = (0..400).map(|i| format!("{{\"n\":{i}}}\n")).collect();
        let full = lines.concat();
        // Snapshots of the log as it grew, the last one cut inside a line.
        let mut snapshots: Vec<Vec<u8>> = (1..=40)
            .map(|k| lines[..k * 10].concat().into_bytes())
            .collect();
        snapshots.push(format!("{full}{{\"half").into_bytes());
        let tar_of = |bytes: &[u8]| {
            let mut tar = tar::Builder::new(Vec::new());
            raw(&mut tar, "yolo/s.jsonl", tar::EntryType::Regular, "", bytes);
            tar.into_inner().unwrap()
        };
        let tars: Vec<Vec<u8>> = snapshots.iter().map(|s| tar_of(s)).collect();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.jsonl");
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            let watcher = scope.spawn(|| {
                let mut seen = 0;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let text = std::fs::read(&file).unwrap_or_default();
                    assert!(text.len() >= seen, "the file shrank");
                    assert!(full.as_bytes().starts_with(&text), "not the log's start");
                    seen = text.len();
                }
            });
            let workers: Vec<_> = (0..4)
                .map(|w| {
                    let tars = &tars;
                    let dir = dir.path();
                    scope.spawn(move || {
                        // Each worker goes through the snapshots in its own order.
                        let mut order: Vec<usize> = (0..tars.len()).collect();
                        order.rotate_left(w * 7 % tars.len());
                        if w % 2 == 1 {
                            order.reverse();
                        }
                        for i in order {
                            store_event_files(&mut &tars[i][..], dir).unwrap();
                        }
                    })
                })
                .collect();
            for worker in workers {
                worker.join().unwrap();
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            watcher.join().unwrap();
        });
        assert_eq!(std::fs::read_to_string(&file).unwrap(), full);
    }

    /// A copy that does not begin with the file here (a volume made again under the same
    /// session name, a file edited here) is not spliced onto it.
    #[test]
    fn a_copy_that_does_not_begin_with_the_file_here_is_not_added() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.jsonl");
        std::fs::write(&file, "{\"n\":1}\n").unwrap();
        let mut tar = tar::Builder::new(Vec::new());
        raw(
            &mut tar,
            "yolo/s.jsonl",
            tar::EntryType::Regular,
            "",
            b"{\"m\":9}\n{\"m\":10}\n",
        );
        let stored = store_event_files(&mut &tar.into_inner().unwrap()[..], dir.path()).unwrap();
        assert!(stored.is_empty(), "{stored:?}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{\"n\":1}\n");
        // One that does begin with it is added to.
        let mut tar = tar::Builder::new(Vec::new());
        raw(
            &mut tar,
            "yolo/s.jsonl",
            tar::EntryType::Regular,
            "",
            b"{\"n\":1}\n{\"n\":2}\n",
        );
        store_event_files(&mut &tar.into_inner().unwrap()[..], dir.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "{\"n\":1}\n{\"n\":2}\n"
        );
    }

    #[test]
    fn the_branch_is_yolos_own_per_workspace() {
        assert_eq!(branch_name("yolo-repo-0abc1234"), "yolo/repo-0abc1234");
        assert_eq!(workspace_volume("0abc"), "yolo-workspace-0abc");
    }
}
