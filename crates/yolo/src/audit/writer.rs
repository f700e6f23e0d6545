use super::event::{Event, EventKind};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use yolo_protocol::chain::Appender;

/// Appends events of one session to its JSONL file, each line sealed in the file's hash chain
/// (`yolo_protocol::chain`; several yolo processes may append to one session's file).
pub(crate) struct Writer {
    session: String,
    path: PathBuf,
    file: Mutex<(File, Appender)>,
}

impl Writer {
    pub(crate) fn open(path: &Path, session: &str) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        Ok(Writer {
            session: session.to_string(),
            path: path.to_path_buf(),
            file: Mutex::new((file, Appender::new())),
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
        let mut state = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let (file, chain) = &mut *state;
        // One write per line, under the file's lock: O_APPEND keeps concurrent writers' lines
        // whole, the lock their chain one.
        chain
            .append(file, &line)
            .map(|_| ())
            .map_err(|e| Error::io(&self.path, e))
    }

    /// The session's last record in this file (`yolo down`): how many come before it, so
    /// `yolo audit verify` sees a cut at the end.
    pub(crate) fn close(&self) -> Result<()> {
        let mut state = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let (file, chain) = &mut *state;
        chain
            .append_with(file, |records| {
                Event::now(&self.session, EventKind::ChainEnd { records }).to_line()
            })
            .map(|_| ())
            .map_err(|e| Error::io(&self.path, e))
    }
}
