use super::event::Event;

/// A session file's events; lines that do not parse are skipped (reported in the count).
pub(crate) fn parse(text: &str) -> (Vec<Event>, usize) {
    let mut events = Vec::new();
    let mut bad = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Event>(line) {
            Ok(e) => events.push(e),
            Err(_) => bad += 1,
        }
    }
    (events, bad)
}

/// Follows several JSONL files, returning complete new lines as they are appended.
pub(crate) struct Tail {
    files: Vec<(std::path::PathBuf, u64, String)>,
}

impl Tail {
    pub(crate) fn new(paths: Vec<std::path::PathBuf>) -> Tail {
        Tail {
            files: paths.into_iter().map(|p| (p, 0, String::new())).collect(),
        }
    }

    /// New events from all files since the last call, ordered by time.
    pub(crate) fn poll(&mut self) -> Vec<Event> {
        use std::io::{Read, Seek, SeekFrom};
        let mut events = Vec::new();
        for (path, offset, partial) in &mut self.files {
            let Ok(mut file) = std::fs::File::open(&*path) else {
                continue;
            };
            if file.seek(SeekFrom::Start(*offset)).is_err() {
                continue;
            }
            let mut text = String::new();
            let Ok(n) = file.read_to_string(&mut text) else {
                continue;
            };
            *offset += n as u64;
            partial.push_str(&text);
            // Keep an unfinished last line for the next poll.
            let complete = match partial.rfind('\n') {
                Some(i) => partial.drain(..=i).collect::<String>(),
                None => continue,
            };
            events.extend(parse(&complete).0);
        }
        events.sort_by_key(|e| e.ts);
        events
    }
}

/// Each `exec_exit` copied into the `exec` of the same `id` (its `exit_code` and
/// `duration_ms`), so a program's record says how it ended; and each `exec_digest`'s hash
/// into its `exec` (`sha256`). A joined line is dropped unless `keep_exits`; one without its
/// `exec` (the log was cut, or it came first), or a digest that says more than its hash (the
/// binary changed, or it could not be hashed), always stays, so nothing the guard wrote is
/// lost.
pub(crate) fn join_exits(events: Vec<Event>, keep_exits: bool) -> Vec<Event> {
    use super::EventKind;
    use std::collections::HashMap;
    let mut execs: HashMap<u64, usize> = HashMap::new();
    let mut joined = vec![false; events.len()];
    let mut events = events;
    for i in 0..events.len() {
        match events[i].kind {
            EventKind::Exec { id, .. } => {
                execs.insert(id, i);
            }
            EventKind::ExecDigest {
                id,
                sha256: Some(ref hex),
                changed,
                ..
            } => {
                let Some(&at) = execs.get(&id) else { continue };
                let hex = hex.clone();
                if let EventKind::Exec { sha256, .. } = &mut events[at].kind {
                    if sha256.is_none() {
                        *sha256 = Some(hex);
                        joined[i] = !changed;
                    }
                }
            }
            EventKind::ExecExit {
                id,
                exit_code: code,
                duration_ms: took,
                ..
            } => {
                let Some(&at) = execs.get(&id) else { continue };
                if let EventKind::Exec {
                    exit_code,
                    duration_ms,
                    ..
                } = &mut events[at].kind
                {
                    if exit_code.is_none() {
                        *exit_code = Some(code);
                        *duration_ms = Some(took);
                        joined[i] = true;
                    }
                }
            }
            _ => {}
        }
    }
    events
        .into_iter()
        .zip(joined)
        .filter(|(_, joined)| keep_exits || !joined)
        .map(|(event, _)| event)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::EventKind;
    use super::*;

    fn exec(id: u64, pid: i32) -> Event {
        Event::now(
            "s",
            EventKind::Exec {
                id,
                pid,
                ppid: 1,
                uid: 0,
                gid: 0,
                path: "/bin/true".into(),
                exe: Some("/usr/bin/true".into()),
                argv: vec!["true".into()],
                cwd: "/workspace".into(),
                result: "ok".into(),
                argv_rewritten: false,
                truncated: false,
                argc: None,
                sha256: None,
                loader_env: Vec::new(),
                ld_so_preload: false,
                pending_signals: Vec::new(),
                exit_code: None,
                duration_ms: None,
            },
        )
    }

    fn exit(id: u64, pid: i32, code: i64) -> Event {
        Event::now(
            "s",
            EventKind::ExecExit {
                id,
                pid,
                exit_code: code,
                signal: None,
                duration_ms: 12,
            },
        )
    }

    fn ended(event: &Event) -> (Option<i64>, Option<u64>) {
        match event.kind {
            EventKind::Exec {
                exit_code,
                duration_ms,
                ..
            } => (exit_code, duration_ms),
            _ => panic!("not an exec: {event:?}"),
        }
    }

    #[test]
    fn an_exit_joins_the_exec_of_its_id_and_its_line_goes() {
        let events = vec![exec(1, 10), exec(2, 11), exit(2, 11, 3), exit(1, 10, 0)];
        let joined = join_exits(events, false);
        assert_eq!(joined.len(), 2);
        assert_eq!(ended(&joined[0]), (Some(0), Some(12)));
        assert_eq!(ended(&joined[1]), (Some(3), Some(12)));
    }

    #[test]
    fn a_digest_joins_its_exec_and_one_that_says_more_stays() {
        let digest = |id, changed| {
            Event::now(
                "s",
                EventKind::ExecDigest {
                    id,
                    pid: 10,
                    sha256: Some(format!("hash{id}")),
                    changed,
                    error: None,
                },
            )
        };
        let joined = join_exits(
            vec![exec(1, 10), exec(2, 11), digest(1, false), digest(2, true)],
            false,
        );
        let kinds: Vec<&str> = joined.iter().map(|e| e.kind.name()).collect();
        assert_eq!(kinds, ["exec", "exec", "exec_digest"]);
        for (event, want) in joined.iter().zip(["hash1", "hash2"]) {
            match &event.kind {
                EventKind::Exec { sha256, .. } => assert_eq!(sha256.as_deref(), Some(want)),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn exits_stay_when_asked_for_or_without_their_exec() {
        // Asked for (`--kind exec_exit`): the exec is joined and the line kept.
        let kept = join_exits(vec![exec(1, 10), exit(1, 10, 0)], true);
        assert_eq!(kept.len(), 2);
        assert_eq!(ended(&kept[0]), (Some(0), Some(12)));
        // An exit whose exec is not in the log, or a second exit of one id, is kept as it is.
        let orphan = join_exits(
            vec![exit(7, 70, 1), exec(1, 10), exit(1, 10, 0), exit(1, 10, 9)],
            false,
        );
        let kinds: Vec<&str> = orphan.iter().map(|e| e.kind.name()).collect();
        assert_eq!(kinds, ["exec_exit", "exec", "exec_exit"]);
        assert_eq!(ended(&orphan[1]), (Some(0), Some(12)));
        // An exec without its exit yet has no exit code.
        assert_eq!(
            ended(&join_exits(vec![exec(1, 10)], false)[0]),
            (None, None)
        );
    }
}
