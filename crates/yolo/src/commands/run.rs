//! `yolo run <agent>`: `up` if needed, then the agent in unattended mode, attached.

use crate::agents;
use crate::cli::Target;
use crate::engine::{Engine, ExecRequest, Output};
use crate::error::{Error, Result};
use crate::project::{Project, AGENT_STATE_ROOT};
use crate::settings::UpSettings;
use crate::user_config::UserConfig;

pub(crate) async fn execute(
    target: &Target,
    settings: UpSettings,
    user: UserConfig,
    agent: Option<String>,
    args: Vec<String>,
) -> Result<i32> {
    let located = super::locate(target)?;
    let mut project = Project::load(&located, settings, user)?;
    let name = agent.or_else(|| project.spec.default_agent.clone()).ok_or_else(|| {
        Error::Usage("name the agent to run, e.g. `yolo run claude` (or set customizations.yolo.agent in devcontainer.json)".into())
    })?;
    let agent = agents::resolve(&name, &project.user)?;
    let engine = super::engine().await?;
    let outcome = super::up::up(&engine, &mut project, std::slice::from_ref(&agent)).await?;
    prepare(
        &engine,
        &outcome.container_id,
        outcome.remote_user.as_deref(),
        &agent,
    )
    .await?;
    let env: Vec<String> = agent
        .env
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| format!("{k}={v}")))
        .collect();
    let mut argv = agent.command.clone();
    argv.extend(args);
    let started = chrono::Utc::now();
    let code = super::exec::attach_with_env(&engine, &located, "agent", argv, env).await?;
    if outcome.network != "none" {
        // The guard writes its events from a queue: give the last ones a moment to land.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        // The names the agent looked up are its own words: shown, not obeyed.
        let summary = super::firewall::summary(&outcome.session, started);
        eprint!("{}", crate::visible::escape_controls(&summary));
    }
    Ok(code)
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
            String::from_utf8_lossy(&result.captured).trim()
        ))),
    }
}
