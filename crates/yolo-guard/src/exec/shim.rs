//! `yolo-guard shim PROGRAM [ARGS...]`: the first program of the agent's main process and of
//! every `docker exec` yolo makes. Before PROGRAM (untrusted) runs, it installs the exec filter
//! (`filter`), hands the filter's listener to the guard's supervisor, which must be PID 1 of the
//! namespace, waits for the acknowledgement, and execs PROGRAM. Any failure stops here with
//! exit status 126 and a message: nothing runs unrecorded.
//!
//! `yolo-guard start PROGRAM [ARGS...]` is the same for the agent container's first program,
//! which the host starts as soon as the guard's process runs, not once the guard says it is
//! ready (it saves the agent's start from a cold `up`'s critical path). The guard opens the
//! supervisor's socket last, after the ruleset is verified, DNS listens and the file watcher
//! runs; until then a connection is refused, and `start` tries again (up to
//! [`START_TIMEOUT`]) where `shim` fails at once. So nothing of the agent runs before the
//! firewall holds: the container's only process is this one, waiting.
//!
//! `yolo-guard shim --pod PROGRAM [ARGS...]` is the same in a Kubernetes Pod (`yolo kube`),
//! where the Pod's pause process, not the guard, is PID 1 of the shared PID namespace: the
//! supervisor is then recognised by its capabilities (NET_ADMIN and SYS_PTRACE, which nothing
//! in the agent's container can hold: every capability dropped, no privilege escalation), and
//! the shim waits for it, because a Pod starts its containers without waiting for each other.

use super::confine;
use super::filter;
use super::wire;
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

/// What a failed start exits with (Docker's "cannot invoke").
const CANNOT_RUN: i32 = 126;
/// A program not found on PATH (as a shell and `docker exec` say it).
const NOT_FOUND: i32 = 127;

/// How long the agent's first program waits for the guard to open the supervisor's socket
/// (the host gives up on the guard's readiness sooner, and removes the container).
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Run the shim: never returns on success (PROGRAM replaced it).
pub fn main(args: &[OsString]) -> i32 {
    match args.first() {
        Some(flag) if flag == "--pod" => run(
            &args[1..],
            Supervisor::Guard,
            Wait::Listening(POD_WAIT),
            Confine::Yes,
        ),
        // yolo's own stop of a command it ran (`engine::exec`'s stop script): it reads the
        // marked processes' environment, which Landlock refuses across domains (each shim's
        // confinement is a domain of its own). Safe to offer: Landlock is inherited, so an
        // agent process that runs the shim with this stays confined; only a fresh
        // `docker exec`, which only the host makes, starts outside every domain.
        Some(flag) if flag == "--unconfined" => {
            run(&args[1..], Supervisor::Pid(1), Wait::Busy, Confine::No)
        }
        _ => run(args, Supervisor::Pid(1), Wait::Busy, Confine::Yes),
    }
}

/// Run the shim as the container's first program: wait for the guard's supervisor.
pub fn start(args: &[OsString]) -> i32 {
    run(
        args,
        Supervisor::Pid(1),
        Wait::Listening(START_TIMEOUT),
        Confine::Yes,
    )
}

/// Whether the program is confined (`confine`) before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Confine {
    Yes,
    No,
}

/// What a refused connection means.
#[derive(Clone, Copy, Debug)]
pub enum Wait {
    /// The guard is up: only a busy supervisor is tried again (within 10 s).
    Busy,
    /// The guard may still be starting: a socket nobody listens on yet is tried again too,
    /// until this long.
    Listening(Duration),
}

fn run(args: &[OsString], supervisor: Supervisor, wait: Wait, confined: Confine) -> i32 {
    let Some(program) = args.first() else {
        eprintln!(
            "usage: yolo-guard shim [--pod | --unconfined] PROGRAM [ARGS...] | yolo-guard start PROGRAM [ARGS...]"
        );
        return 64;
    };
    if let Err(message) = supervise(wire::SOCKET, &supervisor, wait) {
        eprintln!("yolo: {message}; not running {}", program.to_string_lossy());
        return CANNOT_RUN;
    }
    // Best effort (see `confine`): where Landlock is missing, the program runs unconfined;
    // where `/proc` is read-only, it needs no confinement (`confine::needed`).
    if confined == Confine::Yes && confine::needed() {
        let _ = confine::close_proc_to_writes();
    }
    let Some(path) = resolve(program) else {
        eprintln!("yolo: {}: command not found", program.to_string_lossy());
        return NOT_FOUND;
    };
    match exec(&path, args) {
        Ok(never) => match never {},
        Err(message) => {
            eprintln!("yolo: {message}; not running {}", program.to_string_lossy());
            CANNOT_RUN
        }
    }
}

/// Who the supervisor at the socket must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Supervisor {
    /// This process, as this PID namespace numbers it (PID 1 under Docker).
    Pid(i32),
    /// A process holding CAP_NET_ADMIN and CAP_SYS_PTRACE (the guard of a Pod), waited for.
    Guard,
}

/// How long the shim in a Pod waits for the guard to listen.
const POD_WAIT: Duration = Duration::from_secs(120);

/// Why the shim does not run the program: nothing of the agent may run unrecorded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The exec filter could not be installed (an old kernel, a process already supervised).
    #[error("{}", filter_message(.0))]
    Filter(#[source] std::io::Error),
    /// Nobody answers at the supervisor's socket (the guard is gone, or never came up).
    #[error("the exec audit's supervisor (the guard) is not reachable at @{socket}: {source}")]
    Unreachable {
        socket: String,
        #[source]
        source: std::io::Error,
    },
    /// The socket is held by a process that is not the supervisor: `peer` is not `expected`.
    #[error("the exec audit's socket @{socket} is held by process {peer}, {}", not_the_guard(.expected))]
    Impostor {
        socket: String,
        peer: i32,
        expected: Supervisor,
    },
    /// The supervisor took the listener but its acknowledgement never came.
    #[error("the exec audit's supervisor did not acknowledge: {0}")]
    NoAcknowledgement(#[source] std::io::Error),
    /// The supervisor answered something other than its acknowledgement.
    #[error("the exec audit's supervisor refused: {0}")]
    Refused(String),
    /// The program's name or an argument holds a NUL byte, which `execve` cannot pass.
    #[error("an argument contains a NUL byte")]
    NulInArgument,
    /// The supervisor refused the exec: the session's exec log is full.
    #[error(
        "{0}: the exec audit refuses programs once the session's exec log is full \
         ([audit] max_exec_log; `yolo audit --kind guard` shows exec_refused)"
    )]
    ExecLogFull(#[source] std::io::Error),
    /// `execve` failed otherwise (the file's own permissions, its format).
    #[error("{0}")]
    Exec(#[source] std::io::Error),
}

fn filter_message(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EINVAL) => format!(
            "cannot install the exec audit's seccomp filter ({e}): it needs Linux 5.19 or later; \
             turn the exec audit off with `[audit] exec = false` in yolo's config"
        ),
        Some(libc::EPERM) => format!(
            "cannot install the exec audit's seccomp filter ({e}): this process is already \
             supervised and may not open a second listener"
        ),
        _ => format!("cannot install the exec audit's seccomp filter: {e}"),
    }
}

fn not_the_guard(expected: &Supervisor) -> String {
    match expected {
        Supervisor::Pid(pid) => format!("not by the guard (process {pid})"),
        Supervisor::Guard => {
            "which lacks the guard's capabilities (NET_ADMIN, SYS_PTRACE)".to_string()
        }
    }
}

/// Install the filter and register its listener with the supervisor at `socket` (an abstract
/// name).
pub fn supervise(socket: &str, supervisor: &Supervisor, wait: Wait) -> Result<(), Error> {
    // While the shim holds the listener, another process of the agent (same user) must not
    // be able to copy it (`pidfd_getfd`, ptrace) and answer execs itself. The exec of the
    // program resets this.
    // SAFETY: plain prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    let listener = filter::install().map_err(Error::Filter)?;
    register_with(&listener, socket, supervisor, wait)
}

/// Hand `listener` to the supervisor and wait for its acknowledgement. A connection the
/// supervisor turned away before taking the descriptor ("busy", or dropped while silent when
/// others hold every slot) is tried again until `timeout`.
pub fn register(
    listener: &OwnedFd,
    socket: &str,
    supervisor_pid: i32,
    wait: Wait,
) -> Result<(), Error> {
    register_with(listener, socket, &Supervisor::Pid(supervisor_pid), wait)
}

fn register_with(
    listener: &OwnedFd,
    socket: &str,
    supervisor: &Supervisor,
    wait: Wait,
) -> Result<(), Error> {
    let (timeout, not_yet) = match wait {
        Wait::Busy => (Duration::from_secs(10), false),
        Wait::Listening(timeout) => (timeout, true),
    };
    let deadline = std::time::Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match attempt(listener, socket, supervisor, timeout, not_yet) {
            Ok(()) => return Ok(()),
            Err(Attempt::Again(_)) if std::time::Instant::now() + pause < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            Err(Attempt::Again(e) | Attempt::Fail(e)) => return Err(e),
        }
    }
}

enum Attempt {
    /// The supervisor did not take the descriptor: another connection may.
    Again(Error),
    Fail(Error),
}

fn attempt(
    listener: &OwnedFd,
    socket: &str,
    supervisor: &Supervisor,
    timeout: Duration,
    not_yet: bool,
) -> Result<(), Attempt> {
    use std::io::Read;
    let unreachable = |source| Error::Unreachable {
        socket: socket.to_string(),
        source,
    };
    let stream = wire::connect(socket).map_err(|e| match e.raw_os_error() {
        Some(libc::EAGAIN) => Attempt::Again(unreachable(e)),
        // Nobody listens yet: the guard is still setting up (while `start`, or the shim in a
        // Pod, waits for it).
        Some(libc::ECONNREFUSED | libc::ENOENT) if not_yet => Attempt::Again(unreachable(e)),
        _ => Attempt::Fail(unreachable(e)),
    })?;
    let peer = wire::peer_pid(&stream).map_err(|e| Attempt::Fail(unreachable(e)))?;
    let genuine = match supervisor {
        Supervisor::Pid(pid) => peer == *pid,
        Supervisor::Guard => holds_guard_caps(peer),
    };
    if !genuine {
        return Err(Attempt::Fail(Error::Impostor {
            socket: socket.to_string(),
            peer,
            expected: *supervisor,
        }));
    }
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| Attempt::Fail(unreachable(e)))?;
    // Not sent: the supervisor dropped the connection first.
    wire::send_fd(&stream, wire::HELLO, listener.as_raw_fd()).map_err(|e| {
        match e.raw_os_error() {
            Some(libc::EPIPE | libc::ECONNRESET) => Attempt::Again(unreachable(e)),
            _ => Attempt::Fail(unreachable(e)),
        }
    })?;
    let mut answer = [0u8; 64];
    let mut got = 0;
    while got < answer.len() {
        let n = (&stream)
            .read(&mut answer[got..])
            .map_err(|e| match e.raw_os_error() {
                // Closed with our message unread (turned away by a busy supervisor, whose
                // answer the reset hides): the descriptor was never taken, as with no answer.
                Some(libc::ECONNRESET) => Attempt::Again(Error::NoAcknowledgement(e)),
                _ => Attempt::Fail(Error::NoAcknowledgement(e)),
            })?;
        if n == 0 {
            break;
        }
        got += n;
        if answer[..got].contains(&b'\n') {
            break;
        }
    }
    let answer = String::from_utf8_lossy(&answer[..got]);
    match answer.trim_end() {
        wire::ACK => Ok(()),
        // Turned away before the descriptor was taken (a dropped connection's is never used).
        "" => Err(Attempt::Again(Error::Refused("no answer".into()))),
        busy @ ("busy" | "dropped") => Err(Attempt::Again(Error::Refused(busy.into()))),
        other => Err(Attempt::Fail(Error::Refused(other.into()))),
    }
}

/// Capability numbers (linux/capability.h).
const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_PTRACE: u32 = 19;

/// Whether process `pid` holds CAP_NET_ADMIN and CAP_SYS_PTRACE in its effective set.
fn holds_guard_caps(pid: i32) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    effective_caps(&text).is_some_and(|caps| {
        let need = (1u64 << CAP_NET_ADMIN) | (1u64 << CAP_SYS_PTRACE);
        caps & need == need
    })
}

/// The `CapEff` mask of a /proc/PID/status text.
fn effective_caps(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(line.trim(), 16).ok()
}

/// `execve` PROGRAM, found on PATH when it has no `/` (one exec, not one per PATH entry, so the
/// log holds what ran rather than the misses of a search).
fn exec(path: &OsStr, args: &[OsString]) -> Result<std::convert::Infallible, Error> {
    let cstr = |s: &OsStr| CString::new(s.as_bytes()).map_err(|_| Error::NulInArgument);
    let path_c = cstr(path)?;
    let argv: Vec<CString> = args.iter().map(|a| cstr(a)).collect::<Result<_, _>>()?;
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let env: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let mut env_ptrs: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());
    // SAFETY: NUL-terminated arrays of NUL-terminated strings that outlive the call.
    unsafe { libc::execve(path_c.as_ptr(), argv_ptrs.as_ptr(), env_ptrs.as_ptr()) };
    let error = std::io::Error::last_os_error();
    if error.raw_os_error() == Some(libc::EPERM) {
        // What the supervisor answers when the exec log is full (a file's own permissions
        // give EACCES).
        return Err(Error::ExecLogFull(error));
    }
    Err(Error::Exec(error))
}

fn resolve(program: &OsStr) -> Option<OsString> {
    if program.as_bytes().contains(&b'/') {
        return Some(program.to_os_string());
    }
    let path = std::env::var_os("PATH")
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            // As execvp: a file this user may execute; else the next folder.
            let Ok(c) = CString::new(candidate.as_os_str().as_bytes()) else {
                return false;
            };
            std::fs::metadata(candidate).is_ok_and(|m| m.is_file())
                // SAFETY: a NUL-terminated path.
                && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
        })
        .map(Into::into)
}

#[cfg(test)]
mod pod_tests {
    use super::*;

    #[test]
    fn the_guards_capabilities_are_read_from_the_effective_set() {
        // The guard of a Pod: NET_ADMIN, NET_BIND_SERVICE, SYS_PTRACE.
        let guard = "Name:\tyolo-guard\nCapPrm:\t0000000000081400\nCapEff:\t0000000000081400\n";
        let need = (1u64 << CAP_NET_ADMIN) | (1u64 << CAP_SYS_PTRACE);
        assert_eq!(effective_caps(guard).map(|c| c & need), Some(need));
        // Root in the agent's container: every capability dropped but the default few.
        let agent = "CapEff:\t00000000000000eb\n";
        assert_ne!(effective_caps(agent).map(|c| c & need), Some(need));
        assert_eq!(effective_caps("Name: x\n"), None);
    }

    /// The check reads the live process: a process of another user holds none of the caps
    /// (what root in an agent container, every capability dropped, looks like to the shim).
    #[test]
    fn a_process_without_the_capabilities_is_not_taken_for_the_guard() {
        // As root, a process of another user; as anyone else, a child of one's own already
        // holds none of the guard's capabilities (and setpriv could not change users).
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let mut command = std::process::Command::new(if root { "setpriv" } else { "sleep" });
        if root {
            command.args(["--reuid=65534", "--regid=65534", "--clear-groups", "sleep"]);
        }
        let Ok(mut child) = command.arg("5").spawn() else {
            panic!("setpriv (util-linux) is needed for this test");
        };
        let pid = child.id() as i32;
        // Until setpriv has become the other user (and exec'd sleep).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !std::fs::read_to_string(format!("/proc/{pid}/status"))
            .is_ok_and(|s| s.contains("sleep") && (!root || s.contains("65534")))
        {
            assert!(
                std::time::Instant::now() < deadline,
                "setpriv never ran sleep"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!holds_guard_caps(pid));
        assert!(!holds_guard_caps(i32::MAX), "no such process");
        let own = std::fs::read_to_string("/proc/self/status").unwrap();
        let need = (1u64 << CAP_NET_ADMIN) | (1u64 << CAP_SYS_PTRACE);
        let mine = effective_caps(&own).unwrap() & need == need;
        assert_eq!(holds_guard_caps(std::process::id() as i32), mine);
        let _ = child.kill();
        let _ = child.wait();
    }
}

#[cfg(test)]
mod error_tests {
    use super::*;

    /// A shim that cannot register says why by kind, and in the words it always printed:
    /// nobody at the socket, or someone who is not the guard.
    #[test]
    fn registering_with_no_supervisor_or_an_impostor_says_which() {
        let listener: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        let socket = format!("yolo-shim-test-{}", std::process::id());
        match register(&listener, &socket, 1, Wait::Busy) {
            Err(e @ Error::Unreachable { .. }) => {
                assert!(
                    e.to_string().starts_with(&format!(
                        "the exec audit's supervisor (the guard) is not reachable at @{socket}: "
                    )),
                    "{e}"
                );
            }
            other => panic!("{other:?}"),
        }
        // This process listens: it is not process 1, so it is not the guard.
        let _impostor = wire::bind(&socket).unwrap();
        let me = std::process::id() as i32;
        match register(&listener, &socket, 1, Wait::Busy) {
            Err(e @ Error::Impostor { peer, .. }) if peer == me => assert_eq!(
                e.to_string(),
                format!(
                    "the exec audit's socket @{socket} is held by process {me}, not by the guard \
                     (process 1)"
                )
            ),
            other => panic!("{other:?}"),
        }
    }
}
