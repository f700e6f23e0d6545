//! A repository asks, the user grants. Turns a substituted `DevContainer` plus the user's config
//! and flags into a validated `RunSpec`, or a clear `Error::Refused` naming the file, the property,
//! the value and the grant that would allow it (`Error::Forbidden` when no grant can).
//!
//! No Docker, and nothing here looks at the disk: the callers read a Dockerfile, a Compose `.env`
//! or the files a service `extends` and hand in the text (or a reader), and what the checks
//! need to know of the host's files comes in as `Facts` (`facts`), read before by
//! `crate::policy_facts`: the workspace's git root, where the host paths a Compose project names
//! really lead, and what `protect` looks at in the workspace's `.git` and submodule folders.
//!
//! What this module deliberately does not do: resolve symlinks. All path checks are lexical (after
//! `.`/`..` folding), so the engine must canonicalize bind sources and build contexts before use
//! and refuse any that resolve elsewhere (a repository can plant symlinks in the workspace).
//!
//! One file per concern: `grants` (what the user grants), `base` (what is copied as is),
//! `metadata` (the image's label and the Features' entries, merged with the config),
//! `security` (privileged, capabilities, security options, devices), `namespaces` (`--network`,
//! `--pid`, ...), `workspace` and `mounts`, `run_args`, `build`, `labels`, `limits`, `ports`,
//! `firewall`, `host_command` (`initializeCommand`), `compose` (a Compose config's files and every
//! service of its resolved project), `hash`. The path helpers are `crate::paths`.
//!
//! Behaviour choices worth knowing (see also the item docs):
//! - `init: false` is ignored: yolo always runs an init so the agent's orphans are reaped and
//!   signals reach it.
//! - `--name` in runArgs is refused: yolo names its containers so it can find them again.
//! - A request yolo honours only with a grant, without which the container still starts
//!   (capabilities, security options, `privileged`, devices, GPUs, host binds, the Docker socket,
//!   shared namespaces, `--env-file` outside the repository, `net.*` sysctls, host networking)
//!   is declined by default: left out of the `RunSpec` and listed in `RunSpec::declined`
//!   (`allow`). `[policy] requests = "refuse"` refuses it instead, as do the checks whose
//!   requests cannot be left out without changing what the container is (`strictly`): a Compose
//!   service's (Compose runs its file as written), the workspace mount, a build context.
//! - `--network host`/`container:NAME` is declined, or refused, and no grant allows it: the
//!   firewall guard owns the container's network namespace.
//! - `--workdir`/`-w`, `--rm`, `--cap-drop` and `--init` in runArgs are accepted and ignored:
//!   yolo runs every command in `workspaceFolder`, manages the container's lifetime, drops every
//!   capability and always sets an init.
//! - `-e NAME` without a value is refused: it would copy a host variable (a secret, perhaps) into
//!   the container.
//! - `no-new-privileges` (any spelling that keeps it on) is accepted and dropped: yolo always sets
//!   it. Every other security option needs a grant.

mod base;
mod binds;
mod build;
mod compose;
mod dockerfile;
mod facts;
mod firewall;
mod grants;
mod hash;
mod host_command;
mod labels;
mod limits;
mod metadata;
mod mounts;
mod namespaces;
mod ports;
mod protect;
mod run_args;
mod run_extras;
mod security;
#[cfg(test)]
pub(crate) mod test_support;
mod workspace;

pub(crate) use compose::{
    check_built_image_names, check_compose_dotenv, check_env_files, check_extended_files,
    check_services, compose_files_extended, Hardening, ServicesChecked,
};
pub(crate) use dockerfile::check_text as check_remote_adds;
pub(crate) use facts::{Facts, Kind};
pub(crate) use grants::Grants;
// For cli.rs: the `--grant` help text and value parser.
pub(crate) use binds::bind_sources;
pub(crate) use build::OUTSIDE_DOCKERFILE;
pub(crate) use compose::compose_host_paths;
pub(crate) use grants::{grant_help, Grant};
pub(crate) use hash::seal;
pub(crate) use limits::{check_cpus, check_disk, check_memory, fit_cpus, parse_size, LimitLayer};
pub(crate) use metadata::{config_entry as metadata_config_entry, label as metadata_label};
pub(crate) use protect::{
    check_entry as check_read_only_entry, protected_roots, DEFAULT_READ_ONLY, MAX_MODULE_DEPTH,
};
pub(crate) use workspace::default_workspace_target;
pub(crate) use workspace::workspace_source;

use crate::devcontainer::metadata::{Entry, Origin};
use crate::devcontainer::model::{DevContainer, YoloCustomization};
use crate::error::{Error, Result};
use crate::run_spec::{Declined, ImageSource, PortPublish, RunSpec};
use grants::{grant_hint, Need};
use std::path::{Path, PathBuf};

/// What the command line adds to the user's config.
#[derive(Debug, Clone, Default)]
pub(crate) struct Flags {
    /// The user's grants, from the config file and `--grant`.
    pub(crate) grants: Grants,
    /// `--trust-host-commands`, `trust_host_commands = true` or the `initialize-command` grant.
    pub(crate) trust_host_commands: bool,
    pub(crate) cpus: Option<f64>,
    /// Bytes.
    pub(crate) memory: Option<i64>,
    pub(crate) pids: Option<i64>,
    pub(crate) allow: Vec<String>,
}

/// `[policy] requests`: what becomes of a request yolo honours only with a grant, when none is
/// given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Requests {
    /// Left out of the container, and named to the user (the default).
    #[default]
    Decline,
    /// The whole `up` stops, naming the grants.
    Refuse,
}

/// What the user's config file adds, already parsed and checked by `settings` (where a bad
/// value is a config error naming config.toml and the key, before anything runs).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UserLayer {
    /// `[limits]`: the layer between runArgs and the flags.
    pub(crate) limits: LimitLayer,
    /// `[firewall] allow`, each a valid pattern.
    pub(crate) allow: Vec<String>,
    /// `[firewall] presets`, each a known preset.
    pub(crate) presets: Vec<String>,
    /// `[workspace] read_only` (or the defaults), each a relative path (`protect::check_entry`).
    pub(crate) read_only: Vec<String>,
    /// `[limits] disk` (default `DEFAULT_DISK`); `None`: `disk = "none"`, not limited.
    pub(crate) disk_bytes: Option<i64>,
    /// `[audit] exec` (default on): the exec audit's shim in the agent container.
    pub(crate) exec_audit: bool,
    /// `[limits] required` (default true): an engine that drops a limit fails the `up`.
    pub(crate) limits_required: bool,
    /// `[policy] requests` (default decline).
    pub(crate) requests: Requests,
}

/// Capabilities an ordinary dev container needs, added back after dropping all (the engine's
/// hardening). Each one is justified in docs/security-model.md. Not in the list (Docker gives
/// them by default): NET_RAW (raw sockets: packet crafting), MKNOD, SETFCAP, SETPCAP,
/// SYS_CHROOT, AUDIT_WRITE, NET_BIND_SERVICE (Docker lets unprivileged users bind low ports in
/// containers anyway).
pub(crate) const DEFAULT_CAPS: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
];

/// The writable layer's size limit when the user sets none (where the storage driver can).
pub(crate) const DEFAULT_DISK: i64 = 20 << 30;

/// A config file that says nothing: no limits, no additions, the default read-only paths.
impl Default for UserLayer {
    fn default() -> Self {
        UserLayer {
            limits: LimitLayer::default(),
            allow: Vec::new(),
            presets: Vec::new(),
            read_only: DEFAULT_READ_ONLY.map(String::from).to_vec(),
            disk_bytes: Some(DEFAULT_DISK),
            exec_audit: true,
            limits_required: true,
            requests: Requests::Decline,
        }
    }
}

pub(crate) struct Input<'a> {
    /// Already substituted.
    pub(crate) config: &'a DevContainer,
    pub(crate) config_file: &'a Path,
    pub(crate) workspace: &'a Path,
    pub(crate) devcontainer_id: &'a str,
    pub(crate) user: &'a UserLayer,
    pub(crate) flags: &'a Flags,
    /// Host uid/gid for `updateRemoteUserUID` (None on non-Linux hosts).
    pub(crate) host_ids: Option<(u32, u32)>,
    /// Named volumes yolo itself adds (agent state): (volume name, target).
    pub(crate) agent_volumes: Vec<(String, String)>,
    /// Image metadata entries (the image's label, then the Features'), already substituted,
    /// merged before devcontainer.json's own properties (`metadata`).
    pub(crate) metadata: &'a [(Origin, Entry)],
    /// What the checks need to know of the host's files, read before (`policy_facts`).
    pub(crate) facts: &'a Facts,
}

/// Check the repository's requests against the user's grants and build the `RunSpec`.
/// Nothing is half-applied because nothing here has side effects. A config refused for lack of
/// a grant is evaluated again as if it were granted, so that one error lists every grant the
/// config needs (`Error::RefusedMany`), not one more on each run; what no grant allows opens
/// the list.
pub(crate) fn evaluate(input: &Input) -> Result<RunSpec> {
    let (first, need) = match evaluate_with(input, &input.flags.grants) {
        (Ok(spec), _) => return Ok(spec),
        (Err(e), need) => (e, need),
    };
    let (Some(mut need), Error::Refused { .. }) = (need, &first) else {
        return Err(first);
    };
    let mut grants = input.flags.grants.clone();
    let mut refusals = vec![first];
    let mut needed = vec![need.clone()];
    while refusals.len() < MAX_REFUSALS {
        grants = grants.with(need);
        match evaluate_with(input, &grants) {
            (Err(e @ Error::Refused { .. }), Some(next)) if !needed.contains(&next) => {
                refusals.push(e);
                needed.push(next.clone());
                need = next;
            }
            (Ok(_), _) => break,
            // What no grant allows (or a config error) met past the grants: the last entry, so
            // that granting the list is not followed by one more refusal.
            (Err(e), _) => {
                refusals.push(e);
                break;
            }
        }
    }
    if refusals.len() == 1 {
        return Err(refusals.remove(0));
    }
    // What no grant allows comes first: granting the rest would not help while it stays.
    refusals.sort_by_key(|e| !matches!(e, Error::Forbidden { .. }));
    Err(Error::RefusedMany {
        refusals,
        grants: needed.iter().map(|g| g.to_string()).collect(),
    })
}

/// At most this many refusals are listed in one error.
const MAX_REFUSALS: usize = 16;

/// One evaluation with these grants; on a refusal for lack of a grant, the narrowest grant that
/// would have allowed it.
fn evaluate_with(input: &Input, grants: &Grants) -> (Result<RunSpec>, Option<Grant>) {
    let mut eval = Eval::new(input, grants);
    let spec = eval.spec();
    // The grant of the refusal that ended it (not of one a check caught and got past).
    let need = match (&spec, eval.refused) {
        (Err(Error::Refused { grant, .. }), Some(need)) if *grant == grant_hint(&need) => {
            Some(need)
        }
        _ => None,
    };
    (spec, need)
}

impl Eval<'_> {
    fn spec(&mut self) -> Result<RunSpec> {
        let mut spec = self.base_spec()?;
        spec.protected = self.protected(&spec.workspace_mount)?;
        self.apply_security(&mut spec)?;
        self.apply_metadata_security(&mut spec)?;
        self.apply_mounts(&mut spec)?;
        self.apply_run_args(&mut spec)?;
        self.apply_host_gpus(&mut spec)?;
        // The platform `build.options` built for is the container's too, unless runArgs name one.
        if let (None, ImageSource::Build(build)) = (&spec.platform, &spec.image) {
            spec.platform = build.platform.clone();
        }
        (spec.limits, spec.cpus_chosen_by) = self.limits()?;
        (spec.ports, spec.relays) = self.ports(&spec)?;
        spec.initialize_command = self.initialize_command()?;
        spec.grants_used = self.used.clone();
        spec.declined = self.declined.clone();
        // The shim registers with the guard, PID 1 of a namespace the agent joins: not possible
        // in the host's PID namespace (a granted `--pid host`). (Nor without a guard, in
        // `--network none`: the engine leaves the shim out there.)
        spec.exec_audit = self.input.user.exec_audit && !spec.host_modes.contains_key("pid");
        hash::seal(&mut spec);
        Ok(spec)
    }
}

/// One evaluation: the input, what it has granted so far, and what runArgs contributed to the
/// concerns evaluated after them.
struct Eval<'a> {
    input: &'a Input<'a>,
    grants: &'a Grants,
    config: &'a DevContainer,
    git_root: Option<PathBuf>,
    /// The user's answer about `initializeCommand`, from any of its three sources.
    trust_host_commands: bool,
    /// The grants that allowed something, as the user typed them (`grants_used`).
    used: Vec<String>,
    /// `--cpus`/`--memory`/`--pids-limit` from runArgs: one layer of `limits`.
    run_limits: LimitLayer,
    /// `-p` from runArgs, with the property that asked, for `ports`.
    run_ports: Vec<(String, PortPublish)>,
    /// The grant a refusal asked for (`require`).
    refused: Option<Grant>,
    /// The requests left out so far (`allow`).
    declined: Vec<Declined>,
    /// Above 0 inside a check whose requests cannot be left out (`strictly`).
    strict: u32,
}

impl<'a> Eval<'a> {
    fn new(input: &'a Input<'a>, grants: &'a Grants) -> Self {
        Eval {
            input,
            grants,
            config: input.config,
            git_root: input.facts.git_root.clone(),
            trust_host_commands: input.flags.trust_host_commands || grants.initialize_command(),
            used: Vec::new(),
            run_limits: LimitLayer::default(),
            run_ports: Vec::new(),
            refused: None,
            declined: Vec::new(),
            strict: 0,
        }
    }

    fn file(&self) -> PathBuf {
        self.input.config_file.to_path_buf()
    }

    fn config_error(&self, property: &str, message: impl ToString) -> Error {
        Error::Config {
            file: self.file(),
            line: None,
            column: None,
            property: Some(property.to_string()),
            message: message.to_string(),
        }
    }

    /// Allow `need` if a grant covers it (and remember that grant), else refuse.
    fn require(&mut self, need: Need, property: &str, value: &str, reason: &str) -> Result<()> {
        match self.grants.find(&need) {
            Some(grant) => {
                self.record_use(grant.to_string());
                Ok(())
            }
            None => {
                let grant = need.narrowest();
                let refused = Error::Refused {
                    file: self.file(),
                    property: property.to_string(),
                    value: value.to_string(),
                    reason: reason.to_string(),
                    grant: grant_hint(&grant),
                };
                self.refused = Some(grant);
                Err(refused)
            }
        }
    }

    /// Whether `need` is granted (the grant remembered). If not: declined (`Ok(false)`, and the
    /// caller leaves the request out) where requests are declined, else refused.
    fn allow(&mut self, need: Need, property: &str, value: &str, reason: &str) -> Result<bool> {
        if self.grants.find(&need).is_none() && self.declines() {
            let grant = need.narrowest().to_string();
            self.decline(property, value, reason, Some(grant));
            return Ok(false);
        }
        self.require(need, property, value, reason).map(|()| true)
    }

    /// Whether a request this evaluation does not honour is left out rather than refused.
    fn declines(&self) -> bool {
        self.strict == 0 && self.input.user.requests == Requests::Decline
    }

    /// Note a request left out; `grant`: the one that would honour it (`None`: none can).
    fn decline(&mut self, property: &str, value: &str, reason: &str, grant: Option<String>) {
        let declined = Declined {
            file: self.file(),
            line: None,
            property: property.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
            grant,
            hint: None,
        };
        if !self.declined.contains(&declined) {
            self.declined.push(declined);
        }
    }

    /// Run `check` with every request it meets refused, not declined: what it judges reaches
    /// the engine as written (a Compose file), or the container is not what it says without it.
    fn strictly<T>(&mut self, check: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.strict += 1;
        let result = check(self);
        self.strict -= 1;
        result
    }

    fn record_use(&mut self, name: String) {
        if !self.used.contains(&name) {
            self.used.push(name);
        }
    }

    fn workspace_str(&self) -> String {
        self.input.workspace.to_string_lossy().into_owned()
    }

    fn yolo(&self) -> Option<&'a YoloCustomization> {
        self.config
            .customizations
            .as_ref()
            .and_then(|c| c.yolo.as_ref())
    }
}
