//! The flags of `up`/`run` and the user's config, resolved into one typed value before any side
//! effect (as ripgrep turns its low-level args into `HiArgs` and uv resolves `Settings`).
//!
//! Two stages, both before anything runs:
//! - clap calls the `parse_*` functions below on each flag, so a bad value is a usage error
//!   (exit 64, clap's format) naming the flag;
//! - [`UpSettings::resolve`] merges the flags with the user's config file, whose bad values are
//!   config errors (exit 65) naming the file and the setting. Everything `up`/`run` take from
//!   the config is resolved here; later code reads these values, not the file's.
//!
//! Not here: what the repository asks for (that is `policy`, which receives these settings).

use crate::cli::UpFlags;
use crate::engine::DEFAULT_BASE;
use crate::error::{Error, Result};
use crate::firewall::{presets, NetworkMode, DEFAULT_MAX_SESSION_LOG};
#[cfg(test)]
use crate::policy::Grant;
use crate::policy::{self, Grants, LimitLayer, UserLayer};
use crate::user_config::UserConfig;
use crate::values::{parse_pattern, parse_upstream};
use std::net::SocketAddr;
use std::path::Path;
use yolo_protocol::DEFAULT_MAX_EXEC_LOG;

/// Everything `up` and `run` were told, by flag or by the user's config.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct UpSettings {
    pub(crate) rebuild: bool,
    /// `--grant` flags, then the config's `grants` (both parsed).
    pub(crate) grants: Grants,
    /// `--trust-host-commands`, `trust_host_commands = true`, or the `initialize-command` grant.
    pub(crate) trust_host_commands: bool,
    /// `--accept-config` or the `config-change` grant.
    pub(crate) accept_config: bool,
    /// Limits given as flags (the config's `[limits]` is a layer of its own, in `user`).
    pub(crate) cpus: Option<f64>,
    pub(crate) memory_bytes: Option<i64>,
    pub(crate) pids: Option<i64>,
    /// `--allow` patterns, checked.
    pub(crate) allow: Vec<String>,
    /// What `policy` takes from the config: `[limits]`, `[firewall] allow` and `presets`.
    pub(crate) user: UserLayer,
    /// `--upstream-dns`, else the config's `upstream_dns`; `None`: the host's nameservers.
    pub(crate) upstream_dns: Option<SocketAddr>,
    /// `--network`; `None`: not asked, so an existing container keeps its mode (firewall for a
    /// new one; see `bring_up::network_mode`).
    pub(crate) network: Option<NetworkMode>,
    /// The firewall guard's image, network and DNS options, from the config.
    pub(crate) guard: GuardSettings,
    /// `[workspace] watch` (or `watched::DEFAULT_WATCH`): files the host runs that the
    /// agent may edit, flagged when they change.
    pub(crate) watch: Vec<String>,
    /// What image builds may reach on top of the project's allowlist.
    pub(crate) build: BuildSettings,
    /// `--extra-ca`, else the config's `extra_ca`: read and checked.
    pub(crate) extra_ca: Option<crate::ca::ExtraCa>,
    /// `[audit] otlp_endpoint` and `ocsf_file`: where the session's events are shipped.
    pub(crate) export: crate::audit::export::ship::Sinks,
}

/// The allowlist presets image builds get unless `[build] presets` says otherwise: the package
/// mirrors a Dockerfile's RUN steps usually install from.
pub(crate) const DEFAULT_BUILD_PRESETS: &[&str] = &["debian", "ubuntu", "npm", "pypi", "crates"];

/// `[build]`: the allowlist additions that hold only while yolo builds the image.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BuildSettings {
    /// Preset names, each known.
    pub(crate) presets: Vec<String>,
    /// Patterns, each checked.
    pub(crate) allow: Vec<String>,
    /// `[build] network = "none"`: RUN steps get no network at all, whatever the agent's mode.
    pub(crate) no_network: bool,
}

impl Default for BuildSettings {
    fn default() -> Self {
        BuildSettings {
            presets: DEFAULT_BUILD_PRESETS
                .iter()
                .map(|p| p.to_string())
                .collect(),
            allow: vec![],
            no_network: false,
        }
    }
}

impl BuildSettings {
    pub(crate) fn resolve(user: &UserConfig) -> Result<BuildSettings> {
        let b = &user.build;
        let presets = match &b.presets {
            None => BuildSettings::default().presets,
            Some(names) => names
                .iter()
                .map(|name| presets::load(name).map(|_| name.trim().to_ascii_lowercase()))
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| config_error("build.presets", e))?,
        };
        let allow = b
            .allow
            .iter()
            .map(|p| parse_pattern(p))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| config_error("build.allow", e))?;
        let no_network = match b.network.as_deref().map(str::trim) {
            None | Some("firewall") => false,
            Some("none") => true,
            Some(other) => {
                return Err(config_error(
                    "build.network",
                    format!("{other:?} is not firewall or none"),
                ))
            }
        };
        Ok(BuildSettings {
            presets,
            allow,
            no_network,
        })
    }
}

/// The firewall guard as the user's config sets it up.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GuardSettings {
    /// `[firewall] ttl_floor`: the least time, in seconds, an answered address stays open.
    pub(crate) ttl_floor_secs: u64,
    /// `[firewall] deny_with_nxdomain`.
    pub(crate) deny_nxdomain: bool,
    /// `[firewall] allow_internal_answers`.
    pub(crate) allow_internal_answers: bool,
    /// `[firewall] docker_network`; `None`: the bridge all projects' guards share, or one of
    /// the project's own (`bring_up::network::network_name`).
    pub(crate) docker_network: Option<String>,
    /// `guard_image`: a ready image to use instead of building one.
    pub(crate) image: Option<String>,
    /// `guard_base_image`: the base of the image yolo builds.
    pub(crate) base_image: String,
    /// `[audit] max_session_log`: bytes the guard's session log may reach.
    pub(crate) max_session_log: u64,
    /// `[audit] max_exec_log`: bytes the exec log may reach before execs are refused.
    pub(crate) max_exec_log: u64,
    /// `[audit] files`: the guard records changes in the workspace.
    pub(crate) files: bool,
    /// `[audit] traced_exec = "record"`: a traced process's exec runs, unconfirmed.
    pub(crate) allow_traced_exec: bool,
    /// `[firewall] on_refused = "ask"` (or `--ask`): seconds a lookup of a name outside the
    /// allowlist is held for the user's answer; `None`: refused at once.
    pub(crate) ask_timeout_secs: Option<u64>,
    /// `[firewall] spares` (or `YOLO_SPARES`): spare network namespaces `up` keeps ready for the
    /// next guards (`engine::spares`).
    pub(crate) spares: u32,
}

/// Seconds a held lookup waits for the user's answer unless `[firewall] ask_timeout` says.
pub(crate) const DEFAULT_ASK_TIMEOUT: u64 = 30;
/// At most: resolvers give up long before (glibc after 5 s a try); a longer hold only keeps
/// the question on the list.
const MAX_ASK_TIMEOUT: u64 = 600;

/// Spare network namespaces kept ready unless `[firewall] spares` says: enough for the next
/// cold `up`.
pub(crate) const DEFAULT_SPARES: u32 = 1;
/// The environment's say over `[firewall] spares` (tests turn them off with 0).
const SPARES_ENV: &str = "YOLO_SPARES";

/// `[firewall] spares`, unless `YOLO_SPARES` says otherwise.
fn spares(f: &crate::user_config::UserFirewall) -> Result<u32> {
    let max = crate::engine::spares::MAX_SPARES;
    let (setting, value) = match std::env::var(SPARES_ENV) {
        Ok(text) if !text.trim().is_empty() => match text.trim().parse::<u32>() {
            Ok(n) => (SPARES_ENV, n),
            Err(_) => {
                return Err(config_error(
                    SPARES_ENV,
                    format!(
                        "\"{}\" is not a number of spares (0 to {max})",
                        crate::visible::escape_controls(&text)
                    ),
                ))
            }
        },
        _ => ("firewall.spares", f.spares.unwrap_or(DEFAULT_SPARES)),
    };
    if value > max {
        return Err(config_error(
            setting,
            format!("{value} spares is more than {max}; each is a container kept running"),
        ));
    }
    Ok(value)
}

/// Seconds an answered address stays open at least, whatever TTL its answer had.
const DEFAULT_TTL_FLOOR: u64 = 300;
/// The largest TTL DNS has (RFC 2181, section 8): no answer asks for longer, and the guard adds
/// the floor to a clock, which a larger number could overflow.
const MAX_TTL_FLOOR: u64 = i32::MAX as u64;

impl Default for GuardSettings {
    fn default() -> Self {
        GuardSettings {
            ttl_floor_secs: DEFAULT_TTL_FLOOR,
            deny_nxdomain: false,
            allow_internal_answers: false,
            docker_network: None,
            image: None,
            base_image: DEFAULT_BASE.to_string(),
            max_session_log: DEFAULT_MAX_SESSION_LOG,
            max_exec_log: DEFAULT_MAX_EXEC_LOG,
            files: true,
            allow_traced_exec: false,
            ask_timeout_secs: None,
            spares: DEFAULT_SPARES,
        }
    }
}

/// Below this a session log would hold little more than the guard's own start.
const MIN_SESSION_LOG: u64 = 64 << 10;

/// `[audit] max_session_log`: a size, at least [`MIN_SESSION_LOG`].
fn max_session_log(text: Option<&str>) -> Result<u64> {
    log_size(
        "audit.max_session_log",
        text,
        DEFAULT_MAX_SESSION_LOG,
        "the default is 16m",
    )
}

/// `[audit] max_exec_log`: a size, at least [`MIN_SESSION_LOG`].
fn max_exec_log(text: Option<&str>) -> Result<u64> {
    log_size(
        "audit.max_exec_log",
        text,
        DEFAULT_MAX_EXEC_LOG,
        "the default is 1g",
    )
}

fn log_size(setting: &str, text: Option<&str>, default: u64, hint: &str) -> Result<u64> {
    let Some(text) = text else {
        return Ok(default);
    };
    let error = |why: String| config_error(setting, why);
    match policy::parse_size(text).map(|n| n as u64) {
        Some(bytes) if bytes >= MIN_SESSION_LOG => Ok(bytes),
        Some(_) => Err(error(format!("\"{text}\" is less than 64k; {hint}"))),
        None => Err(error(format!(
            "\"{text}\" is not a size like 16m, 512k or 1g"
        ))),
    }
}

impl UpSettings {
    /// Merge parsed flags with the user's config. Errors name the config file and setting.
    pub(crate) fn resolve(flags: &UpFlags, user: &UserConfig) -> Result<UpSettings> {
        let grants = Grants::parse(&user.grants, &flags.grants)?;
        let upstream_dns = match flags.upstream_dns {
            Some(addr) => Some(addr),
            None => user
                .firewall
                .upstream_dns
                .as_deref()
                .map(parse_upstream)
                .transpose()
                .map_err(|m| config_error("firewall.upstream_dns", m))?,
        };
        check_agent_domains(user)?;
        // Checked before any Docker work; the sections themselves when `up` reads the
        // credentials (`http_session::prepare`; `http_scope`).
        crate::http_scope::inspect_all(user)?;
        let trust_host_commands =
            flags.trust_host_commands || user.trust_host_commands || grants.initialize_command();
        let accept_config = flags.accept_config || grants.config_change();
        Ok(UpSettings {
            rebuild: flags.rebuild,
            grants,
            trust_host_commands,
            accept_config,
            cpus: flags.cpus,
            memory_bytes: flags.memory,
            pids: flags.pids,
            allow: flags.allow.clone(),
            user: user_layer(user)?,
            upstream_dns,
            network: flags.network.map(NetworkMode::from),
            guard: GuardSettings {
                ask_timeout_secs: ask_timeout(&user.firewall, flags.ask)?,
                ..GuardSettings::resolve(user)?
            },
            watch: watch_list(user)?,
            build: BuildSettings::resolve(user)?,
            extra_ca: extra_ca(flags, user)?,
            export: export_sinks(&user.audit)?,
        })
    }
}

/// The flag's certificates, else the config's (relative paths there are the config file's
/// folder's).
fn extra_ca(flags: &UpFlags, user: &UserConfig) -> Result<Option<crate::ca::ExtraCa>> {
    use crate::ca::{ExtraCa, Given};
    if !flags.extra_ca.is_empty() {
        return ExtraCa::load(&flags.extra_ca, &Given::Flag);
    }
    let file = UserConfig::path();
    let base = file.parent().map(Path::to_path_buf).unwrap_or_default();
    let paths: Vec<std::path::PathBuf> = user.extra_ca.iter().map(|p| base.join(p)).collect();
    ExtraCa::load(&paths, &Given::Config(file))
}

impl GuardSettings {
    /// The guard's settings from the user's config (also what `yolo doctor` reports).
    pub(crate) fn resolve(user: &UserConfig) -> Result<GuardSettings> {
        let f = &user.firewall;
        let ttl_floor_secs = match f.ttl_floor {
            Some(secs) if secs > MAX_TTL_FLOOR => {
                return Err(config_error(
                    "firewall.ttl_floor",
                    format!(
                        "{secs} seconds is more than DNS's largest TTL ({MAX_TTL_FLOOR}); the default is {DEFAULT_TTL_FLOOR}"
                    ),
                ))
            }
            Some(secs) => secs,
            None => DEFAULT_TTL_FLOOR,
        };
        let docker_network = named(
            "firewall.docker_network",
            f.docker_network.as_deref(),
            "name a Docker network, or leave the key out for a network of the project's own",
        )?;
        let image = named(
            "guard_image",
            user.guard_image.as_deref(),
            "name a ready guard image, or leave the key out to have yolo build one",
        )?;
        let base_image = named(
            "guard_base_image",
            user.guard_base_image.as_deref(),
            &format!("name an image present locally, or leave the key out for {DEFAULT_BASE}"),
        )?;
        Ok(GuardSettings {
            ttl_floor_secs,
            deny_nxdomain: f.deny_with_nxdomain,
            allow_internal_answers: f.allow_internal_answers,
            docker_network,
            image,
            base_image: base_image.unwrap_or_else(|| DEFAULT_BASE.to_string()),
            max_session_log: max_session_log(user.audit.max_session_log.as_deref())?,
            max_exec_log: max_exec_log(user.audit.max_exec_log.as_deref())?,
            files: user.audit.files.unwrap_or(true),
            ask_timeout_secs: ask_timeout(f, false)?,
            spares: spares(f)?,
            allow_traced_exec: match user.audit.traced_exec.as_deref() {
                None | Some("refuse") => false,
                Some("record") => true,
                Some(other) => {
                    return Err(config_error(
                        "audit.traced_exec",
                        format!(
                            "\"{}\" is neither \"refuse\" nor \"record\"",
                            crate::visible::escape_controls(other)
                        ),
                    ))
                }
            },
        })
    }
}

/// A bad value in the user's config: exit 65, naming the file and the setting.
/// `[firewall] on_refused` (`"refuse"` or `"ask"`; `--ask` says `"ask"`) and `ask_timeout`.
fn ask_timeout(f: &crate::user_config::UserFirewall, ask_flag: bool) -> Result<Option<u64>> {
    let ask = match f.on_refused.as_deref() {
        None | Some("refuse") => ask_flag,
        Some("ask") => true,
        Some(other) => {
            return Err(config_error(
                "firewall.on_refused",
                format!(
                    "\"{}\" is neither \"refuse\" nor \"ask\"",
                    crate::visible::escape_controls(other)
                ),
            ))
        }
    };
    let secs = f.ask_timeout.unwrap_or(DEFAULT_ASK_TIMEOUT);
    if !(1..=MAX_ASK_TIMEOUT).contains(&secs) {
        return Err(config_error(
            "firewall.ask_timeout",
            format!("{secs} seconds: between 1 and {MAX_ASK_TIMEOUT}; the default is {DEFAULT_ASK_TIMEOUT}"),
        ));
    }
    Ok(ask.then_some(secs))
}

/// `[audit] otlp_endpoint` (an http(s) URL) and `ocsf_file` (a path, `~/` expanded; its folder
/// must exist), checked before anything runs.
pub(crate) fn export_sinks(
    audit: &crate::user_config::UserAudit,
) -> Result<crate::audit::export::ship::Sinks> {
    use crate::audit::export::ship;
    if let Some(endpoint) = &audit.otlp_endpoint {
        ship::check_endpoint(endpoint).map_err(|m| config_error("audit.otlp_endpoint", m))?;
    }
    let ocsf_file = match audit.ocsf_file.as_deref() {
        None => None,
        Some(text) => {
            let path = match text.strip_prefix("~/") {
                Some(rest) => directories::BaseDirs::new()
                    .map(|b| b.home_dir().join(rest))
                    .unwrap_or_else(|| std::path::PathBuf::from(text)),
                None => std::path::PathBuf::from(text),
            };
            let folder_exists = path
                .parent()
                .is_none_or(|p| p.as_os_str().is_empty() || p.is_dir());
            if !path.is_absolute() || !folder_exists {
                return Err(config_error(
                    "audit.ocsf_file",
                    format!(
                        "{:?} must be an absolute path (or ~/...) in a folder that exists",
                        crate::visible::escape_controls(text)
                    ),
                ));
            }
            Some(path)
        }
    };
    Ok(ship::Sinks {
        otlp_endpoint: audit.otlp_endpoint.clone(),
        ocsf_file,
    })
}

fn config_error(setting: &str, message: impl std::fmt::Display) -> Error {
    Error::UserConfig {
        file: UserConfig::path(),
        message: format!("\"{setting}\": {message}"),
    }
}

/// `[limits]` and the allowlist additions of `[firewall]`, checked.
fn user_layer(user: &UserConfig) -> Result<UserLayer> {
    let l = &user.limits;
    let limits = LimitLayer::check(l.cpus, l.memory.as_deref(), l.pids, |field, e| {
        config_error(&format!("limits.{field}"), e)
    })?;
    let allow = user
        .firewall
        .allow
        .iter()
        .map(|p| parse_pattern(p))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| config_error("firewall.allow", e))?;
    let presets = user
        .firewall
        .presets
        .iter()
        .map(|name| presets::load(name).map(|_| name.clone()))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| config_error("firewall.presets", e))?;
    let read_only = match &user.workspace.read_only {
        None => policy::DEFAULT_READ_ONLY.map(String::from).to_vec(),
        Some(list) => {
            for entry in list {
                policy::check_read_only_entry(entry)
                    .map_err(|e| config_error("workspace.read_only", e))?;
            }
            list.clone()
        }
    };
    let disk_bytes = match l.disk.as_deref() {
        None => Some(policy::DEFAULT_DISK),
        Some("none") => None,
        Some(text) => Some(policy::check_disk(text).map_err(|e| config_error("limits.disk", e))?),
    };
    let requests = match user.policy.requests.as_deref() {
        None | Some("decline") => policy::Requests::Decline,
        Some("refuse") => policy::Requests::Refuse,
        Some(other) => {
            return Err(config_error(
                "policy.requests",
                format!("\"{other}\" is not \"decline\" or \"refuse\""),
            ))
        }
    };
    Ok(UserLayer {
        limits,
        allow,
        presets,
        read_only,
        disk_bytes,
        exec_audit: user.audit.exec.unwrap_or(true),
        limits_required: l.required.unwrap_or(true),
        requests,
    })
}

/// What `yolo sync` takes from a remote engine's copy: `[workspace] sync_max_file` and
/// `sync_max_total`. The copy is the agent's: it decides how large its files are (a sparse
/// file of a terabyte costs it nothing), so what comes back is bounded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SyncLimits {
    /// A larger file of the working tree is left out (named); `.git` files count in the total
    /// only, as leaving one out would lose the agent's commits.
    pub(crate) max_file: u64,
    /// Bytes of the copy's archive read at most; past it the sync stops, nothing changed.
    pub(crate) max_total: u64,
}

/// GitHub refuses files over 100 MB: a working tree file larger than that is rarely work.
pub(crate) const DEFAULT_SYNC_MAX_FILE: u64 = 100 << 20;
pub(crate) const DEFAULT_SYNC_MAX_TOTAL: u64 = 4 << 30;

impl SyncLimits {
    pub(crate) fn resolve(user: &UserConfig) -> Result<SyncLimits> {
        let size = |setting: &str, text: &Option<String>, default: u64| -> Result<u64> {
            let Some(text) = text else {
                return Ok(default);
            };
            match policy::parse_size(text) {
                Some(bytes) if bytes > 0 => Ok(bytes as u64),
                _ => Err(config_error(
                    setting,
                    format!("\"{text}\" is not a size like 100m, 512k or 4g"),
                )),
            }
        };
        Ok(SyncLimits {
            max_file: size(
                "workspace.sync_max_file",
                &user.workspace.sync_max_file,
                DEFAULT_SYNC_MAX_FILE,
            )?,
            max_total: size(
                "workspace.sync_max_total",
                &user.workspace.sync_max_total,
                DEFAULT_SYNC_MAX_TOTAL,
            )?,
        })
    }
}

/// `[workspace] watch`, checked; unset, the defaults.
pub(crate) fn watch_list(user: &UserConfig) -> Result<Vec<String>> {
    use crate::watched;
    match &user.workspace.watch {
        None => Ok(watched::DEFAULT_WATCH
            .iter()
            .map(|s| s.to_string())
            .collect()),
        Some(list) => {
            for entry in list {
                watched::check_entry(entry).map_err(|e| config_error("workspace.watch", e))?;
            }
            Ok(list.clone())
        }
    }
}

/// `[agents.NAME] domains` join the allowlist when that agent runs: checked like `allow`.
fn check_agent_domains(user: &UserConfig) -> Result<()> {
    for (name, agent) in &user.agents {
        for domain in &agent.domains {
            parse_pattern(domain)
                .map_err(|e| config_error(&format!("agents.{name}.domains"), e))?;
        }
    }
    Ok(())
}

/// A name the config may leave out, but not leave empty.
fn named(setting: &str, value: Option<&str>, what_to_do: &str) -> Result<Option<String>> {
    match value.map(str::trim) {
        Some("") => Err(config_error(setting, format!("empty; {what_to_do}"))),
        other => Ok(other.map(str::to_string)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    fn flags(args: &[&str]) -> std::result::Result<UpFlags, clap::Error> {
        let mut argv = vec!["yolo", "up"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv)?.command {
            crate::cli::Command::Up { flags, .. } => Ok(flags),
            _ => unreachable!("parsed `up`"),
        }
    }

    #[test]
    fn every_flag_arrives_typed() {
        let f = flags(&[
            "--grant",
            "privileged",
            "--grant",
            "cap-add=net_raw",
            "--memory",
            "1g",
            "--cpus",
            "1.5",
            "--pids",
            "64",
            "--upstream-dns",
            "192.0.2.53",
            "--network",
            "open",
            "--allow",
            "*.example.com",
        ])
        .unwrap();
        let s = UpSettings::resolve(&f, &UserConfig::default()).unwrap();
        assert_eq!(
            s.grants,
            Grants::parse(
                &[],
                &[Grant::Privileged, Grant::CapAdd(Some("NET_RAW".into()))]
            )
            .unwrap()
        );
        assert_eq!(s.memory_bytes, Some(1 << 30));
        assert_eq!(s.cpus, Some(1.5));
        assert_eq!(s.pids, Some(64));
        assert_eq!(s.upstream_dns, Some("192.0.2.53:53".parse().unwrap()));
        assert_eq!(s.network, Some(NetworkMode::Open));
        assert_eq!(s.allow, ["*.example.com"]);
    }

    #[test]
    fn bad_values_are_usage_errors_naming_the_flag() {
        for args in [
            &["--upstream-dns", "nope"][..],
            &["--network", "host"],
            &["--grant", "everything"],
            &["--memory", "lots"],
            &["--memory", "1k"],
            &["--cpus", "0"],
            &["--pids", "0"],
            &["--allow", "*"],
        ] {
            let err = flags(args).unwrap_err();
            assert!(
                matches!(
                    err.kind(),
                    clap::error::ErrorKind::ValueValidation | clap::error::ErrorKind::InvalidValue
                ),
                "{args:?}: {err}"
            );
            let text = err.to_string();
            assert!(text.contains(args[0]), "{args:?} names the flag: {text}");
        }
        // An enum lists its choices.
        let err = flags(&["--network", "host"]).unwrap_err().to_string();
        assert!(err.contains("firewall") && err.contains("open"), "{err}");
    }

    #[test]
    fn credentials_and_http_rules_are_taken_and_a_bad_inspect_is_refused() {
        let text = "[credentials.k]\nhosts = [\"api.example.test\"]\nheader = \"x-api-key\"\nfrom_env = \"K\"\n[http.\"api.example.test\"]\nallow = [\"GET /**\"]\n";
        let user: UserConfig = toml::from_str(text).unwrap();
        UpSettings::resolve(&flags(&[]).unwrap(), &user).unwrap();
        let user: UserConfig = toml::from_str("[firewall]\ninspect = \"some\"\n").unwrap();
        let err = UpSettings::resolve(&flags(&[]).unwrap(), &user).unwrap_err();
        assert_eq!(err.code(), 65);
        assert!(err.to_string().contains("[firewall] inspect"), "{err}");
    }

    #[test]
    fn the_user_config_fills_in_and_its_errors_name_the_setting() {
        let mut user = UserConfig {
            grants: vec!["config-change".into(), "initialize-command".into()],
            ..Default::default()
        };
        user.firewall.upstream_dns = Some("[2001:db8::53]:5353".into());
        let s = UpSettings::resolve(&flags(&[]).unwrap(), &user).unwrap();
        assert!(s.accept_config && s.trust_host_commands);
        assert_eq!(s.upstream_dns, Some("[2001:db8::53]:5353".parse().unwrap()));
        assert_eq!(
            s.network, None,
            "not asked: the container's own, or firewall"
        );

        // The flag wins over the config.
        let s = UpSettings::resolve(&flags(&["--upstream-dns", "192.0.2.1:53"]).unwrap(), &user)
            .unwrap();
        assert_eq!(s.upstream_dns, Some("192.0.2.1:53".parse().unwrap()));

        user.firewall.upstream_dns = Some("resolver.example".into());
        let err = UpSettings::resolve(&flags(&[]).unwrap(), &user).unwrap_err();
        assert_eq!(err.code(), 65);
        assert!(err.to_string().contains("firewall.upstream_dns"), "{err}");

        user.firewall.upstream_dns = None;
        user.grants = vec!["root".into()];
        let err = UpSettings::resolve(&flags(&[]).unwrap(), &user).unwrap_err();
        assert_eq!(err.code(), 65);
        assert!(err.to_string().contains("\"grants\""), "{err}");

        let user = UserConfig {
            trust_host_commands: true,
            ..Default::default()
        };
        let s = UpSettings::resolve(&flags(&[]).unwrap(), &user).unwrap();
        assert!(s.trust_host_commands && !s.accept_config);
    }

    /// A config.toml in TOML, resolved with no flags.
    fn resolved(toml: &str) -> Result<UpSettings> {
        let user: UserConfig = toml::from_str(toml).unwrap();
        UpSettings::resolve(&flags(&[]).unwrap(), &user)
    }

    #[test]
    fn ask_comes_from_the_config_or_the_flag_and_bad_values_are_named() {
        assert_eq!(resolved("").unwrap().guard.ask_timeout_secs, None);
        let user: UserConfig = toml::from_str("").unwrap();
        let asked = UpSettings::resolve(&flags(&["--ask"]).unwrap(), &user).unwrap();
        assert_eq!(asked.guard.ask_timeout_secs, Some(DEFAULT_ASK_TIMEOUT));
        let err = resolved("[firewall]\non_refused = \"maybe\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("firewall.on_refused"), "{err}");
        let err = resolved("[firewall]\non_refused = \"ask\"\nask_timeout = 0\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("firewall.ask_timeout"), "{err}");
        let err = resolved("[audit]\notlp_endpoint = \"collector:4318\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("audit.otlp_endpoint"), "{err}");
    }

    #[test]
    fn the_whole_user_config_is_resolved_typed() {
        let s = resolved(
            r#"
            guard_image = "registry.example/guard:1"
            guard_base_image = "debian:trixie-slim"
            [limits]
            cpus = 2
            memory = "4g"
            pids = 512
            [firewall]
            allow = [" internal.example ", "10.0.0.0/8:5432"]
            presets = ["crates", "NPM"]
            ttl_floor = 60
            deny_with_nxdomain = true
            allow_internal_answers = true
            docker_network = "my-net"
            on_refused = "ask"
            ask_timeout = 12
            spares = 3
            [agents.mine]
            command = ["mine"]
            domains = ["api.mine.example"]
            [audit]
            max_session_log = "2m"
            files = false
            traced_exec = "record"
            "#,
        )
        .unwrap();
        assert_eq!(
            s.user,
            UserLayer {
                limits: LimitLayer {
                    cpus: Some(2.0),
                    memory: Some(4 << 30),
                    pids: Some(512)
                },
                allow: vec!["internal.example".into(), "10.0.0.0/8:5432".into()],
                presets: vec!["crates".into(), "NPM".into()],
                read_only: policy::DEFAULT_READ_ONLY.map(String::from).to_vec(),
                disk_bytes: Some(policy::DEFAULT_DISK),
                exec_audit: true,
                limits_required: true,
                requests: policy::Requests::Decline,
            }
        );
        assert_eq!(
            s.guard,
            GuardSettings {
                ttl_floor_secs: 60,
                deny_nxdomain: true,
                allow_internal_answers: true,
                docker_network: Some("my-net".into()),
                image: Some("registry.example/guard:1".into()),
                base_image: "debian:trixie-slim".into(),
                max_session_log: 2 << 20,
                max_exec_log: DEFAULT_MAX_EXEC_LOG,
                files: false,
                allow_traced_exec: true,
                ask_timeout_secs: Some(12),
                spares: 3,
            }
        );
        // Left out: the defaults.
        let s = resolved("").unwrap();
        assert_eq!(s.user, UserLayer::default());
        assert_eq!(s.guard, GuardSettings::default());
        assert_eq!(s.guard.ttl_floor_secs, 300);
        assert_eq!(s.guard.base_image, "scratch");
        assert_eq!(s.guard.max_session_log, 16 << 20);
        assert!(s.guard.files);
    }

    #[test]
    fn builds_get_the_package_mirrors_unless_build_says_otherwise() {
        let s = resolved("").unwrap();
        assert_eq!(
            s.build.presets,
            ["debian", "ubuntu", "npm", "pypi", "crates"]
        );
        assert!(s.build.allow.is_empty());
        let s = resolved("[build]\npresets = [\"Go\"]\nallow = [\"mirror.example:443\"]").unwrap();
        assert_eq!(s.build.presets, ["go"]);
        assert_eq!(s.build.allow, ["mirror.example:443"]);
        assert!(resolved("[build]\npresets = []")
            .unwrap()
            .build
            .presets
            .is_empty());
    }

    #[test]
    fn a_bad_user_config_value_is_a_config_error_naming_its_key() {
        for (toml, key, says) in [
            (
                "[firewall]\nallow = [\"ok.example\", \"*\"]",
                "firewall.allow",
                "\"*\": * alone would allow everything",
            ),
            (
                "[firewall]\npresets = [\"nope\"]",
                "firewall.presets",
                "unknown firewall preset \"nope\"; available: anthropic, ",
            ),
            (
                "[build]\npresets = [\"debian\", \"nope\"]",
                "build.presets",
                "unknown firewall preset \"nope\"; available: anthropic, ",
            ),
            (
                "[build]\nallow = [\"*\"]",
                "build.allow",
                "\"*\": * alone would allow everything",
            ),
            (
                "[build]\nnetwork = \"open\"",
                "build.network",
                "\"open\" is not firewall or none",
            ),
            (
                "[limits]\nmemory = \"lots\"",
                "limits.memory",
                "\"lots\" is not a size",
            ),
            (
                "[limits]\nmemory = \"1k\"",
                "limits.memory",
                "\"1k\" is less than the 6m",
            ),
            ("[limits]\ncpus = 0", "limits.cpus", "0 is not a CPU count"),
            (
                "[limits]\npids = 0",
                "limits.pids",
                "0 is not a process limit",
            ),
            (
                "[firewall]\nttl_floor = 9999999999",
                "firewall.ttl_floor",
                "9999999999 seconds is more than DNS's largest TTL",
            ),
            (
                "[firewall]\nspares = 65",
                "firewall.spares",
                "65 spares is more than 64; each is a container kept running",
            ),
            (
                "[firewall]\ndocker_network = \" \"",
                "firewall.docker_network",
                "empty; name a Docker network",
            ),
            (
                "guard_image = \"\"",
                "guard_image",
                "empty; name a ready guard image",
            ),
            (
                "guard_base_image = \"\"",
                "guard_base_image",
                "empty; name an image present locally",
            ),
            (
                "[audit]\nmax_session_log = \"lots\"",
                "audit.max_session_log",
                "\"lots\" is not a size like 16m",
            ),
            (
                "[audit]\nmax_session_log = \"1k\"",
                "audit.max_session_log",
                "\"1k\" is less than 64k; the default is 16m",
            ),
            (
                "[audit]\ntraced_exec = \"maybe\"",
                "audit.traced_exec",
                "\"maybe\" is neither \"refuse\" nor \"record\"",
            ),
            (
                "[agents.mine]\ncommand = [\"mine\"]\ndomains = [\"*.com\"]",
                "agents.mine.domains",
                "\"*.com\": *.com is too broad",
            ),
        ] {
            let err = resolved(toml).unwrap_err();
            assert_eq!(err.code(), 65, "{toml}: {err}");
            let text = err.to_string();
            let expected = format!("config.toml: \"{key}\": {says}");
            assert!(
                text.contains(&expected),
                "{toml}:\n{text}\nlacks\n{expected}"
            );
        }
        // The largest TTL DNS has is still a floor.
        let s = resolved("[firewall]\nttl_floor = 2147483647").unwrap();
        assert_eq!(s.guard.ttl_floor_secs, 2147483647);
    }

    #[test]
    fn upstream_flags_take_an_address_and_an_optional_port() {
        assert_eq!(
            parse_upstream("192.0.2.53").unwrap(),
            "192.0.2.53:53".parse().unwrap()
        );
        assert_eq!(
            parse_upstream("192.0.2.53:5353").unwrap(),
            "192.0.2.53:5353".parse().unwrap()
        );
        assert_eq!(
            parse_upstream("[2001:db8::1]:53").unwrap(),
            "[2001:db8::1]:53".parse().unwrap()
        );
        assert_eq!(
            parse_upstream("2001:db8::1").unwrap(),
            "[2001:db8::1]:53".parse().unwrap()
        );
        assert!(parse_upstream("dns.example").is_err());
    }

    #[test]
    fn upstream_refuses_any_address_and_port_0() {
        for (text, says) in [
            ("0.0.0.0", "0.0.0.0 means any address"),
            ("0.0.0.0:53", "0.0.0.0 means any address"),
            ("::", ":: means any address"),
            ("[::]", ":: means any address"),
            ("[::]:5353", ":: means any address"),
            ("192.0.2.53:0", "port 0 is no resolver's port"),
            ("[2001:db8::1]:0", "port 0 is no resolver's port"),
        ] {
            let err = parse_upstream(text).unwrap_err();
            assert!(
                err.starts_with(&format!("\"{text}\": {says}")),
                "{text}: {err}"
            );
            // The flag: a usage error naming it; the config: 65 naming the key.
            let usage = flags(&["--upstream-dns", text]).unwrap_err();
            assert_eq!(usage.kind(), clap::error::ErrorKind::ValueValidation);
            assert!(usage.to_string().contains(says), "{usage}");
            let mut user = UserConfig::default();
            user.firewall.upstream_dns = Some(text.into());
            let err = UpSettings::resolve(&flags(&[]).unwrap(), &user).unwrap_err();
            assert_eq!(err.code(), 65);
            assert!(
                err.to_string().contains("\"firewall.upstream_dns\""),
                "{err}"
            );
        }
        assert!(
            parse_upstream("127.0.0.1").is_ok(),
            "a loopback resolver is one"
        );
    }
}
