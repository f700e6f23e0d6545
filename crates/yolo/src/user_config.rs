//! The user's own config file (`<config dir>/config.toml`, `YOLO_CONFIG_DIR` overrides the dir):
//! grants, limits, allowlist additions, user-defined agents. This is where trust comes from;
//! the repository's devcontainer.json only asks.

use crate::error::{Error, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct UserConfig {
    /// Grants, in the same words as `--grant` (see `policy::Grant`).
    pub(crate) grants: Vec<String>,
    /// Run `initializeCommand` on the host without asking.
    pub(crate) trust_host_commands: bool,
    pub(crate) limits: UserLimits,
    pub(crate) firewall: UserFirewall,
    pub(crate) build: UserBuild,
    /// User-defined agents, by name; a name equal to a preset adjusts it (a `command` replaces
    /// the preset's, `env` and `domains` add to its lists, `state_dir` replaces it).
    pub(crate) agents: BTreeMap<String, UserAgent>,
    /// Base image of the firewall guard (default `scratch`: the guard needs nothing from it).
    pub(crate) guard_base_image: Option<String>,
    /// A ready guard image to use instead of building one (it must hold
    /// `/usr/local/bin/yolo-guard`): for engines this yolo carries no guard for.
    pub(crate) guard_image: Option<String>,
    /// Host environment variables a devcontainer.json may read with `${localEnv:VAR}`, besides
    /// the harmless ones yolo always allows (see `project::SAFE_LOCAL_ENV`).
    pub(crate) pass_env: Vec<String>,
    /// CA certificates to trust in builds and the container (PEM files or folders): for a
    /// network that intercepts TLS.
    pub(crate) extra_ca: Vec<std::path::PathBuf>,
    pub(crate) workspace: UserWorkspace,
    pub(crate) audit: UserAudit,
    pub(crate) terminal: UserTerminal,
    /// `[credentials.NAME]`: keys the guard adds on the way out (`credentials`).
    pub(crate) credentials: BTreeMap<String, crate::credentials::UserCredential>,
    /// `[http."HOST"]`: method and path rules of a host the guard's proxy inspects.
    pub(crate) http: BTreeMap<String, crate::http_config::UserHttpHost>,
    pub(crate) policy: UserPolicy,
}

/// `[policy]`: how the repository's requests are judged.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct UserPolicy {
    /// What becomes of a request yolo honours only with a grant, when none is given:
    /// "decline" (unset: left out, named) or "refuse" (the `up` stops).
    pub(crate) requests: Option<String>,
}

/// `[terminal]`: what of the container's output reaches the host's terminal.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct UserTerminal {
    /// Pass the escape sequences that act beyond the screen (clipboard, title, hyperlinks,
    /// queries, DCS/APC strings) from the container to the terminal. Default off: they are
    /// dropped (`terminal::Screen`).
    pub(crate) pass_host_sequences: bool,
}

/// `[audit]`: the session logs.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct UserAudit {
    /// The size a session's network log (written by the guard) may reach, e.g. "16m".
    pub(crate) max_session_log: Option<String>,
    /// Record every program the agent's processes start (the exec audit). Default on.
    pub(crate) exec: Option<bool>,
    /// The size a session's exec log may reach, e.g. "1g"; past it execs are refused.
    pub(crate) max_exec_log: Option<String>,
    /// Record changes in the workspace while a session runs (the guard's file watcher).
    /// Unset: on.
    pub(crate) files: Option<bool>,
    /// An exec by a process the agent's own debugger traces: "refuse" (unset) or "record"
    /// (it runs, recorded as unconfirmed).
    pub(crate) traced_exec: Option<String>,
    /// Ship the session's events to an OpenTelemetry collector (OTLP over HTTP, logs):
    /// `http://HOST:PORT`.
    pub(crate) otlp_endpoint: Option<String>,
    /// Append the session's events as OCSF records (JSON lines) to this file.
    pub(crate) ocsf_file: Option<String>,
}

/// `[workspace]`: how the repository is mounted.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct UserWorkspace {
    /// Paths (relative to the repository; a trailing `/` for a folder) mounted read-only in the
    /// container. Unset: `policy::DEFAULT_READ_ONLY`. Set, it replaces the defaults.
    pub(crate) read_only: Option<Vec<String>>,
    /// Globs (relative to the repository) of files the host runs that the agent may edit: each
    /// change is flagged. Unset: `watched::DEFAULT_WATCH`. Set, it replaces them.
    pub(crate) watch: Option<Vec<String>>,
    /// With a remote engine, the largest file of the copy `yolo sync` brings back (e.g.
    /// "100m"); a larger one is left out, named. Default: `settings::DEFAULT_SYNC_MAX_FILE`.
    pub(crate) sync_max_file: Option<String>,
    /// With a remote engine, the most `yolo sync` reads of the copy (its archive), e.g. "4g";
    /// past it nothing is brought back. Default: `settings::DEFAULT_SYNC_MAX_TOTAL`.
    pub(crate) sync_max_total: Option<String>,
    /// A checkpoint before every `yolo exec` and every agent `yolo run` starts (`yolo
    /// rollback N` then undoes one command). Default: only at a session's start.
    pub(crate) checkpoint_every_exec: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct UserLimits {
    pub(crate) cpus: Option<f64>,
    pub(crate) memory: Option<String>,
    pub(crate) pids: Option<i64>,
    /// Size of the container's writable layer, where the storage driver can limit it (a size
    /// like "20g", or "none"). Default: `policy::DEFAULT_DISK`.
    pub(crate) disk: Option<String>,
    /// Whether an engine that drops the CPU, memory or process limits (rootless Podman on
    /// cgroup v1 does, silently) makes `up` fail (default) or only warn.
    pub(crate) required: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct UserFirewall {
    pub(crate) allow: Vec<String>,
    pub(crate) presets: Vec<String>,
    /// Upstream resolver for the guard, `ADDR[:PORT]`.
    pub(crate) upstream_dns: Option<String>,
    /// Minimum lifetime of an allowed address in seconds (default 300).
    pub(crate) ttl_floor: Option<u64>,
    /// Answer denied names with NXDOMAIN instead of REFUSED.
    pub(crate) deny_with_nxdomain: bool,
    /// `"refuse"` (unset) or `"ask"`: hold a lookup of a name outside the allowlist for the
    /// user's answer (`yolo approvals`).
    pub(crate) on_refused: Option<String>,
    /// Seconds a held lookup waits for the answer (default 30).
    pub(crate) ask_timeout: Option<u64>,
    /// Open private/loopback/link-local answers of allowed names (internal services).
    pub(crate) allow_internal_answers: bool,
    /// Put every project's guard on this Docker network (made if missing) instead of the
    /// shared bridge or one of the project's own.
    pub(crate) docker_network: Option<String>,
    /// `"all"`: every HTTPS host goes through the guard's proxy, not only those with rules or
    /// a credential.
    pub(crate) inspect: Option<String>,
    /// Spare network namespaces kept ready for the next guards (default 1; 0: none).
    pub(crate) spares: Option<u32>,
}

/// `[build]`: what image builds (Dockerfile RUN steps) may reach besides the project's
/// allowlist, through the same guard.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct UserBuild {
    /// Allowlist presets for builds only. Unset: `settings::DEFAULT_BUILD_PRESETS`; set, it
    /// replaces them (`[]` for none).
    pub(crate) presets: Option<Vec<String>>,
    /// Allowlist patterns for builds only.
    pub(crate) allow: Vec<String>,
    /// `firewall` (default: through the guard) or `none` (RUN steps get no network).
    pub(crate) network: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct UserAgent {
    /// argv of the unattended command, e.g. ["my-agent", "--yes"].
    pub(crate) command: Vec<String>,
    /// Host environment variables passed through when set.
    pub(crate) env: Vec<String>,
    /// Domains the agent needs.
    pub(crate) domains: Vec<String>,
    /// Folder (relative to the remote user's home) kept in a named volume.
    pub(crate) state_dir: Option<String>,
}

/// Folder of the user's config: `YOLO_CONFIG_DIR`, else the platform config dir.
pub(crate) fn config_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("YOLO_CONFIG_DIR") {
        return PathBuf::from(dir);
    }
    directories::ProjectDirs::from("", "", "yolo")
        .map(|d| d.config_dir().to_path_buf())
        .unwrap_or_else(|| PathBuf::from(".yolo-config"))
}

impl UserConfig {
    pub(crate) fn path() -> PathBuf {
        config_dir().join("config.toml")
    }

    /// Load the user's config; a missing file is an empty config.
    pub(crate) fn load() -> Result<Self> {
        Self::load_from(&Self::path())
    }

    pub(crate) fn load_from(path: &Path) -> Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(Error::io(path, e)),
        };
        toml::from_str(&text).map_err(|e| Error::UserConfig {
            file: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })
    }
}
