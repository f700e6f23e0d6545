//! Docker Compose: the user's own `docker compose` (the v2 plugin) or `docker-compose` (v1, what
//! Debian ships), driven as the reference CLI drives it; and the project file yolo hands it.
//!
//! Unlike the reference CLI, which passes the user's files plus an override, yolo passes one
//! file: the project as `compose config` resolved it (files merged, variables and relative paths
//! resolved), changed where yolo must (`project_file`), written as JSON (YAML's subset) under
//! yolo's data folder. Three reasons: what yolo checked is exactly what runs (the agent can edit
//! the repository's Compose files between the check and the start); an override can only add,
//! and the dev service's own `networks`, `ports` or `hostname` cannot be combined with joining
//! the guard's namespaces; and every network, volume and service gets yolo's labels.

use super::labels;
use super::{message, Engine};
use crate::error::{Cause, Dependency, Error, Failure, Result};
use crate::firewall::NetworkMode;
use crate::policy::{Hardening, ServicesChecked, DEFAULT_CAPS};
use crate::run_spec::{ComposeSpec, Limits, MountKind, RunSpec};
use bollard::models::{ContainerUpdateBody, NetworkConnectRequest};
use bollard::query_parameters::{InspectNetworkOptions, ListNetworksOptions};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Compose's own label of the project name (on containers, networks, volumes).
pub(crate) const PROJECT_LABEL: &str = "com.docker.compose.project";
/// The network yolo adds for the services granted egress (`compose-egress`).
pub(crate) const EGRESS_NETWORK: &str = crate::run_spec::COMPOSE_EGRESS_NETWORK;
/// On the egress network: the guard is not attached to it.
const EGRESS_MARK: &str = "dev.yolo.egress";

/// Which Compose the host has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cli {
    /// `docker compose` (v2).
    Plugin,
    /// `docker-compose` (v1, or v2's standalone binary).
    Standalone,
}

impl Cli {
    /// `docker compose` if `docker compose version` works, else `docker-compose`, else a clear
    /// error saying how to install one.
    pub(crate) async fn detect() -> Result<Cli> {
        let works = |program: &str, args: &[&str]| {
            let mut command = tokio::process::Command::new(program);
            command
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            async move { command.status().await.is_ok_and(|s| s.success()) }
        };
        if works("docker", &["compose", "version"]).await {
            return Ok(Cli::Plugin);
        }
        if works("docker-compose", &["version"]).await {
            return Ok(Cli::Standalone);
        }
        Err(Error::dependency(
            Dependency::Compose,
            "this config runs Docker Compose (\"dockerComposeFile\"), but neither `docker compose` nor `docker-compose` is installed; install the Compose plugin (Debian/Ubuntu: `apt-get install docker-compose-plugin` from Docker's repository, or `apt-get install docker-compose`), then run `yolo up` again",
        ))
    }

    fn command(self) -> tokio::process::Command {
        match self {
            Cli::Plugin => {
                let mut c = tokio::process::Command::new("docker");
                c.arg("compose");
                c
            }
            Cli::Standalone => tokio::process::Command::new("docker-compose"),
        }
    }

    /// What this CLI needs in its environment besides what it is given.
    fn own_env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Cli::Plugin => &[],
            // The engine's own builder, which runs RUN steps in `container:<guard>`'s network
            // namespace (BuildKit has no such mode).
            Cli::Standalone => &[("COMPOSE_DOCKER_CLI_BUILD", "0"), ("DOCKER_BUILDKIT", "0")],
        }
    }

    /// The network a service's build runs its RUN steps in: the guard's namespace where the
    /// builder can join one (v1, the engine's builder), else none. `None` without a guard.
    pub(crate) fn build_network(self, guard: Option<&str>) -> String {
        match (self, guard) {
            (Cli::Standalone, Some(guard)) => format!("container:{guard}"),
            _ => "none".into(),
        }
    }

    /// The name Compose gives the image it builds for `service` of `project`.
    pub(crate) fn image_name(self, project: &str, service: &str) -> String {
        match self {
            Cli::Plugin => format!("{project}-{service}"),
            Cli::Standalone => format!("{project}_{service}"),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Cli::Plugin => "docker compose",
            Cli::Standalone => "docker-compose",
        }
    }
}

/// One Compose project: the CLI, its name, folder and files.
#[derive(Debug, Clone)]
pub(crate) struct Compose {
    pub(crate) cli: Cli,
    pub(crate) project: String,
    pub(crate) dir: PathBuf,
    pub(crate) files: Vec<PathBuf>,
    /// The environment Compose runs with: what it needs to reach the engine, and the host
    /// variables `${NAME}` in a Compose file may read (`COMPOSE_ENV` and the user's
    /// `pass_env`). Compose interpolates the files with its own environment, and the files are
    /// the repository's: with the host's whole environment, `${AWS_SECRET_ACCESS_KEY}` in a
    /// service's `environment` would copy that secret into a container.
    pub(crate) env: Vec<(String, String)>,
}

/// What Compose always sees of yolo's environment: how to find programs, the engine and the
/// Docker config, and the variables that say nothing secret.
const COMPOSE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TERM",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
];

impl Compose {
    /// The user's project, as devcontainer.json names it. `pass_env`: the host variables the
    /// user lets the repository read (yolo's `pass_env`), besides `COMPOSE_ENV`.
    pub(crate) fn of(cli: Cli, spec: &ComposeSpec, pass_env: &[String]) -> Compose {
        let env = std::env::vars()
            .filter(|(name, _)| {
                COMPOSE_ENV.contains(&name.as_str()) || pass_env.iter().any(|p| p == name)
            })
            .collect();
        Compose {
            cli,
            project: spec.project_name.clone(),
            dir: spec.project_dir.clone(),
            files: spec.files.clone(),
            env,
        }
    }

    /// The same project from yolo's one file instead.
    pub(crate) fn with_file(&self, file: &Path) -> Compose {
        Compose {
            files: vec![file.to_path_buf()],
            ..self.clone()
        }
    }

    fn command(&self) -> tokio::process::Command {
        let mut c = self.cli.command();
        c.env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .envs(self.cli.own_env().iter().copied());
        c.arg("--project-name").arg(&self.project);
        c.arg("--project-directory").arg(&self.dir);
        for f in &self.files {
            c.arg("--file").arg(f);
        }
        c.stdin(Stdio::null());
        c
    }

    /// `config`: the resolved project (YAML), or Compose's own words about what is wrong.
    pub(crate) async fn config(&self) -> std::result::Result<String, String> {
        let output = self
            .command()
            .arg("config")
            .output()
            .await
            .map_err(|e| format!("cannot run {}: {e}", self.cli.name()))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(compose_message(&output.stderr))
        }
    }

    /// Run a Compose command (`up`, `stop`, `down`...); its progress goes to yolo's stderr.
    pub(crate) async fn run(&self, args: &[&str]) -> Result<()> {
        self.run_showing(args, true).await
    }

    /// `run` with Compose's progress lines kept to itself: only its error is shown (taking
    /// down what a failed start made, where its lines would bury the reason).
    pub(crate) async fn run_quiet(&self, args: &[&str]) -> Result<()> {
        self.run_showing(args, false).await
    }

    async fn run_showing(&self, args: &[&str], show: bool) -> Result<()> {
        let output = self
            .command()
            .args(args)
            .stdout(if show {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::piped())
            .output()
            .await
            .map_err(|e| {
                Error::dependency(
                    Dependency::Compose,
                    Cause::of(format!("cannot run {}", self.cli.name()), e),
                )
            })?;
        // Compose's progress lines; shown, they say what is being built and started.
        for line in String::from_utf8_lossy(&output.stderr)
            .lines()
            .filter(|_| show)
        {
            eprintln!("{}", crate::visible::escape_controls(line));
        }
        if output.status.success() {
            return Ok(());
        }
        Err(Error::Docker {
            action: format!("{} {}", self.cli.name(), args.join(" ")),
            message: compose_message(&output.stderr),
            hint: None,
        })
    }
}

/// Compose's error text, without its progress lines, controls made visible.
fn compose_message(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    // Compose v1 marks its errors; its progress lines then say nothing more.
    let errors: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("ERROR") || l.starts_with("error"))
        .collect();
    let lines = if errors.is_empty() { lines } else { errors };
    crate::visible::escape_controls(&lines.join("; "))
}

/// What yolo changes in the resolved project.
pub(crate) struct FilePlan<'a> {
    pub(crate) spec: &'a RunSpec,
    pub(crate) compose: &'a ComposeSpec,
    pub(crate) checked: &'a ServicesChecked,
    pub(crate) mode: NetworkMode,
    /// The guard's container name; None without one (`--network none`).
    pub(crate) guard: Option<String>,
    /// Where the repository is bound in the dev service, if the files bind it: for the
    /// read-only paths (`spec.protected`, made for the workspace at `spec.workspace_mount`).
    pub(crate) workspace_target: Option<String>,
    /// `build.network` of every service that builds (`Cli::build_network`).
    pub(crate) build_network: String,
    /// The dev service starts through the exec audit's shim.
    pub(crate) shim: Option<Shim>,
    /// Without the shim: what the dev service runs when yolo must say it (the Features'
    /// entrypoints first), as `(entrypoint, command)`.
    pub(crate) command: Option<(Vec<String>, Vec<String>)>,
    /// The image with the Features installed, in place of the service's own `image`/`build`.
    pub(crate) image: Option<String>,
}

/// How the dev service starts through the exec audit's shim: what it then runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shim {
    /// The shim's folder on the host, bound read-only as the folder of `SHIM_PATH`.
    pub(crate) host_dir: PathBuf,
    pub(crate) entrypoint: Vec<String>,
    pub(crate) command: Vec<String>,
}

/// yolo's keep-alive command (`overrideCommand`).
pub(crate) fn keep_alive() -> Vec<String> {
    super::containers::keep_alive()
}

/// The Features' `entrypoints` run in order before `entrypoint` and `command`, as for yolo's
/// own container.
pub(crate) fn chain_entrypoints(
    entrypoints: &[String],
    entrypoint: Vec<String>,
    command: Vec<String>,
) -> (Vec<String>, Vec<String>) {
    super::containers::chain_entrypoints(entrypoints, entrypoint, command)
}

/// What the dev service runs, as Docker will: its own `entrypoint` (which drops the image's
/// command) or the image's, its own `command` or the image's. `None` when a value is a string
/// (Compose splits those shell-style; yolo does not guess) or nothing is named.
pub(crate) fn dev_command(
    service: &serde_yaml_ng::Value,
    image: Option<(Vec<String>, Vec<String>)>,
) -> Option<(Vec<String>, Vec<String>)> {
    let list = |key: &str| -> Option<Option<Vec<String>>> {
        match service.get(key) {
            None | Some(serde_yaml_ng::Value::Null) => Some(None),
            Some(serde_yaml_ng::Value::Sequence(items)) => items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<String>>>()
                .map(Some),
            // A string is split as Compose splits it (shell words, no shell).
            Some(serde_yaml_ng::Value::String(text)) => shlex::split(text).map(Some),
            Some(_) => None,
        }
    };
    let (own_entrypoint, own_command) = (list("entrypoint")?, list("command")?);
    let (image_entrypoint, image_command) = image.unwrap_or_default();
    let entrypoint_set = own_entrypoint.is_some();
    let entrypoint = own_entrypoint.unwrap_or(image_entrypoint);
    let command = match own_command {
        Some(c) => c,
        None if entrypoint_set => Vec::new(),
        None => image_command,
    };
    (!entrypoint.is_empty() || !command.is_empty()).then_some((entrypoint, command))
}

/// Keys of the dev service that cannot be combined with joining the guard's network namespace:
/// dropped (the guard publishes the ports yolo publishes; names are the guard's).
const DEV_DROPPED: &[&str] = &[
    "networks",
    "network_mode",
    "ports",
    "links",
    "extra_hosts",
    "dns",
    "dns_search",
    "dns_opt",
    "hostname",
    "domainname",
    "mac_address",
    "container_name",
];

/// The project file yolo hands Compose: `resolved` (what `compose config` printed) with the dev
/// service joined to the guard's network and PID namespaces and hardened as yolo's own
/// container is, every network of the project internal (the `compose-egress` services also on
/// a network with egress), and yolo's labels (and `YOLO_LABELS`) on everything it makes.
pub(crate) fn project_file(resolved: &serde_yaml_ng::Value, plan: &FilePlan) -> Result<Value> {
    let mut project: Value = serde_json::to_value(resolved).map_err(|e| {
        Error::failed(
            Failure::ComposeProject,
            Cause::of("the resolved Compose project", e),
        )
    })?;
    let owner = super::Owner::of(plan.spec);
    let project_labels = labels::service(&owner);
    let volume_labels = labels::volume(&owner.devcontainer_id);
    let root = project.as_object_mut().ok_or_else(|| {
        Error::failed(
            Failure::ComposeProject,
            "the resolved Compose project is not a mapping",
        )
    })?;
    // The newest format of the file's major version (each minor only adds keys): what yolo
    // sets needs `build.labels` and `build.network` (2.4, 3.4).
    let version = match root.get("version").and_then(Value::as_str) {
        Some(v) if v.starts_with('2') => "2.4",
        Some(v) if v.starts_with('3') => "3.8",
        Some(v) => v,
        None => "",
    }
    .to_string();
    if !version.is_empty() {
        root.insert("version".into(), json!(version));
    }
    let build_labels_ok = supports_build_labels(&version);

    // Networks: every one internal and labelled; the default one named, so it is too.
    let networks = object_at(root, "networks");
    networks.entry("default").or_insert_with(|| json!({}));
    for (name, network) in networks.iter_mut() {
        if network.is_null() {
            *network = json!({});
        }
        let external = network
            .get("external")
            .is_some_and(|e| e.as_bool() == Some(true) || e.is_object());
        if external {
            // Refused by policy already (`check_services`); never written.
            return Err(Error::Forbidden {
                file: plan.compose.files[0].clone(),
                property: format!("network \"{name}\": external"),
                value: "a network made outside the project".into(),
                reason: "it may be another project's, and it cannot be walled off the host; remove \"external\" (yolo makes the project's networks itself)".into(),
            });
        }
        let network = network.as_object_mut().expect("made an object above");
        // A name of the repository's own is declined by policy (`check_network`): the network
        // keeps the name Compose gives it, `<project>_<key>`.
        let own = format!("{}_{name}", plan.compose.project_name);
        if network
            .get("name")
            .is_some_and(|n| n.as_str() != Some(own.as_str()))
        {
            network.remove("name");
        }
        wall(network);
        merge_labels(network, &volume_labels);
    }
    if !plan.checked.egress.is_empty() {
        let mut labels = volume_labels.clone();
        labels.insert(EGRESS_MARK.into(), "true".into());
        let mut egress = Map::new();
        merge_labels(&mut egress, &labels);
        networks.insert(EGRESS_NETWORK.into(), Value::Object(egress));
    }

    // Volumes: labelled; yolo's own (agent state) declared external, made before.
    let volumes = object_at(root, "volumes");
    for volume in volumes.values_mut() {
        if volume.is_null() {
            *volume = json!({});
        }
        let external = volume.get("external").is_some_and(|e| !e.is_null());
        if let (false, Some(volume)) = (external, volume.as_object_mut()) {
            merge_labels(volume, &volume_labels);
        }
    }
    for m in plan
        .spec
        .mounts
        .iter()
        // An anonymous volume (no source) is Compose's to make, per container.
        .filter(|m| m.kind == MountKind::Volume && !m.source.is_empty())
    {
        volumes.insert(m.source.clone(), json!({ "external": true }));
    }

    let services = root
        .get_mut("services")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| {
            Error::failed(
                Failure::ComposeProject,
                "the resolved Compose project has no services",
            )
        })?;
    for (name, service) in services.iter_mut() {
        let service = service.as_object_mut().ok_or_else(|| {
            Error::failed(
                Failure::ComposeProject,
                format!("Compose service {name} is not a mapping"),
            )
        })?;
        if build_labels_ok {
            label_build(service, &volume_labels);
        }
        if let (true, Some(Value::Object(build))) =
            (supports_build_network(&version), service.get_mut("build"))
        {
            build.insert("network".into(), json!(plan.build_network));
        }
        if *name == plan.compose.service {
            dev_service(service, plan);
        } else {
            merge_labels(service, &project_labels);
            if let Some(granted) = plan.checked.siblings.get(name) {
                honoured(service, granted);
            }
            sibling(service);
            if plan.checked.egress.contains(name) {
                add_network(service, EGRESS_NETWORK);
            }
        }
    }
    Ok(project)
}

/// The bridge driver's option that leaves the bridge without an IPv4 address (Docker 1.13 and
/// later): the host then has no address on the network for a service to reach.
pub(crate) const INHIBIT_IPV4: &str = "com.docker.network.bridge.inhibit_ipv4";

/// A network of the project walled off the host: a Docker bridge, `internal` (Docker's
/// isolation rules drop what its members send off the subnet), without IPv4 address on the
/// host's side (`INHIBIT_IPV4`: the services' default gateway is an address nobody holds) and
/// without IPv6. Of the repository's options only the MTU stays (policy refused the rest).
fn wall(network: &mut Map<String, Value>) {
    network.insert("driver".into(), json!("bridge"));
    network.insert("internal".into(), json!(true));
    let mut options = Map::new();
    if let Some(mtu) = network
        .get("driver_opts")
        .and_then(|o| o.get("com.docker.network.driver.mtu"))
    {
        options.insert("com.docker.network.driver.mtu".into(), mtu.clone());
    }
    options.insert(INHIBIT_IPV4.into(), json!("true"));
    network.insert("driver_opts".into(), Value::Object(options));
    network.remove("enable_ipv6");
}

/// The kernel settings yolo gives every sibling with a network namespace of its own: IPv6 off,
/// so it cannot reach the IPv6 link-local address the host has on every Docker bridge.
const SIBLING_SYSCTLS: &[(&str, &str)] = &[
    ("net.ipv6.conf.all.disable_ipv6", "1"),
    ("net.ipv6.conf.default.disable_ipv6", "1"),
];

/// A sibling's capabilities, security options and `privileged` as policy honoured them: what
/// it asked for without a grant was declined (`policy::compose::check_services`).
fn honoured(service: &mut Map<String, Value>, granted: &Hardening) {
    for (key, values) in [
        ("cap_add", &granted.cap_add),
        ("security_opt", &granted.security_opt),
    ] {
        if values.is_empty() {
            service.remove(key);
        } else {
            service.insert(key.into(), json!(values));
        }
    }
    if !granted.privileged {
        service.remove("privileged");
    }
}

/// A service other than the dev service: without `NET_RAW` unless it was granted (a packet
/// socket sends frames the host's bridge takes in for any address of the host, past every
/// routing decision), and with `SIBLING_SYSCTLS` where it has a network namespace of its own.
fn sibling(service: &mut Map<String, Value>) {
    let granted = string_list(service, "cap_add").iter().any(|c| {
        matches!(
            c.trim().to_ascii_uppercase().trim_start_matches("CAP_"),
            "NET_RAW" | "ALL"
        )
    });
    if !granted {
        let mut drop = string_list(service, "cap_drop");
        push_unique(&mut drop, "NET_RAW".into());
        service.insert("cap_drop".into(), json!(drop));
    }
    let own_namespace = match service.get("network_mode").and_then(Value::as_str) {
        None => true,
        Some(mode) => mode == "bridge" || mode == "default",
    };
    if !own_namespace {
        return;
    }
    let mut sysctls = Map::new();
    match service.get("sysctls") {
        Some(Value::Object(map)) => sysctls.extend(map.clone()),
        Some(Value::Array(items)) => {
            for item in items.iter().filter_map(Value::as_str) {
                let (k, v) = item.split_once('=').unwrap_or((item, ""));
                sysctls.insert(k.trim().into(), json!(v.trim()));
            }
        }
        _ => {}
    }
    for (k, v) in SIBLING_SYSCTLS {
        sysctls.insert((*k).into(), json!(v));
    }
    service.insert("sysctls".into(), Value::Object(sysctls));
}

/// `build.labels` came with file formats 2.1 and 3.3 (and has always been in the Compose spec,
/// which has no version).
fn supports_build_labels(version: &str) -> bool {
    let mut parts = version.split('.');
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    match major {
        0 => version.is_empty(),
        2 => minor >= 1,
        3 => minor >= 3,
        _ => true,
    }
}

/// `build.network` came with file formats 2.4 and 3.4.
fn supports_build_network(version: &str) -> bool {
    let mut parts = version.split('.');
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    match major {
        0 => version.is_empty(),
        2 => minor >= 4,
        3 => minor >= 4,
        _ => true,
    }
}

/// The object under `key`, made when absent or null.
fn object_at<'a>(root: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = root.entry(key).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    slot.as_object_mut().expect("made an object above")
}

/// A string yolo puts in the project file, read by Compose as written: its `$` escaped (Compose
/// would interpolate `${PATH}` in a Feature's environment or entrypoint from the host's
/// environment, or fail on a lone `$`). What `compose config` printed is escaped already.
fn lit(s: &str) -> Value {
    Value::String(s.replace('$', "$$"))
}

/// `lit` for each string of a list.
fn lits<S: AsRef<str>>(items: &[S]) -> Value {
    Value::Array(items.iter().map(|s| lit(s.as_ref())).collect())
}

/// Label prefixes only yolo and VS Code's tooling write: a Compose file's own are dropped, so a
/// service cannot pass for yolo's container, its guard, or the dev container VS Code attaches to.
const RESERVED_LABELS: [&str; 2] = ["dev.yolo.", "devcontainer."];

/// `labels` (a mapping or a `K=V` list) with `add` merged in; `add` wins, and the file's own
/// reserved labels (`RESERVED_LABELS`) are dropped.
fn merge_labels(target: &mut Map<String, Value>, add: &BTreeMap<String, String>) {
    let mut merged = Map::new();
    match target.get("labels") {
        Some(Value::Object(map)) => merged.extend(map.clone()),
        Some(Value::Array(items)) => {
            for item in items.iter().filter_map(Value::as_str) {
                let (k, v) = item.split_once('=').unwrap_or((item, ""));
                merged.insert(k.to_string(), json!(v));
            }
        }
        _ => {}
    }
    merged.retain(|k, _| !RESERVED_LABELS.iter().any(|p| k.starts_with(p)));
    for (k, v) in add {
        merged.insert(k.clone(), lit(v));
    }
    target.insert("labels".into(), Value::Object(merged));
}

fn label_build(service: &mut Map<String, Value>, labels: &BTreeMap<String, String>) {
    match service.get_mut("build") {
        Some(Value::String(context)) => {
            let mut build = Map::new();
            build.insert("context".into(), json!(context));
            merge_labels(&mut build, labels);
            service.insert("build".into(), Value::Object(build));
        }
        Some(Value::Object(build)) => merge_labels(build, labels),
        _ => {}
    }
}

/// Add `network` to a service's networks (its implicit `default` kept).
fn add_network(service: &mut Map<String, Value>, network: &str) {
    match service.get_mut("networks") {
        Some(Value::Array(list)) => list.push(json!(network)),
        Some(Value::Object(map)) => {
            map.insert(network.into(), Value::Null);
        }
        _ => {
            service.insert("networks".into(), json!(["default", network]));
        }
    }
}

/// A list under `key` (or an empty one), as strings.
fn string_list(service: &Map<String, Value>, key: &str) -> Vec<String> {
    match service.get(key) {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// A service volume's target: `SOURCE:TARGET[:MODE]`, `TARGET`, or the long form's `target`.
fn volume_target(volume: &Value) -> Option<String> {
    match volume {
        Value::String(text) => {
            let mut parts = text.split(':');
            let first = parts.next()?;
            Some(parts.next().unwrap_or(first).to_string())
        }
        other => other.get("target")?.as_str().map(str::to_string),
    }
}

fn push_unique(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}

fn dev_service(service: &mut Map<String, Value>, plan: &FilePlan) {
    let spec = plan.spec;
    for key in DEV_DROPPED {
        service.remove(*key);
    }
    service.insert("container_name".into(), lit(&spec.container_name));
    if let Some(image) = &plan.image {
        // Built already (the service's own build first, then the Features on top of it).
        service.insert("image".into(), lit(image));
        service.remove("build");
    }
    match &plan.guard {
        Some(guard) => {
            service.insert("network_mode".into(), lit(&format!("container:{guard}")));
            // The guard is PID 1 of the namespace: it reaps (an init of the service's would
            // only be one more process).
            if !service.get("pid").is_some_and(|p| p == "host") {
                service.insert("pid".into(), lit(&format!("container:{guard}")));
                service.remove("init");
            }
        }
        None => {
            service.insert("network_mode".into(), json!("none"));
        }
    }
    // Capabilities: all dropped, yolo's set and the granted ones added back.
    let mut caps: Vec<String> = DEFAULT_CAPS.iter().map(|c| c.to_string()).collect();
    for cap in spec.cap_add.iter().chain(&plan.checked.dev_cap_add) {
        push_unique(&mut caps, cap.clone());
    }
    service.insert("cap_drop".into(), json!(["ALL"]));
    service.insert("cap_add".into(), lits(&caps));
    let mut security = vec!["no-new-privileges:true".to_string()];
    for opt in spec
        .security_opt
        .iter()
        .chain(&plan.checked.dev_security_opt)
    {
        push_unique(&mut security, opt.clone());
    }
    service.insert("security_opt".into(), lits(&security));
    if spec.privileged || plan.checked.dev_privileged {
        service.insert("privileged".into(), json!(true));
    } else {
        service.remove("privileged");
    }
    let mut devices = string_list(service, "devices");
    for d in &spec.devices {
        push_unique(&mut devices, d.replace('$', "$$"));
    }
    if !devices.is_empty() {
        service.insert("devices".into(), json!(devices));
    }
    if let Some(user) = &spec.container_user {
        service.insert("user".into(), lit(user));
    }
    if !spec.container_env.is_empty() {
        let mut env = Map::new();
        match service.get("environment") {
            Some(Value::Object(map)) => env.extend(map.clone()),
            Some(Value::Array(items)) => {
                for item in items.iter().filter_map(Value::as_str) {
                    match item.split_once('=') {
                        Some((k, v)) => env.insert(k.into(), json!(v)),
                        None => env.insert(item.into(), Value::Null),
                    };
                }
            }
            _ => {}
        }
        for (k, v) in &spec.container_env {
            env.insert(k.clone(), lit(v));
        }
        service.insert("environment".into(), Value::Object(env));
    }
    if let Some(shim) = &plan.shim {
        // The shim first: the filter is on before the service's first program.
        let mut entrypoint = vec![yolo_protocol::SHIM_PATH.to_string(), "shim".into()];
        entrypoint.extend(shim.entrypoint.iter().cloned());
        service.insert("entrypoint".into(), lits(&entrypoint));
        service.insert("command".into(), lits(&shim.command));
        service.remove("init");
    } else if let Some((entrypoint, command)) = &plan.command {
        service.insert("entrypoint".into(), lits(entrypoint));
        service.insert("command".into(), lits(command));
    } else if spec.override_command {
        service.insert("entrypoint".into(), lits(&super::containers::keep_alive()));
        service.insert("command".into(), json!([]));
    }
    let mut volumes = match service.remove("volumes") {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    // The binds of host paths the policy declined (`ServicesChecked::dev_declined_binds`).
    volumes
        .retain(|v| volume_target(v).is_none_or(|t| !plan.checked.dev_declined_binds.contains(&t)));
    for m in &spec.mounts {
        let ro = if m.read_only { ":ro" } else { "" };
        match m.kind {
            MountKind::Volume if m.source.is_empty() => {
                volumes.push(lit(&format!("{}{ro}", m.target)))
            }
            MountKind::Volume | MountKind::Bind => {
                volumes.push(lit(&format!("{}:{}{ro}", m.source, m.target)))
            }
            MountKind::Tmpfs => {
                let mut tmpfs = string_list(service, "tmpfs");
                tmpfs.push(m.target.replace('$', "$$"));
                service.insert("tmpfs".into(), json!(tmpfs));
            }
        }
    }
    // The read-only paths of the workspace, over the files' own bind of it.
    if let Some(target) = &plan.workspace_target {
        let base = spec.workspace_mount.target.trim_end_matches('/');
        for p in &spec.protected {
            let below = p.target.strip_prefix(base).unwrap_or(&p.target);
            let ro = if p.read_only { ":ro" } else { "" };
            volumes.push(lit(&format!(
                "{}:{}{below}{ro}",
                p.host.display(),
                target.trim_end_matches('/')
            )));
        }
    }
    if let Some(shim) = &plan.shim {
        volumes.push(lit(&format!(
            "{}:{}:ro",
            shim.host_dir.display(),
            super::guard_image::shim_mount_point()
        )));
    }
    if !volumes.is_empty() {
        service.insert("volumes".into(), Value::Array(volumes));
    }
    let mut dev_labels = labels::agent(spec, plan.mode);
    if plan.shim.is_some() {
        dev_labels.insert(labels::EXEC_AUDIT.into(), "shim".into());
    }
    dev_labels.insert(
        labels::COMPOSE_SHUTDOWN.into(),
        spec.shutdown_action.clone(),
    );
    merge_labels(service, &dev_labels);
}

/// Where the dev service binds the host folder `workspace` (or the folder holding it), in the
/// resolved project: the container path of `workspace` itself.
pub(crate) fn workspace_target(
    resolved: &serde_yaml_ng::Value,
    service: &str,
    workspace: &Path,
) -> Option<String> {
    let volumes = resolved
        .get("services")?
        .get(service)?
        .get("volumes")?
        .as_sequence()?;
    for v in volumes {
        let (source, target) = match v {
            serde_yaml_ng::Value::String(text) => {
                let mut parts = text.splitn(3, ':');
                (parts.next()?.to_string(), parts.next()?.to_string())
            }
            other => (
                other.get("source")?.as_str()?.to_string(),
                other.get("target")?.as_str()?.to_string(),
            ),
        };
        let Ok(below) = workspace.strip_prefix(&source) else {
            continue;
        };
        let below = crate::paths::slash_path(below);
        return Some(if below.is_empty() {
            target
        } else {
            format!("{}/{below}", target.trim_end_matches('/'))
        });
    }
    None
}

/// A network of a Compose project.
#[derive(Debug, Clone)]
pub(crate) struct ComposeNetwork {
    pub(crate) name: String,
    /// Its IPv4/IPv6 subnets.
    pub(crate) subnets: Vec<String>,
    /// yolo's egress network (the guard stays off it).
    pub(crate) egress: bool,
}

/// What the project's containers were attached to, read back from the engine.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Attachment {
    /// The container's service.
    pub(crate) service: String,
    pub(crate) network: String,
    /// The network's `dev.yolo.id` label.
    pub(crate) owner: Option<String>,
    /// yolo's egress network.
    pub(crate) egress: bool,
    /// The wall `project_file` asked for: an internal bridge with `INHIBIT_IPV4`.
    pub(crate) walled: bool,
}

/// The first attachment the project may not have: a network not labelled as this project's
/// (`devcontainer_id`), Docker's bridge for a service not granted egress (`egress`), or a
/// network of the project without its wall. `None` when all are the project's own.
pub(crate) fn foreign_attachment<'a>(
    attachments: &'a [Attachment],
    devcontainer_id: &str,
    egress: &[String],
) -> Option<&'a Attachment> {
    attachments.iter().find(|a| {
        let granted = egress.contains(&a.service);
        let ours = a.owner.as_deref() == Some(devcontainer_id);
        match (ours, a.egress) {
            (true, true) => !granted,
            (true, false) => !a.walled,
            // `network_mode: none`, Docker's network without interfaces; `network_mode:
            // bridge` with the grant, Docker's own bridge.
            (false, _) => {
                a.owner.is_some() || !(a.network == "none" || (granted && a.network == "bridge"))
            }
        }
    })
}

impl Engine {
    /// Every network each container of Compose project `project` is attached to, with what
    /// its labels and options say. Read after `up --no-start`: what Compose really joined,
    /// whatever spelling led it there.
    pub(crate) async fn compose_attachments(&self, project: &str) -> Result<Vec<Attachment>> {
        let options = bollard::query_parameters::ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![format!("{PROJECT_LABEL}={project}")],
            )])),
            ..Default::default()
        };
        let containers = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|e| Error::docker("listing containers", message(&e)))?;
        let mut out = Vec::new();
        for c in containers {
            let service = c
                .labels
                .as_ref()
                .and_then(|l| l.get("com.docker.compose.service").cloned())
                .unwrap_or_default();
            let id = c.id.unwrap_or_default();
            let info = self.inspect_raw(&id).await?;
            let networks = info
                .network_settings
                .and_then(|n| n.networks)
                .unwrap_or_default();
            for (name, _) in networks {
                let network = self
                    .docker
                    .inspect_network(&name, None::<InspectNetworkOptions>)
                    .await
                    .map_err(|e| {
                        Error::docker(format!("inspecting network {name}"), message(&e))
                    })?;
                let labels = network.labels.unwrap_or_default();
                let options = network.options.unwrap_or_default();
                out.push(Attachment {
                    service: service.clone(),
                    network: name,
                    owner: labels.get(labels::ID).cloned(),
                    egress: labels.get(EGRESS_MARK).is_some_and(|v| v == "true"),
                    walled: network.driver.as_deref() == Some("bridge")
                        && network.internal == Some(true)
                        && options.get(INHIBIT_IPV4).is_some_and(|v| v == "true")
                        && network.enable_ipv6 != Some(true),
                });
            }
        }
        Ok(out)
    }

    /// The networks Compose made for `project` and yolo labelled for `devcontainer_id`: the
    /// guard joins no other.
    pub(crate) async fn compose_networks(
        &self,
        project: &str,
        devcontainer_id: &str,
    ) -> Result<Vec<ComposeNetwork>> {
        let options = ListNetworksOptions {
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![
                    format!("{PROJECT_LABEL}={project}"),
                    format!("{}={devcontainer_id}", labels::ID),
                ],
            )])),
        };
        let listed = self
            .docker
            .list_networks(Some(options))
            .await
            .map_err(|e| Error::docker("listing networks", message(&e)))?;
        let mut out = Vec::new();
        for n in listed {
            let name = n.name.unwrap_or_default();
            let inspected = self
                .docker
                .inspect_network(&name, None::<InspectNetworkOptions>)
                .await
                .map_err(|e| Error::docker(format!("inspecting network {name}"), message(&e)))?;
            let subnets = inspected
                .ipam
                .and_then(|i| i.config)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|c| c.subnet)
                .collect();
            let egress = inspected
                .labels
                .is_some_and(|l| l.get(EGRESS_MARK).is_some_and(|v| v == "true"));
            out.push(ComposeNetwork {
                name,
                subnets,
                egress,
            });
        }
        Ok(out)
    }

    /// Attach `container` to `network`; already attached is fine.
    pub(crate) async fn connect_network(&self, network: &str, container: &str) -> Result<()> {
        let request = NetworkConnectRequest {
            container: container.to_string(),
            ..Default::default()
        };
        match self.docker.connect_network(network, request).await {
            Ok(()) => Ok(()),
            Err(e) if message(&e).contains("already exists") => Ok(()),
            Err(e) => Err(Error::docker(
                format!("attaching {container} to network {network}"),
                message(&e),
            )),
        }
    }

    /// Make the dev service's container again with the agent's read-only `/proc`
    /// ([`PROC_READONLY`](super::containers::PROC_READONLY)), which a Compose file cannot ask
    /// for: the container Compose created (`up --no-start`) is removed, and one with its very
    /// config, labels and host config (the guard's network and PID namespaces among them) is
    /// created under its name, so Compose takes it for its own and `up --no-recreate` starts
    /// it. Nothing is done to a container that has it already, or that runs.
    pub(crate) async fn compose_read_only_proc(&self, name: &str) -> Result<()> {
        let info = self.inspect_raw(name).await?;
        let mut host = info.host_config.unwrap_or_default();
        let has = host
            .readonly_paths
            .as_ref()
            .is_some_and(|paths| paths.iter().any(|p| p == "/proc"));
        if has || info.state.and_then(|s| s.running) == Some(true) {
            return Ok(());
        }
        host.readonly_paths = Some(
            super::containers::PROC_READONLY
                .iter()
                .map(|p| p.to_string())
                .collect(),
        );
        let remade =
            |why: String| Error::docker(format!("making {name} again with a read-only /proc"), why);
        // The inspected config and the create body are the same object of Docker's API.
        let config = serde_json::to_value(info.config.unwrap_or_default())
            .map_err(|e| remade(e.to_string()))?;
        let mut body: bollard::models::ContainerCreateBody =
            serde_json::from_value(config).map_err(|e| remade(e.to_string()))?;
        // What Docker fills in from the namespace it joins, and refuses to be given with it.
        if host
            .network_mode
            .as_deref()
            .is_some_and(|m| m.starts_with("container:"))
        {
            body.hostname = None;
            body.domainname = None;
            body.exposed_ports = None;
        }
        body.host_config = Some(host);
        self.remove_container(name, true).await?;
        self.create(name, None, body).await.map_err(remade)?;
        Ok(())
    }

    /// The value of the label `key` on a container.
    pub(crate) async fn container_label(&self, id: &str, key: &str) -> Result<Option<String>> {
        let info = self.inspect_raw(id).await?;
        Ok(info
            .config
            .and_then(|c| c.labels)
            .and_then(|l| l.get(key).cloned()))
    }

    /// An image's entrypoint and command; `None` when the image is not here.
    pub(crate) async fn image_command(
        &self,
        name: &str,
    ) -> Result<Option<(Vec<String>, Vec<String>)>> {
        if !self.image_exists(name).await? {
            return Ok(None);
        }
        let config = self
            .docker
            .inspect_image(name)
            .await
            .map_err(|e| Error::docker(format!("inspecting image {name}"), message(&e)))?
            .config
            .unwrap_or_default();
        Ok(Some((
            config.entrypoint.unwrap_or_default(),
            config.cmd.unwrap_or_default(),
        )))
    }

    /// The id of the container named `name`.
    pub(crate) async fn inspect_id(&self, name: &str) -> Result<String> {
        Ok(self.inspect_raw(name).await?.id.unwrap_or_default())
    }

    /// yolo's CPU, memory (no swap on top) and process limits on a container Compose made,
    /// read back as for a container yolo makes (`check_limits`; `required`: `[limits]
    /// required`).
    pub(crate) async fn set_limits(
        &self,
        container: &str,
        limits: &Limits,
        required: bool,
    ) -> Result<()> {
        let body = ContainerUpdateBody {
            nano_cpus: Some((limits.cpus * 1e9) as i64),
            memory: Some(limits.memory_bytes),
            memory_swap: Some(limits.memory_bytes),
            pids_limit: Some(limits.pids),
            ..Default::default()
        };
        self.docker
            .update_container(container, body)
            .await
            .map_err(|e| Error::docker(format!("limiting container {container}"), message(&e)))?;
        self.check_limits(container, container, limits, required)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spec as policy makes it for a Compose config, with a granted capability.
    fn spec() -> RunSpec {
        let mut spec = super::super::containers::tests::spec();
        spec.cap_add = vec!["SYS_PTRACE".into()];
        spec.container_env = BTreeMap::from([("A".into(), "1".into())]);
        spec
    }

    /// Project `p` with the dev service `app`, from `/repo/compose.yml`.
    fn compose_spec() -> ComposeSpec {
        ComposeSpec {
            files: vec!["/repo/compose.yml".into()],
            project_dir: "/repo".into(),
            project_name: "p".into(),
            service: "app".into(),
            run_services: None,
        }
    }

    /// The plan of a start behind the guard `g`, without the exec audit.
    fn plan<'a>(
        spec: &'a RunSpec,
        compose: &'a ComposeSpec,
        checked: &'a ServicesChecked,
    ) -> FilePlan<'a> {
        FilePlan {
            spec,
            compose,
            checked,
            mode: NetworkMode::Firewall,
            guard: Some("g".into()),
            workspace_target: None,
            build_network: "container:g".into(),
            shim: None,
            command: None,
            image: None,
        }
    }

    #[test]
    fn what_yolo_sets_is_escaped_for_compose_and_the_features_image_replaces_the_build() {
        let resolved: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            "services:\n  app:\n    build: {context: .}\n    environment: {OWN: $$HOME}\n",
        )
        .unwrap();
        let mut spec = spec();
        spec.container_env = BTreeMap::from([("P".into(), "/opt/bin:${PATH}".into())]);
        spec.metadata_label = r#"[{"containerEnv": {"A": "${X}"}}]"#.into();
        let compose = compose_spec();
        let checked = ServicesChecked::default();
        let plan = FilePlan {
            command: Some((
                vec!["/bin/sh".into(), "-c".into(), "a\nexec \"$@\"".into()],
                vec![],
            )),
            image: Some("yolo-features-x:latest".into()),
            ..plan(&spec, &compose, &checked)
        };
        let file = project_file(&resolved, &plan).unwrap();
        let app = &file["services"]["app"];
        assert_eq!(app["environment"]["P"], "/opt/bin:$${PATH}");
        assert_eq!(
            app["environment"]["OWN"], "$$HOME",
            "Compose's own text is kept"
        );
        assert_eq!(app["entrypoint"][2], "a\nexec \"$$@\"");
        assert_eq!(
            app["labels"]["devcontainer.metadata"],
            r#"[{"containerEnv": {"A": "$${X}"}}]"#
        );
        assert_eq!(app["image"], "yolo-features-x:latest");
        assert!(app.get("build").is_none(), "{app}");
    }

    #[test]
    fn the_project_file_joins_the_dev_service_to_the_guard_and_closes_every_network() {
        let spec = spec();
        let resolved: serde_yaml_ng::Value = serde_yaml_ng::from_str(&format!(
            "version: '3'\nservices:\n  app:\n    image: x\n    networks: [front]\n    ports: ['8080:80']\n    hostname: dev\n    environment: [B=2]\n  db:\n    build: /repo/db\n    networks: [front, back]\n    privileged: true\n    cap_add: [SYS_NICE, SYS_ADMIN]\n    security_opt: [seccomp=unconfined]\n  cache:\n    image: y\nnetworks:\n  front: {{}}\n  back:\n    name: dev-network\n  own:\n    name: {}_own\nvolumes:\n  data: {{}}\n",
            spec.container_name
        ))
        .unwrap();
        let compose = ComposeSpec {
            files: vec!["/repo/.devcontainer/compose.yml".into()],
            project_dir: "/repo/.devcontainer".into(),
            project_name: spec.container_name.clone(),
            service: "app".into(),
            run_services: None,
        };
        let checked = ServicesChecked {
            egress: vec!["cache".into()],
            siblings: [(
                "db".to_string(),
                Hardening {
                    cap_add: vec!["SYS_NICE".into()],
                    security_opt: vec![],
                    privileged: false,
                },
            )]
            .into(),
            ..Default::default()
        };
        let plan = plan(&spec, &compose, &checked);
        let file = project_file(&resolved, &plan).unwrap();
        assert_eq!(file["version"], "3.8");
        let app = &file["services"]["app"];
        for key in ["networks", "ports", "hostname"] {
            assert!(app.get(key).is_none(), "{key} dropped: {app}");
        }
        assert_eq!(app["network_mode"], "container:g");
        assert_eq!(app["pid"], "container:g");
        assert_eq!(app["container_name"], json!(spec.container_name));
        assert_eq!(app["cap_drop"], json!(["ALL"]));
        let caps = app["cap_add"].as_array().unwrap();
        assert_eq!(caps.len(), DEFAULT_CAPS.len() + 1);
        assert!(caps.contains(&json!("SYS_PTRACE")));
        assert_eq!(app["security_opt"], json!(["no-new-privileges:true"]));
        assert_eq!(app["environment"], json!({"A": "1", "B": "2"}));
        assert_eq!(app["labels"]["dev.yolo.role"], "agent");
        assert!(app["labels"]["devcontainer.local_folder"].is_string());
        // The siblings: labelled, on internal networks; the granted one on the egress one too.
        assert_eq!(file["services"]["db"]["labels"]["dev.yolo.role"], "service");
        // What a sibling asked for is written as policy honoured it: the granted capability,
        // not the declined ones, nor `privileged` or a security option without a grant.
        let db = &file["services"]["db"];
        assert_eq!(db["cap_add"], json!(["SYS_NICE"]));
        assert!(
            db.get("privileged").is_none() && db.get("security_opt").is_none(),
            "{db}"
        );
        assert_eq!(file["services"]["db"]["build"]["context"], "/repo/db");
        assert!(file["services"]["db"]["build"]["labels"]["dev.yolo.managed"].is_string());
        assert_eq!(file["services"]["db"]["build"]["network"], "container:g");
        assert_eq!(
            file["services"]["cache"]["networks"],
            json!(["default", EGRESS_NETWORK])
        );
        for name in ["front", "default"] {
            assert_eq!(file["networks"][name]["internal"], true, "{name}");
        }
        // A name of the repository's own (declined by policy) is left out: Compose names the
        // network `<project>_back`, never joining one that exists under `dev-network`; its
        // own name for a network stays.
        assert!(file["networks"]["back"].get("name").is_none());
        assert_eq!(
            file["networks"]["own"]["name"],
            json!(format!("{}_own", spec.container_name))
        );
        assert!(file["networks"][EGRESS_NETWORK].get("internal").is_none());
        assert!(file["volumes"]["data"]["labels"]["dev.yolo.managed"].is_string());
        // With the shim, it starts the service's command.
        let shim = Shim {
            host_dir: "/data/bin/shim-1".into(),
            entrypoint: vec![],
            command: vec!["sleep".into(), "infinity".into()],
        };
        let plan = FilePlan {
            shim: Some(shim),
            ..plan
        };
        let file = project_file(&resolved, &plan).unwrap();
        let app = &file["services"]["app"];
        assert_eq!(app["entrypoint"], json!([yolo_protocol::SHIM_PATH, "shim"]));
        assert_eq!(app["command"], json!(["sleep", "infinity"]));
        assert_eq!(app["labels"]["dev.yolo.exec-audit"], "shim");
        assert!(app["volumes"]
            .as_array()
            .unwrap()
            .contains(&json!("/data/bin/shim-1:/.yolo:ro")));
        // Without a guard (`--network none`), no network at all.
        let plan = FilePlan {
            guard: None,
            ..plan
        };
        let file = project_file(&resolved, &plan).unwrap();
        assert_eq!(file["services"]["app"]["network_mode"], "none");
        assert!(file["services"]["app"].get("pid").is_none());
    }

    #[test]
    fn every_network_is_walled_and_the_siblings_lose_raw_sockets_and_ipv6() {
        let resolved: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            "services:\n  app:\n    image: x\n  db:\n    image: y\n    networks: [front]\n    cap_drop: [MKNOD]\n    sysctls: [net.core.somaxconn=1024]\n  ping:\n    image: y\n    cap_add: [NET_RAW]\n  side:\n    image: y\n    network_mode: service:db\nnetworks:\n  front:\n    driver_opts:\n      com.docker.network.driver.mtu: '1400'\n    enable_ipv6: false\n",
        )
        .unwrap();
        let spec = spec();
        let compose = compose_spec();
        let checked = ServicesChecked {
            egress: vec!["ping".into()],
            ..Default::default()
        };
        let file = project_file(&resolved, &plan(&spec, &compose, &checked)).unwrap();
        for name in ["front", "default"] {
            let net = &file["networks"][name];
            assert_eq!(net["driver"], "bridge", "{name}");
            assert_eq!(net["internal"], true, "{name}");
            assert_eq!(net["driver_opts"][INHIBIT_IPV4], "true", "{name}");
            assert!(net.get("enable_ipv6").is_none(), "{name}");
        }
        assert_eq!(
            file["networks"]["front"]["driver_opts"]["com.docker.network.driver.mtu"],
            "1400"
        );
        // The egress network keeps Docker's gateway: it is the grant's way out.
        let egress = &file["networks"][EGRESS_NETWORK];
        assert!(egress.get("internal").is_none() && egress.get("driver_opts").is_none());
        let services = &file["services"];
        assert_eq!(services["db"]["cap_drop"], json!(["MKNOD", "NET_RAW"]));
        assert_eq!(
            services["db"]["sysctls"],
            json!({"net.core.somaxconn": "1024", "net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"})
        );
        // A granted NET_RAW stays; a service in another's namespace takes that one's settings.
        assert!(
            services["ping"].get("cap_drop").is_none(),
            "{}",
            services["ping"]
        );
        assert_eq!(services["side"]["cap_drop"], json!(["NET_RAW"]));
        assert!(services["side"].get("sysctls").is_none());
        // The dev service is the guard's business.
        assert!(services["app"].get("sysctls").is_none());
    }

    #[test]
    fn only_the_projects_own_walled_networks_are_joined() {
        let a = |service: &str, network: &str, owner: Option<&str>, egress, walled| Attachment {
            service: service.into(),
            network: network.into(),
            owner: owner.map(str::to_string),
            egress,
            walled,
        };
        let granted = vec!["web".to_string()];
        let fine = [
            a("db", "p_default", Some("id"), false, true),
            a("web", "p_yolo-egress", Some("id"), true, false),
            a("web", "bridge", None, false, false),
            a("off", "none", None, false, false),
        ];
        assert_eq!(foreign_attachment(&fine, "id", &granted), None);
        for bad in [
            a("db", "q_default", Some("other"), false, true),
            a("db", "planted", None, false, true),
            a("db", "p_default", Some("id"), false, false),
            a("db", "p_yolo-egress", Some("id"), true, false),
            a("db", "bridge", None, false, false),
            a("web", "host", None, false, false),
        ] {
            let list = [fine[0].clone(), bad.clone()];
            assert_eq!(foreign_attachment(&list, "id", &granted), Some(&bad));
        }
    }

    #[test]
    fn an_external_network_is_refused() {
        let resolved: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            "services:\n  app:\n    image: x\nnetworks:\n  shared:\n    external: true\n",
        )
        .unwrap();
        let spec = spec();
        let compose = compose_spec();
        let checked = ServicesChecked::default();
        let plan = plan(&spec, &compose, &checked);
        let e = project_file(&resolved, &plan).unwrap_err();
        assert!(
            e.to_string().contains("network \"shared\": external"),
            "{e}"
        );
    }

    #[test]
    fn the_shim_runs_what_docker_would_run() {
        let yaml = |text: &str| -> serde_yaml_ng::Value { serde_yaml_ng::from_str(text).unwrap() };
        let image = Some((vec!["/init".to_string()], vec!["serve".to_string()]));
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            dev_command(&yaml("image: x"), image.clone()),
            Some((strings(&["/init"]), strings(&["serve"])))
        );
        assert_eq!(
            dev_command(&yaml("command: [sleep, infinity]"), image.clone()),
            Some((strings(&["/init"]), strings(&["sleep", "infinity"])))
        );
        // An entrypoint of the service's own drops the image's command.
        assert_eq!(
            dev_command(&yaml("entrypoint: [/bin/app]"), image.clone()),
            Some((strings(&["/bin/app"]), vec![]))
        );
        // A string is split into words as Compose splits it; one it could not split is unknown.
        assert_eq!(
            dev_command(
                &yaml(r#"command: sh -c 'echo "a b"; sleep infinity'"#),
                image.clone()
            ),
            Some((
                strings(&["/init"]),
                strings(&["sh", "-c", r#"echo "a b"; sleep infinity"#])
            ))
        );
        assert_eq!(
            dev_command(&yaml(r#"command: "sleep 'infinity""#), image.clone()),
            None
        );
        assert_eq!(dev_command(&yaml("image: x"), None), None);
    }

    #[test]
    fn build_labels_only_where_the_format_has_them() {
        for (v, ok) in [
            ("", true),
            ("2", false),
            ("2.1", true),
            ("2.4", true),
            ("3", false),
            ("3.2", false),
            ("3.8", true),
        ] {
            assert_eq!(supports_build_labels(v), ok, "{v}");
        }
        for (v, ok) in [
            ("", true),
            ("2.3", false),
            ("2.4", true),
            ("3.3", false),
            ("3.4", true),
        ] {
            assert_eq!(supports_build_network(v), ok, "{v}");
        }
    }

    #[test]
    fn labels_merge_from_either_form_and_yolo_wins() {
        let add = BTreeMap::from([("a".to_string(), "yolo".to_string())]);
        let mut list = json!({"labels": ["a=user", "b=2"]});
        merge_labels(list.as_object_mut().unwrap(), &add);
        assert_eq!(list["labels"], json!({"a": "yolo", "b": "2"}));
        let mut map = json!({"labels": {"c": "3"}});
        merge_labels(map.as_object_mut().unwrap(), &add);
        assert_eq!(map["labels"], json!({"a": "yolo", "c": "3"}));
        // A file's own yolo or devcontainer labels are dropped: no sibling passes for the
        // guard, the agent, or the container VS Code attaches to.
        let mut spoof = json!({"labels": ["dev.yolo.role=guard", "devcontainer.local_folder=/x", "dev.yolologic=ok"]});
        merge_labels(spoof.as_object_mut().unwrap(), &add);
        assert_eq!(spoof["labels"], json!({"a": "yolo", "dev.yolologic": "ok"}));
    }

    #[test]
    fn the_workspace_target_is_found_from_a_bind_of_it_or_above() {
        let resolved: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            "services:\n  app:\n    volumes:\n    - /home/me/repo:/workspaces/repo:cached\n  db:\n    image: x\n",
        )
        .unwrap();
        let ws = Path::new("/home/me/repo");
        assert_eq!(
            workspace_target(&resolved, "app", ws).as_deref(),
            Some("/workspaces/repo")
        );
        assert_eq!(
            workspace_target(&resolved, "app", Path::new("/home/me/repo/sub")).as_deref(),
            Some("/workspaces/repo/sub")
        );
        assert_eq!(workspace_target(&resolved, "db", ws), None);
    }
}
