//! Docker, through bollard. Only this module talks to the Docker Engine, and no bollard type
//! leaves it: callers get yolo's own values (`Container`, `Found`, `ContainerDetails`,
//! `Report`) and say what they want in yolo's words (`RunSpec`, `NetworkAttach`, `GuardSpec`,
//! `ExecRequest`). The client is private; the test at the end of this file fails if a visible
//! item names a bollard type.
//!
//! It does not decide what to do with what it finds (reuse, restart, recreate): that is
//! `bring_up::plan.

pub(crate) mod compose;
mod containers;
mod endpoint;
mod exec;
mod guard;
mod guard_control;
pub(crate) mod guard_image;
mod hardening;
mod images;
pub(crate) mod labels;
pub(crate) mod remote;
pub(crate) mod spares;
mod types;

pub(crate) use containers::keep_alive;
pub(crate) use exec::{cap_own_output, ExecRequest, ExecResult, Output, Overlay, Recording};
pub(crate) use guard::{
    config_dir as guard_config_dir, config_dir_of as guard_config_dir_of, log_dir, GuardSpec,
    DEFAULT_BASE, GUARD_LOG_DIR, GUARD_WORKSPACE_DIR,
};
pub(crate) use images::FeaturesBuild;
pub(crate) use types::{
    Container, ContainerDetails, Found, HostFacts, Made, NetworkAttach, Owner, ProjectNetwork,
    Report, Role,
};

use crate::error::{Cause, Error, Failure, Result};
use bollard::Docker;

/// A connected Docker client whose API version was negotiated with the engine.
#[derive(Clone)]
pub(crate) struct Engine {
    docker: Docker,
    /// The engine's answer to `/version`, asked once when connecting (the API version is
    /// agreed from it).
    version: std::sync::Arc<bollard::models::SystemVersion>,
    /// The platform images are pulled and built for (`--platform` in runArgs); None: the
    /// engine's own.
    platform: Option<String>,
    /// The `ssh` forwarding an `ssh://` engine's socket, kept while any clone lives.
    _tunnel: Option<std::sync::Arc<remote::Tunnel>>,
    /// The engine's `/info` (slow on a busy engine): asked once per yolo.
    info: std::sync::Arc<tokio::sync::OnceCell<bollard::models::SystemInfo>>,
}

impl Engine {
    /// Connect to the engine the docker CLI would use (`DOCKER_HOST`, else the current Docker
    /// context, else the local socket: `endpoint`) and agree on an API version, so an older
    /// engine (API 1.41, Docker 20.10) understands our requests.
    pub(crate) async fn connect() -> Result<Engine> {
        let mut endpoint = endpoint::Endpoint::choose(&endpoint::Environment::from_process())?;
        let tunnel = if endpoint.host.starts_with("ssh://") {
            let host = endpoint.host.clone();
            let (tunnel, local) = tokio::task::spawn_blocking(move || remote::Tunnel::open(&host))
                .await
                .map_err(|e| Error::failed(Failure::Process, Cause::of("starting ssh", e)))??;
            endpoint.host = local;
            Some(std::sync::Arc::new(tunnel))
        } else {
            None
        };
        let unreachable = |e: bollard::errors::Error| {
            Error::Docker {
            action: format!(
                "connecting to the Docker Engine at {} ({})",
                crate::visible::escape_controls(&endpoint.host),
                endpoint.source
            ),
            message: message(&e),
            hint: Some(format!(
                "is Docker running? Start it (e.g. `sudo systemctl start docker`), check {}, then run `yolo doctor`",
                match endpoint.source.as_str() {
                    "the default socket" => "DOCKER_HOST and `docker context ls`",
                    "DOCKER_HOST" => "DOCKER_HOST",
                    _ => "the context with `docker context ls` (or choose another with DOCKER_CONTEXT / `docker context use`)",
                }
            )),
        }
        };
        let docker = open(&endpoint, bollard::API_DEFAULT_VERSION).map_err(unreachable)?;
        // bollard's `negotiate_version`, keeping the answer: one `/version` for the whole run.
        let version = docker.version().await.map_err(unreachable)?;
        let server = version.api_version.as_deref().and_then(parse_api_version);
        let agreed = match server {
            Some(server) if server < *bollard::API_DEFAULT_VERSION => server,
            _ => *bollard::API_DEFAULT_VERSION,
        };
        let docker = open(&endpoint, &agreed).map_err(unreachable)?;
        Ok(Engine {
            docker,
            version: std::sync::Arc::new(version),
            platform: None,
            _tunnel: tunnel,
            info: Default::default(),
        })
    }

    /// This engine, pulling and building images for `platform` (None: the engine's own).
    pub(crate) fn for_platform(&self, platform: Option<&str>) -> Engine {
        Engine {
            docker: self.docker.clone(),
            version: self.version.clone(),
            platform: platform.map(str::to_string),
            _tunnel: self._tunnel.clone(),
            info: self.info.clone(),
        }
    }

    /// Whether the engine is Podman (its `/version` names a "Podman Engine" component).
    pub(crate) fn is_podman(&self) -> bool {
        self.version
            .components
            .iter()
            .flatten()
            .any(|c| c.name.to_ascii_lowercase().contains("podman"))
    }

    /// The engine's version, platform, runtimes and cgroup support.
    pub(crate) async fn report(&self) -> Result<Report> {
        let version = self.version().await?;
        let info = self.info().await?.clone();
        let text = |v: Option<String>| v.unwrap_or_default();
        let host = host_facts(&info);
        Ok(Report {
            version: text(version.version),
            api_version: text(version.api_version),
            os: text(version.os),
            arch: text(version.arch),
            runtimes: {
                let mut names: Vec<String> =
                    info.runtimes.unwrap_or_default().into_keys().collect();
                names.sort();
                names
            },
            default_runtime: text(info.default_runtime),
            cgroup_driver: text(info.cgroup_driver.map(|d| d.to_string())),
            cgroup_version: text(info.cgroup_version.map(|d| d.to_string())),
            pids_limit: info.pids_limit,
            memory_limit: info.memory_limit,
            kernel: text(info.kernel_version),
            host,
        })
    }

    /// Whether the agent's `/proc` can be mounted read-only (`PROC_READONLY`) without
    /// breaking `docker exec`: Docker, on a host without AppArmor or SELinux. With either, a
    /// runtime older than runc 1.2.8 writes the exec's label through the container's own
    /// `/proc`, which would then fail; Podman's API takes the field differently. Where it is
    /// not safe, the agent keeps a writable `/proc` and the exec record flags what it can
    /// (docs/security-model.md).
    pub(crate) async fn read_only_proc_is_safe(&self) -> bool {
        if self.is_podman() {
            return false;
        }
        let Ok(info) = self.info().await else {
            return false;
        };
        !info.security_options.iter().flatten().any(|o| {
            let o = o.to_ascii_lowercase();
            o.contains("name=apparmor") || o.contains("name=selinux")
        })
    }

    /// The engine machine's cores and storage driver.
    pub(crate) async fn host_facts(&self) -> Result<HostFacts> {
        Ok(host_facts(self.info().await?))
    }

    /// The engine's `/info`, asked the first time only.
    async fn info(&self) -> Result<&bollard::models::SystemInfo> {
        self.info
            .get_or_try_init(|| async {
                self.docker
                    .info()
                    .await
                    .map_err(|e| Error::docker("asking the engine about itself", message(&e)))
            })
            .await
    }

    async fn version(&self) -> Result<bollard::models::SystemVersion> {
        Ok((*self.version).clone())
    }
}

/// A client for `endpoint` (no request is made yet): a Unix socket, or HTTP over TCP, with
/// TLS when the endpoint has certificates. ssh:// is not supported (bollard's ssh transport is
/// not built in): the message says how to forward the socket instead.
fn open(
    endpoint: &endpoint::Endpoint,
    version: &bollard::ClientVersion,
) -> std::result::Result<Docker, bollard::errors::Error> {
    const TIMEOUT: u64 = 120; // bollard's default, seconds
    let host = endpoint.host.as_str();
    let unsupported = |why: &str| bollard::errors::Error::UnsupportedURISchemeError {
        uri: format!("{host} ({why})"),
    };
    let scheme = host.split_once("://").map_or("", |(scheme, _)| scheme);
    match (scheme, &endpoint.tls) {
        ("unix", _) => Docker::connect_with_unix(host, TIMEOUT, version),
        ("tcp" | "https", Some(certs)) => {
            // bollard signs with the process's rustls provider; ring is the one built in.
            let _ = rustls::crypto::ring::default_provider().install_default();
            Docker::connect_with_ssl(
                host,
                &certs.join("key.pem"),
                &certs.join("cert.pem"),
                &certs.join("ca.pem"),
                TIMEOUT,
                version,
            )
        }
        ("https", None) => Err(unsupported(
            "no certificates: set DOCKER_CERT_PATH and DOCKER_TLS_VERIFY=1",
        )),
        ("tcp" | "http", _) => Docker::connect_with_http(host, TIMEOUT, version),
        _ => Err(unsupported(
            "yolo knows unix://, tcp://, http:// and https://",
        )),
    }
}

/// `1.41` as a client version; None for anything else.
fn parse_api_version(text: &str) -> Option<bollard::ClientVersion> {
    let (major, minor) = text.split_once('.')?;
    Some(bollard::ClientVersion {
        major_version: major.parse().ok()?,
        minor_version: minor.parse().ok()?,
    })
}

fn host_facts(info: &bollard::models::SystemInfo) -> HostFacts {
    let backing_fs = info.driver_status.iter().flatten().find_map(|pair| {
        (pair.first().map(String::as_str) == Some("Backing Filesystem"))
            .then(|| pair.get(1).cloned())
            .flatten()
    });
    HostFacts {
        cpus: info.ncpu.unwrap_or(1),
        storage_driver: info.driver.clone().unwrap_or_default(),
        backing_fs,
    }
}

/// True when the error is Docker's 404 (no such container / image / exec).
fn is_not_found(err: &bollard::errors::Error) -> bool {
    matches!(
        err,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// True when Docker answered 304: the container is already in the state asked for (a start of
/// a running one, a stop of a stopped one).
fn is_not_modified(err: &bollard::errors::Error) -> bool {
    matches!(
        err,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 304,
            ..
        }
    )
}

/// The message of a Docker error without Rust Debug noise.
fn message(err: &bollard::errors::Error) -> String {
    match err {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    //! engine/ keeps bollard to itself: no item visible outside it (`pub`, `pub(crate)`) names
    //! a bollard type, and no file outside it mentions bollard at all.

    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    fn sources(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                files.extend(sources(&path));
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
        files
    }

    fn words(text: &str) -> impl Iterator<Item = &str> {
        text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
    }

    /// The names a file takes from bollard (`use bollard::...;`, modules left out), and
    /// `bollard` itself.
    fn bollard_names(text: &str) -> BTreeSet<String> {
        let mut names = BTreeSet::from(["bollard".to_string()]);
        for (at, _) in text.match_indices("use bollard::") {
            let statement = &text[at..at + text[at..].find(';').unwrap_or(0)];
            let mut rest = statement;
            while let Some(word) = words(rest).next() {
                let end = rest.find(word).unwrap() + word.len();
                if !rest[end..].starts_with("::") && word != "use" && word != "as" {
                    names.insert(word.to_string());
                }
                rest = &rest[end..];
            }
        }
        names
    }

    /// The declarations of the items a file shows outside engine/: from each `pub` or
    /// `pub(crate)` to the body (`{`) or the end (`;`, a field's `,`); an enum with its body.
    /// Tests (from `#[cfg(test)]` on) are not part of it.
    fn visible_declarations(text: &str) -> Vec<String> {
        let text = &text[..text.find("#[cfg(test)]").unwrap_or(text.len())];
        let lines: Vec<&str> = text.lines().collect();
        let mut out = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            if !(trimmed.starts_with("pub ") || trimmed.starts_with("pub(crate) ")) {
                continue;
            }
            let from = [&[trimmed], &lines[i + 1..]].concat().join("\n");
            let is_enum = words(trimmed).take(3).any(|w| w == "enum");
            let end = if trimmed.trim_end().ends_with(',') {
                trimmed.len()
            } else if is_enum {
                from.find("\n}").map_or(from.len(), |e| e + 2)
            } else {
                from.find(['{', ';']).unwrap_or(from.len())
            };
            out.push(from[..end.min(from.len())].to_string());
        }
        out
    }

    #[test]
    fn no_visible_item_of_engine_names_a_bollard_type() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine");
        let mut leaks = Vec::new();
        for file in sources(&dir) {
            let text = std::fs::read_to_string(&file).unwrap();
            let banned = bollard_names(&text);
            for declaration in visible_declarations(&text) {
                if words(&declaration).any(|w| banned.contains(w)) {
                    leaks.push(format!("{}: {declaration}", file.display()));
                }
            }
        }
        assert!(
            leaks.is_empty(),
            "bollard leaks out of engine/:\n{leaks:#?}"
        );
    }

    #[test]
    fn the_leak_check_sees_what_it_should() {
        let text = "use bollard::models::{HostConfig, Mount as M};\nuse bollard::Docker;\n\
                    pub(crate) struct Engine {\n    pub(crate) docker: Docker,\n}\n\
                    pub(crate) fn a(\n    x: u8,\n) -> M {\n}\n\
                    pub(crate) enum E {\n    A(HostConfig),\n}\n\
                    pub(super) fn internal() -> HostConfig {}\n";
        let banned = bollard_names(text);
        assert!(banned.contains("Docker") && banned.contains("M") && !banned.contains("models"));
        let leaking: Vec<String> = visible_declarations(text)
            .into_iter()
            .filter(|d| words(d).any(|w| banned.contains(w)))
            .collect();
        assert_eq!(leaking.len(), 3, "{leaking:#?}");
    }

    #[test]
    fn nothing_outside_engine_mentions_bollard() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let engine = src.join("engine");
        let mentions: Vec<_> = sources(&src)
            .into_iter()
            .filter(|f| !f.starts_with(&engine))
            .filter(|f| std::fs::read_to_string(f).unwrap().contains("bollard"))
            .collect();
        assert!(
            mentions.is_empty(),
            "only engine/ talks to Docker: {mentions:?}"
        );
    }
}
