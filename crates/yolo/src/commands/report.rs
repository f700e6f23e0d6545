//! `yolo report [SESSION] [-o FILE]`: one session's log drawn as an HTML page
//! (`audit::report`), written next to its recordings unless told where, its path printed.

use crate::audit::{self, reader};
use crate::cli::Target;
use crate::error::{Error, Result};
use std::path::PathBuf;

pub(crate) fn execute(
    target: &Target,
    session: Option<String>,
    output: Option<PathBuf>,
) -> Result<i32> {
    let session = match session {
        Some(s) => super::replay::checked(s)?,
        None => super::audit::latest_session(target)?,
    };
    let mut events = vec![];
    let mut found = false;
    for path in audit::session_files(&session) {
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&path, e)),
        };
        found = true;
        events.extend(reader::parse(&text).0);
    }
    if !found {
        return Err(Error::NotFound(format!(
            "no audit log for session {session}; `yolo audit --list` shows the sessions"
        )));
    }
    // Host and guard files interleave; the sort is stable, so each file keeps its order.
    events.sort_by_key(|e| e.ts);
    let events = reader::join_exits(events, false);
    let page = audit::report::render(&session, &events);
    let path = match output {
        Some(path) => path,
        None => {
            let dir = audit::session_dir(&session);
            std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
            dir.join("report.html")
        }
    };
    std::fs::write(&path, page).map_err(|e| Error::io(&path, e))?;
    println!("{}", path.display());
    Ok(0)
}
