//! The exec audit: the shim's seccomp filter (`filter`, `shim`), how the shim hands its
//! listener to the guard (`wire`), and the guard's supervisor that records every exec
//! (`supervisor`, reading the agent's processes through `procfs`). See docs/security-model.md.

pub mod filter;
pub(crate) mod procfs;
pub mod shim;
pub mod supervisor;
pub mod wire;

/// The supervisor and the shim's side in one process tree, without Docker: the test process
/// supervises, and runs itself again as the "agent" (`agent_side`), which installs the filter,
/// registers with its parent and execs a shell. The container-level tests (PID 1, a second
/// container in the namespace, attacks as root) are the CLI's integration tests.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Events;
    use std::path::Path;
    use std::process::Command;
    use yolo_protocol::event::{Event, EventKind};

    const SOCKET_VAR: &str = "YOLO_TEST_EXEC_SOCKET";
    const SCRIPT_VAR: &str = "YOLO_TEST_EXEC_SCRIPT";

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
        shim::register(
            &listener,
            &socket,
            parent,
            std::time::Duration::from_secs(5),
        )
        .expect("register");
        drop(listener);
        let err = std::os::unix::process::CommandExt::exec(
            Command::new("/bin/sh").arg("-c").arg(&script),
        );
        panic!("exec: {err}");
    }

    fn supervised(tag: &str, script: &str) -> (Vec<EventKind>, std::process::ExitStatus) {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("exec.jsonl");
        let socket = format!("yolo-exec-test-{}-{tag}", std::process::id());
        let (events, _rx) = Events::channel();
        let handle = supervisor::start(
            supervisor::Options {
                socket: socket.clone(),
                log_path: log.clone(),
                max_bytes: 1 << 30,
                session: "s".into(),
                phase: None,
            },
            events,
        )
        .unwrap();
        // Through a shell that stays the test's child: a real parent in the tracer's thread
        // group would take the tracee's stops with its own waitpid (the guard, as PID 1, holds
        // `init::tracing` while it reaps for the same reason).
        let status = Command::new("/bin/sh")
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
            .status()
            .unwrap();
        // Exit records follow the pidfds: give the supervisor a moment.
        std::thread::sleep(std::time::Duration::from_millis(300));
        handle.stop();
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
        let exit3 = events
            .iter()
            .any(|e| matches!(e, EventKind::ExecExit { exit_code: 3, .. }));
        assert!(exit3, "{events:?}");
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
}
