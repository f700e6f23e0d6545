//! The session log's hash chain (issue 27, item 4): a real session's files (the CLI's, the
//! guard's network, exec and file logs) verify intact and closed after `down`; a line edited,
//! removed or moved, or the end cut off, is named by `yolo audit verify` with exit 1.

use crate::support::*;
use std::path::PathBuf;

/// The session's files, in the order `verify` prints them.
fn session_files(t: &Test) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["sessions", "network"] {
        if let Ok(entries) = std::fs::read_dir(t.data_dir.join(dir)) {
            files.extend(
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "jsonl")),
            );
        }
    }
    files.sort();
    files
}

fn lines(path: &PathBuf) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .split_inclusive('\n')
        .map(str::to_string)
        .collect()
}

#[test]
fn a_sessions_log_verifies_and_every_kind_of_tampering_is_named() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.up(&[]);
    t.yolo(&[
        "exec",
        "--",
        "sh",
        "-c",
        "getent hosts example.invalid; touch /workspaces/x",
    ])
    .code();
    t.yolo(&["down"]).ok();
    let files = session_files(&t);
    assert!(files.len() >= 3, "{files:?}");
    let ok = t.yolo(&["audit", "verify"]).ok();
    for file in &files {
        ok.assert_stdout_contains(&format!("{}: intact: ", file.display()));
    }
    ok.assert_stdout_contains("closed by its writer");
    // Every line carries its chain, and `yolo audit` still reads them all.
    let network = files
        .iter()
        .find(|f| {
            f.parent().is_some_and(|p| p.ends_with("network"))
                && !f.to_string_lossy().contains(".exec.")
                && !f.to_string_lossy().contains(".files.")
        })
        .cloned()
        .expect("the guard's network log");
    let original = lines(&network);
    assert!(original.len() >= 4, "{original:?}");
    assert!(original.iter().all(|l| l.contains("\"chain\":\"")));
    assert!(original.last().unwrap().contains("\"kind\":\"chain_end\""));

    let write = |rows: &[String]| std::fs::write(&network, rows.concat()).unwrap();
    let expect_broken = |what: &str, needle: &str| {
        let run = t.yolo(&["audit", "verify"]).fails_with(1);
        assert!(
            run.stdout()
                .contains(&format!("{}: {needle}", network.display())),
            "{what}: {}",
            run.stdout()
        );
    };
    // A middle line changed.
    let mut changed = original.clone();
    changed[1] = changed[1].replacen("\"ts\":\"2", "\"ts\":\"1", 1);
    assert_ne!(changed[1], original[1]);
    write(&changed);
    expect_broken("changed", "BROKEN at line 2");
    // A middle line removed.
    let mut removed = original.clone();
    removed.remove(1);
    write(&removed);
    expect_broken("removed", "BROKEN at line 2");
    // Two lines swapped.
    let mut moved = original.clone();
    moved.swap(1, 2);
    write(&moved);
    expect_broken("moved", "BROKEN at line 2");
    // The end cut off (the closing record and the line before it).
    let cut = original[..original.len() - 2].to_vec();
    write(&cut);
    expect_broken("cut", "CUT SHORT");
    // Back as it was: intact again.
    write(&original);
    t.yolo(&["audit", "verify"]).ok();
}
