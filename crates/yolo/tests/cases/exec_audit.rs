//! The exec audit under attack (issue 8.1): root in the agent container tries to stop, blind,
//! fool or bypass the guard's exec supervisor, and every exec still lands in the log exactly as
//! it ran. Each test fails if its protection breaks.

use crate::support::*;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The image with python3 (for the ctypes attacks), built through yolo's own build. Every test
/// that needs it writes the same Dockerfile, so the build cache makes all but the first free.
fn with_python(t: &Test, extra_config: &str) {
    t.file(
        ".devcontainer/Dockerfile",
        "FROM debian:bookworm-slim\nRUN apt-get update && apt-get install -y --no-install-recommends python3 && rm -rf /var/lib/apt/lists/*\n",
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t.user_config(&format!("{}{extra_config}", mirror_for_builds()));
}

fn plain(t: &Test) {
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
}

/// Run `script` as root in the agent container (through `yolo exec`, so supervised).
fn attack(t: &Test, script: &str) -> Run {
    t.yolo(&["exec", "--", "sh", "-c", script])
}

/// The `exec` records of this test's sessions, in log order.
fn execs(t: &Test) -> Vec<Value> {
    t.events()
        .into_iter()
        .filter(|e| e["kind"] == "exec")
        .collect()
}

fn argv(e: &Value) -> Vec<String> {
    e["argv"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Wait up to `secs` for an event matching `pred`; the event, or a panic naming `what`.
#[track_caller]
fn wait_for_event(t: &Test, secs: u64, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(e) = t.events().into_iter().find(|e| pred(e)) {
            return e;
        }
        if Instant::now() > deadline {
            let kinds: Vec<String> = t
                .events()
                .iter()
                .map(|e| e.to_string())
                .rev()
                .take(30)
                .collect();
            panic!(
                "no {what} within {secs}s; last events:\n{}",
                kinds.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The exec record of `args` (exactly), waiting for it.
#[track_caller]
fn wait_for_exec(t: &Test, args: &[&str]) -> Value {
    wait_for_event(t, 10, &format!("exec record of {args:?}"), |e| {
        e["kind"] == "exec" && argv(e) == args
    })
}

/// This test's guard container.
fn guard(t: &Test) -> String {
    let agents = t.agents();
    let guards: Vec<String> = t
        .containers()
        .into_iter()
        .filter(|c| !agents.contains(c))
        .collect();
    assert_eq!(guards.len(), 1, "one guard: {guards:?}");
    guards[0].clone()
}

fn agent(t: &Test) -> String {
    let agents = t.agents();
    assert_eq!(agents.len(), 1, "one agent: {agents:?}");
    agents[0].clone()
}

/// The shim binary yolo mounts into the agent (`<data>/bin/shim-<digest>/shim`).
fn shim_on_host(t: &Test) -> String {
    let dir = t.data_dir.join("bin");
    let entry = std::fs::read_dir(&dir)
        .expect("data/bin")
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("shim-"))
        .expect("the shim's folder in data/bin");
    entry.path().join("shim").display().to_string()
}

/// The exec of a recognisable marker after an attack: recorded, so the supervisor still works.
#[track_caller]
fn supervisor_still_records(t: &Test, marker: &str) {
    let out = t.yolo(&["exec", "--", "/bin/echo", marker]).ok();
    assert_eq!(out.stdout().trim(), marker);
    let e = wait_for_exec(t, &["/bin/echo", marker]);
    assert_eq!(e["result"], "ok", "{e}");
}

#[test]
fn a_normal_exec_has_its_exit_code_in_the_audit() {
    let t = Test::new();
    plain(&t);
    t.up(&[]);
    t.yolo(&["exec", "--", "sh", "-c", "exit 3"]).fails_with(3);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = t.yolo(&["audit", "--json", "--kind", "exec"]).ok();
        let found = out
            .stdout()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| argv(e) == ["sh", "-c", "exit 3"]);
        if let Some(e) = found.filter(|e| !e["exit_code"].is_null()) {
            assert_eq!(e["exit_code"], 3, "{e}");
            assert_eq!(e["result"], "ok", "{e}");
            assert_eq!(e["cwd"], "/workspaces/repo", "{e}");
            assert_eq!(e["uid"], 0, "{e}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no exec record with its exit code\n{}",
            out.describe()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Root moves the shim's folder (or the shim) aside and plants a fake that runs its program
/// without the filter: the next `yolo exec` would then go unrecorded.
#[test]
fn root_in_the_agent_cannot_replace_the_shim() {
    let t = Test::new();
    plain(&t);
    t.up(&[]);
    let fake = "printf '#!/bin/sh\\nshift\\nexec \"$@\"\\n' > /.yolo/shim && chmod +x /.yolo/shim";
    for (what, script) in [
        (
            "moved the folder",
            format!("mv /.yolo /yolo-aside && mkdir /.yolo && {fake}"),
        ),
        (
            "renamed the shim",
            format!("mv /.yolo/shim /.yolo/aside && {fake}"),
        ),
        ("removed the shim", format!("rm -f /.yolo/shim && {fake}")),
        ("wrote over the shim", fake.to_string()),
        (
            "linked over the shim",
            "ln -sf /bin/sh /.yolo/shim".to_string(),
        ),
        ("planted beside the shim", "touch /.yolo/other".to_string()),
    ] {
        let run = attack(&t, &script);
        assert_ne!(run.code(), 0, "root {what}\n{}", run.describe());
        supervisor_still_records(&t, &format!("after-{}", what.replace(' ', "-")));
    }
    let out = attack(&t, "ls -A /.yolo").ok();
    assert_eq!(out.stdout(), "shim\n");
}

#[test]
fn root_in_the_agent_cannot_kill_or_stop_the_guard() {
    let t = Test::new();
    plain(&t);
    t.up(&[]);
    let guard = guard(&t);
    let before = inspect(&guard)["State"].clone();
    // `kill` is a shell builtin: nothing here execs after the signals (a stopped supervisor
    // would leave an exec hanging).
    for signal in [
        "-9", "-STOP", "-TERM", "-INT", "-HUP", "-QUIT", "-USR1", "-USR2", "-SEGV", "-ABRT",
        "-BUS", "-SYS", "-PIPE", "-ALRM", "-TSTP",
    ] {
        // PID 1 and each of its threads by id.
        attack(
            &t,
            &format!("kill {signal} 1; for task in /proc/1/task/*; do kill {signal} ${{task##*/}}; done; true"),
        )
        .ok();
        let state = inspect(&guard)["State"].clone();
        assert_eq!(state["Status"], "running", "after kill {signal} 1: {state}");
        assert_eq!(
            state["Pid"], before["Pid"],
            "the guard's PID 1 is the same process"
        );
        assert_eq!(state["StartedAt"], before["StartedAt"], "not restarted");
        // Not stopped: /proc of the guard's PID 1, read on the host (the guard image has no
        // programs besides the guard to read it from inside).
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", state["Pid"])).unwrap_or_default();
        let proc_state = status
            .lines()
            .find(|l| l.starts_with("State:"))
            .unwrap_or_default();
        assert!(
            proc_state.contains("S (sleeping)") || proc_state.contains("R (running)"),
            "after kill {signal} 1: {proc_state}"
        );
        supervisor_still_records(&t, &format!("after-kill{signal}"));
    }
    let ignored = wait_for_event(&t, 10, "signal_ignored", |e| {
        e["kind"] == "guard" && e["status"] == "signal_ignored"
    });
    assert_eq!(ignored["details"]["signal"], "SIGTERM", "{ignored}");
}

/// `rt_sigqueueinfo` lets the sender fill in siginfo: a SIGTERM that claims to come from
/// outside the namespace (si_pid 0), with every si_code the kernel lets a process forge.
const FORGED_SIGTERM_PY: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
SYS_rt_sigqueueinfo, SYS_rt_tgsigqueueinfo = 129, 297
class SigInfo(ctypes.Structure):
    _fields_ = [("signo", ctypes.c_int), ("errno", ctypes.c_int), ("code", ctypes.c_int),
                ("pad0", ctypes.c_int), ("pid", ctypes.c_int), ("uid", ctypes.c_uint),
                ("rest", ctypes.c_byte * 104)]
sent = 0
for code in (-1, -2, -3, -4, -5, -6, -60):  # SI_QUEUE, SI_TIMER, SI_MESGQ, SI_ASYNCIO, ...
    info = SigInfo(signo=15, errno=0, code=code, pid=0, uid=0)
    if libc.syscall(SYS_rt_sigqueueinfo, 1, 15, ctypes.byref(info)) == 0:
        sent += 1
    for task in os.listdir("/proc/1/task"):
        info = SigInfo(signo=15, errno=0, code=code, pid=0, uid=0)
        if libc.syscall(SYS_rt_tgsigqueueinfo, 1, int(task), 15, ctypes.byref(info)) == 0:
            sent += 1
print("SENT", sent)
"#;

#[test]
fn a_sigterm_forged_to_look_external_does_not_stop_the_guard() {
    let t = Test::new();
    with_python(&t, "");
    t.file("attack/forge.py", FORGED_SIGTERM_PY);
    t.up(&[]);
    let guard = guard(&t);
    let before = inspect(&guard)["State"].clone();
    let run = attack(&t, "python3 attack/forge.py");
    run.assert_stdout_contains("SENT");
    // The forged signals were delivered (the kernel lets si_code < 0 through) ...
    assert!(!run.stdout().contains("SENT 0"), "{}", run.describe());
    std::thread::sleep(Duration::from_millis(500));
    // ... and the guard took them for what they are.
    let state = inspect(&guard)["State"].clone();
    assert_eq!(state["Status"], "running", "{state}");
    assert_eq!(state["Pid"], before["Pid"], "{state}");
    supervisor_still_records(&t, "after-forged-sigterm");
    wait_for_event(&t, 10, "signal_ignored", |e| {
        e["kind"] == "guard" && e["status"] == "signal_ignored" && e["details"]["from_pid"] == 0
    });
}

const PTRACE_PY: &str = r#"
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
broken = []
def name(e):
    return errno.errorcode.get(e, str(e))
for path in ["/proc/1/mem", "/proc/1/environ", "/proc/1/maps", "/proc/1/auxv", "/proc/1/stack"]:
    try:
        with open(path, "rb") as f:
            data = f.read(64)
        print(path, "READ", len(data))
        broken.append(path)
    except OSError as e:
        print(path, name(e.errno))
for path in ["/proc/1/root/", "/proc/1/cwd/", "/proc/1/map_files/"]:
    try:
        print(path, "LISTED", os.listdir(path))
        broken.append(path)
    except OSError as e:
        print(path, name(e.errno))
# The fd numbers may be listed (the directory belongs to root), but no descriptor may be
# followed or opened: one of them is the agent's seccomp listener.
for fd in os.listdir("/proc/1/fd/"):
    path = "/proc/1/fd/" + fd
    for label, attempt in [("readlink", lambda: os.readlink(path)), ("open", lambda: os.close(os.open(path, os.O_RDONLY)))]:
        try:
            attempt()
            print(path, label, "WORKED")
            broken.append(path + " " + label)
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EPERM):
                print(path, label, name(e.errno))
                broken.append(path + " " + label)
print("fds tried:", len(os.listdir("/proc/1/fd/")))
for req, label in [(16, "PTRACE_ATTACH"), (0x4206, "PTRACE_SEIZE")]:
    r = libc.ptrace(req, 1, None, None)
    e = ctypes.get_errno()
    print(label, r, name(e))
    if r == 0 or e not in (errno.EPERM, errno.EACCES):
        broken.append(label)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(4096)
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 4096)
libc.process_vm_readv.restype = ctypes.c_ssize_t
# The permission check comes before any address is looked at: EFAULT would mean it passed.
for addr in [0x400000, 0x555555554000, 0x7ffff7dd0000]:
    remote = iovec(ctypes.c_void_p(addr), 4096)
    r = libc.process_vm_readv(1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    e = ctypes.get_errno()
    print("process_vm_readv", hex(addr), r, name(e))
    if r >= 0 or e not in (errno.EPERM, errno.EACCES):
        broken.append("process_vm_readv")
# pidfd_getfd: copy a descriptor (the listener among them) out of PID 1.
NR_PIDFD_OPEN, NR_PIDFD_GETFD = 434, 438
libc.syscall.restype = ctypes.c_long
pidfd = libc.syscall(NR_PIDFD_OPEN, 1, 0)
print("pidfd_open", pidfd, name(ctypes.get_errno()))
if pidfd >= 0:
    for fd in range(64):
        r = libc.syscall(NR_PIDFD_GETFD, pidfd, fd, 0)
        e = ctypes.get_errno()
        if r >= 0 or e not in (errno.EPERM, errno.EACCES, errno.EBADF):
            print("pidfd_getfd", fd, r, name(e))
            broken.append("pidfd_getfd %d" % fd)
print("BROKEN" if broken else "HELD", broken)
sys.exit(1 if broken else 0)
"#;

#[test]
fn root_in_the_agent_cannot_ptrace_or_read_the_supervisor() {
    let t = Test::new();
    with_python(&t, "");
    t.file("attack/ptrace.py", PTRACE_PY);
    t.up(&[]);
    let run = attack(&t, "python3 attack/ptrace.py");
    assert_eq!(
        run.code(),
        0,
        "the supervisor was readable\n{}",
        run.describe()
    );
    run.assert_stdout_contains("HELD");
    // Also from the shell, with the tools an agent would use.
    for script in [
        "cat /proc/1/mem",
        "head -c 16 /proc/1/environ",
        "dd if=/proc/1/mem bs=1 count=1 skip=4194304",
        "ls /proc/1/root/",
    ] {
        let run = attack(&t, script);
        assert_ne!(run.code(), 0, "{script} worked\n{}", run.describe());
    }
    supervisor_still_records(&t, "after-ptrace");
}

const SECCOMP_PY: &str = r#"
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
class sock_filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]
class sock_fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(sock_filter))]
NR_SECCOMP = {"x86_64": 317, "aarch64": 277}[os.uname().machine]
NR_EXECVE = {"x86_64": 59, "aarch64": 221}[os.uname().machine]
# execve -> user notification (our own listener), the rest allowed.
prog = (sock_filter * 4)(
    sock_filter(0x20, 0, 0, 0),
    sock_filter(0x15, 0, 1, NR_EXECVE),
    sock_filter(0x06, 0, 0, 0x7fc00000),
    sock_filter(0x06, 0, 0, 0x7fff0000),
)
fprog = sock_fprog(4, prog)
libc.prctl(38, 1, 0, 0, 0)
broken = []
# NEW_LISTENER alone and with every other flag a caller might add to slip past a filter.
for flags in [8, 8 | 1, 8 | 2, 8 | 4, 8 | 16, 8 | 32, 8 | 1 | 16 | 32, 8 | (1 << 32)]:
    r = libc.syscall(NR_SECCOMP, 1, ctypes.c_ulong(flags), ctypes.byref(fprog))
    e = ctypes.get_errno()
    print("flags", hex(flags), r, errno.errorcode.get(e, e))
    if r >= 0:
        broken.append(hex(flags))
print("BROKEN" if broken else "HELD", broken)
sys.exit(1 if broken else 0)
"#;

#[test]
fn root_in_the_agent_cannot_open_a_second_listener() {
    let t = Test::new();
    with_python(&t, "");
    t.file("attack/seccomp.py", SECCOMP_PY);
    t.up(&[]);
    // The shim itself, nested: it cannot install its filter, says why, and runs nothing.
    let run = attack(
        &t,
        "/.yolo/shim shim /usr/bin/touch /workspaces/repo/nested-ran; echo rc=$?",
    )
    .ok();
    run.assert_stdout_contains("rc=126")
        .assert_stderr_contains("may not open a second listener");
    assert!(!t.workspace.join("nested-ran").exists(), "the program ran");
    assert!(
        !execs(&t)
            .iter()
            .any(|e| argv(e).first().is_some_and(|a| a == "/usr/bin/touch")),
        "the nested program was exec'd"
    );
    // A raw seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER | ...) from python.
    let run = attack(&t, "python3 attack/seccomp.py");
    assert_eq!(
        run.code(),
        0,
        "a second listener opened\n{}",
        run.describe()
    );
    run.assert_stdout_contains("flags 0x8 -1 EPERM");
    supervisor_still_records(&t, "after-seccomp");
}

const BIND_PY: &str = r#"
import errno, socket, sys
for kind, label in [(socket.SOCK_STREAM, "stream"), (socket.SOCK_SEQPACKET, "seqpacket")]:
    s = socket.socket(socket.AF_UNIX, kind)
    try:
        s.bind("\0yolo-exec")
        print(label, "BOUND")
        if kind == socket.SOCK_STREAM:
            sys.exit(1)
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, e.errno))
        if kind == socket.SOCK_STREAM and e.errno != errno.EADDRINUSE:
            sys.exit(2)
"#;

/// A fake supervisor: listens on the given names and writes a file if anyone connects.
const FAKE_PY: &str = r#"
import os, select, socket, sys
socks = []
for name in sys.argv[2:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(("\0" + name[1:]) if name.startswith("@") else name)
    s.listen(8)
    socks.append(s)
open(sys.argv[1] + ".ready", "w").close()
while True:
    ready, _, _ = select.select(socks, [], [])
    for s in ready:
        c, _ = s.accept()
        with open(sys.argv[1], "a") as f:
            f.write("connected\n")
        c.sendall(b"ok")
"#;

#[test]
fn root_in_the_agent_cannot_replace_the_supervisors_socket() {
    let t = Test::new();
    with_python(&t, "");
    t.file("attack/bind.py", BIND_PY);
    t.file("attack/fake.py", FAKE_PY);
    t.up(&[]);
    let run = attack(&t, "python3 attack/bind.py");
    assert_eq!(run.code(), 0, "@yolo-exec was bound\n{}", run.describe());
    run.assert_stdout_contains("stream EADDRINUSE");

    // A fake supervisor on look-alike names in the agent: the shim of the next exec never
    // talks to it, and that exec is recorded by the real one.
    attack(
        &t,
        "nohup python3 attack/fake.py /workspaces/repo/fake-hit @yolo-exec2 @yolo-exe /tmp/yolo-exec /yolo-exec >/dev/null 2>&1 & \
         for i in $(seq 50); do [ -e /workspaces/repo/fake-hit.ready ] && exit 0; sleep 0.1; done; exit 1",
    )
    .ok();
    supervisor_still_records(&t, "after-fake");
    assert!(!t.workspace.join("fake-hit").exists(), "the fake was used");

    // Without the guard, a fake on the real name that is not PID 1 is refused by the shim.
    let image = inspect(&agent(&t))["Config"]["Image"]
        .as_str()
        .unwrap()
        .to_string();
    let shim = format!("{}:/shim:ro", shim_on_host(&t));
    let fake = format!("{}:/attack:ro", t.workspace.join("attack").display());
    let out = std::process::Command::new("docker")
        .args(["run", "--rm", "--label", &format!("{LABEL}={}", t.id)])
        .args(["-v", &shim, "-v", &fake, &image, "sh", "-c"])
        .arg(
            "python3 /attack/fake.py /tmp/hit @yolo-exec & \
             for i in $(seq 50); do [ -e /tmp/hit.ready ] && break; sleep 0.1; done; \
             /shim shim /bin/echo ran-under-a-fake; echo rc=$?; cat /tmp/hit 2>/dev/null",
        )
        .output()
        .expect("docker run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("rc=126") && !stdout.contains("ran-under-a-fake"),
        "the shim ran the program under a fake supervisor\n{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("not by the guard"),
        "the shim says why\n{stderr}"
    );
}

/// Execs `/bin/sh -c 'printf ... "$0"' X-<n>` where another thread keeps flipping `X` between
/// `A` and `B` (in place, or by swapping the argv pointer); the program appends what it got.
const RACE_PY: &str = r#"
import ctypes, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
N = int(sys.argv[1])
SCRIPT = b'printf "%s\\n" "$0" >> /tmp/race.out'
for i in range(N):
    pid = os.fork()
    if pid == 0:
        keep = [ctypes.create_string_buffer(x) for x in (b"/bin/sh", b"-c", SCRIPT)]
        a = ctypes.create_string_buffer(b"A-%06d" % i)
        b = ctypes.create_string_buffer(b"B-%06d" % i)
        argv = (ctypes.c_void_p * 5)(*[ctypes.addressof(x) for x in keep], ctypes.addressof(a), None)
        envp = (ctypes.c_void_p * 1)(None)
        pa, pb = ctypes.addressof(a), ctypes.addressof(b)
        if i % 2 == 0:
            def flip():
                while True:
                    ctypes.memmove(a, b"B", 1)
                    ctypes.memmove(a, b"A", 1)
        else:
            def flip():
                while True:
                    argv[3] = pb
                    argv[3] = pa
        threading.Thread(target=flip, daemon=True).start()
        libc.execve(keep[0], argv, envp)
        os._exit(127)
    os.waitpid(pid, 0)
"#;

#[test]
fn argv_rewritten_by_a_racing_thread_is_logged_as_it_ran() {
    const ATTEMPTS: usize = 2000;
    let t = Test::new();
    with_python(&t, "");
    t.file("attack/race.py", RACE_PY);
    t.up(&[]);
    let started = Instant::now();
    attack(
        &t,
        &format!("rm -f /tmp/race.out; python3 attack/race.py {ATTEMPTS}"),
    )
    .ok();
    let took = started.elapsed();
    let ran = attack(&t, "cat /tmp/race.out").ok().stdout();
    let ran: std::collections::HashMap<String, String> = ran
        .lines()
        .map(|l| (l[2..].to_string(), l.to_string()))
        .collect();
    assert_eq!(ran.len(), ATTEMPTS, "every attempt ran once");
    // Wait for the last record, then compare each attempt's record with what ran.
    wait_for_event(&t, 10, "the last attempt's record", |e| {
        e["kind"] == "exec"
            && argv(e)
                .get(3)
                .is_some_and(|a| a.ends_with(&format!("-{:06}", ATTEMPTS - 1)))
    });
    let script = r#"printf "%s\n" "$0" >> /tmp/race.out"#;
    let mut logged = std::collections::HashMap::new();
    let mut rewritten = 0;
    for e in execs(&t) {
        let a = argv(&e);
        if a.len() == 4 && a[0] == "/bin/sh" && a[2] == script {
            assert_eq!(e["result"], "ok", "{e}");
            if e["argv_rewritten"] == true {
                rewritten += 1;
            }
            let previous = logged.insert(a[3][2..].to_string(), a[3].clone());
            assert!(previous.is_none(), "two records of attempt {}", a[3]);
        }
    }
    assert_eq!(logged.len(), ATTEMPTS, "every attempt recorded once");
    let mismatches: Vec<String> = ran
        .iter()
        .filter(|(n, got)| logged.get(*n) != Some(got))
        .map(|(n, got)| format!("attempt {n}: ran {got}, logged {:?}", logged.get(n)))
        .collect();
    eprintln!(
        "argv race: {ATTEMPTS} attempts in {took:?}, {rewritten} flagged argv_rewritten, {} mismatches",
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} logged argv differ from what ran:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

const MEMFD_PY: &str = r#"
import os
fd = os.memfd_create("payload")
with open("/usr/bin/echo", "rb") as f:
    os.write(fd, f.read())
os.execve(fd, ["memecho", "from-memfd"], dict(os.environ))
"#;

#[test]
fn static_memfd_script_and_orphan_execs_are_logged_exactly() {
    let t = Test::new();
    with_python(&t, "");
    t.file("attack/memfd.py", MEMFD_PY);
    t.up(&[]);

    // A static binary, at its own path and copied.
    let out = attack(
        &t,
        "/.yolo/shim --version && cp /.yolo/shim /tmp/static-copy && /tmp/static-copy --version",
    )
    .ok();
    assert!(
        out.stdout().starts_with("yolo-guard "),
        "{}",
        out.describe()
    );
    for (path, args) in [
        ("/.yolo/shim", ["/.yolo/shim", "--version"]),
        ("/tmp/static-copy", ["/tmp/static-copy", "--version"]),
    ] {
        let e = wait_for_exec(&t, &args);
        assert_eq!(e["result"], "ok", "{e}");
        assert_eq!(e["path"], path, "{e}");
        assert_eq!(e["exe"], path, "{e}");
    }

    // A memfd, through execveat(fd, "", AT_EMPTY_PATH).
    let out = attack(&t, "python3 attack/memfd.py").ok();
    assert_eq!(out.stdout(), "from-memfd\n");
    let e = wait_for_exec(&t, &["memecho", "from-memfd"]);
    assert_eq!(e["result"], "ok", "{e}");
    // `path` is what the kernel named the file (AT_EXECFN, `/dev/fd/N` for a descriptor),
    // `exe` what it was.
    assert!(
        e["path"]
            .as_str()
            .unwrap_or_default()
            .starts_with("/dev/fd/"),
        "{e}"
    );
    assert_eq!(e["exe"], "/memfd:payload (deleted)", "{e}");

    // A shebang script: the interpreter is what runs, with the script in its argv.
    let out = attack(
        &t,
        "printf '#!/bin/sh\\necho script \"$1\"\\n' > /tmp/s.sh && chmod +x /tmp/s.sh && /tmp/s.sh arg1",
    )
    .ok();
    assert_eq!(out.stdout(), "script arg1\n");
    let e = wait_for_exec(&t, &["/bin/sh", "/tmp/s.sh", "arg1"]);
    assert_eq!(e["result"], "ok", "{e}");
    assert_eq!(e["path"], "/tmp/s.sh", "{e}");
    assert_eq!(e["exe"], "/usr/bin/dash", "{e}");

    // A program started by a background process whose parent already exited.
    attack(
        &t,
        "(sleep 1; /bin/echo late > /workspaces/repo/late.txt) >/dev/null 2>&1 &",
    )
    .ok();
    let e = wait_for_exec(&t, &["/bin/echo", "late"]);
    assert_eq!(e["result"], "ok", "{e}");
    // The shell makes the file (the redirection) before echo runs, and the record is written
    // before echo's first instruction: wait for the words, not for the file.
    let late = || std::fs::read_to_string(t.workspace.join("late.txt")).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(5);
    while late().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(late(), "late\n");
}

#[test]
fn an_exec_that_skipped_the_shim_is_logged_as_unsupervised() {
    let t = Test::new();
    plain(&t);
    t.up(&[]);
    let agent = agent(&t);
    let started = Instant::now();
    docker(&["exec", &agent, "sleep", "3"]);
    let e = wait_for_event(&t, 10, "unsupervised sleep 3", |e| {
        e["kind"] == "unsupervised" && argv(e) == ["sleep", "3"]
    });
    assert_eq!(e["uid"], 0, "{e}");
    assert!(started.elapsed() < Duration::from_secs(15));
    // The same command through yolo is an ordinary exec record.
    assert!(!execs(&t).iter().any(|e| argv(e) == ["sleep", "3"]));
}

/// A program that skipped the shim and calls itself `runc init` (issue 23, item 8) is flagged
/// like any other: the runtime entering the container is recognised by its parent outside the
/// namespace and its age, not by its name.
#[test]
fn a_process_named_runc_init_is_not_taken_for_the_runtime() {
    let t = Test::new();
    plain(&t);
    t.up(&[]);
    let agent = agent(&t);
    // `sh init` reads the script `init`; with bash's `exec -a` its argv is exactly
    // ["runc", "init"].
    docker(&[
        "exec",
        "-d",
        &agent,
        "bash",
        "-c",
        "printf 'sleep 20\\n' > /tmp/init; cd /tmp && exec -a runc /bin/sh init",
    ]);
    let e = wait_for_event(&t, 15, "unsupervised runc init", |e| {
        e["kind"] == "unsupervised" && argv(e) == ["runc", "init"]
    });
    assert_eq!(e["exe"], "/usr/bin/dash", "{e}");
}

#[test]
fn the_shim_without_a_supervisor_runs_nothing() {
    let t = Test::new();
    plain(&t);
    t.up(&[]);
    let shim = format!("{}:/shim:ro", shim_on_host(&t));
    let out = std::process::Command::new("docker")
        .args(["run", "--rm", "--label", &format!("{LABEL}={}", t.id)])
        .args(["-v", &shim, BASE_IMAGE])
        .args(["/shim", "shim", "/bin/echo", "ran-unsupervised"])
        .output()
        .expect("docker run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(126), "{stdout}\n{stderr}");
    assert!(!stdout.contains("ran-unsupervised"), "{stdout}");
    assert!(
        stderr.contains("supervisor (the guard) is not reachable")
            && stderr.contains("not running /bin/echo"),
        "a clear message: {stderr}"
    );
}

#[test]
fn the_guard_killed_takes_the_agents_processes_with_it() {
    let t = Test::new();
    plain(&t);
    t.up(&[]);
    let agent = agent(&t);
    // A background process besides the main one.
    attack(&t, "nohup sleep 600 >/dev/null 2>&1 &").ok();
    assert_eq!(inspect(&agent)["State"]["Running"], true);
    docker(&["kill", &guard(&t)]);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let state = inspect(&agent)["State"].clone();
        if state["Running"] == false {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the agent still runs without its guard: {state}\n{}",
            docker(&["top", &agent])
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn past_the_exec_log_cap_execs_are_refused() {
    let t = Test::new();
    plain(&t);
    t.user_config("[audit]\nmax_exec_log = \"64k\"\n");
    t.up(&[]);
    let run = attack(
        &t,
        "i=0; while [ $i -lt 5000 ]; do /bin/true 2>/dev/null || { echo refused-after-$i; exit 0; }; i=$((i+1)); done; echo never-refused; exit 1",
    );
    run.assert_stdout_contains("refused-after-")
        .assert_stdout_lacks("never-refused");
    // What is refused does not run: here the shim's own exec of the program.
    t.yolo(&["exec", "--", "/usr/bin/touch", "/workspaces/repo/after-cap"])
        .fails_with(126)
        .assert_stderr_contains("Operation not permitted");
    assert!(!t.workspace.join("after-cap").exists());
    let refused = wait_for_event(&t, 10, "exec_refused", |e| {
        e["kind"] == "guard" && e["status"] == "exec_refused"
    });
    assert_eq!(refused["details"]["max_bytes"], 64 * 1024, "{refused}");
    let log: u64 = std::fs::read_dir(t.data_dir.join("network"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".exec.jsonl"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(
        log <= 64 * 1024,
        "the exec log kept to its cap: {log} bytes"
    );
}

#[test]
fn ten_thousand_execs_give_ten_thousand_records() {
    const N: usize = 10_000;
    let t = Test::new();
    plain(&t);
    t.up(&[]);
    let started = Instant::now();
    attack(
        &t,
        &format!("i=0; while [ $i -lt {N} ]; do /bin/true; i=$((i+1)); done; /bin/echo loop-done"),
    )
    .ok()
    .assert_stdout("loop-done\n");
    let took = started.elapsed();
    wait_for_exec(&t, &["/bin/echo", "loop-done"]);
    let trues: Vec<Value> = execs(&t)
        .into_iter()
        .filter(|e| argv(e) == ["/bin/true"])
        .collect();
    eprintln!("{N} execs took {took:?}");
    assert_eq!(trues.len(), N, "records of /bin/true");
    assert!(trues.iter().all(|e| e["result"] == "ok"));
    let pids: std::collections::HashSet<i64> =
        trues.iter().filter_map(|e| e["pid"].as_i64()).collect();
    assert!(pids.len() > N / 2, "distinct processes: {}", pids.len());
}

const TRACEME_PY: &str = r#"
import ctypes, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
pid = os.fork()
if pid == 0:
    libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME: the supervisor cannot seize this one
    a = ctypes.create_string_buffer(b"forged")
    def flip():
        while True:
            ctypes.memmove(a, b"F", 1)
            ctypes.memmove(a, b"f", 1)
    threading.Thread(target=flip, daemon=True).start()
    keep = [ctypes.create_string_buffer(x) for x in (b"/bin/echo", b"traced-child")]
    argv = (ctypes.c_void_p * 4)(ctypes.addressof(keep[0]), ctypes.addressof(keep[1]), ctypes.addressof(a), None)
    libc.execve(keep[0], argv, (ctypes.c_void_p * 1)(None))
    os._exit(100 + ctypes.get_errno())
_, status = os.waitpid(pid, 0)
if os.WIFSTOPPED(status):  # the exec ran: stopped for its tracer
    libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    os.waitpid(pid, 0)
    print("ran")
else:
    print("refused", os.WEXITSTATUS(status) - 100)
"#;

/// Execs from a second thread (the kernel moves the program to the leader's pid) and from a
/// child the agent itself traces (the supervisor cannot watch that exec).
const THREAD_PY: &str = r#"
import os, threading, time
def go():
    os.execv("/bin/echo", ["/bin/echo", "from-a-thread"])
threading.Thread(target=go).start()
time.sleep(10)
"#;

/// Four threads of one process exec at once, each with its own argv; the kernel lets one win.
const RACING_THREADS_PY: &str = r#"
import os, sys, threading
for i in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:
        go = threading.Event()
        def run(tag):
            go.wait()
            os.execv("/bin/sh", ["/bin/sh", "-c", 'echo "$0" >> /tmp/threads.out', "%s-%04d" % (tag, i)])
        for tag in ("X", "Y", "Z"):
            threading.Thread(target=run, args=(tag,)).start()
        go.set()
        run("M")
    os.waitpid(pid, 0)
"#;

#[test]
fn execs_from_threads_and_traced_children_are_on_record() {
    let t = Test::new();
    with_python(&t, "");
    t.file("attack/traceme.py", TRACEME_PY);
    t.file("attack/thread.py", THREAD_PY);
    t.file("attack/threads.py", RACING_THREADS_PY);
    t.up(&[]);
    let out = attack(&t, "python3 attack/thread.py").ok();
    assert_eq!(out.stdout(), "from-a-thread\n");
    let e = wait_for_exec(&t, &["/bin/echo", "from-a-thread"]);
    assert_eq!(e["result"], "ok", "{e}");
    assert_eq!(e["exe"], "/usr/bin/echo", "{e}");

    // Threads racing to exec: the one program that ran is the one record that says `ok`.
    const ROUNDS: usize = 200;
    attack(
        &t,
        &format!("rm -f /tmp/threads.out; python3 attack/threads.py {ROUNDS}"),
    )
    .ok();
    let ran = attack(&t, "cat /tmp/threads.out").ok().stdout();
    let ran: Vec<&str> = ran.lines().collect();
    assert_eq!(ran.len(), ROUNDS, "one program per round");
    let last = format!("-{:04}", ROUNDS - 1);
    wait_for_event(&t, 10, "the last round's record", |e| {
        e["kind"] == "exec" && argv(e).get(3).is_some_and(|a| a.ends_with(&last))
    });
    let records = execs(&t);
    for got in ran {
        let round = &got[1..];
        let ok: Vec<String> = records
            .iter()
            .filter(|e| e["result"] == "ok")
            .map(argv)
            .filter(|a| a.len() == 4 && a[3].ends_with(round) && a[2].contains("threads.out"))
            .map(|a| a[3].clone())
            .collect();
        assert_eq!(ok, [got], "round {round}: the records that say ok");
    }

    // A tracer of its own keeps the supervisor from confirming the exec (and could race the
    // argv it read): the exec is refused (EPERM), and on record as such.
    let out = attack(&t, "python3 attack/traceme.py").ok().stdout();
    assert_eq!(out.trim(), "refused 1", "the traced child's exec");
    let e = wait_for_event(&t, 10, "the traced child's exec", |e| {
        e["kind"] == "exec" && argv(e).get(1).is_some_and(|a| a == "traced-child")
    });
    assert_eq!(e["result"], "traced", "{e}");
    supervisor_still_records(&t, "after-traceme");
}

/// With `[audit] traced_exec = "record"` (a debugger in the container), such an exec runs, and
/// its record says it could not be confirmed: it never passes for a confirmed one.
#[test]
fn a_traced_exec_runs_unconfirmed_when_the_user_allows_it() {
    let t = Test::new();
    with_python(&t, "\n[audit]\ntraced_exec = \"record\"\n");
    t.file("attack/traceme.py", TRACEME_PY);
    t.up(&[]);
    let out = attack(&t, "python3 attack/traceme.py").ok().stdout();
    assert!(out.lines().any(|l| l == "ran"), "{out}");
    let e = wait_for_event(&t, 10, "the traced child's exec", |e| {
        e["kind"] == "exec" && argv(e).get(1).is_some_and(|a| a == "traced-child")
    });
    assert_eq!(e["result"], "unconfirmed", "{e}");
}

/// Connects to the supervisor's socket `n` times and holds on, and sends a hello with a pipe
/// instead of a listener.
const FLOOD_PY: &str = r#"
import array, os, resource, socket, sys, time
n = min(int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 20)
held = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0yolo-exec")
    held.append(s)
r, w = os.pipe()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\0yolo-exec")
try:
    s.sendmsg([b"yolo-shim 1\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [r]))])
    s.settimeout(5)
    answer = s.recv(64)
except OSError as e:
    answer = repr(e).encode()
print("bogus hello:", answer, "holding", len(held), flush=True)
time.sleep(int(sys.argv[2]))
"#;

#[test]
fn junk_on_the_supervisors_socket_does_not_stop_recording() {
    let t = Test::new();
    with_python(&t, "");
    t.file("attack/flood.py", FLOOD_PY);
    t.up(&[]);
    let out = attack(
        &t,
        "python3 attack/flood.py 4 0; nohup python3 attack/flood.py 1000 20 >/tmp/flood.out 2>&1 & \
         for i in $(seq 100); do grep -q holding /tmp/flood.out && break; sleep 0.1; done; cat /tmp/flood.out",
    )
    .ok();
    // A pipe is not a seccomp listener: refused, not watched.
    assert!(
        !out.stdout().contains("bogus hello: b'ok"),
        "{}",
        out.describe()
    );
    out.assert_stdout_contains("holding");
    // Past the connections held open (and the ones the supervisor turned away), a shim still
    // registers and its program is recorded.
    std::thread::sleep(Duration::from_secs(3));
    supervisor_still_records(&t, "after-flood");
}

#[test]
fn parallel_execs_are_all_recorded() {
    const LOOPS: usize = 8;
    const EACH: usize = 500;
    let t = Test::new();
    plain(&t);
    t.up(&[]);
    let started = Instant::now();
    attack(
        &t,
        &format!(
            "for l in $(seq {LOOPS}); do (i=0; while [ $i -lt {EACH} ]; do /bin/echo par-$l >/dev/null; i=$((i+1)); done) & done; wait; /bin/echo par-done"
        ),
    )
    .ok()
    .assert_stdout("par-done\n");
    let took = started.elapsed();
    wait_for_exec(&t, &["/bin/echo", "par-done"]);
    let records = execs(&t);
    for l in 1..=LOOPS {
        let marker = format!("par-{l}");
        let n = records
            .iter()
            .filter(|e| argv(e) == ["/bin/echo", marker.as_str()] && e["result"] == "ok")
            .count();
        assert_eq!(n, EACH, "records of loop {l}");
    }
    eprintln!("{} parallel execs took {took:?}", LOOPS * EACH);
}

/// Keeps 64 idle connections to the supervisor's socket open for `argv[1]` seconds, opening a
/// new one as soon as the supervisor drops one.
const SQUAT_PY: &str = r#"
import select, socket, sys, time
end = time.time() + int(sys.argv[1])
conns = []
while time.time() < end:
    while len(conns) < 64:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect("\0yolo-exec")
        conns.append(s)
    ready, _, _ = select.select(conns, [], [], 0.05)
    for s in ready:
        s.close()
        conns.remove(s)
"#;

/// Root in the agent tries to hold every registration slot of the supervisor (32 at once, each
/// given 2 s for its message) with idle connections, from sixteen processes reopening whatever
/// the supervisor drops, so a new shim's connection is evicted before it speaks: the shims of
/// the user's commands (started by the runtime, with slots of their own) still get through,
/// recorded.
#[test]
fn squatting_the_supervisors_socket_does_not_lock_the_user_out() {
    let t = Test::new();
    with_python(&t, "");
    t.file("attack/squat.py", SQUAT_PY);
    t.up(&[]);
    attack(
        &t,
        "for i in $(seq 16); do nohup python3 attack/squat.py 20 >/dev/null 2>&1 & done",
    )
    .ok();
    std::thread::sleep(Duration::from_secs(1));
    for i in 0..10 {
        let marker = format!("during-squat-{i}");
        let run = t.yolo(&["exec", "--", "/bin/echo", &marker]);
        // Whatever happens, nothing runs unrecorded.
        if run.stdout().contains(&marker) {
            wait_for_exec(&t, &["/bin/echo", &marker]);
        }
        assert_eq!(run.code(), 0, "locked out\n{}", run.describe());
    }
    // The squatters were at it all along.
    let alive = attack(
        &t,
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done | grep -c '^python3 attack/squat.py'",
    )
        .ok()
        .stdout();
    assert!(
        alive.trim().parse::<u32>().unwrap_or(0) >= 4,
        "squatters: {alive}"
    );
}

/// The hash of an exec record: its own `sha256`, or the `exec_digest` of its id (waited for).
#[track_caller]
fn hash_of(t: &Test, exec: &Value) -> String {
    if let Some(hex) = exec["sha256"].as_str() {
        return hex.to_string();
    }
    let id = exec["id"].clone();
    let digest = wait_for_event(t, 10, "the exec's digest", |e| {
        e["kind"] == "exec_digest" && e["id"] == id && e["library"].is_null()
    });
    digest["sha256"]
        .as_str()
        .unwrap_or_else(|| panic!("no hash: {digest}"))
        .to_string()
}

/// The attack run's launcher (issue 23, item 4): a payload renamed over `/usr/bin/true`,
/// exec'd by that path, and the original put back. The path says `true`; the record's hash is
/// the payload's, in the guard's log and joined into `yolo audit --json`.
#[test]
fn a_payload_swapped_over_a_program_is_recorded_by_its_hash() {
    let t = Test::new();
    plain(&t);
    t.up(&[]);
    let out = attack(
        &t,
        "cp /usr/bin/true /tmp/orig && cp /usr/bin/echo /tmp/payload && \
         mv /tmp/payload /usr/bin/true && /usr/bin/true swapped-run; \
         mv /tmp/orig /usr/bin/true; sha256sum /usr/bin/echo /usr/bin/true",
    )
    .ok()
    .stdout();
    let sums: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let (echo, real_true) = (sums[sums.len() - 2], sums[sums.len() - 1]);
    assert_ne!(echo, real_true);
    let e = wait_for_exec(&t, &["/usr/bin/true", "swapped-run"]);
    assert_eq!(hash_of(&t, &e), echo, "{e}");
    // The reader joins the digest: the audit's own record says it too.
    let audit = t
        .yolo(&["audit", "--json", "--kind", "exec", "--grep", "swapped-run"])
        .ok()
        .stdout();
    let joined: Value = serde_json::from_str(audit.lines().last().expect("a record")).unwrap();
    assert_eq!(joined["sha256"], echo, "{audit}");
}

/// The `exec_digest` record of a library preloaded into `exec` (waited for).
#[track_caller]
fn library_digest(t: &Test, exec: &Value, library: &str) -> Value {
    let id = exec["id"].clone();
    wait_for_event(t, 10, &format!("the digest of {library}"), |e| {
        e["kind"] == "exec_digest" && e["id"] == id && e["library"] == library
    })
}

/// Loader variables and `/etc/ld.so.preload` (issue 23, item 6): code the agent planted that
/// would run in every later program, the user's own `yolo exec` included, is on each record:
/// the variables' values, what `/etc/ld.so.preload` named when the program was exec'd, and
/// each library named by path, by its content's hash (`exec_digest` with `library`).
#[test]
fn preloaded_code_is_named_in_every_record_it_reaches() {
    let t = Test::new();
    plain(&t);
    t.up(&[]);
    let planted_env = attack(
        &t,
        "printf env-planted > /tmp/env.so && sha256sum /tmp/env.so && \
         LD_PRELOAD='/nonexistent.so /tmp/env.so' /bin/true env-preload; exit 0",
    )
    .ok()
    .stdout();
    let planted_env = planted_env.split_whitespace().next().unwrap().to_string();
    let e = wait_for_exec(&t, &["/bin/true", "env-preload"]);
    assert_eq!(e["loader_env"], serde_json::json!(["LD_PRELOAD"]), "{e}");
    assert_eq!(
        e["loader_values"],
        serde_json::json!({"LD_PRELOAD": "/nonexistent.so /tmp/env.so"}),
        "{e}"
    );
    assert_eq!(
        library_digest(&t, &e, "/tmp/env.so")["sha256"],
        planted_env.as_str()
    );
    let missing = library_digest(&t, &e, "/nonexistent.so");
    assert!(missing["sha256"].is_null(), "{missing}");
    let planted = attack(
        &t,
        "printf planted-code > /tmp/planted.so && echo /tmp/planted.so > /etc/ld.so.preload && \
         sha256sum /tmp/planted.so",
    )
    .ok()
    .stdout();
    let planted = planted
        .lines()
        .find(|l| l.ends_with("/tmp/planted.so"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string();
    // The user's own exec, after the agent planted the file.
    t.yolo(&["exec", "--", "/bin/echo", "users-own"]).ok();
    let e = wait_for_exec(&t, &["/bin/echo", "users-own"]);
    assert_eq!(e["ld_so_preload"], true, "{e}");
    assert_eq!(
        e["ld_so_preload_paths"],
        serde_json::json!(["/tmp/planted.so"]),
        "{e}"
    );
    assert_eq!(
        library_digest(&t, &e, "/tmp/planted.so")["sha256"],
        planted.as_str()
    );
    let text = t
        .yolo(&["audit", "--kind", "exec", "--grep", "users-own"])
        .ok()
        .stdout();
    assert!(
        text.contains("/etc/ld.so.preload exists") && text.contains("/tmp/planted.so"),
        "{text}"
    );
    attack(&t, "rm /etc/ld.so.preload").ok();
    t.yolo(&["exec", "--", "/bin/echo", "clean-again"]).ok();
    let e = wait_for_exec(&t, &["/bin/echo", "clean-again"]);
    assert!(e.get("ld_so_preload").is_none(), "{e}");
}

/// Writes into another process's memory, each way Linux offers, from root in the agent
/// (issue 23, item 5): `/proc/<pid>/mem` (the agent's /proc is read-only), `process_vm_writev`
/// and ptrace's POKE (the filter refuses them). Then the attack run's rewrite: a launcher stops
/// a `cat` right after its exec and changes the file name on its stack; what `cat` printed
/// and what the record says agree in every attempt.
#[test]
fn one_agent_process_cannot_rewrite_anothers_arguments() {
    const PY: &str = r#"
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
victim = os.fork()
if victim == 0:
    os.execv("/bin/sleep", ["/bin/sleep", "30"])
time.sleep(0.3)
results = []
try:
    os.open(f"/proc/{victim}/mem", os.O_RDWR)
    results.append("mem:opened")
except OSError as e:
    results.append(f"mem:{e.errno}")
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
src = ctypes.create_string_buffer(b"x")
rc = libc.process_vm_writev(victim, ctypes.byref(iovec(ctypes.addressof(src), 1)), 1,
                            ctypes.byref(iovec(0x10000, 1)), 1, 0)
results.append(f"vm_writev:{ctypes.get_errno() if rc < 0 else 'ok'}")
libc.ptrace(0x4206, victim, 0, 0)  # PTRACE_SEIZE
rc = libc.ptrace(5, victim, ctypes.c_void_p(0x10000), 0)  # PTRACE_POKEDATA
results.append(f"poke:{ctypes.get_errno() if rc < 0 else 'ok'}")
os.kill(victim, signal.SIGKILL)
print(" ".join(results), flush=True)
# The rewrite race, as the attack run did it.
open("/tmp/harmless", "w").write("HARMLESS\n")
open("/tmp/secreta", "w").write("SECRET\n")
for n in range(int(sys.argv[1])):
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(w)
        os.read(r, 1)
        os.execv("/bin/cat", ["/bin/cat", "/tmp/harmless"])
    os.close(r)
    os.write(w, b"x")
    deadline = time.time() + 5
    while time.time() < deadline:
        try:
            if os.readlink(f"/proc/{child}/exe").endswith("/cat"):
                break
        except OSError:
            break  # it ended already
    os.kill(child, signal.SIGSTOP)
    try:
        lo, hi = [int(x, 16) for x in [l for l in open(f"/proc/{child}/maps") if "[stack]" in l][0].split()[0].split("-")]
        f = os.open(f"/proc/{child}/mem", os.O_RDWR)
        os.lseek(f, lo, 0)
        at = os.read(f, hi - lo).rfind(b"/tmp/harmless\0")
        os.lseek(f, lo + at, 0)
        os.write(f, b"/tmp/secreta\0")
    except (OSError, IndexError):
        pass
    os.kill(child, signal.SIGCONT)
    os.waitpid(child, 0)
"#;
    let t = Test::new();
    with_python(&t, "");
    t.file("attack/rewrite.py", PY);
    t.up(&[]);
    let out = attack(&t, "python3 attack/rewrite.py 10").ok().stdout();
    let mut lines = out.lines();
    let refused = lines.next().unwrap_or_default();
    // EROFS (30) for the write open; EPERM (1) from the filter.
    assert_eq!(refused, "mem:30 vm_writev:1 poke:1", "{out}");
    let printed: Vec<&str> = lines.collect();
    assert_eq!(printed, vec!["HARMLESS"; 10], "what cat printed: {out}");
    // And the records say what was printed.
    for e in execs(&t) {
        if argv(&e).first().is_some_and(|a| a == "/bin/cat") {
            assert_eq!(argv(&e)[1], "/tmp/harmless", "{e}");
        }
    }
}

/// The supervisor's deadline is a timer signal, which PID 1 (the guard) therefore accepts from
/// inside the namespace too. Root in the agent sends it as fast as it can while it runs
/// programs: every program is still recorded, and the guard and the user's exec go on.
#[test]
fn the_agent_signalling_the_supervisors_alarm_loses_no_record() {
    let t = Test::new();
    plain(&t);
    t.up(&[]);
    attack(
        &t,
        "nohup bash -c 'end=$((SECONDS+15)); while [ $SECONDS -lt $end ]; do kill -s RTMIN+4 1 2>/dev/null; done' >/dev/null 2>&1 &",
    )
    .ok();
    let run = attack(
        &t,
        "i=0; while [ $i -lt 300 ]; do /bin/echo alarm-$i >/dev/null; i=$((i+1)); done; echo done",
    )
    .ok();
    assert!(run.stdout().contains("done"), "{}", run.describe());
    wait_for_exec(&t, &["/bin/echo", "alarm-299"]);
    let recorded = execs(&t)
        .iter()
        .filter(|e| argv(e).get(1).is_some_and(|a| a.starts_with("alarm-")))
        .count();
    assert_eq!(recorded, 300);
    supervisor_still_records(&t, "after-the-alarms");
}
