//! The agent container: made from the image with the guard's network namespace, its limits
//! fitted to the host, the watched files' baseline taken before it runs; and, for `yolo run`,
//! the agent's program checked in it (`prepare`).

use super::act::Act;
use super::plan::AgentStep;
use super::volumes;
use crate::agents;
use crate::engine::{Engine, ExecRequest, NetworkAttach, Output};
use crate::error::{Error, Result};
use crate::project::AGENT_STATE_ROOT;
use crate::run_spec::{MountKind, RunSpec};
use crate::session::state::WorkspaceState;
use crate::watched;

impl Act<'_> {
    /// The agent container, made (not started): a new one, or the stopped one kept.
    pub(super) async fn make_agent(
        &self,
        step: &AgentStep,
        image: &str,
        network: &NetworkAttach,
        state: &mut WorkspaceState,
    ) -> Result<(String, bool)> {
        let (engine, spec) = (self.engine, &self.project.spec);
        if let AgentStep::Start { id, .. } = step {
            return Ok((id.clone(), false));
        }
        state.created_hooks_done_for = None;
        state.post_start_done_for = None;
        state.save(&spec.devcontainer_id)?;
        // A remote engine: the repository copied into its volume, if new (docs/remote.md).
        crate::remote_copy::seed(engine, self.project, image).await?;
        volumes::create(self.engine, &self.project.spec).await?;
        let mut spec = self.fit_to_host().await?;
        if spec.uses_copy() {
            spec.protected = engine.protect_copy(&spec, image).await?;
        }
        engine.create_agent(&spec, image, network, self.mode).await
    }

    /// The spec with its limits fitted to the engine's machine: CPUs leave the host a core
    /// (unless the user asked for them), and the disk limit only where the driver has one.
    pub(super) async fn fit_to_host(&self) -> Result<RunSpec> {
        let mut spec = self.project.spec.clone();
        let host = self.engine.host_facts().await?;
        let (cpus, why) = crate::policy::fit_cpus(spec.limits.cpus, spec.cpus_chosen_by, host.cpus);
        if let Some(why) = why {
            eprintln!("{} {why}", console::style("yolo:").bold());
        }
        spec.limits.cpus = cpus;
        if !host.can_limit_disk() {
            spec.disk_bytes = None;
        }
        Ok(spec)
    }

    /// The baseline of the files the host runs, before anything of this session can write them.
    pub(super) fn watch(&self) -> Result<()> {
        let spec = &self.project.spec;
        let mount = &spec.workspace_mount;
        if mount.kind != MountKind::Bind {
            return Ok(());
        }
        watched::start(
            &spec.devcontainer_id,
            std::path::Path::new(&mount.source),
            &self.project.settings.watch,
        )
    }

    /// Start the agent container, or make it (fresh hook state, volumes) joined to `network`.
    pub(super) async fn agent(
        &self,
        step: &AgentStep,
        image: &str,
        network: &NetworkAttach,
        state: &mut WorkspaceState,
    ) -> Result<String> {
        let (id, _) = self.make_agent(step, image, network, state).await?;
        self.engine.start(&id).await?;
        Ok(id)
    }
}

/// Check the agent's program is in the image, and link its state folder to its volume.
pub(crate) async fn prepare(
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
        127 => Err(Error::Dependency {
            on: crate::error::Dependency::AgentProgram,
            cause: format!(
                "{program:?} ({}) is not installed in the container image; {}",
                agent.name, agent.install_hint
            )
            .into(),
        }),
        code => Err(Error::StepFailed {
            step: crate::error::Step::AgentSetup,
            cause: format!(
                "preparing {} failed (exit {code}): {}",
                agent.name,
                // The container's words, in yolo's line: shown, newlines too.
                crate::visible::escape_controls(String::from_utf8_lossy(&result.captured).trim())
            )
            .into(),
        }),
    }
}
