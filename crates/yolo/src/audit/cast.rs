//! The terminal of `yolo run` and `yolo shell`, recorded as an asciicast v2 file
//! (<https://docs.asciinema.org/manual/asciicast/v2/>) next to the session's log:
//! `<data dir>/sessions/<session>/<time>-<source>.cast`. Output only, never the keystrokes. A
//! header line (terminal size, start time, command), then one `[seconds, "o", text]` line per
//! chunk the command printed, written as it comes, so a recording survives yolo being killed.
//! The file plays in asciinema's own player and in `yolo replay`.
//!
//! A recording stops at [`MAX_RECORDING`] bytes, with a last line that says so: the agent
//! decides what it prints, and printing for ever must not fill the host's disk (each control
//! byte takes six in JSON, so 200 MB of output made a 1.2 GB file before the cap).
//!
//! Written by hand: the format is two JSON shapes, and the crates that write it also want to own
//! the terminal (a pty), which yolo leaves to Docker.

use serde::Serialize;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The folder of a session's recordings.
pub(crate) fn casts_dir(session: &str) -> PathBuf {
    super::session_dir(session)
}

#[derive(Serialize)]
struct Header<'a> {
    version: u8,
    width: u16,
    height: u16,
    timestamp: i64,
    command: &'a str,
    title: &'a str,
}

/// The size a recording may reach.
pub(crate) const MAX_RECORDING: u64 = 256 << 20;

/// One recording being written; every `write` is one output event.
pub(crate) struct Recorder {
    file: File,
    started: Instant,
    /// The end of the last chunk when it stopped inside a UTF-8 character.
    partial: Vec<u8>,
    /// Bytes in the file, and the most it may hold; past it nothing more is written.
    written: u64,
    cap: u64,
    full: bool,
}

impl Recorder {
    /// Start `<session folder>/<time>-<source>.cast` for a terminal of `width`×`height`.
    pub(crate) fn create(
        session: &str,
        source: &str,
        command: &str,
        size: (u16, u16),
    ) -> std::io::Result<(Recorder, PathBuf)> {
        Recorder::create_in(&casts_dir(session), source, command, size)
    }

    fn create_in(
        dir: &Path,
        source: &str,
        command: &str,
        (width, height): (u16, u16),
    ) -> std::io::Result<(Recorder, PathBuf)> {
        std::fs::create_dir_all(dir)?;
        let now = chrono::Utc::now();
        let path = dir.join(format!(
            "{}-{source}.cast",
            now.format("%Y%m%dT%H%M%S%.3fZ")
        ));
        let mut file = File::create(&path)?;
        let header = Header {
            version: 2,
            width,
            height,
            timestamp: now.timestamp(),
            command,
            title: source,
        };
        let mut line = serde_json::to_vec(&header).map_err(std::io::Error::other)?;
        line.push(b'\n');
        file.write_all(&line)?;
        Ok((
            Recorder {
                file,
                started: Instant::now(),
                partial: Vec::new(),
                written: line.len() as u64,
                cap: MAX_RECORDING,
                full: false,
            },
            path,
        ))
    }

    /// One output event, unless the file would pass its cap: then a last event that says the
    /// recording stopped, and nothing after it.
    fn event(&mut self, text: String) -> std::io::Result<()> {
        let at = round(self.started.elapsed().as_secs_f64());
        let mut line = serde_json::to_vec(&(at, "o", text)).map_err(std::io::Error::other)?;
        line.push(b'\n');
        if self.written + line.len() as u64 > self.cap {
            self.full = true;
            let note = format!(
                "\r\n[yolo: the recording stopped here, at its cap of {} MiB; the command went on]\r\n",
                self.cap >> 20
            );
            line = serde_json::to_vec(&(at, "o", note)).map_err(std::io::Error::other)?;
            line.push(b'\n');
        }
        self.file.write_all(&line)?;
        self.written += line.len() as u64;
        Ok(())
    }
}

impl Write for Recorder {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.full {
            return Ok(bytes.len());
        }
        self.partial.extend_from_slice(bytes);
        // Keep an incomplete character for the next chunk; anything else invalid is replaced.
        let keep = match std::str::from_utf8(&self.partial) {
            Ok(_) => 0,
            Err(e) if e.error_len().is_none() => self.partial.len() - e.valid_up_to(),
            Err(_) => 0,
        };
        let cut = self.partial.len() - keep;
        if cut > 0 {
            let text = String::from_utf8_lossy(&self.partial[..cut]).into_owned();
            self.partial.drain(..cut);
            self.event(text)?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Microseconds are plenty, and keep the lines short.
fn round(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1e6
}

/// The recordings of a session, oldest first.
pub(crate) fn list(session: &str) -> Vec<PathBuf> {
    list_in(&casts_dir(session))
}

fn list_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut casts: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cast"))
        .collect();
    casts.sort();
    casts
}

/// Play a recording on `out`: each event's text at its time, the waits divided by `speed` and
/// none longer than `max_wait` (an agent thinking for a minute need not be watched in full),
/// through `screen` when there is one.
pub(crate) fn play(
    path: &Path,
    speed: f64,
    max_wait: Duration,
    mut screen: Option<&mut crate::terminal::Screen>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut lines = BufReader::new(File::open(path)?).lines();
    let header = lines.next().transpose()?.unwrap_or_default();
    let header: serde_json::Value = serde_json::from_str(&header).map_err(invalid)?;
    if header["version"] != 2 {
        return Err(invalid(format!(
            "{} is not an asciicast v2 file",
            path.display()
        )));
    }
    let mut last = 0.0_f64;
    for line in lines {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let (at, kind, text): (f64, String, String) =
            serde_json::from_str(&line).map_err(invalid)?;
        if kind != "o" {
            continue;
        }
        let wait = Duration::from_secs_f64(((at - last) / speed).max(0.0)).min(max_wait);
        std::thread::sleep(wait);
        last = at;
        match screen.as_deref_mut() {
            Some(screen) => {
                let mut shown = Vec::with_capacity(text.len());
                screen.push(text.as_bytes(), &mut shown);
                out.write_all(&shown)?;
            }
            None => out.write_all(text.as_bytes())?,
        }
        out.flush()?;
    }
    if let Some(screen) = screen {
        let mut rest = Vec::new();
        screen.end(&mut rest);
        out.write_all(&rest)?;
        out.flush()?;
    }
    Ok(())
}

fn invalid(e: impl ToString) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_is_asciicast_v2_and_plays_back_what_was_printed() {
        let dir = tempfile::tempdir().unwrap();
        let (mut rec, path) = Recorder::create_in(dir.path(), "shell", "sh -l", (80, 24)).unwrap();
        // "é" split across two chunks stays one character.
        rec.write_all(b"hello \xc3").unwrap();
        rec.write_all(b"\xa9\r\n\x1b[1mbold\x1b[0m\n").unwrap();
        drop(rec);
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        let header: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        assert_eq!(
            (header["version"].as_u64(), header["width"].as_u64()),
            (Some(2), Some(80))
        );
        let events: Vec<(f64, String, String)> =
            lines.map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(events[0].2, "hello ");
        assert_eq!(events[1].2, "é\r\n\x1b[1mbold\x1b[0m\n");
        assert!(events.iter().all(|e| e.1 == "o" && e.0 >= 0.0));
        assert_eq!(list_in(dir.path()), std::slice::from_ref(&path));
        let mut played = Vec::new();
        play(&path, 1000.0, Duration::from_millis(10), None, &mut played).unwrap();
        assert_eq!(played, "hello é\r\n\x1b[1mbold\x1b[0m\n".as_bytes());
    }

    /// A recording of what the agent printed is played through the filter: its clipboard
    /// write and title are shown, not obeyed, even split over two events.
    #[test]
    fn a_recording_plays_through_the_filter() {
        let dir = tempfile::tempdir().unwrap();
        let (mut rec, path) = Recorder::create_in(dir.path(), "agent", "x", (80, 24)).unwrap();
        rec.write_all(b"ok \x1b]52;c;ZWNobyBwd25lZA").unwrap();
        rec.write_all(b"==\x07\x1b]0;title\x1b\\\x1b[1mbold\x1b[0m")
            .unwrap();
        drop(rec);
        let mut screen = crate::terminal::Screen::new(crate::terminal::Stop::Show);
        let mut played = Vec::new();
        play(
            &path,
            1000.0,
            Duration::from_millis(1),
            Some(&mut screen),
            &mut played,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(played).unwrap(),
            "ok \\x1b]52;c;ZWNobyBwd25lZA==\\x07\\x1b]0;title\\x1b\\\x1b[1mbold\x1b[0m"
        );
        assert_eq!(screen.stopped(), 3);
    }

    /// Output without end (control bytes, six in JSON each) stops at the cap, with a last line
    /// that says so; the file stays a valid recording.
    #[test]
    fn a_recording_stops_at_its_cap_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let (mut rec, path) = Recorder::create_in(dir.path(), "agent", "x", (80, 24)).unwrap();
        rec.cap = 64 << 10;
        for _ in 0..100 {
            rec.write_all(&[1u8; 4096]).unwrap();
        }
        drop(rec);
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size <= (64 << 10) + 200, "{size}");
        let text = std::fs::read_to_string(&path).unwrap();
        let events: Vec<(f64, String, String)> = text
            .lines()
            .skip(1)
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(events.len() > 1);
        let last = &events.last().unwrap().2;
        assert!(last.contains("the recording stopped here"), "{last}");
    }
}
