//! The guard is PID 1 of the namespace the agent shares (no docker-init in between: the exec
//! supervisor must be the process the kernel protects). What that takes:
//!
//! - **Signals.** The kernel delivers to PID 1 only the signals it handles, and never SIGKILL
//!   or SIGSTOP from inside the namespace. The guard blocks the signals it cares about in every
//!   thread and takes them in one thread with `sigwaitinfo`, which says who sent them: SIGTERM
//!   and SIGINT stop the guard only when they come from outside the namespace (`si_pid` 0:
//!   `docker stop`); sent by a process of the agent they are recorded and ignored.
//! - **Orphans.** Processes of the agent whose parent died are re-parented to PID 1, which must
//!   reap them. The guard's own children (`nft`) are reaped by whoever spawned them, so they
//!   are registered while they run ([`owned`]); a tracee of the supervisor is never waited for
//!   here (a real parent that is also in the tracer's thread group would take its stops).

pub mod signals;

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};

/// Pids of the guard's own running children: the reaper leaves them to their spawner.
static OWN: Mutex<Option<HashSet<i32>>> = Mutex::new(None);
/// Held by the supervisor while it traces an exec, and by the reaper while it waits.
static TRACING: Mutex<()> = Mutex::new(());

/// The signals the guard takes in its signal thread.
const SIGNALS: [i32; 6] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGCHLD,
    libc::SIGHUP,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialize it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Block the guard's signals in the calling thread and every thread it starts afterwards: call
/// first thing, before any thread exists. (Children get an empty mask: std resets it.)
pub fn block_signals() {
    let mut set = signal_set();
    // The exec supervisor's alarm (`exec::supervisor`): blocked everywhere but in the thread
    // that unblocks it, so a process-directed one (the agent can send it to PID 1, which has a
    // handler for it) interrupts no other thread's calls.
    // SAFETY: `set` is an initialised sigset_t.
    unsafe { libc::sigaddset(&mut set, signals::alarm_signal()) };
    // SAFETY: valid set, no old mask wanted.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    // No SIGCHLD when a child or a tracee stops: the exec supervisor stops one at every exec,
    // and waking the signal thread for each cost as much as the supervisor's own work.
    // Exits still send it (the orphans to reap); `waitpid` wakes either way.
    // SAFETY: a zeroed sigaction with the default handler is valid.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        action.sa_flags = libc::SA_NOCLDSTOP;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut());
    }
}

/// What a signal means to the guard.
pub enum Received {
    /// Stop: SIGTERM/SIGINT from outside the namespace (or any sender when not PID 1).
    Stop(i32),
    /// Sent from inside the namespace to PID 1: ignored, but worth recording.
    Ignored { signal: i32, from: i32 },
    /// A child (or an orphan) changed state: reaped.
    Child,
}

/// Wait for the next signal of [`SIGNALS`] (blocked by [`block_signals`]).
pub fn next_signal() -> Received {
    let set = signal_set();
    loop {
        // SAFETY: `info` is written by the kernel on success.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let signal = unsafe { libc::sigwaitinfo(&set, &mut info) };
        if signal < 0 {
            continue; // EINTR
        }
        if signal == libc::SIGCHLD {
            reap_orphans();
            return Received::Child;
        }
        // SAFETY: si_pid is valid for signals sent with kill/tgkill/sigqueue.
        let from = unsafe { info.si_pid() };
        // From outside the namespace, `kill` (docker stop) arrives as SI_USER with sender 0.
        // `rt_sigqueueinfo` lets a process inside choose si_pid (0 too) but not SI_USER: the
        // kernel refuses a forged si_code >= 0. So SI_USER and 0 together mean outside.
        let outside = (from == 0 && (info.si_code == libc::SI_USER || info.si_code == 0x80))
            || std::process::id() != 1;
        return match signal {
            libc::SIGTERM | libc::SIGINT if outside => Received::Stop(signal),
            _ => Received::Ignored { signal, from },
        };
    }
}

/// Reap zombies re-parented to PID 1, leaving the guard's own children and the supervisor's
/// tracee alone. Only as PID 1: anywhere else orphans are not ours.
pub fn reap_orphans() {
    if std::process::id() != 1 {
        return;
    }
    // Which children are the guard's own, decided under OWN, which is then let go: waiting for
    // TRACING (an exec being traced) must not hold up `spawn_owned` (the firewall's `nft`).
    let orphans: Vec<i32> = {
        let own = OWN.lock().unwrap_or_else(|p| p.into_inner());
        children()
            .into_iter()
            .filter(|pid| !own.as_ref().is_some_and(|o| o.contains(pid)))
            .collect()
    };
    // While an exec is stalled the supervisor keeps TRACING for as long as the agent likes:
    // the orphans wait for the next round then, and signals (docker stop) are still handled.
    let _tracing = if STALLED.load(std::sync::atomic::Ordering::Relaxed) {
        match TRACING.try_lock() {
            Ok(guard) => guard,
            Err(_) => return,
        }
    } else {
        TRACING.lock().unwrap_or_else(|p| p.into_inner())
    };
    for pid in orphans {
        let mut status = 0;
        // SAFETY: plain waitpid on one pid, not blocking.
        unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    }
}

/// The children of the main thread, which is where the kernel re-parents orphans (the guard's
/// own children belong to the threads that spawned them).
fn children() -> Vec<i32> {
    let main = std::process::id();
    std::fs::read_to_string(format!("/proc/self/task/{main}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Spawn one of the guard's own children, registered until [`Owned`] is dropped (after it was
/// waited for), so the reaper does not take its exit status.
pub fn spawn_owned(command: &mut std::process::Command) -> std::io::Result<Owned> {
    let mut own = OWN.lock().unwrap_or_else(|p| p.into_inner());
    let child = command.spawn()?;
    own.get_or_insert_with(HashSet::new)
        .insert(child.id() as i32);
    Ok(Owned { child: Some(child) })
}

/// A child of the guard itself; see [`spawn_owned`].
pub struct Owned {
    child: Option<std::process::Child>,
}

impl Owned {
    pub fn child(&mut self) -> &mut std::process::Child {
        self.child.as_mut().expect("present until dropped")
    }

    pub fn wait_with_output(mut self) -> std::io::Result<std::process::Output> {
        let child = self.child.take().expect("present until dropped");
        let pid = child.id() as i32;
        let output = child.wait_with_output();
        forget(pid);
        output
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
            forget(child.id() as i32);
        }
    }
}

fn forget(pid: i32) {
    if let Some(own) = OWN.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        own.remove(&pid);
    }
}

/// Set while the supervisor holds TRACING for a stalled exec (see `reap_orphans`).
static STALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn set_stalled(stalled: bool) {
    STALLED.store(stalled, std::sync::atomic::Ordering::Relaxed);
}

/// Held while the supervisor traces one exec (see the module doc).
pub fn tracing() -> MutexGuard<'static, ()> {
    TRACING.lock().unwrap_or_else(|p| p.into_inner())
}
