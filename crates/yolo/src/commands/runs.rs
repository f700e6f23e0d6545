//! `yolo ps` and `yolo logs`: the agent runs on record (`session::runs`) and a detached
//! run's output.

use crate::error::{Error, Result};
use crate::session::runs::{self, RunState};
use std::path::Path;

/// `yolo ps`: the running agent runs of every workspace (with `all`, the ended ones too).
pub(crate) async fn ps(all_runs: bool, json: bool) -> Result<i32> {
    let runs = runs::listed(all_runs).await?;
    if json {
        let items: Vec<serde_json::Value> = runs
            .iter()
            .map(|(r, state)| runs::json_view(r, state))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&items).map_err(|e| Error::Failed {
                what: crate::error::Failure::Serialize,
                cause: crate::error::Cause::bare(e),
            })?
        );
        return Ok(0);
    }
    if runs.is_empty() {
        eprintln!(
            "yolo: no {}agent run{}",
            if all_runs { "" } else { "running " },
            if all_runs {
                ""
            } else {
                " (`yolo ps --all` lists ended ones)"
            }
        );
        return Ok(0);
    }
    let rows: Vec<[String; 7]> = runs
        .iter()
        .map(|(r, state): &(_, RunState)| runs::table_row(r, state))
        .collect();
    crate::output::print_table(runs::TABLE_HEADER, &rows);
    Ok(0)
}

/// One session of `yolo ps --sessions`.
#[derive(serde::Serialize)]
struct SessionRow {
    /// The named session's name; `None`: the workspace session.
    copy: Option<String>,
    repository: String,
    /// `yolo/NAME` for a named session (`None`: the workspace session, on the repository).
    branch: Option<String>,
    /// Whether that branch exists in the repository (a `yolo sync` or `down` made it).
    synced: bool,
    /// `running`, `stopped` (its containers are there) or `ended`.
    state: String,
    /// The latest log session's id, and what its log holds.
    session: String,
    started: Option<String>,
    programs: u64,
    files: u64,
    refusals: u64,
}

/// `yolo ps --sessions [--all] [--json]`: every repository's sessions that have containers
/// (with `all`, the ended ones too), each with its branch and its latest log's counts.
pub(crate) async fn sessions(all: bool, json: bool) -> Result<i32> {
    let engine = super::engine().await?;
    let agents = engine.list_managed().await?;
    let mut rows = Vec::new();
    for (id, state) in crate::session::state::WorkspaceState::all_with_ids() {
        let Some(session) = state.sessions.last().cloned() else {
            continue;
        };
        let agent = agents.iter().find(|c| {
            c.role == crate::engine::Role::Agent && c.devcontainer_id.as_deref() == Some(&id)
        });
        let status = match agent {
            Some(c) if c.running => "running",
            Some(_) => "stopped",
            None => "ended",
        };
        if agent.is_none() && !all {
            continue;
        }
        // A copy's guard logs to a volume: its latest events copied here first.
        if let (Some(agent), Some(_)) = (agent, &state.copy) {
            let located = crate::project::Located {
                workspace: state.workspace.clone().into(),
                config_file: agent.config_file.clone().unwrap_or_default().into(),
                devcontainer_id: id.clone(),
                copy: state.copy.clone(),
            };
            let _ = crate::remote_copy::collect_events(&engine, &located).await;
        }
        let branch = state.copy.as_ref().map(|name| format!("yolo/{name}"));
        let synced = branch.as_ref().is_some_and(|b| {
            std::process::Command::new("git")
                .arg("-C")
                .arg(&state.workspace)
                .args([
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    &format!("refs/heads/{b}"),
                ])
                .stdout(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
        let mut model = crate::watch::model::Model::new(&session);
        for event in crate::audit::read_session(&session).unwrap_or_default() {
            model.apply(&event);
        }
        let c = &model.counts;
        let started = chrono::NaiveDateTime::parse_from_str(
            session.get(..16).unwrap_or_default(),
            "%Y%m%dT%H%M%SZ",
        )
        .ok()
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string());
        rows.push(SessionRow {
            copy: state.copy.clone(),
            repository: state.workspace.clone(),
            branch,
            synced,
            state: status.into(),
            session,
            started,
            programs: c.programs,
            files: c.files,
            refusals: c.lookups_refused + c.blocked + c.http_refused,
        });
    }
    rows.sort_by(|a, b| (&a.repository, &a.copy).cmp(&(&b.repository, &b.copy)));
    if json {
        crate::output::print(&rows);
        return Ok(0);
    }
    if rows.is_empty() {
        eprintln!(
            "yolo: no session{}",
            if all {
                ""
            } else {
                " with containers (`yolo ps --sessions --all` lists ended ones)"
            }
        );
        return Ok(0);
    }
    let table: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            [
                r.copy.clone().unwrap_or_else(|| "-".into()),
                crate::visible::escape_controls(&r.repository),
                match &r.branch {
                    Some(b) if r.synced => b.clone(),
                    Some(b) => format!("{b} (not synced)"),
                    None => "-".into(),
                },
                r.state.clone(),
                r.started.clone().unwrap_or_default(),
                r.programs.to_string(),
                r.files.to_string(),
                r.refusals.to_string(),
            ]
        })
        .collect();
    crate::output::print_table(
        [
            "SESSION",
            "REPOSITORY",
            "BRANCH",
            "STATE",
            "STARTED (UTC)",
            "PROGRAMS",
            "FILES",
            "REFUSALS",
        ],
        &table,
    );
    Ok(0)
}

/// `yolo logs [RUN] [-f] [--raw]`: a detached run's output; with `follow`, until the run
/// ends. The agent wrote it: control characters are shown escaped (an ESC sequence could
/// rewrite the terminal, its title or the clipboard), line by line, unless `raw`.
pub(crate) async fn logs(
    id: Option<&str>,
    of: Option<(&Path, Option<&str>)>,
    follow: bool,
    raw: bool,
) -> Result<i32> {
    use std::io::Write;
    let run = runs::find(id, of)?;
    let mut out = std::io::stdout().lock();
    let show = |bytes: &[u8]| {
        let shown = if raw {
            bytes.to_vec()
        } else {
            crate::visible::escape_output(&String::from_utf8_lossy(bytes)).into_bytes()
        };
        out.write_all(&shown)
            .and_then(|_| out.flush())
            .map_err(|e| Error::io(Path::new("<stdout>"), e))
    };
    runs::read_log(&run, follow, show).await?;
    Ok(0)
}
