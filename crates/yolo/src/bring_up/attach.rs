//! A command attached to this process's terminal (or pipes) in a session's running container:
//! `yolo exec`, `yolo shell` and `yolo run`'s agent. It runs as the hooks do (`hooks::Runner`,
//! with what `up` saved for `exec`), its terminal recorded for the agent and the shell.

use super::hooks::Runner;
use crate::engine::{ContainerDetails, Engine, Output};
use crate::error::{Error, Result};
use crate::project::Located;
use crate::session::state::WorkspaceState;
use crate::session::Session;
use std::io::IsTerminal;

/// Run `argv` attached to our terminal (or pipes) in the workspace's running container.
/// `source` says who runs it (`exec`, `shell`, `agent`); `extra_env` goes to it besides the
/// remote environment.
pub(crate) async fn attach(
    engine: &Engine,
    mut session: Session,
    source: &str,
    argv: Vec<String>,
    extra_env: Vec<String>,
) -> Result<i32> {
    let located = &session.located.clone();
    let (container, mut details) = match known_agent(engine, &session.state, located).await {
        Some(known) => known,
        None => {
            let container = running_container(engine, located).await?;
            let details = engine.inspect(&container).await?;
            (container, details)
        }
    };
    if details.paused {
        crate::session::checkpoints::resume_paused(engine, located).await?;
        details = engine.inspect(&container).await?;
    }
    let settings = session.state.exec.clone().unwrap_or_default();
    let writer = session.record()?;
    let mut runner = Runner {
        engine,
        container: container.clone(),
        user: settings.user.clone(),
        cwd: if settings.cwd.is_empty() {
            "/workspace".into()
        } else {
            settings.cwd.clone()
        },
        env: Vec::new(),
        writer: writer.as_ref(),
        supervised: details.supervised,
    };
    // The shell environment, probed by the first command after the container started when
    // `up` had no hook that needed it.
    let probed = match &settings.probed_env {
        Some(env) => env.clone(),
        None => {
            let env = super::hooks::probe_for_exec(&runner, &mut session.state, &details.env).await;
            session.save()?;
            env
        }
    };
    let mut env = super::hooks::command_env(&probed, &settings.remote_env, &details.env);
    env.extend(extra_env);
    runner.env = env;
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let request = runner.request(argv.clone(), tty, true);
    let name = argv.first().cloned().unwrap_or_default();
    // Ctrl-C (without a TTY; with one it goes to the command as a key), SIGTERM or SIGHUP
    // stop the command in the container too (`Engine::exec`).
    let _handled = crate::interrupt::Handled::enter();
    let recording = writer
        .as_ref()
        .filter(|_| tty && RECORDED.contains(&source))
        .and_then(|writer| record(writer, source, &argv));
    // An unreadable config stops nothing here (`up` says what is wrong with it): the
    // sequences stay filtered.
    let host_sequences =
        crate::user_config::UserConfig::load().is_ok_and(|user| user.terminal.pass_host_sequences);
    // The held questions' prompt, on the agent's terminal (`watch::prompt`).
    let prompt = match (tty, source) {
        (true, "agent") => crate::watch::prompt::Prompt::start(engine, located).await,
        _ => None,
    };
    let output = Output::Attached {
        recording,
        host_sequences,
        overlay: prompt
            .clone()
            .map(|p| p as std::sync::Arc<dyn crate::engine::Overlay>),
    };
    let result = runner.run(source, &name, &request, output).await;
    if let Some(prompt) = &prompt {
        prompt.finish().await;
    }
    // Interrupted or failed too: whatever ran may have changed the files the host runs.
    crate::watched::report_and_print(&located.devcontainer_id, writer.as_ref());
    // A remote engine's guard logs to a volume: its events copied here (docs/remote.md).
    if let Err(e) = crate::remote_copy::collect_events(engine, located).await {
        eprintln!("{} {e}", console::style("warning:").yellow().bold());
    }
    Ok(result?.exit_code.clamp(0, 255) as i32)
}

/// The commands whose terminal is recorded: the agent (`yolo run`) and `yolo shell`.
const RECORDED: [&str; 2] = ["agent", "shell"];

/// Our terminal, with a copy of the output to an asciicast file in the session's folder
/// (`audit::cast`); where it is goes into the audit log. A recording that cannot be made is a
/// warning: the command runs all the same.
fn record(
    writer: &crate::audit::Writer,
    source: &str,
    argv: &[String],
) -> Option<crate::engine::Recording> {
    use crate::audit::{cast::Recorder, EventKind};
    // A pseudo-terminal nobody sized (`script` in a pipeline) says 0×0: players want a size.
    let size = crossterm::terminal::size()
        .ok()
        .filter(|(w, h)| *w > 0 && *h > 0)
        .unwrap_or((80, 24));
    let command = argv.join(" ");
    match Recorder::create(writer.session(), source, &command, size) {
        Ok((recorder, path)) => {
            let _ = writer.write(EventKind::Notice {
                message: format!("terminal of {source} recorded in {}", path.display()),
            });
            Some(crate::engine::Recording::new(recorder))
        }
        Err(e) => {
            eprintln!(
                "{} the terminal is not recorded: {e}",
                console::style("warning:").yellow().bold()
            );
            None
        }
    }
}

/// The agent container `yolo up` last recorded for this workspace, inspected, when it is still
/// that workspace's agent and runs: one request instead of a list and an inspection. None
/// otherwise (gone, stopped, recreated, no record): the caller looks it up by its labels.
async fn known_agent(
    engine: &Engine,
    state: &WorkspaceState,
    located: &Located,
) -> Option<(String, ContainerDetails)> {
    let id = &state.exec.as_ref()?.container;
    if id.is_empty() {
        return None;
    }
    let details = engine.inspect(id).await.ok()?;
    (details.running && details.agent_of.as_deref() == Some(located.devcontainer_id.as_str()))
        .then(|| (id.clone(), details))
}

async fn running_container(engine: &Engine, located: &Located) -> Result<String> {
    let found = engine.find(&located.owner()).await?;
    match found.agent {
        Some(c) if c.running || c.state == "paused" => Ok(c.id),
        Some(_) => Err(Error::NotRunning(format!(
            "the container for {} is stopped; start it with `yolo up`",
            located.workspace.display()
        ))),
        None => Err(Error::NotRunning(format!(
            "no yolo container for {}; create it with `yolo up`",
            located.workspace.display()
        ))),
    }
}
