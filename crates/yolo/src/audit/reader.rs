//! Reading the session logs: line by line, never a whole file in memory. A session's events
//! are in several files (the host's, and the guard's network, exec and file logs), each in the
//! order it was written; [`Tail`] merges them by time as it reads, one line of each file held
//! at a time, and remembers how far it got for `--follow`. The exec log alone is capped at 1 GiB
//! (`[audit] max_exec_log`), and the agent decides how fast it fills: a reader that loaded it
//! whole needed gigabytes (docs/performance.md).
//!
//! An `exec_exit` is joined into its `exec` ([`Exits`]): the exits are gathered first, in a
//! pass that parses only the lines naming one, so the events can then stream in order.

use super::event::{Event, EventKind};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;

/// A longer line is skipped, counted as unreadable: the writers keep theirs far shorter, and
/// one line must not decide how much a reader holds.
const MAX_LINE: usize = 16 << 20;
/// Exits remembered for joining (about 40 bytes each). Past it an `exec` shows without its
/// exit, and the exit keeps a line of its own: nothing is lost, memory stays bounded.
pub(crate) const MAX_EXITS: usize = 1 << 20;

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

/// What [`next_line`] found.
#[derive(Debug, PartialEq)]
enum Line {
    /// A whole line, now in the buffer.
    Complete,
    /// A line over [`MAX_LINE`], read past and dropped.
    TooLong,
    /// The end of what there is to read; an unfinished last line is left for the next poll.
    End,
}

/// The next line of `reader` into `line` (without its newline); `offset` moves past it only
/// when it is complete, so an unfinished line is read again, whole, by the next poll.
fn next_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    offset: &mut u64,
) -> std::io::Result<Line> {
    line.clear();
    let mut read = 0u64;
    let mut too_long = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(Line::End);
        }
        let (used, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if !too_long {
            let data = &buf[..if done { used - 1 } else { used }];
            if line.len() + data.len() > MAX_LINE {
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(data);
            }
        }
        reader.consume(used);
        read += used as u64;
        if done {
            *offset += read;
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Complete
            });
        }
    }
}

/// Follows several JSONL files: each [`poll`](Tail::poll) yields the complete lines appended
/// since the last one, merged by time.
pub(crate) struct Tail {
    /// Each file and how far it has been read.
    files: Vec<(PathBuf, u64)>,
    /// A line containing none of these is not parsed (none: every line is).
    needles: Vec<Vec<u8>>,
}

impl Tail {
    pub(crate) fn new(paths: Vec<PathBuf>) -> Tail {
        Tail {
            files: paths.into_iter().map(|p| (p, 0)).collect(),
            needles: Vec::new(),
        }
    }

    /// Go on from `offsets` (what [`Tail::offsets`] gave earlier, file by file; missing ones
    /// from the start).
    pub(crate) fn resume(&mut self, offsets: &[u64]) {
        for ((_, at), offset) in self.files.iter_mut().zip(offsets) {
            *at = *offset;
        }
    }

    /// How far each file has been read, in bytes.
    pub(crate) fn offsets(&self) -> Vec<u64> {
        self.files.iter().map(|(_, at)| *at).collect()
    }

    /// Only lines containing one of `needles` are parsed (a quick pass over the bytes for a
    /// `--kind` filter: a `dns` event's line holds `"dns"`); the caller still checks the event.
    pub(crate) fn only_containing(mut self, needles: impl IntoIterator<Item = String>) -> Tail {
        self.needles = needles.into_iter().map(String::into_bytes).collect();
        self
    }

    /// The events appended to the files since the last poll, ordered by time (a stable merge
    /// of the files, each in its own order). Up to where each file ended when it was opened.
    pub(crate) fn poll(&mut self) -> Events<'_> {
        Events {
            tail: self,
            open: Vec::new(),
            line: Vec::new(),
            started: false,
        }
    }
}

/// One file being read by a poll, and its next event.
struct Open {
    reader: BufReader<std::io::Take<std::fs::File>>,
    head: Option<Event>,
}

/// The iterator of [`Tail::poll`].
pub(crate) struct Events<'a> {
    tail: &'a mut Tail,
    open: Vec<Option<Open>>,
    line: Vec<u8>,
    started: bool,
}

impl Events<'_> {
    fn start(&mut self) {
        self.started = true;
        for i in 0..self.tail.files.len() {
            let (path, offset) = &mut self.tail.files[i];
            let opened = std::fs::File::open(&*path).and_then(|mut file| {
                let len = file.metadata()?.len();
                if len < *offset {
                    // Replaced by a shorter file (a remote engine's copy): read it anew.
                    *offset = 0;
                }
                file.seek(SeekFrom::Start(*offset))?;
                Ok(file.take(len - *offset))
            });
            let open = opened.ok().map(|file| Open {
                reader: BufReader::with_capacity(256 << 10, file),
                head: None,
            });
            self.open.push(open);
            self.refill(i);
        }
    }

    /// The next event of file `i` as its head (none at its end).
    fn refill(&mut self, i: usize) {
        let Some(open) = self.open[i].as_mut() else {
            return;
        };
        let offset = &mut self.tail.files[i].1;
        open.head = loop {
            match next_line(&mut open.reader, &mut self.line, offset) {
                Ok(Line::Complete) => {}
                Ok(Line::TooLong) => continue,
                Ok(Line::End) | Err(_) => break None,
            }
            let wanted = self.tail.needles.is_empty()
                || self
                    .tail
                    .needles
                    .iter()
                    .any(|n| memchr::memmem::find(&self.line, n).is_some());
            if !wanted {
                continue;
            }
            if let Ok(event) = serde_json::from_slice::<Event>(&self.line) {
                break Some(event);
            }
        };
        if open.head.is_none() {
            self.open[i] = None;
        }
    }
}

impl Iterator for Events<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        if !self.started {
            self.start();
        }
        // The earliest head; on a tie the first file's, as a stable sort would have it.
        let mut first: Option<(usize, chrono::DateTime<chrono::Utc>)> = None;
        for (i, open) in self.open.iter().enumerate() {
            if let Some(head) = open.as_ref().and_then(|o| o.head.as_ref()) {
                if first.is_none_or(|(_, ts)| head.ts < ts) {
                    first = Some((i, head.ts));
                }
            }
        }
        let (i, _) = first?;
        let event = self.open[i].as_mut().and_then(|o| o.head.take());
        self.refill(i);
        event
    }
}

/// The exits of a session's execs, for joining each into its `exec`: its `exit_code` and
/// `duration_ms` copied in, and the joined `exec_exit` line dropped unless asked for. An exit
/// without its exec before it (the log was cut, or the exit came first), or a second exit of
/// one id, always stays, so nothing the guard wrote is lost.
#[derive(Default)]
pub(crate) struct Exits {
    known: HashMap<u64, Exit>,
    /// The hash of each id's `exec_digest` (and whether it says more than the hash: the
    /// binary changed), joined into its exec the same way.
    digests: HashMap<u64, Digest>,
}

/// A binary's hash from an `exec_digest`, and how far joining it got.
struct Digest {
    sha256: String,
    changed: bool,
    state: Joining,
}

/// The first exit of an id, and how far joining it got.
struct Exit {
    code: i64,
    took: u64,
    state: Joining,
}

#[derive(PartialEq)]
enum Joining {
    /// Its exec is yet to come.
    Waiting,
    /// Copied into its exec; the exit's own line is yet to come.
    Joined,
    /// Over: an exec or exit of this id from now on is left as it is.
    Done,
}

impl Exits {
    /// Nothing to join (a `--kind` that takes neither execs nor exits).
    pub(crate) fn none() -> Exits {
        Exits::default()
    }

    /// The first exit of each id in `paths`, at most [`MAX_EXITS`]: only the lines naming an
    /// `exec_exit` are parsed.
    pub(crate) fn scan(paths: &[PathBuf]) -> Exits {
        let mut exits = Exits::default();
        let mut tail = Tail::new(paths.to_vec())
            .only_containing(["\"exec_exit\"".to_string(), "\"exec_digest\"".to_string()]);
        for event in tail.poll() {
            exits.remember(&event);
        }
        exits
    }

    /// The exits among `events`.
    pub(crate) fn of(events: &[Event]) -> Exits {
        let mut exits = Exits::default();
        for event in events {
            exits.remember(event);
        }
        exits
    }

    fn remember(&mut self, event: &Event) {
        if let EventKind::ExecDigest {
            id,
            sha256: Some(sha256),
            changed,
            library: None,
            ..
        } = &event.kind
        {
            if self.digests.len() < MAX_EXITS || self.digests.contains_key(id) {
                self.digests.entry(*id).or_insert(Digest {
                    sha256: sha256.clone(),
                    changed: *changed,
                    state: Joining::Waiting,
                });
            }
        }
        if let EventKind::ExecExit {
            id,
            exit_code,
            duration_ms,
            ..
        } = event.kind
        {
            if self.known.len() < MAX_EXITS || self.known.contains_key(&id) {
                self.known.entry(id).or_insert(Exit {
                    code: exit_code,
                    took: duration_ms,
                    state: Joining::Waiting,
                });
            }
        }
    }

    /// `event` with its exit joined; `None` for an exit line joined into its exec (unless
    /// `keep_exits`). Events must come in the log's order.
    pub(crate) fn join(&mut self, mut event: Event, keep_exits: bool) -> Option<Event> {
        match &mut event.kind {
            EventKind::Exec {
                id,
                exit_code,
                duration_ms,
                sha256,
                ..
            } => {
                if let Some(digest) = self.digests.get_mut(id) {
                    if digest.state == Joining::Waiting && sha256.is_none() {
                        *sha256 = Some(digest.sha256.clone());
                        digest.state = Joining::Joined;
                    }
                }
                if let Some(exit) = self.known.get_mut(id) {
                    if exit.state == Joining::Waiting && exit_code.is_none() {
                        *exit_code = Some(exit.code);
                        *duration_ms = Some(exit.took);
                        exit.state = Joining::Joined;
                    }
                }
                Some(event)
            }
            // A preloaded library's hash is not the binary's: a line of its own.
            EventKind::ExecDigest {
                library: Some(_), ..
            } => Some(event),
            // A digest that says more than its hash (the binary changed) keeps its line.
            EventKind::ExecDigest { id, .. } => match self.digests.get_mut(id) {
                Some(digest) if digest.state == Joining::Joined => {
                    digest.state = Joining::Done;
                    (keep_exits || digest.changed).then_some(event)
                }
                Some(digest) => {
                    digest.state = Joining::Done;
                    Some(event)
                }
                None => Some(event),
            },
            EventKind::ExecExit { id, .. } => match self.known.get_mut(id) {
                Some(exit) if exit.state == Joining::Joined => {
                    exit.state = Joining::Done;
                    keep_exits.then_some(event)
                }
                Some(exit) => {
                    exit.state = Joining::Done;
                    Some(event)
                }
                None => Some(event),
            },
            _ => Some(event),
        }
    }
}

/// Each `exec_exit` copied into the `exec` of the same `id` (see [`Exits`]), for events
/// already in memory (a Pod's log).
pub(crate) fn join_exits(events: Vec<Event>, keep_exits: bool) -> Vec<Event> {
    let mut exits = Exits::of(&events);
    events
        .into_iter()
        .filter_map(|e| exits.join(e, keep_exits))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::EventKind;
    use super::*;

    fn exec(id: u64, pid: i32) -> Event {
        Event::now(
            "s",
            crate::audit::testing::Exec {
                id,
                pid,
                path: "/bin/true",
                ..Default::default()
            }
            .kind(),
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

    fn at(ts: &str, kind: EventKind) -> Event {
        Event {
            ts: ts.parse().unwrap(),
            session: "s".into(),
            phase: None,
            kind,
        }
    }

    fn notice(ts: &str, message: &str) -> Event {
        at(
            ts,
            EventKind::Notice {
                message: message.into(),
            },
        )
    }

    fn messages(events: impl Iterator<Item = Event>) -> Vec<String> {
        events
            .map(|e| match e.kind {
                EventKind::Notice { message } => message,
                other => other.name().to_string(),
            })
            .collect()
    }

    fn append(path: &std::path::Path, bytes: &[u8]) {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap()
            .write_all(bytes)
            .unwrap();
    }

    #[test]
    fn files_are_merged_by_time_and_followed_line_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
        append(&a, &notice("2026-01-01T00:00:01Z", "a1").to_line());
        append(&a, &notice("2026-01-01T00:00:03Z", "a3").to_line());
        append(&b, &notice("2026-01-01T00:00:02Z", "b2").to_line());
        append(&b, &notice("2026-01-01T00:00:03Z", "b3").to_line());
        // A line over the cap is skipped, a broken one too, and an unfinished last line waits.
        append(&b, &vec![b'x'; MAX_LINE + 10]);
        append(&b, b"\n{not json\n");
        let late = notice("2026-01-01T00:00:04Z", "b4").to_line();
        append(&b, &late[..10]);
        let mut tail = Tail::new(vec![a.clone(), dir.path().join("absent"), b.clone()]);
        assert_eq!(messages(tail.poll()), ["a1", "b2", "a3", "b3"]);
        append(&b, &late[10..]);
        assert_eq!(messages(tail.poll()), ["b4"]);
        assert!(messages(tail.poll()).is_empty());
        // Only lines holding a needle are parsed.
        let mut only = Tail::new(vec![a, b]).only_containing(["\"a3\"".to_string()]);
        assert_eq!(messages(only.poll()), ["a3"]);
    }

    #[test]
    fn exits_scanned_from_the_files_join_their_execs_as_the_events_stream() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("exec.jsonl");
        for e in [
            exec(1, 10),
            exec(2, 11),
            exit(2, 11, 3),
            exit(1, 10, 0),
            exec(3, 12),
        ] {
            append(&log, &e.to_line());
        }
        let mut exits = Exits::scan(std::slice::from_ref(&log));
        let joined: Vec<Event> = Tail::new(vec![log])
            .poll()
            .filter_map(|e| exits.join(e, false))
            .collect();
        assert_eq!(joined.len(), 3);
        assert_eq!(ended(&joined[0]), (Some(0), Some(12)));
        assert_eq!(ended(&joined[1]), (Some(3), Some(12)));
        assert_eq!(ended(&joined[2]), (None, None));
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
                    library: None,
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
