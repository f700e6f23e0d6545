//! exec / shell: exit codes, stdin, user, working directory.

use crate::support::*;

#[test]
fn exec_passes_exit_codes_and_stdin_through() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.up(&[]);
    t.yolo(&["exec", "sh", "-c", "exit 3"]).fails_with(3);
    t.yolo(&["exec", "--", "false"]).fails_with(1);
    let echoed = t.yolo_stdin(&["exec", "cat"], "hello\nworld\n").ok();
    assert_eq!(echoed.stdout(), "hello\nworld\n");
    let counted = t
        .yolo_stdin(&["exec", "wc", "-c"], &"x".repeat(100_000))
        .ok();
    assert_eq!(counted.stdout().trim(), "100000");
    let stderr = t.yolo(&["exec", "sh", "-c", "echo to-err >&2"]).ok();
    assert_eq!(stderr.stderr().trim(), "to-err");
    assert_eq!(stderr.stdout(), "");
}

/// `exec` goes straight to the agent `up` recorded; a record that names something else (a
/// container gone, or one that is not this workspace's agent: here its guard) is not trusted,
/// and the agent is found by its labels.
#[test]
fn exec_finds_the_agent_when_the_recorded_container_is_not_it() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.up(&[]);
    t.yolo(&["exec", "sh", "-c", "echo $HOSTNAME > /tmp/agent-mark"])
        .ok();
    let workspaces = t.data_dir.join("workspaces");
    let state_file = std::fs::read_dir(&workspaces)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("the workspace state");
    let original = std::fs::read_to_string(&state_file).unwrap();
    let mut state: serde_json::Value = serde_json::from_str(&original).unwrap();
    let agent = state["exec"]["container"].as_str().unwrap().to_string();
    let guard = docker(&[
        "ps",
        "-q",
        "--no-trunc",
        "--filter",
        &format!("label={LABEL}={}", t.id),
        "--filter",
        "label=dev.yolo.role=guard",
    ]);
    for recorded in ["0123456789ab-gone", guard.trim()] {
        state["exec"]["container"] = recorded.into();
        std::fs::write(&state_file, state.to_string()).unwrap();
        let out = t.yolo(&["exec", "cat", "/tmp/agent-mark"]).ok();
        assert!(!out.stdout().trim().is_empty(), "{recorded}: in the agent");
    }
    assert_ne!(agent, guard.trim());
}

#[test]
fn exec_runs_in_the_workspace_which_is_the_repository() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.file("README.md", "the repo\n");
    t.up(&[]);
    let out = t
        .yolo(&[
            "exec",
            "sh",
            "-c",
            "pwd; cat README.md; echo written > from-container.txt",
        ])
        .ok();
    assert_eq!(out.stdout(), "/workspaces/repo\nthe repo\n");
    assert_eq!(
        std::fs::read_to_string(t.workspace.join("from-container.txt")).unwrap(),
        "written\n"
    );
}

#[test]
fn exec_and_run_use_the_remote_user() {
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        "FROM debian:bookworm-slim\nRUN useradd --create-home --uid 1000 dev\n",
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "dev", "updateRemoteUserUID": false}"#);
    t.up(&[]);
    let out = t.yolo(&["exec", "id", "-un"]).ok();
    assert_eq!(out.stdout().trim(), "dev");
    // Its login shell keeps the container's PATH, sbin folders too, as the reference CLI
    // patches /etc/profile to do (Debian's resets it to one without them for other users).
    let out = t.yolo(&["exec", "printenv", "PATH"]).ok();
    assert_eq!(
        out.stdout().trim(),
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    );
}

#[test]
fn run_reports_a_missing_agent_program_with_the_fix() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.yolo(&["run", "claude"])
        .fails_with(69)
        .assert_stderr_contains("not installed")
        .assert_stderr_contains("yolo init --agent claude");
}

#[test]
fn run_starts_a_user_defined_agent_with_only_its_env() {
    let mut t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.user_config(
        r#"[agents.echoer]
command = ["sh", "-c", "echo agent:$MY_KEY:${OTHER_SECRET:-unset}:$0:$1", "x"]
env = ["MY_KEY"]
domains = []
"#,
    );
    t.env("MY_KEY", "k123").env("OTHER_SECRET", "leak");
    t.yolo(&["run", "echoer", "--", "extra"])
        .ok()
        .assert_stdout_contains("agent:k123:unset:x:extra");
    let events = t.events();
    assert!(events
        .iter()
        .any(|e| e["kind"] == "command" && e["source"] == "agent"));
    assert!(
        !serde_json::to_string(&events).unwrap().contains("k123"),
        "secrets stay out of the log"
    );
}

#[test]
fn exec_allocates_a_tty_when_stdin_is_a_terminal() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.up(&[]);
    // `script` runs yolo on a pseudo-terminal, as a person's shell would.
    let yolo = env!("CARGO_BIN_EXE_yolo");
    let mut cmd = t.command(&[]);
    let envs: Vec<(std::ffi::OsString, std::ffi::OsString)> = cmd
        .get_envs()
        .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned())))
        .collect();
    let out = std::process::Command::new("script")
        .args([
            "-qec",
            &format!("{yolo} exec sh -c 'tty; exit 5'"),
            "/dev/null",
        ])
        .current_dir(&t.workspace)
        .envs(envs)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script (bsdutils)");
    cmd.arg("--version");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("/dev/pts/"), "a TTY inside: {text}");
    assert_eq!(
        out.status.code(),
        Some(5),
        "exit code passes through the TTY path too"
    );
}

#[test]
fn doctor_reports_a_working_engine() {
    let t = Test::new();
    t.yolo(&["doctor"])
        .ok()
        .assert_stdout_contains("✓ Docker Engine")
        .assert_stdout_contains("API");
}

#[test]
fn doctor_names_the_signs_of_a_tls_intercepting_proxy_and_the_setting() {
    let mut t = Test::new();
    t.env("NODE_EXTRA_CA_CERTS", "/etc/corp-ca.pem");
    t.yolo(&["doctor"])
        .ok()
        .assert_stdout_contains("NODE_EXTRA_CA_CERTS=/etc/corp-ca.pem")
        .assert_stdout_contains("--extra-ca")
        .assert_stdout_contains("extra_ca = [");
    // Given, it says which.
    t.user_config("extra_ca = [\"/etc/corp-ca.pem\"]\n");
    t.yolo(&["doctor"])
        .ok()
        .assert_stdout_contains("✓ extra CA certificates: /etc/corp-ca.pem");
}

#[test]
fn override_command_false_keeps_the_image_command() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "overrideCommand": false, "runArgs": []}"#);
    // debian's command is bash, which exits at once without a terminal: the container stops,
    // and yolo must say so instead of hanging or pretending it runs.
    t.yolo(&["up"])
        .fails_with(70)
        .assert_stderr_contains("stopped right after it started")
        .assert_stderr_contains("overrideCommand");
    let agents = t.agents();
    assert_eq!(agents.len(), 1);
    let cmd = inspect(&agents[0])["Config"]["Cmd"].to_string();
    assert_eq!(cmd, r#"["bash"]"#, "the image's own command was kept");
}

#[test]
fn shell_runs_the_users_shell_in_the_workspace() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.up(&[]);
    t.yolo_stdin(&["shell"], "echo \"$0 in $(pwd)\"\nexit 3\n")
        .fails_with(3)
        .assert_stdout_contains("bash in /workspaces/repo");
}

/// `yolo` on a pseudo-terminal (`script`), as a person runs it; its exit code and output.
fn on_a_terminal(t: &Test, args: &str) -> (Option<i32>, String) {
    let yolo = env!("CARGO_BIN_EXE_yolo");
    let cmd = t.command(&[]);
    let envs: Vec<(std::ffi::OsString, std::ffi::OsString)> = cmd
        .get_envs()
        .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned())))
        .collect();
    let out = std::process::Command::new("script")
        .args(["-qec", &format!("{yolo} {args}"), "/dev/null"])
        .current_dir(&t.workspace)
        .envs(envs)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script (bsdutils)");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn run_records_its_terminal_and_replay_plays_it() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.user_config(
        "[agents.talker]\ncommand = [\"sh\", \"-c\", \"printf 'recorded-\\\\033[1mbold\\\\033[0m\\\\n'; exit 3\"]\n",
    );
    let (_, up) = t.up(&[]);
    let session = up["session"].as_str().unwrap().to_string();
    let (code, _) = on_a_terminal(&t, "run talker");
    assert_eq!(code, Some(3), "the agent's exit code");

    // An asciicast v2 file in the session's folder, with what the agent printed.
    let dir = t.data_dir.join("sessions").join(&session);
    let casts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(casts.len(), 1, "{casts:?}");
    let text = std::fs::read_to_string(&casts[0]).unwrap();
    let mut lines = text.lines();
    let header: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["version"], 2);
    assert!(header["width"].as_u64().unwrap() > 0);
    let printed: String = lines
        .map(|l| serde_json::from_str::<(f64, String, String)>(l).unwrap())
        .filter(|(_, kind, _)| kind == "o")
        .map(|(_, _, text)| text)
        .collect();
    assert!(printed.contains("recorded-\u{1b}[1mbold"), "{printed:?}");
    assert!(t.events().iter().any(|e| e["kind"] == "notice"
        && e["message"]
            .as_str()
            .unwrap()
            .contains("terminal of agent recorded in")));

    // asciinema's own player reads it (CI installs it and sets YOLO_ASCIINEMA).
    if let Some(asciinema) = std::env::var_os("YOLO_ASCIINEMA") {
        let out = std::process::Command::new(asciinema)
            .arg("cat")
            .arg(&casts[0])
            .output()
            .expect("asciinema");
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("recorded-\u{1b}[1mbold"));
    }
    // `yolo replay` plays it; the terminal's own escapes are the recording's content.
    t.yolo(&["replay", "--speed", "100"])
        .ok()
        .assert_stdout_contains("recorded-\u{1b}[1mbold");
    t.yolo(&["replay", &session]).ok();
    // Without a terminal nothing is recorded.
    t.yolo(&["exec", "echo", "piped"]).ok();
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    // Bad input.
    t.yolo(&["replay", "../../etc"]).fails_with(64);
    t.yolo(&["replay", "--speed", "0"]).fails_with(64);
    t.yolo(&["replay", "20990101T000000Z-00000000"])
        .fails_with(66);
}
