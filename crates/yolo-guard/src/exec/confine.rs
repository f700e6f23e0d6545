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
//! handles one right, writing to a file, and grants it beneath every top-level entry of `/`
//! except `/proc` (and except any entry that leads to a procfs). So `/proc/*/mem`,
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
//! Best effort: on a kernel without Landlock, or an engine whose seccomp profile refuses its
//! system calls, nothing is confined and [`Confined::Not`] says why; the
//! shim runs the program anyway (refusing would stop every exec on those hosts), and
//! docs/security-model.md names the hosts where the hole stays open. The `landlock` crate (by
//! Landlock's maintainers) does the system calls.

use landlock::{
    Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError,
    RulesetStatus, ABI,
};
use std::os::fd::AsFd;
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
    // ABI 1's file-write right is all this needs; newer rights are not handled, so they stay
    // allowed (the ruleset narrows nothing else).
    let write = AccessFs::WriteFile;
    let handled = AccessFs::from_all(ABI::V1) & write;
    let mut ruleset = Ruleset::default()
        .handle_access(handled)
        .and_then(|r| r.create())
        .map_err(Error::Create)?;
    let top = std::fs::read_dir("/").map_err(Error::ListRoot)?;
    for entry in top.flatten() {
        if entry.file_name() == "proc" {
            continue;
        }
        let path = Path::new("/").join(entry.file_name());
        // Followed like any path: a top-level symlink names what it leads to.
        let Ok(fd) = PathFd::new(&path) else {
            continue; // gone since the listing, or not reachable: no grant
        };
        if is_procfs(&fd) {
            continue; // `/p -> /proc`, or a second procfs mounted at the top
        }
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, write))
            .map_err(|source| Error::Grant { path, source })?;
    }
    let status = ruleset.restrict_self().map_err(Error::Enforce)?;
    Ok(status.ruleset)
}

/// Whether `fd` (an `O_PATH` descriptor) lies on a procfs.
fn is_procfs(fd: &PathFd) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: statfs is plain data, and the descriptor is valid for the call.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::fstatfs(fd.as_fd().as_raw_fd(), &mut st) };
    // A filesystem that cannot be told is treated as procfs: no grant beneath it.
    rc != 0 || st.f_type == libc::PROC_SUPER_MAGIC
}
