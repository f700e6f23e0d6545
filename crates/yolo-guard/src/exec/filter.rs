//! The seccomp filter the shim installs before any program of the agent runs.
//!
//! - `execve` and `execveat` become user notifications: the calling thread waits until the
//!   guard's supervisor has recorded the exec and lets it continue.
//! - `seccomp()` with `SECCOMP_FILTER_FLAG_NEW_LISTENER` fails with EPERM. Filters stack, and
//!   when two return USER_NOTIF the newest wins: a process that installed its own listener
//!   could answer its own execs and the supervisor would never see them. Other filters
//!   (a sandbox's own ERRNO/KILL rules) stay allowed: they can only stop an exec, not hide one.
//! - `process_vm_writev` and ptrace's writing requests fail with EPERM: one process of the agent
//!   must not change another's memory after the supervisor recorded its exec (the agent's
//!   `/proc` is read-only for the same reason, where the engine allows it). Debuggers in the
//!   agent can still read and trace; they cannot set breakpoints.
//! - A syscall of another ABI (32-bit `int 0x80`, x32) kills the process: its numbers differ,
//!   so its `execve` would not match the ones above.
//!
//! Written as classic BPF by hand: a few dozen instructions, jumps resolved from labels. `seccompiler` has no USER_NOTIF action
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
/// The low 32 bits of args[0] and args[1] (little-endian: the first word): `ptrace()`'s request
/// and `seccomp()`'s flags.
const ARG0_LOW: u32 = 16;
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

/// ptrace requests that write into another process (its memory, registers, signal state or
/// syscall), refused to the agent's processes: after the supervisor let a program go, another
/// process of the agent could otherwise change its arguments (or anything else) before it
/// reads them. Requests a kernel does not know fail with EIO anyway, so every architecture's
/// numbers are listed on every architecture.
const PTRACE_WRITES: [u32; 13] = [
    4,      // PTRACE_POKETEXT
    5,      // PTRACE_POKEDATA
    6,      // PTRACE_POKEUSER
    13,     // PTRACE_SETREGS (x86)
    15,     // PTRACE_SETFPREGS (x86)
    19,     // PTRACE_SETFPXREGS (x86)
    30,     // PTRACE_ARCH_PRCTL (x86_64: the thread's FS/GS base)
    34,     // PTRACE_POKEMTETAGS (arm64)
    0x4203, // PTRACE_SETSIGINFO
    0x4205, // PTRACE_SETREGSET
    0x420b, // PTRACE_SETSIGMASK
    0x4210, // PTRACE_SET_SYSCALL_USER_DISPATCH_CONFIG
    0x4212, // PTRACE_SET_SYSCALL_INFO
];

/// A jump target in [`program`], resolved to an offset once the program is laid out.
#[derive(Clone, Copy, PartialEq)]
enum Label {
    Next,
    Notify,
    Allow,
    Refuse,
    Seccomp,
    Ptrace,
}

/// The program. Kept as a value so a test can read it and the shim can install it.
pub fn program() -> Vec<sock_filter> {
    use Label::*;
    let new_listener = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as u32;
    let errno_eperm = libc::SECCOMP_RET_ERRNO | (libc::EPERM as u32);
    // (instruction, where it jumps when true, when false); labels mark the next instruction.
    enum Item {
        Ins(sock_filter, Label, Label),
        At(Label),
    }
    let ins = |i| Item::Ins(i, Next, Next);
    let jeq = |k, t, f| Item::Ins(jump(BPF_JEQ_K, k, 0, 0), t, f);
    let mut items = vec![
        ins(stmt(BPF_LD_W_ABS, ARCH)),
        // `Next` keeps the jump as written: past the kill when the architecture is ours.
        Item::Ins(jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0), Next, Next),
        ins(stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS)),
        ins(stmt(BPF_LD_W_ABS, NR)),
        Item::Ins(jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1), Next, Next),
        ins(stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS)),
        jeq(libc::SYS_execve as u32, Notify, Next),
        jeq(libc::SYS_execveat as u32, Notify, Next),
        jeq(libc::SYS_seccomp as u32, Seccomp, Next),
        jeq(libc::SYS_process_vm_writev as u32, Refuse, Next),
        jeq(libc::SYS_ptrace as u32, Ptrace, Next),
        ins(stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW)),
        Item::At(Seccomp),
        ins(stmt(BPF_LD_W_ABS, ARG1_LOW)),
        Item::Ins(jump(BPF_JSET_K, new_listener, 0, 0), Refuse, Allow),
        Item::At(Ptrace),
        ins(stmt(BPF_LD_W_ABS, ARG0_LOW)),
    ];
    for request in PTRACE_WRITES {
        items.push(jeq(request, Refuse, Next));
    }
    // The returns last: classic BPF jumps only forward.
    items.extend([
        Item::At(Allow),
        ins(stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW)),
        Item::At(Notify),
        ins(stmt(BPF_RET_K, libc::SECCOMP_RET_USER_NOTIF)),
        Item::At(Refuse),
        ins(stmt(BPF_RET_K, errno_eperm)),
    ]);
    // Lay out: the offset of every label, then each jump made relative to its instruction.
    let mut at = std::collections::HashMap::new();
    let mut n = 0usize;
    for item in &items {
        match item {
            Item::At(label) => {
                at.insert(*label as u8, n);
            }
            Item::Ins(..) => n += 1,
        }
    }
    let mut out = Vec::with_capacity(n);
    for item in items {
        let Item::Ins(mut i, t, f) = item else {
            continue;
        };
        let here = out.len();
        let offset = |label: Label, keep: u8| match label {
            Next => keep,
            label => u8::try_from(at[&(label as u8)] - here - 1).expect("a short jump"),
        };
        i.jt = offset(t, i.jt);
        i.jf = offset(f, i.jf);
        out.push(i);
    }
    out
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
