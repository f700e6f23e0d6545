//! What the user grants: the `Grant` words of `--grant NAME` and `grants = [..]`, parsed once into
//! a `Grants` set that answers "is this granted?", and the `Need`s a repository's requests turn
//! into. Which request needs which grant is decided where the request is read (mounts, run args,
//! ...), not here.

use crate::error::{Error, Result};
use crate::paths::normalize_path;
use crate::run_spec::Gpus;
use crate::user_config::UserConfig;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// One thing the user grants, parsed once from `--grant NAME` or `grants = [..]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Grant {
    Privileged,
    /// Any capability (`None`) or exactly this one (normalized, e.g. `SYS_PTRACE`).
    CapAdd(Option<String>),
    /// Any security option (`None`) or exactly this one.
    SecurityOpt(Option<String>),
    /// Any host bind mount (`None`) or this path and everything below it.
    HostMount(Option<PathBuf>),
    HostPid,
    HostIpc,
    HostUserns,
    HostUts,
    Device,
    DockerSocket,
    /// GPUs (`--gpus`, `--runtime=nvidia`, `hostRequirements.gpu`): as many as the repository
    /// asks (`None`), every one, or at most this many.
    Gpu(Option<Gpus>),
    /// Accept a changed container definition (used by the approval step, not by `evaluate`).
    ConfigChange,
    /// Run `initializeCommand` on the host (same as `trust_host_commands`).
    InitializeCommand,
    /// A Compose service other than the dev service gets a network with egress: any service
    /// (`None`) or this one.
    ComposeEgress(Option<String>),
    /// A Dockerfile's `ADD <url>`, which the Docker daemon downloads outside the firewall.
    RemoteAdd,
    /// Features fetched from a local host (loopback, link-local, private): any (`None`) or this
    /// `host` or `host:port`.
    LocalFeatures(Option<String>),
}

/// A grant word as the user types it, with what it allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GrantName {
    pub(crate) word: &'static str,
    /// The optional `=VALUE` that narrows the grant, e.g. `CAP`.
    pub(crate) value: Option<&'static str>,
    /// One line for `--help` and error messages.
    pub(crate) meaning: &'static str,
}

impl fmt::Display for GrantName {
    /// `cap-add[=CAP]`, `privileged`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.value {
            Some(value) => write!(f, "{}[={value}]", self.word),
            None => f.write_str(self.word),
        }
    }
}

const fn name(word: &'static str, value: Option<&'static str>, meaning: &'static str) -> GrantName {
    GrantName {
        word,
        value,
        meaning,
    }
}

/// Every grant word, in the order `--help` lists them.
pub(crate) const GRANT_NAMES: &[GrantName] = &[
    name("privileged", None, "run the container privileged"),
    name(
        "cap-add",
        Some("CAP"),
        "add any capability, or only CAP (capAdd, --cap-add)",
    ),
    name(
        "security-opt",
        Some("OPT"),
        "set any security option, or only OPT (securityOpt, --security-opt)",
    ),
    name(
        "host-mount",
        Some("PATH"),
        "bind any host path, or PATH and below; also a build context outside the repository",
    ),
    name(
        "host-pid",
        None,
        "share the host's process ids (--pid host)",
    ),
    name(
        "host-ipc",
        None,
        "share the host's IPC namespace (--ipc host)",
    ),
    name(
        "host-userns",
        None,
        "run without a user namespace (--userns host)",
    ),
    name(
        "host-uts",
        None,
        "share the host's hostname namespace (--uts host)",
    ),
    name("device", None, "pass host devices (--device)"),
    name(
        "docker-socket",
        None,
        "bind the Docker socket (root on the host)",
    ),
    name(
        "gpu",
        Some("N|all"),
        "pass the host's GPUs as the repository asks, all of them, or at most N (--gpus, --runtime=nvidia, hostRequirements.gpu)",
    ),
    name(
        "config-change",
        None,
        "accept a changed container definition (config, Dockerfile, host scripts) without asking",
    ),
    name(
        "initialize-command",
        None,
        "run initializeCommand on the host without asking",
    ),
    name(
        "compose-egress",
        Some("SERVICE"),
        "let any Compose service but the dev service, or only SERVICE, reach the internet and the host (unfiltered)",
    ),
    name(
        "local-features",
        Some("HOST[:PORT]"),
        "let Features come from any local address (this machine, its private networks), or only from HOST[:PORT]",
    ),
    name(
        "remote-add",
        None,
        "let a Dockerfile's ADD download a URL (the Docker daemon fetches it on the host's network, outside the firewall)",
    ),
];

/// Words that look like grants but name something no grant can allow, with the reason.
const NOT_GRANTABLE: &[(&str, &str)] = &[("host-network", HOST_NETWORK_REFUSED)];

/// Why a container of yolo never gets another network namespace than its guard's.
pub(crate) const HOST_NETWORK_REFUSED: &str = "yolo's firewall guard owns the container's network namespace (the agent joins the guard's), so the container cannot use the host's or another container's network; remove the option from the config (the default [policy] requests = \"decline\" leaves it out for you), and if the agent needs the network unfiltered, run `yolo up --network open` once it is gone (still audited)";

/// `--help` text: one grant per line with its meaning.
pub(crate) fn grant_help() -> String {
    let width = GRANT_NAMES
        .iter()
        .map(|g| g.to_string().len())
        .max()
        .unwrap_or(0);
    GRANT_NAMES
        .iter()
        .map(|g| format!("{:width$}  {}", g.to_string(), g.meaning))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why a grant word was not understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GrantError {
    Unknown {
        text: String,
    },
    TakesNoValue {
        word: String,
        text: String,
    },
    EmptyValue {
        word: String,
    },
    RelativePath {
        text: String,
    },
    NotACount {
        text: String,
    },
    NotGrantable {
        word: &'static str,
        reason: &'static str,
    },
}

impl fmt::Display for GrantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GrantError::Unknown { text } => {
                let valid = grant_help().replace('\n', "\n  ");
                write!(f, "unknown grant \"{text}\"; valid grants:\n  {valid}")
            }
            GrantError::TakesNoValue { word, text } => {
                write!(f, "grant \"{word}\" takes no value (got \"{text}\")")
            }
            GrantError::EmptyValue { word } => write!(
                f,
                "grant \"{word}=\" needs a value after '=' (or drop the '=')"
            ),
            GrantError::RelativePath { text } => {
                write!(f, "grant \"{text}\": the path must be absolute")
            }
            GrantError::NotACount { text } => {
                write!(
                    f,
                    "grant \"{text}\": the value is a number of GPUs (1 or more) or \"all\""
                )
            }
            GrantError::NotGrantable { word, reason } => {
                write!(f, "{word} cannot be granted: {reason}")
            }
        }
    }
}

impl std::error::Error for GrantError {}

impl FromStr for Grant {
    type Err = GrantError;

    fn from_str(text: &str) -> std::result::Result<Self, GrantError> {
        let text = text.trim();
        let (word, value) = match text.split_once('=') {
            Some((w, v)) => (w, Some(v.trim())),
            None => (text, None),
        };
        if let Some((word, reason)) = NOT_GRANTABLE.iter().find(|(w, _)| *w == word) {
            return Err(GrantError::NotGrantable { word, reason });
        }
        let plain = |grant: Grant| match value {
            None => Ok(grant),
            Some(_) => Err(GrantError::TakesNoValue {
                word: word.to_string(),
                text: text.to_string(),
            }),
        };
        // `word=` with nothing after it is a typo, not "any".
        let value = match value {
            Some("")
                if GRANT_NAMES
                    .iter()
                    .any(|g| g.word == word && g.value.is_some()) =>
            {
                return Err(GrantError::EmptyValue {
                    word: word.to_string(),
                })
            }
            other => other,
        };
        match word {
            "cap-add" => Ok(Grant::CapAdd(value.map(normalize_cap))),
            "security-opt" => Ok(Grant::SecurityOpt(value.map(str::to_string))),
            "host-mount" => match value {
                None => Ok(Grant::HostMount(None)),
                Some(path) => normalize_path(path.as_ref())
                    .map(|p| Grant::HostMount(Some(p)))
                    .ok_or_else(|| GrantError::RelativePath {
                        text: text.to_string(),
                    }),
            },
            "privileged" => plain(Grant::Privileged),
            "host-pid" => plain(Grant::HostPid),
            "host-ipc" => plain(Grant::HostIpc),
            "host-userns" => plain(Grant::HostUserns),
            "host-uts" => plain(Grant::HostUts),
            "device" => plain(Grant::Device),
            "docker-socket" => plain(Grant::DockerSocket),
            "gpu" => match value {
                None => Ok(Grant::Gpu(None)),
                Some(count) => parse_gpus(count)
                    .map(|g| Grant::Gpu(Some(g)))
                    .ok_or_else(|| GrantError::NotACount {
                        text: text.to_string(),
                    }),
            },
            "config-change" => plain(Grant::ConfigChange),
            "initialize-command" => plain(Grant::InitializeCommand),
            "compose-egress" => Ok(Grant::ComposeEgress(value.map(str::to_string))),
            "remote-add" => plain(Grant::RemoteAdd),
            "local-features" => Ok(Grant::LocalFeatures(value.map(str::to_string))),
            _ => Err(GrantError::Unknown {
                text: text.to_string(),
            }),
        }
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grant::Privileged => f.write_str("privileged"),
            Grant::CapAdd(None) => f.write_str("cap-add"),
            Grant::CapAdd(Some(c)) => write!(f, "cap-add={c}"),
            Grant::SecurityOpt(None) => f.write_str("security-opt"),
            Grant::SecurityOpt(Some(o)) => write!(f, "security-opt={o}"),
            Grant::HostMount(None) => f.write_str("host-mount"),
            Grant::HostMount(Some(p)) => write!(f, "host-mount={}", p.display()),
            Grant::HostPid => f.write_str("host-pid"),
            Grant::HostIpc => f.write_str("host-ipc"),
            Grant::HostUserns => f.write_str("host-userns"),
            Grant::HostUts => f.write_str("host-uts"),
            Grant::Device => f.write_str("device"),
            Grant::DockerSocket => f.write_str("docker-socket"),
            Grant::Gpu(None) => f.write_str("gpu"),
            Grant::Gpu(Some(Gpus::All)) => f.write_str("gpu=all"),
            Grant::Gpu(Some(Gpus::Count(n))) => write!(f, "gpu={n}"),
            Grant::ConfigChange => f.write_str("config-change"),
            Grant::InitializeCommand => f.write_str("initialize-command"),
            Grant::ComposeEgress(None) => f.write_str("compose-egress"),
            Grant::ComposeEgress(Some(s)) => write!(f, "compose-egress={s}"),
            Grant::RemoteAdd => f.write_str("remote-add"),
            Grant::LocalFeatures(None) => f.write_str("local-features"),
            Grant::LocalFeatures(Some(h)) => write!(f, "local-features={h}"),
        }
    }
}

/// The user's grants from the config file and the command line, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Grants(Vec<Grant>);

impl Grants {
    /// The `--grant` flags (parsed by clap) and the `grants` of the user's config; a bad word in
    /// the config is a user-config error (65) listing the valid words.
    pub(crate) fn parse(user: &[String], flags: &[Grant]) -> Result<Grants> {
        let mut grants = flags.to_vec();
        for text in user {
            let grant = text.parse::<Grant>().map_err(|e| Error::UserConfig {
                file: UserConfig::path(),
                message: format!("\"grants\": {e}"),
            })?;
            if !grants.contains(&grant) {
                grants.push(grant);
            }
        }
        Ok(Grants(grants))
    }

    /// These grants and `grant`.
    pub(crate) fn with(&self, grant: Grant) -> Grants {
        let mut grants = self.clone();
        if !grants.0.contains(&grant) {
            grants.0.push(grant);
        }
        grants
    }

    /// `initializeCommand` may run on the host without asking.
    pub(crate) fn initialize_command(&self) -> bool {
        self.0.contains(&Grant::InitializeCommand)
    }

    /// A changed container definition is accepted without asking.
    pub(crate) fn config_change(&self) -> bool {
        self.0.contains(&Grant::ConfigChange)
    }

    /// A Dockerfile's `ADD` may download URLs (`dockerfile::remote_adds`).
    pub(crate) fn remote_add(&self) -> bool {
        self.0.contains(&Grant::RemoteAdd)
    }

    /// The local hosts Features may come from: every one (`None`), or these.
    pub(crate) fn local_features(&self) -> Option<Vec<String>> {
        let mut hosts = Vec::new();
        for grant in &self.0 {
            match grant {
                Grant::LocalFeatures(None) => return None,
                Grant::LocalFeatures(Some(h)) => hosts.push(h.clone()),
                _ => {}
            }
        }
        Some(hosts)
    }

    /// The GPUs a request for `asked` gets, `None` when no `gpu` grant covers it: as asked
    /// under a plain `gpu`, at most the grant's count under `gpu=N`.
    pub(crate) fn gpus(&self, asked: &Gpus) -> Option<(Gpus, &Grant)> {
        self.0.iter().find_map(|g| match g {
            Grant::Gpu(None) | Grant::Gpu(Some(Gpus::All)) => Some((asked.clone(), g)),
            Grant::Gpu(Some(Gpus::Count(max))) => Some((
                match asked {
                    Gpus::All => Gpus::Count(*max),
                    Gpus::Count(n) => Gpus::Count((*n).min(*max)),
                },
                g,
            )),
            _ => None,
        })
    }

    /// Some `host-mount` grant, of any path.
    pub(crate) fn any_host_mount(&self) -> bool {
        self.0.iter().any(|g| matches!(g, Grant::HostMount(_)))
    }

    /// Whether a `host-mount` grant covers `path` (the whole host, or a folder holding it).
    pub(crate) fn host_mount_covers(&self, path: &Path) -> bool {
        self.find(&Need::HostMount(path.to_path_buf())).is_some()
    }

    /// The first grant that allows `need`.
    pub(super) fn find(&self, need: &Need) -> Option<&Grant> {
        self.0.iter().find(|g| need.allowed_by(g))
    }
}

/// Something a repository asks for that only a grant allows.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Need {
    Privileged,
    Cap(String),
    SecurityOpt(String),
    HostMount(PathBuf),
    HostPid,
    HostIpc,
    HostUserns,
    HostUts,
    Device,
    DockerSocket,
    Gpu,
    /// A Compose service (not the dev service) on a network with egress.
    ComposeEgress(String),
}

impl Need {
    fn allowed_by(&self, grant: &Grant) -> bool {
        match (self, grant) {
            (Need::Privileged, Grant::Privileged) => true,
            (Need::Cap(c), Grant::CapAdd(g)) => g.as_ref().is_none_or(|g| g == c),
            (Need::SecurityOpt(o), Grant::SecurityOpt(g)) => g.as_ref().is_none_or(|g| g == o),
            (Need::HostMount(p), Grant::HostMount(g)) => {
                g.as_ref().is_none_or(|g| p.starts_with(g))
            }
            (Need::HostPid, Grant::HostPid)
            | (Need::HostIpc, Grant::HostIpc)
            | (Need::HostUserns, Grant::HostUserns)
            | (Need::HostUts, Grant::HostUts)
            | (Need::Device, Grant::Device)
            | (Need::DockerSocket, Grant::DockerSocket)
            | (Need::Gpu, Grant::Gpu(_)) => true,
            (Need::ComposeEgress(s), Grant::ComposeEgress(g)) => g.as_ref().is_none_or(|g| g == s),
            _ => false,
        }
    }

    /// The narrowest grant that allows this, as the user would type it.
    pub(super) fn narrowest(&self) -> Grant {
        match self {
            Need::Privileged => Grant::Privileged,
            Need::Cap(c) => Grant::CapAdd(Some(c.clone())),
            Need::SecurityOpt(o) => Grant::SecurityOpt(Some(o.clone())),
            Need::HostMount(p) => Grant::HostMount(Some(p.clone())),
            Need::HostPid => Grant::HostPid,
            Need::HostIpc => Grant::HostIpc,
            Need::HostUserns => Grant::HostUserns,
            Need::HostUts => Grant::HostUts,
            Need::Device => Grant::Device,
            Need::DockerSocket => Grant::DockerSocket,
            Need::Gpu => Grant::Gpu(None),
            Need::ComposeEgress(s) => Grant::ComposeEgress(Some(s.clone())),
        }
    }
}

/// The exact words that grant `grant`: the flag and the config line.
pub(super) fn grant_hint(grant: &Grant) -> String {
    format!(
        "--grant {grant}, or grants = [\"{grant}\"] in {}",
        UserConfig::path().display()
    )
}

/// `all`, or a count of GPUs (1 or more).
pub(super) fn parse_gpus(text: &str) -> Option<Gpus> {
    match text.trim() {
        "all" => Some(Gpus::All),
        n => n.parse::<u32>().ok().filter(|n| *n > 0).map(Gpus::Count),
    }
}

/// `CAP_SYS_PTRACE`, `sys_ptrace` -> `SYS_PTRACE`.
pub(super) fn normalize_cap(cap: &str) -> String {
    let upper = cap.trim().to_ascii_uppercase();
    upper
        .strip_prefix("CAP_")
        .map(str::to_string)
        .unwrap_or(upper)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use serde_json::json;

    #[test]
    fn grants_parse_and_print() {
        assert_eq!("privileged".parse::<Grant>(), Ok(Grant::Privileged));
        assert_eq!(
            "cap-add=cap_sys_ptrace".parse::<Grant>(),
            Ok(Grant::CapAdd(Some("SYS_PTRACE".into())))
        );
        assert_eq!("cap-add".parse::<Grant>(), Ok(Grant::CapAdd(None)));
        assert_eq!(
            "host-mount=/data/../srv/".parse::<Grant>(),
            Ok(Grant::HostMount(Some("/srv".into())))
        );
        for name in [
            "security-opt=seccomp=unconfined",
            "host-pid",
            "config-change",
        ] {
            assert_eq!(name.parse::<Grant>().unwrap().to_string(), name);
        }
        assert!("host-mount=relative".parse::<Grant>().is_err());
        assert!("cap-add=".parse::<Grant>().is_err());
        assert!("privileged=yes".parse::<Grant>().is_err());
        assert!(matches!(
            "privileged=".parse::<Grant>(),
            Err(GrantError::TakesNoValue { .. })
        ));
    }

    #[test]
    fn every_listed_word_parses_and_prints_the_same() {
        for name in GRANT_NAMES {
            let grant: Grant = name.word.parse().unwrap();
            assert_eq!(grant.to_string(), name.word);
            assert!(!name.meaning.is_empty());
            if name.value.is_some() {
                let sample = if name.word == "gpu" { "2" } else { "/x" };
                let narrow = format!("{}={sample}", name.word);
                assert!(narrow.parse::<Grant>().is_ok(), "{narrow}");
            }
        }
        let help = grant_help();
        for (line, name) in help.lines().zip(GRANT_NAMES) {
            assert!(line.starts_with(&format!("{name} ")), "{line}");
            assert!(line.ends_with(name.meaning), "{line}");
        }
        assert_eq!(help.lines().count(), GRANT_NAMES.len());
        assert!(
            help.starts_with(&format!(
                "{:28}  run the container privileged\ncap-add[=CAP]  ",
                "privileged"
            )),
            "{help}"
        );
    }

    #[test]
    fn host_network_cannot_be_granted() {
        for text in ["host-network", " host-network ", "host-network=x"] {
            let message = text.parse::<Grant>().unwrap_err().to_string();
            assert!(
                message.starts_with("host-network cannot be granted: "),
                "{message}"
            );
            assert!(
                message.contains("owns the container's network"),
                "{message}"
            );
        }
        let error = Grants::parse(&["host-network".into()], &[]).unwrap_err();
        assert!(matches!(error, Error::UserConfig { .. }), "{error}");
    }

    #[test]
    fn grant_is_a_clap_value() {
        let command = clap::Command::new("yolo").arg(
            clap::Arg::new("grant")
                .long("grant")
                .value_parser(clap::value_parser!(Grant)),
        );
        let matches = command
            .clone()
            .try_get_matches_from(["yolo", "--grant", "cap-add=sys_ptrace"])
            .unwrap();
        assert_eq!(
            matches.get_one::<Grant>("grant"),
            Some(&Grant::CapAdd(Some("SYS_PTRACE".into())))
        );
        let error = command
            .try_get_matches_from(["yolo", "--grant", "host-network"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("host-network cannot be granted"), "{error}");
    }

    #[test]
    fn grants_answer_questions() {
        let grants = Grants::parse(
            &["config-change".into()],
            &[
                Grant::HostMount(Some("/srv".into())),
                Grant::InitializeCommand,
            ],
        )
        .unwrap();
        assert!(grants.config_change() && grants.initialize_command() && grants.any_host_mount());
        let none = Grants::default();
        assert!(!none.config_change() && !none.initialize_command() && !none.any_host_mount());
    }

    #[test]
    fn unknown_grant_lists_valid_ones() {
        let message = case(with_image(json!({})))
            .grant(&["root"])
            .run()
            .unwrap_err()
            .to_string();
        assert!(message.contains("unknown grant \"root\""), "{message}");
        assert!(
            message.contains("host-pid") && message.contains("docker-socket"),
            "{message}"
        );
        assert!(!message.contains("host-network"), "{message}");
        let mut c = case(with_image(json!({})));
        c.user_grants = vec!["nope".into()];
        assert!(matches!(c.run(), Err(Error::UserConfig { .. })));
    }
}
