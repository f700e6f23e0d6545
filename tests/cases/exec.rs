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
    assert_eq!(out.stdout(), "/workspace\nthe repo\n");
    assert_eq!(
        std::fs::read_to_string(t.workspace.join("from-container.txt")).unwrap(),
        "written\n"
    );
}

#[test]
fn exec_without_a_container_says_to_run_up() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let run = t.yolo(&["exec", "true"]).fails_with(1);
    assert!(run.stderr().contains("yolo up"), "{}", run.stderr());
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
}

#[test]
fn run_reports_a_missing_agent_program_with_the_fix() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let run = t.yolo(&["run", "claude"]).fails_with(1);
    assert!(run.stderr().contains("not installed"), "{}", run.stderr());
    assert!(
        run.stderr().contains("yolo init --agent claude"),
        "{}",
        run.stderr()
    );
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
    let out = t.yolo(&["run", "echoer", "--", "extra"]).ok();
    assert!(
        out.stdout().contains("agent:k123:unset:x:extra"),
        "{}",
        out.stdout()
    );
    let events = t.events();
    assert!(events
        .iter()
        .any(|e| e["kind"] == "command" && e["source"] == "agent"));
    assert!(
        !serde_json::to_string(&events).unwrap().contains("k123"),
        "secrets stay out of the log"
    );
}
