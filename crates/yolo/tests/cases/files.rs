//! The guard's file watcher: what the agent writes in the workspace is in the audit log,
//! recorded from outside the agent's reach, without a build's flood of files drowning the one
//! change that matters.

use crate::support::*;
use std::time::{Duration, Instant};

/// `yolo audit --json --kind file`, parsed.
fn file_records(t: &Test) -> Vec<serde_json::Value> {
    t.yolo(&["audit", "--json", "--kind", "file"])
        .ok()
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// How many changes below `prefix` the records stand for (a folded record counts `count`).
fn changes_below(records: &[serde_json::Value], prefix: &str) -> u64 {
    records
        .iter()
        .filter(|r| r["path"].as_str().unwrap_or("").starts_with(prefix))
        .map(|r| r["count"].as_u64().unwrap_or(1))
        .sum()
}

#[test]
fn the_guard_records_a_sensitive_change_apart_from_a_folded_build_flood() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.up(&[]);
    let script = "mkdir -p target/debug && (cd target/debug && \
                  i=0; while [ $i -lt 10000 ]; do : > f$i; i=$((i+1)); done) && \
                  echo 'export PWNED=1' > .envrc";
    t.yolo(&["exec", "--", "sh", "-c", script]).ok();

    // Records are written once a path is quiet (and folded ones once a second): poll.
    let deadline = Instant::now() + Duration::from_secs(20);
    let records = loop {
        let records = file_records(&t);
        let envrc = records.iter().any(|r| r["path"] == ".envrc");
        if (envrc && changes_below(&records, "target/debug/") >= 10_000)
            || Instant::now() > deadline
        {
            break records;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    // The one sensitive record is the agent's: the empty folders yolo makes for the read-only
    // list (.vscode/, .idea/) are there before the watcher starts.
    let envrc: Vec<_> = records.iter().filter(|r| r["sensitive"] == true).collect();
    assert_eq!(envrc.len(), 1, "{envrc:#?}");
    assert_eq!(envrc[0]["path"], ".envrc");
    assert_eq!(envrc[0]["sensitive"], true);
    assert_eq!(envrc[0]["change"], "created");
    assert_eq!(envrc[0]["size"], "export PWNED=1\n".len());
    assert!(envrc[0].get("count").is_none(), "never folded");
    let flood = changes_below(&records, "target/debug/");
    assert!(
        flood >= 10_000,
        "{flood} changes recorded below target/debug/"
    );
    assert!(records
        .iter()
        .any(|r| r["path"] == "target/debug/" && r["count"].as_u64() > Some(1)));
    assert!(
        records.len() < 200,
        "{} records for 10,000 files: {records:#?}",
        records.len()
    );
}

/// The guard's root has no `DAC_READ_SEARCH`: a folder of another user, mode 0700, cannot be
/// watched, and yolo says so where it is read.
#[test]
fn a_folder_the_guard_may_not_read_is_reported_by_status_and_audit() {
    use std::os::unix::fs::PermissionsExt;
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let secret = t.workspace.join("secret");
    std::fs::create_dir(&secret).unwrap();
    std::os::unix::fs::chown(&secret, Some(1234), Some(1234)).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o700)).unwrap();
    t.up(&[]);
    let expected =
        "the file audit does not see 1 folder of the workspace: 1 the guard may not read";
    let deadline = Instant::now() + Duration::from_secs(20);
    let audit = loop {
        let audit = t.yolo(&["audit"]).ok().stderr();
        if audit.contains(expected) || Instant::now() > deadline {
            break audit;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(audit.contains(expected), "{audit}");
    t.yolo(&["status"]).ok().assert_stderr_contains(expected);
}

#[test]
fn audit_files_false_turns_the_watcher_off() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.user_config("[audit]\nfiles = false\n");
    t.up(&[]);
    t.yolo(&["exec", "--", "sh", "-c", "echo x > .envrc"]).ok();
    // The guard writes what it holds when it stops: after `down` there is nothing to wait for.
    t.yolo(&["down"]).ok();
    assert_eq!(file_records(&t), Vec::<serde_json::Value>::new());
    let logs: Vec<String> = std::fs::read_dir(t.data_dir.join("network"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !logs.iter().any(|name| name.ends_with(".files.jsonl")),
        "{logs:?}"
    );
}
