//! `yolo kube`'s Pod: the session `up` would make, decided from the same `Project` by the
//! same steps (`network::allowlist`, `network::guard_config`, the default agent), for
//! `k8s::render` to draw instead of the engine to make. Here, not in `k8s/`, because it takes
//! those steps of `up`; `k8s/` knows nothing above the `RunSpec`.

use crate::cli::KubeFlags;
use crate::error::{Error, Result};
use crate::k8s::render::{PodPlan, Workspace};
use crate::project::Project;
use crate::run_spec::{ImageSource, RunSpec};
use std::path::Path;

/// Everything the Pod is made of, decided before anything is printed or applied.
pub(crate) fn plan(project: &Project, flags: &KubeFlags) -> Result<PodPlan> {
    let spec = &project.spec;
    let agent_image = refuse_unmappable(project, flags)?;
    let mode = project.settings.network.unwrap_or_default();
    if project.settings.upstream_dns.is_none() {
        return Err(Error::Usage(
            "yolo kube without --apply needs the cluster's DNS resolver for the guard: pass --upstream-dns ADDR (e.g. the kube-dns Service's address: `kubectl -n kube-system get svc kube-dns -o jsonpath='{.spec.clusterIP}'`) or set upstream_dns in yolo's config".into(),
        ));
    }
    refuse_http(project)?;
    let guard_config = guard_config(project, mode)?;
    let workspace = workspace(spec, flags, &agent_image)?;
    let command = if !flags.command.is_empty() {
        flags.command.clone()
    } else if spec.override_command {
        crate::engine::keep_alive()
    } else {
        return Err(Error::Usage(format!(
            "{}: \"overrideCommand\" is false, so the agent container runs the image's own command, which yolo kube cannot read from a registry; give the command after `--` (yolo kube -- COMMAND ARGS...)",
            spec.config_file.display()
        )));
    };
    Ok(PodPlan {
        name: flags
            .name
            .clone()
            .unwrap_or_else(|| pod_name(&spec.container_name)),
        namespace: flags.namespace.clone(),
        agent_image,
        guard_image: guard_image(project, flags)?,
        guard_config,
        workspace,
        command,
        exec_audit: true,
    })
}

/// The guard's config for the ConfigMap: the one `yolo up` makes, with the Pod's differences.
fn guard_config(project: &Project, mode: crate::firewall::NetworkMode) -> Result<String> {
    let agents = super::with_default_agent(project, &[]);
    let allow = super::network::allowlist(project, &agents)?;
    let session = crate::session::record::new_id();
    let mut config = super::network::guard_config(project, mode, &session, allow, None);
    // The Pod's log is the audit log: no host folder to write to, none to watch (the
    // workspace lives in the Pod).
    config.audit_to_stdout = true;
    config.audit_path = yolo_protocol::STDOUT_PATH.into();
    config.file_watch = None;
    // `kubectl exec` is the way in; no host folder holds a socket.
    config.host_control_socket = None;
    config.control_uids = vec![];
    // Always on in a Pod, whatever the mode: a Pod starts its containers without waiting for
    // each other, and the shim is what holds the agent back until the guard's supervisor
    // listens, which it does only once the ruleset is in and verified.
    if !project.spec.exec_audit {
        eprintln!(
            "{} `[audit] exec = false` does not apply to yolo kube: the exec audit's shim is what keeps the agent from starting before the firewall",
            console::style("note:").yellow()
        );
    }
    config.exec_audit = Some(yolo_protocol::ExecAudit {
        log_path: yolo_protocol::STDOUT_PATH.into(),
        max_bytes: project.settings.guard.max_exec_log,
        allow_traced: project.settings.guard.allow_traced_exec,
    });
    serde_json::to_string_pretty(&config).map_err(|e| Error::Failed {
        what: crate::error::Failure::Serialize,
        cause: crate::error::Cause::of("writing the guard's config", e),
    })
}

/// The Pod's guard runs no HTTP proxy yet (no session CA, no control socket the host reaches
/// to hand it the real values): credentials and method/path rules cannot apply in a Pod.
/// Refused before anything is rendered, rather than a Pod that reaches those hosts without
/// their rules or that holds a key: a credential's real value would have to go into the Pod
/// (its spec, the agent's environment), where the agent and whoever reads the Pod see it.
/// Likewise a value of the agent's environment (`containerEnv`, `${localEnv:..}` included) that
/// looks like a key. The agent presets' variables are not handed to a Pod at all (yolo kube
/// passes no host variable), so their keys stay out without configuration.
fn refuse_http(project: &Project) -> Result<()> {
    let user = &project.user;
    let file = crate::user_config::UserConfig::path();
    let what = if let Some(name) = user.credentials.keys().next() {
        Some(format!("[credentials.{name}]"))
    } else if let Some(host) = user.http.keys().next() {
        Some(format!("[http.\"{host}\"]"))
    } else if user.firewall.inspect.is_some() {
        Some("[firewall] inspect".to_string())
    } else {
        None
    };
    if let Some(what) = what {
        return Err(Error::UserConfig {
            file,
            message: format!(
                "{what}: yolo kube does not support credentials or HTTP rules (the Pod's guard runs no HTTP proxy); the Pod would reach those hosts without their rules, and a credential's real value would have to go into the Pod, where the agent reads it. Use `yolo up` for this project, or a config without [credentials]/[http] for yolo kube (YOLO_CONFIG=PATH)"
            ),
        });
    }
    let spec = &project.spec;
    if !crate::http_scope::repo_http(project.config()).is_empty() {
        return Err(Error::Unsupported {
            file: spec.config_file.clone(),
            property: "customizations.yolo.http".into(),
            message: "yolo kube does not support HTTP rules (the Pod's guard runs no HTTP proxy): the Pod would reach those hosts without them; use `yolo up`, or remove them for yolo kube".into(),
        });
    }
    for (var, value) in &spec.container_env {
        if let Some(shape) = crate::credentials::secret_shape(value) {
            return Err(Error::Unsupported {
                file: spec.config_file.clone(),
                property: format!("containerEnv.{var}"),
                message: format!(
                    "{var} holds what looks like {shape}: yolo kube would write it into the Pod's spec, where the agent and whoever reads the Pod see it, and the Pod's guard cannot keep it outside (no HTTP proxy in a Pod); remove it for yolo kube, or use `yolo up` with a [credentials] section"
                ),
            });
        }
    }
    Ok(())
}

/// What a Pod cannot be: a Compose project, an image built on this machine, host folders and
/// host namespaces. Each is refused with what to do instead. Returns the agent's image.
fn refuse_unmappable(project: &Project, flags: &KubeFlags) -> Result<String> {
    let spec = &project.spec;
    let unsupported = |property: &str, message: String| Error::Unsupported {
        file: spec.config_file.clone(),
        property: property.into(),
        message,
    };
    if spec.compose.is_some() {
        return Err(unsupported(
            "dockerComposeFile",
            "yolo kube renders one Pod, not a Compose project; run the services in the cluster yourself and use a config with an \"image\"".into(),
        ));
    }
    let has_features = project
        .config()
        .features
        .as_ref()
        .is_some_and(|f| f.as_object().is_some_and(|o| !o.is_empty()));
    let image = match (&flags.image, &spec.image) {
        (Some(image), _) => image.clone(),
        (None, ImageSource::Build(_)) => {
            return Err(unsupported(
                "build",
                "yolo kube does not build images: build it (`yolo up`), push it to a registry your cluster pulls from, and pass --image REGISTRY/IMAGE".into(),
            ))
        }
        (None, ImageSource::Image(image)) => image.clone(),
    };
    if flags.image.is_none() && has_features {
        return Err(unsupported(
            "features",
            "Features are installed by an image build on this machine: build it (`yolo up`), push the image to a registry your cluster pulls from, and pass --image REGISTRY/IMAGE".into(),
        ));
    }
    if let Some((name, value)) = spec.host_modes.iter().next() {
        return Err(Error::Usage(format!(
            "the granted --{name} {value} has no Pod equivalent; leave out that grant for yolo kube"
        )));
    }
    if let Some(device) = spec.devices.first() {
        return Err(Error::Usage(format!(
            "the granted device {device} has no Pod equivalent; leave out that grant for yolo kube"
        )));
    }
    Ok(image)
}

/// The guard image: `--guard-image`, the user's `guard_image`, or the tag yolo builds locally
/// (which the cluster then must be able to pull: docs/kubernetes.md).
fn guard_image(project: &Project, flags: &KubeFlags) -> Result<String> {
    use crate::engine::guard_image::{select, tag, Carried, Platform};
    if let Some(image) = &flags.guard_image {
        return Ok(image.clone());
    }
    let source = select(
        project.settings.guard.image.as_deref(),
        &Carried::this_build(),
        &Platform::of_this_build(),
    )?;
    Ok(tag(&source))
}

/// The workspace: the claim the user named, or a clone of the repository's remote.
fn workspace(spec: &RunSpec, flags: &KubeFlags, agent_image: &str) -> Result<Workspace> {
    if let Some(claim) = &flags.pvc {
        return Ok(Workspace::Claim(claim.clone()));
    }
    let url = match &flags.repo {
        Some(url) => url.clone(),
        None => git(&spec.workspace, &["remote", "get-url", "origin"]).ok_or_else(|| {
            Error::Usage(format!(
                "{} has no `origin` remote for the Pod to clone; pass --repo URL, or --pvc NAME for a volume that holds the workspace",
                spec.workspace.display()
            ))
        })?,
    };
    let branch = flags
        .branch
        .clone()
        .or_else(|| git(&spec.workspace, &["symbolic-ref", "--short", "-q", "HEAD"]));
    Ok(Workspace::Clone {
        url,
        branch,
        image: flags
            .git_image
            .clone()
            .unwrap_or_else(|| agent_image.to_string()),
    })
}

/// `git -C dir ARGS` printed a line: that line.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// A container name made a Kubernetes name: lowercase, `-` for anything else, at most 63.
fn pod_name(container_name: &str) -> String {
    let mapped: String = container_name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let cut: String = mapped.chars().take(63).collect();
    let name = cut.trim_matches('-').to_string();
    if name.is_empty() {
        "yolo".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_names_become_kubernetes_names() {
        assert_eq!(pod_name("yolo-My_Repo-1a2b"), "yolo-my-repo-1a2b");
        assert_eq!(pod_name("__"), "yolo");
        assert_eq!(pod_name(&"a".repeat(80)).len(), 63);
    }
}
