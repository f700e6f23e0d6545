use super::event::Event;
use crate::error::{Error, Result};
use std::path::Path;

/// Read a session's events; lines that do not parse are skipped (reported in the count).
pub fn read(path: &Path) -> Result<(Vec<Event>, usize)> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    Ok(parse(&text))
}

pub fn parse(text: &str) -> (Vec<Event>, usize) {
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
