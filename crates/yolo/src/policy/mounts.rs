//! Mounts a repository asks for (`mounts`, and `-v`, `--mount`, `--tmpfs` in runArgs): named
//! volumes and tmpfs freely, host binds only with `host-mount` (and the Docker socket only with
//! `docker-socket`), declined without. Two kinds of bind need nothing:
//! - the repository itself, or a path in it, at any target: nothing new is exposed, and every
//!   protected path the bind exposes gets its read-only overlay at the new target too (a bind
//!   of a path inside a protected one is read-only as a whole). Where the path really leads is
//!   a fact (`Facts::real_path`): a link out of the repository is a host bind like any other.
//! - `/etc/localtime` and `/etc/timezone`, always read-only: the host's time zone, nothing
//!   more.

use super::grants::Need;
use super::Eval;
use crate::devcontainer::model::MountEntry;
use crate::error::{Error, Result};
use crate::paths::{is_container_path, normalize_path};
use crate::run_spec::{Mount, MountKind, RunSpec};
use std::fmt;
use std::path::{Path, PathBuf};

/// Host files any container may read: the time zone (bound read-only whatever was asked).
const HARMLESS_HOST_FILES: [&str; 2] = ["/etc/localtime", "/etc/timezone"];

/// Sockets that hand out root on the host to whoever can write to them.
const DOCKER_SOCKETS: [&str; 2] = ["/var/run/docker.sock", "/run/docker.sock"];
const SOCKET_NAMES: [&str; 3] = ["docker.sock", "podman.sock", "containerd.sock"];

/// A parsed mount request (`mounts` entry, `workspaceMount`, `-v`, `--mount`, `--tmpfs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MountRequest {
    pub(super) kind: MountKind,
    pub(super) source: String,
    pub(super) target: String,
    pub(super) read_only: bool,
}

/// Why a mount string is not usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum MountError {
    /// `volume-opt`, `volume-driver`.
    ReachesHost {
        key: String,
    },
    UnknownOption {
        key: String,
    },
    NoTarget,
    Kind {
        kind: String,
    },
    NotABool {
        part: String,
    },
    VolumeForm {
        text: String,
    },
    VolumeNoTarget {
        text: String,
    },
    VolumeOption {
        option: String,
    },
}

impl fmt::Display for MountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MountError::ReachesHost { key } => write!(
                f,
                "\"{key}\" is not accepted: a volume driver option can mount any host path"
            ),
            MountError::UnknownOption { key } => write!(
                f,
                "unknown mount option \"{key}\"; accepted: type, source (src), target (dst, destination), readonly (ro), consistency"
            ),
            MountError::NoTarget => f.write_str("the mount has no target"),
            MountError::Kind { kind } => write!(
                f,
                "mount type \"{kind}\" is not supported; use bind, volume or tmpfs"
            ),
            MountError::NotABool { part } => write!(f, "\"{part}\": expected true or false"),
            MountError::VolumeForm { text } => {
                write!(f, "\"{text}\" is not SOURCE:TARGET[:OPTIONS]")
            }
            MountError::VolumeNoTarget { text } => write!(f, "\"{text}\" has no target"),
            MountError::VolumeOption { option } => write!(
                f,
                "volume option \"{option}\" is not supported; accepted: ro, rw, z, Z"
            ),
        }
    }
}

impl std::error::Error for MountError {}

/// Parse the Docker `--mount` string form: `type=bind,source=/a,target=/b[,readonly]`.
/// Options that only tune performance are accepted and dropped; options that could reach the
/// host (`volume-opt`, `volume-driver`) or that yolo cannot carry are errors.
pub(super) fn parse_mount_string(text: &str) -> Result<MountRequest, MountError> {
    let mut kind = None;
    let (mut source, mut target, mut read_only) = (String::new(), None, false);
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = match part.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (part, None),
        };
        match key {
            "type" => kind = Some(mount_kind(value.unwrap_or_default())?),
            "source" | "src" => source = value.unwrap_or_default().to_string(),
            "target" | "destination" | "dst" => target = value.map(str::to_string),
            "readonly" | "ro" => read_only = parse_bool_option(part, value)?,
            "consistency" | "volume-nocopy" | "tmpfs-size" | "tmpfs-mode" => {}
            "volume-opt" | "volume-driver" => {
                return Err(MountError::ReachesHost { key: key.into() })
            }
            _ => return Err(MountError::UnknownOption { key: key.into() }),
        }
    }
    let kind = kind.unwrap_or(MountKind::Volume);
    let target = target
        .filter(|t| !t.is_empty())
        .ok_or(MountError::NoTarget)?;
    Ok(MountRequest {
        kind,
        source,
        target,
        read_only,
    })
}

pub(super) fn mount_kind(text: &str) -> Result<MountKind, MountError> {
    match text {
        "bind" => Ok(MountKind::Bind),
        "volume" => Ok(MountKind::Volume),
        "tmpfs" => Ok(MountKind::Tmpfs),
        other => Err(MountError::Kind { kind: other.into() }),
    }
}

fn parse_bool_option(part: &str, value: Option<&str>) -> Result<bool, MountError> {
    match value {
        None | Some("true") | Some("1") => Ok(true),
        Some("false") | Some("0") => Ok(false),
        Some(_) => Err(MountError::NotABool { part: part.into() }),
    }
}

/// Parse `-v`/`--volume`: `name:/target[:opts]`, `/host:/target[:opts]`, or `/target`
/// (an anonymous volume). A source that looks like a path is a host bind.
pub(super) fn parse_volume_arg(text: &str) -> Result<MountRequest, MountError> {
    let parts: Vec<&str> = text.split(':').collect();
    let (source, target, opts) = match parts.as_slice() {
        [target] => ("", *target, ""),
        [source, target] => (*source, *target, ""),
        [source, target, opts] => (*source, *target, *opts),
        _ => return Err(MountError::VolumeForm { text: text.into() }),
    };
    if target.is_empty() {
        return Err(MountError::VolumeNoTarget { text: text.into() });
    }
    let mut read_only = false;
    for opt in opts.split(',').filter(|o| !o.is_empty()) {
        match opt {
            "ro" => read_only = true,
            "rw" | "z" | "Z" | "cached" | "delegated" | "consistent" | "nocopy" => {}
            _ => return Err(MountError::VolumeOption { option: opt.into() }),
        }
    }
    let is_path = source.starts_with('/') || source.starts_with('.') || source.starts_with('~');
    let kind = if is_path {
        MountKind::Bind
    } else {
        MountKind::Volume
    };
    Ok(MountRequest {
        kind,
        source: source.into(),
        target: target.into(),
        read_only,
    })
}

/// Docker volume names: `[a-zA-Z0-9][a-zA-Z0-9_.-]*`.
pub(super) fn valid_volume_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

fn is_docker_socket(path: &Path) -> bool {
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| SOCKET_NAMES.contains(&n));
    named || DOCKER_SOCKETS.iter().any(|s| Path::new(s) == path)
}

/// A folder that holds the Docker socket: binding it hands the socket over too.
fn contains_docker_socket(path: &Path) -> bool {
    DOCKER_SOCKETS
        .iter()
        .any(|s| Path::new(s).starts_with(path) && Path::new(s) != path)
}

impl Eval<'_> {
    /// A host path from the repository, absolute and with `..` folded.
    pub(super) fn host_path(&self, property: &str, source: &str) -> Result<PathBuf> {
        normalize_path(Path::new(source)).ok_or_else(|| {
            self.config_error(
                property,
                format!("the host path \"{source}\" must be absolute"),
            )
        })
    }

    /// A bind of a host path other than the workspace, where it cannot be left out: refused
    /// without its grant (`allow_host_path`).
    pub(super) fn require_host_path(
        &mut self,
        property: &str,
        source: &Path,
        target: &str,
    ) -> Result<()> {
        self.strictly(|eval| eval.allow_host_path(property, source, target))
            .map(|_| ())
    }

    /// A bind of a host path other than the workspace: the socket needs `docker-socket`, any
    /// other path `host-mount` (and a folder holding the socket needs both); `false`: declined.
    pub(super) fn allow_host_path(
        &mut self,
        property: &str,
        source: &Path,
        target: &str,
    ) -> Result<bool> {
        let value = format!(
            "a bind mount of the host's {} at {target}",
            source.display()
        );
        if is_docker_socket(source) || contains_docker_socket(source) {
            let reason = "the Docker socket gives root on the host";
            if !self.allow(Need::DockerSocket, property, &value, reason)? {
                return Ok(false);
            }
            if is_docker_socket(source) {
                return Ok(true);
            }
        }
        let reason =
            "yolo mounts only the repository, to keep other host files out of the agent's reach";
        self.allow(
            Need::HostMount(source.to_path_buf()),
            property,
            &value,
            reason,
        )
    }

    /// Where a bind source inside the repository really leads, when that is inside it too;
    /// `None` for a source outside, or one whose links lead out (or were not looked at).
    fn inside_repository(&self, source: &Path) -> Option<PathBuf> {
        let roots: Vec<&Path> = [Some(self.input.workspace), self.git_root.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        if !roots.iter().any(|r| source.starts_with(r)) {
            return None;
        }
        if source == self.input.workspace {
            return Some(source.to_path_buf());
        }
        let real = self.input.facts.real_path(source)?;
        roots
            .iter()
            .any(|r| real.starts_with(r))
            .then(|| real.to_path_buf())
    }

    /// A bind of `source` (in the repository) at `target`: every protected path it exposes,
    /// and the folders leading to one, get their overlay at the new target as well; a source
    /// in a read-only path makes the whole bind read-only.
    fn protect_again(&self, spec: &mut RunSpec, source: &Path, target: &str) -> bool {
        let inside_read_only = spec
            .protected
            .iter()
            .any(|p| p.read_only && source.starts_with(&p.host));
        let again: Vec<crate::run_spec::Protected> = spec
            .protected
            .iter()
            .filter(|p| p.host != source && p.host.starts_with(source))
            .map(|p| {
                let rel = crate::paths::slash_path(p.host.strip_prefix(source).unwrap_or(&p.host));
                crate::run_spec::Protected {
                    target: format!("{}/{rel}", target.trim_end_matches('/')),
                    ..p.clone()
                }
            })
            .collect();
        for p in again {
            if !spec.protected.iter().any(|known| known.target == p.target) {
                spec.protected.push(p);
            }
        }
        inside_read_only
    }

    /// The metadata entries' mounts, then devcontainer.json's; of two with one target, the
    /// later wins (the spec's merge), and only the winner is checked.
    pub(super) fn apply_mounts(&mut self, spec: &mut RunSpec) -> Result<()> {
        let mut requests: Vec<(String, MountRequest)> = Vec::new();
        for (property, entry) in self.mount_entries() {
            let req = match entry {
                MountEntry::Text(text) => parse_mount_string(text),
                MountEntry::Object(o) => mount_kind(&o.kind).map(|kind| MountRequest {
                    kind,
                    source: o.source.clone().unwrap_or_default(),
                    target: o.target.clone(),
                    read_only: false,
                }),
            }
            .map_err(|e| self.config_error(&property, e))?;
            requests.retain(|(_, earlier)| earlier.target != req.target);
            requests.push((property, req));
        }
        for (property, req) in requests {
            self.add_mount(spec, &property, req)?;
        }
        for (name, target) in &self.input.agent_volumes {
            let mount = Mount {
                kind: MountKind::Volume,
                source: name.clone(),
                target: target.clone(),
                read_only: false,
            };
            push_mount(spec, mount);
        }
        Ok(())
    }

    /// Admit one mount request: volumes and tmpfs freely, host binds only when granted.
    pub(super) fn add_mount(
        &mut self,
        spec: &mut RunSpec,
        property: &str,
        req: MountRequest,
    ) -> Result<()> {
        if !is_container_path(&req.target) {
            let message = format!("the target \"{}\" must be an absolute path", req.target);
            return Err(self.config_error(property, message));
        }
        let mut read_only = req.read_only;
        let source = match req.kind {
            MountKind::Tmpfs => String::new(),
            MountKind::Volume if req.source.is_empty() || valid_volume_name(&req.source) => {
                self.refuse_reserved_volume(property, &req.source)?;
                req.source
            }
            MountKind::Volume => {
                let message = format!("\"{}\" is not a valid volume name", req.source);
                return Err(self.config_error(property, message));
            }
            MountKind::Bind => {
                let source = self.host_path(property, &req.source)?;
                if let Some(real) = self.inside_repository(&source) {
                    // The repository again elsewhere exposes nothing new, with its overlays.
                    read_only |= self.protect_again(spec, &real, &req.target);
                    real.to_string_lossy().into_owned()
                } else if HARMLESS_HOST_FILES.iter().any(|f| source == Path::new(f)) {
                    read_only = true;
                    source.to_string_lossy().into_owned()
                } else if self.allow_host_path(property, &source, &req.target)? {
                    source.to_string_lossy().into_owned()
                } else {
                    return Ok(());
                }
            }
        };
        let mount = Mount {
            kind: req.kind,
            source,
            target: req.target,
            read_only,
        };
        push_mount(spec, mount);
        Ok(())
    }
}

/// The prefix of the named volumes yolo makes and manages (agent state: `yolo-<agent>-<id>`).
const RESERVED_VOLUME_PREFIX: &str = "yolo-";

impl Eval<'_> {
    /// A volume named with yolo's reserved prefix is one yolo manages, for this workspace or for
    /// another: another workspace's agent state holds that agent's login token. Only this
    /// workspace's own volumes may be named. The rule is on the name, not on the volume's labels:
    /// policy stays pure, and a volume another workspace creates later is covered too.
    fn refuse_reserved_volume(&self, property: &str, name: &str) -> Result<()> {
        let own = self.input.agent_volumes.iter().any(|(v, _)| v == name);
        if !name.starts_with(RESERVED_VOLUME_PREFIX) || own {
            return Ok(());
        }
        Err(Error::Forbidden {
            file: self.file(),
            property: property.to_string(),
            value: format!("the volume \"{name}\""),
            reason: format!(
                "volumes named \"{RESERVED_VOLUME_PREFIX}*\" are yolo's own (agent logins of other workspaces among them) and a repository may mount only this workspace's; rename the volume"
            ),
        })
    }
}

fn push_mount(spec: &mut RunSpec, mount: Mount) {
    if !spec.mounts.contains(&mount) {
        spec.mounts.push(mount);
    }
}

#[cfg(test)]
mod tests {
    use super::super::facts::{Facts, Kind};
    use super::super::test_support::*;
    use super::*;
    use serde_json::json;

    #[test]
    fn mount_strings_parse() {
        let m = parse_mount_string("source=/a,target=/b,type=bind,readonly,consistency=cached")
            .unwrap();
        assert_eq!(
            m,
            MountRequest {
                kind: MountKind::Bind,
                source: "/a".into(),
                target: "/b".into(),
                read_only: true
            }
        );
        let m = parse_mount_string("type=volume,src=cache,dst=/c").unwrap();
        assert_eq!(
            (m.kind, m.source.as_str(), m.target.as_str(), m.read_only),
            (MountKind::Volume, "cache", "/c", false)
        );
        assert_eq!(
            parse_mount_string("type=tmpfs,target=/t").unwrap().kind,
            MountKind::Tmpfs
        );
        assert!(parse_mount_string("type=bind,source=/a,target=/b,ro=false")
            .is_ok_and(|m| !m.read_only));
        assert!(parse_mount_string("type=bind,source=/a").is_err());
        assert!(parse_mount_string("type=npipe,source=/a,target=/b").is_err());
        assert!(parse_mount_string("type=bind,source=/a,target=/b,bogus=1").is_err());
        let m = parse_mount_string("type=volume,source=v,target=/v,volume-opt=device=/etc");
        assert!(m.unwrap_err().to_string().contains("any host path"));
    }

    #[test]
    fn volume_args_parse() {
        let v = parse_volume_arg("cache:/cache:ro").unwrap();
        assert_eq!((v.kind, v.read_only), (MountKind::Volume, true));
        assert_eq!(
            parse_volume_arg("/etc:/host-etc").unwrap().kind,
            MountKind::Bind
        );
        assert_eq!(parse_volume_arg("./x:/x").unwrap().kind, MountKind::Bind);
        assert_eq!(parse_volume_arg("/anon").unwrap().source, "");
        assert!(parse_volume_arg("a:/b:weird").is_err());
        assert!(parse_volume_arg("a:b:c:d").is_err());
    }

    #[test]
    fn named_volumes_and_tmpfs_are_allowed() {
        let spec = ok(with_image(json!({"mounts": [
            "source=node_modules,target=/workspace/node_modules,type=volume",
            {"type": "tmpfs", "target": "/scratch"},
            {"type": "volume", "source": "cache", "target": "/cache"}
        ]})));
        let kinds: Vec<_> = spec
            .mounts
            .iter()
            .map(|m| (m.kind, m.source.as_str(), m.target.as_str()))
            .collect();
        assert_eq!(
            kinds[..3],
            [
                (MountKind::Volume, "node_modules", "/workspace/node_modules"),
                (MountKind::Tmpfs, "", "/scratch"),
                (MountKind::Volume, "cache", "/cache"),
            ]
        );
        assert!(spec.grants_used.is_empty());
    }

    #[test]
    fn host_bind_is_refused_then_granted_by_path() {
        let c = rcase(with_image(
            json!({"mounts": ["source=/home/me/.ssh,target=/root/.ssh,type=bind"]}),
        ));
        let (property, value, grant) = refused(c.run());
        assert_eq!(property, "mounts[0]");
        assert!(value.contains("/home/me/.ssh at /root/.ssh"), "{value}");
        assert_grant_text(&grant, "host-mount=/home/me/.ssh");
        let spec = rcase(c.config.clone())
            .grant(&["host-mount=/home/me"])
            .run()
            .unwrap();
        assert_eq!(spec.mounts[0].source, "/home/me/.ssh");
        assert_eq!(spec.grants_used, ["host-mount=/home/me"]);
        assert!(rcase(c.config.clone())
            .grant(&["host-mount=/home/me/data"])
            .run()
            .is_err());
    }

    #[test]
    fn host_bind_object_form_and_dotdot_escape_are_refused() {
        let c = rcase(with_image(
            json!({"mounts": [{"type": "bind", "source": "/etc", "target": "/e"}]}),
        ));
        assert_eq!(refused(c.run()).0, "mounts[0]");
        let c = rcase(with_image(
            json!({"mounts": ["type=bind,source=/data/../home/me/.ssh,target=/s"]}),
        ));
        let (_, value, _) = refused(c.grant(&["host-mount=/data"]).run());
        assert!(value.contains("/home/me/.ssh"), "{value}");
        let (property, _) = config_err(
            rcase(with_image(
                json!({"mounts": ["type=bind,source=rel,target=/s"]}),
            ))
            .run(),
        );
        assert_eq!(property, "mounts[0]");
        let (_, message) = config_err(
            rcase(with_image(
                json!({"mounts": ["type=volume,source=a/b,target=/s"]}),
            ))
            .run(),
        );
        assert!(message.contains("volume name"));
    }

    #[test]
    fn binding_the_workspace_again_is_allowed() {
        let spec = ok(with_image(
            json!({"mounts": [format!("type=bind,source={WS},target=/src")]}),
        ));
        assert_eq!(spec.mounts[0].target, "/src");
        assert!(spec.grants_used.is_empty());
    }

    #[test]
    fn the_time_zone_files_are_bound_read_only_without_a_grant() {
        let spec = ok(with_image(json!({"mounts": [
            "source=/etc/localtime,target=/etc/localtime,type=bind",
            {"type": "bind", "source": "/etc/timezone", "target": "/etc/timezone"}
        ]})));
        for file in ["/etc/localtime", "/etc/timezone"] {
            let m = spec.mounts.iter().find(|m| m.source == file).unwrap();
            assert!(m.read_only, "{m:?}");
        }
        assert!(spec.declined.is_empty() && spec.grants_used.is_empty());
        // Only those files: the folder holding them is a host mount like any other.
        let spec = ok(with_image(
            json!({"mounts": ["source=/etc,target=/e,type=bind"]}),
        ));
        assert!(!spec.mounts.iter().any(|m| m.source == "/etc"));
        assert_eq!(declined(&spec)[0].2.as_deref(), Some("host-mount=/etc"));
    }

    /// The facts of a workspace with `.git/hooks` and `.devcontainer`, and where the bind
    /// sources in `links` really lead.
    fn repository_facts(config: &serde_json::Value, links: &[(&str, &str)]) -> Facts {
        let config: crate::devcontainer::model::DevContainer =
            serde_json::from_value(config.clone()).unwrap();
        let ws = Path::new(WS);
        let mut facts = nothing_on_disk(&config, ws);
        for (path, kind) in [
            (".git", Kind::Dir),
            (".git/hooks", Kind::Dir),
            (".git/config", Kind::File),
            (".devcontainer", Kind::Dir),
        ] {
            facts.kinds.insert(ws.join(path), kind);
        }
        for source in super::super::binds::bind_sources(&config, &[]) {
            facts.real_paths.insert(source.clone(), source);
        }
        for (path, real) in links {
            facts
                .real_paths
                .insert(PathBuf::from(path), PathBuf::from(real));
        }
        facts
    }

    #[test]
    fn a_bind_inside_the_repository_needs_no_grant_and_keeps_its_overlays() {
        let config = with_image(json!({"mounts": [
            format!("type=bind,source={WS},target=/again"),
            format!("type=bind,source={WS}/.git,target=/g"),
            format!("type=bind,source={WS}/.git/hooks/sub,target=/h"),
            format!("type=bind,source={WS}/src,target=/src"),
        ]}));
        let spec = case(config.clone())
            .with_facts(repository_facts(&config, &[]))
            .run()
            .unwrap();
        assert!(spec.declined.is_empty() && spec.grants_used.is_empty());
        let overlay = |target: &str| {
            spec.protected
                .iter()
                .find(|p| p.target == target)
                .map(|p| (p.host.clone(), p.read_only))
        };
        let ws = Path::new(WS);
        // The whole repository again: each read-only path at the new place too.
        assert_eq!(
            overlay("/again/.git/hooks"),
            Some((ws.join(".git/hooks"), true))
        );
        assert_eq!(
            overlay("/again/.git/config"),
            Some((ws.join(".git/config"), true))
        );
        assert_eq!(
            overlay("/again/.devcontainer"),
            Some((ws.join(".devcontainer"), true))
        );
        // The folder leading to them is anchored (bound over itself) there as well.
        assert_eq!(overlay("/again/.git"), Some((ws.join(".git"), false)));
        // A folder holding a read-only path: the path read-only below the new target.
        assert_eq!(overlay("/g/hooks"), Some((ws.join(".git/hooks"), true)));
        // A path inside one: the bind is read-only as a whole.
        let bind = |target: &str| spec.mounts.iter().find(|m| m.target == target).unwrap();
        assert!(bind("/h").read_only);
        assert!(!bind("/src").read_only && !bind("/g").read_only);
        assert!(!spec.protected.iter().any(|p| p.target.starts_with("/src/")));
    }

    #[test]
    fn a_bind_in_the_repository_that_links_out_is_a_host_bind() {
        let config = with_image(json!({"mounts": [
            format!("type=bind,source={WS}/keys,target=/k"),
        ]}));
        let facts = repository_facts(&config, &[(&format!("{WS}/keys"), "/home/me/.ssh")]);
        let spec = case(config.clone())
            .with_facts(facts.clone())
            .run()
            .unwrap();
        assert!(
            !spec.mounts.iter().any(|m| m.target == "/k"),
            "{:?}",
            spec.mounts
        );
        assert_eq!(declined(&spec)[0].0, "mounts[0]");
        let (_, value, grant) = refused(
            case(config.clone())
                .with_facts(facts.clone())
                .refusing()
                .run(),
        );
        assert!(value.contains(&format!("{WS}/keys")), "{value}");
        assert_grant_text(&grant, &format!("host-mount={WS}/keys"));
        // Not looked at: not taken for inside either.
        let mut unseen = facts;
        unseen.real_paths.clear();
        let spec = case(config).with_facts(unseen).run().unwrap();
        assert!(!spec.mounts.iter().any(|m| m.target == "/k"));
    }

    #[test]
    fn docker_socket_needs_its_own_grant() {
        let c = rcase(with_image(
            json!({"mounts": ["source=/var/run/docker.sock,target=/var/run/docker.sock,type=bind"]}),
        ));
        let (_, value, grant) = refused(c.run());
        assert!(value.contains("docker.sock"));
        assert_grant_text(&grant, "docker-socket");
        assert!(rcase(c.config.clone())
            .grant(&["host-mount"])
            .run()
            .is_err());
        let spec = rcase(c.config.clone())
            .grant(&["docker-socket"])
            .run()
            .unwrap();
        assert_eq!(spec.grants_used, ["docker-socket"]);
        // A folder holding the socket hands it over too.
        let c = rcase(with_image(
            json!({"mounts": ["source=/run,target=/hostrun,type=bind"]}),
        ));
        assert_grant_text(&refused(c.grant(&["host-mount"]).run()).2, "docker-socket");
        let c = rcase(with_image(
            json!({"runArgs": ["-v", "/run/user/1000/docker.sock:/d.sock"]}),
        ));
        assert_grant_text(&refused(c.run()).2, "docker-socket");
    }

    #[test]
    fn only_this_workspaces_own_yolo_volumes_may_be_mounted() {
        // Another workspace's agent login, by every way a repository can name a volume.
        for config in [
            json!({"mounts": ["source=yolo-claude-0therw0rkspace,target=/steal,type=volume"]}),
            json!({"mounts": [{"type": "volume", "source": "yolo-codex-other", "target": "/s"}]}),
            json!({"runArgs": ["-v", "yolo-claude-other:/steal"]}),
            json!({"runArgs": ["--mount", "type=volume,src=yolo-anything,dst=/s"]}),
        ] {
            let err = case(with_image(config.clone()))
                .grant(&["host-mount"])
                .run();
            match err {
                Err(Error::Forbidden { value, reason, .. }) => {
                    assert!(value.contains("yolo-"), "{value}");
                    assert!(reason.contains("rename the volume"), "{reason}");
                }
                other => panic!("{config}: expected Forbidden, got {other:?}"),
            }
        }
        // Its own agent volume (test_support's `yolo-claude-x`) and other names are fine.
        let spec = ok(with_image(json!({"mounts": [
            "source=yolo-claude-x,target=/again,type=volume",
            "source=my-yolo-cache,target=/c,type=volume"
        ]})));
        assert!(spec.mounts.iter().any(|m| m.target == "/again"));
        assert!(spec.mounts.iter().any(|m| m.source == "my-yolo-cache"));
    }

    #[test]
    fn agent_volumes_are_named_volumes() {
        let spec = ok(with_image(json!({})));
        assert_eq!(spec.mounts.last().unwrap().kind, MountKind::Volume);
    }
}
