//! The seccomp filter the shim installs before any program of the agent runs.
//!
//! - `execve` and `execveat` become user notifications: the calling thread waits until the
//!   guard's supervisor has recorded the exec and lets it continue.
//! - `seccomp()` with `SECCOMP_FILTER_FLAG_NEW_LISTENER` fails with EPERM. Filters stack, and
//!   when two return USER_NOTIF the newest wins: a process that installed its own listener
//!   could answer its own execs and the supervisor would never see them. Other filters
//!   (a sandbox's own ERRNO/KILL rules) stay allowed: they can only stop an exec, not hide one.
//! - A syscall of another ABI (32-bit `int 0x80`, x32) kills the process: its numbers differ,
//!   so its `execve` would not match the ones above.
//!
//! Written as classic BPF by hand: a dozen instructions. `seccompiler` has no USER_NOTIF action
//! and no listener, and libseccomp is a C library the static guard binary would have to carry.

use libc::{sock_filter, sock_fprog};

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7; // AUDIT_ARCH_AARCH64

/// x32 system calls carry this bit on x86_64 (absent elsewhere: never set).
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
#[cfg(not(target_arch = "x86_64"))]
const X32_SYSCALL_BIT: u32 = 0x8000_0000; // above every syscall number: a no-op check

const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const BPF_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const BPF_JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const BPF_JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

/// Offsets in `struct seccomp_data`: nr, arch, then the instruction pointer and args[6].
const NR: u32 = 0;
const ARCH: u32 = 4;
/// The low 32 bits of args[1] (little-endian: the first word), where `seccomp()` takes flags.
const ARG1_LOW: u32 = 16 + 8;
#[cfg(not(target_endian = "little"))]
compile_error!("the filter reads the low word of a syscall argument as little-endian");

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The program. Kept as a value so a test can read it and the shim can install it.
pub fn program() -> Vec<sock_filter> {
    let execve = libc::SYS_execve as u32;
    let execveat = libc::SYS_execveat as u32;
    let seccomp = libc::SYS_seccomp as u32;
    let new_listener = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as u32;
    let errno_eperm = libc::SECCOMP_RET_ERRNO | (libc::EPERM as u32);
    vec![
        /* 0 */ stmt(BPF_LD_W_ABS, ARCH),
        /* 1 */ jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0),
        /* 2 */ stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        /* 3 */ stmt(BPF_LD_W_ABS, NR),
        /* 4 */ jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1),
        /* 5 */ stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        /* 6 */ jump(BPF_JEQ_K, execve, 2, 0),
        /* 7 */ jump(BPF_JEQ_K, execveat, 1, 0),
        /* 8 */ jump(BPF_JEQ_K, seccomp, 2, 1),
        /* 9 */ stmt(BPF_RET_K, libc::SECCOMP_RET_USER_NOTIF),
        /* 10 */ stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW),
        /* 11 */ stmt(BPF_LD_W_ABS, ARG1_LOW),
        /* 12 */ jump(BPF_JSET_K, new_listener, 0, 1),
        /* 13 */ stmt(BPF_RET_K, errno_eperm),
        /* 14 */ stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Install the filter on the calling thread (single-threaded callers only: the shim) and
/// return the listener. Sets no_new_privs first, which an unprivileged filter needs.
pub fn install() -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let mut filter = program();
    let prog = sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: plain prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let flags =
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    // SAFETY: `prog` points at `filter`, which outlives the call; the kernel copies it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &prog as *const sock_fprog,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just gave us this descriptor (close-on-exec).
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every jump lands inside the program and every path ends in a return.
    #[test]
    fn jumps_stay_inside_the_program() {
        let prog = program();
        for (i, ins) in prog.iter().enumerate() {
            if ins.code & 0x07 == libc::BPF_JMP as u16 {
                assert!(i + 1 + (ins.jt as usize) < prog.len(), "jt of {i}");
                assert!(i + 1 + (ins.jf as usize) < prog.len(), "jf of {i}");
            }
        }
        assert_eq!(prog.last().unwrap().code, BPF_RET_K);
    }
}
