//! A workspace's agent runs: their records, their state, and a detached run's log, as
//! `yolo run`, `yolo ps`, `yolo logs` and `yolo kube --apply` keep and read them.
//!
//! Every `yolo run` leaves a record in `<data>/runs/<id>.json`: the workspace, the agent, its
//! arguments, the container, the session (so `yolo audit --session` finds what it did), when it
//! started and ended and how. A detached run's output goes to `<data>/runs/<id>.log` on the
//! host, written by a `yolo` process of its own (the *keeper*, `yolo keep <id>`, started in a
//! new session with no terminal) that runs the agent as an attached `yolo run` would and
//! records its exit. So the output is on the host, where the agent cannot rewrite it, and the
//! same code serves every engine yolo talks to (local Docker, a remote engine, Podman): the
//! keeper only needs the engine API, as `exec` does. Killing the keeper (SIGTERM) stops the
//! agent in the container too (`Engine::exec`).
//!
//! A Pod applied by `yolo kube --apply` is a run too, detached by nature: its record names the
//! Pod (`kube`), `ps` asks the cluster how it is doing, and `logs` reads its agent container's
//! log from the cluster (the Pod's output lives there, not on the host).
//!
//! Environment values the agent needs (API keys named in its preset's `env`) are never written
//! to the record: the keeper inherits them from the `yolo run --detach` that started it.

use crate::error::{Cause, Dependency, Error, Failure, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One agent run, as `<data>/runs/<id>.json` holds it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct RunRecord {
    pub(crate) id: String,
    pub(crate) workspace: PathBuf,
    /// The devcontainer.json given with `--config`, if one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) config: Option<PathBuf>,
    pub(crate) agent: String,
    /// What runs in the container: the agent's command and the user's arguments.
    pub(crate) argv: Vec<String>,
    pub(crate) container: String,
    pub(crate) session: String,
    /// The container's network mode (`firewall`, `open`, `none`).
    #[serde(default)]
    pub(crate) network: String,
    pub(crate) detached: bool,
    pub(crate) started: DateTime<Utc>,
    /// The process that waits for the agent: the keeper of a detached run, `yolo run` itself
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ended: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) exit_code: Option<i32>,
    /// Why it ended without an exit code of the agent's (the keeper failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// A Pod in a cluster (`yolo kube --apply`) rather than a container of an engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) kube: Option<KubeRun>,
    /// The named session it runs in (`--copy NAME`); `None`: the workspace session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) copy: Option<String>,
}

/// Where a run in a cluster is: its Pod.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct KubeRun {
    pub(crate) namespace: String,
    pub(crate) pod: String,
    /// The kubeconfig context it was applied with (None: in-cluster, or no name known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) context: Option<String>,
    /// The Pod's uid: a Pod of the same name with another uid is a later apply's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) uid: Option<String>,
}

impl KubeRun {
    /// The same Pod name in the same namespace of the same cluster.
    fn same_pod(&self, other: &KubeRun) -> bool {
        (&self.context, &self.namespace, &self.pod)
            == (&other.context, &other.namespace, &other.pod)
    }
}

/// After `run` was applied: the earlier records of a Pod of the same name, not yet ended, end
/// (the apply replaced that Pod), so `ps` does not show one Pod as two runs.
pub(crate) fn replaced_by(run: &RunRecord) -> Result<()> {
    let Some(kube) = &run.kube else {
        return Ok(());
    };
    for mut earlier in all()? {
        if end_replaced(&mut earlier, &run.id, kube) {
            earlier.save()?;
        }
    }
    Ok(())
}

/// End `earlier` if it is an unended record of the Pod `kube` that run `id` applied again.
fn end_replaced(earlier: &mut RunRecord, id: &str, kube: &KubeRun) -> bool {
    let same = earlier.kube.as_ref().is_some_and(|k| k.same_pod(kube));
    if !same || earlier.id == id || earlier.ended.is_some() {
        return false;
    }
    earlier.ended = Some(Utc::now());
    earlier.error = Some(format!("replaced by run {id} (applied again)"));
    true
}

/// Where a run runs: the container, its session, its network mode.
pub(crate) struct Where<'a> {
    pub(crate) container: &'a str,
    pub(crate) session: &'a str,
    pub(crate) network: &'a str,
}

/// Where a run is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunState {
    Running,
    Exited(i32),
    Failed(String),
    /// Its process is gone without saying how it ended (killed, the machine restarted).
    Lost,
    /// A Pod whose state the cluster did not tell (unreachable, or the Pod is gone).
    Unknown(String),
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunState::Running => f.write_str("running"),
            RunState::Exited(code) => write!(f, "exited ({code})"),
            RunState::Failed(why) => write!(f, "failed: {why}"),
            RunState::Lost => f.write_str("lost (its yolo process is gone)"),
            RunState::Unknown(why) => write!(f, "unknown: {why}"),
        }
    }
}

impl RunRecord {
    /// A new run's record (not yet saved) of `agent` running `argv` in `at`; its id is the
    /// start time and a random suffix.
    pub(crate) fn new(
        workspace: &Path,
        config: Option<&Path>,
        (agent, argv): (&str, Vec<String>),
        at: &Where<'_>,
        detached: bool,
    ) -> RunRecord {
        let started = Utc::now();
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        RunRecord {
            id: format!("{}-{}", started.format("%Y%m%dT%H%M%S"), &suffix[..8]),
            workspace: workspace.to_path_buf(),
            config: config.map(Path::to_path_buf),
            agent: agent.to_string(),
            argv,
            container: at.container.to_string(),
            session: at.session.to_string(),
            network: at.network.to_string(),
            detached,
            started,
            pid: None,
            ended: None,
            exit_code: None,
            error: None,
            kube: None,
            copy: None,
        }
    }

    /// Its state as the records say; a Pod's is the cluster's (`current_state`).
    pub(crate) fn state(&self) -> RunState {
        match (&self.exit_code, &self.error, self.ended) {
            (Some(code), _, _) => RunState::Exited(*code),
            (None, Some(why), _) => RunState::Failed(why.clone()),
            (None, None, Some(_)) => RunState::Lost,
            (None, None, None) if self.kube.is_some() => {
                RunState::Unknown("a Pod (`yolo ps` asks its cluster)".into())
            }
            (None, None, None) if self.pid.is_some_and(alive) => RunState::Running,
            (None, None, None) => RunState::Lost,
        }
    }

    /// Save (whole, through a temporary file and a rename).
    pub(crate) fn save(&self) -> Result<()> {
        let dir = dir();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let path = dir.join(format!("{}.json", self.id));
        let temp = dir.join(format!(".{}.json.{}", self.id, std::process::id()));
        let text = serde_json::to_string_pretty(self).map_err(|e| Error::Failed {
            what: Failure::Serialize,
            cause: Cause::bare(e),
        })?;
        std::fs::write(&temp, text).map_err(|e| Error::io(&temp, e))?;
        std::fs::rename(&temp, &path).map_err(|e| Error::io(&path, e))
    }

    /// Its end: the agent's exit code, or why it could not be run to the end.
    pub(crate) fn finish(&mut self, result: &Result<i32>) -> Result<()> {
        self.ended = Some(Utc::now());
        match result {
            Ok(code) => self.exit_code = Some(*code),
            Err(e) => self.error = Some(e.to_string()),
        }
        self.save()
    }

    /// `run --detach`: the keeper (`yolo keep ID`) started in a session of its own, without
    /// a terminal, its output to the run's log; its process id on the record, and returned.
    pub(crate) fn start_keeper(&mut self) -> Result<u32> {
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::process::CommandExt;
        self.save()?;
        let log = self.log_path();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&log)
            .map_err(|e| Error::io(&log, e))?;
        let err = file.try_clone().map_err(|e| Error::io(&log, e))?;
        let me = std::env::current_exe().map_err(|e| Error::Failed {
            what: Failure::Process,
            cause: Cause::of("finding yolo itself", e),
        })?;
        let mut command = std::process::Command::new(me);
        command
            .args(["keep", &self.id])
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
        let child = command.spawn().map_err(|e| Error::Failed {
            what: Failure::Process,
            cause: Cause::of("starting the detached run's keeper", e),
        })?;
        self.pid = Some(child.id());
        self.save()?;
        Ok(child.id())
    }

    pub(crate) fn log_path(&self) -> PathBuf {
        dir().join(format!("{}.log", self.id))
    }
}

/// The record of run `id` for its keeper (`yolo keep ID`), once it names this process:
/// `start_keeper` writes the keeper's id once it has it, and until then the record is not the
/// keeper's to finish (after 5 s it goes on all the same).
pub(crate) async fn claim(id: &str) -> Result<RunRecord> {
    let me = std::process::id();
    let mut waited = 0;
    loop {
        let record = find(Some(id), None)?;
        if record.id != id {
            return Err(Error::NotFound(format!("no agent run {id:?}")));
        }
        if record.pid == Some(me) || waited >= 100 {
            return Ok(record);
        }
        waited += 1;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// `<data>/runs`.
pub(crate) fn dir() -> PathBuf {
    crate::store::runs_dir()
}

/// Whether process `pid` is there (a zombie or another user's process counts: it is not gone).
fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Every run on record, oldest first. A record that cannot be read is skipped with a warning.
pub(crate) fn all() -> Result<Vec<RunRecord>> {
    let dir = dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(Error::io(&dir, e)),
    };
    let mut runs = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        match std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<RunRecord>(&t).map_err(|e| e.to_string()))
        {
            Ok(run) => runs.push(run),
            Err(e) => eprintln!(
                "{} skipping the run record {}: {e}",
                console::style("warning:").yellow().bold(),
                path.display()
            ),
        }
    }
    runs.sort_by(|a, b| a.started.cmp(&b.started).then(a.id.cmp(&b.id)));
    Ok(runs)
}

/// The run `id` names (a unique prefix will do), or without one the latest run of `workspace`.
/// The run `id` names (a unique start of it), or without one the latest of the workspace
/// session (`(workspace, None)`) or of a named one (`(workspace, Some(name))`).
pub(crate) fn find(id: Option<&str>, of: Option<(&Path, Option<&str>)>) -> Result<RunRecord> {
    let runs = all()?;
    match id {
        Some(id) => {
            let matching: Vec<&RunRecord> = runs.iter().filter(|r| r.id.starts_with(id)).collect();
            match matching.as_slice() {
                [one] => Ok((*one).clone()),
                [] => Err(Error::NotFound(format!(
                    "no agent run {id:?}; `yolo ps --all` lists them"
                ))),
                many => Err(Error::Usage(format!(
                    "{id:?} names {} runs ({}); give more of the id",
                    many.len(),
                    many.iter()
                        .map(|r| r.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            }
        }
        None => {
            let (workspace, copy) = of.ok_or_else(|| Error::Usage("name the run".into()))?;
            runs.into_iter()
                .rev()
                .find(|r| r.workspace == workspace && r.copy.as_deref() == copy)
                .ok_or_else(|| {
                    Error::NotFound(format!(
                        "no agent run for {}{}; start one with `yolo run --detach AGENT`, or see `yolo ps --all`",
                        workspace.display(),
                        copy.map(|c| format!(" (session {c})")).unwrap_or_default()
                    ))
                })
        }
    }
}

/// A run's state now: a Pod's from its cluster (its phase, and the agent's exit code once it
/// ended), anything else's from its record.
async fn current_state(run: &RunRecord) -> RunState {
    let Some(kube) = &run.kube else {
        return run.state();
    };
    if run.ended.is_some() {
        // Ended on record (replaced by a later apply): no cluster to ask.
        return run.state();
    }
    let asked = async {
        let (client, namespace) = crate::k8s::client::connect(
            Some(&kube.namespace),
            kube.context.as_deref(),
            crate::k8s::client::Purpose::Pod(&kube.pod),
        )
        .await?;
        crate::k8s::client::pod_state(&client, &namespace, &kube.pod).await
    };
    // A cluster that does not answer makes one row unknown, not `ps` hang.
    let asked = async {
        tokio::time::timeout(std::time::Duration::from_secs(10), asked)
            .await
            .unwrap_or_else(|_| {
                Err(Error::Dependency {
                    on: Dependency::Kubernetes,
                    cause: "its cluster did not answer within 10 s".into(),
                })
            })
    };
    match asked.await {
        Ok(Some(pod)) if kube.uid.is_some() && pod.uid.is_some() && pod.uid != kube.uid => {
            RunState::Unknown(format!(
                "Pod {}/{} is another one now (applied again)",
                kube.namespace, kube.pod
            ))
        }
        Ok(Some(pod)) => pod_run_state(&pod.phase, pod.agent_exit),
        Ok(None) => RunState::Unknown(format!(
            "Pod {}/{} is gone from the cluster",
            kube.namespace, kube.pod
        )),
        Err(e) => RunState::Unknown(first_line(&e.to_string())),
    }
}

/// A Pod's run from its phase and its agent container's exit code. The agent's end comes
/// first: the guard runs on after it, so the Pod stays `Running`.
fn pod_run_state(phase: &str, agent_exit: Option<i32>) -> RunState {
    match (agent_exit, phase) {
        (Some(code), _) => RunState::Exited(code),
        (None, "Pending" | "Running") => RunState::Running,
        (None, phase) => RunState::Unknown(format!("Pod {phase}")),
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_string()
}

/// Every run on record with its state now (with `all_runs`, the ended ones too), oldest
/// first.
pub(crate) async fn listed(all_runs: bool) -> Result<Vec<(RunRecord, RunState)>> {
    let records = all()?;
    // Pods are asked about several at a time: a cluster that does not answer costs its
    // timeout once per batch, not once per Pod.
    use futures_util::StreamExt;
    let states: Vec<RunState> = futures_util::stream::iter(records.iter().map(current_state))
        .buffered(8)
        .collect()
        .await;
    Ok(records
        .into_iter()
        .zip(states)
        .filter(|(_, state)| all_runs || *state == RunState::Running)
        .collect())
}

/// A run as `yolo ps --json` shows it: its record, its state, and its log file.
pub(crate) fn json_view(r: &RunRecord, state: &RunState) -> serde_json::Value {
    let mut value = serde_json::to_value(r).unwrap_or_default();
    value["state"] = state.to_string().into();
    if let RunState::Exited(code) = state {
        value["exit_code"] = (*code).into();
    }
    value["log"] = (r.detached && r.kube.is_none())
        .then(|| r.log_path().display().to_string())
        .into();
    value
}

/// The columns of `yolo ps`'s table.
pub(crate) const TABLE_HEADER: [&str; 7] = [
    "RUN",
    "AGENT",
    "MODE",
    "STARTED (UTC)",
    "STATE",
    "SESSION",
    "WORKSPACE",
];

/// A run's row of `yolo ps`'s table (the workspace's name is the repository's: escaped).
/// The session column: a named session's name (its branch is `yolo/NAME`), `-` for the
/// workspace session.
pub(crate) fn table_row(r: &RunRecord, state: &RunState) -> [String; 7] {
    [
        r.id.clone(),
        r.agent.clone(),
        match (&r.kube, r.detached) {
            (Some(_), _) => "pod",
            (None, true) => "detached",
            (None, false) => "attached",
        }
        .into(),
        r.started.format("%Y-%m-%d %H:%M:%S").to_string(),
        state.to_string(),
        r.copy.clone().unwrap_or_else(|| "-".into()),
        crate::visible::escape_controls(&r.workspace.display().to_string()),
    ]
}

/// Hand a detached run's output to `show`, whole lines at a time (the rest at the end); with
/// `follow`, until the run ends. A Pod's comes from its cluster, any other's from its log file
/// on the host. An attached run has none to give: its output went to its terminal.
pub(crate) async fn read_log(
    run: &RunRecord,
    follow: bool,
    mut show: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    use std::io::Read;
    if !run.detached {
        return Err(Error::NotFound(format!(
            "run {} was attached to a terminal: its output was shown there (and `yolo replay --session {}` plays it when it was recorded)",
            run.id, run.session
        )));
    }
    // What follows the last newline read: shown once its line is whole, or at the end.
    let mut pending: Vec<u8> = Vec::new();
    if let Some(kube) = &run.kube {
        let (client, namespace) = crate::k8s::client::connect(
            Some(&kube.namespace),
            kube.context.as_deref(),
            crate::k8s::client::Purpose::Pod(&kube.pod),
        )
        .await?;
        crate::k8s::client::agent_log(&client, &namespace, &kube.pod, follow, |bytes| {
            pending.extend_from_slice(bytes);
            if let Some(end) = pending.iter().rposition(|&b| b == b'\n') {
                let rest = pending.split_off(end + 1);
                show(&pending)?;
                pending = rest;
            }
            Ok(())
        })
        .await?;
        if !pending.is_empty() {
            show(&pending)?;
        }
        return Ok(());
    }
    let path = run.log_path();
    let mut file = std::fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf).map_err(|e| Error::io(&path, e))?;
        if n > 0 {
            pending.extend_from_slice(&buf[..n]);
            if let Some(end) = pending.iter().rposition(|&b| b == b'\n') {
                let rest = pending.split_off(end + 1);
                show(&pending)?;
                pending = rest;
            }
            continue;
        }
        // At the end of what is written: done unless following a run that goes on.
        if !follow || find(Some(&run.id), None)?.state() != RunState::Running {
            // Its last words may have landed since the read above.
            let n = file.read(&mut buf).map_err(|e| Error::io(&path, e))?;
            if n > 0 {
                pending.extend_from_slice(&buf[..n]);
                continue;
            }
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    if !pending.is_empty() {
        show(&pending)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> RunRecord {
        RunRecord::new(
            Path::new("/home/me/repo"),
            None,
            (
                "claude",
                vec!["claude".into(), "-p".into(), "fix it".into()],
            ),
            &Where {
                container: "c0ffee",
                session: "20261122T100000Z-abcd",
                network: "firewall",
            },
            true,
        )
    }

    #[test]
    fn a_run_is_running_while_its_process_lives_and_then_says_how_it_ended() {
        let mut run = record();
        run.pid = Some(std::process::id());
        assert_eq!(run.state(), RunState::Running);
        run.pid = Some(u32::MAX - 1);
        assert_eq!(run.state(), RunState::Lost);
        run.ended = Some(Utc::now());
        run.exit_code = Some(3);
        assert_eq!(run.state(), RunState::Exited(3));
        run.exit_code = None;
        run.error = Some("the container is gone".into());
        assert_eq!(run.state().to_string(), "failed: the container is gone");
    }

    #[test]
    fn a_pods_record_names_it_and_waits_for_the_cluster_to_say_how_it_is() {
        let mut run = record();
        run.kube = Some(KubeRun {
            namespace: "agents".into(),
            pod: "yolo-repo-0abc".into(),
            context: None,
            uid: None,
        });
        // No process of yolo's waits for a Pod: its state is the cluster's to tell.
        run.pid = Some(std::process::id());
        assert!(matches!(run.state(), RunState::Unknown(_)));
        let text = serde_json::to_string(&run).unwrap();
        assert!(text.contains(r#""kube":{"namespace":"agents","pod":"yolo-repo-0abc"}"#));
        assert_eq!(serde_json::from_str::<RunRecord>(&text).unwrap(), run);
        // A record of an engine's run has no `kube` key, and reads back without one.
        let plain = serde_json::to_string(&record()).unwrap();
        assert!(!plain.contains("kube"));
    }

    #[test]
    fn a_pod_applied_again_ends_the_earlier_record_of_that_pod_only() {
        let pod = |context: Option<&str>, namespace: &str| KubeRun {
            namespace: namespace.into(),
            pod: "yolo-repo-0abc".into(),
            context: context.map(Into::into),
            uid: None,
        };
        let with = |kube: KubeRun| {
            let mut run = record();
            run.kube = Some(kube);
            run
        };
        let again = pod(Some("lab"), "agents");
        let mut earlier = with(pod(Some("lab"), "agents"));
        assert!(end_replaced(&mut earlier, "20261125T000000-later", &again));
        assert_eq!(
            earlier.state().to_string(),
            "failed: replaced by run 20261125T000000-later (applied again)"
        );
        // Already ended: left as it was.
        assert!(!end_replaced(&mut earlier, "20261125T000001-third", &again));
        // Another namespace, another cluster, an engine's run, the run itself: untouched.
        for mut other in [
            with(pod(Some("lab"), "other")),
            with(pod(Some("prod"), "agents")),
            with(pod(None, "agents")),
            record(),
        ] {
            assert!(!end_replaced(&mut other, "20261125T000000-later", &again));
            assert!(other.ended.is_none());
        }
        let mut itself = with(pod(Some("lab"), "agents"));
        let id = itself.id.clone();
        assert!(!end_replaced(&mut itself, &id, &again));
    }

    #[test]
    fn a_pods_agent_that_ended_is_exited_though_its_guard_runs_on() {
        assert_eq!(pod_run_state("Running", Some(3)), RunState::Exited(3));
        assert_eq!(pod_run_state("Succeeded", Some(0)), RunState::Exited(0));
        assert_eq!(pod_run_state("Running", None), RunState::Running);
        assert_eq!(pod_run_state("Pending", None), RunState::Running);
        assert_eq!(
            pod_run_state("Failed", None).to_string(),
            "unknown: Pod Failed"
        );
    }

    #[test]
    fn a_record_reads_back_as_written_and_ids_sort_by_start() {
        let a = record();
        let text = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<RunRecord>(&text).unwrap(), a);
        assert!(a.id.len() > 16 && a.id.starts_with(&a.started.format("%Y%m%d").to_string()));
        assert!(!text.contains("ANTHROPIC"), "no environment in the record");
    }
}
