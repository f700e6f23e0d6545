//! Compose configs (`dockerComposeFile` + `service`): the files, the dev service and
//! `runServices` from devcontainer.json (`compose_spec`), and every service of the resolved
//! project checked against the user's grants (`check_services`), with the same grants and
//! messages as the devcontainer.json properties, the property named `service "db": privileged`.
//!
//! The resolved project is what `docker compose config` prints (files merged, variables and
//! paths resolved): what is checked is what runs, because `bring_up::compose` hands Compose that
//! same resolved text (see there). Pure: the YAML comes in as a value, and where the host paths
//! it names really lead in the `Facts` (`compose_host_paths` lists them for the caller).

use super::grants::{normalize_cap, Need};
use super::{Eval, Input};
use crate::error::{Error, Result};
use crate::paths::normalize_path;
use crate::run_spec::{ComposeSpec, RunSpec};
use serde_yaml_ng::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

impl Eval<'_> {
    /// The Compose part of the spec, or None for an image or Dockerfile config.
    pub(super) fn compose_spec(&mut self, container_name: &str) -> Result<Option<ComposeSpec>> {
        let c = self.config;
        let (Some(files), Some(service)) = (&c.docker_compose_file, &c.service) else {
            return Ok(None);
        };
        if c.workspace_folder.is_none() {
            return Err(self.config_error(
                "workspaceFolder",
                "a Compose config needs \"workspaceFolder\": the folder in the dev service where the Compose file mounts the repository (e.g. \"/workspaces/${localWorkspaceFolderBasename}\")",
            ));
        }
        let mut paths = Vec::new();
        for (i, file) in files.0.iter().enumerate() {
            let property = if files.0.len() == 1 {
                "dockerComposeFile".to_string()
            } else {
                format!("dockerComposeFile[{i}]")
            };
            paths.push(self.compose_path(&property, file)?);
        }
        let project_dir = paths[0].parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(Some(ComposeSpec {
            files: paths,
            project_dir,
            project_name: crate::devcontainer::names::compose_project(container_name),
            service: service.clone(),
            run_services: c.run_services.clone(),
        }))
    }

    /// A Compose file, relative to the config's folder; outside the repository it needs
    /// `host-mount` (it decides what runs, and the agent must not be able to write it either).
    fn compose_path(&mut self, property: &str, relative: &str) -> Result<PathBuf> {
        let dir = self
            .input
            .config_file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let path = normalize_path(&dir.join(relative)).ok_or_else(|| {
            self.config_error(
                property,
                format!("\"{relative}\" does not resolve to an absolute path"),
            )
        })?;
        if !self.in_repository(&path) {
            let value = format!("the host file {} outside the repository", path.display());
            let reason = "a Compose file outside the repository is not reviewed with it";
            self.require(Need::HostMount(path.clone()), property, &value, reason)?;
        }
        Ok(path)
    }

    /// What a grant must name when `path` leads outside the repository: lexically, or through
    /// a link (where it really leads, from the `Facts`; not known counts as outside). `None`:
    /// it stays inside.
    fn leads_outside(&self, path: &Path) -> Option<PathBuf> {
        match self.input.facts.real_path(path) {
            Some(real) if self.in_repository(path) && self.in_repository(real) => None,
            Some(real) => Some(real.to_path_buf()),
            None => Some(path.to_path_buf()),
        }
    }

    fn in_repository(&self, path: &Path) -> bool {
        [
            Some(self.input.workspace.to_path_buf()),
            self.git_root.clone(),
        ]
        .iter()
        .flatten()
        .any(|root| path.starts_with(root))
    }
}

/// What the services' check allowed, for the Compose file yolo writes.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ServicesChecked {
    /// The services, in the order the resolved project lists them.
    pub(crate) services: Vec<String>,
    /// Services granted a network with egress (`compose-egress`).
    pub(crate) egress: Vec<String>,
    /// What the dev service itself asks for and was granted: added to the agent's hardening.
    pub(crate) dev_cap_add: Vec<String>,
    pub(crate) dev_security_opt: Vec<String>,
    pub(crate) dev_privileged: bool,
    /// The grants that allowed something, as the user typed them.
    pub(crate) grants_used: Vec<String>,
    /// What the dev service asked for and its container is made without (its capabilities,
    /// security options, `privileged`): yolo writes those of the dev service itself.
    pub(crate) declined: Vec<crate::run_spec::Declined>,
    /// The targets of the dev service's binds of host paths outside the repository that were
    /// declined: left out of the service yolo writes (`engine::compose::dev_service`).
    pub(crate) dev_declined_binds: Vec<String>,
    /// Each other service's capabilities, security options and `privileged` as yolo writes
    /// them: what was granted (a request without a grant is declined, as the dev service's).
    pub(crate) siblings: BTreeMap<String, Hardening>,
}

/// A service's hardening requests that were honoured.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Hardening {
    /// Capability names, without `CAP_`.
    pub(crate) cap_add: Vec<String>,
    /// As written (trimmed): the granted ones and `no-new-privileges`.
    pub(crate) security_opt: Vec<String>,
    pub(crate) privileged: bool,
}

/// Check every service of the resolved project (`resolved`, what `compose config` printed) and
/// its named volumes against the user's grants. `input.config_file` is the file errors name
/// (the first Compose file). The dev service must exist, and so must every `runServices` entry.
pub(crate) fn check_services(
    input: &Input,
    compose: &ComposeSpec,
    resolved: &Value,
) -> Result<ServicesChecked> {
    let mut eval = Eval::new(input, &input.flags.grants);
    let mut checked = ServicesChecked::default();
    let services = resolved
        .get("services")
        .and_then(Value::as_mapping)
        .ok_or_else(|| eval.config_error("services", "the Compose project has no services"))?;
    for (name, _) in services {
        checked
            .services
            .push(name.as_str().unwrap_or_default().to_string());
    }
    let known = |name: &str| checked.services.iter().any(|s| s == name);
    if !known(&compose.service) {
        return Err(Error::Config {
            file: input.config_file.to_path_buf(),
            line: None,
            column: None,
            property: Some("service".into()),
            message: format!(
                "the Compose files define no service \"{}\" (they define: {})",
                compose.service,
                checked.services.join(", ")
            ),
        });
    }
    for name in compose.run_services.iter().flatten() {
        if !known(name) {
            return Err(Error::Config {
                file: input.config_file.to_path_buf(),
                line: None,
                column: None,
                property: Some("runServices".into()),
                message: format!(
                    "the Compose files define no service \"{name}\" (they define: {})",
                    checked.services.join(", ")
                ),
            });
        }
    }
    for (name, service) in services {
        let name = name.as_str().unwrap_or_default();
        let dev = name == compose.service;
        // The grant checks record what they allow in a spec; this one is thrown away (the
        // Compose file keeps the service's own words, checked here).
        let mut scratch = eval.base_spec()?;
        if dev {
            // The dev service's capabilities, security options and `privileged` never reach
            // the engine as written (`engine::compose::dev_service` sets them: yolo's set and
            // what was granted), so a request without a grant is declined like capAdd.
            eval.check_hardening(name, service, dev, &mut scratch)?;
            // Its binds too: yolo writes the dev service's volumes and leaves a declined one out.
            checked.dev_declined_binds = eval.check_dev_volumes(name, service)?;
        } else {
            // A sibling's too: the project file keeps only what was granted
            // (`engine::compose::project_file`), so its container starts without the rest.
            eval.check_hardening(name, service, dev, &mut scratch)?;
            let security_opt = strings(service.get("security_opt"))
                .iter()
                .map(|o| o.trim().to_string())
                .filter(|o| {
                    super::security::keeps_no_new_privileges(o) || scratch.security_opt.contains(o)
                })
                .collect();
            let hardening = Hardening {
                cap_add: scratch.cap_add.clone(),
                security_opt,
                privileged: scratch.privileged,
            };
            checked.siblings.insert(name.to_string(), hardening);
        }
        eval.strictly(|eval| eval.check_service(name, service, dev, &mut scratch, &mut checked))?;
        if !dev {
            eval.check_dev_namespace(name, service, services, &compose.service)?;
        }
        if dev {
            checked.dev_cap_add = scratch.cap_add;
            checked.dev_security_opt = scratch.security_opt;
            checked.dev_privileged = scratch.privileged;
        }
    }
    // The project's networks are walled by yolo (`engine::compose::project_file`): nothing in
    // their definition may choose another network, the host's bridge, or the addresses.
    if let Some(networks) = resolved.get("networks").and_then(Value::as_mapping) {
        for (name, network) in networks {
            eval.check_network(&compose.project_name, &scalar(name), network)?;
        }
    }
    if let Some(volumes) = resolved.get("volumes").and_then(Value::as_mapping) {
        for (name, volume) in volumes {
            eval.check_volume(name.as_str().unwrap_or_default(), volume)?;
        }
    }
    // A secret or config from a file is that host file mounted into the services using it.
    for (kind, name, file) in secret_files(resolved) {
        let property = format!("{kind} \"{name}\": file");
        let path = normalize_path(&input.workspace.join(&file)).ok_or_else(|| {
            eval.config_error(
                &property,
                format!("the host path \"{file}\" does not resolve"),
            )
        })?;
        if let Some(real) = eval.leads_outside(&path) {
            eval.require_host_path(&property, &real, &format!("/run/{kind}/{name}"))?;
        }
    }
    checked.grants_used = eval.used.clone();
    checked.declined = eval.declined.clone();
    Ok(checked)
}

/// The name a service that Compose builds gives its image (`build` with `image`) must not be one
/// of the images yolo trusts: `yolo-*` (the guard's `yolo-guard:<version>-<digest>`, the
/// Features images) or one the user named for the guard (`protected`: `guard_image`,
/// `guard_base_image`). Compose tags what it built with that name, replacing the image on the
/// host: the repository's Dockerfile would become the firewall of every later `up`, of any
/// project. `file` is the Compose file errors name.
pub(crate) fn check_built_image_names(
    file: &Path,
    resolved: &Value,
    protected: &[Option<&str>],
) -> Result<()> {
    let Some(services) = resolved.get("services").and_then(Value::as_mapping) else {
        return Ok(());
    };
    for (name, service) in services {
        let (Some(_), Some(image)) = (service.get("build"), service.get("image").map(scalar))
        else {
            continue;
        };
        let normalized = normalize_image(&image);
        let repository = normalized
            .rsplit_once(':')
            .filter(|(_, tag)| !tag.contains('/'))
            .map_or(normalized.as_str(), |(repo, _)| repo);
        let reserved = repository.starts_with("yolo-") || repository == "yolo";
        let users = protected
            .iter()
            .flatten()
            .any(|p| normalize_image(p) == normalized);
        if reserved || users {
            let whose = if reserved {
                "yolo's own images are named yolo-*"
            } else {
                "it is the image your config names for yolo's guard"
            };
            return Err(Error::Forbidden {
                file: file.to_path_buf(),
                property: format!("service \"{}\": image", scalar(name)),
                value: image,
                reason: format!(
                    "Compose would tag the image it builds from the repository with this name, replacing the image on the host ({whose}); name the image something else or leave \"image\" out"
                ),
            });
        }
    }
    Ok(())
}

/// Compose reads `.env` in the project folder (the repository's) for its own settings too, and
/// takes a `DOCKER_*` one (`DOCKER_HOST`, `DOCKER_CONTEXT`, `DOCKER_CERT_PATH`, ...) when yolo's
/// environment lacks it: the host's Compose would connect to whatever engine or address the
/// repository names. Such a key is refused, before Compose runs; the file's other variables
/// (interpolation, `COMPOSE_PROJECT_NAME`, which yolo's flags override) stay the repository's.
/// `text`: the file at `path`, read by the caller.
pub(crate) fn check_compose_dotenv(path: &Path, text: &str) -> Result<()> {
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        let Some((key, _)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if !line.starts_with('#') && key.to_ascii_uppercase().starts_with("DOCKER_") {
            return Err(Error::Forbidden {
                file: path.to_path_buf(),
                property: format!("line {}: {key}", index + 1),
                value: crate::visible::escape_controls(key),
                reason: "Compose would take it from the repository's .env and connect to the engine or address it names, not yours; remove the line (set DOCKER_HOST or DOCKER_CONTEXT in your own environment to choose the engine)".into(),
            });
        }
    }
    Ok(())
}

/// `name[:tag]` as Docker resolves it locally: `docker.io/` and `library/` dropped, `:latest`
/// added when there is no tag or digest.
fn normalize_image(name: &str) -> String {
    let name = name.trim();
    let name = name.strip_prefix("docker.io/").unwrap_or(name);
    let name = name.strip_prefix("index.docker.io/").unwrap_or(name);
    let name = name.strip_prefix("library/").unwrap_or(name);
    let last = name.rsplit('/').next().unwrap_or(name);
    if last.contains(':') || last.contains('@') {
        name.to_string()
    } else {
        format!("{name}:latest")
    }
}

/// The Compose files with every file their services `extends` from, transitively (first the
/// given ones): Compose reads them all, and what they hold (an `env_file`, a service's
/// environment) ends up in the resolved project without their names. Files that cannot be read
/// are skipped (`compose config` already said what is wrong). `read` reads a file for it (the
/// caller's: this module reads no file itself).
pub(crate) fn compose_files_extended(
    files: &[PathBuf],
    read: impl Fn(&Path) -> Option<String>,
) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = files.to_vec();
    let mut next = 0;
    while next < all.len() && all.len() < 256 {
        let file = all[next].clone();
        next += 1;
        let Some(text) = read(&file) else {
            continue;
        };
        let Ok(doc) = serde_yaml_ng::from_str::<Value>(&text) else {
            continue;
        };
        let dir = file.parent().unwrap_or(Path::new("/"));
        let Some(services) = doc.get("services").and_then(Value::as_mapping) else {
            continue;
        };
        for (_, service) in services {
            let Some(written) = service
                .get("extends")
                .and_then(|e| e.get("file"))
                .and_then(Value::as_str)
            else {
                continue;
            };
            let path = normalize_path(&dir.join(written)).unwrap_or_else(|| dir.join(written));
            if !all.contains(&path) {
                all.push(path);
            }
        }
    }
    all
}

/// A file a service `extends` from (`files`: those `compose_files_extended` added) outside the
/// repository, or leading out through a link, is a host file whose services' settings (their
/// environment among them) would be copied into the project: it needs `host-mount`. Returns
/// the grants used.
pub(crate) fn check_extended_files(input: &Input, files: &[PathBuf]) -> Result<Vec<String>> {
    let mut eval = Eval::new(input, &input.flags.grants);
    for path in files {
        let Some(real) = eval.leads_outside(path) else {
            continue;
        };
        let value = format!("the host file {} outside the repository", real.display());
        let reason = "Compose would copy the settings of its services (their environment among them) into this project";
        eval.require(
            Need::HostMount(real),
            "services.*.extends.file",
            &value,
            reason,
        )?;
    }
    Ok(eval.used.clone())
}

/// `env_file` entries of the Compose files as written (the resolved project has already read
/// them into `environment`): (service, file as written, host path). A file outside the
/// repository is a host file whose every line would become the container's environment, so it
/// needs `host-mount` as a bind of it would. Returns the grants used.
pub(crate) fn check_env_files(
    input: &Input,
    files: &[(String, String, PathBuf)],
) -> Result<Vec<String>> {
    let mut eval = Eval::new(input, &input.flags.grants);
    for (service, written, path) in files {
        let property = format!("service \"{service}\": env_file");
        let path = normalize_path(path).ok_or_else(|| {
            eval.config_error(
                &property,
                format!("the host path \"{written}\" does not resolve"),
            )
        })?;
        // Where a link in the repository really leads is what Compose reads.
        if let Some(real) = eval.leads_outside(&path) {
            eval.require_host_path(&property, &real, "the container's environment")?;
        }
    }
    Ok(eval.used.clone())
}

/// The host paths the services' check follows through links (`Facts::real_paths`), folded:
/// the files of secrets and configs, the sources of bind mounts, the build contexts. The
/// caller looks where each leads before `check_services`.
pub(crate) fn compose_host_paths(workspace: &Path, resolved: &Value) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = secret_files(resolved)
        .into_iter()
        .filter_map(|(_, _, file)| normalize_path(&workspace.join(file)))
        .collect();
    let services = resolved.get("services").and_then(Value::as_mapping);
    for (_, service) in services.into_iter().flatten() {
        for (source, _) in bind_volumes(service) {
            paths.extend(normalize_path(&workspace.join(source)));
        }
        paths.extend(build_context(service));
    }
    paths
}

/// The secrets and configs read from a host file: (kind, name, file as resolved).
fn secret_files(resolved: &Value) -> Vec<(&'static str, String, String)> {
    let mut files = Vec::new();
    for kind in ["secrets", "configs"] {
        let Some(entries) = resolved.get(kind).and_then(Value::as_mapping) else {
            continue;
        };
        for (name, entry) in entries {
            if let Some(file) = entry.get("file").map(scalar) {
                files.push((kind, scalar(name), file));
            }
        }
    }
    files
}

/// A service's bind mounts: (host source as written, target).
fn bind_volumes(service: &Value) -> Vec<(String, String)> {
    let Some(Value::Sequence(volumes)) = service.get("volumes") else {
        return Vec::new();
    };
    let mut binds = Vec::new();
    for volume in volumes {
        let (kind, source, target) = match volume {
            Value::String(text) => {
                let mut parts = text.splitn(3, ':');
                let first = parts.next().unwrap_or_default().to_string();
                match parts.next() {
                    Some(target) if first.starts_with('/') || first.starts_with('.') => {
                        ("bind".to_string(), first, target.to_string())
                    }
                    Some(target) => ("volume".to_string(), first, target.to_string()),
                    None => ("volume".to_string(), String::new(), first),
                }
            }
            other => (
                other.get("type").map(scalar).unwrap_or_default(),
                other.get("source").map(scalar).unwrap_or_default(),
                other.get("target").map(scalar).unwrap_or_default(),
            ),
        };
        if kind == "bind" {
            binds.push((source, target));
        }
    }
    binds
}

/// A service's build context on the host, folded: resolved to an absolute path by `compose
/// config` (a URL is Docker's to fetch, and no host folder).
fn build_context(service: &Value) -> Option<PathBuf> {
    let context = service.get("build").and_then(|b| match b {
        Value::String(s) => Some(s.clone()),
        other => other.get("context").map(scalar),
    })?;
    context
        .starts_with('/')
        .then(|| normalize_path(Path::new(&context)).unwrap_or_default())
}

/// A string or the items of a list, as strings (`cap_add: [A, B]`, `devices: ["/dev/x"]`).
fn strings(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Sequence(items)) => items.iter().map(scalar).collect(),
        Some(Value::Null) | None => Vec::new(),
        Some(other) => vec![scalar(other)],
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => serde_yaml_ng::to_string(other)
            .unwrap_or_default()
            .trim()
            .to_string(),
    }
}

impl Eval<'_> {
    /// A service's `privileged`, `cap_add` and `security_opt`.
    fn check_hardening(
        &mut self,
        name: &str,
        service: &Value,
        dev: bool,
        scratch: &mut RunSpec,
    ) -> Result<()> {
        let property = |key: &str| format!("service \"{name}\": {key}");
        let get = |key: &str| service.get(key);
        if get("privileged").and_then(Value::as_bool) == Some(true) {
            self.grant_privileged(scratch, &property("privileged"))?;
        }
        for cap in strings(get("cap_add")) {
            let cap = normalize_cap(&cap);
            // What yolo gives every dev container anyway needs no grant.
            if dev && super::DEFAULT_CAPS.contains(&cap.as_str()) {
                continue;
            }
            self.grant_cap(scratch, &property("cap_add"), &cap)?;
        }
        for opt in strings(get("security_opt")) {
            self.grant_security_opt(scratch, &property("security_opt"), &opt)?;
        }
        Ok(())
    }

    fn check_service(
        &mut self,
        name: &str,
        service: &Value,
        dev: bool,
        scratch: &mut RunSpec,
        checked: &mut ServicesChecked,
    ) -> Result<()> {
        let property = |key: &str| format!("service \"{name}\": {key}");
        let get = |key: &str| service.get(key);
        for device in strings(get("devices")) {
            self.grant_device(scratch, &property("devices"), &device)?;
        }
        // Device access by cgroup rule is `--device` without the path.
        for rule in strings(get("device_cgroup_rules")) {
            self.grant_device(scratch, &property("device_cgroup_rules"), &rule)?;
        }
        // Another container's volumes: the project's own services only.
        for from in strings(get("volumes_from")) {
            if from.starts_with("container:") {
                return Err(Error::Forbidden {
                    file: self.file(),
                    property: property("volumes_from"),
                    value: from,
                    reason: "the volumes of a container outside the Compose project are not the repository's to hand out; name a service of the project (volumes_from: [SERVICE]) instead".into(),
                });
            }
        }
        for key in ["pid", "ipc", "uts", "userns_mode"] {
            let Some(value) = get(key).map(scalar) else {
                continue;
            };
            // Another service of the project is the project's own business.
            if value.starts_with("service:") || (key == "ipc" && value == "shareable") {
                continue;
            }
            let flag = if key == "userns_mode" { "userns" } else { key };
            self.grant_namespace(scratch, &property(key), flag, &value)?;
        }
        if !dev {
            self.check_sibling_network(name, service, checked)?;
            self.check_sibling_sysctls(name, service)?;
        }
        if !dev {
            self.check_service_volumes(name, service)?;
        }
        // The whole folder a link leads to would be sent to Docker.
        if let Some(path) = build_context(service).and_then(|p| self.leads_outside(&p)) {
            let value = format!("the host folder {} outside the repository", path.display());
            let reason = "files outside the repository could be copied into the image";
            self.require(
                Need::HostMount(path),
                &property("build.context"),
                &value,
                reason,
            )?;
        }
        Ok(())
    }

    /// A network of the project, as the repository defines it. yolo makes each one a Docker
    /// bridge that is `internal` and holds no address of the host (`engine::compose`), so
    /// nothing here may choose what it is or where it leads: another network by name (Compose
    /// joins a network that already exists under the name it makes: another yolo project's),
    /// another driver (a host interface as `parent`), the bridge's options (an existing host
    /// bridge by `com.docker.network.bridge.name`, an address on it), IPv6 (the bridge takes
    /// the IPv6 gateway address), or the subnet and gateway (one holding an address of the host
    /// makes the host answer on it).
    fn check_network(&mut self, project: &str, name: &str, network: &Value) -> Result<()> {
        let property = |key: &str| format!("network \"{name}\": {key}");
        let file = self.file();
        let forbidden = |property: String, value: String, reason: &str| Error::Forbidden {
            file: file.clone(),
            property,
            value,
            reason: reason.into(),
        };
        if name == crate::run_spec::COMPOSE_EGRESS_NETWORK {
            return Err(forbidden(
                format!("network \"{name}\""),
                "the name yolo gives the network of the services granted compose-egress".into(),
                "a service on it would leave the project without the grant; rename the network",
            ));
        }
        let get = |key: &str| network.get(key).filter(|v| !v.is_null());
        if let Some(external) = get("external").filter(|e| e.as_bool() != Some(false)) {
            return Err(forbidden(
                property("external"),
                format!("the network {} made outside the project", scalar(external)),
                "it may be another project's (another yolo session's internal network), and a service on it would reach what sits there; remove \"external\" (yolo makes the project's networks itself)",
            ));
        }
        // Compose names a network `<project>_<key>`; `compose config` of the v2 plugin prints
        // that name itself.
        if let Some(given) = get("name").map(scalar) {
            let own = format!("{project}_{name}");
            if given != own {
                let value = format!("the network named \"{given}\"");
                let why = "Compose joins a network that already exists under that name, which may be another project's (another yolo session's internal network)";
                if !self.declines() {
                    return Err(forbidden(
                        property("name"),
                        value,
                        &format!(
                            "{why}; remove \"name\" (yolo names the project's networks itself)"
                        ),
                    ));
                }
                // Left out of the project file yolo writes (`engine::compose::project_file`):
                // the network is the project's own under Compose's own name for it.
                let reason =
                    format!("{why}; it is named {own}, as Compose names it without \"name\"");
                self.decline(&property("name"), &value, &reason, None);
            }
        }
        if let Some(driver) = get("driver").map(scalar).filter(|d| d != "bridge") {
            return Err(forbidden(
                property("driver"),
                format!("the network driver \"{driver}\""),
                "yolo walls the project's networks off the host as Docker bridges only (another driver can lead to a host interface); remove \"driver\"",
            ));
        }
        if let Some(options) = get("driver_opts").and_then(Value::as_mapping) {
            for (key, value) in options {
                let key = scalar(key);
                if key != "com.docker.network.driver.mtu" {
                    return Err(forbidden(
                        property(&format!("driver_opts.{key}")),
                        scalar(value),
                        "yolo sets the bridge's options itself (they can choose an existing host bridge or put an address of the host on it); only com.docker.network.driver.mtu is kept",
                    ));
                }
            }
        }
        if let Some(ipam) = get("ipam") {
            let set = |v: Option<&Value>| match v {
                None | Some(Value::Null) => false,
                Some(Value::Sequence(s)) => !s.is_empty(),
                Some(Value::Mapping(m)) => !m.is_empty(),
                Some(Value::String(s)) => s != "default",
                Some(_) => true,
            };
            if set(ipam.get("driver")) || set(ipam.get("config")) {
                return Err(forbidden(
                    property("ipam"),
                    "the network's addresses (subnet, gateway or IPAM driver)".into(),
                    "a subnet that holds an address of the host makes the host answer the services on it; remove \"ipam\" (and the services' fixed ipv4_address/ipv6_address) and let Docker choose",
                ));
            }
        }
        if get("enable_ipv6").is_some_and(|v| v.as_bool() != Some(false)) {
            return Err(forbidden(
                property("enable_ipv6"),
                "IPv6".into(),
                "Docker gives the host the network's IPv6 gateway address, which the services would reach; remove \"enable_ipv6\"",
            ));
        }
        Ok(())
    }

    /// `network_mode` or `pid` of a sibling naming `service:X`, where X (directly or through
    /// its own `service:` of the same key) is the dev service: the dev service's namespaces are
    /// the guard's, and the sibling would sit inside the firewall with its own capabilities
    /// (a packet socket's frames pass no nftables rule).
    fn check_dev_namespace(
        &self,
        name: &str,
        service: &Value,
        services: &serde_yaml_ng::Mapping,
        dev: &str,
    ) -> Result<()> {
        for key in ["network_mode", "pid"] {
            let mut value = service.get(key).map(scalar);
            let mut hops = 0;
            while let Some(target) = value.as_deref().and_then(|v| v.strip_prefix("service:")) {
                if target == dev {
                    return Err(Error::Forbidden {
                        file: self.file(),
                        property: format!("service \"{name}\": {key}"),
                        value: value.clone().unwrap_or_default(),
                        reason: format!(
                            "the {} namespace of the dev service is the firewall guard's: a service there would sit inside the firewall with capabilities the agent lacks; remove it",
                            if key == "pid" { "process" } else { "network" }
                        ),
                    });
                }
                hops += 1;
                if hops > services.len() {
                    break;
                }
                value = services
                    .get(Value::String(target.to_string()))
                    .and_then(|s| s.get(key))
                    .map(scalar);
            }
        }
        Ok(())
    }

    /// A sibling's own IPv6 (`sysctls` turning `disable_ipv6` off) would reach the host on the
    /// IPv6 link-local address every Docker bridge has: yolo turns it off in the siblings.
    fn check_sibling_sysctls(&self, name: &str, service: &Value) -> Result<()> {
        let keys: Vec<String> = match service.get("sysctls") {
            Some(Value::Mapping(map)) => map.keys().map(scalar).collect(),
            Some(Value::Sequence(items)) => items
                .iter()
                .map(|i| scalar(i).split('=').next().unwrap_or_default().to_string())
                .collect(),
            _ => Vec::new(),
        };
        for key in keys {
            let normalized = key.trim().replace('/', ".");
            if normalized.starts_with("net.ipv6.") && normalized.ends_with(".disable_ipv6") {
                return Err(Error::Forbidden {
                    file: self.file(),
                    property: format!("service \"{name}\": sysctls"),
                    value: key,
                    reason: "yolo turns IPv6 off in the other services: the host has an IPv6 link-local address on every Docker bridge, the project's too; remove it".into(),
                });
            }
        }
        Ok(())
    }

    /// A sibling sits on the project's internal networks; its own network namespace choices
    /// (`host`, the default bridge, a network outside the project) would give it egress.
    fn check_sibling_network(
        &mut self,
        name: &str,
        service: &Value,
        checked: &mut ServicesChecked,
    ) -> Result<()> {
        let property = format!("service \"{name}\": network_mode");
        let egress_granted = self.grants.find(&Need::ComposeEgress(name.into()));
        if let Some(grant) = egress_granted {
            self.record_use(grant.to_string());
            checked.egress.push(name.to_string());
        }
        let Some(mode) = service.get("network_mode").map(scalar) else {
            return Ok(());
        };
        if mode == "host" || mode.starts_with("container:") {
            return Err(Error::Forbidden {
                file: self.file(),
                property,
                value: mode,
                reason: "host-network cannot be granted: a service sharing the host's (or a foreign container's) network has no firewall at all; remove it".into(),
            });
        }
        if mode == "none" || mode.starts_with("service:") {
            return Ok(());
        }
        // Any other name is a network outside the project: another yolo project's, whose
        // segment a service with Docker's default capabilities (NET_RAW) could answer ARP on.
        if mode != "bridge" && mode != "default" {
            return Err(Error::Forbidden {
                file: self.file(),
                property,
                value: mode,
                reason: "a network outside the Compose project cannot be granted: it may be another project's, and a service on it could reach or impersonate what sits there; use the project's networks, or `bridge` with the compose-egress grant".into(),
            });
        }
        // `bridge` or `default`: Docker's bridge, with egress.
        if egress_granted.is_none() {
            let reason = "the other services of a Compose project get no network out (their networks are made internal); this one asks for Docker's bridge";
            return Err(Error::Refused {
                file: self.file(),
                property,
                value: mode,
                reason: reason.into(),
                grant: super::grants::grant_hint(&Need::ComposeEgress(name.into()).narrowest()),
            });
        }
        Ok(())
    }

    /// Bind mounts of host paths other than the repository need `host-mount` (the Docker socket
    /// `docker-socket`), as `mounts` in devcontainer.json do.
    fn check_service_volumes(&mut self, name: &str, service: &Value) -> Result<()> {
        let property = format!("service \"{name}\": volumes");
        for (source, target) in bind_volumes(service) {
            let source = normalize_path(&self.input.workspace.join(&source)).ok_or_else(|| {
                self.config_error(
                    &property,
                    format!("the host path \"{source}\" does not resolve"),
                )
            })?;
            // Docker follows a link the agent planted in the repository (`./data -> /`), and
            // creates a missing part under where its parent really leads.
            if let Some(real) = self.leads_outside(&source) {
                self.require_host_path(&property, &real, &target)?;
            }
        }
        Ok(())
    }

    /// The dev service's binds, as `check_service_volumes` but declined where requests are
    /// declined; the targets of the declined ones.
    fn check_dev_volumes(&mut self, name: &str, service: &Value) -> Result<Vec<String>> {
        let property = format!("service \"{name}\": volumes");
        let mut declined = Vec::new();
        for (source, target) in bind_volumes(service) {
            let source = normalize_path(&self.input.workspace.join(&source)).ok_or_else(|| {
                self.config_error(
                    &property,
                    format!("the host path \"{source}\" does not resolve"),
                )
            })?;
            if let Some(real) = self.leads_outside(&source) {
                if !self.allow_host_path(&property, &real, &target)? {
                    declined.push(target);
                }
            }
        }
        Ok(declined)
    }

    /// A named volume whose driver options bind a host folder (`type: none, o: bind, device:
    /// /path`) is a host mount under another name.
    fn check_volume(&mut self, name: &str, volume: &Value) -> Result<()> {
        let Some(device) = volume
            .get("driver_opts")
            .and_then(|o| o.get("device"))
            .map(scalar)
        else {
            return Ok(());
        };
        let property = format!("volume \"{name}\": driver_opts.device");
        let path = normalize_path(Path::new(&device)).ok_or_else(|| {
            self.config_error(
                &property,
                format!("the host path \"{device}\" must be absolute"),
            )
        })?;
        if self.in_repository(&path) {
            return Ok(());
        }
        self.require_host_path(&property, &path, name)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{Facts, Flags, Grant, Grants, Input, UserLayer};
    use super::*;
    use crate::devcontainer::model::DevContainer;
    use serde_json::json;

    fn compose(extra: serde_json::Value) -> serde_json::Value {
        let mut config = json!({
            "dockerComposeFile": "compose.yml",
            "service": "app",
            "workspaceFolder": "/workspaces/repo"
        });
        for (k, v) in extra.as_object().unwrap() {
            config[k] = v.clone();
        }
        config
    }

    #[test]
    fn the_compose_spec_resolves_the_files_and_keeps_the_service() {
        let spec = ok(compose(json!({
            "dockerComposeFile": ["compose.yml", "../compose.override.yml"],
            "runServices": ["db"]
        })));
        let c = spec.compose.expect("a compose spec");
        assert_eq!(
            c.files,
            [
                PathBuf::from(format!("{WS}/.devcontainer/compose.yml")),
                PathBuf::from(format!("{WS}/compose.override.yml"))
            ]
        );
        assert_eq!(c.project_dir, PathBuf::from(format!("{WS}/.devcontainer")));
        assert_eq!(
            c.project_name,
            crate::devcontainer::names::compose_project(&spec.container_name)
        );
        assert_eq!(
            (c.service.as_str(), c.run_services),
            ("app", Some(vec!["db".into()]))
        );
        assert_eq!(spec.shutdown_action, "stopCompose");
        // A Compose service keeps its own command unless the config says otherwise.
        assert!(!spec.override_command);
        assert!(ok(compose(json!({"overrideCommand": true}))).override_command);
    }

    #[test]
    fn a_compose_config_is_checked_like_any_other() {
        let (property, _) =
            config_err(case(compose(json!({"shutdownAction": "stopContainer"}))).run());
        assert_eq!(property, "shutdownAction");
        assert_eq!(
            ok(compose(json!({"shutdownAction": "none"}))).shutdown_action,
            "none"
        );
        let mut no_folder = compose(json!({}));
        no_folder.as_object_mut().unwrap().remove("workspaceFolder");
        let (property, message) = config_err(case(no_folder).run());
        assert_eq!(property, "workspaceFolder");
        assert!(message.contains("Compose"), "{message}");
        let (property, value, grant) =
            refused(case(compose(json!({"dockerComposeFile": "/srv/compose.yml"}))).run());
        assert_eq!(property, "dockerComposeFile");
        assert!(value.contains("/srv/compose.yml"), "{value}");
        assert_grant_text(&grant, "host-mount=/srv/compose.yml");
    }

    /// `check_services` over a resolved project (YAML), with `grants`; no host path it names
    /// passes through a link.
    fn check(yaml: &str, grants: &[&str]) -> Result<ServicesChecked> {
        check_with_links(yaml, grants, &[])
    }

    /// The same with `[policy] requests = "refuse"`.
    fn check_refusing(yaml: &str, grants: &[&str]) -> Result<ServicesChecked> {
        REFUSING.with(|r| r.set(true));
        let result = check_with_links(yaml, grants, &[]);
        REFUSING.with(|r| r.set(false));
        result
    }

    thread_local! {
        static REFUSING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// The same, where the host paths `links` name lead elsewhere (path, where it leads).
    fn check_with_links(
        yaml: &str,
        grants: &[&str],
        links: &[(&str, &str)],
    ) -> Result<ServicesChecked> {
        let resolved: Value = serde_yaml_ng::from_str(yaml).unwrap();
        let mut facts = Facts::default();
        for path in compose_host_paths(Path::new(WS), &resolved) {
            facts.real_paths.insert(path.clone(), path);
        }
        for (path, real) in links {
            facts.real_paths.insert(path.into(), real.into());
        }
        let scratch = DevContainer {
            image: Some("compose".into()),
            ..Default::default()
        };
        let parsed: Vec<Grant> = grants.iter().map(|g| g.parse().unwrap()).collect();
        let flags = Flags {
            grants: Grants::parse(&[], &parsed).unwrap(),
            ..Default::default()
        };
        let file = PathBuf::from(format!("{WS}/.devcontainer/compose.yml"));
        let mut user = UserLayer::default();
        if REFUSING.with(|r| r.get()) {
            user.requests = super::super::Requests::Refuse;
        }
        let input = Input {
            config: &scratch,
            config_file: &file,
            workspace: Path::new(WS),
            devcontainer_id: ID,
            user: &user,
            flags: &flags,
            host_ids: None,
            agent_volumes: vec![],
            metadata: &[],
            facts: &facts,
        };
        let spec = ComposeSpec {
            files: vec![file.clone()],
            project_dir: file.parent().unwrap().into(),
            project_name: "p".into(),
            service: "app".into(),
            run_services: None,
        };
        check_services(&input, &spec, &resolved)
    }

    fn refusal(result: Result<ServicesChecked>) -> (String, String, String) {
        match result {
            Err(Error::Refused {
                property,
                value,
                grant,
                ..
            }) => (property, value, grant),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    const APP: &str = "services:\n  app:\n    image: x\n    volumes:\n    - /home/me/src/My Repo:/workspaces/repo:rw\n";

    /// A sibling's capabilities, security options and `privileged`: declined without a grant
    /// (the project file keeps only what was granted, `engine::compose::project_file`),
    /// honoured with one, refused under `requests = "refuse"`.
    #[test]
    fn a_siblings_hardening_requests_are_declined_without_a_grant() {
        let cases = [
            (
                "  db:\n    privileged: true\n",
                "service \"db\": privileged",
                "privileged",
            ),
            (
                "  db:\n    cap_add: [NET_ADMIN]\n",
                "service \"db\": cap_add",
                "cap-add=NET_ADMIN",
            ),
            (
                "  db:\n    security_opt: [seccomp=unconfined, no-new-privileges:true]\n",
                "service \"db\": security_opt",
                "security-opt=seccomp=unconfined",
            ),
        ];
        for (service, property, grant) in cases {
            let yaml = format!("{APP}{service}");
            let checked = check(&yaml, &[]).unwrap_or_else(|e| panic!("{service}: {e}"));
            let declined: Vec<_> = checked
                .declined
                .iter()
                .map(|d| (d.property.as_str(), d.grant.as_deref()))
                .collect();
            assert_eq!(declined, [(property, Some(grant))], "{service}");
            let kept = &checked.siblings["db"];
            assert!(
                kept.cap_add.is_empty() && !kept.privileged,
                "{service}: {kept:?}"
            );
            assert!(
                kept.security_opt
                    .iter()
                    .all(|o| o == "no-new-privileges:true"),
                "{kept:?}"
            );
            let (got, _, hint) = refusal(check_refusing(&yaml, &[]));
            assert_eq!(got, property, "{service}");
            assert_grant_text(&hint, grant);
            let checked = check(&yaml, &[grant]).unwrap_or_else(|e| panic!("{grant}: {e}"));
            assert_eq!(checked.grants_used, [grant.to_string()], "{service}");
            assert!(checked.declined.is_empty(), "{service}");
            let kept = &checked.siblings["db"];
            assert!(
                kept.privileged
                    || kept.cap_add == ["NET_ADMIN"]
                    || kept
                        .security_opt
                        .contains(&"seccomp=unconfined".to_string()),
                "{service}: {kept:?}"
            );
        }
    }

    #[test]
    fn every_service_meets_the_grants() {
        let cases = [
            ("  db:\n    devices: [/dev/fuse]\n", "service \"db\": devices", "device"),
            ("  db:\n    pid: host\n", "service \"db\": pid", "host-pid"),
            ("  db:\n    ipc: host\n", "service \"db\": ipc", "host-ipc"),
            (
                "  db:\n    volumes:\n    - /etc:/etc2:ro\n",
                "service \"db\": volumes",
                "host-mount=/etc",
            ),
            (
                "  db:\n    volumes:\n    - type: bind\n      source: /var/run/docker.sock\n      target: /s\n",
                "service \"db\": volumes",
                "docker-socket",
            ),
            ("  db:\n    network_mode: bridge\n", "service \"db\": network_mode", "compose-egress=db"),
            (
                "  db:\n    build:\n      context: /srv/other\n",
                "service \"db\": build.context",
                "host-mount=/srv/other",
            ),
            (
                "  db:\n    device_cgroup_rules: ['c 1:3 rwm']\n",
                "service \"db\": device_cgroup_rules",
                "device",
            ),
            (
                "  db:\n    secrets: [key]\nsecrets:\n  key:\n    file: /home/me/.ssh/id_rsa\n",
                "secrets \"key\": file",
                "host-mount=/home/me/.ssh/id_rsa",
            ),
            (
                "  db:\n    configs: [c]\nconfigs:\n  c:\n    file: /etc/shadow\n",
                "configs \"c\": file",
                "host-mount=/etc/shadow",
            ),
        ];
        for (service, property, grant) in cases {
            let yaml = format!("{APP}{service}");
            let (got, _, hint) = refusal(check(&yaml, &[]));
            assert_eq!(got, property, "{service}");
            assert_grant_text(&hint, grant);
            let checked = check(&yaml, &[grant]).unwrap_or_else(|e| panic!("{grant}: {e}"));
            assert_eq!(checked.grants_used, [grant.to_string()], "{service}");
        }
        // A secret from the repository needs nothing; another container's volumes, no grant.
        let yaml = format!(
            "{APP}  db:\n    secrets: [k]\nsecrets:\n  k:\n    file: {WS}/.devcontainer/k\n"
        );
        assert!(check(&yaml, &[]).is_ok());
        let yaml = format!("{APP}  db:\n    volumes_from: ['container:other:rw']\n");
        let forbidden = check(&yaml, &["host-mount"]);
        assert!(
            matches!(&forbidden, Err(Error::Forbidden { property, .. }) if property == "service \"db\": volumes_from"),
            "{forbidden:?}"
        );
        assert!(check(&format!("{APP}  db:\n    volumes_from: ['app']\n"), &[]).is_ok());
        // The dev service too, and what it was granted goes to its hardening; what was not is
        // declined (yolo writes the dev service's capabilities itself), or refused when the
        // user chose `[policy] requests = "refuse"`.
        let yaml = "services:\n  app:\n    cap_add: [SYS_PTRACE, CHOWN]\n    privileged: true\n    security_opt: [seccomp=unconfined]\n";
        let checked = check(yaml, &["cap-add"]).unwrap();
        assert_eq!(checked.dev_cap_add, ["SYS_PTRACE"]);
        assert!(!checked.dev_privileged);
        assert!(checked.dev_security_opt.is_empty());
        let declined: Vec<_> = checked
            .declined
            .iter()
            .map(|d| d.property.as_str())
            .collect();
        assert_eq!(
            declined,
            [
                "service \"app\": privileged",
                "service \"app\": security_opt"
            ]
        );
        assert_eq!(
            refusal(check_refusing(yaml, &["cap-add"])).0,
            "service \"app\": privileged"
        );
        let checked = check(yaml, &["cap-add", "privileged", "security-opt"]).unwrap();
        assert_eq!(checked.dev_cap_add, ["SYS_PTRACE"]);
        assert!(checked.dev_privileged);
        assert!(checked.declined.is_empty());
        // A named volume bound to a host folder is a host mount.
        let yaml = format!("{APP}volumes:\n  data:\n    driver_opts:\n      type: none\n      o: bind\n      device: /srv/data\n");
        assert_eq!(
            refusal(check(&yaml, &[])).0,
            "volume \"data\": driver_opts.device"
        );
    }

    #[test]
    fn the_host_network_is_never_granted_and_the_repository_is_no_host_mount() {
        let yaml = format!("{APP}  db:\n    network_mode: host\n");
        assert!(matches!(
            check(&yaml, &["compose-egress"]),
            Err(Error::Forbidden { property, .. }) if property == "service \"db\": network_mode"
        ));
        // Another project's network by name: not Docker's bridge, and no grant makes it so.
        let yaml = format!("{APP}  db:\n    network_mode: yolo-other-0abc1234-net\n");
        assert!(matches!(
            check(&yaml, &["compose-egress"]),
            Err(Error::Forbidden { property, value, .. })
                if property == "service \"db\": network_mode" && value == "yolo-other-0abc1234-net"
        ));
        let yaml = format!("{APP}  db:\n    network_mode: default\n");
        assert!(check(&yaml, &["compose-egress"]).is_ok());
        let yaml = format!(
            "{APP}  db:\n    image: x\n    network_mode: service:cache\n    volumes:\n    - data:/var/lib/db\n    - /home/me/src/My Repo/db:/seed:ro\n  cache:\n    image: x\n"
        );
        let checked = check(&yaml, &[]).unwrap();
        assert_eq!(checked.services, ["app", "db", "cache"]);
        assert!(checked.egress.is_empty() && checked.grants_used.is_empty());
        let checked = check(
            &format!("{APP}  db:\n    image: x\n"),
            &["compose-egress=db"],
        )
        .unwrap();
        assert_eq!(checked.egress, ["db"]);
    }

    /// A path of the repository that a link leads out of needs the grant its real place
    /// would.
    #[test]
    fn a_link_out_of_the_repository_is_judged_where_it_leads() {
        let yaml = format!("{APP}  db:\n    volumes:\n    - ./data:/data\n");
        let data = format!("{WS}/data");
        let (property, value, grant) =
            refusal(check_with_links(&yaml, &[], &[(&data, "/home/me/.ssh")]));
        assert_eq!(property, "service \"db\": volumes");
        assert!(value.contains("/home/me/.ssh"), "{value}");
        assert_grant_text(&grant, "host-mount=/home/me/.ssh");
        check_with_links(&yaml, &[], &[(&data, &format!("{WS}/real-data"))]).unwrap();
        let resolved: Value = serde_yaml_ng::from_str(&yaml).unwrap();
        assert!(compose_host_paths(Path::new(WS), &resolved).contains(&PathBuf::from(&data)));
    }

    #[test]
    fn the_dev_service_and_run_services_must_exist() {
        let e = check("services:\n  db:\n    image: x\n", &[]).unwrap_err();
        assert!(e.to_string().contains("no service \"app\""), "{e}");
        let e = check(
            &format!("{APP}networks:\n  shared:\n    external: true\n"),
            &[],
        )
        .unwrap_err();
        assert_eq!(e.code(), 77);
        assert!(
            e.to_string().contains("network \"shared\": external"),
            "{e}"
        );
    }

    /// The property a project whose file ends with `tail` is forbidden for.
    fn forbidden(tail: &str) -> String {
        match check(&format!("{APP}{tail}"), &["compose-egress", "cap-add"]) {
            Err(Error::Forbidden { property, .. }) => property,
            other => panic!("{tail}: expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn no_spelling_of_a_network_leads_outside_the_project() {
        let net = |body: &str| format!("networks:\n  shared:\n{body}");
        // Another network's name: declined (the project file keeps Compose's own name for it,
        // `engine::compose::project_file`), refused under `requests = "refuse"`.
        let named = format!("{APP}{}", net("    name: yolo-other-0abc_default\n"));
        let checked = check(&named, &[]).unwrap();
        let declined: Vec<_> = checked
            .declined
            .iter()
            .map(|d| (d.property.as_str(), d.value.as_str(), d.grant.is_none()))
            .collect();
        assert_eq!(
            declined,
            [(
                "network \"shared\": name",
                "the network named \"yolo-other-0abc_default\"",
                true
            )]
        );
        assert!(matches!(
            check_refusing(&named, &[]),
            Err(Error::Forbidden { property, .. }) if property == "network \"shared\": name"
        ));
        for (body, property) in [
            ("    external: true\n", "network \"shared\": external"),
            (
                "    external:\n      name: x\n",
                "network \"shared\": external",
            ),
            ("    driver: macvlan\n", "network \"shared\": driver"),
            ("    driver: host\n", "network \"shared\": driver"),
            (
                "    driver_opts:\n      com.docker.network.bridge.name: docker0\n",
                "network \"shared\": driver_opts.com.docker.network.bridge.name",
            ),
            (
                "    driver_opts:\n      com.docker.network.bridge.inhibit_ipv4: 'false'\n",
                "network \"shared\": driver_opts.com.docker.network.bridge.inhibit_ipv4",
            ),
            (
                "    ipam:\n      config:\n      - subnet: 192.0.2.0/24\n",
                "network \"shared\": ipam",
            ),
            (
                "    ipam:\n      driver: other\n",
                "network \"shared\": ipam",
            ),
            ("    enable_ipv6: true\n", "network \"shared\": enable_ipv6"),
        ] {
            assert_eq!(forbidden(&net(body)), property, "{body}");
        }
        // yolo's own network name is not the repository's to define.
        assert_eq!(
            forbidden("networks:\n  yolo-egress: {}\n"),
            "network \"yolo-egress\""
        );
        // What Compose would do anyway is fine: its own name (the v2 plugin prints it), the
        // bridge driver, the MTU, no addresses.
        let fine = net(
            "    name: p_shared\n    driver: bridge\n    driver_opts:\n      com.docker.network.driver.mtu: '1400'\n    ipam: {}\n    enable_ipv6: false\n    external: false\n",
        );
        check(&format!("{APP}{fine}"), &[]).unwrap();
        check(&format!("{APP}networks:\n  default:\n"), &[]).unwrap();
    }

    #[test]
    fn a_sibling_cannot_join_the_guards_namespaces_or_turn_ipv6_on() {
        for (tail, property) in [
            (
                "  db:\n    network_mode: service:app\n",
                "service \"db\": network_mode",
            ),
            ("  db:\n    pid: service:app\n", "service \"db\": pid"),
            // Through another sibling that joined the dev service's.
            (
                "  db:\n    network_mode: service:cache\n  cache:\n    network_mode: service:app\n",
                "service \"db\": network_mode",
            ),
            (
                "  db:\n    sysctls:\n      net.ipv6.conf.all.disable_ipv6: 0\n",
                "service \"db\": sysctls",
            ),
            (
                "  db:\n    sysctls: ['net/ipv6/conf/eth0/disable_ipv6=0']\n",
                "service \"db\": sysctls",
            ),
        ] {
            assert_eq!(forbidden(tail), property, "{tail}");
        }
        // Another sibling's namespaces, and other kernel settings, are the project's own.
        check(
            &format!("{APP}  db:\n    network_mode: service:cache\n    sysctls: {{net.core.somaxconn: 1024}}\n  cache:\n    image: x\n"),
            &[],
        )
        .unwrap();
        // A loop of `service:` ends.
        check(
            &format!("{APP}  db:\n    network_mode: service:cache\n  cache:\n    network_mode: service:db\n"),
            &[],
        )
        .unwrap();
    }
}

#[cfg(test)]
mod built_image_name_tests {
    use super::*;

    fn project(image: &str, build: bool) -> Value {
        let build = if build {
            "\n    build: {context: /r}"
        } else {
            ""
        };
        serde_yaml_ng::from_str(&format!("services:\n  s:\n    image: \"{image}\"{build}\n"))
            .unwrap()
    }

    #[test]
    fn a_built_image_cannot_take_the_name_of_an_image_yolo_trusts() {
        let guard = [
            Some("registry.example/guard:1"),
            Some("debian:bookworm-slim"),
        ];
        let file = Path::new("/r/compose.yml");
        for name in [
            "yolo-guard:0.1.0-abcdef",
            "docker.io/library/yolo-guard:1",
            "yolo-features-abc",
            "registry.example/guard:1",
            "debian:bookworm-slim",
            "docker.io/library/debian:bookworm-slim",
        ] {
            let err = check_built_image_names(file, &project(name, true), &guard).unwrap_err();
            assert!(
                err.to_string().contains("service \"s\": image"),
                "{name}: {err}"
            );
        }
        for name in [
            "myapp:dev",
            "debian:trixie",
            "localhost:5000/yolo-ish",
            "registry.example/guard:2",
        ] {
            check_built_image_names(file, &project(name, true), &guard).unwrap();
        }
        // Only a build retags; naming an image to run is not replacing it.
        check_built_image_names(file, &project("yolo-guard:1", false), &guard).unwrap();
    }
}

#[cfg(test)]
mod dotenv_tests {
    use super::*;

    #[test]
    fn a_dotenv_may_not_choose_the_engine() {
        let path = Path::new("/repo/.env");
        check_compose_dotenv(path, "").unwrap();
        check_compose_dotenv(path, "TAG=1\n# DOCKER_HOST=x\nCOMPOSE_PROJECT_NAME=p\n").unwrap();
        for line in [
            "DOCKER_HOST=tcp://10.0.0.1:2375",
            "export DOCKER_CONTEXT=evil",
            " docker_cert_path = /x",
        ] {
            let err = check_compose_dotenv(path, &format!("A=1\n{line}\n")).unwrap_err();
            assert!(err.to_string().contains("line 2"), "{line}: {err}");
        }
    }
}
