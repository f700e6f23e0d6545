//! Checkpoints of the workspace session (issue 28, item 3): the agent works on the repository
//! itself, so its checkpoints are kept in yolo's own store (never the repository's `.git`,
//! which the agent can write), taken with the session's containers frozen, and a rollback
//! writes the folder back with them stopped, never touching ignored files or `.git`, never
//! writing through a link the agent left.

use super::remote::{commit_all, git};
use crate::support::*;

/// A repository with tracked, untracked and ignored files, and a devcontainer.json.
fn repository() -> Test {
    let t = Test::new();
    t.file("README.md", "the repo\n");
    t.file("src/main.rs", "fn main() {}\n");
    t.file("gone.txt", "tracked, to be deleted\n");
    t.file(".gitignore", "ignored/\n.env\n");
    t.devcontainer(&format!(r#"{{"image": "{BASE_IMAGE}"}}"#));
    git(&t.workspace, &["init", "-q", "-b", "main"]);
    commit_all(&t);
    t.file("notes.txt", "untracked, the user's\n");
    t.file("ignored/cache.bin", "the user's ignored file\n");
    t.file(".env", "SECRET=the user's\n");
    t
}

fn read(t: &Test, path: &str) -> Option<String> {
    std::fs::read_to_string(t.workspace.join(path)).ok()
}

/// The agent creates, changes and deletes tracked and untracked files, and un-ignores an
/// ignored folder: a rollback to the start's checkpoint puts every file back as it was,
/// deletes what the agent made, and leaves ignored files (the user's and the agent's) and
/// `.git` as they are. Nothing is written into the repository's refs.
#[test]
fn a_rollback_undoes_the_agents_run_on_the_repository_itself() {
    let t = repository();
    let head = git(&t.workspace, &["rev-parse", "HEAD"]);
    t.up(&[]);
    t.yolo(&["exec", "sh", "-c", "echo mine > notes2.txt"]).ok();
    t.yolo(&["checkpoint"])
        .ok()
        .assert_stderr_contains("checkpoint 1");
    t.yolo(&[
        "exec",
        "sh",
        "-c",
        "echo agent > README.md; rm gone.txt notes.txt; echo new > new.txt; \
         mkdir -p made/deep && echo x > made/deep/x.txt; echo agent > src/extra.rs; \
         echo agent-cache > ignored/agent.bin; echo > .gitignore; \
         echo 'SECRET=agent' > .env",
    ])
    .ok();
    let listed = t.yolo(&["checkpoints"]).ok().stdout();
    assert!(
        listed.contains("session start") && listed.contains("yolo checkpoint"),
        "{listed}"
    );
    // Without a terminal, a rollback needs --yes; nothing changes.
    t.yolo(&["rollback", "0"])
        .fails_with(64)
        .assert_stderr_contains("--yes");
    assert_eq!(read(&t, "README.md").as_deref(), Some("agent\n"));
    t.yolo(&["rollback", "0", "--yes"])
        .ok()
        .assert_stderr_contains("back at checkpoint 0");
    assert_eq!(read(&t, "README.md").as_deref(), Some("the repo\n"));
    assert_eq!(
        read(&t, "gone.txt").as_deref(),
        Some("tracked, to be deleted\n")
    );
    assert_eq!(
        read(&t, "notes.txt").as_deref(),
        Some("untracked, the user's\n")
    );
    assert_eq!(read(&t, ".gitignore").as_deref(), Some("ignored/\n.env\n"));
    for made in ["new.txt", "made", "src/extra.rs", "notes2.txt"] {
        assert!(!t.workspace.join(made).exists(), "{made} is still there");
    }
    // Ignored files are never touched, not even the agent's, nor one the agent changed.
    assert_eq!(
        read(&t, "ignored/cache.bin").as_deref(),
        Some("the user's ignored file\n")
    );
    assert_eq!(
        read(&t, "ignored/agent.bin").as_deref(),
        Some("agent-cache\n")
    );
    assert_eq!(read(&t, ".env").as_deref(), Some("SECRET=agent\n"));
    assert_eq!(git(&t.workspace, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&t.workspace, &["for-each-ref", "refs/yolo"]), "");
    // The session's record says what happened.
    t.yolo(&["audit"])
        .ok()
        .assert_stdout_contains("rolled back to checkpoint 0");
    // Checkpoint 1 holds the file made before it.
    t.yolo(&["rollback", "1", "--yes"]).ok();
    assert_eq!(read(&t, "notes2.txt").as_deref(), Some("mine\n"));
    // The session starts again on the tree of checkpoint 1, which is its start.
    t.up(&[]);
    let numbers = |t: &Test| -> Vec<u64> {
        let listed: serde_json::Value =
            serde_json::from_str(&t.yolo(&["checkpoints", "--json"]).ok().stdout()).unwrap();
        listed
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["number"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(numbers(&t), [0, 1]);
    // A start on another tree takes one of its own.
    t.yolo(&["down"]).ok();
    t.file("later.txt", "the user's, between two sessions\n");
    t.up(&[]);
    assert_eq!(numbers(&t), [0, 1, 2]);
}

/// ATTACK: root in the workspace session's agent prepares a rollback: it replaces a tracked
/// folder with a link to a host folder, leaves links to host files in the tree, writes refs
/// named like yolo's checkpoints into the repository's `.git` and ignores everything in its
/// `info/exclude`. The rollback writes nothing through a link and deletes nothing a link
/// leads to; it restores the folder; the checkpoint is yolo's, not the planted one; and the
/// agent's files are deleted despite the exclude.
#[test]
fn root_in_the_agent_cannot_make_a_rollback_write_or_delete_outside_the_repository() {
    let t = repository();
    t.up(&[]);
    let victim = t.workspace.parent().unwrap().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("authorized_keys"), "the host's\n").unwrap();
    let victim = victim.to_string_lossy().into_owned();
    let attack = format!(
        "set -e; rm -rf src; ln -s {victim} src; ln -s {victim}/authorized_keys keys; \
         ln -s {victim} hostdir; \
         h=$(git hash-object -w --stdin </dev/null 2>/dev/null || true); \
         mkdir -p .git/refs/yolo/checkpoints && echo planted > .git/refs/yolo/checkpoints/x || true; \
         (echo '*' >> .git/info/exclude) 2>/dev/null || true; echo agent > new.txt"
    );
    t.yolo(&["exec", "sh", "-c", &attack]).ok();
    t.yolo(&["rollback", "0", "--yes"]).ok();
    // Nothing written into, nor deleted from, the host folder the links led to.
    let victim = std::path::Path::new(&victim);
    let entries: Vec<_> = std::fs::read_dir(victim)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["authorized_keys"], "the host folder changed");
    assert_eq!(
        std::fs::read_to_string(victim.join("authorized_keys")).unwrap(),
        "the host's\n"
    );
    // The folder is a folder again, with its files; the links and the agent's file are gone.
    let src = t.workspace.join("src");
    assert!(
        std::fs::symlink_metadata(&src).unwrap().is_dir(),
        "src is still a link"
    );
    assert_eq!(read(&t, "src/main.rs").as_deref(), Some("fn main() {}\n"));
    for made in ["keys", "hostdir", "new.txt"] {
        assert!(
            std::fs::symlink_metadata(t.workspace.join(made)).is_err(),
            "{made} is still there"
        );
    }
}

/// ATTACK: root in the agent swaps a file for a link to a host file, back and forth as fast
/// as it goes, while the user takes checkpoints: the session's containers are frozen while git
/// reads, so no checkpoint holds the host file's content (a rollback would write it into the
/// repository, for the agent to read). Without the pause git can record it (between its
/// `lstat` and its `open`), a narrow window this test may or may not hit.
#[test]
fn root_in_the_agent_cannot_race_a_checkpoint_into_reading_a_host_file() {
    let t = repository();
    t.up(&[]);
    let victim = t.workspace.parent().unwrap().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("secret"), "HOST-SECRET-7f3a\n").unwrap();
    let secret = victim.join("secret").to_string_lossy().into_owned();
    // Forty files, each exchanged with a link to the host file in one step
    // (`renameat2(RENAME_EXCHANGE)`, from perl: no fork), as fast as it goes, so git meets
    // many after its `lstat` and before its `open`.
    let swap = format!(
        "mkdir -p race; setsid perl -e 'for my $i (1..40) {{ \
         open(my $f, \">\", \"race/$i\"); print $f \"plain\\n\"; close($f); \
         symlink(\"{secret}\", \"race/$i.lnk\"); }} \
         while (1) {{ for my $i (1..40) {{ \
         syscall(316, -100, \"race/$i\", -100, \"race/$i.lnk\", 2); }} }}' \
         </dev/null >/dev/null 2>&1 &"
    );
    t.yolo(&["exec", "sh", "-c", &swap]).ok();
    for _ in 0..20 {
        t.yolo(&["checkpoint"]).ok();
    }
    let stores: Vec<_> = std::fs::read_dir(t.data_dir.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "git"))
        .collect();
    assert_eq!(stores.len(), 1, "{stores:?}");
    let store = stores[0].to_string_lossy().into_owned();
    let objects = git(
        &t.workspace,
        &[
            "--git-dir",
            &store,
            "cat-file",
            "--batch-all-objects",
            "--batch",
        ],
    );
    // Git reads as many bytes as `lstat` said the file had (the decoy's 6): a leak shows as
    // the host file's first ones.
    assert!(
        !objects.contains("HOST-S"),
        "a checkpoint read the host file"
    );
    assert!(
        objects.contains(&secret) || objects.contains("plain"),
        "the checkpoints hold f as the link or the file"
    );
    t.yolo(&["down"]).ok();
}

/// With `[workspace] checkpoint_every_exec`, each `yolo exec` (and agent run) starts with a
/// checkpoint named for its command: a rollback to one undoes that command alone.
#[test]
fn a_checkpoint_before_every_exec_undoes_one_command() {
    let t = repository();
    t.user_config("[workspace]\ncheckpoint_every_exec = true\n");
    t.up(&[]);
    t.yolo(&["exec", "sh", "-c", "echo one > one.txt"])
        .ok()
        .assert_stderr_contains("checkpoint 1 before this command");
    t.yolo(&["exec", "sh", "-c", "echo two > two.txt; rm README.md"])
        .ok()
        .assert_stderr_contains("checkpoint 2 before this command");
    t.yolo(&["checkpoints"])
        .ok()
        .assert_stdout_contains("before sh -c 'echo two > two.txt; rm README.md'");
    t.yolo(&["rollback", "2", "--yes"]).ok();
    assert_eq!(read(&t, "one.txt").as_deref(), Some("one\n"));
    assert_eq!(read(&t, "README.md").as_deref(), Some("the repo\n"));
    assert!(!t.workspace.join("two.txt").exists());
}

/// A session whose containers a checkpoint left paused (cut off past the clean-up time, or
/// yolo killed while it read) is resumed by the next `exec` or `up`, which failed on it
/// before ("is paused", "id already in use").
#[test]
fn a_session_left_paused_is_resumed_by_the_next_exec_or_up() {
    let t = repository();
    let (_, up) = t.up(&[]);
    let agent = up["container"]["id"].as_str().unwrap().to_string();
    docker(&["pause", &agent]);
    t.yolo(&["exec", "--", "echo", "ran"])
        .ok()
        .assert_stdout_contains("ran")
        .assert_stderr_contains("resumed");
    // A config not approved: `up` refuses and leaves the session as it was, paused.
    docker(&["pause", &agent]);
    t.devcontainer(&format!(
        r#"{{"image": "{BASE_IMAGE}", "containerEnv": {{"X": "1"}}}}"#
    ));
    t.yolo(&["up"]).fails_with(77);
    assert_eq!(inspect(&agent)["State"]["Paused"], true);
    t.devcontainer(&format!(r#"{{"image": "{BASE_IMAGE}"}}"#));
    t.up(&[]);
    assert_eq!(inspect(&agent)["State"]["Paused"], false);
    t.yolo(&["exec", "--", "true"]).ok();
}
