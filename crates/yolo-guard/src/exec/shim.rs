//! `yolo-guard shim PROGRAM [ARGS...]`: the first program of the agent's main process and of
//! every `docker exec` yolo makes. Before PROGRAM (untrusted) runs, it installs the exec filter
//! (`filter`), hands the filter's listener to the guard's supervisor, which must be PID 1 of the
//! namespace, waits for the acknowledgement, and execs PROGRAM. Any failure stops here with
//! exit status 126 and a message: nothing runs unrecorded.

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

/// Run the shim: never returns on success (PROGRAM replaced it).
pub fn main(args: &[OsString]) -> i32 {
    let Some(program) = args.first() else {
        eprintln!("usage: yolo-guard shim PROGRAM [ARGS...]");
        return 64;
    };
    if let Err(message) = supervise(wire::SOCKET, 1) {
        eprintln!("yolo: {message}; not running {}", program.to_string_lossy());
        return CANNOT_RUN;
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

/// Install the filter and register its listener with the supervisor at `socket` (an abstract
/// name), whose process must be `supervisor_pid` as this namespace sees it.
pub fn supervise(socket: &str, supervisor_pid: i32) -> Result<(), String> {
    // While the shim holds the listener, another process of the agent (same user) must not
    // be able to copy it (`pidfd_getfd`, ptrace) and answer execs itself. The exec of the
    // program resets this.
    // SAFETY: plain prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    let listener = filter::install().map_err(|e| match e.raw_os_error() {
        Some(libc::EINVAL) => format!(
            "cannot install the exec audit's seccomp filter ({e}): it needs Linux 5.19 or later; \
             turn the exec audit off with `[audit] exec = false` in yolo's config"
        ),
        Some(libc::EPERM) => format!(
            "cannot install the exec audit's seccomp filter ({e}): this process is already \
             supervised and may not open a second listener"
        ),
        _ => format!("cannot install the exec audit's seccomp filter: {e}"),
    })?;
    register(&listener, socket, supervisor_pid, Duration::from_secs(10))
}

/// Hand `listener` to the supervisor and wait for its acknowledgement. A connection the
/// supervisor turned away before taking the descriptor ("busy", or dropped while silent when
/// others hold every slot) is tried again until `timeout`.
pub fn register(
    listener: &OwnedFd,
    socket: &str,
    supervisor_pid: i32,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = std::time::Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match attempt(listener, socket, supervisor_pid, timeout) {
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
    Again(String),
    Fail(String),
}

fn attempt(
    listener: &OwnedFd,
    socket: &str,
    supervisor_pid: i32,
    timeout: Duration,
) -> Result<(), Attempt> {
    use std::io::Read;
    let unreachable = |e: std::io::Error| {
        format!("the exec audit's supervisor (the guard) is not reachable at @{socket}: {e}")
    };
    let stream = wire::connect(socket).map_err(|e| match e.raw_os_error() {
        Some(libc::EAGAIN) => Attempt::Again(unreachable(e)),
        _ => Attempt::Fail(unreachable(e)),
    })?;
    let peer = wire::peer_pid(&stream).map_err(|e| Attempt::Fail(unreachable(e)))?;
    if peer != supervisor_pid {
        return Err(Attempt::Fail(format!(
            "the exec audit's socket @{socket} is held by process {peer}, not by the guard \
             (process {supervisor_pid})"
        )));
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
        let n = (&stream).read(&mut answer[got..]).map_err(|e| {
            Attempt::Fail(format!(
                "the exec audit's supervisor did not acknowledge: {e}"
            ))
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
        "busy" | "dropped" | "" => Err(Attempt::Again(format!(
            "the exec audit's supervisor refused: {}",
            if answer.trim_end().is_empty() {
                "no answer"
            } else {
                answer.trim_end()
            }
        ))),
        other => Err(Attempt::Fail(format!(
            "the exec audit's supervisor refused: {other}"
        ))),
    }
}

/// `execve` PROGRAM, found on PATH when it has no `/` (one exec, not one per PATH entry, so the
/// log holds what ran rather than the misses of a search).
fn exec(path: &OsStr, args: &[OsString]) -> Result<std::convert::Infallible, String> {
    let cstr = |s: &OsStr| {
        CString::new(s.as_bytes()).map_err(|_| "an argument contains a NUL byte".to_string())
    };
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
        return Err(format!(
            "{error}: the exec audit refuses programs once the session's exec log is full \
             ([audit] max_exec_log; `yolo audit --kind guard` shows exec_refused)"
        ));
    }
    Err(format!("{error}"))
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
