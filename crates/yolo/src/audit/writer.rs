use super::event::{Event, EventKind};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Appends events of one session to its JSONL file.
pub(crate) struct Writer {
    session: String,
    path: PathBuf,
    file: Mutex<File>,
}

impl Writer {
    pub(crate) fn open(path: &Path, session: &str) -> Result<Self> {
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
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    pub(crate) fn session(&self) -> &str {
        &self.session
    }

    pub(crate) fn write(&self, kind: EventKind) -> Result<()> {
        self.write_event(&Event::now(&self.session, kind))
    }

    pub(crate) fn write_event(&self, event: &Event) -> Result<()> {
        let line = event.to_line();
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        // One write per line: O_APPEND keeps concurrent writers' lines whole.
        file.write_all(&line).map_err(|e| Error::io(&self.path, e))
    }
}
