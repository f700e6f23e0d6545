//! Lifecycle hooks: all three forms, and when each runs.

use crate::support::*;

fn count(t: &Test, file: &str) -> usize {
    let out = t
        .yolo(&[
            "exec",
            "sh",
            "-c",
            &format!("cat /tmp/{file} 2>/dev/null | wc -l"),
        ])
        .ok();
    out.stdout().trim().parse().unwrap()
}

#[test]
fn hooks_run_in_all_forms_once_per_create_per_start_and_per_attach() {
    let t = Test::new();
    t.devcontainer(
        r#"{
        "image": "debian:bookworm-slim",
        "onCreateCommand": "echo created >> /tmp/oncreate",
        "updateContentCommand": ["sh", "-c", "echo u >> /tmp/update"],
        "postCreateCommand": { "a": "echo a >> /tmp/postcreate", "b": ["sh", "-c", "echo b >> /tmp/postcreate"] },
        "postStartCommand": ["sh", "-c", "echo started >> /tmp/poststart"],
        "postAttachCommand": { "one": "echo x >> /tmp/attach" }
    }"#,
    );
    t.up(&[]);
    assert_eq!(count(&t, "oncreate"), 1);
    assert_eq!(count(&t, "update"), 1);
    assert_eq!(
        count(&t, "postcreate"),
        2,
        "both named commands of the object form ran"
    );
    assert_eq!(count(&t, "poststart"), 1);
    assert_eq!(count(&t, "attach"), 1);

    t.up(&[]);
    assert_eq!(
        count(&t, "oncreate"),
        1,
        "create hooks run once per container"
    );
    assert_eq!(
        count(&t, "poststart"),
        1,
        "not restarted: postStart does not run again"
    );
    assert_eq!(count(&t, "attach"), 2, "postAttach runs on every up");

    // /tmp survives a stop in Docker (container filesystem), so the counts carry over.
    t.yolo(&["down"]).ok();
    t.up(&[]);
    assert_eq!(count(&t, "oncreate"), 1);
    assert_eq!(count(&t, "poststart"), 2, "postStart runs on each start");
    assert_eq!(count(&t, "attach"), 3);
}

#[test]
fn hook_output_is_streamed_with_its_name() {
    let t = Test::new();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "postCreateCommand": "echo hello-from-hook"}"#,
    );
    let (run, _) = t.up(&[]);
    run.assert_stderr_contains("[postCreateCommand] hello-from-hook");
}

#[test]
fn a_failing_hook_stops_up_with_its_name_and_exit_code() {
    let t = Test::new();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim",
            "postCreateCommand": {"fine": "true", "broken": "echo oops; exit 7"},
            "postAttachCommand": "touch /tmp/should-not-exist"}"#,
    );
    t.yolo(&["up"])
        .fails_with(70)
        .assert_stderr_contains("[postCreateCommand:broken] oops\n")
        .assert_stderr_contains("yolo: postCreateCommand:broken failed with exit code 7\n");
    let check = t.yolo(&["exec", "test", "-e", "/tmp/should-not-exist"]);
    assert_eq!(check.code(), 1, "later hooks did not run");
}

#[test]
fn remote_env_and_container_env_reach_commands() {
    let t = Test::new();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim",
            "containerEnv": {"BASE": "from-container"},
            "remoteEnv": {"DERIVED": "${containerEnv:BASE}-and-more", "WS": "${containerWorkspaceFolder}"},
            "postCreateCommand": "echo \"$DERIVED\" > /tmp/derived"}"#,
    );
    t.up(&[]);
    let out = t
        .yolo(&["exec", "sh", "-c", "cat /tmp/derived; echo $WS; pwd"])
        .ok();
    assert_eq!(
        out.stdout(),
        "from-container-and-more\n/workspaces/repo\n/workspaces/repo\n"
    );
}

#[test]
fn a_host_command_that_leaves_a_process_behind_does_not_hold_up_up() {
    let t = Test::new();
    // The background sleep keeps the command's output pipe open for as long as it runs.
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "initializeCommand": "sleep 45 & echo started"}"#,
    );
    let clock = std::time::Instant::now();
    t.yolo(&["up", "--trust-host-commands"])
        .ok()
        .assert_stderr_contains("[initializeCommand] started");
    let took = clock.elapsed();
    assert!(
        took < std::time::Duration::from_secs(40),
        "up waited for the background process: {took:?}"
    );
}

#[test]
fn the_users_shell_environment_reaches_hooks_and_exec_unless_the_probe_is_off() {
    let t = Test::new();
    // What a version manager does: its PATH and variables set in the shell's startup file.
    t.file(
        ".devcontainer/Dockerfile",
        "FROM debian:bookworm-slim\nRUN echo 'export FROM_RC=yes PATH=/opt/tool/bin:$PATH' >> /root/.bashrc\n",
    );
    t.devcontainer(
        r#"{"build": {"dockerfile": "Dockerfile"},
            "remoteEnv": {"OWN": "remote"},
            "postCreateCommand": "echo \"$FROM_RC $OWN\" > /tmp/hook-saw"}"#,
    );
    t.up(&[]);
    t.yolo(&["exec", "sh", "-c", "cat /tmp/hook-saw; echo $PATH"])
        .ok()
        .assert_stdout(
            "yes remote\n/opt/tool/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n",
        );
    // The probe is a command like any other: on the session's record.
    assert!(
        t.events()
            .iter()
            .any(|e| e["kind"] == "command" && e["name"] == "userEnvProbe"),
        "{:?}",
        t.events()
    );
    // Off, commands get the container's environment only.
    t.devcontainer(
        r#"{"build": {"dockerfile": "Dockerfile"}, "userEnvProbe": "none",
            "postCreateCommand": "echo \"[$FROM_RC]\" > /tmp/hook-saw"}"#,
    );
    t.yolo(&["up", "--rebuild", "--accept-config"]).ok();
    t.yolo(&["exec", "sh", "-c", "cat /tmp/hook-saw"])
        .ok()
        .assert_stdout("[]\n");
    // With no hook to run, `up` leaves the probe to the first command, which still sees it.
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t.yolo(&["up", "--accept-config"]).ok();
    t.yolo(&["exec", "sh", "-c", "echo $FROM_RC"])
        .ok()
        .assert_stdout("yes\n");
    t.yolo(&["exec", "sh", "-c", "echo $FROM_RC"])
        .ok()
        .assert_stdout("yes\n");
}

#[test]
fn a_non_root_user_can_write_the_agents_state_folders() {
    // Docker gives an exec as root the capabilities of the container's process, none for a
    // non-root container user: the setup cannot chown the state volumes, and must still leave
    // them writable for the agent (opencode writes its own at start).
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BASE_IMAGE}\nLABEL yolo.test={}\nRUN useradd --create-home --uid 1000 dev\nUSER dev\n",
            t.id
        ),
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "dev"}"#);
    t.up(&[]);
    t.yolo(&[
        "exec",
        "sh",
        "-c",
        "id -un; mkdir /yolo/state/opencode/repos && touch /yolo/state/claude/ok && echo wrote",
    ])
    .ok()
    .assert_stdout("dev\nwrote\n");
}

/// A Dockerfile config whose remote user `dev` is not root and has no sudo of its own.
fn non_root_user(t: &Test, hooks: &str) {
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BASE_IMAGE}\nLABEL yolo.test={}\nRUN useradd --create-home --uid 1000 dev\n",
            t.id
        ),
    );
    t.devcontainer(&format!(
        r#"{{"build": {{"dockerfile": "Dockerfile"}}, "remoteUser": "dev", {hooks}}}"#
    ));
}

/// Every container has no-new-privileges, so the image's sudo cannot become root; a hook's
/// `sudo` is yolo's broker instead: the command runs as root, in the exec audit, and yolo's
/// audit log has it as a `sudo` command named for the hook that asked.
#[test]
fn sudo_in_a_hook_runs_as_root_and_is_recorded_with_the_hook() {
    let t = Test::new();
    non_root_user(
        &t,
        r#""postCreateCommand": "sudo touch /root/x && sudo -E sh -c 'id -u > /etc/became' && id -u > /tmp/me && sudo -u postgres true; echo $? > /tmp/other-user""#,
    );
    t.up(&[]);
    t.yolo(&[
        "exec",
        "--",
        "sh",
        "-c",
        "cat /etc/became /tmp/me /tmp/other-user",
    ])
    .ok()
    .assert_stdout("0\n1000\n1\n");
    let sudo = t
        .events()
        .into_iter()
        .filter(|e| e["kind"] == "command" && e["source"] == "sudo")
        .collect::<Vec<_>>();
    assert_eq!(sudo.len(), 2, "{sudo:?}");
    assert_eq!(sudo[0]["name"], "postCreateCommand");
    assert_eq!(sudo[0]["argv"], serde_json::json!(["touch", "/root/x"]));
    assert_eq!(sudo[0]["user"], "root");
    assert_eq!(sudo[0]["exit_code"], 0);
    // The hook itself is on record as written, as the user.
    let hook = t
        .events()
        .into_iter()
        .find(|e| e["kind"] == "command" && e["name"] == "postCreateCommand")
        .expect("the hook's record");
    assert_eq!(hook["user"], "dev");
    assert_eq!(hook["source"], "hook");
    // The guard's exec audit saw the root command too.
    net::wait_event(&t, std::time::Duration::from_secs(10), |e| {
        e["kind"] == "exec" && e["argv"] == serde_json::json!(["touch", "/root/x"]) && e["uid"] == 0
    })
    .expect("the root command is in the exec log");
    // The agent has no sudo at all.
    t.yolo(&["exec", "--", "sh", "-c", "sudo id -u"])
        .fails_with(127);
}

/// ATTACK and cost: the shim confines every program with Landlock (no write open of a procfs
/// file, so one process cannot rewrite another's memory) where `/proc` is writable; where the
/// engine mounts it read-only that wall holds already, and the confinement is left out with its
/// cost (no new file directly in `/`). So `sudo tee /postCreateCommand.txt` in a hook (the
/// reference CLI's own test configs) works there, and neither a hook's root command nor the
/// agent's root ever opens another process's memory for writing.
#[test]
fn a_program_writes_at_the_top_only_where_proc_is_read_only_and_never_writes_process_memory() {
    let t = Test::new();
    non_root_user(
        &t,
        r#""postCreateCommand": "echo top | sudo tee /at-top.txt >/dev/null; echo $? > /tmp/top; sudo install -d -o dev /later; (echo x > /later/f) 2>/dev/null; echo $? > /tmp/later; sudo sh -c 'exec 3>/proc/1/mem' 2>/dev/null; echo $? > /tmp/mem; grep -c ' /proc proc ro' /proc/mounts > /tmp/proc-ro""#,
    );
    t.up(&[]);
    let seen = t
        .yolo(&[
            "exec",
            "--",
            "sh",
            "-c",
            "cat /tmp/top /tmp/later /tmp/mem /tmp/proc-ro; cat /at-top.txt 2>/dev/null || echo none",
        ])
        .ok()
        .stdout();
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(lines.len(), 5, "{seen}");
    let proc_read_only = lines[3] != "0";
    // No root command of the hook opens another process's memory for writing.
    assert_ne!(
        lines[2], "0",
        "a root command opened /proc/1/mem for writing: {seen}"
    );
    // The agent's root neither, as a program `yolo exec` starts (a config of user root).
    let agent = Test::new();
    agent.devcontainer(&format!(r#"{{"image": "{BASE_IMAGE}"}}"#));
    agent.up(&[]);
    let root = agent
        .yolo(&[
            "exec",
            "sh",
            "-c",
            "id -u; (exec 3>/proc/1/mem) 2>/dev/null; echo $?; (echo x > /from-exec) 2>/dev/null; echo $?",
        ])
        .ok()
        .stdout();
    let root: Vec<&str> = root.lines().skip_while(|l| *l != "0").skip(1).collect();
    assert_eq!(root.len(), 2, "{root:?}");
    assert_ne!(
        root[0], "0",
        "the agent's root opened /proc/1/mem for writing"
    );
    if proc_read_only {
        // No confinement, and none of its cost.
        assert_eq!((lines[0], lines[1], lines[4]), ("0", "0", "top"), "{seen}");
        assert_eq!(root[1], "0", "{root:?}");
    } else {
        // Landlock is the wall there, and keeps its cost: the hook's own command cannot write
        // in a top-level folder made after it started, nor a root command a new file at `/`.
        assert_ne!(lines[1], "0", "the hook's command was not confined: {seen}");
        assert_eq!(lines[4], "none", "{seen}");
        assert_ne!(root[1], "0", "{root:?}");
    }
}

/// ATTACK: a hook leaves processes behind that ask for root: one detached while the hook still
/// runs (its parent gone, it hangs under PID 1), one after the hook ended. Both are refused;
/// the hook's own `sudo` in between works.
#[test]
fn processes_a_hook_leaves_behind_get_no_root() {
    let t = Test::new();
    non_root_user(
        &t,
        r#""postCreateCommand": "sh -c '(sleep 1; sudo touch /etc/during; echo $? > /tmp/during) >/dev/null 2>&1 &'; (sleep 5; sudo touch /etc/after; echo $? > /tmp/after) >/dev/null 2>&1 & sleep 3; sudo touch /etc/hook; echo $? > /tmp/hook""#,
    );
    t.up(&[]);
    std::thread::sleep(std::time::Duration::from_secs(5));
    let script = "for f in hook during after; do cat /tmp/$f 2>/dev/null || echo none; done; ls /etc/during /etc/after 2>&1 | grep -c 'No such file'";
    let mut seen = String::new();
    for _ in 0..20 {
        seen = t.yolo(&["exec", "--", "sh", "-c", script]).stdout();
        if !seen.contains("none") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    // The hook's own sudo worked; the one left behind during the hook was refused (1); the
    // one after it found no broker (1) or, its folder gone, no `sudo` at all (127).
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(lines.len(), 4, "{seen}");
    assert_eq!((lines[0], lines[1], lines[3]), ("0", "1", "2"), "{seen}");
    assert!(matches!(lines[2], "1" | "127"), "{seen}");
    let notices = t
        .events()
        .into_iter()
        .filter(|e| e["kind"] == "notice")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>();
    assert!(
        notices
            .iter()
            .any(|m| m.starts_with("postCreateCommand: sudo refused to process")),
        "{notices:?}"
    );
}

/// ATTACK: the agent (a `yolo exec` process of the same user) finds the broker of a hook
/// that is running (its socket's name and `sudo`), and asks it for root: refused, it is no
/// process of the hook.
#[test]
fn the_agent_cannot_use_a_running_hooks_sudo() {
    let t = Test::new();
    non_root_user(
        &t,
        r#""postAttachCommand": "if [ -e /tmp/first ]; then echo $YOLO_SUDO > /tmp/name; command -v sudo > /tmp/bin; sleep 15; else touch /tmp/first; fi""#,
    );
    t.up(&[]);
    let mut again = t
        .command(&["up"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let attack = "[ -s /tmp/name ] || exit 9; YOLO_SUDO=$(cat /tmp/name) $(cat /tmp/bin) touch /etc/agent-was-root";
    let mut run = t.yolo(&["exec", "--", "sh", "-c", attack]);
    for _ in 0..40 {
        if run.code() != 9 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
        run = t.yolo(&["exec", "--", "sh", "-c", attack]);
    }
    run.fails_with(1)
        .assert_stderr_contains("only the lifecycle hook's own processes may use sudo");
    t.yolo(&["exec", "--", "test", "-e", "/etc/agent-was-root"])
        .fails_with(1);
    let _ = again.wait();
}

/// A `workspaceFolder` no mount makes: the engine's own words ("chdir to cwd ... set in
/// config.json") are followed by what to fix.
#[test]
fn a_workspace_folder_that_is_not_there_is_named_with_the_fix() {
    let t = Test::new();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "workspaceFolder": "/nowhere/x",
            "postCreateCommand": "true"}"#,
    );
    t.yolo(&["up"])
        .fails_with(70)
        .assert_stderr_contains("its working folder /nowhere/x does not exist there")
        .assert_stderr_contains("\"workspaceFolder\"");
}

/// The command lines of the container's processes that start with `prefix`, one per line.
fn processes_named(t: &Test, prefix: &str) -> String {
    let script = format!(
        "for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); u=$(awk '/^Uid:/ {{print $2}}' $p/status 2>/dev/null); case \"$c\" in '{prefix}'*) echo \"$u $c\";; esac; done"
    );
    t.yolo(&["exec", "--", "sh", "-c", &script]).ok().stdout()
}

/// ATTACK: a hook's root commands try to outlive it, to keep root for later: one leaves its
/// process group (`setsid`), one ignores SIGTERM and SIGHUP in a subshell. Both end with the
/// hook (the broker is their subreaper and ends every privileged process below it); what the
/// hook's user left running, without root, keeps running; the audit log says what was ended.
#[test]
fn root_processes_a_hook_leaves_running_end_with_the_hook() {
    let t = Test::new();
    non_root_user(
        &t,
        r#""postCreateCommand": "sudo sh -c 'setsid sleep 1001 </dev/null >/dev/null 2>&1 &'; sudo sh -c '(trap \"\" TERM HUP; sleep 1002) </dev/null >/dev/null 2>&1 &'; (sleep 1003 </dev/null >/dev/null 2>&1 &)""#,
    );
    t.up(&[]);
    let left = processes_named(&t, "sleep 100");
    assert!(!left.contains("sleep 1001"), "{left}");
    assert!(!left.contains("sleep 1002"), "{left}");
    assert!(
        left.contains("1000 sleep 1003"),
        "the user's own process: {left}"
    );
    let notices: Vec<String> = t
        .events()
        .into_iter()
        .filter(|e| e["kind"] == "notice")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        notices
            .iter()
            .any(|m| m.starts_with("postCreateCommand: sudo ended")),
        "{notices:?}"
    );
}

/// ATTACK: a root command kills the hook's broker (root may signal root) so that nobody is
/// left to end it, and leaves two processes behind, one of them not dumpable (so a reader
/// without CAP_SYS_PTRACE cannot see its namespaces). yolo sees the broker end without its
/// sweep and ends the root processes started since the hook began, both; the hook fails with
/// the broker's status.
#[test]
fn a_root_command_that_kills_its_broker_still_loses_root_when_the_hook_ends() {
    let t = Test::new();
    non_root_user(
        &t,
        r#""postCreateCommand": "sudo sh -c 'setsid sleep 1004 </dev/null >/dev/null 2>&1 & setsid perl -e \"syscall(157, 4, 0); sleep 1005\" </dev/null >/dev/null 2>&1 & sleep 0.5; kill -9 $PPID'""#,
    );
    t.yolo(&["up"])
        .fails_with(70)
        .assert_stderr_contains("yolo ended the root processes started since the hook began: 2");
    let left = processes_named(&t, "sleep 100");
    assert!(!left.contains("sleep 1004"), "{left}");
    let left = processes_named(&t, "perl");
    assert!(!left.contains("1005"), "{left}");
}

/// ATTACK: the agent takes a hook's connection to its sudo broker (`pidfd_getfd`, which the
/// kernel allows the same user on the hook's processes) after the hook's process connected and
/// before it asked, and sends its own request on it. Docker's seccomp profile refuses
/// `pidfd_getfd` (EPERM); where an engine's allows it, the broker looks at who sent the
/// request, not who connected, and refuses (`exec::sudo` tests that part without an engine).
#[test]
fn the_agent_cannot_ask_on_a_connection_taken_from_a_hook() {
    const HOLD: &str = r#"
import os, socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\0" + os.environ["YOLO_SUDO"])
open("/tmp/holder.new", "w").write(f"{os.getpid()} {s.fileno()}")
os.rename("/tmp/holder.new", "/tmp/holder")
time.sleep(20)
"#;
    const TAKE: &str = r#"
import ctypes, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
pid, fd = map(int, open("/tmp/holder").read().split())
pidfd = libc.syscall(434, pid, 0)  # pidfd_open
taken = libc.syscall(438, pidfd, fd, 0)  # pidfd_getfd
if taken < 0:
    print(f"getfd:{ctypes.get_errno()}")
    sys.exit(0)
s = socket.socket(fileno=taken)
line = json.dumps({"argv": ["touch", "/etc/agent-was-root"], "cwd": "/", "env": [], "keep_env": False}) + "\n"
socket.send_fds(s, [line.encode()], [0, 1, 2])
print(s.recv(4096).decode().strip())
"#;
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BASE_IMAGE}\nLABEL yolo.test={}\nRUN apt-get update && apt-get install -y --no-install-recommends python3 && rm -rf /var/lib/apt/lists/*\nRUN useradd --create-home --uid 1000 dev\n",
            t.id
        ),
    );
    t.devcontainer(
        r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "dev", "postAttachCommand": "if [ -e /tmp/first ]; then python3 attack/hold.py; else touch /tmp/first; fi"}"#,
    );
    t.user_config(&mirror_for_builds());
    t.file("attack/hold.py", HOLD);
    t.file("attack/take.py", TAKE);
    t.up(&[]);
    let mut again = t
        .command(&["up"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let attack = "[ -s /tmp/holder ] || exit 9; python3 attack/take.py";
    let mut run = t.yolo(&["exec", "--", "sh", "-c", attack]);
    for _ in 0..60 {
        if run.code() != 9 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
        run = t.yolo(&["exec", "--", "sh", "-c", attack]);
    }
    let out = run.ok().stdout();
    assert!(
        out.trim() == "getfd:1"
            || out.contains("only the lifecycle hook's own processes may use sudo"),
        "{out}"
    );
    t.yolo(&["exec", "--", "test", "-e", "/etc/agent-was-root"])
        .fails_with(1);
    let _ = again.wait();
}
