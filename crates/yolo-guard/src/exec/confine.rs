//! The agent's processes may not write another process's memory through `/proc/PID/mem`.
//!
//! Why: the supervisor reads an exec's arguments at its stop and then lets it go. A second
//! process of the agent that writes the new program's memory right after (a queued SIGSTOP, or
//! a plain race) makes the record name a different file than the one the program opens
//! (issue 23, item 5). The exec filter already refuses `process_vm_writev` and ptrace's
//! writing requests; what is left is opening `/proc/PID/mem` for writing.
//!
//! How: a Landlock ruleset (the kernel's unprivileged access control, Linux 5.13+), installed
//! by the shim before the agent's program runs and inherited by everything it starts. It
//! handles one right, writing to a file, and grants it beneath every top-level folder and
//! regular file of `/` except `/proc` (and except any on a procfs). Links at the top are not
//! followed (`/bin -> usr/bin` is covered by `/usr`; a planted `/p -> /proc` gets nothing), and
//! an entry whose grant the kernel refuses costs only itself, so nothing the agent plants at
//! `/` turns the confinement off. So `/proc/*/mem`,
//! `/proc/*/attr/*` and every other file of procfs cannot be opened for writing, whatever the
//! mount says, while reads, and writes anywhere else, are untouched. Unlike a read-only `/proc`
//! (`HostConfig.ReadonlyPaths`, which runc before 1.2.8 cannot combine with AppArmor or
//! SELinux), this holds on every engine with Landlock: Docker with an LSM, Podman, Kubernetes.
//!
//! What it costs the agent: a file made later directly in `/` or in a top-level folder made
//! later cannot be opened for writing (its folder had no rule when the shim ran); tools that
//! write their own `/proc/self/...` settings (`oom_score_adj`, `uid_map`) get EACCES, as they
//! would with a read-only `/proc`.
//!
//! Where it is left out: where `/proc` is mounted read-only ([`needed`]), no procfs file can be
//! opened for writing anyway, so the shim does not install it there and its cost goes too.
//!
//! Best effort: on a kernel without Landlock, or an engine whose seccomp profile refuses its
//! system calls, nothing is confined and [`Confined::Not`] says why; the
//! shim runs the program anyway (refusing would stop every exec on those hosts), and
//! docs/security-model.md names the hosts where the hole stays open. The `landlock` crate (by
//! Landlock's maintainers) does the system calls.

use landlock::{
    Access, AccessFs, PathBeneath, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError,
    RulesetStatus, ABI,
};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

/// What [`close_proc_to_writes`] achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confined {
    /// Writes to procfs files are refused for this process and everything it starts.
    Yes,
    /// Nothing was confined, and why.
    Not(String),
}

/// Install the ruleset on the calling thread (the shim is single-threaded) and its future
/// children.
pub fn close_proc_to_writes() -> Confined {
    match try_close() {
        Ok(RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced) => Confined::Yes,
        Ok(RulesetStatus::NotEnforced) => {
            Confined::Not("the kernel or the engine does not offer Landlock".into())
        }
        Err(e) => Confined::Not(e.to_string()),
    }
}

/// Whether a program here needs the ruleset: not where `/proc` is read-only, where no procfs
/// file can be opened for writing anyway and the ruleset would only cost what it costs (no
/// new file directly in `/`: `echo > /postCreateCommand.txt`, as the reference CLI's own test
/// configs do). Docker without AppArmor or SELinux mounts it so for yolo; with either, and on
/// Podman and Kubernetes, `/proc` is writable and the ruleset is the wall.
pub fn needed() -> bool {
    !proc_is_read_only()
}

/// Whether `/proc` is mounted read-only here (the engine's `ReadonlyPaths`, which yolo sets where
/// it is safe: `engine::containers::PROC_READONLY`). Then no process of the container can open
/// a procfs file for writing, Landlock or not: root in the container cannot remount it
/// without CAP_SYS_ADMIN.
pub fn proc_is_read_only() -> bool {
    let path = c"/proc";
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a statvfs the call fills.
    unsafe { libc::statvfs(path.as_ptr(), &mut stat) == 0 && stat.f_flag & libc::ST_RDONLY != 0 }
}

/// Why the ruleset was not installed (a kernel or engine without Landlock answers
/// `NotEnforced` instead).
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("creating the Landlock ruleset: {0}")]
    Create(#[source] RulesetError),
    #[error("listing /: {0}")]
    ListRoot(#[source] std::io::Error),
    #[error("granting writes beneath {}: {source}", path.display())]
    Grant {
        path: std::path::PathBuf,
        #[source]
        source: RulesetError,
    },
    #[error("enforcing the Landlock ruleset: {0}")]
    Enforce(#[source] RulesetError),
}

fn try_close() -> Result<RulesetStatus, Error> {
    let top = grantable(Path::new("/")).map_err(Error::ListRoot)?;
    let status = ruleset_for(&top)?.restrict_self().map_err(Error::Enforce)?;
    Ok(status.ruleset)
}

/// The ruleset granting writes beneath each of `top`. A grant the kernel refuses (a file of an
/// internal filesystem bind-mounted at the top, which the agent could plant to turn the whole
/// confinement off) costs that one entry, never the ruleset: `add_rule` consumes the ruleset
/// on failure, so it is built again without the entry.
fn ruleset_for(top: &[(std::path::PathBuf, OwnedFd)]) -> Result<landlock::RulesetCreated, Error> {
    let mut refused = vec![false; top.len()];
    loop {
        match build(top, &refused)? {
            Built::Ruleset(ruleset) => return Ok(ruleset),
            Built::Refused(i, source) => {
                if refused[i] {
                    let path = top[i].0.clone();
                    return Err(Error::Grant { path, source });
                }
                refused[i] = true;
            }
        }
    }
}

enum Built {
    Ruleset(landlock::RulesetCreated),
    /// The grant for entry `.0` was refused.
    Refused(usize, RulesetError),
}

fn build(top: &[(std::path::PathBuf, OwnedFd)], refused: &[bool]) -> Result<Built, Error> {
    // ABI 1's file-write right is all this needs; newer rights are not handled, so they stay
    // allowed (the ruleset narrows nothing else).
    let write = AccessFs::WriteFile;
    let handled = AccessFs::from_all(ABI::V1) & write;
    let mut ruleset = Ruleset::default()
        .handle_access(handled)
        .and_then(|r| r.create())
        .map_err(Error::Create)?;
    for (i, (_, fd)) in top.iter().enumerate() {
        if refused[i] {
            continue;
        }
        ruleset = match ruleset.add_rule(PathBeneath::new(fd, write)) {
            Ok(ruleset) => ruleset,
            Err(e) => return Ok(Built::Refused(i, e)),
        };
    }
    Ok(Built::Ruleset(ruleset))
}

/// The entries of `root` that get a grant, opened: folders and regular files, not followed if
/// they are links (a link at the top leads to something that has, or must not have, a grant
/// of its own: `/bin -> usr/bin` is covered by `/usr`, `/p -> /proc` must not be), and not on
/// a procfs (`/proc`, or a second procfs mounted at the top).
fn grantable(root: &Path) -> std::io::Result<Vec<(std::path::PathBuf, OwnedFd)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root)?.flatten() {
        let path = root.join(entry.file_name());
        let Ok(fd) = open_path_nofollow(&path) else {
            continue; // gone since the listing, or not reachable: no grant
        };
        if kind_is_grantable(&fd) && !is_procfs(&fd) {
            out.push((path, fd));
        }
    }
    Ok(out)
}

fn open_path_nofollow(path: &Path) -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    Ok(file.into())
}

/// A folder or a regular file (not a link, a socket, a device or a fifo).
fn kind_is_grantable(fd: &OwnedFd) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: stat is plain data, and the descriptor is valid for the call.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
    rc == 0 && matches!(st.st_mode & libc::S_IFMT, libc::S_IFDIR | libc::S_IFREG)
}

/// Whether `fd` (an `O_PATH` descriptor) lies on a procfs.
fn is_procfs(fd: &OwnedFd) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: statfs is plain data, and the descriptor is valid for the call.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::fstatfs(fd.as_fd().as_raw_fd(), &mut st) };
    // A filesystem that cannot be told is treated as procfs: no grant beneath it.
    rc != 0 || st.f_type == libc::PROC_SUPER_MAGIC
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What root in the agent could plant at `/`: links to procfs and to a namespace file, a
    /// socket. None gets a grant; folders and files do.
    #[test]
    fn only_folders_and_files_off_procfs_are_granted_and_links_are_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let at = |name: &str| root.path().join(name);
        std::fs::create_dir(at("dir")).unwrap();
        std::fs::write(at("file"), "x").unwrap();
        std::os::unix::fs::symlink("/proc", at("p")).unwrap();
        std::os::unix::fs::symlink("/proc/self/ns/net", at("zz")).unwrap();
        std::os::unix::fs::symlink("dir", at("link-to-dir")).unwrap();
        let _socket = std::os::unix::net::UnixListener::bind(at("sock")).unwrap();
        let mut names: Vec<String> = grantable(root.path())
            .unwrap()
            .iter()
            .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["dir", "file"]);
    }

    /// A grant the kernel refuses (here a namespace file, as a bind mount at `/` would give)
    /// leaves the others standing: before, it threw the whole ruleset away and the shim ran
    /// the agent unconfined.
    #[test]
    fn a_refused_grant_costs_only_its_own_entry() {
        let dir = tempfile::tempdir().unwrap();
        // Followed, as the old code followed a planted `/zz -> /proc/self/ns/net`.
        let ns: OwnedFd = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
                .open("/proc/self/ns/net")
                .unwrap()
                .into()
        };
        let ok = open_path_nofollow(dir.path()).unwrap();
        let top = vec![
            (Path::new("/ns").to_path_buf(), ns),
            (dir.path().to_path_buf(), ok),
        ];
        if let Err(Error::Create(_)) = build(&top, &[true, true]) {
            eprintln!("skipped: no Landlock");
            return;
        }
        // The premise: the kernel refuses that grant (what lost the ruleset before).
        assert!(matches!(
            build(&top, &[false, false]),
            Ok(Built::Refused(0, _))
        ));
        match ruleset_for(&top) {
            Ok(_) => {}
            // A kernel without Landlock cannot say anything here.
            Err(Error::Create(_)) => eprintln!("skipped: no Landlock"),
            Err(e) => panic!("the ruleset was lost: {e}"),
        }
    }
}
