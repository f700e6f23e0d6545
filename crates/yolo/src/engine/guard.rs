//! The firewall guard container: its image (see `guard_image` for where the program comes
//! from), the per-project network, creation with only NET_ADMIN + NET_BIND_SERVICE, copying the
//! guard config in, and waiting until the guard says its ruleset is verified.

use super::{is_not_found, labels, message, Engine};
use crate::error::{Error, Result};
use crate::run_spec::PortPublish;
use bollard::models::{
    ContainerCreateBody, HostConfig, Mount, MountType, NetworkCreateRequest, PortBinding,
};
use bollard::query_parameters::{
    BuildImageOptions, CreateContainerOptions, LogsOptions, UploadToContainerOptions,
};
use futures_util::StreamExt;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::guard_image::{self, GuardSource, Platform, GUARD_BINARY};
const BASE_LABEL: &str = "dev.yolo.guard-base";
pub const DEFAULT_BASE: &str = "debian:bookworm-slim";
/// What `yolo guard` prints on stdout once the ruleset is verified and DNS is listening.
pub const READY_LINE: &str = crate::firewall::GUARD_READY_LINE;
/// Where the guard writes network events (bind mount of a host folder).
pub const GUARD_LOG_DIR: &str = "/var/log/yolo";
pub const GUARD_CONFIG_PATH: &str = "/etc/yolo/guard.json";

pub struct GuardSpec {
    pub name: String,
    pub image: String,
    pub network: String,
    pub labels: BTreeMap<String, String>,
    pub ports: Vec<PortPublish>,
    /// The agent shares the guard's /etc/hostname and /etc/hosts, so these go on the guard.
    pub hostname: Option<String>,
    pub extra_hosts: Vec<String>,
    /// Host folder mounted at GUARD_LOG_DIR.
    pub log_dir: PathBuf,
}

impl Engine {
    /// The OS and architecture of the engine's daemon (where the guard will run).
    pub(crate) async fn platform(&self) -> Result<Platform> {
        let version = self
            .docker
            .version()
            .await
            .map_err(|e| Error::docker("asking the engine for its version", message(&e)))?;
        Ok(Platform {
            os: version.os.unwrap_or_else(|| "linux".into()),
            arch: version.arch.unwrap_or_default(),
        })
    }

    /// The guard image: the user's, or built once per yolo version and guard digest (again
    /// when the base image setting changed).
    pub async fn ensure_guard_image(&self, base: &str, configured: Option<&str>) -> Result<String> {
        let platform = self.platform().await?;
        let source =
            guard_image::select(configured, &guard_image::Carried::this_build(), &platform)?;
        let tag = guard_image::tag(&source);
        if let GuardSource::Configured(_) = source {
            return Ok(tag);
        }
        if let Ok(img) = self.docker.inspect_image(&tag).await {
            let current = img
                .config
                .and_then(|c| c.labels)
                .and_then(|l| l.get(BASE_LABEL).cloned());
            if current.as_deref() == Some(base) {
                return Ok(tag);
            }
        }
        let Some(tar) = guard_image::context(&source)? else {
            return Ok(tag);
        };
        let mut labels: HashMap<String, String> = HashMap::from([
            (BASE_LABEL.to_string(), base.to_string()),
            (labels::MANAGED.into(), "true".into()),
        ]);
        labels.extend(labels::extra());
        let options = BuildImageOptions {
            t: Some(tag.clone()),
            buildargs: Some(HashMap::from([("BASE".to_string(), base.to_string())])),
            labels: Some(labels),
            rm: true,
            forcerm: true,
            ..Default::default()
        };
        let bar =
            super::images::spinner(&format!("building the firewall guard image {tag} (once)"));
        let mut stream =
            self.docker
                .build_image(options, None, Some(bollard::body_full(tar.into())));
        let mut tail = Vec::new();
        while let Some(item) = stream.next().await {
            let info = item.map_err(|e| Error::docker("building the guard image", message(&e)))?;
            if let Some(detail) = info.error_detail {
                bar.finish_and_clear();
                return Err(Error::Docker {
                    action: format!("building the guard image {tag} from {base}"),
                    message: format!("{}\n  last output:\n    {}", detail.message.unwrap_or_default(), tail.join("\n    ")),
                    hint: Some("the guard image needs Debian's nftables package; set guard_base_image in your yolo config to a Debian-based image that is present locally".into()),
                });
            }
            if let Some(line) = info
                .stream
                .as_deref()
                .map(str::trim)
                .filter(|l| !l.is_empty())
            {
                bar.set_message(format!("building {tag}: {line}"));
                tail.push(console::strip_ansi_codes(line).into_owned());
                if tail.len() > 15 {
                    tail.remove(0);
                }
            }
        }
        bar.finish_and_clear();
        Ok(tag)
    }

    /// The project's own bridge network (isolated from other projects' by Docker).
    pub async fn ensure_network(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<()> {
        match self
            .docker
            .inspect_network(
                name,
                None::<bollard::query_parameters::InspectNetworkOptions>,
            )
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if is_not_found(&e) => {}
            Err(e) => {
                return Err(Error::docker(
                    format!("inspecting network {name}"),
                    message(&e),
                ))
            }
        }
        let request = NetworkCreateRequest {
            name: name.to_string(),
            driver: Some("bridge".into()),
            labels: Some(labels.clone().into_iter().collect()),
            ..Default::default()
        };
        match self.docker.create_network(request).await {
            Ok(_) => Ok(()),
            // Created concurrently by another yolo: fine.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) => Ok(()),
            Err(e) => Err(Error::docker(
                format!("creating network {name}"),
                message(&e),
            )),
        }
    }

    pub async fn remove_network(&self, name: &str) -> Result<()> {
        match self.docker.remove_network(name).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(Error::docker(
                format!("removing network {name}"),
                message(&e),
            )),
        }
    }

    /// Create the guard (not started); its program is baked into the image.
    pub async fn create_guard(&self, spec: &GuardSpec) -> Result<String> {
        let mut labels: HashMap<String, String> = spec.labels.clone().into_iter().collect();
        labels.insert(labels::ROLE.into(), "guard".into());
        labels.extend(labels::extra());
        let ports: Vec<String> = spec
            .ports
            .iter()
            .map(|p| format!("{}/tcp", p.container))
            .collect();
        let bindings = spec
            .ports
            .iter()
            .map(|p| {
                let b = PortBinding {
                    host_ip: Some("127.0.0.1".into()),
                    host_port: Some(p.host.to_string()),
                };
                (format!("{}/tcp", p.container), Some(vec![b]))
            })
            .collect();
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            hostname: spec.hostname.clone(),
            cmd: Some(vec![
                GUARD_BINARY.into(),
                "run".into(),
                "--config".into(),
                GUARD_CONFIG_PATH.into(),
            ]),
            entrypoint: Some(vec![]),
            labels: Some(labels),
            exposed_ports: (!ports.is_empty()).then_some(ports),
            host_config: Some(HostConfig {
                network_mode: Some(spec.network.clone()),
                cap_drop: Some(vec!["ALL".into()]),
                cap_add: Some(vec!["NET_ADMIN".into(), "NET_BIND_SERVICE".into()]),
                security_opt: Some(vec!["no-new-privileges:true".into()]),
                port_bindings: Some(bindings),
                extra_hosts: (!spec.extra_hosts.is_empty()).then(|| spec.extra_hosts.clone()),
                init: Some(true),
                pids_limit: Some(256),
                memory: Some(256 * 1024 * 1024),
                memory_swap: Some(256 * 1024 * 1024),
                nano_cpus: Some(1_000_000_000),
                mounts: Some(vec![Mount {
                    target: Some(GUARD_LOG_DIR.into()),
                    source: Some(spec.log_dir.display().to_string()),
                    typ: Some(MountType::BIND),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let options = CreateContainerOptions {
            name: Some(spec.name.clone()),
            ..Default::default()
        };
        let id = self
            .docker
            .create_container(Some(options), body)
            .await
            .map_err(|e| {
                Error::docker(
                    format!("creating the guard container {}", spec.name),
                    message(&e),
                )
            })?
            .id;
        Ok(id)
    }

    /// Write the guard's config; the guard reads it when it starts.
    pub async fn update_guard_config(&self, id: &str, config_json: &str) -> Result<()> {
        let mut tar = tar::Builder::new(Vec::new());
        let bytes = config_json.as_bytes();
        append(
            &mut tar,
            GUARD_CONFIG_PATH,
            0o644,
            bytes.len() as u64,
            bytes,
        )?;
        self.upload(id, finish(tar)?).await
    }

    async fn upload(&self, id: &str, tar: Vec<u8>) -> Result<()> {
        let options = UploadToContainerOptions {
            path: "/".into(),
            ..Default::default()
        };
        self.docker
            .upload_to_container(id, Some(options), bollard::body_full(tar.into()))
            .await
            .map_err(|e| Error::docker("copying files into the guard container", message(&e)))
    }

    /// Wait for the guard's ready line; fail (closed) if it exits or takes too long.
    pub async fn wait_guard_ready(&self, id: &str, session: &str, timeout: Duration) -> Result<()> {
        // The ready line names the session the guard started with: a restarted guard's log
        // still holds the previous run's line, which must not let the agent start before the
        // new ruleset is in.
        let expected = format!("{READY_LINE} {session}");
        let options = LogsOptions {
            follow: true,
            stdout: true,
            stderr: true,
            tail: "all".into(),
            ..Default::default()
        };
        let mut logs = self.docker.logs(id, Some(options));
        let mut seen = Vec::new();
        let wait = async {
            while let Some(item) = logs.next().await {
                let Ok(chunk) = item else { break };
                for line in chunk.to_string().lines() {
                    if line.trim() == expected {
                        return true;
                    }
                    seen.push(line.trim_end().to_string());
                }
            }
            false
        };
        let ready = tokio::time::timeout(timeout, wait).await.unwrap_or(false);
        if ready {
            return Ok(());
        }
        Err(Error::Unavailable(format!(
            "the firewall guard did not become ready, so the agent container was not started (fail closed).\n  guard output:\n    {}",
            seen.join("\n    ")
        )))
    }

    /// Run `yolo-guard ctl '<json>'` in the guard and return its stdout.
    pub async fn guard_ctl(&self, id: &str, request: &str) -> Result<String> {
        let req = super::exec::ExecRequest {
            argv: vec![GUARD_BINARY.into(), "ctl".into(), request.into()],
            ..Default::default()
        };
        let result = self.exec(id, &req, super::exec::Output::Capture).await?;
        let text = String::from_utf8_lossy(&result.captured).into_owned();
        // 1: the guard answered and refused; the caller reads why from the answer.
        if !matches!(result.exit_code, 0 | 1) {
            return Err(Error::Unavailable(format!(
                "the firewall guard could not take the request: {}",
                text.trim()
            )));
        }
        Ok(text)
    }
}

fn append(
    tar: &mut tar::Builder<Vec<u8>>,
    path: &str,
    mode: u32,
    len: u64,
    data: impl std::io::Read,
) -> Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(len);
    header.set_mode(mode);
    header.set_cksum();
    tar.append_data(&mut header, path.trim_start_matches('/'), data)
        .map_err(|e| Error::other(format!("packing {path} for the guard: {e}")))
}

fn finish(tar: tar::Builder<Vec<u8>>) -> Result<Vec<u8>> {
    tar.into_inner()
        .map_err(|e| Error::other(format!("packing files for the guard: {e}")))
}

/// The host folder for the guard's network events: writable by the guard's root, which has no
/// CAP_DAC_OVERRIDE (so it cannot write into a non-root user's 0755 folder).
pub fn log_dir(root: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let dir = root.join("network");
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777))
        .map_err(|e| Error::io(&dir, e))?;
    Ok(dir)
}
