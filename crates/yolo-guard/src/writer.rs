//! Appends the guard's audit events to its file in the host's data folder (bind-mounted).
//! One `write` per line with O_APPEND, so lines stay whole next to other writers. The CLI's
//! `audit::Writer` does the same for the host's file: the two share the line format
//! (`Event::to_line`), not the file handling, because `yolo-protocol` does no I/O.

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use yolo_protocol::event::{Event, EventKind};

pub struct Writer {
    session: String,
    /// Stamped on every event (`GuardConfig::phase`).
    phase: Option<String>,
    path: PathBuf,
    file: Mutex<File>,
}

impl Writer {
    pub fn open(path: &Path, session: &str) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        Ok(Writer {
            session: session.to_string(),
            phase: None,
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// The same writer, stamping `phase` on every event.
    pub fn in_phase(mut self, phase: Option<&str>) -> Self {
        self.phase = phase.map(str::to_string);
        self
    }

    pub fn write(&self, kind: EventKind) -> Result<()> {
        let line = Event::now(&self.session, kind)
            .in_phase(self.phase.as_deref())
            .to_line();
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        file.write_all(&line).map_err(|e| Error::io(&self.path, e))
    }
}
