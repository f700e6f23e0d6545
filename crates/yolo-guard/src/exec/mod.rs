//! The exec audit: the shim's seccomp filter (`filter`, `shim`), how the shim hands its
//! listener to the guard (`wire`), and the guard's supervisor that records every exec
//! (`supervisor`, reading the agent's processes through `procfs`). See docs/security-model.md.

pub mod confine;
pub(crate) mod digest;
pub mod filter;
pub(crate) mod procfs;
mod reader;
pub mod shim;
pub mod sudo;
pub mod supervisor;
pub mod wire;

/// The supervisor and the shim's side in one process tree, without Docker: the test process
/// supervises, and runs itself again as the "agent" (`agent_side`), which installs the filter,
/// registers with its parent and execs a shell. The container-level tests (PID 1, a second
/// container in the namespace, attacks as root) are the CLI's integration tests.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::events::Events;
    use std::path::Path;
    use std::process::Command;
    use yolo_protocol::event::{Event, EventKind};

    const SOCKET_VAR: &str = "YOLO_TEST_EXEC_SOCKET";
    const SCRIPT_VAR: &str = "YOLO_TEST_EXEC_SCRIPT";
    /// Set: the agent side registers as `yolo-guard start` does (waiting for the supervisor).
    const WAIT_VAR: &str = "YOLO_TEST_EXEC_WAIT";
    /// Set (by a tag starting with "confined"): the agent side confines itself as the shim
    /// does (`confine`).
    const CONFINE_VAR: &str = "YOLO_TEST_EXEC_CONFINE";

    /// Not a test of its own: the "agent" half of the tests below (a no-op when run alone).
    #[test]
    fn agent_side() {
        let (Ok(socket), Ok(script)) = (std::env::var(SOCKET_VAR), std::env::var(SCRIPT_VAR))
        else {
            return;
        };
        let parent: i32 = std::env::var("YOLO_TEST_EXEC_PEER")
            .unwrap()
            .parse()
            .unwrap();
        let listener = filter::install().expect("filter");
        let wait = match std::env::var(WAIT_VAR) {
            Ok(_) => shim::Wait::Listening(std::time::Duration::from_secs(10)),
            Err(_) => shim::Wait::Busy,
        };
        if let Err(e) = shim::register(&listener, &socket, parent, wait) {
            eprintln!("register: {e}");
            std::process::exit(126);
        }
        drop(listener);
        if std::env::var_os(CONFINE_VAR).is_some() {
            assert_eq!(confine::close_proc_to_writes(), confine::Confined::Yes);
        }
        let err = std::os::unix::process::CommandExt::exec(
            Command::new("/bin/sh").arg("-c").arg(&script),
        );
        panic!("exec: {err}");
    }

    /// Item 5 of issue 23, on the real kernel: a process the shim confined cannot open a
    /// sibling's `/proc/PID/mem` for writing (the argv rewrite), even through its own
    /// descriptor table, while it still reads it and writes files, pipes and `/dev/null`.
    #[test]
    fn a_confined_agent_cannot_write_another_process_memory_but_writes_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("written");
        let script = format!(
            r#"/bin/sleep 30 & victim=$!
            refused=0
            ( exec 3<>/proc/$victim/mem ) 2>/dev/null || refused=$((refused + 1))
            ( exec 3</proc/$victim/mem; exec 4<>/proc/self/fd/3 ) 2>/dev/null || refused=$((refused + 1))
            ( exec 3</proc/$victim/mem ) 2>/dev/null || {{ echo no-read; exit 3; }}
            echo ok > {file} && echo ok > /dev/null && echo ok | cat > /dev/null || exit 4
            # A pipe of this user's, reopened through /proc/self/fd (pipefs is outside the rule).
            ( echo ok > /dev/stdout ) | grep -q ok || exit 5
            kill $victim
            exit $refused"#,
            file = file.display()
        );
        let (_, status) = supervised("confined-mem", &script);
        assert_eq!(status.code(), Some(2), "both write opens must be refused");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "ok\n");
    }

    fn supervised(tag: &str, script: &str) -> (Vec<EventKind>, std::process::ExitStatus) {
        supervised_with(tag, script, 1 << 30)
    }

    /// The agent side runs `script` under a supervisor whose log may reach `max_bytes`; a run
    /// longer than 30 s is a hang (killed, and the test fails).
    fn supervised_with(
        tag: &str,
        script: &str,
        max_bytes: u64,
    ) -> (Vec<EventKind>, std::process::ExitStatus) {
        supervised_late(tag, script, max_bytes, None)
    }

    /// [`supervised_with`]; with `late`, the agent side starts first, waiting as `yolo-guard
    /// start` does, and the supervisor opens its socket that much later (`None` when it never
    /// does: the agent side must give up without running the script).
    fn supervised_late(
        tag: &str,
        script: &str,
        max_bytes: u64,
        late: Option<Option<std::time::Duration>>,
    ) -> (Vec<EventKind>, std::process::ExitStatus) {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("exec.jsonl");
        let socket = format!("yolo-exec-test-{}-{tag}", std::process::id());
        let (events, _rx) = Events::channel();
        let start = || {
            supervisor::start(
                supervisor::Options {
                    allow_traced: false,
                    socket: socket.clone(),
                    log_path: log.clone(),
                    max_bytes,
                    session: "s".into(),
                    phase: None,
                },
                events.clone(),
            )
            .unwrap()
        };
        let mut handle = late.is_none().then(start);
        // Through a shell that stays the test's child: a real parent in the tracer's thread
        // group would take the tracee's stops with its own waitpid (the guard, as PID 1, holds
        // `init::tracing` while it reaps for the same reason).
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(r#""$0" "$@"; status=$?; exit $status"#)
            .arg(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "exec::tests::agent_side",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(SOCKET_VAR, &socket)
            .env("YOLO_TEST_EXEC_PEER", std::process::id().to_string())
            .env(SCRIPT_VAR, script)
            .envs(late.map(|_| (WAIT_VAR, "1")))
            .envs(tag.starts_with("confined").then_some((CONFINE_VAR, "1")))
            .spawn()
            .unwrap();
        if let Some(Some(after)) = late {
            std::thread::sleep(after);
            handle = Some(start());
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("the supervised run hung: {:#?}", read(&log));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        // Exit records follow the pidfds: give the supervisor a moment.
        std::thread::sleep(std::time::Duration::from_millis(300));
        if let Some(handle) = handle {
            handle.stop();
        }
        (read(&log), status)
    }

    fn read(log: &Path) -> Vec<EventKind> {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Event>(l).unwrap().kind)
            .collect()
    }

    fn execs(events: &[EventKind]) -> Vec<(Vec<String>, String, Option<String>)> {
        events
            .iter()
            .filter_map(|e| match e {
                EventKind::Exec {
                    argv, result, exe, ..
                } => Some((argv.clone(), result.clone(), exe.clone())),
                _ => None,
            })
            .collect()
    }

    fn root() -> bool {
        // SAFETY: plain getuid.
        unsafe { libc::geteuid() == 0 }
    }

    /// `yolo-guard start`: the agent's first program may start before the guard opens the
    /// supervisor's socket (a cold `up` starts both at once); it waits, and its program runs
    /// only once registered, so even its first exec is on the record.
    #[test]
    fn the_agents_first_program_waits_for_a_supervisor_that_opens_late() {
        if !root() {
            eprintln!("skipped: ptrace of another process tree needs root here");
            return;
        }
        let late = Some(std::time::Duration::from_millis(700));
        let (events, status) =
            supervised_late("late", "/bin/true late; exit 0", 1 << 30, Some(late));
        assert!(status.success(), "{status}");
        let execs = execs(&events);
        assert!(
            execs
                .iter()
                .any(|(a, r, _)| a == &vec!["/bin/true", "late"] && r == "ok"),
            "{execs:?}"
        );
    }

    /// Without a supervisor, nothing runs: `start` gives up (exit 126) instead of running the
    /// program unrecorded, and `shim` (Busy) fails at once.
    #[test]
    fn with_no_supervisor_the_program_never_runs() {
        if !root() {
            eprintln!("skipped: ptrace of another process tree needs root here");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let script = format!("touch {}", marker.display());
        let started = std::time::Instant::now();
        let (_, status) = supervised_late("never", &script, 1 << 30, Some(None));
        assert_eq!(status.code(), Some(126), "{status}");
        assert!(!marker.exists(), "the program ran without a supervisor");
        assert!(started.elapsed() >= std::time::Duration::from_secs(9));
    }

    #[test]
    fn every_exec_is_recorded_with_its_result_and_exit() {
        if !root() {
            eprintln!("skipped: ptrace of another process tree needs root here");
            return;
        }
        let (events, status) = supervised(
            "basic",
            "/bin/true one 'two words'; /nonexistent/prog x; /bin/sh -c 'exit 3'; exit 0",
        );
        assert!(status.success(), "{status}");
        let execs = execs(&events);
        let argvs: Vec<&Vec<String>> = execs.iter().map(|(a, _, _)| a).collect();
        assert!(
            argvs.contains(&&vec![
                "/bin/sh".to_string(),
                "-c".into(),
                std::env::var(SCRIPT_VAR).unwrap_or_default()
            ]) || execs
                .iter()
                .any(|(a, r, _)| a.first().is_some_and(|x| x == "/bin/sh") && r == "ok"),
            "{execs:?}"
        );
        assert!(
            execs
                .iter()
                .any(|(a, r, e)| a == &vec!["/bin/true", "one", "two words"]
                    && r == "ok"
                    && e.as_deref().is_some_and(|e| e.ends_with("true"))),
            "{execs:?}"
        );
        assert!(
            execs
                .iter()
                .any(|(a, r, _)| a == &vec!["/nonexistent/prog", "x"] && r == "ENOENT"),
            "{execs:?}"
        );
        // A failed exec is on record with the path its caller passed.
        let failed_path = events.iter().any(|e| {
            matches!(e, EventKind::Exec { path, result, .. }
                if path == "/nonexistent/prog" && result == "ENOENT")
        });
        assert!(failed_path, "{events:?}");
        let exit3 = events
            .iter()
            .any(|e| matches!(e, EventKind::ExecExit { exit_code: 3, .. }));
        assert!(exit3, "{events:?}");
    }

    /// A record too long for one line (60 KB of arguments, written as JSON) is cut to the line
    /// cap and flagged, and the execs after it are recorded as ever.
    #[test]
    fn an_exec_with_a_huge_record_is_cut_and_the_next_ones_stay_intact() {
        if !root() {
            return;
        }
        let (events, status) = supervised_with(
            "toolarge",
            "big=$(head -c 4000 /dev/zero | tr '\\0' a); \
             /bin/true $big $big $big $big $big $big $big $big $big $big $big $big $big $big $big; \
             echo \"big: $?\" >&2; /bin/echo after1; /bin/echo after2; exit 0",
            200_000,
        );
        assert!(status.success(), "{status}");
        let execs = execs(&events);
        for word in ["after1", "after2"] {
            let found: Vec<_> = execs
                .iter()
                .filter(|(a, _, _)| a == &vec!["/bin/echo".to_string(), word.into()])
                .collect();
            assert_eq!(found.len(), 1, "{word}: {execs:?}");
            assert_eq!(found[0].1, "ok", "{word}: {execs:?}");
        }
        let big = events
            .iter()
            .find_map(|e| match e {
                EventKind::Exec {
                    argv,
                    truncated,
                    argc,
                    ..
                } if argv.first().is_some_and(|p| p == "/bin/true") => Some((*truncated, *argc)),
                _ => None,
            })
            .expect("the big exec is on record");
        assert_eq!(big, (true, Some(16)));
    }

    #[test]
    fn a_second_listener_cannot_be_opened_under_the_filter() {
        if !root() {
            return;
        }
        // The agent's shell runs the test binary as a nested "agent": its filter install must
        // fail (EPERM), so the nested run fails and says so.
        let me = std::env::current_exe().unwrap();
        let script = format!(
            "{SOCKET_VAR}=nested {SCRIPT_VAR}=true {} --exact exec::tests::agent_side --test-threads=1 >/dev/null 2>&1; echo $? > /dev/null; exit $?",
            me.display()
        );
        let (events, _) = supervised("nested", &script);
        let execs = execs(&events);
        assert!(
            execs.iter().all(|(a, _, _)| a != &vec!["true".to_string()]),
            "{execs:?}"
        );
        let nested = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg("true")
            .status()
            .unwrap();
        assert!(nested.success());
    }

    /// The `exec` records of `argv0`, whole.
    fn records_of<'a>(events: &'a [EventKind], argv0: &str) -> Vec<&'a EventKind> {
        events
            .iter()
            .filter(|e| matches!(e, EventKind::Exec { argv, .. } if argv.first().is_some_and(|a| a == argv0)))
            .collect()
    }

    /// The hash of an exec, from its record or from the `exec_digest` that followed it.
    fn digest_of(events: &[EventKind], record: &EventKind) -> Option<String> {
        let EventKind::Exec { id, sha256, .. } = record else {
            return None;
        };
        sha256.clone().or_else(|| {
            events.iter().find_map(|e| match e {
                EventKind::ExecDigest { id: of, sha256, .. } if of == id => sha256.clone(),
                _ => None,
            })
        })
    }

    fn sha256_of(path: &str) -> String {
        digest::hash_file(&std::fs::File::open(path).unwrap(), digest::MAX_HASHED).unwrap()
    }

    /// The attack run's launcher: a payload renamed over a program's path, exec'd by that path,
    /// and the original put back. The record's hash is the payload's, whatever the path says.
    #[test]
    fn a_program_swapped_under_its_path_is_recorded_by_its_content() {
        if !root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let script = format!(
            "cp /bin/true {d}/true; cp /bin/echo {d}/payload; \
             mv {d}/true {d}/orig; mv {d}/payload {d}/true; {d}/true swapped; \
             mv {d}/orig {d}/true; {d}/true plain; exit 0"
        );
        let (events, status) = supervised("swap", &script);
        assert!(status.success(), "{status}");
        let path = format!("{d}/true");
        let record = |word: &str| {
            records_of(&events, &path)
                .into_iter()
                .find(|e| matches!(e, EventKind::Exec { argv, .. } if argv.get(1).is_some_and(|a| a == word)))
                .unwrap_or_else(|| panic!("no record of {word}: {events:?}"))
        };
        assert_eq!(
            digest_of(&events, record("swapped")).as_deref(),
            Some(sha256_of("/bin/echo").as_str()),
            "{events:?}"
        );
        assert_eq!(
            digest_of(&events, record("plain")).as_deref(),
            Some(sha256_of("/bin/true").as_str()),
            "{events:?}"
        );
    }

    /// A program run again is hashed once: its later records carry the hash themselves.
    #[test]
    fn a_known_binary_is_hashed_in_the_record_itself() {
        if !root() {
            return;
        }
        let (events, status) = supervised(
            "cached",
            "/bin/true 1; sleep 0.5; /bin/true 2; /bin/true 3; exit 0",
        );
        assert!(status.success(), "{status}");
        let records = records_of(&events, "/bin/true");
        assert_eq!(records.len(), 3, "{events:?}");
        let want = sha256_of("/bin/true");
        for r in &records {
            assert_eq!(
                digest_of(&events, r).as_deref(),
                Some(want.as_str()),
                "{r:?}"
            );
        }
        // /bin/true is older than the settling time: once hashed (the pause), it is known.
        assert!(
            matches!(
                records[1],
                EventKind::Exec {
                    sha256: Some(_),
                    ..
                }
            ) && matches!(
                records[2],
                EventKind::Exec {
                    sha256: Some(_),
                    ..
                }
            ),
            "{records:?}"
        );
    }

    /// Loader variables are named in the record of the program they load code into.
    #[test]
    fn loader_variables_are_recorded_by_name() {
        if !root() {
            return;
        }
        let (events, status) = supervised(
            "loader",
            // (cargo runs tests with LD_LIBRARY_PATH set)
            "unset LD_LIBRARY_PATH; LD_PRELOAD= LD_AUDIT= GCONV_PATH=/x /bin/true loaded; /bin/true clean; exit 0",
        );
        assert!(status.success(), "{status}");
        let env_of = |word: &str| {
            records_of(&events, "/bin/true")
                .into_iter()
                .find_map(|e| match e {
                    EventKind::Exec {
                        argv, loader_env, ..
                    } if argv[1] == word => Some(loader_env.clone()),
                    _ => None,
                })
                .unwrap()
        };
        let mut loaded = env_of("loaded");
        loaded.sort();
        assert_eq!(loaded, ["GCONV_PATH", "LD_AUDIT", "LD_PRELOAD"]);
        assert!(env_of("clean").is_empty());
    }

    /// A signal pending at the exec stop (blocked, so still pending when the program is let
    /// go) is named: the program could be held before it reads its arguments.
    #[test]
    fn a_signal_pending_at_the_exec_is_recorded() {
        if !root() {
            return;
        }
        let script = r#"python3 -c 'import os, signal; signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1]); os.kill(os.getpid(), signal.SIGUSR1); os.execv("/bin/true", ["/bin/true", "held"])'; exit 0"#;
        let (events, status) = supervised("pending", script);
        assert!(status.success(), "{status}");
        let pending = records_of(&events, "/bin/true")
            .into_iter()
            .find_map(|e| match e {
                EventKind::Exec {
                    pending_signals, ..
                } => Some(pending_signals.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{events:?}"));
        assert_eq!(pending, ["SIGUSR1"]);
    }

    /// Under the filter, a process cannot write another's memory with `process_vm_writev` or
    /// ptrace's POKE; reading stays allowed.
    #[test]
    fn the_filter_refuses_writes_into_another_process() {
        if !root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let script = format!(
            r#"python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(b"abcd")
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
src = ctypes.create_string_buffer(b"wxyz")
local = iovec(ctypes.addressof(src), 4)
remote = iovec(ctypes.addressof(buf), 4)
w = libc.process_vm_writev(os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
werr = ctypes.get_errno()
r = libc.process_vm_readv(os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
libc.ptrace.restype = ctypes.c_long
p = libc.ptrace(5, os.getppid(), 0, 0)
perr = ctypes.get_errno()
open("{}", "w").write(f"{{w}} {{werr}} {{r}} {{p}} {{perr}}")
'; exit 0"#,
            out.display()
        );
        let (_, status) = supervised("memwrite", &script);
        assert!(status.success(), "{status}");
        let got = std::fs::read_to_string(&out).unwrap();
        assert_eq!(got, format!("-1 {} 4 -1 {}", libc::EPERM, libc::EPERM));
    }

    /// An exec held in the kernel (a thread's argv on a `userfaultfd` page nobody serves) does
    /// not stall the supervisor: the execs after it are recorded.
    #[test]
    fn an_exec_held_in_the_kernel_does_not_stall_the_others() {
        if !root() {
            return;
        }
        let script = r#"python3 -c '
import ctypes, mmap, os, struct, fcntl
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
uffd = libc.syscall(323, os.O_CLOEXEC)
assert uffd >= 0, ctypes.get_errno()
api = bytearray(struct.pack("QQQ", 0xAA, 0, 0))
fcntl.ioctl(uffd, 0xc018aa3f, api)
libc.mmap.restype = ctypes.c_void_p
page = libc.mmap(None, 4096, 3, 0x22, -1, 0)
reg = bytearray(struct.pack("QQQQ", page, 4096, 1, 0))
fcntl.ioctl(uffd, 0xc020aa00, reg)
import threading, time
argv = (ctypes.c_char_p * 3)(b"/bin/true", ctypes.cast(page, ctypes.c_char_p), None)
threading.Thread(target=lambda: libc.execv(b"/bin/true", argv), daemon=True).start()
time.sleep(0.2)
os.system("/bin/true after-the-held-one")
os._exit(0)
'; exit 0"#;
        let started = std::time::Instant::now();
        let (events, status) = supervised("held", script);
        assert!(status.success(), "{status}");
        let after = records_of(&events, "/bin/true")
            .into_iter()
            .any(|e| matches!(e, EventKind::Exec { argv, .. } if argv.get(1).is_some_and(|a| a == "after-the-held-one")));
        assert!(after, "the exec after the held one: {events:?}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }
}
