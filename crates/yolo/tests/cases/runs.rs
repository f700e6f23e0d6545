//! Agent runs: `yolo run --detach`, `yolo ps`, `yolo logs` (commands/runs.rs, session/runs.rs).

use crate::support::Test;

const AGENT: &str = r#"[agents.worker]
command = ["sh", "-c", "echo start:$MY_KEY:$1; sleep 2; echo end:$1; exit 4", "worker"]
env = ["MY_KEY"]
domains = []
"#;

fn ps(t: &Test, all: bool) -> Vec<serde_json::Value> {
    let args: &[&str] = if all {
        &["ps", "--all", "--json"]
    } else {
        &["ps", "--json"]
    };
    serde_json::from_str(&t.yolo(args).ok().stdout()).expect("ps --json")
}

/// Two unattended agents started in the background from one workspace: each returns at once
/// with its id, `ps` lists both while they run, `logs -f` prints each one's own output until
/// it ends, and `ps --all` then says how each ended. The output is kept on the host, the
/// agent's secret is in neither record, and what the agents ran is on the session's record.
#[test]
fn detached_runs_are_listed_followed_and_kept_on_the_host() {
    let mut t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.user_config(AGENT);
    t.env("MY_KEY", "k-secret-123");
    let started = std::time::Instant::now();
    let one = t.yolo(&["run", "--detach", "worker", "--", "one"]).ok();
    let two = t.yolo(&["run", "-d", "worker", "--", "two"]).ok();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "run --detach waits for nothing but the start"
    );
    let (one, two) = (
        one.stdout().trim().to_string(),
        two.stdout().trim().to_string(),
    );
    assert_ne!(one, two);
    let running: Vec<String> = ps(&t, false)
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert!(
        running.contains(&one) && running.contains(&two),
        "{running:?}"
    );
    t.yolo(&["logs", &one, "-f"])
        .ok()
        .assert_stdout_contains("start:k-secret-123:one")
        .assert_stdout_contains("end:one")
        .assert_stdout_lacks("two");
    // Without an id: the workspace's latest run.
    t.yolo(&["logs", "-f"])
        .ok()
        .assert_stdout_contains("end:two")
        .assert_stdout_lacks(":one");
    let all = ps(&t, true);
    for id in [&one, &two] {
        let run = all.iter().find(|r| r["id"] == id.as_str()).expect("listed");
        assert_eq!(run["state"], "exited (4)", "{run}");
        assert_eq!(run["exit_code"], 4);
        assert_eq!(run["agent"], "worker");
        assert_eq!(run["detached"], true);
        let log = std::path::Path::new(run["log"].as_str().unwrap());
        assert!(log.starts_with(t.root()), "the log is on the host: {log:?}");
    }
    t.yolo(&["ps", "--all"])
        .ok()
        .assert_stdout_contains(&one)
        .assert_stdout_contains("exited (4)");
    let records = std::fs::read_dir(t.root().join("data/runs")).unwrap();
    for entry in records.flatten() {
        if entry.path().extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            assert!(!text.contains("k-secret-123"), "a secret in {text}");
        }
    }
    // Not running any more: `ps` alone lists nothing of them.
    assert!(ps(&t, false).iter().all(|r| r["id"] != one.as_str()));
    let session = all[0]["session"].as_str().unwrap();
    t.yolo(&["audit", "--session", session, "--kind", "command"])
        .ok()
        .assert_stdout_contains("echo start");
}

/// Stopping a detached run's process stops the agent in the container, and the run says so.
#[test]
fn stopping_a_detached_run_stops_its_agent_and_is_recorded() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.user_config(
        "[agents.sleeper]\ncommand = [\"sh\", \"-c\", \"echo up; exec sleep 300\"]\ndomains = []\n",
    );
    let id = t.yolo(&["run", "--detach", "sleeper"]).ok().stdout();
    let id = id.trim();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    // Until the agent has started (its first line is in the log).
    while !t.yolo(&["logs", id]).stdout().contains("up") {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let run = ps(&t, false);
    let pid = run[0]["pid"].as_u64().unwrap() as i32;
    // SAFETY: a signal to the run's own process, which this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    t.yolo(&["logs", id, "-f"]).ok();
    let run = ps(&t, true);
    let state = run[0]["state"].as_str().unwrap();
    assert!(state.starts_with("failed: interrupted"), "{state}");
    // Nothing of it is left in the container.
    let left = t
        .yolo(&[
            "exec",
            "sh",
            "-c",
            "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done",
        ])
        .ok()
        .stdout();
    assert!(!left.contains("sleep 300"), "{left}");
}

/// Bad input says what to do, with the documented exit codes.
#[test]
fn logs_and_ps_explain_what_is_missing() {
    let t = Test::without_docker();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.yolo(&["ps"])
        .ok()
        .assert_stderr_contains("no running agent run");
    t.yolo(&["logs"])
        .fails_with(66)
        .assert_stderr_contains("yolo run --detach");
    t.yolo(&["logs", "nope"])
        .fails_with(66)
        .assert_stderr_contains("yolo ps --all");
    t.yolo(&["logs", "--bogus"]).fails_with(64);
}

/// The log holds what the agent wrote; `yolo logs` shows its control characters escaped (an
/// OSC 52 sequence would write the host's clipboard, others the title or the screen), `--raw`
/// as written.
#[test]
fn logs_escape_the_agents_control_sequences_unless_raw() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.user_config(
        "[agents.painter]\ncommand = [\"sh\", \"-c\", \"printf 'a\\\\033]52;c;cHduZWQ=\\\\007b\\\\n'\"]\ndomains = []\n",
    );
    let id = t.yolo(&["run", "--detach", "painter"]).ok().stdout();
    let id = id.trim();
    let shown = t.yolo(&["logs", id, "-f"]).ok().stdout();
    assert!(shown.contains("a\\x1b]52;c;cHduZWQ=\\x07b"), "{shown:?}");
    assert!(!shown.contains('\u{1b}'), "{shown:?}");
    let raw = t.yolo(&["logs", id, "--raw"]).ok().stdout();
    assert!(raw.contains("a\u{1b}]52;c;cHduZWQ=\u{7}b"), "{raw:?}");
}
