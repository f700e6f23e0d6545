//! The session as Kubernetes objects: one Pod (the guard, the agent, the init containers that
//! install the shim and fetch the workspace) and one ConfigMap (the guard's config, with the
//! allowlist). Pure: typed `k8s-openapi` values built from the `RunSpec` the policy made and
//! the guard config `network::guard_config` made, the same values `yolo up` hands Docker.
//! Nothing here talks to a cluster (`client` does) or decides policy.

use crate::engine::guard_image::GUARD_BINARY;
use crate::error::{Cause, Error, Failure, Result};
use crate::run_spec::{MountKind, RunSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar,
    PersistentVolumeClaimVolumeSource, Pod, PodDNSConfig, PodSpec, ResourceRequirements,
    SeccompProfile, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

/// Where the ConfigMap is mounted in the guard, and the file the guard reads there.
pub(crate) const CONFIG_DIR: &str = "/etc/yolo";
pub(crate) const CONFIG_FILE: &str = "guard.json";
/// The containers' names: `yolo audit --kube` reads the guard's log.
pub(crate) const GUARD: &str = "guard";
pub(crate) const AGENT: &str = "agent";
/// The guard's capabilities, as the Docker guard's (`engine::guard`).
pub(crate) const GUARD_CAPS: &[&str] = &["NET_ADMIN", "NET_BIND_SERVICE", "SYS_PTRACE"];
/// Where the init container puts the shim for the agent (an emptyDir, read-only in the agent).
const SHIM_STAGING: &str = "/yolo-shim";
/// The label every object carries, so `kubectl get -l` finds them.
pub(crate) const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "yolo");

/// Where the Pod's workspace comes from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Workspace {
    /// `git clone` in an init container, into an emptyDir.
    Clone {
        url: String,
        branch: Option<String>,
        /// The init container's image: it needs `git`.
        image: String,
    },
    /// A PersistentVolumeClaim the user made (`--pvc`), mounted as it is.
    Claim(String),
}

/// What the Pod is made of besides the `RunSpec`: decided by `bring_up::pod` from the flags.
#[derive(Debug, Clone)]
pub(crate) struct PodPlan {
    pub(crate) name: String,
    pub(crate) namespace: Option<String>,
    pub(crate) agent_image: String,
    pub(crate) guard_image: String,
    /// The guard's config, JSON (`GuardConfig` with `audit_to_stdout`).
    pub(crate) guard_config: String,
    pub(crate) workspace: Workspace,
    /// What the agent container runs (through the shim when `exec_audit`).
    pub(crate) command: Vec<String>,
    pub(crate) exec_audit: bool,
}

impl PodPlan {
    pub(crate) fn config_map_name(&self) -> String {
        format!("{}-guard", self.name)
    }
}

/// The ConfigMap and the Pod of a session.
pub(crate) fn render(
    spec: &RunSpec,
    plan: &PodPlan,
    agent_caps: &[&str],
) -> Result<(ConfigMap, Pod)> {
    let labels = BTreeMap::from([
        (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
        (
            "yolo.dev/devcontainer-id".into(),
            spec.devcontainer_id.clone(),
        ),
    ]);
    let meta = |name: String| ObjectMeta {
        name: Some(name),
        namespace: plan.namespace.clone(),
        labels: Some(labels.clone()),
        ..Default::default()
    };
    let config_map = ConfigMap {
        metadata: meta(plan.config_map_name()),
        data: Some(BTreeMap::from([(
            CONFIG_FILE.to_string(),
            plan.guard_config.clone(),
        )])),
        ..Default::default()
    };
    let mut volumes = vec![
        Volume {
            name: "guard-config".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: plan.config_map_name(),
                ..Default::default()
            }),
            ..Default::default()
        },
        workspace_volume(&plan.workspace),
    ];
    let mut init = Vec::new();
    if plan.exec_audit {
        volumes.push(empty_dir("shim", None));
        init.push(shim_installer(plan));
    }
    if let Workspace::Clone { url, branch, image } = &plan.workspace {
        init.push(cloner(spec, url, branch.as_deref(), image));
    }
    let (agent, extra) = agent(spec, plan, agent_caps)?;
    volumes.extend(extra);
    let pod = Pod {
        metadata: meta(plan.name.clone()),
        spec: Some(PodSpec {
            // The agent's processes in the guard's sight: the exec supervisor reads and traces
            // them. PID 1 is the Pod's pause process; the shim finds the guard by its caps.
            share_process_namespace: Some(true),
            // The guard's end is the session's end: nothing restarts an agent unguarded.
            restart_policy: Some("Never".into()),
            // No cluster credentials in the agent's reach, no service addresses in its env.
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            // Every container asks the guard; the guard asks the cluster's DNS (its config).
            dns_policy: Some("None".into()),
            dns_config: Some(PodDNSConfig {
                nameservers: Some(vec!["127.0.0.1".into()]),
                ..Default::default()
            }),
            init_containers: (!init.is_empty()).then_some(init),
            containers: vec![guard(plan), agent],
            volumes: Some(volumes),
            ..Default::default()
        }),
        ..Default::default()
    };
    Ok((config_map, pod))
}

/// The objects as one YAML stream (`---` between documents), ConfigMap first: `kubectl apply
/// -f` and `podman kube play` take it as it is.
pub(crate) fn to_yaml(config_map: &ConfigMap, pod: &Pod) -> Result<String> {
    Ok(format!("{}---\n{}", yaml(config_map)?, yaml(pod)?))
}

/// k8s-openapi's objects serialize with their `apiVersion` and `kind`.
fn yaml<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_yaml_ng::to_string(value)
        .map_err(|e| Error::failed(Failure::Serialize, Cause::of("writing the Pod's YAML", e)))
}

fn hardened(add: &[&str]) -> SecurityContext {
    SecurityContext {
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: (!add.is_empty()).then(|| add.iter().map(|c| c.to_string()).collect()),
        }),
        allow_privilege_escalation: Some(false),
        privileged: Some(false),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn limits(cpus: f64, memory_bytes: i64) -> ResourceRequirements {
    let millicores = (cpus * 1000.0).round() as i64;
    ResourceRequirements {
        limits: Some(BTreeMap::from([
            ("cpu".to_string(), Quantity(format!("{millicores}m"))),
            ("memory".to_string(), Quantity(memory_bytes.to_string())),
        ])),
        ..Default::default()
    }
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..Default::default()
    }
}

fn empty_dir(name: &str, medium: Option<&str>) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: medium.map(str::to_string),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn workspace_volume(workspace: &Workspace) -> Volume {
    match workspace {
        Workspace::Clone { .. } => empty_dir("workspace", None),
        Workspace::Claim(claim) => Volume {
            name: "workspace".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.clone(),
                read_only: None,
            }),
            ..Default::default()
        },
    }
}

/// The guard: its program as PID 1 of its container, the config from the ConfigMap, the
/// Docker guard's three capabilities and limits.
fn guard(plan: &PodPlan) -> Container {
    Container {
        name: GUARD.into(),
        image: Some(plan.guard_image.clone()),
        command: Some(vec![
            GUARD_BINARY.into(),
            "run".into(),
            "--config".into(),
            format!("{CONFIG_DIR}/{CONFIG_FILE}"),
        ]),
        security_context: Some(hardened(GUARD_CAPS)),
        resources: Some(limits(1.0, 256 << 20)),
        volume_mounts: Some(vec![mount("guard-config", CONFIG_DIR, true)]),
        ..Default::default()
    }
}

/// Copies the guard's binary (the shim) out of the guard image for the agent.
fn shim_installer(plan: &PodPlan) -> Container {
    Container {
        name: "install-shim".into(),
        image: Some(plan.guard_image.clone()),
        // The guard image holds only the guard: it copies itself.
        command: Some(vec![
            GUARD_BINARY.into(),
            "install".into(),
            format!("{SHIM_STAGING}/shim"),
        ]),
        security_context: Some(hardened(&[])),
        volume_mounts: Some(vec![mount("shim", SHIM_STAGING, false)]),
        ..Default::default()
    }
}

/// `git clone` of the repository into the workspace volume. Runs before the guard (an init
/// container), so it is yolo's fixed command with nothing of the repository executed.
fn cloner(spec: &RunSpec, url: &str, branch: Option<&str>, image: &str) -> Container {
    let mut command = vec![
        "git".to_string(),
        "clone".into(),
        "--no-recurse-submodules".into(),
    ];
    if let Some(branch) = branch {
        command.extend(["--branch".into(), branch.to_string()]);
    }
    command.extend(["--".into(), url.to_string(), spec.workspace_folder.clone()]);
    Container {
        name: "clone".into(),
        image: Some(image.to_string()),
        command: Some(command),
        security_context: Some(hardened(&[])),
        volume_mounts: Some(vec![mount("workspace", &spec.workspace_folder, false)]),
        ..Default::default()
    }
}

/// The agent: the project's image, every capability dropped but yolo's default few (and what
/// the user granted), the limits, the shim first, the protected paths read-only.
fn agent(spec: &RunSpec, plan: &PodPlan, caps: &[&str]) -> Result<(Container, Vec<Volume>)> {
    let mut mounts = vec![mount("workspace", &spec.workspace_folder, false)];
    // Read-only views of the same volume over the paths the host would execute.
    for p in &spec.protected {
        let Some(sub) = relative_to(&p.target, &spec.workspace_folder) else {
            continue;
        };
        mounts.push(VolumeMount {
            sub_path: Some(sub),
            ..mount("workspace", &p.target, p.read_only)
        });
    }
    let mut volumes = Vec::new();
    for (i, m) in spec.mounts.iter().enumerate() {
        let name = format!("mount-{i}");
        match m.kind {
            // A named volume lives on one engine; in a Pod it lasts as long as the Pod.
            MountKind::Volume => volumes.push(empty_dir(&name, None)),
            MountKind::Tmpfs => volumes.push(empty_dir(&name, Some("Memory"))),
            MountKind::Bind => {
                return Err(Error::Usage(format!(
                    "the host folder {} (mounted at {}) cannot be part of a Pod: a cluster's nodes do not have it; remove the grant or the mount",
                    m.source, m.target
                )))
            }
        }
        mounts.push(mount(&name, &m.target, m.read_only));
    }
    let command = if plan.exec_audit {
        mounts.push(mount(
            "shim",
            crate::engine::guard_image::shim_mount_point(),
            true,
        ));
        let mut argv = vec![
            yolo_protocol::SHIM_PATH.to_string(),
            "shim".into(),
            "--pod".into(),
        ];
        argv.extend(plan.command.iter().cloned());
        argv
    } else {
        plan.command.clone()
    };
    let mut add: Vec<&str> = caps.to_vec();
    add.extend(spec.cap_add.iter().map(String::as_str));
    let mut security = hardened(&add);
    if spec.privileged {
        security.privileged = Some(true);
        security.allow_privilege_escalation = Some(true);
    }
    // Kubernetes takes numeric ids only; a user name stays the image's business.
    if let Some((uid, gid)) = spec.container_user.as_deref().and_then(numeric_user) {
        security.run_as_user = Some(uid);
        security.run_as_group = gid;
    }
    let env: Vec<EnvVar> = spec
        .container_env
        .iter()
        .map(|(name, value)| EnvVar {
            name: name.clone(),
            value: Some(value.clone()),
            ..Default::default()
        })
        .collect();
    let container = Container {
        name: AGENT.into(),
        image: Some(plan.agent_image.clone()),
        command: Some(command),
        working_dir: Some(spec.workspace_folder.clone()),
        env: (!env.is_empty()).then_some(env),
        security_context: Some(security),
        resources: Some(limits(spec.limits.cpus, spec.limits.memory_bytes)),
        volume_mounts: Some(mounts),
        ..Default::default()
    };
    Ok((container, volumes))
}

/// `UID` or `UID:GID`, both numbers.
fn numeric_user(user: &str) -> Option<(i64, Option<i64>)> {
    match user.split_once(':') {
        Some((uid, gid)) => Some((uid.parse().ok()?, Some(gid.parse().ok()?))),
        None => Some((user.parse().ok()?, None)),
    }
}

/// `path` below `root`, as a relative path; `None` for `root` itself or a path elsewhere.
fn relative_to(path: &str, root: &str) -> Option<String> {
    let rest = path.strip_prefix(root.trim_end_matches('/'))?;
    let rest = rest.strip_prefix('/')?.trim_end_matches('/');
    (!rest.is_empty()).then(|| rest.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::ok;
    use serde_json::json;
    use serde_yaml_ng::Value;

    fn plan(workspace: Workspace) -> PodPlan {
        PodPlan {
            name: "yolo-repo-0abc".into(),
            namespace: Some("agents".into()),
            agent_image: "registry.example/agent:1".into(),
            guard_image: "registry.example/yolo-guard:1".into(),
            guard_config: r#"{"session":"s","allow":["example.com"]}"#.into(),
            workspace,
            command: vec!["claude".into(), "-p".into(), "fix it".into()],
            exec_audit: true,
        }
    }

    fn clone() -> Workspace {
        Workspace::Clone {
            url: "https://git.example/repo.git".into(),
            branch: Some("main".into()),
            image: "registry.example/git:1".into(),
        }
    }

    /// The YAML as a reader sees it: each document parsed back.
    fn documents(spec: &RunSpec, plan: &PodPlan) -> Vec<Value> {
        let (map, pod) = render(spec, plan, crate::policy::DEFAULT_CAPS).unwrap();
        let yaml = to_yaml(&map, &pod).unwrap();
        serde_yaml_ng::Deserializer::from_str(&yaml)
            .map(|doc| Value::deserialize(doc).unwrap())
            .collect()
    }
    use serde::Deserialize;

    fn container<'a>(list: &'a Value, name: &str) -> &'a Value {
        list.as_sequence()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no container {name}: {list:?}"))
    }

    fn strings(value: &Value) -> Vec<String> {
        value
            .as_sequence()
            .map(|s| s.iter().map(|v| v.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn the_yaml_is_a_config_map_and_one_pod_sharing_its_process_namespace() {
        let spec = ok(json!({"image": "debian:bookworm-slim"}));
        let docs = documents(&spec, &plan(clone()));
        assert_eq!(docs.len(), 2);
        let (map, pod) = (&docs[0], &docs[1]);
        assert_eq!(
            (map["apiVersion"].as_str(), map["kind"].as_str()),
            (Some("v1"), Some("ConfigMap"))
        );
        assert_eq!(map["metadata"]["name"], "yolo-repo-0abc-guard");
        assert_eq!(map["metadata"]["namespace"], "agents");
        assert_eq!(
            map["data"]["guard.json"],
            r#"{"session":"s","allow":["example.com"]}"#
        );
        assert_eq!(
            (pod["apiVersion"].as_str(), pod["kind"].as_str()),
            (Some("v1"), Some("Pod"))
        );
        assert_eq!(
            pod["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "yolo"
        );
        let spec_ = &pod["spec"];
        assert_eq!(spec_["shareProcessNamespace"], true);
        assert_eq!(spec_["restartPolicy"], "Never");
        assert_eq!(spec_["automountServiceAccountToken"], false);
        assert_eq!(spec_["enableServiceLinks"], false);
        assert_eq!(spec_["dnsPolicy"], "None");
        assert_eq!(strings(&spec_["dnsConfig"]["nameservers"]), ["127.0.0.1"]);
        let names: Vec<_> = spec_["containers"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["guard", "agent"]);
        // The typed reader takes it back as the same Pod.
        let typed: Pod = serde_yaml_ng::from_value(pod.clone()).unwrap();
        assert_eq!(typed.spec.unwrap().share_process_namespace, Some(true));
    }

    #[test]
    fn the_guard_holds_its_three_capabilities_and_reads_the_allowlist_from_the_config_map() {
        let spec = ok(json!({"image": "debian:bookworm-slim"}));
        let docs = documents(&spec, &plan(clone()));
        let pod = &docs[1]["spec"];
        let guard = container(&pod["containers"], "guard");
        assert_eq!(guard["image"], "registry.example/yolo-guard:1");
        assert_eq!(
            strings(&guard["command"]),
            [GUARD_BINARY, "run", "--config", "/etc/yolo/guard.json"]
        );
        let security = &guard["securityContext"];
        assert_eq!(strings(&security["capabilities"]["drop"]), ["ALL"]);
        assert_eq!(
            strings(&security["capabilities"]["add"]),
            ["NET_ADMIN", "NET_BIND_SERVICE", "SYS_PTRACE"]
        );
        assert_eq!(security["allowPrivilegeEscalation"], false);
        let mount = &guard["volumeMounts"][0];
        assert_eq!(
            (
                mount["name"].as_str(),
                mount["mountPath"].as_str(),
                mount["readOnly"].as_bool()
            ),
            (Some("guard-config"), Some("/etc/yolo"), Some(true))
        );
        let volume = pod["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "guard-config")
            .unwrap();
        assert_eq!(volume["configMap"]["name"], "yolo-repo-0abc-guard");
    }

    #[test]
    fn the_agent_has_no_network_powers_runs_through_the_shim_and_keeps_its_limits() {
        let spec = ok(
            json!({"image": "debian:bookworm-slim", "runArgs": ["--cpus", "1.5", "--memory", "2g"]}),
        );
        let docs = documents(&spec, &plan(clone()));
        let pod = &docs[1]["spec"];
        let agent = container(&pod["containers"], "agent");
        let security = &agent["securityContext"];
        let added = strings(&security["capabilities"]["add"]);
        for forbidden in ["NET_ADMIN", "NET_RAW", "SYS_ADMIN", "SYS_PTRACE"] {
            assert!(
                !added.contains(&forbidden.to_string()),
                "{forbidden}: {added:?}"
            );
        }
        assert_eq!(strings(&security["capabilities"]["drop"]), ["ALL"]);
        assert_eq!(security["allowPrivilegeEscalation"], false);
        assert_eq!(security["privileged"], false);
        assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");
        assert_eq!(
            strings(&agent["command"]),
            ["/.yolo/shim", "shim", "--pod", "claude", "-p", "fix it"]
        );
        assert_eq!(agent["resources"]["limits"]["cpu"], "1500m");
        assert_eq!(
            agent["resources"]["limits"]["memory"],
            (2i64 << 30).to_string()
        );
        // The shim's folder and the paths the host would run, read-only.
        let mounts = agent["volumeMounts"].as_sequence().unwrap();
        let at = |path: &str| {
            mounts
                .iter()
                .find(|m| m["mountPath"] == path)
                .unwrap_or_else(|| panic!("{path}: {mounts:?}"))
        };
        assert_eq!(at("/.yolo")["readOnly"], true);
        let config = at(&format!("{}/.devcontainer", spec.workspace_folder));
        assert_eq!(
            (config["subPath"].as_str(), config["readOnly"].as_bool()),
            (Some(".devcontainer"), Some(true))
        );
        assert_eq!(at(&spec.workspace_folder)["name"], "workspace");
        // The shim comes out of the guard image first.
        let install = container(&pod["initContainers"], "install-shim");
        assert_eq!(install["image"], "registry.example/yolo-guard:1");
        // By the guard itself: its image holds no `cp`.
        assert_eq!(strings(&install["command"])[..2], [GUARD_BINARY, "install"]);
        assert_eq!(
            strings(&install["securityContext"]["capabilities"]["drop"]),
            ["ALL"]
        );
    }

    #[test]
    fn the_workspace_is_a_clone_of_the_branch_or_the_claim_named() {
        let spec = ok(json!({"image": "debian:bookworm-slim"}));
        let docs = documents(&spec, &plan(clone()));
        let clone = container(&docs[1]["spec"]["initContainers"], "clone");
        assert_eq!(clone["image"], "registry.example/git:1");
        assert_eq!(
            strings(&clone["command"]),
            [
                "git",
                "clone",
                "--no-recurse-submodules",
                "--branch",
                "main",
                "--",
                "https://git.example/repo.git",
                spec.workspace_folder.as_str()
            ]
        );
        let volumes = docs[1]["spec"]["volumes"].as_sequence().unwrap();
        let workspace = volumes.iter().find(|v| v["name"] == "workspace").unwrap();
        assert!(workspace["emptyDir"].is_mapping(), "{workspace:?}");

        let docs = documents(&spec, &plan(Workspace::Claim("my-claim".into())));
        let init = strings(&Value::Sequence(
            docs[1]["spec"]["initContainers"]
                .as_sequence()
                .unwrap()
                .iter()
                .map(|c| c["name"].clone())
                .collect(),
        ));
        assert_eq!(init, ["install-shim"]);
        let volumes = docs[1]["spec"]["volumes"].as_sequence().unwrap();
        let workspace = volumes.iter().find(|v| v["name"] == "workspace").unwrap();
        assert_eq!(workspace["persistentVolumeClaim"]["claimName"], "my-claim");
    }

    #[test]
    fn without_the_exec_audit_the_agent_runs_its_command_directly() {
        let spec = ok(json!({"image": "debian:bookworm-slim"}));
        let mut plan = plan(clone());
        plan.exec_audit = false;
        let docs = documents(&spec, &plan);
        let agent = container(&docs[1]["spec"]["containers"], "agent");
        assert_eq!(strings(&agent["command"]), ["claude", "-p", "fix it"]);
        let init = docs[1]["spec"]["initContainers"].as_sequence().unwrap();
        assert!(init.iter().all(|c| c["name"] != "install-shim"));
    }

    #[test]
    fn a_numeric_container_user_runs_the_agent_and_a_name_does_not() {
        let spec = ok(json!({"image": "debian:bookworm-slim", "containerUser": "1000:1001"}));
        let docs = documents(&spec, &plan(clone()));
        let agent = container(&docs[1]["spec"]["containers"], "agent");
        assert_eq!(agent["securityContext"]["runAsUser"], 1000);
        assert_eq!(agent["securityContext"]["runAsGroup"], 1001);
        let spec = ok(json!({"image": "debian:bookworm-slim", "containerUser": "node"}));
        let docs = documents(&spec, &plan(clone()));
        let agent = container(&docs[1]["spec"]["containers"], "agent");
        assert!(agent["securityContext"].get("runAsUser").is_none());
        assert_eq!(numeric_user("7"), Some((7, None)));
        assert_eq!(numeric_user("7:x"), None);
    }

    #[test]
    fn relative_paths_of_the_workspace() {
        assert_eq!(relative_to("/w/a/b", "/w"), Some("a/b".into()));
        assert_eq!(relative_to("/w/", "/w"), None);
        assert_eq!(relative_to("/wx/a", "/w"), None);
        assert_eq!(relative_to("/other", "/w"), None);
    }
}
