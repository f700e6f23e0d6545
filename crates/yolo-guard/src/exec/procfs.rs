//! Reading a process of the agent: its memory (`process_vm_readv`, which needs SYS_PTRACE over
//! it) and its `/proc` files. Everything is bounded: the agent controls the sizes.

use std::collections::BTreeMap;
use std::io;

/// At most this many arguments are logged; `argc` then says how many there were.
pub const MAX_ARGS: usize = 4096;
/// At most this many bytes of one argument, and of all of them together.
pub const MAX_ARG: usize = 4096;
pub const MAX_ARGV_BYTES: usize = 128 * 1024;

/// Read `len` bytes at `addr` of `pid` (fewer when the range ends in unmapped memory).
fn read_mem(pid: i32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` covers `buf`; the kernel checks the remote range.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// A NUL-terminated string at `addr`, read a page at a time (a string may end right before an
/// unmapped page). `None` past `max` bytes: the result is then cut and flagged by the caller.
pub fn read_cstring(pid: i32, addr: u64, max: usize) -> io::Result<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    let mut at = addr;
    loop {
        let to_page_end = 4096 - (at % 4096) as usize;
        let want = to_page_end.min(max + 1 - out.len());
        let mut buf = vec![0u8; want];
        let n = read_mem(pid, at, &mut buf)?;
        if n == 0 {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        if let Some(end) = buf[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&buf[..end]);
            return Ok((out, false));
        }
        out.extend_from_slice(&buf[..n]);
        if out.len() > max {
            out.truncate(max);
            return Ok((out, true));
        }
        at += n as u64;
    }
}

/// The argv array at `addr`: the strings (each and all bounded), whether they were cut, and how
/// many there were (counted up to [`MAX_ARGS`] * 4).
pub fn read_argv(pid: i32, addr: u64) -> io::Result<(Vec<String>, bool, usize)> {
    let mut argv = Vec::new();
    let mut truncated = false;
    let mut total = 0usize;
    let mut argc = 0usize;
    if addr == 0 {
        return Ok((argv, false, 0));
    }
    let ptr_size = std::mem::size_of::<u64>();
    // Most commands have a few arguments: a small first read, larger ones after.
    let mut pointers = vec![0u8; 64 * ptr_size];
    let mut at = addr;
    'outer: loop {
        let n = read_mem(pid, at, &mut pointers)?;
        if n < ptr_size {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        for chunk in pointers[..n - n % ptr_size].chunks_exact(ptr_size) {
            let p = u64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
            if p == 0 {
                break 'outer;
            }
            argc += 1;
            if argc > MAX_ARGS * 4 {
                break 'outer;
            }
            if argv.len() >= MAX_ARGS || total >= MAX_ARGV_BYTES {
                truncated = true;
                continue;
            }
            let (bytes, cut) = read_cstring(pid, p, MAX_ARG)?;
            truncated |= cut;
            total += bytes.len();
            argv.push(String::from_utf8_lossy(&bytes).into_owned());
        }
        at += (n - n % ptr_size) as u64;
        if pointers.len() < 512 * ptr_size {
            pointers.resize(512 * ptr_size, 0);
        }
    }
    Ok((argv, truncated, argc))
}

/// What a program that has just been exec'd and not yet run holds on its new stack.
pub struct NewImage {
    /// Arguments, whether they were cut, how many there were.
    pub argv: (Vec<String>, bool, usize),
    /// `AT_EXECFN`: the filename the kernel executed.
    pub execfn: Option<String>,
    /// The loader variables in its environment, by name ([`is_loader_variable`]).
    pub loader_env: Vec<String>,
    /// The values of the ones that name code to load ([`VALUED`]).
    pub loader_values: BTreeMap<String, String>,
}

/// The loader variables whose values are recorded: they name the code the loader loads
/// (`LD_PRELOAD`, `LD_AUDIT`) or where it looks for it (`LD_LIBRARY_PATH`).
pub const VALUED: [&str; 3] = ["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH"];
/// Each value is cut to this many bytes.
pub const MAX_LOADER_VALUE: usize = 1024;

/// The values of the [`VALUED`] variables among NUL-separated `NAME=value` strings; a name
/// set more than once gets its values joined with `:` (glibc's loader takes the last, musl's
/// the first: both are named).
pub fn loader_values(strings: &[u8]) -> BTreeMap<String, String> {
    let mut values: BTreeMap<String, String> = BTreeMap::new();
    for entry in strings.split(|&b| b == 0) {
        let Some(eq) = entry.iter().position(|&b| b == b'=') else {
            continue;
        };
        let (name, value) = (&entry[..eq], &entry[eq + 1..]);
        let Some(name) = VALUED.iter().find(|v| v.as_bytes() == name) else {
            continue;
        };
        let value = String::from_utf8_lossy(&value[..value.len().min(MAX_LOADER_VALUE)]);
        let have = values.entry(name.to_string()).or_default();
        if have.len() < MAX_LOADER_VALUE {
            if !have.is_empty() {
                have.push(':');
            }
            have.push_str(&value);
            let mut cut = have.len().min(MAX_LOADER_VALUE);
            while !have.is_char_boundary(cut) {
                cut -= 1;
            }
            have.truncate(cut);
        }
    }
    values
}

/// The values of the [`VALUED`] variables of a program stopped at its exec: `strings` holds
/// the environment as far as [`environment_strings`] read it (names, not whole values), so the
/// few entries that are [`VALUED`] are read on their own, whole up to the cut.
fn valued_entries(pid: i32, env_ptrs: &[u64], strings: &[u8]) -> BTreeMap<String, String> {
    let Some(&first) = env_ptrs.first() else {
        return BTreeMap::new();
    };
    let mut entries = Vec::new();
    for &p in env_ptrs {
        let Some(rest) = p
            .checked_sub(first)
            .and_then(|at| strings.get(at as usize..))
        else {
            continue;
        };
        if !VALUED
            .iter()
            .any(|v| rest.starts_with(v.as_bytes()) && rest.get(v.len()) == Some(&b'='))
        {
            continue;
        }
        if let Ok((entry, _)) = read_cstring(pid, p, MAX_LOADER_VALUE + 32) {
            entries.extend_from_slice(&entry);
            entries.push(0);
        }
    }
    loader_values(&entries)
}

/// The program's root as it sees it (`/proc/<pid>/root`, `O_PATH`: nothing is read), to look
/// at files there with [`open_in_root`].
pub fn root_of(pid: i32) -> Option<std::os::fd::OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(format!("/proc/{pid}/root"))
        .ok()
        .map(std::os::fd::OwnedFd::from)
}

/// Open `path` as the program whose root is `root` would: `..` and absolute symlinks stay in
/// that root (`RESOLVE_IN_ROOT`; a plain path through `/proc/<pid>/root` would resolve an
/// absolute symlink in the guard's own root), and without blocking (a FIFO the agent put
/// there must not hold the exec stop). Only regular files, and none of procfs or sysfs: in the
/// shared PID namespace `/proc/self` is the guard, so a link to `/proc/self/environ` would
/// otherwise make the guard record its own files. The file is first opened as a path only
/// (`O_PATH`: no device is opened, nothing blocks), checked, and then reopened for reading.
pub fn open_in_root(root: &std::os::fd::OwnedFd, path: &str) -> io::Result<std::fs::File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::fs::OpenOptionsExt;
    let path = std::ffi::CString::new(path.trim_start_matches('/'))
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a zeroed open_how is valid; the fields are set below.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: a valid descriptor, a NUL-terminated path and an open_how of its size.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just opened, ours.
    let at = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: stat and statfs are plain data; the descriptor is valid for the calls.
    let (mut st, mut fs): (libc::stat, libc::statfs) = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(at.as_raw_fd(), &mut st) } != 0
        || unsafe { libc::fstatfs(at.as_raw_fd(), &mut fs) } != 0
    {
        return Err(io::Error::last_os_error());
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(io::Error::other("not a regular file"));
    }
    if fs.f_type == libc::PROC_SUPER_MAGIC || fs.f_type == libc::SYSFS_MAGIC {
        return Err(io::Error::other("a file of procfs or sysfs"));
    }
    // Reopened through the guard's own /proc: the same inode, now for reading.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(format!("/proc/self/fd/{}", at.as_raw_fd()))
}

/// At most this many entries of `/etc/ld.so.preload` are recorded, each cut to
/// [`MAX_PRELOAD_ENTRY`] bytes, from its first [`PRELOAD_READ`] bytes.
pub const MAX_PRELOAD_ENTRIES: usize = 16;
pub const MAX_PRELOAD_ENTRY: usize = 256;
const PRELOAD_READ: usize = 4096;

/// `/etc/ld.so.preload` in `root`: `None` when there is none, else what it names (glibc reads
/// it as a list separated by blanks, tabs, newlines or colons), read once. The read is the
/// record: a file changed after it is the race docs/security-model.md describes. One that
/// exists and cannot be read says why in its one entry.
pub fn ld_so_preload(root: &std::os::fd::OwnedFd) -> Option<Vec<String>> {
    use std::io::Read;
    let mut file = match open_in_root(root, "etc/ld.so.preload") {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => return Some(vec![format!("(unreadable: {e})")]),
    };
    let mut buf = vec![0u8; PRELOAD_READ];
    let n = match file.read(&mut buf) {
        Ok(n) => n,
        Err(e) => return Some(vec![format!("(unreadable: {e})")]),
    };
    Some(preload_entries(&buf[..n]))
}

/// The entries of an `ld.so.preload` text.
pub fn preload_entries(text: &[u8]) -> Vec<String> {
    text.split(|b| b" \t\n:".contains(b))
        .filter(|e| !e.is_empty())
        .take(MAX_PRELOAD_ENTRIES)
        .map(|e| String::from_utf8_lossy(&e[..e.len().min(MAX_PRELOAD_ENTRY)]).into_owned())
        .collect()
}

/// The libraries named by path that the loader is told to preload: `/etc/ld.so.preload`'s
/// entries, then `LD_PRELOAD`'s (blank- or colon-separated) and `LD_AUDIT`'s (colon-separated)
/// that hold a `/` (a bare name is looked up in the library path, not named here); relative
/// ones under `cwd`. At most [`MAX_PRELOAD_ENTRIES`], each once.
pub fn preloaded_libraries(
    ld_so_preload: &[String],
    values: &BTreeMap<String, String>,
    cwd: &str,
) -> Vec<String> {
    let from_env = |name: &str, separators: &'static [u8]| {
        values
            .get(name)
            .map(|v| {
                v.split(|c: char| c.is_ascii() && separators.contains(&(c as u8)))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let mut out: Vec<String> = Vec::new();
    let named = ld_so_preload
        .iter()
        .cloned()
        .chain(from_env("LD_PRELOAD", b" \t:"))
        .chain(from_env("LD_AUDIT", b":"));
    for entry in named {
        if !entry.contains('/') || entry.starts_with('(') {
            continue;
        }
        let path = if entry.starts_with('/') {
            entry
        } else {
            format!("{}/{entry}", cwd.trim_end_matches('/'))
        };
        if !out.contains(&path) && out.len() < MAX_PRELOAD_ENTRIES {
            out.push(path);
        }
    }
    out
}

/// Environment variables the dynamic loader (glibc's `ld.so`, musl's) acts on to load or find
/// code other than the program's own: any `LD_*`, and glibc's `GCONV_PATH` (modules loaded by
/// `iconv`) and `GLIBC_TUNABLES`.
pub fn is_loader_variable(name: &[u8]) -> bool {
    name.starts_with(b"LD_") || name == b"GCONV_PATH" || name == b"GLIBC_TUNABLES"
}

/// At most this many loader variables are named, each cut to [`MAX_LOADER_NAME`] bytes: the
/// agent chooses the environment, and the record must stay small.
pub const MAX_LOADER_NAMES: usize = 32;
pub const MAX_LOADER_NAME: usize = 64;

/// The loader variables among NUL-separated `NAME=value` strings, by name, each once (past
/// [`MAX_LOADER_NAMES`], the last entry says how many more there were).
pub fn loader_names(strings: &[u8]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut more = 0usize;
    for entry in strings.split(|&b| b == 0) {
        let name = entry.split(|&b| b == b'=').next().unwrap_or_default();
        if !is_loader_variable(name) {
            continue;
        }
        let name = &name[..name.len().min(MAX_LOADER_NAME)];
        if !seen.insert(name.to_vec()) {
            continue;
        }
        if names.len() < MAX_LOADER_NAMES {
            names.push(String::from_utf8_lossy(name).into_owned());
        } else {
            more += 1;
        }
    }
    if more > 0 {
        names.push(format!("... and {more} more"));
    }
    names
}

/// The loader variables of `pid`'s environment from `/proc/<pid>/environ` (what the program
/// started with), for when its stack could not be read directly: names, and values of the
/// [`VALUED`] ones.
pub fn environ_loader(pid: i32) -> (Vec<String>, BTreeMap<String, String>) {
    read_bounded(&format!("/proc/{pid}/environ"), 16 << 20)
        .map(|bytes| (loader_names(&bytes), loader_values(&bytes)))
        .unwrap_or_default()
}

/// The environment strings of a program stopped at its exec, as far as their names go: they
/// lie one after another from the first pointer's string to the last one's (the kernel copied
/// them there, and nothing has run since), and a loader variable's name is short, so the last
/// string is read only [`NAME_BYTES`] in.
fn environment_strings(pid: i32, env_ptrs: &[u64]) -> Option<Vec<u8>> {
    const NAME_BYTES: usize = 64;
    let (Some(&first), Some(&last)) = (env_ptrs.first(), env_ptrs.last()) else {
        return Some(Vec::new());
    };
    let span = (last.checked_sub(first)? as usize).checked_add(NAME_BYTES)?;
    // The kernel caps what argv and the environment take of the stack; far below this.
    if span > 64 << 20 {
        return None;
    }
    let mut strings = vec![0u8; span];
    let got = read_mem(pid, first, &mut strings).ok()?;
    // A last string cut short is still a name's worth, or the stack's end.
    strings.truncate(got);
    Some(strings)
}

/// Read argv and `AT_EXECFN` straight from the new stack of a program stopped at its exec
/// (`PTRACE_EVENT_EXEC`: its stack pointer is at `argc`, then the argv and envp pointers,
/// then the auxiliary vector): a few `process_vm_readv` instead of opening /proc files.
/// `None` when the layout is not as expected (the caller falls back to /proc).
pub fn new_image(pid: i32) -> Option<NewImage> {
    let sp = stack_pointer(pid)?;
    let word = std::mem::size_of::<u64>();
    let mut block = vec![0u8; 8192];
    let n = read_mem(pid, sp, &mut block).ok()?;
    let words: Vec<u64> = block[..n - n % word]
        .chunks_exact(word)
        .map(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes")))
        .collect();
    let argc = *words.first()? as usize;
    // argv pointers, NULL, envp pointers, NULL, then (type, value) pairs up to AT_NULL.
    let argv_ptrs = words.get(1..1 + argc)?;
    if words.get(1 + argc) != Some(&0) {
        return None;
    }
    let env_end = 2 + argc + words.get(2 + argc..)?.iter().position(|&w| w == 0)?;
    let env_ptrs = &words[2 + argc..env_end];
    let env_strings = environment_strings(pid, env_ptrs)?;
    let loader_env = loader_names(&env_strings);
    let loader_values = if loader_env.iter().any(|n| VALUED.contains(&n.as_str())) {
        valued_entries(pid, env_ptrs, &env_strings)
    } else {
        BTreeMap::new()
    };
    const AT_EXECFN: u64 = 31;
    let execfn_ptr = words
        .get(env_end + 1..)?
        .chunks_exact(2)
        .take_while(|pair| pair[0] != 0)
        .find(|pair| pair[0] == AT_EXECFN)
        .map(|pair| pair[1]);
    // The argument strings lie one after another from argv[0]: one read for all of them.
    let mut argv = Vec::new();
    let mut truncated = false;
    if let (Some(&first), Some(&last)) = (argv_ptrs.first(), argv_ptrs.last()) {
        let span = (last.checked_sub(first)? as usize + MAX_ARG + 1).min(MAX_ARGV_BYTES + MAX_ARG);
        let mut strings = vec![0u8; span];
        let got = read_mem(pid, first, &mut strings).ok()?;
        let strings = &strings[..got];
        let mut total = 0;
        for &p in argv_ptrs {
            if argv.len() >= MAX_ARGS || total >= MAX_ARGV_BYTES {
                truncated = true;
                break;
            }
            let at = p.checked_sub(first)? as usize;
            let rest = strings.get(at..)?;
            let (bytes, cut) = match rest.iter().position(|&b| b == 0) {
                Some(end) if end <= MAX_ARG => (&rest[..end], false),
                Some(_) => (&rest[..MAX_ARG], true),
                // Not all in the block: read this one on its own.
                None => {
                    let (own, cut) = read_cstring(pid, p, MAX_ARG).ok()?;
                    truncated |= cut;
                    total += own.len();
                    argv.push(String::from_utf8_lossy(&own).into_owned());
                    continue;
                }
            };
            truncated |= cut;
            total += bytes.len();
            argv.push(String::from_utf8_lossy(bytes).into_owned());
        }
    }
    let execfn = match execfn_ptr {
        Some(p) => read_cstring(pid, p, MAX_ARG)
            .ok()
            .map(|(b, _)| String::from_utf8_lossy(&b).into_owned()),
        None => None,
    };
    Some(NewImage {
        argv: (argv, truncated, argc),
        execfn,
        loader_env,
        loader_values,
    })
}

/// The stack pointer of a thread stopped under ptrace.
fn stack_pointer(pid: i32) -> Option<u64> {
    let regs = registers(pid)?;
    #[cfg(target_arch = "x86_64")]
    return Some(regs.rsp);
    #[cfg(target_arch = "aarch64")]
    return Some(regs.sp);
}

/// The general registers of a thread stopped under ptrace (`PTRACE_GETREGSET`, which both
/// x86_64 and aarch64 have).
pub fn registers(pid: i32) -> Option<libc::user_regs_struct> {
    // SAFETY: user_regs_struct is plain data the kernel fills through the iovec.
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: &mut regs as *mut _ as *mut libc::c_void,
        iov_len: std::mem::size_of::<libc::user_regs_struct>(),
    };
    // SAFETY: PTRACE_GETREGSET writes at most iov_len bytes into `regs`.
    let rc = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGSET,
            pid,
            libc::NT_PRSTATUS as libc::c_long,
            &mut iov as *mut libc::iovec,
        )
    };
    (rc == 0).then_some(regs)
}

/// The signals pending for a thread stopped under ptrace, its own and its process's
/// (`PTRACE_PEEKSIGINFO` on both queues: two system calls, no /proc file), by name, each once.
pub fn pending_signals(tid: i32) -> Vec<String> {
    #[repr(C)]
    struct PeekArgs {
        off: u64,
        flags: u32,
        nr: i32,
    }
    const PEEKSIGINFO_SHARED: u32 = 1;
    const SIGINFO_SIZE: usize = 128;
    let mut names: Vec<String> = Vec::new();
    for flags in [0, PEEKSIGINFO_SHARED] {
        let mut buf = [0u8; SIGINFO_SIZE * 16];
        let mut args = PeekArgs {
            off: 0,
            flags,
            nr: 16,
        };
        // SAFETY: the kernel writes at most `nr` siginfo structures into `buf`.
        let n = unsafe {
            libc::ptrace(
                libc::PTRACE_PEEKSIGINFO,
                tid,
                &mut args as *mut PeekArgs,
                buf.as_mut_ptr(),
            )
        };
        for info in buf.chunks_exact(SIGINFO_SIZE).take(n.max(0) as usize) {
            let signo = i32::from_ne_bytes(info[..4].try_into().expect("4 bytes"));
            let name = crate::init::signals::signal_name(signo);
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// `/proc/<pid>/cmdline` as arguments, bounded like [`read_argv`].
pub fn cmdline(pid: i32) -> io::Result<(Vec<String>, bool, usize)> {
    let bytes = read_bounded(&format!("/proc/{pid}/cmdline"), 4 << 20)?;
    let mut parts: Vec<&[u8]> = bytes.split(|&b| b == 0).collect();
    if parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    let argc = parts.len();
    let mut truncated = false;
    let mut total = 0;
    let mut argv = Vec::new();
    for part in parts {
        if argv.len() >= MAX_ARGS || total >= MAX_ARGV_BYTES {
            truncated = true;
            break;
        }
        let cut = part.len() > MAX_ARG;
        truncated |= cut;
        let part = &part[..part.len().min(MAX_ARG)];
        total += part.len();
        argv.push(String::from_utf8_lossy(part).into_owned());
    }
    Ok((argv, truncated, argc))
}

/// A /proc file of up to `max` bytes, read in as few `read`s as its size allows (std's
/// `read_to_end` starts with small probes; each is a system call on the exec's path).
fn read_bounded(path: &str, max: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = vec![0u8; 16 * 1024];
    let mut got = 0;
    let mut file = std::fs::File::open(path)?;
    loop {
        if got == out.len() {
            if got as u64 >= max {
                break;
            }
            out.resize((out.len() * 4).min(max as usize), 0);
        }
        match file.read(&mut out[got..])? {
            0 => break,
            n => got += n,
        }
    }
    out.truncate(got);
    Ok(out)
}

pub fn readlink(path: &str) -> String {
    std::fs::read_link(path)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What `/proc/<pid>/status` says about a process.
#[derive(Debug, Default, Clone)]
pub struct Status {
    pub tgid: i32,
    pub ppid: i32,
    pub uid: u32,
    pub gid: u32,
    pub seccomp_filters: Option<u32>,
}

pub fn status(pid: i32) -> io::Result<Status> {
    let mut buf = [0u8; 4096];
    let n = read_small(&format!("/proc/{pid}/status"), &mut buf)?;
    Ok(parse_status(&String::from_utf8_lossy(&buf[..n])))
}

/// A small /proc file in one `read` (std's `read_to_string` probes with several).
fn read_small(path: &str, buf: &mut [u8]) -> io::Result<usize> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

pub fn parse_status(text: &str) -> Status {
    let mut s = Status::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let first = value.split_whitespace().next().unwrap_or("");
        match key {
            "Tgid" => s.tgid = first.parse().unwrap_or(0),
            "PPid" => s.ppid = first.parse().unwrap_or(0),
            // Real, effective, saved, filesystem: the effective one.
            "Uid" => {
                s.uid = value
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or(first)
                    .parse()
                    .unwrap_or(0)
            }
            "Gid" => {
                s.gid = value
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or(first)
                    .parse()
                    .unwrap_or(0)
            }
            "Seccomp_filters" => s.seccomp_filters = first.parse().ok(),
            _ => {}
        }
    }
    s
}

/// The start time of a process (field 22 of `stat`), which tells a reused pid apart.
pub fn start_time(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command may hold spaces and parentheses: fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// How long ago `pid` started (its start time against the system's uptime).
pub fn age(pid: i32) -> Option<std::time::Duration> {
    let started = start_time(pid)?;
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    // SAFETY: plain sysconf.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(std::time::Duration::from_secs_f64(
        (uptime - started as f64 / ticks).max(0.0),
    ))
}

/// The exit status a zombie left (field 52 of `stat`), in wait-status form.
pub fn zombie_exit_status(pid: i32) -> Option<i32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    if fields.next()? != "Z" {
        return None;
    }
    rest.split_whitespace().nth(49)?.parse().ok()
}

/// The filename the kernel executed, as the new program sees it (`AT_EXECFN` in its auxiliary
/// vector): exact even when a thread rewrote the caller's copy during the exec.
pub fn exec_filename(pid: i32) -> Option<String> {
    const AT_EXECFN: u64 = 31;
    let auxv = read_bounded(&format!("/proc/{pid}/auxv"), 4096).ok()?;
    let addr = auxv
        .chunks_exact(16)
        .map(|pair| {
            (
                u64::from_ne_bytes(pair[..8].try_into().expect("8 bytes")),
                u64::from_ne_bytes(pair[8..].try_into().expect("8 bytes")),
            )
        })
        .find(|(key, _)| *key == AT_EXECFN)?
        .1;
    let (bytes, _) = read_cstring(pid, addr, MAX_ARG).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/etc/ld.so.preload` as a link into procfs (in the shared PID namespace `/proc/self` is
    /// the guard) is refused, through a link or directly; a regular file is read.
    #[test]
    fn a_file_looked_at_in_the_programs_root_is_never_one_of_procfs() {
        let root = root_of(std::process::id() as i32).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("ld.so.preload");
        std::fs::write(&plain, "/lib/x.so\n").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/proc/self/environ", &link).unwrap();
        let text = |p: &std::path::Path| p.to_str().unwrap().to_string();
        assert!(open_in_root(&root, &text(&plain)).is_ok());
        for refused in [
            text(&link),
            "/proc/self/environ".into(),
            "/proc/1/maps".into(),
        ] {
            let e = open_in_root(&root, &refused).expect_err(&refused);
            assert!(e.to_string().contains("procfs"), "{refused}: {e}");
        }
    }

    #[test]
    fn status_gives_the_effective_ids_and_the_filter_count() {
        let text = "Name:\tsh\nTgid:\t42\nPid:\t43\nPPid:\t7\nUid:\t1000\t0\t0\t0\nGid:\t100\t5\t5\t5\nSeccomp:\t2\nSeccomp_filters:\t2\n";
        let s = parse_status(text);
        assert_eq!((s.tgid, s.ppid, s.uid, s.gid), (42, 7, 0, 5));
        assert_eq!(s.seccomp_filters, Some(2));
    }

    /// Our own argv, read the way the supervisor reads an agent's.
    #[test]
    fn argv_and_strings_are_read_from_another_address_space_api() {
        let args: Vec<std::ffi::CString> = ["prog", "two words", ""]
            .iter()
            .map(|s| std::ffi::CString::new(*s).unwrap())
            .collect();
        let mut ptrs: Vec<u64> = args.iter().map(|a| a.as_ptr() as u64).collect();
        ptrs.push(0);
        let pid = std::process::id() as i32;
        let (argv, truncated, argc) = read_argv(pid, ptrs.as_ptr() as u64).unwrap();
        assert_eq!(argv, vec!["prog", "two words", ""]);
        assert!(!truncated);
        assert_eq!(argc, 3);
        let long = std::ffi::CString::new(vec![b'x'; MAX_ARG + 10]).unwrap();
        let (bytes, cut) = read_cstring(pid, long.as_ptr() as u64, MAX_ARG).unwrap();
        assert!(cut);
        assert_eq!(bytes.len(), MAX_ARG);
    }
}
