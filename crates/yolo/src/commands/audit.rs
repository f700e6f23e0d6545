//! `yolo audit`: a plain viewer of a session's events, with `--kind` filters and `--follow`.

use crate::audit::filter::{Filter, SessionLog};
use crate::audit::{self, Event, EventKind};
use crate::cli::Target;
use crate::error::{Error, Result};
use crate::session::state::WorkspaceState;
use crate::session::{Hold, Session};
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
    let remote = crate::engine::remote::engine_is_remote();
    if remote {
        if let Err(e) = collect_remote_events(target).await {
            eprintln!(
                "{} the guard's latest events could not be copied from the engine: {e}",
                console::style("warning:").yellow().bold()
            );
        }
    }
    if list {
        return list_sessions(target).await;
    }
    let session = match session {
        Some(s) => s,
        None => latest_session(target).await?,
    };
    let mut log = SessionLog::open(&session, &filter)?;
    if !print(log.past(), &filter, json) {
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
            if !print(log.new_events(), &filter, json) {
                return Ok(0);
            }
        }
    }
    // Said last, where it is read: file changes may be missing from what was printed, and
    // past the log's cap most of the record is counts.
    for gap in [
        audit::file_watch_gap(&session),
        audit::log_cap_reached(&session),
        audit::export::ship::Status::load(&session).and_then(|s| s.losses()),
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

/// The workspace's latest session (`yolo audit`, `replay` and `report` without `--session`).
pub(crate) async fn latest_session(target: &Target) -> Result<String> {
    Session::open(target, Hold::Read).await?.latest()
}

/// The session a command names (checked as an id), else the workspace's latest.
pub(crate) async fn chosen_session(target: &Target, session: Option<String>) -> Result<String> {
    match session {
        Some(s) => super::replay::checked(s),
        None => latest_session(target).await,
    }
}

/// With a remote engine, the guard's latest events copied here first (they are in a volume
/// there); a failure leaves what was copied before.
pub(crate) async fn collect_if_remote(target: &Target) {
    if crate::engine::remote::engine_is_remote() {
        let _ = collect_remote_events(target).await;
    }
}

async fn list_sessions(target: &Target) -> Result<i32> {
    // Outside a workspace: every workspace's sessions.
    let states = match super::locate(target) {
        Ok(located) => vec![Session::at(located, Hold::Read).await?.state],
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

/// `yolo audit verify [SESSION]`: each of the session's files checked against its hash chain
/// (`yolo_protocol::chain`), one line per file; exit 1 when one is not intact. A file of a
/// session that has ended must end with its writer's closing record; one that does not was
/// cut short (or its writer did not stop cleanly: a guard killed rather than stopped).
pub(crate) async fn verify(target: &Target, session: Option<String>) -> Result<i32> {
    use yolo_protocol::chain::{self, Verdict};
    let session = chosen_session(target, session).await?;
    let files = crate::audit::session_files(&session);
    if !files.iter().any(|f| f.exists()) {
        return Err(Error::NotFound(format!(
            "no audit log for session {session}; `yolo audit --list` shows the sessions"
        )));
    }
    let read =
        |path: &std::path::Path| std::fs::read_to_string(path).map_err(|e| Error::io(path, e));
    let ended = files[0].exists()
        && crate::audit::reader::parse(&read(&files[0])?)
            .0
            .iter()
            .any(|e| matches!(e.kind, EventKind::SessionStop { .. }));
    let mut broken = 0;
    println!(
        "session {session}{}",
        if ended { " (ended)" } else { " (open)" }
    );
    for path in &files {
        if !path.exists() {
            continue;
        }
        let shown = path.display();
        let line = match chain::verify(&read(path)?) {
            Verdict::Intact {
                records,
                closed: true,
            } => {
                format!("intact: {records} records, closed by its writer")
            }
            Verdict::Intact {
                records,
                closed: false,
            } if ended => {
                broken += 1;
                format!("CUT SHORT: {records} records intact, but the session ended and the file does not end with its writer's closing record (its end was removed, or its writer was killed rather than stopped)")
            }
            Verdict::Intact { records, .. } => {
                format!("intact so far: {records} records (its writer is still writing)")
            }
            Verdict::Unsealed { records } => {
                format!("not sealed: {records} records written before yolo chained its logs, nothing to check")
            }
            Verdict::Broken { line, why } => {
                broken += 1;
                format!("BROKEN at line {line}: {why}")
            }
            Verdict::Miscounted {
                line,
                counted,
                found,
            } => {
                broken += 1;
                format!("BROKEN at line {line}: its writer's closing record counts {counted} records before it, the file has {found} (records removed or added)")
            }
        };
        println!("{shown}: {line}");
    }
    Ok(if broken == 0 { 0 } else { 1 })
}

/// `yolo audit --format ocsf|otlp-json [--session ID]`: the session's events (those the
/// filters let through), every file merged by time, in a format a SIEM or a collector takes
/// (`audit::export`).
pub(crate) async fn export(
    target: &Target,
    session: Option<String>,
    filter: &Filter,
    format: crate::audit::export::Format,
) -> Result<i32> {
    use crate::audit::export;
    collect_if_remote(target).await;
    let session = chosen_session(target, session).await?;
    let mut events = crate::audit::read_session(&session)?;
    // Every file in its own order, merged by time (a stable sort keeps ties in file order).
    events.sort_by_key(|e| e.ts);
    let context = export::Context {
        workspace: export::workspace_of(&events),
        session,
    };
    let events: Vec<Event> = events
        .into_iter()
        .filter(|e| filter.line(e, true).is_some())
        .collect();
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    // A closed stdout (`| head`) ends it quietly.
    let _ = out.write_all(export::render(format, &context, &events).as_bytes());
    Ok(0)
}

/// `yolo audit ship SESSION` (hidden): the background shipper `up` starts
/// (`audit::export::ship`). Its settings are the user config's, read now.
pub(crate) async fn ship(target: &Target, session: String) -> Result<i32> {
    use crate::audit::export::ship;
    let session = super::replay::checked(session)?;
    let user = crate::user_config::UserConfig::load()?;
    // Checked and expanded as `up` did (`~/`, absolute, its folder there): never a path
    // relative to wherever this process runs.
    let mut sinks = crate::settings::export_sinks(&user.audit)?;
    let located = super::locate(target).ok();
    if let (Some(path), Some(located)) = (&sinks.ocsf_file, &located) {
        if ship::inside(path, &located.workspace) {
            eprintln!(
                "yolo: not writing OCSF records to {}: it is inside the workspace, which the agent can change",
                path.display()
            );
            sinks.ocsf_file = None;
        }
    }
    if !sinks.any() {
        return Ok(0);
    }
    let workspace = located
        .as_ref()
        .map(|l| l.workspace.display().to_string())
        .unwrap_or_default();
    // A remote engine's guard writes its events into a volume there: copied here while the
    // session runs, so they ship as they happen (not only when a command ends or `down`).
    let _collecting = located
        .filter(|_| crate::engine::remote::engine_is_remote())
        .map(|located| crate::remote_copy::keep_collecting(located, REMOTE_COLLECT));
    ship::run(crate::audit::export::Context { workspace, session }, sinks)
        .await
        .map_err(|e| Error::io(crate::audit::sessions_dir(), e))?;
    Ok(0)
}

/// How often the shipper copies a remote engine's guard events here.
const REMOTE_COLLECT: std::time::Duration = std::time::Duration::from_secs(5);
