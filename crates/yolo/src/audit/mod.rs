//! The audit log: one JSON-lines file per session under `<data dir>/sessions/`. Only this module
//! writes it. Events are appended with one `write` each (O_APPEND), so the host CLI and the guard
//! can append to the same file concurrently without tearing lines.

pub(crate) use yolo_protocol::event;
pub(crate) mod cast;
pub(crate) mod export;
pub(crate) mod filter;
pub(crate) mod line;
pub(crate) mod reader;
pub(crate) mod report;
pub(crate) mod summary;
#[cfg(test)]
pub(crate) mod testing;
pub(crate) mod writer;

pub(crate) use event::{Event, EventKind};
pub(crate) use writer::Writer;

use std::path::PathBuf;

/// `<data dir>/sessions`.
pub(crate) fn sessions_dir() -> PathBuf {
    crate::store::sessions_dir()
}

/// `<data dir>/sessions/<session>.jsonl`.
pub(crate) fn session_path(session: &str) -> PathBuf {
    sessions_dir().join(format!("{session}.jsonl"))
}

/// `<data dir>/sessions/<session>/`: a session's own folder (terminal recordings, the report).
pub(crate) fn session_dir(session: &str) -> PathBuf {
    sessions_dir().join(session)
}

/// `<data dir>/network`: the guard's own files (it cannot write the host's session file).
pub(crate) fn network_dir() -> PathBuf {
    crate::store::network_dir()
}

/// Every file holding a session's events: the host's and the guard's (network, execs, files).
pub(crate) fn session_files(session: &str) -> Vec<PathBuf> {
    vec![
        session_path(session),
        network_dir().join(format!("{session}.jsonl")),
        network_dir().join(exec_log_name(session)),
        network_dir().join(file_log_name(session)),
    ]
}

/// Every event of `session`'s files, file after file, each in its order (`yolo audit
/// --format`, `yolo firewall suggest`); a missing file is no events, a session without any is
/// `NotFound`.
pub(crate) fn read_session(session: &str) -> crate::error::Result<Vec<Event>> {
    let mut events = Vec::new();
    for path in session_files(session) {
        match std::fs::read_to_string(&path) {
            Ok(text) => events.extend(reader::parse(&text).0),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(crate::error::Error::io(&path, e)),
        }
    }
    if events.is_empty() {
        return Err(crate::error::Error::NotFound(format!(
            "no audit log for session {session}; `yolo audit --list` shows the sessions"
        )));
    }
    Ok(events)
}

/// The guard's exec log of a session, in `network_dir()` (the guard sees it under its log dir).
pub(crate) fn exec_log_name(session: &str) -> String {
    format!("{session}.exec.jsonl")
}

/// The guard's file-change log of a session, in `network_dir()`.
pub(crate) fn file_log_name(session: &str) -> String {
    format!("{session}.files.jsonl")
}

/// What the guard's file watcher of `session` could not see, in words (its last
/// `file_watch_failed`, `file_watch_incomplete` or `file_watch_overflow` record); `None` when
/// it said nothing of the kind.
pub(crate) fn file_watch_gap(session: &str) -> Option<String> {
    let paths = [
        network_dir().join(file_log_name(session)),
        network_dir().join(format!("{session}.jsonl")),
    ];
    let mut last: Option<Event> = None;
    // Only the few lines that can be one are parsed, one line held at a time.
    let mut tail = reader::Tail::new(paths.to_vec()).only_containing(["\"file_watch_".into()]);
    for event in tail.poll() {
        if gap_words(&event.kind).is_some() && last.as_ref().is_none_or(|l| event.ts >= l.ts) {
            last = Some(event);
        }
    }
    gap_words(&last?.kind)
}

/// What the guard's logs of `session` (network and files) left out at their size cap, in
/// words, from their `suppressed` records; `None` when they left nothing out. Said where the
/// log is read (`yolo audit`, `yolo status`, the summary after `yolo run`): past the cap the
/// record is counts, and an agent that filled it on purpose acts described only by first
/// sightings from then on.
pub(crate) fn log_cap_reached(session: &str) -> Option<String> {
    let mut left_out: std::collections::BTreeMap<String, u64> = Default::default();
    let mut cap = 0;
    for name in [format!("{session}.jsonl"), file_log_name(session)] {
        let text = std::fs::read_to_string(network_dir().join(name)).unwrap_or_default();
        // The totals so far: a kind's last record in a file holds its count.
        let mut counts: std::collections::BTreeMap<String, u64> = Default::default();
        for line in text.lines().filter(|l| l.contains("\"suppressed\"")) {
            if let Ok(Event {
                kind:
                    EventKind::Suppressed {
                        of,
                        count,
                        max_bytes,
                        ..
                    },
                ..
            }) = serde_json::from_str::<Event>(line)
            {
                let total = counts.entry(of).or_default();
                *total = (*total).max(count);
                cap = cap.max(max_bytes);
            }
        }
        for (of, n) in counts {
            *left_out.entry(of).or_default() += n;
        }
    }
    if left_out.is_empty() {
        return None;
    }
    let counts: Vec<String> = left_out.iter().map(|(of, n)| format!("{n} {of}")).collect();
    Some(format!(
        "the session's audit log is full: it reached its size cap of {cap} bytes ([audit] max_session_log), and {} events were only counted, not written; past the cap only first sightings are written: of each allowlist entry and address block always, of each further name, destination and sensitive file while a reserve lasts, the rest counted in sample records. Raise [audit] max_session_log for the next session",
        counts.join(", ")
    ))
}

fn gap_words(kind: &EventKind) -> Option<String> {
    let EventKind::Guard { status, details } = kind else {
        return None;
    };
    let detail = |key: &str| {
        details
            .get(key)
            .map(|v| v.to_string())
            .unwrap_or("?".into())
    };
    match status.as_str() {
        "file_watch_failed" => {
            let error = details.get("error").and_then(|e| e.as_str()).unwrap_or("?");
            // A guard made by a yolo before the file audit has no workspace mounted.
            let hint = if error.contains("not mounted") {
                "; `yolo up --rebuild` makes a new guard with it"
            } else {
                ""
            };
            Some(format!(
                "the file audit is off for this session: {error}{hint}"
            ))
        }
        "file_watch_incomplete" => {
            let count = |key: &str| details.get(key).and_then(|v| v.as_u64()).unwrap_or(0);
            let mut why = vec![];
            if count("over_limit") > 0 || details.get("over_limit").is_none() {
                why.push(format!(
                    "{} past the inotify watch limit ({}): raise fs.inotify.max_user_watches on the engine's host and run `yolo up` again",
                    count("over_limit"),
                    detail("max_user_watches")
                ));
            }
            if count("over_memory") > 0 {
                why.push(format!(
                    "{} left out to keep the guard's memory bounded (long paths by the thousand; remove the folders the agent made)",
                    count("over_memory")
                ));
            }
            if count("unreadable") > 0 {
                why.push(format!(
                    "{} the guard may not read (make them readable by others, mode o+rx)",
                    count("unreadable")
                ));
            }
            if count("too_deep") > 0 {
                why.push(format!(
                    "{} too deep for the guard to reach",
                    count("too_deep")
                ));
            }
            // The folders themselves, as the guard named the first of them.
            let named: Vec<String> = details
                .get("left_out")
                .and_then(|l| l.as_array())
                .map(|l| {
                    l.iter()
                        .filter_map(|p| p.as_str())
                        .map(crate::visible::escape_controls)
                        .collect()
                })
                .unwrap_or_default();
            let total = count("unwatched_folders");
            let folders = if total == 1 { "folder" } else { "folders" };
            let mut text = format!(
                "the file audit does not see {total} {folders} of the workspace: {}",
                why.join("; ")
            );
            if !named.is_empty() {
                text.push_str(&format!(" (first: {})", named.join(", ")));
            }
            if count("untracked") > 0 {
                text.push_str(&format!(
                    "; {} sensitive files or links are not tracked by inode (hard links to them are not marked sensitive)",
                    count("untracked")
                ));
            }
            Some(text)
        }
        "file_watch_overflow" => {
            let unrecorded = details
                .get("unrecorded")
                .and_then(|v| v.as_u64())
                .unwrap_or(0);
            let mut text = "the file audit missed changes: the kernel's inotify queue or the guard's own queues overflowed".to_string();
            if unrecorded > 0 {
                text.push_str(&format!(" ({unrecorded} changes seen but not recorded)"));
            }
            Some(text)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_watcher_gap_is_put_in_words_with_what_to_do() {
        let incomplete = EventKind::Guard {
            status: "file_watch_incomplete".into(),
            details: [
                ("unwatched_folders".to_string(), 33.into()),
                ("over_limit".to_string(), 31.into()),
                ("unreadable".to_string(), 2.into()),
                ("max_user_watches".to_string(), 8192.into()),
            ]
            .into(),
        };
        assert_eq!(
            gap_words(&incomplete).unwrap(),
            "the file audit does not see 33 folders of the workspace: 31 past the inotify watch limit (8192): raise fs.inotify.max_user_watches on the engine's host and run `yolo up` again; 2 the guard may not read (make them readable by others, mode o+rx)"
        );
        let deep = EventKind::Guard {
            status: "file_watch_incomplete".into(),
            details: [
                ("unwatched_folders".to_string(), 1.into()),
                ("over_limit".to_string(), 0.into()),
                ("too_deep".to_string(), 1.into()),
                ("left_out".to_string(), serde_json::json!(["a/b\x1b[2J"])),
                ("max_user_watches".to_string(), 8192.into()),
            ]
            .into(),
        };
        assert_eq!(
            gap_words(&deep).unwrap(),
            "the file audit does not see 1 folder of the workspace: 1 too deep for the guard to reach (first: a/b\\x1b[2J)"
        );
        let ready = EventKind::Guard {
            status: "ready".into(),
            details: Default::default(),
        };
        assert_eq!(gap_words(&ready), None);
    }
}
