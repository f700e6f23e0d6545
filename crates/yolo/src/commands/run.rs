//! `yolo run <agent>`: `up` if needed, then the agent in unattended mode, attached.

use crate::agents;
use crate::cli::Target;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::project::Project;
use crate::session::runs::{self, RunRecord};
use crate::session::{Hold, Session};
use crate::settings::UpSettings;
use crate::user_config::UserConfig;
use std::io::Write;

pub(crate) async fn execute(
    target: &Target,
    settings: UpSettings,
    user: UserConfig,
    agent: Option<String>,
    args: Vec<String>,
    detach: bool,
) -> Result<i32> {
    let located = super::locate(target)?;
    let mut project = Project::load(&located, settings, user)?;
    let name = agent.or_else(|| project.spec.default_agent.clone()).ok_or_else(|| {
        Error::Usage("name the agent to run, e.g. `yolo run claude` (or set customizations.yolo.agent in devcontainer.json)".into())
    })?;
    let agent = agents::resolve(&name, &project.user)?;
    let engine = super::engine().await?;
    let outcome = crate::bring_up::up(&engine, &mut project, std::slice::from_ref(&agent)).await?;
    crate::bring_up::agent::prepare(
        &engine,
        &outcome.container_id,
        outcome.remote_user.as_deref(),
        &agent,
    )
    .await?;
    let mut argv = agent.command.clone();
    argv.extend(args);
    let at = runs::Where {
        container: &outcome.container_id,
        session: &outcome.session,
        network: &outcome.network,
    };
    let mut record = RunRecord::new(
        &located.workspace,
        Some(&located.config_file),
        (&agent.name, argv.clone()),
        &at,
        detach,
    );
    record.copy = located.copy.clone();
    if detach {
        return start_keeper(&mut record);
    }
    record.pid = Some(std::process::id());
    record.save()?;
    let result = run_agent(
        &engine,
        &located,
        &agent,
        argv,
        &outcome.network,
        &outcome.session,
    )
    .await;
    record.finish(&result)?;
    result
}

/// The agent attached to this process's stdin/stdout (a terminal, or the keeper's log), then
/// the summary of what it contacted.
async fn run_agent(
    engine: &Engine,
    located: &crate::project::Located,
    agent: &agents::Agent,
    argv: Vec<String>,
    network: &str,
    session: &str,
) -> Result<i32> {
    let held = Session::at(located.clone(), Hold::Read).await?;
    crate::session::checkpoints::before_command(engine, &held, &argv).await;
    // The stand-ins of this session's credentials in place of their real values; what else
    // the agent lists goes as is, with a warning when it looks like a key.
    let stand_ins = held
        .state
        .http
        .as_ref()
        .map(|h| h.agent_env.clone())
        .unwrap_or_default();
    let (env, warnings) =
        crate::http_session::agent_env(&agent.env, &stand_ins, &|k| std::env::var(k).ok());
    let writer = crate::session::record::current(&held.state)?;
    crate::http_session::warn(&warnings, writer.as_ref());
    let env: Vec<String> = env.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    let started = chrono::Utc::now();
    let mark = (network != "none").then(closing_mark).flatten();
    if let Some(mark) = &mark {
        eprintln!(
            "{} the agent's output follows; yolo's summary after it is marked {mark}",
            console::style("yolo:").bold()
        );
    }
    let code = crate::bring_up::attach::attach(engine, held, "agent", argv, env).await?;
    if network != "none" {
        // The guard writes its events from a queue: give the last ones a moment to land.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        // The names in it are the agent's: escaped where the summary puts them.
        let summary = crate::audit::summary::summary(session, started, mark.as_deref());
        let mut err = std::io::stderr().lock();
        if mark.is_some() {
            // The agent's output has ended: its terminal state undone, and the screen below
            // cleared, so what the agent drew there cannot stand beside yolo's lines.
            let _ = write!(err, "{}\r\n\x1b[J", crate::terminal::RESET);
        }
        let _ = write!(err, "{summary}");
    }
    Ok(code)
}

/// A word the agent never sees, printed before its output and in the heading of yolo's
/// summary after it: the agent can print a summary of its own, never one with this mark (see
/// docs/security-model.md). Only for a terminal; `None` otherwise.
fn closing_mark() -> Option<String> {
    use std::io::IsTerminal;
    let simple = uuid::Uuid::new_v4().simple().to_string();
    std::io::stderr()
        .is_terminal()
        .then(|| simple[..8].to_string())
}

/// `run --detach`: the keeper started (`RunRecord::start_keeper`); this process says where
/// to look and returns.
fn start_keeper(record: &mut RunRecord) -> Result<i32> {
    let pid = record.start_keeper()?;
    let id = &record.id;
    println!("{id}");
    eprintln!(
        "{} {} runs detached as run {id} (process {pid})\n  output:  yolo logs {id} -f   ({})\n  runs:    yolo ps\n  audit:   yolo audit --session {}\n  stop:    kill {pid}",
        console::style("yolo:").bold(),
        record.agent,
        record.log_path().display(),
        record.session,
    );
    Ok(0)
}

/// `yolo keep ID` (hidden): a detached run's agent, waited for; its end on the run's record.
pub(crate) async fn keep(id: &str) -> Result<i32> {
    // Its stdout is the run's log file: the agent decides how much it prints.
    crate::engine::cap_own_output(crate::audit::cast::MAX_RECORDING);
    let record = runs::claim(id).await?;
    let result = async {
        let located =
            crate::project::Located::find(Some(&record.workspace), record.config.as_deref())?
                .named(record.copy.as_deref());
        let user = UserConfig::load()?;
        let agent = agents::resolve(&record.agent, &user)?;
        let engine = super::engine().await?;
        let argv = record.argv.clone();
        run_agent(
            &engine,
            &located,
            &agent,
            argv,
            &record.network,
            &record.session,
        )
        .await
    }
    .await;
    if let Err(e) = &result {
        eprintln!("yolo: {e}");
    }
    let mut record = runs::find(Some(id), None)?;
    record.finish(&result)?;
    Ok(result.unwrap_or(1))
}
