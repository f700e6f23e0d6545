//! The devcontainer lifecycle: `initializeCommand` on the host, then in the container the root
//! setup and `onCreateCommand`, `updateContentCommand`, `postCreateCommand` once per container,
//! `postStartCommand` once per start, `postAttachCommand` on every `up`. Every command's output
//! streams with its hook's name, and every command goes to the audit log (`Runner`, which
//! `exec`, `shell` and `run` use too).

use crate::audit::{EventKind, Writer};
use crate::devcontainer::model::LifecycleCommand;
use crate::devcontainer::substitute;
use crate::engine::{Engine, ExecRequest, ExecResult, Output};
use crate::error::{Cause, Error, Result, Step};
use crate::project::{Project, AGENT_STATE_ROOT};
use crate::run_spec::{self, Hooks};
use crate::session::state::{ExecSettings, WorkspaceState};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// yolo's root setup in a new container (uid match, state volume ownership); `$1` user, `$2`
/// host uid, `$3` host gid (empty: keep), `$4` agent state root.
const SETUP_SCRIPT: &str = include_str!("../../../../templates/agent/setup.sh");

/// The variable that hands a hook's sudo broker its records' mark (`Runner::brokered`).
const SUDO_MARK_VAR: &str = "YOLO_SUDO_MARK";

/// How long a container whose setup failed may take to be seen stopped.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// A lifecycle hook that runs in the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hook {
    OnCreate,
    UpdateContent,
    PostCreate,
    PostStart,
    PostAttach,
}

impl Hook {
    /// The hooks of a new container, in order.
    const ON_CREATE: [Hook; 3] = [Hook::OnCreate, Hook::UpdateContent, Hook::PostCreate];

    /// The property name in devcontainer.json.
    fn name(self) -> &'static str {
        match self {
            Hook::OnCreate => "onCreateCommand",
            Hook::UpdateContent => "updateContentCommand",
            Hook::PostCreate => "postCreateCommand",
            Hook::PostStart => "postStartCommand",
            Hook::PostAttach => "postAttachCommand",
        }
    }

    /// Its commands from every metadata entry, devcontainer.json's last.
    fn commands(self, hooks: &Hooks) -> &[run_spec::Hook] {
        match self {
            Hook::OnCreate => &hooks.on_create,
            Hook::UpdateContent => &hooks.update_content,
            Hook::PostCreate => &hooks.post_create,
            Hook::PostStart => &hooks.post_start,
            Hook::PostAttach => &hooks.post_attach,
        }
    }
}

/// Run `initializeCommand` on the host, once the user's trust or answer is in hand.
pub(crate) async fn initialize(
    project: &Project,
    writer: &Writer,
    _approved: crate::session::approval::HostCommandApproval,
) -> Result<()> {
    match &project.spec.initialize_command {
        Some(command) => run_on_host(command, &project.spec.workspace, Some(writer)).await,
        None => Ok(()),
    }
}

/// The hooks and setup due at this point of the container's life, and the exec settings
/// (container, user, folder, `remoteEnv`) that `exec`, `shell` and `run` use afterwards.
pub(crate) async fn in_container(
    engine: &Engine,
    project: &Project,
    state: &mut WorkspaceState,
    container_id: &str,
    writer: &Writer,
) -> Result<()> {
    let spec = &project.spec;
    let info = engine.inspect(container_id).await?;
    if !info.running {
        return Err(stopped(engine, project, container_id).await);
    }
    let user = project.remote_user().or(info.user);
    let started_now = state.post_start_done_for.as_deref() != Some(info.started_at.as_str());
    // The shell environment read when this container started, kept until it starts again (or
    // the config probes another way).
    let probed = state
        .exec
        .take()
        .filter(|e| e.container == container_id && !started_now && e.probe == spec.user_env_probe)
        .and_then(|e| e.probed_env);
    state.exec = Some(ExecSettings {
        container: container_id.to_string(),
        user: user.clone(),
        cwd: spec.workspace_folder.clone(),
        remote_env: spec.remote_env.clone(),
        probed_env: probed.clone(),
        probe: spec.user_env_probe,
    });
    let root = Runner {
        engine,
        container: container_id.to_string(),
        user: Some("root".into()),
        cwd: "/".into(),
        env: vec![],
        writer: Some(writer),
        supervised: info.supervised,
    };
    let mut runner = Runner {
        engine,
        container: container_id.to_string(),
        user,
        cwd: spec.workspace_folder.clone(),
        env: Vec::new(),
        writer: Some(writer),
        supervised: info.supervised,
    };

    let new_container = state.created_hooks_done_for.as_deref() != Some(container_id);
    let mut setup_ran = false;
    if new_container {
        let ran = setup(&root, project, runner.user.as_deref()).await;
        setup_ran = matches!(ran, Ok(true));
        if let Err(e) = ran {
            // The usual reason: the container's command exited at once (and took the setup
            // command with it, a moment before Docker records the container as stopped).
            return Err(if engine.stops_within(container_id, STOP_GRACE).await {
                stopped(engine, project, container_id).await
            } else {
                e
            });
        }
    }
    // After the setup (the user's uid and home are final), before any hook. Only when a
    // command runs now, or the container's own command could have stopped it at once (the
    // probe then says so): else the first `exec` probes (`probe_for_exec`), and a cold `up`
    // is one exec shorter.
    let runs_now = (new_container
        && !(spec.hooks.on_create.is_empty()
            && spec.hooks.update_content.is_empty()
            && spec.hooks.post_create.is_empty()))
        || (started_now && !spec.hooks.post_start.is_empty())
        || !spec.hooks.post_attach.is_empty()
        || !spec.override_command;
    let probed = match probed {
        Some(env) => env,
        None if !runs_now => BTreeMap::new(),
        None => {
            let (env, probed_ok) = probe_env(&runner, spec.user_env_probe, &info.env).await;
            // Without a setup, the probe was the first command in the new container: one
            // that stopped at once says so here, as the setup's failure would have.
            if new_container
                && !setup_ran
                && !probed_ok
                && engine.stops_within(container_id, STOP_GRACE).await
            {
                return Err(stopped(engine, project, container_id).await);
            }
            if let Some(exec) = state.exec.as_mut() {
                exec.probed_env = Some(env.clone());
            }
            env
        }
    };
    runner.env = command_env(&probed, &spec.remote_env, &info.env);
    if new_container {
        for hook in Hook::ON_CREATE {
            runner.hook(hook, &spec.hooks).await?;
        }
        state.created_hooks_done_for = Some(container_id.to_string());
        state.save(&spec.devcontainer_id)?;
    }
    if started_now {
        runner.hook(Hook::PostStart, &spec.hooks).await?;
        state.post_start_done_for = Some(info.started_at);
        state.save(&spec.devcontainer_id)?;
    }
    runner.hook(Hook::PostAttach, &spec.hooks).await
}

/// The error for a container that stopped right after it started.
async fn stopped(engine: &Engine, project: &Project, id: &str) -> Error {
    let code = engine
        .inspect(id)
        .await
        .map(|i| i.exit_code)
        .unwrap_or_default();
    let logs = engine.logs_tail(id, 10).await;
    Error::step(Step::ContainerExited, format!(
        "the container {} stopped right after it started (exit code {code}); {}",
        project.spec.container_name,
        if project.spec.override_command {
            "check the image's entrypoint"
        } else {
            "with \"overrideCommand\": false the image's own command must keep running (or drop that setting)"
        },
    ))
    .with_lines("its last output", logs)
}

/// One-time root setup in a new container: match the remote user's uid/gid to the host user's
/// (so files in the workspace stay the host user's) and hand the agent state volumes to the
/// remote user. A host user of uid 0 is not matched, as the reference CLI does (root's uid is
/// taken in every image): see `note_host_root`.
async fn setup(root: &Runner<'_>, project: &Project, user: Option<&str>) -> Result<bool> {
    let user = user.filter(|u| !u.is_empty()).unwrap_or("root");
    let update = project.spec.update_uid.filter(|(uid, _)| *uid != 0);
    if project.spec.update_uid.is_some() && update.is_none() {
        note_host_root(&project.spec.workspace, user);
    }
    // Root's uid is never changed and the state volumes are root's already: nothing to run
    // (one exec less on every new container).
    if matches!(user, "root" | "0") {
        return Ok(false);
    }
    let (uid, gid) = update.map_or((String::new(), String::new()), |(u, g)| {
        (u.to_string(), g.to_string())
    });
    let mut argv = vec![
        "/bin/sh".into(),
        "-c".into(),
        SETUP_SCRIPT.into(),
        "yolo-setup".into(),
        user.to_string(),
        uid,
        gid,
        AGENT_STATE_ROOT.into(),
    ];
    // A bound host folder shows who the host user is in here; a volume (a remote engine's
    // copy, a `type=volume` workspaceMount) does not: it is the volume's owner.
    // The bind's mount point, not `workspaceFolder`, which the repository may point elsewhere.
    if project.spec.workspace_mount.kind == crate::run_spec::MountKind::Bind {
        argv.push(project.spec.workspace_mount.target.clone());
    }
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
    Ok(true)
}

/// yolo runs as root (say, with sudo) on a repository someone else owns: nothing the agent
/// writes there will be that owner's. Said once, when the container is made.
fn note_host_root(workspace: &std::path::Path, user: &str) {
    use std::os::unix::fs::MetadataExt;
    let Ok(owner) = std::fs::metadata(workspace).map(|m| m.uid()) else {
        return;
    };
    if owner == 0 {
        return;
    }
    let who = if user == "root" {
        "root".to_string()
    } else {
        format!("{user}, whose uid is left as the image has it")
    };
    eprintln!(
        "{} yolo runs as root, so the container user's uid is not matched to yours (as with the reference CLI): files the agent writes in the repository (owned by uid {owner}) will belong to {}; run yolo as the repository's owner, not with sudo, and set \"remoteUser\" to a non-root user of the image",
        console::style("note:").yellow(),
        crate::visible::escape_controls(&who)
    );
}

/// The environment a command in the container gets on top of the container's: the probed
/// shell environment, then `remoteEnv` (which wins; `null` drops a probed variable).
pub(crate) fn command_env(
    probed: &BTreeMap<String, String>,
    remote: &BTreeMap<String, Option<String>>,
    container: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut env: BTreeMap<String, String> = probed
        .iter()
        .filter(|(k, v)| container.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in remote {
        match v {
            Some(v) => env.insert(k.clone(), substitute::container_env(v, container)),
            None => env.remove(k),
        };
    }
    env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// The probed environment for a command of `exec`, `shell` or `run`: the one kept since the
/// container started, else probed now (`runner`, as the remote user) and kept in `state`.
pub(crate) async fn probe_for_exec(
    runner: &Runner<'_>,
    state: &mut WorkspaceState,
    container: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let Some(exec) = state.exec.as_mut() else {
        return BTreeMap::new();
    };
    if let Some(env) = &exec.probed_env {
        return env.clone();
    }
    let (env, _) = probe_env(runner, exec.probe, container).await;
    exec.probed_env = Some(env.clone());
    env
}

/// How long the probe may take: a shell startup file waiting for input must not hang `up`.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The remote user's shell environment, as VS Code and the reference CLI read it
/// (`userEnvProbe`): their login shell (`/bin/sh` when it has none) run with `-lic`/`-lc`/`-ic`
/// printing `/proc/self/environ` between two marks. Empty with `none`, and (with a warning)
/// when the shell fails or takes longer than 10 s: commands then get the container's
/// environment, as before. `PWD` and yolo's own variables are left out; the container's `PATH`
/// entries the shell dropped are put back (`merge_paths`).
async fn probe_env(
    runner: &Runner<'_>,
    probe: run_spec::UserEnvProbe,
    container: &BTreeMap<String, String>,
) -> (BTreeMap<String, String>, bool) {
    let Some(flag) = probe.flag() else {
        return (BTreeMap::new(), true);
    };
    let mark = format!("yolo-probe-{}", uuid::Uuid::new_v4().simple());
    let inner = format!("printf %s {mark}; cat /proc/self/environ; printf %s {mark}");
    let script = format!(
        r#"s=$(getent passwd "$(id -un)" 2>/dev/null | cut -d: -f7); [ -x "$s" ] || s=/bin/sh; exec "$s" {flag} '{inner}' </dev/null"#
    );
    let request = ExecRequest {
        env: Vec::new(),
        ..runner.request(vec!["/bin/sh".into(), "-c".into(), script], false, false)
    };
    let run = runner.run("probe", "userEnvProbe", &request, Output::Capture);
    let warn = |why: &str| {
        eprintln!(
            "{} userEnvProbe: {why}; commands get the container's environment",
            console::style("warning:").yellow().bold()
        );
        (BTreeMap::new(), false)
    };
    let result = match tokio::time::timeout(PROBE_TIMEOUT, run).await {
        Err(_) => {
            return warn("the shell took longer than 10 s (does a startup file wait for input?)")
        }
        Ok(Err(e)) => return warn(&e.to_string()),
        Ok(Ok(result)) => result,
    };
    let root = matches!(runner.user.as_deref(), None | Some("root" | "0"));
    match parse_probe(&result.captured, &mark, container, root) {
        Some(env) => (env, true),
        None => warn(&format!(
            "the shell exited with {} and printed no environment",
            result.exit_code
        )),
    }
}

/// The variables between the two marks of the probe's output.
fn parse_probe(
    output: &[u8],
    mark: &str,
    container: &BTreeMap<String, String>,
    root: bool,
) -> Option<BTreeMap<String, String>> {
    let text = String::from_utf8_lossy(output);
    let start = text.find(mark)? + mark.len();
    let end = start + text[start..].find(mark)?;
    let mut env: BTreeMap<String, String> = text[start..end]
        .split('\0')
        .filter_map(|item| item.split_once('='))
        .filter(|(k, _)| !k.is_empty() && *k != "PWD" && !k.starts_with("YOLO_"))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if let (Some(shell), Some(own)) = (env.get("PATH"), container.get("PATH")) {
        let merged = merge_paths(shell, own, root);
        env.insert("PATH".into(), merged);
    }
    Some(env)
}

/// The shell's `PATH` with the container's entries it lacks put back where they were relative
/// to the ones it has (each after the last one found before it), as the reference CLI does: a
/// login shell's `/etc/profile` resets `PATH`, and the image's own entries (a Feature's
/// `/opt/x/bin:${PATH}`) must keep their place in front. `sbin` folders only for root.
fn merge_paths(shell: &str, container: &str, root: bool) -> String {
    let mut path: Vec<&str> = shell.split(':').collect();
    let mut at = 0;
    for dir in container.split(':') {
        match path.iter().position(|d| *d == dir) {
            Some(i) => at = i + 1,
            None if root || !is_sbin(dir) => {
                path.insert(at, dir);
                at += 1;
            }
            None => {}
        }
    }
    path.join(":")
}

/// Whether a command line has `sudo` as a word (`sudo x`, `sh -c "a && sudo b"`).
fn mentions_sudo(argv: &[String]) -> bool {
    argv.iter().any(|arg| {
        arg.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_' || c == '.'))
            .any(|word| word == "sudo")
    })
}

fn is_sbin(dir: &str) -> bool {
    dir.ends_with("/sbin") || dir.contains("/sbin/")
}

/// Where and as whom commands run.
pub(crate) struct Runner<'a> {
    pub(crate) engine: &'a Engine,
    pub(crate) container: String,
    pub(crate) user: Option<String>,
    pub(crate) cwd: String,
    pub(crate) env: Vec<String>,
    pub(crate) writer: Option<&'a Writer>,
    /// Commands start through the exec audit's shim (the container's label).
    pub(crate) supervised: bool,
}

impl Runner<'_> {
    /// Run a lifecycle hook in the container: each metadata entry's command in order (the
    /// image's, the Features', devcontainer.json's last), the object form's commands in
    /// parallel. A failing command stops with its name and exit code.
    async fn hook(&self, hook: Hook, hooks: &Hooks) -> Result<()> {
        for entry in hook.commands(hooks) {
            let commands = entry.commands(hook.name());
            let runs = commands
                .iter()
                .map(|(name, argv)| self.run_hook_command(name, argv));
            let results = futures_util::future::join_all(runs).await;
            // A broker that did not end its hook's root processes itself (killed, perhaps by
            // one of them): once the parallel commands are all over, yolo does.
            let unswept = results.iter().filter_map(|(_, since)| *since).min();
            if let Some(since) = unswept {
                self.sweep(since).await?;
            }
            for (result, _) in results {
                result?;
            }
        }
        Ok(())
    }

    /// One hook command; with it, when its sudo broker started but did not report that it
    /// ended the root processes the command left, the broker's start (for `sweep`).
    async fn run_hook_command(&self, name: &str, argv: &[String]) -> (Result<()>, Option<u64>) {
        let mut unswept = None;
        let result = self.hook_command(name, argv, &mut unswept).await;
        (result, unswept)
    }

    async fn hook_command(
        &self,
        name: &str,
        argv: &[String],
        unswept: &mut Option<u64>,
    ) -> Result<()> {
        let request = self.request(argv.to_vec(), false, false);
        let result = match self.brokered(&request) {
            Some((brokered, mark)) => {
                let output = Output::Recorded {
                    name: name.to_string(),
                    mark,
                };
                let result = self
                    .run_as("hook", name, &brokered, &request, output)
                    .await?;
                *unswept = self.record_sudo(name, &result.records)?;
                result
            }
            None => {
                self.run("hook", name, &request, Output::Prefixed(name.to_string()))
                    .await?
            }
        };
        if result.exit_code != 0 {
            if mentions_sudo(argv) && !self.supervised {
                eprintln!(
                    "{} {name} runs sudo, and yolo starts every container with no-new-privileges, which no grant lifts: sudo and other setuid programs cannot become root in it, and yolo's own sudo for hooks needs the exec audit (`[audit] exec`), which is off; run that step as root instead: in the Dockerfile (RUN), or with \"remoteUser\": \"root\" for the whole config",
                    console::style("note:").yellow()
                );
            }
            return Err(Error::Hook {
                name: name.to_string(),
                code: result.exit_code,
            });
        }
        Ok(())
    }

    /// A hook of a non-root user, with `sudo` brokered: the same command run as root through
    /// `yolo-guard sudo-hook`, which runs it as the user with its own `sudo` first on the
    /// `PATH` and serves that `sudo` (root commands, for the hook's processes only, while it
    /// runs: see `yolo_guard::exec::sudo`). The broker is the exec audit's shim program, so
    /// only in a supervised container (elsewhere the image's sudo meets no-new-privileges).
    /// Also the mark the broker puts before its records on stderr, passed in its environment
    /// (a root process's, which the hook's user cannot read), so the hook cannot forge one.
    fn brokered(&self, request: &ExecRequest) -> Option<(ExecRequest, String)> {
        let user = request.user.as_deref()?;
        if !self.supervised || matches!(user, "" | "root" | "0") || user.starts_with("0:") {
            return None;
        }
        let mark = format!("\u{1e}yolo-sudo-{} ", uuid::Uuid::new_v4().simple());
        let mut argv = vec![
            yolo_protocol::SHIM_PATH.to_string(),
            "sudo-hook".into(),
            "--user".into(),
            user.to_string(),
            "--".into(),
        ];
        argv.extend(request.argv.iter().cloned());
        let mut env = request.env.clone();
        env.push(format!("{SUDO_MARK_VAR}={mark}"));
        Some((
            ExecRequest {
                argv,
                user: Some("root".into()),
                env,
                ..request.clone()
            },
            mark,
        ))
    }

    /// The broker's records in the audit log: each root command as a `command` event of
    /// source `sudo` named for the hook that asked, each refusal as a notice, root processes
    /// it ended as a notice. The broker's start (its first record) when it did not report that
    /// sweep, its last act.
    fn record_sudo(&self, hook: &str, records: &[String]) -> Result<Option<u64>> {
        let mut started = None;
        let mut swept = false;
        for record in records {
            let Ok(record) = serde_json::from_str::<serde_json::Value>(record) else {
                continue;
            };
            if let Some(ticks) = record["started"].as_u64() {
                started = Some(ticks);
                continue;
            }
            if let Some(ended) = record["swept"].as_u64() {
                // A sweep whose rounds ran out (processes forking faster than it stopped
                // them) counts as none: yolo sweeps again.
                swept = record["complete"].as_bool().unwrap_or(true);
                if ended > 0 {
                    if let Some(writer) = self.writer {
                        writer.write(EventKind::Notice {
                            message: format!("{hook}: sudo ended {ended} root process(es) its commands left running"),
                        })?;
                    }
                }
                continue;
            }
            let Some(writer) = self.writer else {
                continue;
            };
            let text = |key: &str| record[key].as_str().unwrap_or_default().to_string();
            if let Some(why) = record["refused"].as_str() {
                writer.write(EventKind::Notice {
                    message: format!("{hook}: sudo refused to process {}: {why}", record["pid"]),
                })?;
                continue;
            }
            let argv = record["argv"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|v| v.as_str().unwrap_or_default().to_string())
                        .collect()
                })
                .unwrap_or_default();
            writer.write(EventKind::Command {
                source: "sudo".into(),
                name: hook.into(),
                argv,
                user: "root".into(),
                cwd: text("cwd"),
                started: chrono::DateTime::parse_from_rfc3339(&text("started"))
                    .map(|t| t.with_timezone(&chrono::Utc))
                    .unwrap_or_else(|_| chrono::Utc::now()),
                exit_code: record["exit_code"].as_i64(),
                duration_ms: record["duration_ms"].as_u64().unwrap_or(0),
            })?;
        }
        Ok(started.filter(|_| !swept))
    }

    /// End the root processes started in the container since a broker started (`since`, clock
    /// ticks after boot; `yolo-guard sudo-sweep`): what a hook's broker does itself at the
    /// hook's end, done by yolo when a broker could not (it was killed). Root in the container
    /// lasts as long as the hook.
    async fn sweep(&self, since: u64) -> Result<()> {
        let request = ExecRequest {
            argv: vec![
                yolo_protocol::SHIM_PATH.to_string(),
                "sudo-sweep".into(),
                "--since".into(),
                since.to_string(),
            ],
            user: Some("root".into()),
            ..self.request(Vec::new(), false, false)
        };
        let result = self
            .run("yolo", "sudo-sweep", &request, Output::Capture)
            .await?;
        let ended = String::from_utf8_lossy(&result.captured).trim().to_string();
        if result.exit_code != 0 {
            return Err(Error::Hook {
                name: format!("ending the root processes a hook left running ({ended})"),
                code: result.exit_code,
            });
        }
        let message = format!(
            "a hook's sudo broker ended early, so yolo ended the root processes started since the hook began: {ended}"
        );
        eprintln!("{} {message}", console::style("note:").yellow());
        if let Some(writer) = self.writer {
            writer.write(EventKind::Notice { message })?;
        }
        Ok(())
    }

    pub(crate) fn request(&self, argv: Vec<String>, tty: bool, stdin: bool) -> ExecRequest {
        ExecRequest {
            argv,
            user: self.user.clone(),
            cwd: Some(self.cwd.clone()),
            env: self.env.clone(),
            tty,
            stdin,
            supervised: self.supervised,
        }
    }

    /// Run and audit one command.
    pub(crate) async fn run(
        &self,
        source: &str,
        name: &str,
        request: &ExecRequest,
        output: Output,
    ) -> Result<ExecResult> {
        self.run_as(source, name, request, request, output).await
    }

    /// Run `request`, audited as `shown` (a hook as written, not its broker's command line).
    async fn run_as(
        &self,
        source: &str,
        name: &str,
        request: &ExecRequest,
        shown: &ExecRequest,
        output: Output,
    ) -> Result<ExecResult> {
        let started = chrono::Utc::now();
        let clock = Instant::now();
        let result = self.engine.exec(&self.container, request, output).await;
        let exit_code = result.as_ref().ok().map(|r| r.exit_code);
        self.audit(source, name, shown, started, exit_code, clock)?;
        result.map_err(|e| match e {
            // A hook is named by its property, not its command line.
            Error::Interrupted {
                signal,
                stopped: Some(_),
            } if source == "hook" => Error::Interrupted {
                signal,
                stopped: Some(name.to_string()),
            },
            e => e,
        })
    }

    fn audit(
        &self,
        source: &str,
        name: &str,
        request: &ExecRequest,
        started: chrono::DateTime<chrono::Utc>,
        exit_code: Option<i64>,
        clock: Instant,
    ) -> Result<()> {
        let Some(writer) = self.writer else {
            return Ok(());
        };
        writer.write(EventKind::Command {
            source: source.into(),
            name: name.into(),
            argv: request.argv.clone(),
            user: request
                .user
                .clone()
                .unwrap_or_else(|| "(container default)".into()),
            cwd: request.cwd.clone().unwrap_or_default(),
            started,
            exit_code,
            duration_ms: clock.elapsed().as_millis() as u64,
        })
    }
}

/// Run `initializeCommand` on the host (only reached when the user trusts host commands).
async fn run_on_host(
    command: &LifecycleCommand,
    cwd: &std::path::Path,
    writer: Option<&Writer>,
) -> Result<()> {
    for (name, argv) in command.commands("initializeCommand") {
        let Some((program, args)) = argv.split_first() else {
            continue;
        };
        let started = chrono::Utc::now();
        let clock = Instant::now();
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .current_dir(cwd)
            // Its own process group, so an interrupted `up` (which drops this future and rolls
            // back) takes the command's children with it, not only the shell.
            .process_group(0)
            .kill_on_drop(true)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| {
                Error::step(
                    Step::HostCommand,
                    Cause::of(format!("{name}: could not run {program:?} on the host"), e),
                )
            })?;
        let group = ProcessGroup(child.id());
        let out = tokio::spawn(print_lines(name.clone(), child.stdout.take()));
        let err = tokio::spawn(print_lines(name.clone(), child.stderr.take()));
        let status = child.wait().await.map_err(|e| {
            Error::step(
                Step::HostCommand,
                Cause::of(format!("{name}: waiting for {program:?} on the host"), e),
            )
        })?;
        group.finished();
        // What is left to print, but not forever: a process the command left in the background
        // (`daemon &`, `ssh -f`) may hold the pipes open for as long as it runs.
        let drain = async {
            let _ = out.await;
            let _ = err.await;
        };
        let _ = tokio::time::timeout(std::time::Duration::from_millis(500), drain).await;
        let code = status.code().map(i64::from).unwrap_or(-1);
        if let Some(writer) = writer {
            writer.write(EventKind::Command {
                source: "host".into(),
                name: name.clone(),
                argv: argv.clone(),
                user: std::env::var("USER").unwrap_or_default(),
                cwd: cwd.display().to_string(),
                started,
                exit_code: Some(code),
                duration_ms: clock.elapsed().as_millis() as u64,
            })?;
        }
        if code != 0 {
            return Err(Error::Hook { name, code });
        }
    }
    Ok(())
}

/// The process group of a host command while it runs: dropped before `finished` (an
/// interrupted `up`), the whole group is killed.
struct ProcessGroup(Option<u32>);

impl ProcessGroup {
    fn finished(mut self) {
        self.0 = None;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if let Some(pid) = self.0.and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: kill(2) with a negative pid signals that process group; no memory is
            // involved.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
}

/// A host command's output on yolo's stderr, line by line, prefixed and with control characters
/// shown (`visible::prefixed_line`), like the hooks that run in the container.
async fn print_lines(name: String, pipe: Option<impl tokio::io::AsyncRead + Unpin>) {
    let name = name.as_str();
    use std::io::Write;
    use tokio::io::AsyncBufReadExt;
    let Some(pipe) = pipe else {
        return;
    };
    let mut reader = tokio::io::BufReader::new(pipe);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let mut text = crate::visible::prefixed_line(name, &line);
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                let mut err = std::io::stderr().lock();
                let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_keep_the_spec_order_and_names() {
        let names: Vec<_> = Hook::ON_CREATE.iter().map(|h| h.name()).collect();
        assert_eq!(
            names,
            [
                "onCreateCommand",
                "updateContentCommand",
                "postCreateCommand"
            ]
        );
        let hooks = Hooks {
            post_start: vec![run_spec::Hook {
                origin: None,
                command: LifecycleCommand::Shell("echo hi".into()),
            }],
            ..Hooks::default()
        };
        assert_eq!(Hook::PostStart.commands(&hooks).len(), 1);
        assert!(Hook::PostAttach.commands(&hooks).is_empty());
    }

    /// initializeCommand whose program is not there: the step is named for a caller, and the
    /// spawn's own error is the source (its kind, not its words, says "not found").
    #[test]
    fn a_host_command_that_cannot_start_is_a_failed_step_with_its_cause() {
        let command = LifecycleCommand::Args(vec!["/nonexistent/yolo-no-such-program".into()]);
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let error = runtime
            .block_on(run_on_host(&command, dir.path(), None))
            .unwrap_err();
        assert!(
            matches!(
                error,
                Error::StepFailed {
                    step: Step::HostCommand,
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(error.code(), 70);
        let text = error.to_string();
        assert!(
            text.starts_with(
                "initializeCommand: could not run \"/nonexistent/yolo-no-such-program\" on the host: "
            ),
            "{text}"
        );
        let io = std::error::Error::source(&error)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .expect("the spawn's error");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn the_setup_script_is_the_template() {
        assert!(SETUP_SCRIPT.contains("usermod -u \"$uid\""));
        assert!(SETUP_SCRIPT.trim_end().ends_with("exit 0"));
    }

    #[test]
    fn remote_env_resolves_container_env_wins_over_the_probe_and_drops_unset() {
        let remote = BTreeMap::from([
            (
                "PATH".to_string(),
                Some("${containerEnv:PATH}:/x".to_string()),
            ),
            ("GONE".to_string(), None),
        ]);
        let container = BTreeMap::from([
            ("PATH".to_string(), "/bin".to_string()),
            ("SAME".to_string(), "1".to_string()),
        ]);
        let probed = BTreeMap::from([
            ("GONE".to_string(), "x".to_string()),
            ("NVM_DIR".to_string(), "/n".to_string()),
            ("PATH".to_string(), "/n/bin:/bin".to_string()),
            ("SAME".to_string(), "1".to_string()),
        ]);
        assert_eq!(
            command_env(&probed, &remote, &container),
            ["NVM_DIR=/n", "PATH=/bin:/x"]
        );
        assert_eq!(
            command_env(&probed, &BTreeMap::new(), &container),
            ["GONE=x", "NVM_DIR=/n", "PATH=/n/bin:/bin"]
        );
    }

    #[test]
    fn the_probe_reads_between_the_marks_and_keeps_the_containers_path() {
        let out = b"bash: no job control in this shell\nMARKA=1\0PWD=/w\0YOLO_EXEC_ID=9\0PATH=/n/bin:/usr/bin\0EMPTY=\0MARKtrailing";
        let container = BTreeMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]);
        let env = parse_probe(out, "MARK", &container, true).unwrap();
        assert_eq!(
            env,
            BTreeMap::from([
                ("A".to_string(), "1".to_string()),
                ("EMPTY".to_string(), String::new()),
                ("PATH".to_string(), "/n/bin:/usr/bin:/bin".to_string()),
            ])
        );
        assert!(parse_probe(b"no marks", "MARK", &container, true).is_none());
    }

    #[test]
    fn the_containers_path_entries_keep_their_place_in_front_of_a_reset_path() {
        let profile = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        let image = "/opt/hello/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        assert_eq!(merge_paths(profile, image, true), image);
        assert_eq!(
            merge_paths(
                "/home/u/.nvm/bin:/usr/bin:/bin",
                "/usr/local/sbin:/opt/x:/usr/bin:/extra",
                false
            ),
            "/opt/x:/home/u/.nvm/bin:/usr/bin:/extra:/bin"
        );
    }
}
