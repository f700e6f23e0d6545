//! serde types for devcontainer.json, as written by the repository (before substitution).
//!
//! Unknown properties are ignored (VS Code and other tools have many); properties yolo does not
//! support yet (Features) are kept so `parse` can refuse them by name.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DevContainer {
    pub(crate) name: Option<String>,
    pub(crate) image: Option<String>,
    pub(crate) build: Option<Build>,
    /// Legacy top-level form of `build.dockerfile`.
    #[serde(rename = "dockerFile")]
    pub(crate) docker_file: Option<String>,
    /// Legacy top-level form of `build.context`.
    pub(crate) context: Option<String>,
    #[serde(default)]
    pub(crate) container_env: BTreeMap<String, String>,
    /// A `null` value unsets a variable.
    #[serde(default)]
    pub(crate) remote_env: BTreeMap<String, Option<String>>,
    pub(crate) container_user: Option<String>,
    pub(crate) remote_user: Option<String>,
    #[serde(rename = "updateRemoteUserUID")]
    pub(crate) update_remote_user_uid: Option<bool>,
    pub(crate) override_command: Option<bool>,
    pub(crate) user_env_probe: Option<String>,
    pub(crate) init: Option<bool>,
    pub(crate) privileged: Option<bool>,
    #[serde(default)]
    pub(crate) cap_add: Vec<String>,
    #[serde(default)]
    pub(crate) security_opt: Vec<String>,
    pub(crate) workspace_folder: Option<String>,
    pub(crate) workspace_mount: Option<String>,
    #[serde(default)]
    pub(crate) mounts: Vec<MountEntry>,
    #[serde(default)]
    pub(crate) run_args: Vec<String>,
    #[serde(default)]
    pub(crate) forward_ports: Vec<PortEntry>,
    pub(crate) app_port: Option<AppPort>,
    pub(crate) host_requirements: Option<HostRequirements>,
    pub(crate) shutdown_action: Option<String>,
    pub(crate) initialize_command: Option<LifecycleCommand>,
    pub(crate) on_create_command: Option<LifecycleCommand>,
    pub(crate) update_content_command: Option<LifecycleCommand>,
    pub(crate) post_create_command: Option<LifecycleCommand>,
    pub(crate) post_start_command: Option<LifecycleCommand>,
    pub(crate) post_attach_command: Option<LifecycleCommand>,
    /// Dev Container Features: a JSON object, reference -> options (`parse` refuses any other
    /// JSON type); fetched and installed by `devcontainer::features` and the image build.
    pub(crate) features: Option<serde_json::Value>,
    /// Feature references to install first, in this order (`devcontainer::features` orders).
    pub(crate) override_feature_install_order: Option<Vec<String>>,
    /// Compose file(s), relative to the config's folder; with `service`, a Compose config.
    pub(crate) docker_compose_file: Option<StringOrList>,
    /// The Compose service yolo runs the agent in (the dev service).
    pub(crate) service: Option<String>,
    /// The services `up` starts (default: all of them; the dev service always).
    pub(crate) run_services: Option<Vec<String>>,
    pub(crate) customizations: Option<Customizations>,
    /// What `parse` found worth a warning (unknown properties): shown by whoever loads it.
    #[serde(skip)]
    pub(crate) warnings: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Build {
    pub(crate) dockerfile: Option<String>,
    pub(crate) context: Option<String>,
    #[serde(default)]
    pub(crate) args: BTreeMap<String, String>,
    pub(crate) target: Option<String>,
    #[serde(default)]
    pub(crate) cache_from: StringOrList,
    /// Extra `docker build` flags. yolo applies the ones it understands (`--build-arg`,
    /// `--label`, `--target`, `--network` is refused) and refuses others by name.
    #[serde(default)]
    pub(crate) options: Vec<String>,
}

/// `"a"` or `["a", "b"]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(from = "StringOrListRepr")]
pub(crate) struct StringOrList(pub Vec<String>);

#[derive(Deserialize)]
#[serde(untagged, expecting = "a string or an array of strings")]
enum StringOrListRepr {
    One(String),
    Many(Vec<String>),
}

impl From<StringOrListRepr> for StringOrList {
    fn from(r: StringOrListRepr) -> Self {
        match r {
            StringOrListRepr::One(s) => StringOrList(vec![s]),
            StringOrListRepr::Many(v) => StringOrList(v),
        }
    }
}

/// An entry of `mounts`: the Docker `--mount` string form or the object form.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(
    untagged,
    expecting = "a mount string (\"source=...,target=...,type=...\") or an object with type, source and target"
)]
pub(crate) enum MountEntry {
    Text(String),
    Object(MountObject),
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub(crate) struct MountObject {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) source: Option<String>,
    pub(crate) target: String,
}

/// An entry of `forwardPorts`: a port number or `"host:port"`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged, expecting = "a port number or a \"host:port\" string")]
pub(crate) enum PortEntry {
    Number(u16),
    Text(String),
}

/// `appPort`: a number, a string (`"3000"`, `"8080:80"`) or an array of them.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(
    untagged,
    expecting = "a port number, a \"host:container\" string, or an array of them"
)]
pub(crate) enum AppPort {
    One(PortEntry),
    Many(Vec<PortEntry>),
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HostRequirements {
    pub(crate) cpus: Option<f64>,
    /// e.g. "4gb", "512mb".
    pub(crate) memory: Option<String>,
    pub(crate) storage: Option<String>,
    /// `true`, `"optional"` or `{cores, memory}`: judged by `policy::security` (the `gpu`
    /// grant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) gpu: Option<serde_json::Value>,
}

/// A lifecycle command in the spec's three forms.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(
    untagged,
    expecting = "a command string, an array of arguments, or an object of named commands"
)]
pub(crate) enum LifecycleCommand {
    /// Run with `/bin/sh -c`.
    Shell(String),
    /// Run as argv, without a shell.
    Args(Vec<String>),
    /// Named commands run in parallel; each is a string or an array.
    Parallel(BTreeMap<String, SingleCommand>),
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged, expecting = "a command string or an array of arguments")]
pub(crate) enum SingleCommand {
    Shell(String),
    Args(Vec<String>),
}

impl SingleCommand {
    /// The argv to execute.
    pub(crate) fn argv(&self) -> Vec<String> {
        match self {
            SingleCommand::Shell(s) => vec!["/bin/sh".into(), "-c".into(), s.clone()],
            SingleCommand::Args(a) => a.clone(),
        }
    }
}

impl LifecycleCommand {
    /// The commands to run, each with its name (the hook's name for the single forms,
    /// `hook:key` for the object form). The object form's commands run in parallel.
    pub(crate) fn commands(&self, hook: &str) -> Vec<(String, Vec<String>)> {
        match self {
            LifecycleCommand::Shell(s) => {
                vec![(hook.to_string(), SingleCommand::Shell(s.clone()).argv())]
            }
            LifecycleCommand::Args(a) => vec![(hook.to_string(), a.clone())],
            LifecycleCommand::Parallel(map) => map
                .iter()
                .map(|(k, c)| (format!("{hook}:{k}"), c.argv()))
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub(crate) struct Customizations {
    pub(crate) yolo: Option<YoloCustomization>,
}

/// `customizations.yolo`: what the repository asks of yolo. Requests only: the user's config and
/// flags decide (see `policy`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct YoloCustomization {
    #[serde(default)]
    pub(crate) limits: LimitsRequest,
    #[serde(default)]
    pub(crate) firewall: FirewallRequest,
    /// The agent `yolo run` uses when none is named.
    pub(crate) agent: Option<String>,
    /// `{"HOST": ["GET /**", ...]}`: method and path rules that narrow what the user's config
    /// lets through to a host (`http_config`); never widen it.
    #[serde(default)]
    pub(crate) http: std::collections::BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct LimitsRequest {
    pub(crate) cpus: Option<f64>,
    /// e.g. "4g", "512m", "8gb".
    pub(crate) memory: Option<String>,
    pub(crate) pids: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct FirewallRequest {
    /// Domains (`example.com`), wildcards (`*.example.com`), CIDRs, `host:port`.
    #[serde(default)]
    pub(crate) allow: Vec<String>,
    /// Names of built-in presets in `firewall/`.
    #[serde(default)]
    pub(crate) presets: Vec<String>,
}
