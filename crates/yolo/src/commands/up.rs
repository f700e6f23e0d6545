//! `yolo up`: the project found and loaded, brought up (`bring_up::up`), the outcome printed
//! for humans or as `--json`.

use crate::bring_up::{up, Outcome};
use crate::cli::Target;
use crate::engine::{Engine, Owner};
use crate::error::{Error, Result};
use crate::project::Project;
use crate::session::{Hold, Session};
use crate::settings::UpSettings;
use crate::user_config::UserConfig;

pub(crate) async fn execute(
    target: &Target,
    settings: UpSettings,
    user: UserConfig,
    json: bool,
) -> Result<i32> {
    let engine = super::engine_soon();
    let located = super::locate(target)?;
    let mut project = Project::load(&located, settings, user)?;
    let engine = engine.await?;
    let outcome = up(&engine, &mut project, &[]).await?;
    if json {
        crate::output::print(&json_output(&engine, &project, &outcome).await?);
    } else {
        print_outcome(&outcome, &located.flag());
    }
    Ok(0)
}

/// `up --json` (docs/json-output.md): the container and network objects `status` and
/// `firewall` show too, built the same way.
async fn json_output(engine: &Engine, project: &Project, o: &Outcome) -> Result<crate::output::Up> {
    use crate::output::{Network, Up};
    let spec = &project.spec;
    let found = engine.find(&Owner::of(spec)).await?;
    let agent = found.agent.ok_or_else(|| {
        Error::NotRunning(format!(
            "{} disappeared right after `yolo up`; run `yolo up` again",
            o.container_name
        ))
    })?;
    let state = Session::at(project.located().clone(), Hold::Read)
        .await?
        .state;
    Ok(Up {
        container: state.container_view(&agent),
        session: o.session.clone(),
        action: o.action.clone(),
        reason: o.reason.clone(),
        stale: o.stale,
        declined: o.declined.clone(),
        credentials: o.credentials.clone(),
        network: Network::of(&o.network, found.guard.as_ref())
            .ask_allowlist(engine, found.guard.as_ref())
            .await,
    })
}

/// The image and the folder are the repository's words: shown, not obeyed.
fn print_outcome(o: &Outcome, flag: &str) {
    use crate::visible::escape_controls;
    let state = console::style(&o.action).green();
    let why = o
        .reason
        .as_ref()
        .map(|r| format!("; {r}"))
        .unwrap_or_default();
    eprintln!(
        "{} {} {state} ({}{why}), workspace at {}; `yolo exec{flag}`, `yolo shell{flag}` or `yolo run{flag} <agent>` to use it",
        console::style("yolo:").bold(),
        o.container_name,
        escape_controls(&o.image),
        escape_controls(&o.workspace_folder)
    );
    if !o.credentials.is_empty() {
        let kept: Vec<String> = o
            .credentials
            .iter()
            .map(|c| format!("{} ({})", c.name, c.hosts.join(", ")))
            .collect();
        eprintln!(
            "{} keys kept outside the container: {}; the agent holds stand-ins, the guard adds the real values on those hosts only",
            console::style("yolo:").bold(),
            kept.join("; ")
        );
    }
    if o.stale {
        eprintln!(
            "{} the dev container config changed since this container was created; run `yolo up --rebuild` to recreate it",
            console::style("warning:").yellow().bold()
        );
    }
}
