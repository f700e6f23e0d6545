//! `yolo-guard`: the program in the guard container, and the shim in the agent's. Three verbs,
//! parsed by hand so this binary carries no CLI framework: `run --config FILE` (the guard
//! itself, PID 1 of the namespace), `ctl '<json>'` (one control request, run by the host
//! through `docker exec`), `shim PROGRAM [ARGS...]` (the exec audit's shim, see `exec::shim`)
//! and `start PROGRAM [ARGS...]` (the same shim as the agent container's first program: it
//! waits for the guard to be ready instead of failing at once), and `install DEST` (copy this
//! program to DEST, executable: how a Pod's init container hands the shim to the agent, since
//! the guard image has no `cp` or any other program). `sudo-hook --user USER -- PROGRAM...` runs
//! a lifecycle hook with a root broker for its `sudo`, and called as `sudo` this program is that
//! `sudo` (see `exec::sudo`); `sudo-sweep --since TICKS` ends the root processes such a hook
//! left when its broker could not. `hold` keeps a network namespace alive for a guard to join
//! later (a spare, made ahead by the CLI: `yolo prepare`): it waits for a signal and exits.

const USAGE: &str = "usage: yolo-guard run --config FILE | yolo-guard ctl '<request json>' | \
                     yolo-guard shim PROGRAM [ARGS...] | yolo-guard start PROGRAM [ARGS...] | \
                     yolo-guard install DEST | yolo-guard hold | yolo-guard --version";

fn main() {
    let mut all = std::env::args_os();
    let argv0 = all.next().unwrap_or_default();
    let raw: Vec<std::ffi::OsString> = all.collect();
    // The `sudo` a lifecycle hook finds first on its PATH is a link to this program.
    if yolo_guard::exec::sudo::called_as_sudo(&argv0) {
        std::process::exit(yolo_guard::exec::sudo::client(&raw));
    }
    if raw.first().is_some_and(|verb| verb == "sudo-hook") {
        std::process::exit(yolo_guard::exec::sudo::broker(&raw[1..]));
    }
    if raw.first().is_some_and(|verb| verb == "sudo-sweep") {
        std::process::exit(yolo_guard::exec::sudo::sweep_main(&raw[1..]));
    }
    if raw.first().is_some_and(|verb| verb == "shim") {
        std::process::exit(yolo_guard::exec::shim::main(&raw[1..]));
    }
    if raw.first().is_some_and(|verb| verb == "start") {
        std::process::exit(yolo_guard::exec::shim::start(&raw[1..]));
    }
    let args: Vec<String> = raw
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let code = match args.as_slice() {
        ["run", "--config", path] => {
            limit_malloc_arenas();
            match yolo_guard::run(std::path::Path::new(path)) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("{}", yolo_guard::error_line(&e));
                    1
                }
            }
        }
        ["hold"] => hold(),
        ["ctl", request] => yolo_guard::control::ctl_main(request),
        ["install", dest] => match install(std::path::Path::new(dest)) {
            Ok(()) => 0,
            Err(e) => {
                let why = format!("cannot install itself at {dest}: {e}");
                eprintln!("{}", yolo_guard::error_line(&why));
                1
            }
        },
        ["--version"] => {
            println!("yolo-guard {}", env!("CARGO_PKG_VERSION"));
            0
        }
        _ => {
            eprintln!("{USAGE}");
            64
        }
    };
    std::process::exit(code);
}

/// One malloc arena for the whole guard: glibc gives each thread that allocates an arena of its
/// own, and the guard's dozen mostly idle threads each kept pages of theirs resident. None of
/// them allocates often enough to contend for the lock.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tunable; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Hold a network namespace for a guard to join later (a spare: the CLI's `engine::spares`).
/// Listens on the abstract socket `yolo_protocol::NETNS_HOLDER_SOCKET` of the namespace for
/// its guard, which connects at its start and keeps the connection for its life: this program
/// exits when that connection closes (the guard ended, however), or at SIGTERM, SIGINT or
/// SIGHUP. After the one connection nothing else is accepted: the agent, which joins later,
/// finds no listener. PID 1 of its container, which the kernel gives no default action for
/// those signals, so they are waited for explicitly.
fn hold() -> i32 {
    use std::io::Read;
    use std::os::linux::net::SocketAddrExt;
    // Before any thread exists, so the listener's thread inherits the mask.
    // SAFETY: the set is initialised by sigemptyset before use; sigprocmask only reads it.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    let listener =
        std::os::unix::net::SocketAddr::from_abstract_name(yolo_protocol::NETNS_HOLDER_SOCKET)
            .and_then(|addr| std::os::unix::net::UnixListener::bind_addr(&addr));
    let listener = match listener {
        Ok(listener) => listener,
        Err(e) => {
            let why = format!("cannot listen for its guard: {e}");
            eprintln!("{}", yolo_guard::error_line(&why));
            return 1;
        }
    };
    std::thread::spawn(move || {
        if let Ok((mut guard, _)) = listener.accept() {
            drop(listener);
            let mut buf = [0u8; 64];
            while matches!(guard.read(&mut buf), Ok(n) if n > 0) {}
        }
        std::process::exit(0);
    });
    let mut got = 0;
    // SAFETY: `set` was initialised above; sigwait writes the signal number to `got`.
    while unsafe { libc::sigwait(&set, &mut got) } != 0 {}
    0
}

/// Copy the running program to `dest` with mode 0755.
fn install(dest: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::copy("/proc/self/exe", dest)?;
    std::fs::set_permissions(dest, std::fs::Permissions::from_mode(0o755))
}
