//! The exec supervisor: PID 1 of the namespace the agent shares takes the seccomp listeners of
//! the agent's shims and records every `execve`/`execveat` before it runs.
//!
//! For each notification, in one thread (ptrace requests must come from the tracer thread):
//! 1. read the path and argv the caller passed (`process_vm_readv`);
//! 2. `PTRACE_SEIZE` the thread with `PTRACE_O_TRACEEXEC` and `PTRACE_INTERRUPT` it. It sleeps
//!    killably in the notification (`SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`), so the interrupt
//!    waits until the syscall is over;
//! 3. let the syscall continue. If the exec succeeds the thread stops at `PTRACE_EVENT_EXEC`
//!    before the new program's first instruction: argv (`/proc/<pid>/cmdline`), the filename
//!    (`AT_EXECFN`) and the binary (`/proc/<pid>/exe`) are read from the new image, so a thread
//!    that rewrote the caller's argv in between cannot make the log differ from what runs. The
//!    record is written, a pidfd taken for the exit, and the thread let go. If the write fails
//!    the program is killed there, before it ran. If the exec fails the pending interrupt stops
//!    the thread on its way back to user space, where the return value gives the errno;
//! 4. when the pidfd says the process ended, an `exec_exit` record with the status
//!    (`PIDFD_GET_INFO`, or the zombie's `/proc/<pid>/stat` on kernels before 6.15).
//!
//! Fail closed: the shim refuses to run anything it could not register; a listener the guard
//! lost (the guard died) makes `execve` fail with ENOSYS, and the guard's death kills the
//! namespace; when the exec log is at its cap, execs are refused (EPERM).
//!
//! Once a second the supervisor also looks for processes of the agent that run without the
//! filter (a plain `docker exec`, an editor attaching): fewer seccomp filters than the shims
//! had when they registered. They are recorded as `unsupervised`.

use super::{digest, procfs, reader, wire};
use crate::audit::events::{guard_event, Events};
use crate::init::signals::{alarm_signal, signal_name};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use yolo_protocol::event::{Event, EventKind};

/// Listeners a namespace may register (each shim start is one; they close with their processes).
const MAX_LISTENERS: usize = 4096;
/// Registrations handled at once, for the agent's processes and again for those the runtime
/// started (each waits at most a couple of seconds for its message; when all of a class are
/// taken, its oldest that is still silent makes room).
const MAX_PENDING_REGISTRATIONS: usize = 32;
const SCAN_EVERY: Duration = Duration::from_secs(1);

const TAG_LISTENER: u64 = 1 << 32;
const TAG_MASK: u64 = 0xffff_ffff << 32;

/// What the supervisor needs to start.
pub struct Options {
    /// The abstract socket name ([`wire::SOCKET`] in the guard).
    pub socket: String,
    pub log_path: std::path::PathBuf,
    pub max_bytes: u64,
    /// Let a traced thread's exec run, recorded `unconfirmed` (`ExecAudit::allow_traced`).
    pub allow_traced: bool,
    pub session: String,
    pub phase: Option<String>,
}

/// The running supervisor; dropping it does not stop it (it lives as long as the guard).
pub struct Handle {
    pub socket: String,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<ExecLog>>,
}

impl Handle {
    /// Stop, and close the exec log with its `chain_end` record (nothing is written after it).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = log.close() {
            eprintln!("yolo-guard: cannot close the exec log: {e}");
        }
    }
}

/// Bind the socket (before the agent exists, so the name is the guard's) and start serving.
pub fn start(options: Options, events: Arc<Events>) -> std::io::Result<Handle> {
    let listener = wire::bind(&options.socket)?;
    let socket = options.socket.clone();
    let log = ExecLog::open(&options)?;
    // SAFETY: plain epoll_create1.
    let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if epoll < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: just created.
    let epoll = Arc::new(unsafe { OwnedFd::from_raw_fd(epoll) });
    let shared = Arc::new(Shared {
        epoll,
        listeners: Mutex::new(HashMap::new()),
        threshold: Mutex::new(None),
        pending: Mutex::new(std::collections::VecDeque::new()),
        events: Arc::clone(&events),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let log = Arc::new(Mutex::new(log));
    let exits = Arc::new(Exits::new()?);
    {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("yolo-exec-accept".into())
            .spawn(move || accept(listener, shared))?;
    }
    {
        let (exits, log, stop) = (Arc::clone(&exits), Arc::clone(&log), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("yolo-exec-exits".into())
            .spawn(move || exits.run(&log, &stop))?;
    }
    let digests = {
        let log = Arc::clone(&log);
        digest::Digests::start(move |done| {
            let _ = log
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .write(digest_event(done));
        })?
    };
    {
        let scanner = Scanner {
            shared: Arc::clone(&shared),
            log: Arc::clone(&log),
            unsupervised: HashSet::new(),
            own_mnt_ns: procfs::readlink("/proc/self/ns/mnt"),
        };
        let stop = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("yolo-exec-scan".into())
            .spawn(move || scanner.run(&stop))?;
    }
    {
        let shared = Arc::clone(&shared);
        let stop = Arc::clone(&stop);
        let log = Arc::clone(&log);
        std::thread::Builder::new()
            .name("yolo-exec".into())
            .spawn(move || {
                let mut supervisor = Supervisor::new(shared, log, exits, digests);
                supervisor.allow_traced = options.allow_traced;
                supervisor.run(&stop)
            })?;
    }
    Ok(Handle { socket, stop, log })
}

/// What the accepting thread and the supervisor thread share.
struct Shared {
    epoll: Arc<OwnedFd>,
    listeners: Mutex<HashMap<RawFd, OwnedFd>>,
    /// The fewest seccomp filters a registered shim had: a process of the agent with fewer has
    /// not been through a shim.
    threshold: Mutex<Option<u32>>,
    /// Registrations in progress, oldest first.
    pending: Mutex<std::collections::VecDeque<Pending>>,
    events: Arc<Events>,
}

fn accept(listener: UnixListener, shared: Arc<Shared>) {
    let mut next = 0u64;
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        next += 1;
        let id = next;
        let state = Arc::new(AtomicU8::new(WAITING));
        // Started by the runtime (the agent container's first program, or a `yolo exec`): its
        // parent is outside the namespace. No process of the agent can be that (an orphan is
        // adopted by the guard, PID 1), so these registrations have slots of their own that the
        // agent's connections cannot take.
        let from_runtime = wire::peer_pid(&stream)
            .ok()
            .and_then(|pid| procfs::status(pid).ok())
            .is_some_and(|status| status.ppid == 0);
        {
            let mut pending = shared.pending.lock().unwrap_or_else(|p| p.into_inner());
            let in_class = pending
                .iter()
                .filter(|p| p.from_runtime == from_runtime)
                .count();
            if in_class >= MAX_PENDING_REGISTRATIONS {
                // Full: the oldest connection of the same class that has not said anything
                // goes. Otherwise root in the agent could hold every slot with idle connections
                // and lock every new shim out ("busy"); a shim speaks as soon as it is
                // connected, so it is never idle for long, and one that spoke is never dropped.
                match pending
                    .iter()
                    .position(|p| p.from_runtime == from_runtime && p.drop_if_silent())
                {
                    Some(at) => {
                        if let Some(idle) = pending.remove(at) {
                            let _ = idle.stream.shutdown(std::net::Shutdown::Both);
                        }
                    }
                    None => {
                        drop(pending);
                        let _ = (&stream).write_all(b"busy\n");
                        continue;
                    }
                }
            }
            let Ok(clone) = stream.try_clone() else {
                continue;
            };
            pending.push_back(Pending {
                id,
                stream: clone,
                state: Arc::clone(&state),
                from_runtime,
            });
        }
        let done = {
            let shared = Arc::clone(&shared);
            move || {
                let mut pending = shared.pending.lock().unwrap_or_else(|p| p.into_inner());
                pending.retain(|p| p.id != id);
            }
        };
        let spawned = std::thread::Builder::new()
            .name("yolo-exec-register".into())
            .spawn({
                let shared = Arc::clone(&shared);
                let done = done.clone();
                move || {
                    let answer = match register(&stream, &shared, &state) {
                        Ok(()) => wire::ACK.to_string(),
                        Err(e) => e.to_string(),
                    };
                    let _ = (&stream).write_all(format!("{answer}\n").as_bytes());
                    done();
                }
            });
        if spawned.is_err() {
            done();
        }
    }
}

/// A registration in progress: its connection (to drop it if it stays idle) and whether the
/// other end has sent anything yet.
struct Pending {
    id: u64,
    stream: UnixStream,
    /// `WAITING`, then `SPOKE` (set by the registering thread) or `DROPPED` (by the acceptor),
    /// whichever comes first: a dropped connection's descriptor is never registered, so its
    /// shim may safely try again.
    state: Arc<AtomicU8>,
    /// Its peer's parent is outside the namespace (see `accept`).
    from_runtime: bool,
}

const WAITING: u8 = 0;
const SPOKE: u8 = 1;
const DROPPED: u8 = 2;

impl Pending {
    /// Mark the connection dropped if the other end has sent nothing yet (neither read by the
    /// registering thread, which may not have run yet, nor waiting to be read).
    fn drop_if_silent(&self) -> bool {
        let mut byte = 0u8;
        // SAFETY: a one-byte peek into a local.
        let n = unsafe {
            libc::recv(
                self.stream.as_raw_fd(),
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n <= 0
            && self
                .state
                .compare_exchange(WAITING, DROPPED, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
    }
}

/// Why a shim's registration was refused. Its message is the answer the shim reads on the
/// wire (`shim::register`): "dropped" means try again on a new connection.
#[derive(Debug, thiserror::Error)]
enum RegisterError {
    /// The connection could not be given a read timeout.
    #[error("{0}")]
    Timeout(#[source] std::io::Error),
    /// The acceptor dropped the connection first (it stayed idle too long).
    #[error("dropped")]
    Dropped,
    #[error("receive: {0}")]
    Receive(#[source] std::io::Error),
    #[error("unexpected message")]
    UnexpectedMessage,
    #[error("no descriptor")]
    NoDescriptor,
    /// The descriptor passed is not a seccomp listener.
    #[error("not a seccomp listener")]
    NotSeccomp,
    /// The peer's pid (`SO_PEERCRED`) could not be read.
    #[error("{0}")]
    Peer(#[source] std::io::Error),
    /// `MAX_LISTENERS` are watched already.
    #[error("too many listeners")]
    TooMany,
    #[error("epoll: {0}")]
    Epoll(#[source] std::io::Error),
}

/// Take one shim's listener: check the message and the descriptor, then watch it.
fn register(stream: &UnixStream, shared: &Shared, state: &AtomicU8) -> Result<(), RegisterError> {
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(RegisterError::Timeout)?;
    let mut buf = [0u8; 64];
    let received = wire::recv_fd(stream, &mut buf);
    if state
        .compare_exchange(WAITING, SPOKE, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return Err(RegisterError::Dropped);
    }
    let (n, fd) = received.map_err(RegisterError::Receive)?;
    if &buf[..n] != wire::HELLO {
        return Err(RegisterError::UnexpectedMessage);
    }
    let fd = fd.ok_or(RegisterError::NoDescriptor)?;
    let what = procfs::readlink(&format!("/proc/self/fd/{}", fd.as_raw_fd()));
    if what != "anon_inode:seccomp notify" {
        return Err(RegisterError::NotSeccomp);
    }
    let peer = wire::peer_pid(stream).map_err(RegisterError::Peer)?;
    if let Some(filters) = procfs::status(peer).ok().and_then(|s| s.seccomp_filters) {
        let mut threshold = shared.threshold.lock().unwrap_or_else(|p| p.into_inner());
        *threshold = Some(threshold.map_or(filters, |t| t.min(filters)));
    }
    let mut listeners = shared.listeners.lock().unwrap_or_else(|p| p.into_inner());
    if listeners.len() >= MAX_LISTENERS {
        return Err(RegisterError::TooMany);
    }
    let raw = fd.as_raw_fd();
    listeners.insert(raw, fd);
    epoll_add(&shared.epoll, raw, TAG_LISTENER | raw as u64).map_err(|e| {
        listeners.remove(&raw);
        RegisterError::Epoll(e)
    })
}

fn epoll_add(epoll: &OwnedFd, fd: RawFd, data: u64) -> std::io::Result<()> {
    let mut event = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: data,
    };
    // SAFETY: valid descriptors and event.
    if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn epoll_del(epoll: &OwnedFd, fd: RawFd) {
    // SAFETY: valid descriptors; a null event is allowed for DEL.
    unsafe {
        libc::epoll_ctl(
            epoll.as_raw_fd(),
            libc::EPOLL_CTL_DEL,
            fd,
            std::ptr::null_mut(),
        )
    };
}

/// The exec log: appended one line per `write`, refused past its cap.
struct ExecLog {
    file: File,
    /// The hash chain (`yolo_protocol::chain`).
    chain: yolo_protocol::chain::Appender,
    /// Closed by `Handle::stop`: later writes are refused.
    closed: bool,
    size: u64,
    max: u64,
    session: String,
    phase: Option<String>,
}

impl ExecLog {
    fn open(options: &Options) -> std::io::Result<ExecLog> {
        if let Some(dir) = options.log_path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&options.log_path)?;
        let size = file.metadata()?.len();
        Ok(ExecLog {
            file,
            chain: yolo_protocol::chain::Appender::new(),
            closed: false,
            size,
            max: options.max_bytes,
            session: options.session.clone(),
            phase: options.phase.clone(),
        })
    }

    /// Room for another exec and its exit (a usual line each; a longer record that does not
    /// fit is refused when it is written, and its program killed before it runs).
    fn has_room(&self) -> bool {
        self.size + 2 * 8192 <= self.max
    }

    fn write(&mut self, kind: EventKind) -> std::io::Result<()> {
        let line = fit(
            Event::now(&self.session, kind).in_phase(self.phase.as_deref()),
            MAX_RECORD,
        );
        if self.closed {
            return Err(std::io::Error::other("the exec log is closed"));
        }
        if self.size + (line.len() + yolo_protocol::chain::SEAL_LEN) as u64 > self.max {
            return Err(std::io::Error::other("the exec log reached its cap"));
        }
        self.size += self.chain.append(&self.file, &line)? as u64;
        Ok(())
    }

    /// The last record: how many come before it (past the cap too).
    fn close(&mut self) -> std::io::Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        let (session, phase) = (self.session.clone(), self.phase.clone());
        self.chain.append_with(&self.file, |records| {
            Event::now(&session, EventKind::ChainEnd { records })
                .in_phase(phase.as_deref())
                .to_line()
        })?;
        Ok(())
    }
}

/// The longest line one record may take. The arguments are read bounded (128 KiB), but JSON
/// writes a control byte as six (`\u0001`): an agent passing control bytes would otherwise fill
/// the log's cap six times faster than what it ran.
const MAX_RECORD: usize = 32 * 1024;

/// The record's line, its arguments cut (the longest first, then the last ones) until it fits
/// in `max` bytes; a cut record says `truncated` and keeps `argc`.
fn fit(mut event: Event, max: usize) -> Vec<u8> {
    loop {
        let line = event.to_line();
        if line.len() <= max {
            return line;
        }
        let EventKind::Exec {
            argv,
            truncated,
            argc,
            loader_env,
            ..
        } = &mut event.kind
        else {
            return line;
        };
        if argv.is_empty() {
            // Only the other fields are left: they are bounded where they are read, so this
            // is a last resort that keeps the line under the cap.
            if loader_env.pop().is_some() {
                continue;
            }
            return line;
        }
        if !*truncated {
            *argc = Some(argv.len() as u64);
        }
        *truncated = true;
        let longest = (0..argv.len())
            .max_by_key(|&i| argv[i].len())
            .unwrap_or_default();
        if argv[longest].len() > 256 {
            let mut cut = argv[longest].len() / 2;
            while !argv[longest].is_char_boundary(cut) {
                cut -= 1;
            }
            argv[longest].truncate(cut);
        } else {
            argv.pop();
        }
    }
}

/// A program whose end is awaited on its pidfd.
struct Running {
    id: u64,
    pid: i32,
    pidfd: OwnedFd,
    since: Instant,
}

/// The programs still running, each awaited on its pidfd by a thread of its own (`Exits::run`),
/// off the supervisor's path: an exit record is not something an exec waits for.
struct Exits {
    epoll: OwnedFd,
    /// By pidfd number; and pid -> pidfd number, so a process that execs again keeps one.
    running: Mutex<(HashMap<RawFd, Running>, HashMap<i32, RawFd>)>,
}

impl Exits {
    fn new() -> std::io::Result<Exits> {
        // SAFETY: plain epoll_create1.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Exits {
            // SAFETY: just created.
            epoll: unsafe { OwnedFd::from_raw_fd(epoll) },
            running: Mutex::new((HashMap::new(), HashMap::new())),
        })
    }

    /// Await the end of `pid`, whose latest exec is `id`.
    fn watch(&self, id: u64, pid: i32, pidfd: Option<OwnedFd>) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let (by_fd, by_pid) = &mut *running;
        if let Some(r) = by_pid.get(&pid).and_then(|fd| by_fd.get_mut(fd)) {
            // The same process exec'ing again keeps its pidfd; a pid reused by a new process
            // (the old one ended, its pidfd readable, its exit not yet handled) gets its own.
            if !readable(&r.pidfd) {
                r.id = id;
                r.since = Instant::now();
                return;
            }
        }
        let Some(pidfd) = pidfd else { return };
        let raw = pidfd.as_raw_fd();
        if epoll_add(&self.epoll, raw, raw as u64).is_err() {
            return;
        }
        by_pid.insert(pid, raw);
        let since = Instant::now();
        by_fd.insert(
            raw,
            Running {
                id,
                pid,
                pidfd,
                since,
            },
        );
    }

    fn run(&self, log: &Mutex<ExecLog>, stop: &AtomicBool) {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
        while !stop.load(Ordering::Relaxed) {
            // SAFETY: `events` has room for 64 entries.
            let n = unsafe {
                libc::epoll_wait(
                    self.epoll.as_raw_fd(),
                    events.as_mut_ptr(),
                    events.len() as i32,
                    1000,
                )
            };
            for ev in events.iter().take(n.max(0) as usize) {
                let fd = ev.u64 as RawFd;
                epoll_del(&self.epoll, fd);
                let ended = {
                    let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
                    let (by_fd, by_pid) = &mut *running;
                    let ended = by_fd.remove(&fd);
                    // Unless the pid is another process's by now.
                    if let Some(r) = &ended {
                        if by_pid.get(&r.pid) == Some(&fd) {
                            by_pid.remove(&r.pid);
                        }
                    }
                    ended
                };
                let Some(running) = ended else { continue };
                let (exit_code, signal) = match exit_status(&running) {
                    Some(st) if libc::WIFSIGNALED(st) => {
                        let sig = libc::WTERMSIG(st);
                        (128 + sig as i64, Some(signal_name(sig)))
                    }
                    Some(st) => (libc::WEXITSTATUS(st) as i64, None),
                    None => (-1, None),
                };
                let _ = log
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .write(EventKind::ExecExit {
                        id: running.id,
                        pid: running.pid,
                        exit_code,
                        signal,
                        duration_ms: running.since.elapsed().as_millis() as u64,
                    });
            }
        }
    }
}

struct Supervisor {
    shared: Arc<Shared>,
    log: Arc<Mutex<ExecLog>>,
    exits: Arc<Exits>,
    digests: digest::Digests,
    next_id: u64,
    refused: u64,
    /// Execs refused because another process traced the caller; and whether they run instead.
    traced_refused: u64,
    allow_traced: bool,
    /// Execs whose stop did not come within [`TRACE_DEADLINE`]: finished when it comes.
    stalled: Vec<Traced>,
    /// Held while any exec is stalled (see `init::tracing`): its stop is this thread's to take.
    stalled_tracing: Option<std::sync::MutexGuard<'static, ()>>,
    /// Interrupts the wait for a stop at its deadline (created on the supervisor's thread).
    alarm: Option<Alarm>,
    reader: reader::Reader,
}

/// How long the supervisor waits for one exec's stop before it serves the others: an exec can
/// be held in the kernel for as long as the agent likes (a `userfaultfd` page in its argv), and
/// every later exec of the agent would wait behind it.
const TRACE_DEADLINE: Duration = Duration::from_secs(1);

/// An exec let go of by its notification, traced to its stop.
struct Traced {
    tid: i32,
    dirfd: i32,
    path_ptr: u64,
    before: Option<(Vec<String>, bool, usize)>,
}

/// How one traced exec ended.
enum Outcome {
    /// It ran: the process (its pid may be the thread group's, not the caller thread's).
    Ran(i32),
    /// It failed with this errno; the thread is stopped (and must be let go, re-injecting
    /// `signal` when it stopped for one).
    Failed { tid: i32, errno: i32, signal: i32 },
    /// The thread is gone (killed during the exec).
    Gone,
}

impl Supervisor {
    fn new(
        shared: Arc<Shared>,
        log: Arc<Mutex<ExecLog>>,
        exits: Arc<Exits>,
        digests: digest::Digests,
    ) -> Supervisor {
        // Unique across restarts of the guard within a session.
        let next_id = (chrono::Utc::now().timestamp() as u64) * 1_000_000;
        Supervisor {
            shared,
            log,
            exits,
            digests,
            next_id,
            refused: 0,
            traced_refused: 0,
            allow_traced: false,
            stalled: Vec::new(),
            stalled_tracing: None,
            alarm: None,
            reader: reader::Reader::new(),
        }
    }

    fn run(mut self, stop: &AtomicBool) {
        // Without it (no timer), each exec's stop is waited for without a deadline, as before.
        self.alarm = Alarm::new()
            .map_err(|e| {
                self.shared.events.emit(guard_event(
                    "exec_alarm",
                    [("error", format!("no deadline on the exec wait: {e}").into())],
                ))
            })
            .ok();
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
        while !stop.load(Ordering::Relaxed) {
            // Stalled execs are looked at often; otherwise the loop sleeps until a notification.
            let timeout = if self.stalled.is_empty() { 1000 } else { 20 };
            // SAFETY: `events` has room for 64 entries.
            let n = unsafe {
                libc::epoll_wait(
                    self.shared.epoll.as_raw_fd(),
                    events.as_mut_ptr(),
                    events.len() as i32,
                    timeout,
                )
            };
            if !self.stalled.is_empty() || self.stalled_tracing.is_some() {
                self.collect_stalled();
            }
            for ev in events.iter().take(n.max(0) as usize) {
                let (flags, data) = (ev.events, ev.u64);
                let fd = (data & !TAG_MASK) as RawFd;
                match data & TAG_MASK {
                    TAG_LISTENER if flags & libc::EPOLLIN as u32 != 0 => self.notification(fd),
                    TAG_LISTENER => self.drop_listener(fd),
                    _ => {}
                }
            }
        }
    }

    fn drop_listener(&mut self, fd: RawFd) {
        epoll_del(&self.shared.epoll, fd);
        self.shared
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&fd);
    }

    fn notification(&mut self, listener: RawFd) {
        // SAFETY: seccomp_notif is plain data; the kernel fills it (it must be zeroed).
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: `listener` is a seccomp listener we hold; `req` is the right size.
        if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV as _, &mut req) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ENOENT) && e.raw_os_error() != Some(libc::EINTR) {
                self.drop_listener(listener);
            }
            return;
        }
        let tid = req.pid as i32;
        let args = req.data.args;
        let (dirfd, path_ptr, argv_ptr) = if req.data.nr == libc::SYS_execveat as i32 {
            (args[0] as i32, args[1], args[2])
        } else {
            (libc::AT_FDCWD, args[0], args[1])
        };
        if !self.log().has_room() {
            self.refuse(listener, req.id, tid);
            return;
        }
        // (Already held while an exec is stalled: the lock is not reentrant.)
        let tracing = self.stalled_tracing.is_none().then(crate::init::tracing);
        // SAFETY: ptrace requests on a pid with integer arguments.
        let seized = unsafe {
            libc::ptrace(
                libc::PTRACE_SEIZE,
                tid,
                0,
                (libc::PTRACE_O_TRACEEXEC | libc::PTRACE_O_EXITKILL) as libc::c_long,
            )
        } == 0;
        if seized {
            // SAFETY: as above.
            unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) };
        }
        if !id_valid(listener, req.id) {
            // The caller died; if the pid went to someone else we just seized them: let go.
            if seized {
                let _ = self.wait_trace(tid);
                self.detach_any(tid);
            }
            return;
        }
        // The caller's memory: read under a deadline (`reader`), it may never answer.
        let before = self
            .reader
            .run(move || procfs::read_argv(tid, argv_ptr).ok())
            .flatten();
        // The path as passed: from the new image when the exec runs (AT_EXECFN), from the
        // caller's memory, still there, when it fails; read now only when nothing will stop.
        let asked_now = (!seized).then(|| self.asked_path(tid, dirfd, path_ptr));
        // Read once the thread is stopped (at the exec or after it failed), or, untraced, now:
        // while an exec runs, /proc waits on the memory map it replaces.
        let about = |pid: i32| {
            (
                procfs::status(pid).unwrap_or_default(),
                procfs::readlink(&format!("/proc/{pid}/cwd")),
            )
        };
        if !seized && !self.allow_traced {
            // Traced already (the agent's debugger, or its own PTRACE_TRACEME): the exec could
            // not be confirmed at its stop, and its tracer or another thread could rewrite argv
            // after the read above. Refused, so no record can be forged this way; what it asked
            // for is on record as refused.
            let (status, cwd) = about(tid);
            if respond(listener, req.id, libc::EPERM) {
                let asked = asked_now.unwrap_or_default();
                self.record_unwatched(tid, &status, cwd, asked, before, "traced".into());
                self.report_traced(tid);
            }
            return;
        }
        if !respond(listener, req.id, 0) {
            if seized {
                let _ = self.wait_trace(tid);
                self.detach_any(tid);
            }
            return;
        }
        if !seized {
            // Traced already (a debugger of the agent's): the exec cannot be watched; what the
            // caller passed is all there is.
            let (status, cwd) = about(tid);
            let asked = asked_now.unwrap_or_default();
            self.record_unwatched(tid, &status, cwd, asked, before, "unconfirmed".into());
            return;
        }
        let traced = Traced {
            tid,
            dirfd,
            path_ptr,
            before,
        };
        match self.wait_trace(tid) {
            Some(outcome) => self.finish(traced, outcome),
            None => {
                self.stall(traced);
                // Kept while it is stalled: its stop is this thread's to take.
                if self.stalled_tracing.is_none() {
                    self.stalled_tracing = tracing;
                }
            }
        }
    }

    /// Record an exec at its stop and let it go (or kill it, when its record cannot be written).
    fn finish(&mut self, traced: Traced, outcome: Outcome) {
        let Traced {
            tid,
            dirfd,
            path_ptr,
            before,
        } = traced;
        let about = |pid: i32| {
            (
                procfs::status(pid).unwrap_or_default(),
                procfs::readlink(&format!("/proc/{pid}/cwd")),
            )
        };
        match outcome {
            Outcome::Ran(pid) => {
                // The pidfd first: its ids (one ioctl rather than /proc/<pid>/status), and the
                // exit later.
                let pidfd = pidfd_open(pid);
                let status = pidfd
                    .as_ref()
                    .and_then(pidfd_ids)
                    .unwrap_or_else(|| procfs::status(pid).unwrap_or_default());
                let cwd = procfs::readlink(&format!("/proc/{pid}/cwd"));
                let (argv, path, (loader_env, loader_values)) = match procfs::new_image(pid) {
                    Some(image) => (
                        image.argv,
                        image.execfn.unwrap_or_default(),
                        (image.loader_env, image.loader_values),
                    ),
                    None => (
                        procfs::cmdline(pid).unwrap_or_default(),
                        procfs::exec_filename(pid).unwrap_or_default(),
                        procfs::environ_loader(pid),
                    ),
                };
                // `/etc/ld.so.preload` as the program's loader will see it: one open and read
                // through its root (nothing read when there is none, the usual case).
                let root = procfs::root_of(pid);
                let ld_so_preload = root.as_ref().and_then(procfs::ld_so_preload);
                let preload_paths = ld_so_preload.clone().unwrap_or_default();
                // The libraries it is told to preload, opened now, at the stop, as the loader
                // is about to; hashed off the exec path. Only when some are named.
                let libraries: Vec<(String, std::io::Result<std::fs::File>)> =
                    procfs::preloaded_libraries(&preload_paths, &loader_values, &cwd)
                        .into_iter()
                        .map(|lib| {
                            let file = match &root {
                                Some(root) => procfs::open_in_root(root, &lib),
                                None => Err(std::io::Error::other("its root is gone")),
                            };
                            (lib, file)
                        })
                        .collect();
                let rewritten = before
                    .as_ref()
                    .is_some_and(|(b, _, _)| !same_program_args(b, &argv.0));
                let exe = procfs::readlink(&format!("/proc/{pid}/exe"));
                let id = self.id();
                let (sha256, digest_failed) = match self.digests.lookup(id, pid) {
                    digest::Lookup::Known(hex) => (Some(hex), None),
                    digest::Lookup::Queued => (None, None),
                    digest::Lookup::Failed(why) => (None, Some(why)),
                };
                let written = self.log().write(exec_event(ExecRecord {
                    id,
                    status: &status,
                    pid,
                    path,
                    exe: Some(exe),
                    argv,
                    cwd,
                    result: "ok".into(),
                    rewritten,
                    sha256,
                    loader_env,
                    ld_so_preload: ld_so_preload.is_some(),
                    ld_so_preload_paths: preload_paths,
                    loader_values,
                    // Last, right before the let-go: a signal queued during the exec can hold
                    // the program before it reads its arguments.
                    pending_signals: procfs::pending_signals(pid),
                }));
                if let (Ok(()), Some(why)) = (&written, digest_failed) {
                    let _ = self.log().write(digest_event(digest::Finished {
                        id,
                        pid,
                        sha256: None,
                        changed: false,
                        error: Some(why),
                        library: None,
                    }));
                }
                if written.is_ok() {
                    for (library, file) in libraries {
                        let failed = |error: String| digest::Finished {
                            id,
                            pid,
                            sha256: None,
                            changed: false,
                            error: Some(error),
                            library: Some(library.clone()),
                        };
                        let known = match file {
                            Err(e) => Some(failed(format!("open: {e}"))),
                            Ok(file) => match self.digests.lookup_file(id, pid, file, &library) {
                                digest::Lookup::Queued => None,
                                digest::Lookup::Failed(why) => Some(failed(why)),
                                digest::Lookup::Known(hex) => Some(digest::Finished {
                                    sha256: Some(hex),
                                    error: None,
                                    ..failed(String::new())
                                }),
                            },
                        };
                        if let Some(done) = known {
                            let _ = self.log().write(digest_event(done));
                        }
                    }
                }
                if written.is_err() {
                    // Not on record: it must not run. It is stopped before its first
                    // instruction; killed there, and its end collected (a killed tracee
                    // cannot be detached).
                    // SAFETY: plain kill.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    collect(pid);
                    self.refused += 1;
                    self.report_refused(pid);
                } else {
                    let_go(pid, 0);
                    // After the program goes on: an exit before this is still seen (the
                    // pidfd is readable from then on).
                    self.exits.watch(id, pid, pidfd);
                }
            }
            Outcome::Failed { tid, errno, signal } => {
                let (status, cwd) = about(tid);
                // Read while it is stopped: the caller's memory, the path still in it.
                let asked = self.asked_path(tid, dirfd, path_ptr);
                let_go(tid, signal);
                self.record_unwatched(tid, &status, cwd, asked, before, errno_name(errno));
            }
            Outcome::Gone => {
                let status = procfs::Status::default();
                let asked = String::new(); // its memory is gone with it
                self.record_unwatched(tid, &status, String::new(), asked, before, "killed".into());
            }
        }
    }

    /// An exec whose stop did not come in time: said in the guard's log, and finished when its
    /// stop comes (it cannot run before: it waits for this thread at its stop).
    fn stall(&mut self, traced: Traced) {
        crate::init::set_stalled(true);
        self.shared.events.emit(guard_event(
            "exec_stalled",
            [
                ("pid", traced.tid.into()),
                (
                    "reason",
                    format!(
                        "the exec did not reach its stop within {} s; other execs are served meanwhile and it is recorded when it does",
                        TRACE_DEADLINE.as_secs()
                    )
                    .into(),
                ),
            ],
        ));
        self.stalled.push(traced);
    }

    /// Finish the stalled execs whose stop came (without waiting).
    fn collect_stalled(&mut self) {
        while let Ok(Some((pid, status))) = wait_tracee(-1, false) {
            self.take_event(pid, status, None);
        }
        if self.stalled.is_empty() {
            self.stalled_tracing = None;
            crate::init::set_stalled(false);
        }
    }

    /// A tracee's event: the outcome when it is `current`'s, after finishing a stalled exec
    /// whose it is, or letting a leftover go.
    fn take_event(&mut self, pid: i32, status: i32, current: Option<i32>) -> Option<Outcome> {
        let event = (status >> 16) & 0xff;
        let exec_of = (libc::WIFSTOPPED(status) && event == libc::PTRACE_EVENT_EXEC)
            .then(|| event_message(pid))
            .flatten();
        // A thread other than the leader that execs takes the leader's pid; the event message
        // names the thread it was.
        let is = |tid: i32| pid == tid || exec_of == Some(tid as u64);
        if current.is_some_and(is) {
            return outcome_of(pid, status);
        }
        if let Some(at) = self.stalled.iter().position(|t| is(t.tid)) {
            if let Some(outcome) = outcome_of(pid, status) {
                let traced = self.stalled.swap_remove(at);
                self.finish(traced, outcome);
            }
            return None;
        }
        // A leftover (a tracee that could not be let go because it was being killed).
        if libc::WIFSTOPPED(status) {
            let_go(pid, 0);
        }
        None
    }

    /// An exec that did not run, or that could not be watched: what the caller passed.
    fn record_unwatched(
        &mut self,
        tid: i32,
        status: &procfs::Status,
        cwd: String,
        asked: String,
        before: Option<(Vec<String>, bool, usize)>,
        result: String,
    ) {
        let id = self.id();
        let _ = self.log().write(exec_event(ExecRecord {
            id,
            status,
            pid: tid,
            path: asked,
            exe: None,
            argv: before.unwrap_or_default(),
            cwd,
            result,
            rewritten: false,
            sha256: None,
            loader_env: Vec::new(),
            ld_so_preload: false,
            ld_so_preload_paths: Vec::new(),
            loader_values: Default::default(),
            pending_signals: Vec::new(),
        }));
    }

    /// The log is full: the exec fails with EPERM, and the guard's log says so (once, then
    /// with counts as its writer folds repeats).
    fn refuse(&mut self, listener: RawFd, id: u64, pid: i32) {
        respond(listener, id, libc::EPERM);
        self.refused += 1;
        self.report_refused(pid);
    }

    /// Say in the guard's log that execs were refused: the first, then at powers of two.
    fn report_refused(&self, pid: i32) {
        if self.refused == 1 || self.refused.is_power_of_two() {
            self.shared.events.emit(guard_event(
                "exec_refused",
                [
                    ("reason", "the exec log reached its cap".into()),
                    ("max_bytes", self.log().max.into()),
                    ("refused", self.refused.into()),
                    ("pid", pid.into()),
                ],
            ));
        }
    }

    /// Say in the guard's log that an exec was refused for its tracer: the first, then at
    /// powers of two.
    fn report_traced(&mut self, pid: i32) {
        self.traced_refused += 1;
        let n = self.traced_refused;
        if n == 1 || n.is_power_of_two() {
            self.shared.events.emit(guard_event(
                "exec_refused",
                [
                    ("reason", "another process traces the caller (a debugger), so the exec could not be confirmed; [audit] traced_exec = \"record\" lets such execs run, recorded as unconfirmed".into()),
                    ("refused", n.into()),
                    ("pid", pid.into()),
                ],
            ));
        }
    }

    fn log(&self) -> std::sync::MutexGuard<'_, ExecLog> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// The path the caller asked for; for `execveat` on a descriptor, joined to where the
    /// descriptor points.
    fn asked_path(&mut self, tid: i32, dirfd: i32, path_ptr: u64) -> String {
        // The caller's memory: read under a deadline (`reader`), it may never answer.
        let path = self
            .reader
            .run(move || {
                procfs::read_cstring(tid, path_ptr, procfs::MAX_ARG)
                    .map(|(b, _)| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        if path.starts_with('/') || dirfd == libc::AT_FDCWD {
            return path;
        }
        let dir = procfs::readlink(&format!("/proc/{tid}/fd/{dirfd}"));
        if path.is_empty() {
            dir
        } else {
            format!("{dir}/{path}")
        }
    }

    /// Wait for the stop (or end) of `tid`, up to [`TRACE_DEADLINE`] (`None` past it; the
    /// [`Alarm`] ends the wait). An event of any other tracee is a stalled exec's (finished
    /// then) or a leftover (let go), so it is never taken for this exec's. (Polling instead
    /// takes the CPU the exec needs on a small machine: docs/performance.md.)
    fn wait_trace(&mut self, tid: i32) -> Option<Outcome> {
        let deadline = Instant::now() + TRACE_DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            if let Some(alarm) = &self.alarm {
                alarm.arm(left);
            }
            let waited = wait_tracee(-1, true);
            if let Some(alarm) = &self.alarm {
                alarm.disarm();
            }
            match waited {
                Ok(Some((pid, status))) => {
                    if let Some(outcome) = self.take_event(pid, status, Some(tid)) {
                        return Some(outcome);
                    }
                }
                Ok(None) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(_) => return Some(Outcome::Gone),
            }
        }
    }

    /// Let go of a tracee in whatever state (used when the notification went stale).
    fn detach_any(&self, tid: i32) {
        let_go(tid, 0);
    }
}

/// The look for processes of the agent that run without the filter, once a second on a thread
/// of its own: an exec that stalls the supervisor does not stop it.
struct Scanner {
    shared: Arc<Shared>,
    log: Arc<Mutex<ExecLog>>,
    /// (pid, start time, binary) of processes already recorded as unsupervised: a process that
    /// execs another program is recorded again.
    unsupervised: HashSet<(i32, u64, String)>,
    own_mnt_ns: String,
}

/// How long a process may be `runc init` without being flagged: the runtime entering the
/// container for a `docker exec` is that for milliseconds, then execs the program it runs.
const RUNC_INIT_GRACE: Duration = Duration::from_secs(2);

impl Scanner {
    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(SCAN_EVERY);
            self.scan_unsupervised();
        }
    }

    fn log(&self) -> std::sync::MutexGuard<'_, ExecLog> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Processes of the agent (another mount namespace than the guard's) with fewer seccomp
    /// filters than a shim leaves.
    fn scan_unsupervised(&mut self) {
        let Some(threshold) = *self
            .shared
            .threshold
            .lock()
            .unwrap_or_else(|p| p.into_inner())
        else {
            return;
        };
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(status) = procfs::status(pid) else {
                continue;
            };
            if status.seccomp_filters.is_none_or(|n| n >= threshold) {
                continue;
            }
            let ns = procfs::readlink(&format!("/proc/{pid}/ns/mnt"));
            if ns.is_empty() || ns == self.own_mnt_ns {
                continue; // the guard's own processes (and kernel threads)
            }
            let exe = procfs::readlink(&format!("/proc/{pid}/exe"));
            if exe == yolo_protocol::SHIM_PATH {
                continue; // a shim between its start and its filter
            }
            let Some(start) = procfs::start_time(pid) else {
                continue;
            };
            let (argv, _, _) = procfs::cmdline(pid).unwrap_or_default();
            if is_runtime_entering(&argv, status.ppid, pid) {
                continue; // Docker's runtime entering the container for an exec, not yet it
            }
            if !self.unsupervised.insert((pid, start, exe.clone())) {
                continue;
            }
            let _ = self.log().write(EventKind::Unsupervised {
                pid,
                ppid: status.ppid,
                uid: status.uid,
                exe,
                argv,
            });
        }
    }
}

/// Whether `pid` is the container runtime entering the agent's namespaces for a `docker exec`
/// (`runc init`), by what the agent cannot arrange: its parent is outside the namespace (ppid 0;
/// an orphan inside is adopted by the guard, PID 1) and it is younger than [`RUNC_INIT_GRACE`].
/// Its name alone proves nothing: any program can call itself `runc init`.
fn is_runtime_entering(argv: &[String], ppid: i32, pid: i32) -> bool {
    if argv != ["runc", "init"] || ppid != 0 {
        return false;
    }
    procfs::age(pid).is_some_and(|age| age < RUNC_INIT_GRACE)
}

struct ExecRecord<'a> {
    id: u64,
    status: &'a procfs::Status,
    pid: i32,
    path: String,
    exe: Option<String>,
    /// The arguments, whether they were cut, and how many there were.
    argv: (Vec<String>, bool, usize),
    cwd: String,
    result: String,
    rewritten: bool,
    sha256: Option<String>,
    loader_env: Vec<String>,
    ld_so_preload: bool,
    ld_so_preload_paths: Vec<String>,
    loader_values: std::collections::BTreeMap<String, String>,
    pending_signals: Vec<String>,
}

fn digest_event(done: digest::Finished) -> EventKind {
    EventKind::ExecDigest {
        id: done.id,
        pid: done.pid,
        sha256: done.sha256,
        changed: done.changed,
        error: done.error,
        library: done.library,
    }
}

fn exec_event(r: ExecRecord<'_>) -> EventKind {
    let (argv, truncated, argc) = r.argv;
    EventKind::Exec {
        id: r.id,
        pid: r.pid,
        ppid: r.status.ppid,
        uid: r.status.uid,
        gid: r.status.gid,
        path: r.path,
        exe: r.exe,
        argv,
        cwd: r.cwd,
        result: r.result,
        argv_rewritten: r.rewritten,
        truncated,
        argc: truncated.then_some(argc as u64),
        sha256: r.sha256,
        loader_env: r.loader_env,
        ld_so_preload: r.ld_so_preload,
        ld_so_preload_paths: r.ld_so_preload_paths,
        loader_values: r.loader_values,
        pending_signals: r.pending_signals,
        exit_code: None,
        duration_ms: None,
    }
}

/// Whether what ran is what the caller passed: the same argv, or for a script the
/// interpreter's argv ending with the caller's arguments after the first.
fn same_program_args(before: &[String], ran: &[String]) -> bool {
    if before == ran {
        return true;
    }
    let tail = before.get(1..).unwrap_or(&[]);
    ran.len() > before.len() && ran.ends_with(tail)
}

/// What a tracee's wait status says of its exec; `None` for a status that is neither a stop nor
/// an end.
fn outcome_of(pid: i32, status: i32) -> Option<Outcome> {
    if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
        return Some(Outcome::Gone);
    }
    if !libc::WIFSTOPPED(status) {
        return None;
    }
    let event = (status >> 16) & 0xff;
    if event == libc::PTRACE_EVENT_EXEC {
        return Some(Outcome::Ran(pid));
    }
    let signal = libc::WSTOPSIG(status);
    // An interrupt or group stop carries PTRACE_EVENT_STOP; anything else is a signal about to
    // be delivered, which must be passed on.
    let pass = if event == libc::PTRACE_EVENT_STOP {
        0
    } else {
        signal
    };
    Some(Outcome::Failed {
        tid: pid,
        errno: return_errno(pid),
        signal: pass,
    })
}

/// A timer that interrupts a blocking system call of the thread that made it (a signal with a
/// handler that does nothing, without `SA_RESTART`): the deadline of a `waitpid`. While armed it
/// fires again every 10 ms, so a tick that lands just before the `waitpid` does not leave it
/// without one. The handler makes the signal deliverable to PID 1 from inside the namespace
/// too: the agent can send it, which costs the supervisor a retry of whatever it interrupted
/// (`respond`, `id_valid` and the receive retry on EINTR), never an exec's record.
struct Alarm {
    timer: libc::timer_t,
}

// SAFETY: the timer id is a plain handle; it is only used on the thread that made it.
unsafe impl Send for Alarm {}

extern "C" fn wake(_: libc::c_int) {}

impl Alarm {
    fn new() -> std::io::Result<Alarm> {
        let signal = alarm_signal();
        // SAFETY: plain sigaction/sigprocmask/timer_create calls with valid, initialised structs;
        // the handler does nothing, so it is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = wake as *const () as usize;
            action.sa_flags = 0; // no SA_RESTART: the wait returns EINTR
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signal);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            let mut event: libc::sigevent = std::mem::zeroed();
            event.sigev_notify = libc::SIGEV_THREAD_ID;
            event.sigev_signo = signal;
            event.sigev_notify_thread_id = libc::gettid();
            let mut timer: libc::timer_t = std::mem::zeroed();
            if libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(Alarm { timer })
        }
    }

    fn set(&self, after: Duration, every: Duration) {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: every.as_secs() as libc::time_t,
                tv_nsec: every.subsec_nanos() as libc::c_long,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a timer this thread made, and a valid itimerspec.
        unsafe { libc::timer_settime(self.timer, 0, &spec, std::ptr::null_mut()) };
    }

    fn arm(&self, after: Duration) {
        self.set(
            after.max(Duration::from_nanos(1)),
            Duration::from_millis(10),
        );
    }

    fn disarm(&self) {
        self.set(Duration::ZERO, Duration::ZERO);
    }
}

fn id_valid(listener: RawFd, id: u64) -> bool {
    loop {
        let mut id = id;
        // SAFETY: the ioctl reads a u64.
        if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _, &mut id) } == 0 {
            return true;
        }
        // Interrupted (the alarm's signal, or one the agent sent): ask again.
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

/// Answer a notification: continue the syscall (`errno` 0) or fail it with `errno`.
fn respond(listener: RawFd, id: u64, errno: i32) -> bool {
    let mut resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: if errno == 0 { 0 } else { -errno },
        flags: if errno == 0 {
            libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32
        } else {
            0
        },
    };
    loop {
        // SAFETY: the ioctl reads a seccomp_notif_resp.
        if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND as _, &mut resp) } == 0 {
            return true;
        }
        // Interrupted (the alarm's signal, or one the agent sent): send again.
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

/// Let a stopped tracee go on (re-injecting `signal`). One that a SIGKILL has woken cannot be
/// detached: it is collected instead, so its end is not left for the next exec's wait.
fn let_go(tid: i32, signal: i32) {
    // SAFETY: ptrace with integer arguments.
    if unsafe { libc::ptrace(libc::PTRACE_DETACH, tid, 0, signal as libc::c_long) } != 0 {
        collect(tid);
    }
}

/// Wait for a tracee that is on its way out (killed) and take its end as its tracer, for at
/// most 100 ms: one that is not (still in the kernel) is left, and its later event is taken as
/// a leftover (`take_event`).
fn collect(tid: i32) {
    let until = Instant::now() + Duration::from_millis(100);
    while Instant::now() < until {
        if !matches!(wait_tracee(tid, false), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// One `waitpid` for this thread's tracees (`which`: a thread id, or -1 for any of them; the
/// supervisor thread has no children of its own): `Some((pid, status))` for an event, `None`
/// for none yet (only without `block`), or the wait's error, read before anything else can
/// change it (`EINTR` when the [`Alarm`] ended it).
fn wait_tracee(which: i32, block: bool) -> std::io::Result<Option<(i32, i32)>> {
    let mut status = 0;
    let flags = libc::__WALL | libc::__WNOTHREAD | if block { 0 } else { libc::WNOHANG };
    // SAFETY: waitpid writes one int.
    let pid = unsafe { libc::waitpid(which, &mut status, flags) };
    match pid {
        0 => Ok(None),
        p if p < 0 => Err(std::io::Error::last_os_error()),
        p => Ok(Some((p, status))),
    }
}

/// `PTRACE_GETEVENTMSG` of a stopped tracee (at an exec: the thread id it had).
fn event_message(pid: i32) -> Option<u64> {
    let mut message: libc::c_ulong = 0;
    // SAFETY: the kernel writes one unsigned long.
    let rc = unsafe {
        libc::ptrace(
            libc::PTRACE_GETEVENTMSG,
            pid,
            0,
            &mut message as *mut libc::c_ulong,
        )
    };
    (rc == 0).then_some(message as u64)
}

/// The errno a stopped thread's last system call returned (its return register).
fn return_errno(tid: i32) -> i32 {
    let Some(regs) = procfs::registers(tid) else {
        return 0;
    };
    #[cfg(target_arch = "x86_64")]
    let ret = regs.rax as i64;
    #[cfg(target_arch = "aarch64")]
    let ret = regs.regs[0] as i64;
    if (-4095..0).contains(&ret) {
        -ret as i32
    } else {
        0
    }
}

fn errno_name(errno: i32) -> String {
    let name = match errno {
        0 => "failed",
        libc::ENOENT => "ENOENT",
        libc::EACCES => "EACCES",
        libc::EPERM => "EPERM",
        libc::ENOEXEC => "ENOEXEC",
        libc::E2BIG => "E2BIG",
        libc::ENOTDIR => "ENOTDIR",
        libc::ELOOP => "ELOOP",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::EFAULT => "EFAULT",
        libc::ENOMEM => "ENOMEM",
        libc::ETXTBSY => "ETXTBSY",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::EBADF => "EBADF",
        libc::ELIBBAD => "ELIBBAD",
        libc::EAGAIN => "EAGAIN",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

/// `struct pidfd_info` (Linux 6.13+; `exit_code` with `PIDFD_INFO_EXIT`, 6.15+).
#[repr(C)]
#[derive(Default)]
struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    pid: u32,
    tgid: u32,
    ppid: u32,
    ruid: u32,
    rgid: u32,
    euid: u32,
    egid: u32,
    suid: u32,
    sgid: u32,
    fsuid: u32,
    fsgid: u32,
    exit_code: i32,
}
const PIDFD_INFO_EXIT: u64 = 1 << 3;
/// `_IOWR(0xFF, 11, struct pidfd_info)` with the 64-byte first version of the struct.
const PIDFD_GET_INFO: u64 =
    (3 << 30) | ((std::mem::size_of::<PidfdInfo>() as u64) << 16) | (0xFF << 8) | 11;

/// Whether a pidfd says its process ended.
fn readable(pidfd: &OwnedFd) -> bool {
    let mut poll = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, no wait.
    unsafe { libc::poll(&mut poll, 1, 0) > 0 }
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: plain syscall.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: just opened, ours.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// A process's parent and effective ids from its pidfd (Linux 6.13+; `None` before).
fn pidfd_ids(pidfd: &OwnedFd) -> Option<procfs::Status> {
    let mut info = PidfdInfo::default();
    // SAFETY: the ioctl writes a PidfdInfo of the size encoded in the request.
    let rc = unsafe {
        libc::ioctl(
            pidfd.as_raw_fd(),
            PIDFD_GET_INFO as _,
            &mut info as *mut PidfdInfo,
        )
    };
    (rc == 0).then_some(procfs::Status {
        tgid: info.tgid as i32,
        ppid: info.ppid as i32,
        uid: info.euid,
        gid: info.egid,
        seccomp_filters: None,
    })
}

/// The wait status of an ended process: from its pidfd once reaped, else from the zombie.
fn exit_status(running: &Running) -> Option<i32> {
    for attempt in 0..50 {
        let mut info = PidfdInfo {
            mask: PIDFD_INFO_EXIT,
            ..Default::default()
        };
        // SAFETY: the ioctl writes a PidfdInfo of the size encoded in the request.
        let rc = unsafe {
            libc::ioctl(
                running.pidfd.as_raw_fd(),
                PIDFD_GET_INFO as _,
                &mut info as *mut PidfdInfo,
            )
        };
        if rc == 0 && info.mask & PIDFD_INFO_EXIT != 0 {
            return Some(info.exit_code);
        }
        if let Some(st) = procfs::zombie_exit_status(running.pid) {
            return Some(st);
        }
        if rc != 0 && attempt > 0 && !Path::new(&format!("/proc/{}", running.pid)).exists() {
            return None; // reaped, and the kernel keeps no exit info for pidfds
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Control bytes take six bytes each in JSON: a record of 128 KiB of them is cut to the
    /// line cap, flagged, with its argument count kept.
    #[test]
    fn a_record_of_control_bytes_is_cut_to_the_line_cap() {
        let status = procfs::Status::default();
        let argv: Vec<String> = (0..32).map(|_| "\u{1}".repeat(4096)).collect();
        let kind = exec_event(ExecRecord {
            id: 1,
            status: &status,
            pid: 2,
            path: "/bin/true".into(),
            exe: Some("/usr/bin/true".into()),
            argv: (argv, false, 32),
            cwd: "/".into(),
            result: "ok".into(),
            rewritten: false,
            sha256: None,
            loader_env: vec![],
            ld_so_preload: false,
            ld_so_preload_paths: Vec::new(),
            loader_values: Default::default(),
            pending_signals: vec![],
        });
        let line = fit(Event::now("s", kind), MAX_RECORD);
        assert!(line.len() <= MAX_RECORD, "{}", line.len());
        let back: Event = serde_json::from_slice(&line).unwrap();
        match back.kind {
            EventKind::Exec {
                truncated, argc, ..
            } => {
                assert!(truncated);
                assert_eq!(argc, Some(32));
            }
            other => panic!("{other:?}"),
        }
    }
}
