//! Signal facts shared by PID 1's signal thread (`init`) and the exec supervisor (`exec`):
//! the supervisor's alarm, which every other thread must keep blocked, and signals' names for
//! the log. Below both, so neither has to import the other for them.

/// The exec supervisor's alarm (a real-time signal glibc leaves free): the deadline timer of a
/// `waitpid` in its thread, blocked in every other (`init::block_signals`).
pub fn alarm_signal() -> libc::c_int {
    libc::SIGRTMIN() + 4
}

/// The signal's name for the log (`SIGTERM`).
pub fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGSYS => "SIGSYS",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}
