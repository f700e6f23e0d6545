//! `yolo report [SESSION] [-o FILE]`: one session's log drawn as an HTML page
//! (`audit::report`), written next to its recordings unless told where, its path printed.

use crate::audit::{self, reader};
use crate::cli::Target;
use crate::error::{Error, Result};
use std::path::PathBuf;

pub(crate) async fn execute(
    target: &Target,
    session: Option<String>,
    output: Option<PathBuf>,
) -> Result<i32> {
    let session = super::audit::chosen_session(target, session).await?;
    let files = audit::session_files(&session);
    if !files.iter().any(|f| f.exists()) {
        return Err(Error::NotFound(format!(
            "no audit log for session {session}; `yolo audit --list` shows the sessions"
        )));
    }
    // Streamed: host and guard files merged by time as they are read, each event taken into
    // the page's counts and bounded rows, never the whole log in memory.
    let mut exits = reader::Exits::scan(&files);
    let mut page = audit::report::Page::default();
    for event in reader::Tail::new(files).poll() {
        if let Some(event) = exits.join(event, false) {
            page.add(event);
        }
    }
    let page = page.finish(&session);
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
