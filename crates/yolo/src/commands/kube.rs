//! `yolo kube [--apply]`: the session `yolo up` would make, as one Kubernetes Pod. The config
//! is read and checked by the same policy (`Project::load` → `RunSpec`), the allowlist merged
//! and the guard's config made as for Docker (`network::allowlist`, `network::guard_config`);
//! only the last step differs: `k8s::render` instead of the engine. Without `--apply` the YAML
//! goes to stdout. `yolo audit --kube POD` reads the events back from the guard's log.

use crate::audit::filter::Filter;
use crate::cli::{KubeFlags, Target};
use crate::error::{Error, Result};
use crate::k8s::render;
use crate::project::Project;
use crate::session::{Hold, Session};
use crate::settings::UpSettings;
use crate::user_config::UserConfig;
use std::path::Path;

/// The flags of `up` that mean nothing for a Pod: refused before anything is read.
pub(crate) fn refuse_up_only(flags: &crate::cli::UpFlags) -> Result<()> {
    let given = [
        (flags.rebuild, "--rebuild", "yolo kube builds nothing"),
        (
            flags.trust_host_commands,
            "--trust-host-commands",
            "yolo kube runs no initializeCommand",
        ),
        (
            flags.pids.is_some(),
            "--pids",
            "a Pod has no process limit of its own (the cluster sets podPidsLimit per node)",
        ),
        (
            !flags.extra_ca.is_empty(),
            "--extra-ca",
            "yolo kube installs no certificates in the agent's image; build them into it",
        ),
    ];
    match given.iter().find(|(on, ..)| *on) {
        Some((_, flag, why)) => Err(Error::Usage(format!(
            "{flag} does not apply to yolo kube: {why}"
        ))),
        None => Ok(()),
    }
}

pub(crate) async fn execute(
    target: &Target,
    settings: UpSettings,
    user: UserConfig,
    flags: KubeFlags,
) -> Result<i32> {
    let mut settings = settings;
    let located = super::locate(target)?;
    // With a cluster at hand, its DNS Service is the guard's upstream unless one was given.
    // The context is read once: the client and the run's record name the same one.
    let context = flags
        .apply
        .then(crate::k8s::client::current_context)
        .flatten();
    let cluster = if flags.apply {
        Some(
            crate::k8s::client::connect(
                flags.namespace.as_deref(),
                context.as_deref(),
                crate::k8s::client::Purpose::Apply,
            )
            .await?,
        )
    } else {
        None
    };
    if let (Some((client, _)), None) = (&cluster, settings.upstream_dns) {
        settings.upstream_dns = Some(crate::k8s::client::cluster_dns(client).await?);
    }
    let mut project = Project::load(&located, settings, user)?;
    project.without_session_ca();
    let plan = crate::bring_up::pod::plan(&project, &flags)?;
    let (config_map, pod) = render::render(&project.spec, &plan, crate::policy::DEFAULT_CAPS)?;
    let Some((client, namespace)) = cluster else {
        print!("{}", render::to_yaml(&config_map, &pod)?);
        return Ok(0);
    };
    // What runs unattended in the cluster is what the user approved, as for `yolo up`.
    let mut stored = Session::at(located.clone(), Hold::Read).await?;
    crate::session::approval::check(&project, &mut stored.state)?;
    stored.save()?;
    let uid = crate::k8s::client::apply(&client, &namespace, &config_map, &pod).await?;
    // A run like `yolo run --detach`'s: `yolo ps` lists it, `yolo logs` reads its agent.
    let session = serde_json::from_str::<yolo_protocol::GuardConfig>(&plan.guard_config)
        .map(|c| c.session)
        .unwrap_or_default();
    let mut run = crate::session::runs::RunRecord::new(
        &located.workspace,
        Some(&located.config_file),
        ("kube", plan.command.clone()),
        &crate::session::runs::Where {
            container: &plan.name,
            session: &session,
            network: crate::firewall::mode_name(project.settings.network.unwrap_or_default()),
        },
        true,
    );
    run.kube = Some(crate::session::runs::KubeRun {
        namespace: namespace.clone(),
        pod: plan.name.clone(),
        context,
        uid,
    });
    run.save()?;
    // Applied again under the same name, the Pod is a new one: the earlier records of it end.
    crate::session::runs::replaced_by(&run)?;
    println!("{}", run.id);
    eprintln!(
        "{} Pod {name} applied in namespace {namespace}; `kubectl exec -it -n {namespace} {name} -c {agent} -- {shim} shim --pod /bin/sh` to use it (through the exec audit's shim), `yolo audit --kube {name} -n {namespace}` for its audit",
        console::style("yolo:").bold(),
        name = plan.name,
        agent = render::AGENT,
        shim = yolo_protocol::SHIM_PATH,
    );
    Ok(0)
}

/// `yolo audit --kube POD`: the events in the guard's log, filtered and printed as `yolo
/// audit` prints a session's. The log comes from the cluster's API, or from `log` (a file,
/// `-` for stdin) when given.
pub(crate) async fn audit(
    pod: &str,
    namespace: Option<&str>,
    log: Option<&Path>,
    filter: &Filter,
    json: bool,
) -> Result<i32> {
    let events = crate::k8s::guard_events(pod, namespace, log).await?;
    for event in &events {
        if let Some(line) = filter.line(event, json) {
            println!("{line}");
        }
    }
    Ok(0)
}
