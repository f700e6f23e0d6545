//! `sudo` for lifecycle hooks. Every container yolo makes has `no-new-privileges`, so the
//! image's own `sudo` cannot become root; a hook that needs root (`sudo apt-get install ...`)
//! gets it from a broker instead, and only the hook's own processes do, only while it runs.
//!
//! - `yolo-guard sudo-hook --user USER -- PROGRAM [ARGS...]` is what yolo runs (a `docker exec`
//!   as root, through the exec audit's shim) instead of the hook's command. It listens on a
//!   fresh abstract socket, forks the hook's command as USER (as `docker exec --user` would)
//!   with `YOLO_SUDO` naming the socket and a folder holding `sudo` (a link to this program)
//!   first on its `PATH`, and serves requests until that command exits: then the socket and
//!   the folder go, and root commands still running are killed (each runs in a process group
//!   of its own, killed whole).
//! - `sudo ARGS` (this program called by that name) forwards its argv, folder, environment and
//!   its stdin/stdout/stderr (`SCM_RIGHTS`) to the broker, which runs the command as root with
//!   that very stdio, and exits with its status.
//!
//! Who may ask: the broker takes the caller's pid from `SO_PEERCRED` (the agent's processes
//! share the guard's PID namespace with the broker) and walks its parents: only a process whose
//! line of parents reaches the hook's command is served. The agent's own processes (`yolo exec`,
//! `run`, started by other `docker exec`s) never reach it, nor does a process the hook left
//! behind (its parent gone, it hangs under the broker, a subreaper), even while the hook
//! still runs. Every root
//! command is an exec of the broker's tree, so the guard's exec audit records it like any other;
//! the broker also prints one line per request, so the hook's output says what ran as root.

use std::ffi::OsString;
use std::io::{self, BufRead, Read, Write};
use std::os::fd::OwnedFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The variable that names the broker's socket in the hook's environment.
pub const SOCKET_VAR: &str = "YOLO_SUDO";
/// The variable that gives the broker (not the hook) the mark yolo looks for before each
/// record the broker writes on stderr; the hook cannot read a root process's environment, so
/// it cannot forge a record.
pub const MARK_VAR: &str = "YOLO_SUDO_MARK";
/// Root's `PATH`, as Debian's sudo sets it (`secure_path`).
const SECURE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// The longest request line read (argv and environment), a bound on the broker's memory.
const MAX_REQUEST: usize = 4 << 20;
/// How many parents a caller may have below the hook's command (a loop guard).
const MAX_DEPTH: usize = 4096;
/// Variables a root command keeps from its caller without `-E`.
const KEPT: &[&str] = &[
    "TERM",
    "COLORTERM",
    "LANG",
    "LANGUAGE",
    "TZ",
    "DISPLAY",
    "DEBIAN_FRONTEND",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "YOLO_EXEC_ID",
];

/// One request, client to broker (a JSON line, with the three descriptors attached).
#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Request {
    argv: Vec<String>,
    cwd: String,
    env: Vec<(String, String)>,
    /// `-E`: the caller's whole environment.
    keep_env: bool,
}

/// The broker's answer.
#[derive(serde::Serialize, serde::Deserialize, Debug)]
struct Reply {
    code: Option<i32>,
    refused: Option<String>,
}

/// `sudo ARGS`: what the client does with its arguments.
#[derive(Debug, PartialEq)]
enum Parsed {
    Run {
        argv: Vec<String>,
        keep_env: bool,
    },
    /// `-v`, `-k`, `-K`: nothing to run, success.
    Nothing,
    Refuse(String),
}

/// sudo's common flags; what yolo's broker cannot honour is refused with a reason.
fn parse(args: &[String]) -> Parsed {
    let mut keep_env = false;
    let mut shell = None::<bool>; // Some(login)
    let mut only = false;
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if arg == "--" {
            i += 1;
            break;
        }
        if !arg.starts_with('-') || arg == "-" {
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = long
                .split_once('=')
                .map_or((long, None), |(n, v)| (n, Some(v)));
            match name {
                "preserve-env" => keep_env = true,
                "set-home" | "non-interactive" | "reset-timestamp" => {}
                "login" => shell = Some(true),
                "shell" => shell = Some(false),
                "validate" | "remove-timestamp" => only = true,
                "user" => {
                    let user = match value {
                        Some(v) => v.to_string(),
                        None => {
                            i += 1;
                            args.get(i).cloned().unwrap_or_default()
                        }
                    };
                    if !is_root(&user) {
                        return refuse_user(&user);
                    }
                }
                _ => return Parsed::Refuse(format!("the option --{name} is not supported")),
            }
            i += 1;
            continue;
        }
        let flags: Vec<char> = arg[1..].chars().collect();
        let mut j = 0;
        while j < flags.len() {
            match flags[j] {
                'E' => keep_env = true,
                'H' | 'n' | 'S' | 'A' | 'b' => {}
                'k' | 'K' | 'v' => only = true,
                'i' => shell = Some(true),
                's' => shell = Some(false),
                'u' => {
                    let rest: String = flags[j + 1..].iter().collect();
                    let user = if rest.is_empty() {
                        i += 1;
                        args.get(i).cloned().unwrap_or_default()
                    } else {
                        rest
                    };
                    if !is_root(&user) {
                        return refuse_user(&user);
                    }
                    j = flags.len();
                    continue;
                }
                other => return Parsed::Refuse(format!("the option -{other} is not supported")),
            }
            j += 1;
        }
        i += 1;
    }
    let rest = &args[i.min(args.len())..];
    let argv = match shell {
        Some(login) if rest.is_empty() => {
            let mut argv = vec!["/bin/sh".to_string()];
            if login {
                argv.push("-l".into());
            }
            argv
        }
        Some(_) => vec!["/bin/sh".into(), "-c".into(), rest.join(" ")],
        None if rest.is_empty() && only => return Parsed::Nothing,
        None if rest.is_empty() => {
            return Parsed::Refuse("usage: sudo [-EHn] [-u root] [--] COMMAND [ARGS...]".into())
        }
        None => rest.to_vec(),
    };
    Parsed::Run { argv, keep_env }
}

fn is_root(user: &str) -> bool {
    matches!(user, "root" | "0" | "#0")
}

fn refuse_user(user: &str) -> Parsed {
    Parsed::Refuse(format!(
        "yolo's sudo runs commands as root only, not as {user:?}; use `su` or `setpriv` as root (`sudo setpriv --reuid=... -- COMMAND`)"
    ))
}

/// `sudo ARGS` in a hook: ask the broker, exit with the command's status.
pub fn client(args: &[OsString]) -> i32 {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (argv, keep_env) = match parse(&args) {
        Parsed::Run { argv, keep_env } => (argv, keep_env),
        Parsed::Nothing => return 0,
        Parsed::Refuse(why) => {
            eprintln!("sudo: {why}");
            return 1;
        }
    };
    let Some(socket) = std::env::var_os(SOCKET_VAR) else {
        eprintln!("sudo: yolo gives root only to the repository's lifecycle hooks while they run (no-new-privileges keeps every other process from becoming root); run root steps in the Dockerfile or a hook");
        return 1;
    };
    let request = Request {
        argv,
        cwd: std::env::current_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "/".into()),
        env: std::env::vars_os()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect(),
        keep_env,
    };
    match ask(&socket, &request) {
        Ok(Reply {
            code: Some(code), ..
        }) => code,
        Ok(Reply {
            refused: Some(why), ..
        }) => {
            eprintln!("sudo: refused: {why}");
            1
        }
        Ok(_) => {
            eprintln!("sudo: the broker gave no answer");
            1
        }
        Err(e) => {
            eprintln!("sudo: no root broker to ask ({e}): yolo gives root only to the repository's lifecycle hooks, and only while they run");
            1
        }
    }
}

fn ask(socket: &OsString, request: &Request) -> io::Result<Reply> {
    let stream = UnixStream::connect_addr(&SocketAddr::from_abstract_name(socket.as_bytes())?)?;
    // The kernel attaches the sender's credentials to what a socket with this option sends,
    // whether or not the broker's end has it yet (it checks the sender: `recv_request`).
    super::wire::pass_credentials(&stream)?;
    let mut line = serde_json::to_vec(request)?;
    line.push(b'\n');
    super::wire::send_fds(&stream, &line, &[0, 1, 2])?;
    let mut answer = String::new();
    io::BufReader::new(&stream).read_line(&mut answer)?;
    serde_json::from_str(&answer).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The hook's user as `docker exec --user` takes it: `name`, `uid`, `name:group`, `uid:gid`.
#[derive(Debug, PartialEq)]
struct Identity {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
    name: String,
    home: String,
}

fn identity(spec: &str, passwd: &str, group: &str) -> Result<Identity, String> {
    let (user, group_spec) = spec
        .split_once(':')
        .map_or((spec, None), |(u, g)| (u, Some(g)));
    let entries: Vec<Vec<&str>> = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .filter(|f| f.len() >= 7)
        .collect();
    let entry = entries
        .iter()
        .find(|f| f[0] == user || (user.parse::<u32>().is_ok() && f[2] == user));
    let (uid, mut gid, name, home) = match (entry, user.parse::<u32>()) {
        (Some(f), _) => (
            f[2].parse().map_err(|_| format!("bad uid for {user}"))?,
            f[3].parse().unwrap_or(0),
            f[0].to_string(),
            f[5].to_string(),
        ),
        (None, Ok(uid)) => (uid, 0, String::new(), "/".to_string()),
        (None, Err(_)) => return Err(format!("no user {user:?} in the container's /etc/passwd")),
    };
    let groups_of: Vec<Vec<&str>> = group
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .filter(|f| f.len() >= 4)
        .collect();
    if let Some(g) = group_spec {
        gid = match g.parse::<u32>() {
            Ok(n) => n,
            Err(_) => groups_of
                .iter()
                .find(|f| f[0] == g)
                .and_then(|f| f[2].parse().ok())
                .ok_or_else(|| format!("no group {g:?} in the container's /etc/group"))?,
        };
    }
    let mut groups = vec![gid];
    if !name.is_empty() {
        for f in &groups_of {
            if f[3].split(',').any(|m| m == name) {
                if let Ok(g) = f[2].parse() {
                    if !groups.contains(&g) {
                        groups.push(g);
                    }
                }
            }
        }
    }
    Ok(Identity {
        uid,
        gid,
        groups,
        name,
        home,
    })
}

/// `yolo-guard sudo-hook --user USER -- PROGRAM [ARGS...]`: run the hook's command as USER
/// and serve its `sudo` until it exits; exits with its status.
pub fn broker(args: &[OsString]) -> i32 {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (user, program) = match args.as_slice() {
        [flag, user, sep, program @ ..]
            if flag == "--user" && sep == "--" && !program.is_empty() =>
        {
            (user.clone(), program.to_vec())
        }
        _ => {
            eprintln!("usage: yolo-guard sudo-hook --user USER -- PROGRAM [ARGS...]");
            return 64;
        }
    };
    match serve(&user, &program) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("yolo: the hook's sudo broker: {e}");
            126
        }
    }
}

fn serve(user: &str, program: &[String]) -> io::Result<i32> {
    // Orphans of the hook's commands come to the broker rather than to PID 1, so a root command
    // that leaves its process group (`setsid`, a daemon's double fork) is still found at the
    // end; and the broker is not dumpable, so its root commands (without CAP_SYS_PTRACE) cannot
    // read its environment (the records' mark) or trace it.
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let who =
        identity(user, &read("/etc/passwd"), &read("/etc/group")).map_err(io::Error::other)?;
    let mut token = [0u8; 12];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut token)?;
    let token: String = token.iter().map(|b| format!("{b:02x}")).collect();
    let name = format!("yolo-sudo-{token}");
    let listener = UnixListener::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes())?)?;
    listener.set_nonblocking(true)?;
    // Accepted connections inherit it: credentials come with a request's very first bytes.
    super::wire::pass_credentials(&listener)?;
    let folder = link_folder(&token)?;
    let path = match std::env::var("PATH") {
        Ok(p) if !p.is_empty() => format!("{}:{p}", folder.display()),
        _ => format!("{}:{SECURE_PATH}", folder.display()),
    };
    let mark: Option<Arc<str>> = std::env::var(MARK_VAR).ok().map(Arc::from);
    // When the broker started, before any root command can: where yolo's own sweep starts if
    // the broker ends without its own (`sweep_main`).
    let me = std::process::id() as i32;
    if let Some(started) = process(me).map(|p| p.start) {
        record(mark.as_deref(), serde_json::json!({ "started": started }));
    }
    let mut command = Command::new(&program[0]);
    command
        .args(&program[1..])
        .env_remove(MARK_VAR)
        .env(SOCKET_VAR, &name)
        .env("PATH", path)
        .env("HOME", &who.home);
    if !who.name.is_empty() {
        command.env("USER", &who.name).env("LOGNAME", &who.name);
    }
    let (uid, gid, groups) = (who.uid, who.gid, who.groups.clone());
    // SAFETY: only async-signal-safe calls (setgroups, setgid, setuid) between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                || libc::setgid(gid) != 0
                || libc::setuid(uid) != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut hook = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&folder);
            return Err(io::Error::new(
                e.kind(),
                format!("cannot run {:?} as {user}: {e}", program[0]),
            ));
        }
    };
    let root = hook.id() as i32;
    let running: Arc<Mutex<Running>> = Arc::default();
    let mut served = Vec::new();
    let mut rounds = 0u64;
    let status = loop {
        if let Some(status) = hook.try_wait()? {
            break status;
        }
        rounds += 1;
        if rounds.is_multiple_of(40) {
            reap_orphans(me, root, &running);
        }
        match listener.accept() {
            Ok((stream, _)) => {
                let (running, mark) = (running.clone(), mark.clone());
                served.push(std::thread::spawn(move || {
                    let _ = answer(stream, root, &running, mark.as_deref());
                }));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(e),
        }
    };
    // The hook is over: nobody may ask again (a request answered from now on starts nothing),
    // and what it started as root ends with it.
    drop(listener);
    let _ = std::fs::remove_dir_all(&folder);
    {
        let mut running = running.lock().unwrap_or_else(|p| p.into_inner());
        running.closed = true;
        for child in &running.children {
            // SAFETY: kill(2) on the process group the broker made for this command.
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGKILL);
            }
        }
    }
    for thread in served {
        let _ = thread.join();
    }
    let (ended, complete) = sweep(|pid, table| pid != me && below(pid, me, table));
    if ended > 0 {
        eprintln!("yolo: sudo: ended {ended} root process(es) the hook's commands left running (root lasts as long as the hook)");
    }
    record(
        mark.as_deref(),
        serde_json::json!({ "swept": ended, "complete": complete }),
    );
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// The root commands running now; `closed` once the hook has ended (none may start then).
#[derive(Default)]
struct Running {
    children: Vec<Child>,
    closed: bool,
}

/// Reap the orphans that came to the broker (a subreaper) and ended while the hook runs, so a
/// long hook's daemons do not pile up as zombies; never the hook itself or a root command
/// (their own waits take those).
fn reap_orphans(me: i32, hook: i32, running: &Mutex<Running>) {
    let busy: Vec<i32> = running
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .children
        .iter()
        .map(|c| c.id() as i32)
        .collect();
    for p in processes() {
        if p.ppid == me && p.zombie && p.pid != hook && !busy.contains(&p.pid) {
            let mut status = 0;
            // SAFETY: waitpid on one ended child with a valid out-pointer.
            unsafe { libc::waitpid(p.pid, &mut status, libc::WNOHANG) };
        }
    }
}

/// One process as `/proc/PID/stat` and `status` show it.
struct Process {
    pid: i32,
    ppid: i32,
    /// Clock ticks after boot.
    start: u64,
    /// Root in any of its uids, or a capability in its permitted, effective or ambient set:
    /// what could act as root, or become root again (`PR_SET_KEEPCAPS`). Without either,
    /// no-new-privileges keeps a process from ever regaining root.
    privileged: bool,
    /// Ended, not yet reaped: state `Z` with no thread left (a process whose main thread
    /// exited while others run shows `Z` too, and is alive).
    zombie: bool,
}

fn processes() -> Vec<Process> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(process)
        .collect()
}

fn process(pid: i32) -> Option<Process> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's name in parentheses: state, ppid, ... starttime is field 22.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split(' ').collect();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let root = field("Uid:").split_whitespace().any(|u| u == "0");
    let capable = ["CapPrm:", "CapEff:", "CapAmb:"]
        .iter()
        .any(|c| u64::from_str_radix(&field(c), 16).unwrap_or(0) != 0);
    Some(Process {
        pid,
        ppid: fields.get(1)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
        privileged: root || capable,
        zombie: fields.first() == Some(&"Z") && field("Threads:").parse::<u32>().unwrap_or(0) <= 1,
    })
}

/// Whether `pid` hangs below `ancestor` in `table`.
fn below(pid: i32, ancestor: i32, table: &[Process]) -> bool {
    let mut at = pid;
    for _ in 0..MAX_DEPTH {
        match table.iter().find(|p| p.pid == at) {
            Some(p) if p.ppid == ancestor => return true,
            Some(p) if p.ppid > 1 => at = p.ppid,
            _ => return false,
        }
    }
    false
}

/// Kill every privileged, living process `chosen` picks: each is stopped as it is found (a
/// stopped process cannot fork), round after round until a round finds none it has not
/// stopped, then all are killed and what comes to this process is reaped. Returns how many,
/// and whether the rounds ran out before (a process forking faster than they stop it; the
/// caller treats that as a failure).
fn sweep(chosen: impl Fn(i32, &[Process]) -> bool) -> (usize, bool) {
    let mut found = std::collections::BTreeSet::new();
    let mut complete = false;
    for _ in 0..200 {
        reap();
        let table = processes();
        let new: Vec<i32> = table
            .iter()
            .filter(|p| {
                p.privileged && !p.zombie && !found.contains(&p.pid) && chosen(p.pid, &table)
            })
            .map(|p| p.pid)
            .collect();
        if new.is_empty() {
            complete = true;
            break;
        }
        for pid in new {
            // SAFETY: kill(2) with integer arguments.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
            found.insert(pid);
        }
    }
    for pid in &found {
        // SAFETY: kill(2) with integer arguments.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    std::thread::sleep(Duration::from_millis(20));
    reap();
    (found.len(), complete)
}

/// Reap this process's ended children (orphans that came to it as a subreaper).
fn reap() {
    let mut status = 0;
    // SAFETY: waitpid with a valid out-pointer, never blocking.
    while unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } > 0 {}
}

/// `yolo-guard sudo-sweep --since TICKS`: what yolo runs when a hook's broker did not report
/// its own sweep (it was killed, by one of its root commands perhaps): kill every privileged
/// process of this container (this mount namespace) that started at or after TICKS (the
/// broker's own start, in clock ticks after boot, from its first record), except this one and
/// its parents. Prints how many.
pub fn sweep_main(args: &[OsString]) -> i32 {
    let from = match args {
        [flag, ticks] if flag == "--since" => ticks.to_str().and_then(|s| s.parse::<u64>().ok()),
        _ => None,
    };
    let Some(from) = from else {
        eprintln!("usage: yolo-guard sudo-sweep --since TICKS");
        return 64;
    };
    // This container's processes by their cgroup, which anyone may read (a process can hide
    // its namespaces from a reader without CAP_SYS_PTRACE by making itself not dumpable, not
    // its cgroup; and the container cannot move a process to another: cgroupfs is read-only
    // in it). One whose cgroup cannot be read counts as this container's.
    let cgroup = |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok();
    let me = std::process::id() as i32;
    let mine = cgroup(me);
    let (ended, complete) = sweep(|pid, table| {
        let Some(p) = table.iter().find(|p| p.pid == pid) else {
            return false;
        };
        p.start >= from
            && pid != me
            && !below(me, pid, table)
            && cgroup(pid).is_none_or(|c| Some(c) == mine)
    });
    println!("{ended}");
    if complete {
        0
    } else {
        eprintln!("yolo-guard: root processes kept forking faster than they could be stopped");
        1
    }
}

/// A root-owned folder holding `sudo`, a link to this program, for the hook's `PATH`.
fn link_folder(token: &str) -> io::Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let mut last = io::Error::other("no writable folder");
    for base in ["/run", "/tmp", "/dev/shm"] {
        let folder = std::path::Path::new(base).join(format!(".yolo-sudo-{token}"));
        let made = std::fs::create_dir(&folder)
            .and_then(|()| {
                std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755))
            })
            .and_then(|()| {
                std::os::unix::fs::symlink(yolo_protocol::SHIM_PATH, folder.join("sudo"))
            });
        match made {
            Ok(()) => return Ok(folder),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&folder);
                last = e;
            }
        }
    }
    Err(last)
}

/// Serve one connection: the caller must descend from the hook's command.
fn answer(
    stream: UnixStream,
    root: i32,
    running: &Mutex<Running>,
    mark: Option<&str>,
) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    let reply = |stream: &UnixStream, reply: Reply| -> io::Result<()> {
        let mut line = serde_json::to_vec(&reply)?;
        line.push(b'\n');
        (&*stream).write_all(&line)
    };
    let refuse = |pid: i32| {
        eprintln!("yolo: sudo refused to process {pid}: not a process of this hook");
        record(
            mark,
            serde_json::json!({"refused": "not a process of the hook", "pid": pid}),
        );
        reply(
            &stream,
            Reply {
                code: None,
                refused: Some("only the lifecycle hook's own processes may use sudo, and only while the hook runs".into()),
            },
        )
    };
    // Who connected, and then who sent the request: not the same process when the connection
    // was handed on or taken from a hook's process (`pidfd_getfd` by the same user).
    let pid = super::wire::peer_pid(&stream)?;
    if !descends_from(pid, root) {
        return refuse(pid);
    }
    super::wire::pass_credentials(&stream)?;
    // A connection that never sends must not hold the broker past the hook's end.
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let (bytes, fds, sender) = recv_request(&stream)?;
    match sender {
        Some(sender) if descends_from(sender, root) => {}
        other => return refuse(other.unwrap_or(0)),
    }
    let request: Request = serde_json::from_slice(&bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let [stdin, stdout, stderr]: [OwnedFd; 3] = fds
        .try_into()
        .map_err(|_| io::Error::other("three descriptors expected"))?;
    eprintln!(
        "yolo: sudo (as root): {}",
        request
            .argv
            .iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut command = Command::new(&request.argv[0]);
    command
        .args(&request.argv[1..])
        .env_clear()
        .envs(root_env(&request))
        .current_dir(if std::path::Path::new(&request.cwd).is_dir() {
            request.cwd.as_str()
        } else {
            "/"
        })
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        // A group of its own, so the hook's end takes what it started too.
        .process_group(0);

    let started = chrono::Utc::now();
    let clock = std::time::Instant::now();
    let done = |code: i32| {
        record(
            mark,
            serde_json::json!({
                "argv": request.argv,
                "cwd": request.cwd,
                "started": started.to_rfc3339(),
                "exit_code": code,
                "duration_ms": clock.elapsed().as_millis() as u64,
            }),
        );
        reply(
            &stream,
            Reply {
                code: Some(code),
                refused: None,
            },
        )
    };
    // Started and listed under the lock the hook's end takes: a request answered after the
    // hook ended starts nothing.
    let mut list = running.lock().unwrap_or_else(|p| p.into_inner());
    if list.closed {
        drop(list);
        return refuse(pid);
    }
    let child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            drop(list);
            let code = if e.kind() == io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            let _ = writeln!(io::stderr(), "sudo: {}: {e}", request.argv[0]);
            return done(code);
        }
    };
    let id = child.id();
    list.children.push(child);
    drop(list);
    // Wait without holding the lock, so the broker can kill it when the hook ends.
    let mut status = 0;
    // SAFETY: waitpid on our own child's pid with a valid out-pointer.
    let rc = unsafe { libc::waitpid(id as i32, &mut status, 0) };
    running
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .children
        .retain(|c| c.id() != id);
    let code = if rc < 0 {
        1
    } else if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    done(code)
}

/// One record for yolo's audit log, on stderr after the mark, in one write.
fn record(mark: Option<&str>, value: serde_json::Value) {
    if let Some(mark) = mark {
        let line = format!("{mark}{value}\n");
        let _ = io::stderr().write_all(line.as_bytes());
    }
}

/// The environment a root command gets: root's own variables, sudo's, and the caller's
/// locale, terminal and proxy settings (all of the caller's with `-E`).
fn root_env(request: &Request) -> Vec<(String, String)> {
    let caller = |k: &str| {
        request
            .env
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    let mut env: Vec<(String, String)> = if request.keep_env {
        request.env.clone()
    } else {
        request
            .env
            .iter()
            .filter(|(k, _)| KEPT.contains(&k.as_str()) || k.starts_with("LC_"))
            .cloned()
            .collect()
    };
    let mut set = |k: &str, v: String| {
        env.retain(|(n, _)| n != k);
        env.push((k.to_string(), v));
    };
    if !request.keep_env {
        set("PATH", SECURE_PATH.into());
        set("HOME", "/root".into());
    }
    set("USER", "root".into());
    set("LOGNAME", "root".into());
    set("SUDO_USER", caller("USER").unwrap_or_default());
    set("SUDO_COMMAND", request.argv.join(" "));
    env.retain(|(k, _)| k != SOCKET_VAR);
    env
}

/// Whether `pid`'s line of parents reaches `root` (the hook's command). A process the hook
/// left behind hangs under the broker (a subreaper) once its parent is gone, and never does.
fn descends_from(pid: i32, root: i32) -> bool {
    let mut at = pid;
    for _ in 0..MAX_DEPTH {
        if at == root {
            return true;
        }
        if at <= 1 {
            return false;
        }
        match parent(at) {
            Some(p) => at = p,
            None => return false,
        }
    }
    false
}

fn parent(pid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The request line, the descriptors sent with its first bytes, and the one process that
/// sent all of it (`None` when two did, or the kernel named none).
fn recv_request(stream: &UnixStream) -> io::Result<(Vec<u8>, Vec<OwnedFd>, Option<i32>)> {
    let mut buf = vec![0u8; 64 * 1024];
    let (n, fds, mut sender) = super::wire::recv_fds(stream, &mut buf, 8)?;
    buf.truncate(n);
    // The rest of the line, if it did not come in one piece: from the same sender only.
    while n > 0 && !buf.ends_with(b"\n") && buf.len() <= MAX_REQUEST {
        let mut more = vec![0u8; 64 * 1024];
        let (m, _extra, from) = super::wire::recv_fds(stream, &mut more, 1)?;
        if m == 0 {
            break;
        }
        if from != sender {
            sender = None;
        }
        buf.extend_from_slice(&more[..m]);
    }
    Ok((buf, fds, sender))
}

/// Whether this program was called as `sudo` (the link in the hook's `PATH`).
pub fn called_as_sudo(argv0: &std::ffi::OsStr) -> bool {
    std::path::Path::new(argv0)
        .file_name()
        .is_some_and(|n| n == "sudo")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection made by this process, written to by another (as when a descriptor of it was
    /// handed on, or taken with `pidfd_getfd`): the request's sender is the writer; bytes of two
    /// writers have no sender.
    #[test]
    fn a_requests_sender_is_the_process_that_wrote_it_not_the_one_that_connected() {
        use std::os::fd::AsRawFd;
        let write_from_child = |end: &UnixStream, text: &str| {
            let fd = end.as_raw_fd();
            let mut child = Command::new("sh");
            child.args(["-c", &format!("printf '{text}' >&3")]);
            // SAFETY: dup2 and fcntl only, between fork and exec.
            unsafe {
                child.pre_exec(move || {
                    let moved = if fd == 3 {
                        libc::fcntl(3, libc::F_SETFD, 0)
                    } else {
                        libc::dup2(fd, 3)
                    };
                    if moved < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let mut child = child.spawn().unwrap();
            let pid = child.id() as i32;
            assert!(child.wait().unwrap().success());
            pid
        };
        let (ours, broker) = UnixStream::pair().unwrap();
        assert_eq!(
            super::super::wire::peer_pid(&broker).unwrap(),
            std::process::id() as i32
        );
        super::super::wire::pass_credentials(&broker).unwrap();
        let writer = write_from_child(&ours, "{}\\n");
        let (line, fds, sender) = recv_request(&broker).unwrap();
        assert_eq!((line.as_slice(), fds.len()), (&b"{}\n"[..], 0));
        assert_eq!(sender, Some(writer));

        // Half a line from the child, the rest from this process: no one sender.
        write_from_child(&ours, "{\"a\":");
        std::thread::sleep(Duration::from_millis(50));
        (&ours).write_all(b"1}\n").unwrap();
        let (line, _, sender) = recv_request(&broker).unwrap();
        assert_eq!(line, b"{\"a\":1}\n");
        assert_eq!(sender, None);
    }

    fn run(args: &[&str]) -> Parsed {
        parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn common_flags_are_understood() {
        let cmd = |argv: &[&str], keep_env| Parsed::Run {
            argv: argv.iter().map(|a| a.to_string()).collect(),
            keep_env,
        };
        assert_eq!(
            run(&["apt-get", "-y", "install"]),
            cmd(&["apt-get", "-y", "install"], false)
        );
        assert_eq!(run(&["-E", "--", "ls", "-l"]), cmd(&["ls", "-l"], true));
        assert_eq!(run(&["-EHn", "-u", "root", "id"]), cmd(&["id"], true));
        assert_eq!(run(&["-uroot", "--user=0", "id"]), cmd(&["id"], false));
        assert_eq!(
            run(&["-s", "echo", "hi"]),
            cmd(&["/bin/sh", "-c", "echo hi"], false)
        );
        assert_eq!(run(&["-i"]), cmd(&["/bin/sh", "-l"], false));
        assert_eq!(run(&["-v"]), Parsed::Nothing);
        assert!(
            matches!(run(&["-u", "postgres", "psql"]), Parsed::Refuse(w) if w.contains("root only"))
        );
        assert!(matches!(run(&["-g", "adm", "id"]), Parsed::Refuse(_)));
        assert!(matches!(run(&[]), Parsed::Refuse(w) if w.starts_with("usage")));
    }

    #[test]
    fn the_hooks_user_is_read_as_docker_reads_it() {
        let passwd =
            "root:x:0:0:root:/root:/bin/bash\nvscode:x:1000:1000::/home/vscode:/bin/bash\n";
        let group = "root:x:0:\ndocker:x:999:vscode,other\nvscode:x:1000:\n";
        let me = identity("vscode", passwd, group).unwrap();
        assert_eq!(
            (me.uid, me.gid, me.groups.clone()),
            (1000, 1000, vec![1000, 999])
        );
        assert_eq!(me.home, "/home/vscode");
        assert_eq!(identity("1000", passwd, group).unwrap().name, "vscode");
        let odd = identity("4242:0", passwd, group).unwrap();
        assert_eq!((odd.uid, odd.gid, odd.home.as_str()), (4242, 0, "/"));
        assert!(identity("nobody-here", passwd, group).is_err());
    }

    #[test]
    fn root_commands_get_roots_environment_and_the_callers_locale() {
        let request = Request {
            argv: vec!["id".into()],
            cwd: "/".into(),
            env: vec![
                ("PATH".into(), "/evil:/usr/bin".into()),
                ("LC_ALL".into(), "C.UTF-8".into()),
                ("USER".into(), "vscode".into()),
                ("LD_PRELOAD".into(), "/tmp/x.so".into()),
                (SOCKET_VAR.into(), "yolo-sudo-1".into()),
            ],
            keep_env: false,
        };
        let env = root_env(&request);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("PATH"), Some(SECURE_PATH));
        assert_eq!(get("LC_ALL"), Some("C.UTF-8"));
        assert_eq!(get("LD_PRELOAD"), None);
        assert_eq!(get(SOCKET_VAR), None);
        assert_eq!(get("SUDO_USER"), Some("vscode"));
        assert_eq!(get("HOME"), Some("/root"));
    }

    #[test]
    fn only_descendants_of_the_hook_are_served() {
        let me = std::process::id() as i32;
        let parent = parent(me).unwrap();
        assert!(descends_from(me, parent));
        assert!(descends_from(me, me));
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        assert!(!descends_from(me, child.id() as i32));
        assert!(descends_from(child.id() as i32, me));
        let _ = child.kill();
        let _ = child.wait();
    }
}
