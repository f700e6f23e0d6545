//! `yolo up`: find the config, build or find the image, create or reuse the container, run the
//! lifecycle hooks, print where it is. Idempotent.

use super::hooks::Runner;
use super::{approval, network, session};
use crate::agents::Agent;
use crate::audit::Writer;
use crate::cli::Target;
use crate::devcontainer::substitute;
use crate::engine::containers::{id_of, is_running, Network};
use crate::engine::exec::Output;
use crate::engine::labels;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::firewall::control::Request;
use crate::firewall::NetworkMode;
use crate::project::{Located, Project, AGENT_STATE_ROOT};
use crate::run_spec::{ImageSource, MountKind};
use crate::settings::UpSettings;
use crate::state::{ExecSettings, WorkspaceState};
use crate::user_config::UserConfig;
use bollard::models::ContainerSummary;
use serde::Serialize;
use std::collections::BTreeMap;

/// What `up` did, printed as JSON with `--json`.
#[derive(Debug, Serialize)]
pub struct Outcome {
    pub container_id: String,
    pub container_name: String,
    pub image: String,
    pub workspace: String,
    pub workspace_folder: String,
    pub remote_user: Option<String>,
    pub session: String,
    /// created, started, running
    pub action: String,
    /// The config changed since the container was made (and `--rebuild` was not given).
    pub stale: bool,
    /// firewall, open or none.
    pub network: String,
}

pub async fn execute(
    target: &Target,
    settings: UpSettings,
    user: UserConfig,
    json: bool,
) -> Result<i32> {
    let located = Located::find(target)?;
    let project = Project::load(&located, settings, user)?;
    let engine = super::engine().await?;
    let outcome = up(&engine, &project, &[]).await?;
    if json {
        super::output::print(&json_output(&engine, &project, &outcome).await?);
    } else {
        print_outcome(&outcome);
    }
    Ok(0)
}

/// `up --json` (docs/json-output.md): the container and network objects `status` and
/// `firewall` show too, built the same way.
async fn json_output(engine: &Engine, project: &Project, o: &Outcome) -> Result<super::output::Up> {
    use super::output::{Container, Network, Up};
    let spec = &project.spec;
    let find = |role| engine.find_container(&spec.workspace, &spec.config_file, role);
    let (agent, guard) = (find("agent").await?, find("guard").await?);
    let agent = agent.ok_or_else(|| {
        Error::other(format!(
            "{} disappeared right after `yolo up`; run `yolo up` again",
            o.container_name
        ))
    })?;
    let state = WorkspaceState::load(&spec.devcontainer_id)?;
    Ok(Up {
        container: Container::from_summary(&agent, state.exec.as_ref()),
        session: o.session.clone(),
        action: o.action.clone(),
        stale: o.stale,
        network: Network::of(&o.network, guard.as_ref())
            .ask_allowlist(engine, guard.as_ref())
            .await,
    })
}

fn print_outcome(o: &Outcome) {
    let state = console::style(&o.action).green();
    eprintln!(
        "{} {} {state} ({}), workspace at {}; `yolo exec`, `yolo shell` or `yolo run <agent>` to use it",
        console::style("yolo:").bold(),
        o.container_name,
        o.image,
        o.workspace_folder
    );
    if o.stale {
        eprintln!(
            "{} the dev container config changed since this container was created; run `yolo up --rebuild` to recreate it",
            console::style("warning:").yellow().bold()
        );
    }
}

/// Bring the project's container up; shared by `up` and `run` (which adds its agent, whose
/// domains join the allowlist).
pub async fn up(engine: &Engine, project: &Project, agents: &[Agent]) -> Result<Outcome> {
    let spec = &project.spec;
    let settings = &project.settings;
    let mode = settings.network;
    let mut state = WorkspaceState::load(&spec.devcontainer_id)?;
    approval::check(project, &mut state)?;
    state.save(&spec.devcontainer_id)?;
    // Checked before any Docker work, so a bad pattern changes nothing.
    let allow = network::allowlist(project, &with_default_agent(project, agents))?;

    let mut agent = engine
        .find_container(&spec.workspace, &spec.config_file, "agent")
        .await?;
    let mut guard = engine
        .find_container(&spec.workspace, &spec.config_file, "guard")
        .await?;
    let mut stale = agent
        .as_ref()
        .is_some_and(|c| label(c, labels::CONFIG_HASH) != Some(spec.config_hash.as_str()));
    let mode_changed = agent
        .as_ref()
        .is_some_and(|c| label(c, labels::NETWORK) != Some(mode_name(mode)));
    if settings.rebuild || mode_changed {
        stale = false;
        for c in [agent.take(), guard.take()].into_iter().flatten() {
            engine.remove(&id_of(&c)).await?;
        }
    }
    let needs_guard = mode != NetworkMode::None;
    let mut agent_running = agent.as_ref().is_some_and(is_running);
    let guard_running = guard.as_ref().is_some_and(is_running);
    if agent_running && needs_guard && !guard_running {
        eprintln!(
            "{} the firewall guard of {} is not running, so its agent container has had no network (fail closed); restarting both",
            console::style("warning:").yellow().bold(),
            spec.container_name
        );
        engine
            .stop(&agent.as_ref().map(id_of).unwrap_or_default())
            .await?;
        agent_running = false;
    }

    let (container_id, image, action, writer) = if agent_running && state.session.is_some() {
        let writer = session::current(&state)?.ok_or_else(|| Error::other("no open session"))?;
        if let (true, Some(g)) = (needs_guard, &guard) {
            if state.allowlist.as_ref() != Some(&allow) {
                sync_allowlist(
                    engine,
                    &id_of(g),
                    state.allowlist.as_deref().unwrap_or_default(),
                    &allow,
                )
                .await?;
                state.allowlist = Some(allow.clone());
            }
        }
        let a = agent
            .as_ref()
            .map(|c| (id_of(c), c.image.clone().unwrap_or_default()));
        let (id, image) = a.unwrap_or_default();
        (id, image, "running", writer)
    } else {
        start_fresh(engine, project, &mut state, Found { agent, guard }, &allow).await?
    };

    let outcome = Outcome {
        container_id: container_id.clone(),
        container_name: spec.container_name.clone(),
        image,
        workspace: spec.workspace.display().to_string(),
        workspace_folder: spec.workspace_folder.clone(),
        remote_user: project.remote_user(),
        session: writer.session().to_string(),
        action: action.to_string(),
        stale,
        network: mode_name(mode).to_string(),
    };
    let result = lifecycle(engine, project, &mut state, &container_id, &writer).await;
    state.save(&spec.devcontainer_id)?;
    result?;
    Ok(outcome)
}

/// yolo's containers for the project, as found.
struct Found {
    agent: Option<ContainerSummary>,
    guard: Option<ContainerSummary>,
}

/// Open a new session and (re)start everything in order: the agent's image, then the guard with
/// this session's config (verified), then the agent container joined to it.
async fn start_fresh(
    engine: &Engine,
    project: &Project,
    state: &mut WorkspaceState,
    found: Found,
    allow: &[String],
) -> Result<(String, String, &'static str, Writer)> {
    let spec = &project.spec;
    let rebuild = project.settings.rebuild;
    let mode = project.settings.network;
    // About to run: the only moment to ask (nothing is opened or built yet if the answer is no).
    approval::confirm_host_command(project)?;
    let needs_guard = mode != NetworkMode::None;
    let Found {
        mut agent,
        mut guard,
    } = found;
    let image_name = agent
        .as_ref()
        .and_then(|c| c.image.clone())
        .unwrap_or_else(|| image_label(&spec.image));
    let writer = session::open(
        project,
        state,
        &image_name,
        mode_name(mode),
        allow,
        "closed by a new start",
    )?;
    state.save(&spec.devcontainer_id)?;
    run_initialize(project, &writer).await?;
    if let Some(a) = agent.as_ref().filter(|a| is_running(a)) {
        // Running without an open session (yolo's state was lost): it must not stay up in
        // the old namespace while its guard restarts.
        engine.stop(&id_of(a)).await?;
    }
    // The image first: a failing build or pull leaves nothing half made behind.
    let built = match agent {
        None => Some(engine.ensure_image(&spec.image, rebuild).await?),
        Some(_) => None,
    };
    let guard_id = if needs_guard {
        let config = network::guard_config(project, writer.session(), allow.to_vec());
        let id = match guard {
            Some(g) => {
                if is_running(&g) {
                    // Restarted so it reads the new session's config.
                    engine.stop(&id_of(&g)).await?;
                }
                id_of(&g)
            }
            None => {
                // Docker joins namespaces by container id: a new guard needs a new agent.
                if let Some(a) = agent.take() {
                    engine.remove(&id_of(&a)).await?;
                }
                network::create_guard(engine, project).await?
            }
        };
        network::start_guard(engine, &id, &config).await?;
        state.allowlist = Some(allow.to_vec());
        Some(id)
    } else {
        if let Some(g) = guard.take() {
            engine.remove(&id_of(&g)).await?;
        }
        None
    };
    match agent {
        Some(c) => {
            let id = id_of(&c);
            engine.start(&id).await?;
            Ok((id, image_name, "started", writer))
        }
        None => {
            state.created_hooks_done_for = None;
            state.post_start_done_for = None;
            state.save(&spec.devcontainer_id)?;
            let image = match built {
                Some(image) => image,
                None => engine.ensure_image(&spec.image, rebuild).await?,
            };
            create_volumes(engine, project).await?;
            let network = Network {
                mode: Some(guard_id.map_or("none".to_string(), |g| format!("container:{g}"))),
                publish: false,
                label: mode_name(mode).to_string(),
            };
            let id = engine.create_container(spec, &image, &network).await?;
            engine.start(&id).await?;
            Ok((id, image, "created", writer))
        }
    }
}

/// Bring a running guard from the allowlist it was given to the one configured now. Patterns
/// the user added live with `yolo allow` were never in `before`, so they stay.
async fn sync_allowlist(
    engine: &Engine,
    guard: &str,
    before: &[String],
    now: &[String],
) -> Result<()> {
    let added: Vec<String> = now
        .iter()
        .filter(|p| !before.contains(p))
        .cloned()
        .collect();
    let removed: Vec<String> = before
        .iter()
        .filter(|p| !now.contains(p))
        .cloned()
        .collect();
    if !added.is_empty() {
        network::control(engine, guard, &Request::Allow { patterns: added }).await?;
    }
    if !removed.is_empty() {
        network::control(engine, guard, &Request::Deny { patterns: removed }).await?;
    }
    Ok(())
}

/// The agents whose domains the allowlist includes: those named, else the repository's default.
fn with_default_agent(project: &Project, agents: &[Agent]) -> Vec<Agent> {
    if !agents.is_empty() {
        return agents.to_vec();
    }
    project
        .spec
        .default_agent
        .as_deref()
        .and_then(|name| crate::agents::resolve(name, &project.user).ok())
        .into_iter()
        .collect()
}

pub fn mode_name(mode: NetworkMode) -> &'static str {
    match mode {
        NetworkMode::Firewall => "firewall",
        NetworkMode::Open => "open",
        NetworkMode::None => "none",
    }
}

fn label<'a>(c: &'a ContainerSummary, key: &str) -> Option<&'a str> {
    c.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

fn image_label(source: &ImageSource) -> String {
    match source {
        ImageSource::Image(name) => name.clone(),
        ImageSource::Build(b) => b.tag.clone(),
    }
}

async fn run_initialize(project: &Project, writer: &Writer) -> Result<()> {
    match &project.spec.initialize_command {
        Some(command) => {
            super::hooks::run_on_host(command, &project.spec.workspace, Some(writer)).await
        }
        None => Ok(()),
    }
}

/// Named volumes are created up front so they carry yolo's labels (and `YOLO_LABELS`).
async fn create_volumes(engine: &Engine, project: &Project) -> Result<()> {
    let mut labels = BTreeMap::from([
        (
            crate::engine::labels::MANAGED.to_string(),
            "true".to_string(),
        ),
        (
            crate::engine::labels::ID.to_string(),
            project.spec.devcontainer_id.clone(),
        ),
    ]);
    labels.extend(crate::engine::labels::extra());
    for mount in project
        .spec
        .mounts
        .iter()
        .filter(|m| m.kind == MountKind::Volume)
    {
        engine.create_volume(&mount.source, &labels).await?;
    }
    Ok(())
}

/// Hooks and setup that depend on where this container is in its life.
async fn lifecycle(
    engine: &Engine,
    project: &Project,
    state: &mut WorkspaceState,
    container_id: &str,
    writer: &Writer,
) -> Result<()> {
    let spec = &project.spec;
    let info = engine.inspect(container_id).await?;
    if !info.state.as_ref().and_then(|s| s.running).unwrap_or(false) {
        return Err(stopped(engine, project, container_id).await);
    }
    let container_env = env_map(
        info.config
            .as_ref()
            .and_then(|c| c.env.clone())
            .unwrap_or_default(),
    );
    let user = match project.remote_user() {
        Some(u) => Some(u),
        None => info
            .config
            .as_ref()
            .and_then(|c| c.user.clone())
            .filter(|u| !u.is_empty()),
    };
    let env = remote_env(&spec.remote_env, &container_env);
    state.exec = Some(ExecSettings {
        container: container_id.to_string(),
        user: user.clone(),
        cwd: spec.workspace_folder.clone(),
        remote_env: spec.remote_env.clone(),
    });
    let started_at = info
        .state
        .as_ref()
        .and_then(|s| s.started_at.clone())
        .unwrap_or_default();
    let root = Runner {
        engine,
        container: container_id.to_string(),
        user: Some("root".into()),
        cwd: "/".into(),
        env: vec![],
        writer: Some(writer),
    };
    let runner = Runner {
        engine,
        container: container_id.to_string(),
        user,
        cwd: spec.workspace_folder.clone(),
        env,
        writer: Some(writer),
    };

    if state.created_hooks_done_for.as_deref() != Some(container_id) {
        if let Err(e) = setup(&root, project, runner.user.as_deref()).await {
            // The usual reason: the container's command exited at once.
            let running = engine
                .inspect(container_id)
                .await?
                .state
                .and_then(|s| s.running);
            return Err(if running == Some(false) {
                stopped(engine, project, container_id).await
            } else {
                e
            });
        }
        for (name, hook) in [
            ("onCreateCommand", &spec.hooks.on_create),
            ("updateContentCommand", &spec.hooks.update_content),
            ("postCreateCommand", &spec.hooks.post_create),
        ] {
            if let Some(hook) = hook {
                runner.hook(name, hook).await?;
            }
        }
        state.created_hooks_done_for = Some(container_id.to_string());
        state.save(&spec.devcontainer_id)?;
    }
    if state.post_start_done_for.as_deref() != Some(started_at.as_str()) {
        if let Some(hook) = &spec.hooks.post_start {
            runner.hook("postStartCommand", hook).await?;
        }
        state.post_start_done_for = Some(started_at);
        state.save(&spec.devcontainer_id)?;
    }
    if let Some(hook) = &spec.hooks.post_attach {
        runner.hook("postAttachCommand", hook).await?;
    }
    Ok(())
}

/// The error for a container that stopped right after it started.
async fn stopped(engine: &Engine, project: &Project, id: &str) -> Error {
    let code = engine
        .inspect(id)
        .await
        .ok()
        .and_then(|i| i.state)
        .and_then(|s| s.exit_code)
        .unwrap_or_default();
    let logs = engine.logs_tail(id, 10).await;
    Error::CommandFailed(format!(
        "the container {} stopped right after it started (exit code {code}); {}\n  its last output:\n    {}",
        project.spec.container_name,
        if project.spec.override_command {
            "check the image's entrypoint"
        } else {
            "with \"overrideCommand\": false the image's own command must keep running (or drop that setting)"
        },
        logs.join("\n    ")
    ))
}

/// One-time root setup in a new container: match the remote user's uid/gid to the host user's
/// (so files in the workspace stay the host user's) and hand the agent state volumes to the
/// remote user.
async fn setup(root: &Runner<'_>, project: &Project, user: Option<&str>) -> Result<()> {
    let user = user.unwrap_or("root");
    let (uid, gid) = project
        .spec
        .update_uid
        .map_or((String::new(), String::new()), |(u, g)| {
            (u.to_string(), g.to_string())
        });
    let argv = vec![
        "/bin/sh".into(),
        "-c".into(),
        SETUP_SCRIPT.into(),
        "yolo-setup".into(),
        user.to_string(),
        uid,
        gid,
        AGENT_STATE_ROOT.into(),
    ];
    let request = root.request(argv, false, false);
    let result = root
        .run(
            "setup",
            "yolo-setup",
            &request,
            Output::Prefixed("setup".into()),
        )
        .await?;
    if result.exit_code != 0 {
        return Err(Error::Hook {
            name: "yolo setup (uid update)".into(),
            code: result.exit_code,
        });
    }
    Ok(())
}

/// `$1` user, `$2` host uid, `$3` host gid (empty: keep), `$4` agent state root.
const SETUP_SCRIPT: &str = r#"
set -u
u="$1"; uid="$2"; gid="$3"; state="$4"
if [ "$u" != root ] && [ -n "$uid" ] && id "$u" >/dev/null 2>&1; then
  cur_uid=$(id -u "$u"); cur_gid=$(id -g "$u")
  if [ "$cur_uid" != "$uid" ] || [ "$cur_gid" != "$gid" ]; then
    if ! command -v usermod >/dev/null 2>&1; then
      echo "usermod not found: cannot match $u's uid to the host's ($uid)"
    elif [ "$cur_uid" != "$uid" ] && getent passwd "$uid" >/dev/null; then
      echo "uid $uid is taken in the image: keeping $u at $cur_uid"
    else
      grp=$(id -gn "$u")
      if [ "$cur_gid" != "$gid" ] && ! getent group "$gid" >/dev/null; then groupmod -g "$gid" "$grp"; fi
      usermod -u "$uid" -g "$gid" "$u" >/dev/null
    fi
  fi
fi
if [ -d "$state" ] && id "$u" >/dev/null 2>&1; then
  chown "$(id -u "$u"):$(id -g "$u")" "$state"/* 2>/dev/null || true
fi
exit 0
"#;

pub fn env_map(list: Vec<String>) -> BTreeMap<String, String> {
    list.into_iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// remoteEnv as `K=V` for exec, with `${containerEnv:..}` resolved against the container.
pub fn remote_env(
    remote: &BTreeMap<String, Option<String>>,
    container: &BTreeMap<String, String>,
) -> Vec<String> {
    remote
        .iter()
        .filter_map(|(k, v)| {
            v.as_ref()
                .map(|v| format!("{k}={}", substitute::container_env(v, container)))
        })
        .collect()
}
