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
