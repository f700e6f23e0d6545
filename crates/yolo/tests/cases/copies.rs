//! Named sessions on a copy (issue 28, item 1): `--copy NAME` gives a session of its own (its
//! own id, containers, guard, state and lock) whose agent works on a copy of the repository in a
//! volume, as on a remote engine, with the local engine; `yolo sync NAME` / `yolo down NAME`
//! bring its work back as the branch `yolo/NAME`, never over the user's branch or files.

use super::remote::{commit_all, git};
use crate::support::*;

/// A repository with one commit and a devcontainer.json.
fn repository() -> Test {
    let t = Test::new();
    t.user_config(
        "[agents.echoer]\ncommand = [\"sh\", \"-c\", \"echo from-run > run.txt; echo done-run\"]\n",
    );
    t.file("README.md", "the repo\n");
    t.file(".gitignore", "ignored/\n");
    t.devcontainer(&format!(r#"{{"image": "{BASE_IMAGE}"}}"#));
    git(&t.workspace, &["init", "-q", "-b", "main"]);
    commit_all(&t);
    t
}

#[test]
fn two_copies_of_one_repository_change_the_same_file_on_their_own_branches() {
    let t = repository();
    let main_before = git(&t.workspace, &["rev-parse", "HEAD"]);
    // Both start at once: each session has its own lock.
    std::thread::scope(|scope| {
        let one = scope.spawn(|| t.yolo(&["up", "--copy", "one"]));
        let two = scope.spawn(|| t.yolo(&["up", "--copy", "two"]));
        one.join().unwrap().ok();
        two.join().unwrap().ok();
    });
    let agents = t.agents();
    assert_eq!(agents.len(), 2, "one agent each: {agents:?}");
    let guards = t.guard_ids();
    assert_eq!(guards.len(), 2, "one guard each: {guards:?}");
    // Each agent's workspace is a volume of its own, not the repository's folder.
    let mut volumes = Vec::new();
    for agent in &agents {
        let mounts = inspect(agent)["Mounts"].clone();
        let workspace = mounts
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["Destination"] == "/workspaces/repo")
            .unwrap_or_else(|| panic!("the workspace mount: {mounts}"))
            .clone();
        assert_eq!(workspace["Type"], "volume", "{mounts}");
        volumes.push(workspace["Name"].as_str().unwrap().to_string());
    }
    assert_ne!(volumes[0], volumes[1]);
    // VS Code and the reference CLI find a folder's container by the `devcontainer.*` labels:
    // a copy's agent does not carry them (it would be taken for the workspace session's).
    for agent in &agents {
        let labels = inspect(agent)["Config"]["Labels"].clone();
        assert_eq!(labels["devcontainer.local_folder"], "", "{labels}");
        assert_eq!(labels["devcontainer.config_file"], "", "{labels}");
    }
    for (name, text) in [("one", "from one"), ("two", "from two")] {
        t.yolo(&[
            "exec",
            "--copy",
            name,
            "sh",
            "-c",
            &format!("echo '{text}' > README.md; echo {name} > {name}.txt"),
        ])
        .ok();
    }
    // The commands that act on a session take it as --session NAME too; each session's
    // record is its own.
    t.yolo(&["exec", "--session", "one", "sh", "-c", "cat one.txt"])
        .ok()
        .assert_stdout_contains("one");
    t.yolo(&["audit", "--session", "two", "--kind", "exec"])
        .ok()
        .assert_stdout_contains("two.txt")
        .assert_stdout_lacks("one.txt");
    // What a sync would bring, the files the host runs first, escaped; no branch moves.
    t.yolo(&[
        "exec",
        "--copy",
        "one",
        "sh",
        "-c",
        "echo 'all:' > Makefile; printf 'a\\033]0;title\\007b\\n' > esc.txt",
    ])
    .ok();
    let diff = t.yolo(&["diff", "one"]).ok().stdout();
    let flagged = diff.find("files your machine runs").expect(&diff);
    let makefile = diff.find("  Makefile").expect(&diff);
    assert!(
        flagged < makefile && makefile < diff.find("README.md").unwrap(),
        "{diff}"
    );
    assert!(diff.contains("+from one"), "{diff}");
    assert!(diff.contains("+a\\x1b]0;title\\x07b"), "{diff}");
    assert!(!diff.contains('\x1b'), "{diff}");
    assert!(!diff.contains("two.txt"), "{diff}");
    assert_eq!(git(&t.workspace, &["branch", "--list", "yolo/*"]), "");
    t.yolo(&["diff"])
        .fails_with(64)
        .assert_stderr_contains("works on the repository itself");
    // A detached run in a named session: its record names the session, `logs --session`
    // finds it, and its work is in that copy only.
    t.yolo(&["run", "-d", "--copy", "two", "echoer"]).ok();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let runs: serde_json::Value =
            serde_json::from_str(&t.yolo(&["ps", "--all", "--json"]).ok().stdout()).unwrap();
        let run = runs
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["copy"] == "two")
            .cloned();
        if run.as_ref().is_some_and(|r| r["state"] == "exited (0)") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{runs}");
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    t.yolo(&["logs", "--session", "two"])
        .ok()
        .assert_stdout_contains("done-run");
    t.yolo(&["exec", "--copy", "two", "cat", "run.txt"])
        .ok()
        .assert_stdout_contains("from-run");
    t.yolo(&["exec", "--copy", "one", "test", "!", "-e", "run.txt"])
        .ok();
    t.yolo(&["approvals", "--session", "one"])
        .ok()
        .assert_stdout_contains("no question waits");
    // Nothing reached the repository's folder.
    assert_eq!(
        std::fs::read_to_string(t.workspace.join("README.md")).unwrap(),
        "the repo\n"
    );
    assert!(!t.workspace.join("one.txt").exists());
    // `yolo ps --sessions` lists both, running, with what their agents did.
    let listed: serde_json::Value =
        serde_json::from_str(&t.yolo(&["ps", "--sessions", "--json"]).ok().stdout()).unwrap();
    for name in ["one", "two"] {
        let row = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["copy"] == name)
            .unwrap_or_else(|| panic!("{name}: {listed}"));
        assert_eq!(row["state"], "running", "{row}");
        assert_eq!(row["branch"], format!("yolo/{name}"), "{row}");
        assert_eq!(row["synced"], false, "{row}");
        assert!(row["programs"].as_u64().unwrap() >= 1, "{row}");
    }
    // Each copy's work comes back as its own branch.
    t.yolo(&["sync", "one"])
        .ok()
        .assert_stderr_contains("git merge yolo/one");
    t.yolo(&["sync", "--copy", "two"]).ok();
    for (name, text) in [("one", "from one"), ("two", "from two")] {
        let branch = format!("yolo/{name}");
        assert_eq!(
            git(&t.workspace, &["show", &format!("{branch}:README.md")]),
            text
        );
        assert_eq!(
            git(&t.workspace, &["show", &format!("{branch}:{name}.txt")]),
            name
        );
    }
    let files = git(&t.workspace, &["ls-tree", "-r", "--name-only", "yolo/one"]);
    assert!(!files.contains("two.txt"), "{files}");
    // The user's branch and files: untouched.
    assert_eq!(git(&t.workspace, &["rev-parse", "HEAD"]), main_before);
    assert_eq!(git(&t.workspace, &["branch", "--show-current"]), "main");
    // A branch the user moved is not moved again: compare-and-swap.
    let mine = git(
        &t.workspace,
        &[
            "commit-tree",
            "-p",
            "yolo/one",
            "-m",
            "mine",
            "yolo/one^{tree}",
        ],
    );
    git(&t.workspace, &["update-ref", "refs/heads/yolo/one", &mine]);
    t.yolo(&["exec", "--copy", "one", "sh", "-c", "echo more > more.txt"])
        .ok();
    t.yolo(&["sync", "one"])
        .fails_with(75)
        .assert_stderr_contains("then run `yolo sync one` again");
    assert_eq!(git(&t.workspace, &["rev-parse", "yolo/one"]), mine);
    // Nor does `down --remove --volumes` lose the work: it stops there.
    t.yolo(&["down", "one", "--remove", "--volumes"])
        .fails_with(75);
    assert_eq!(t.agents().len(), 2);
    git(&t.workspace, &["branch", "-m", "yolo/one", "yolo/one-mine"]);
    // Down brings the other's last work back, and takes everything of it away.
    t.yolo(&["exec", "--copy", "two", "sh", "-c", "echo last > last.txt"])
        .ok();
    t.yolo(&["down", "two", "--remove", "--volumes"]).ok();
    assert_eq!(git(&t.workspace, &["show", "yolo/two:last.txt"]), "last");
    assert_eq!(t.agents().len(), 1, "one's agent stays");
    // The workspace session starts beside it, on the repository itself, as it always did.
    let (_, up) = t.up(&[]);
    let plain = up["container"]["id"].as_str().unwrap().to_string();
    let bound = inspect(&plain)["Mounts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["Destination"] == "/workspaces/repo" && m["Type"] == "bind");
    assert!(bound, "the workspace session mounts the repository");
    // Every session of the repository goes at once, one's work brought back first.
    t.yolo(&["down", "--all", "--remove", "--volumes"])
        .ok()
        .assert_stderr_contains("session one")
        .assert_stderr_contains("the workspace session");
    assert_eq!(git(&t.workspace, &["show", "yolo/one:more.txt"]), "more");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    // Ended, they are listed with --all only, with their branches synced.
    t.yolo(&["ps", "--sessions"])
        .ok()
        .assert_stderr_contains("no session with containers");
    let ended = t.yolo(&["ps", "--sessions", "--all"]).ok().stdout();
    assert!(ended.contains("yolo/two "), "{ended}");
    assert!(!ended.contains("not synced"), "{ended}");
    assert!(ended.contains("ended"), "{ended}");
    let left = docker(&["volume", "ls", "-q", "--filter", "label=dev.yolo.managed"]);
    for volume in volumes {
        assert!(!left.contains(&volume), "{volume} stays");
    }
    // A session that does not exist is said so, and nothing is made for it.
    t.yolo(&["down", "typo"])
        .fails_with(66)
        .assert_stderr_contains("has no session typo");
    t.yolo(&["kube", "--copy", "one"])
        .fails_with(64)
        .assert_stderr_contains("takes no --copy");
    // A name that cannot be a branch is a usage error.
    t.yolo(&["up", "--copy", "../main"])
        .fails_with(64)
        .assert_stderr_contains("is not a session name");
}

/// A workspace session works on the repository itself, whose `.git` the agent can write: yolo
/// keeps no checkpoint of it (a checkpoint the agent could rewrite would be written back on the
/// host by a rollback), says so, and writes nothing into the repository's refs.
#[test]
fn a_workspace_session_has_no_checkpoints() {
    let t = repository();
    t.up(&[]);
    assert_eq!(git(&t.workspace, &["for-each-ref", "refs/yolo"]), "");
    for args in [
        &["checkpoint"][..],
        &["checkpoints"],
        &["rollback", "0", "--yes"],
    ] {
        t.yolo(args)
            .fails_with(64)
            .assert_stderr_contains("yolo keeps no checkpoint of it");
    }
}

/// A named session's rollback makes its copy anew from the checkpoint: the agent's later work
/// is gone from the copy, the repository's folder is never touched.
#[test]
fn a_rollback_makes_a_copy_anew_from_its_checkpoint() {
    let t = repository();
    t.yolo(&["up", "--copy", "c"]).ok();
    t.yolo(&[
        "exec",
        "--copy",
        "c",
        "sh",
        "-c",
        "echo first > a.txt; echo changed > README.md",
    ])
    .ok();
    t.yolo(&["checkpoint", "c"]).ok();
    t.yolo(&[
        "exec",
        "--copy",
        "c",
        "sh",
        "-c",
        "echo later > b.txt; rm a.txt",
    ])
    .ok();
    let listed = t.yolo(&["checkpoints", "c"]).ok().stdout();
    assert!(
        listed.contains("session start") && listed.contains("yolo checkpoint"),
        "{listed}"
    );
    t.yolo(&["rollback", "c@1", "--yes"])
        .ok()
        .assert_stderr_contains("yolo up --copy c");
    assert!(t.containers().is_empty(), "its containers were removed");
    t.yolo(&["up", "--copy", "c"]).ok();
    let seen = t
        .yolo(&["exec", "--copy", "c", "sh", "-c", "cat a.txt README.md; ls"])
        .ok()
        .stdout();
    assert!(seen.contains("first") && seen.contains("changed"), "{seen}");
    assert!(!seen.contains("b.txt"), "{seen}");
    assert_eq!(
        std::fs::read_to_string(t.workspace.join("README.md")).unwrap(),
        "the repo\n"
    );
    t.yolo(&["down", "--all", "--remove", "--volumes"]).ok();
}
