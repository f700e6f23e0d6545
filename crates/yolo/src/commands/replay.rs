//! `yolo replay [SESSION] [--speed N]`: the terminal recordings of a session
//! (`audit::cast`), played in order on our terminal.

use crate::audit::cast;
use crate::cli::Target;
use crate::error::{Error, Result};
use std::time::Duration;

/// The longest pause played: an agent thinking for minutes need not be watched in full.
const MAX_WAIT: Duration = Duration::from_secs(2);

pub(crate) fn execute(target: &Target, session: Option<String>, speed: f64) -> Result<i32> {
    let session = match session {
        Some(s) => checked(s)?,
        None => super::audit::latest_session(target)?,
    };
    let casts = cast::list(&session);
    if casts.is_empty() {
        return Err(Error::NotFound(format!(
            "session {session} has no terminal recording (`yolo run` and `yolo shell` make them when attached to a terminal)"
        )));
    }
    let mut out = std::io::stdout().lock();
    for path in casts {
        cast::play(&path, speed, MAX_WAIT, &mut out).map_err(|e| Error::io(&path, e))?;
    }
    Ok(0)
}

/// A session id is a name yolo made (`session::new_id`): letters, digits and `-`, so it cannot
/// walk out of the sessions folder.
pub(crate) fn checked(session: String) -> Result<String> {
    let ok = !session.is_empty()
        && session
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-');
    if ok {
        Ok(session)
    } else {
        Err(Error::Usage(format!(
            "{:?} is not a session id; `yolo audit --list` shows them",
            crate::visible::escape_controls(&session)
        )))
    }
}
