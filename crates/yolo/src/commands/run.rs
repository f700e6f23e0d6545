//! `yolo run <agent>`: `up` if needed, then the agent in unattended mode, attached.

use crate::agents;
use crate::cli::Target;
use crate::engine::{Engine, ExecRequest, Output};
use crate::error::{Error, Result};
use crate::project::{Project, AGENT_STATE_ROOT};
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
    prepare(
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
    let env: Vec<String> = agent
        .env
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| format!("{k}={v}")))
        .collect();
    let started = chrono::Utc::now();
    let mark = (network != "none").then(closing_mark).flatten();
    if let Some(mark) = &mark {
        eprintln!(
            "{} the agent's output follows; yolo's summary after it is marked {mark}",
            console::style("yolo:").bold()
        );
    }
    let held = Session::at(located.clone(), Hold::Read).await?;
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

/// `run --detach`: the keeper (`yolo keep ID`) started in a session of its own, without a
/// terminal, its output to the run's log; this process says where to look and returns.
fn start_keeper(record: &mut RunRecord) -> Result<i32> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::process::CommandExt;
    record.save()?;
    let log = record.log_path();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&log)
        .map_err(|e| Error::io(&log, e))?;
    let err = file.try_clone().map_err(|e| Error::io(&log, e))?;
    let me =
        std::env::current_exe().map_err(|e| Error::other(format!("finding yolo itself: {e}")))?;
    let mut command = std::process::Command::new(me);
    command
        .args(["keep", &record.id])
        .stdin(std::process::Stdio::null())
        .stdout(file)
        .stderr(err);
    // SAFETY: setsid is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command
        .spawn()
        .map_err(|e| Error::other(format!("starting the detached run's keeper: {e}")))?;
    record.pid = Some(child.id());
    record.save()?;
    let id = &record.id;
    println!("{id}");
    eprintln!(
        "{} {} runs detached as run {id} (process {})\n  output:  yolo logs {id} -f   ({})\n  runs:    yolo ps\n  audit:   yolo audit --session {}\n  stop:    kill {}",
        console::style("yolo:").bold(),
        record.agent,
        child.id(),
        log.display(),
        record.session,
        child.id()
    );
    Ok(0)
}

/// `yolo keep ID` (hidden): a detached run's agent, waited for; its end on the run's record.
pub(crate) async fn keep(id: &str) -> Result<i32> {
    // Its stdout is the run's log file: the agent decides how much it prints.
    crate::engine::cap_own_output(crate::audit::cast::MAX_RECORDING);
    let me = std::process::id();
    // `start_keeper` writes this process's id once it has it: until then the record is not
    // ours to finish.
    let mut waited = 0;
    let record = loop {
        let record = runs::find(Some(id), None)?;
        if record.id != id {
            return Err(Error::NotFound(format!("no agent run {id:?}")));
        }
        if record.pid == Some(me) || waited >= 100 {
            break record;
        }
        waited += 1;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let result = async {
        let located =
            crate::project::Located::find(Some(&record.workspace), record.config.as_deref())?;
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

/// Check the agent's program is in the image, and link its state folder to its volume.
async fn prepare(
    engine: &Engine,
    container: &str,
    user: Option<&str>,
    agent: &agents::Agent,
) -> Result<()> {
    let program = agent.command.first().cloned().unwrap_or_default();
    let script = r#"command -v "$1" >/dev/null 2>&1 || exit 127
state="$2"; link="$HOME/$3"
if [ -d "$state" ] && [ ! -e "$link" ] && [ ! -L "$link" ]; then mkdir -p "$(dirname "$link")" && ln -s "$state" "$link"; fi
exit 0"#;
    let request = ExecRequest {
        argv: vec![
            "/bin/sh".into(),
            "-c".into(),
            script.into(),
            "yolo-prepare".into(),
            program.clone(),
            format!("{AGENT_STATE_ROOT}/{}", agent.name),
            agent.state_dir.clone(),
        ],
        user: user.map(str::to_string),
        supervised: engine.inspect(container).await?.supervised,
        ..Default::default()
    };
    let result = engine.exec(container, &request, Output::Capture).await?;
    match result.exit_code {
        0 => Ok(()),
        127 => Err(Error::Unavailable(format!(
            "{program:?} ({}) is not installed in the container image; {}",
            agent.name, agent.install_hint
        ))),
        code => Err(Error::CommandFailed(format!(
            "preparing {} failed (exit {code}): {}",
            agent.name,
            // The container's words, in yolo's line: shown, newlines too.
            crate::visible::escape_controls(String::from_utf8_lossy(&result.captured).trim())
        ))),
    }
}
