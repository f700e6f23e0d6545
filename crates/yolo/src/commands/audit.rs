//! `yolo audit`: a plain viewer of a session's events, with `--kind` filters and `--follow`.

use crate::audit::filter::Filter;
use crate::audit::{self, Event};
use crate::cli::Target;
use crate::error::{Error, Result};
use crate::session::state::WorkspaceState;
use crate::session::Session;
use std::time::Duration;

pub(crate) async fn execute(
    target: &Target,
    session: Option<String>,
    mut filter: Filter,
    follow: bool,
    json: bool,
    list: bool,
) -> Result<i32> {
    // A remote engine's guard logs to a volume: its events copied here first, and every 2 s
    // while following (docs/remote.md).
    let remote = crate::engine::remote::remote_reason().is_ok_and(|r| r.is_some());
    if remote {
        if let Err(e) = collect_remote_events(target).await {
            eprintln!(
                "{} the guard's latest events could not be copied from the engine: {e}",
                console::style("warning:").yellow().bold()
            );
        }
    }
    if list {
        return list_sessions(target);
    }
    let session = match session {
        Some(s) => s,
        None => latest_session(target)?,
    };
    let files = audit::session_files(&session);
    if !files.iter().any(|f| f.exists()) {
        return Err(Error::NotFound(format!(
            "no audit log for session {session}; `yolo audit --list` shows the sessions"
        )));
    }
    // Read as it is printed, never the whole log at once (docs/performance.md).
    let mut tail = audit::reader::Tail::new(files.clone());
    if !filter.kinds.is_empty() {
        tail = tail.only_containing(filter.needles());
    }
    // What is already in the log is one timeline: each exec carries its exit. Later events
    // (--follow) print as they come, an exit on its own line when it happens.
    let keep_exits = filter
        .kinds
        .iter()
        .any(|k| k == "exec_exit" || k == "exec_digest");
    let mut exits = if filter.joins() {
        audit::reader::Exits::scan(&files)
    } else {
        audit::reader::Exits::none()
    };
    let past = tail.poll().filter_map(|e| exits.join(e, keep_exits));
    if !print(past, &filter, json) {
        return Ok(0);
    }
    // --follow ends with Ctrl-C, or when stdout closes.
    let mut polls: u64 = 0;
    if follow {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            polls += 1;
            if remote && polls.is_multiple_of(10) {
                // A failure here was said at the start; the next round tries again.
                let _ = collect_remote_events(target).await;
            }
            filter.live = true;
            if !print(tail.poll(), &filter, json) {
                return Ok(0);
            }
        }
    }
    // Said last, where it is read: file changes may be missing from what was printed, and
    // past the log's cap most of the record is counts.
    for gap in [
        audit::file_watch_gap(&session),
        audit::log_cap_reached(&session),
    ]
    .into_iter()
    .flatten()
    {
        eprintln!("{} {gap}", console::style("warning:").yellow().bold());
    }
    Ok(0)
}

/// Print the lines of `events` that pass `filter`, through one buffered, locked stdout; false
/// when stdout is closed (`yolo audit | head`), which ends the command quietly.
fn print(events: impl Iterator<Item = Event>, filter: &Filter, json: bool) -> bool {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for event in events {
        if let Some(line) = filter.line(&event, json) {
            if writeln!(out, "{line}").is_err() {
                return false;
            }
        }
    }
    out.flush().is_ok()
}

async fn collect_remote_events(target: &Target) -> Result<()> {
    let located = super::locate(target)?;
    let engine = super::engine().await?;
    crate::remote_copy::collect_events(&engine, &located).await
}

pub(crate) fn latest_session(target: &Target) -> Result<String> {
    let located = super::locate(target)?;
    let state = Session::read(&located.devcontainer_id)?.state;
    state.sessions.last().cloned().ok_or_else(|| {
        Error::NotFound(format!(
            "no sessions yet for {}; start one with `yolo up`",
            located.workspace.display()
        ))
    })
}

fn list_sessions(target: &Target) -> Result<i32> {
    let states = match super::locate(target) {
        Ok(located) => vec![Session::read(&located.devcontainer_id)?.state],
        Err(_) => WorkspaceState::all(),
    };
    for state in states {
        for s in &state.sessions {
            let open = if state.session.as_deref() == Some(s) {
                " (open)"
            } else {
                ""
            };
            let workspace = crate::visible::escape_controls(&state.workspace);
            println!("{s}{open}  {workspace}");
        }
    }
    Ok(0)
}
