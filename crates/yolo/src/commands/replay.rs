//! `yolo replay [SESSION] [--speed N] [--raw]`: the terminal recordings of a session
//! (`audit::cast`), played in order on our terminal. The agent wrote them: the sequences that
//! reach past the screen (the clipboard, the title, queries) are shown as escapes
//! (`terminal::Screen`), not obeyed, unless `--raw`.

use crate::audit::cast;
use crate::cli::Target;
use crate::error::{Error, Result};
use crate::terminal::{Screen, Stop};
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// The longest pause played: an agent thinking for minutes need not be watched in full.
const MAX_WAIT: Duration = Duration::from_secs(2);

pub(crate) async fn execute(
    target: &Target,
    session: Option<String>,
    speed: f64,
    raw: bool,
) -> Result<i32> {
    let session = super::audit::chosen_session(target, session).await?;
    let casts = cast::list(&session);
    if casts.is_empty() {
        return Err(Error::NotFound(format!(
            "session {session} has no terminal recording (`yolo run` and `yolo shell` make them when attached to a terminal)"
        )));
    }
    let mut out = std::io::stdout().lock();
    let mut stopped = 0;
    for path in casts {
        // Each recording on its own: one cannot leave a sequence open into the next.
        let mut screen = (!raw).then(|| Screen::new(Stop::Show));
        cast::play(&path, speed, MAX_WAIT, screen.as_mut(), &mut out)
            .map_err(|e| Error::io(&path, e))?;
        stopped += screen.map_or(0, |s| s.stopped());
    }
    if std::io::stdout().is_terminal() {
        // The recording's modes (the alternate screen, mouse reports) end with it.
        let _ = out.write_all(crate::terminal::RESET.as_bytes());
        let _ = out.flush();
    }
    drop(out);
    if stopped > 0 {
        eprintln!(
            "{} {stopped} escape sequences that act beyond the screen (clipboard, title, links, queries) were shown as text; `yolo replay --raw` plays them",
            console::style("yolo:").bold()
        );
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
