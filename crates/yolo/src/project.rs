//! A `Project` is one workspace with its devcontainer.json, read, substituted and checked
//! against the user's grants: config -> policy -> RunSpec, done once at the edge.

use crate::agents;
use crate::devcontainer::metadata::{Entry, Origin};
use crate::devcontainer::{discover, id, model::DevContainer, names, parse, substitute};
use crate::error::{Error, Result};
use crate::policy;
use crate::run_spec::{ImageSource, RunSpec};
use crate::settings::UpSettings;
use crate::user_config::UserConfig;
use std::path::{Path, PathBuf};

/// Where agent state volumes are mounted; `yolo run` links `~/<state_dir>` here.
pub(crate) const AGENT_STATE_ROOT: &str = "/yolo/state";

pub(crate) struct Project {
    pub(crate) spec: RunSpec,
    /// The user's config file as written: for its `[agents.*]` sections (`agents::resolve`).
    /// Every other setting is read from `settings`, where it was checked.
    pub(crate) user: UserConfig,
    /// The flags and user config this project was loaded with.
    pub(crate) settings: UpSettings,
    /// What `spec` was evaluated from, kept so `with_metadata` can evaluate it again.
    source: Source,
}

/// The inputs of the evaluation besides the settings: devcontainer.json (read once, so a
/// second evaluation cannot see another file) and the image metadata entries.
#[derive(Clone)]
struct Source {
    located: Located,
    /// As parsed, before substitution (`point_at_pass_env` looks at what a value was built from).
    raw: DevContainer,
    /// Host variables the config reads that yolo withheld.
    withheld: Vec<String>,
    /// Substituted.
    config: DevContainer,
    /// The file's own JSON, for the container's metadata label (as the reference CLI, the
    /// label carries devcontainer.json's properties as written).
    raw_json: serde_json::Value,
    /// `${containerWorkspaceFolder}` as the config's substitution resolved it.
    container_folder: String,
    /// The metadata entries as given (the image's label, the Features'), for the label...
    metadata: Vec<(Origin, Entry)>,
    /// ...and substituted like devcontainer.json, for the policy.
    substituted: Vec<(Origin, Entry)>,
}

/// Which workspace and config file a command is about, without reading the config.
#[derive(Debug, Clone)]
pub(crate) struct Located {
    pub(crate) workspace: PathBuf,
    pub(crate) config_file: PathBuf,
    /// The workspace session's `${devcontainerId}`, or a named session's own (see
    /// [`Located::named`]): every container, volume, state file and lock is keyed by it.
    pub(crate) devcontainer_id: String,
    /// A named session (`--copy NAME`): its agent works on a copy of the repository in a
    /// volume, as with a remote engine, and its work comes back as the branch `yolo/NAME`.
    /// `None`: the workspace session.
    pub(crate) copy: Option<String>,
}

impl Located {
    /// Whose containers this workspace's are, for `Engine::find`.
    pub(crate) fn owner(&self) -> crate::engine::Owner {
        crate::engine::Owner {
            workspace: self.workspace.clone(),
            config_file: self.config_file.clone(),
            devcontainer_id: self.devcontainer_id.clone(),
        }
    }

    /// The workspace (default: the current folder, or the nearest folder above it in the
    /// repository that holds a config: `discover::config_root`) and its config (default:
    /// discovered).
    pub(crate) fn find(workspace: Option<&Path>, config: Option<&Path>) -> Result<Located> {
        let workspace = match (workspace, config) {
            (None, None) => discover::config_root(&workspace_dir(None)?)?,
            _ => workspace_dir(workspace)?,
        };
        let config_file = discover::find_config(&workspace, config)?;
        let devcontainer_id = id::devcontainer_id(
            &workspace.display().to_string(),
            &config_file.display().to_string(),
        );
        Ok(Located {
            workspace,
            config_file,
            devcontainer_id,
            copy: None,
        })
    }

    /// The named session `name` of this workspace (`None`: the workspace session itself).
    /// Its id is its own (`id::session_id` of the workspace's and the name), so it has its own
    /// containers, guard, volumes (`${devcontainerId}` in the config too), state and lock, and
    /// runs beside the workspace session and the other named ones.
    pub(crate) fn named(mut self, name: Option<&str>) -> Located {
        if let Some(name) = name {
            self.devcontainer_id = id::session_id(&self.devcontainer_id, name);
            self.copy = Some(name.to_string());
        }
        self
    }

    /// What a command must add to reach this session: ` --copy NAME` for a named one, nothing
    /// for the workspace session (for the hints yolo prints).
    pub(crate) fn flag(&self) -> String {
        copy_flag(self.copy.as_deref())
    }

    /// Why this session's agent works on a copy of the repository in a volume (a named
    /// session, or a remote engine: `crate::remote`); `None`: on the repository's folder.
    pub(crate) fn copy_reason(&self) -> Result<Option<String>> {
        match &self.copy {
            Some(name) => Ok(Some(format!("the session {name} works on a copy"))),
            None => crate::engine::remote::remote_reason(),
        }
    }
}

/// ` --copy NAME`, or nothing without a name ([`Located::flag`]).
pub(crate) fn copy_flag(copy: Option<&str>) -> String {
    copy.map(|name| format!(" --copy {name}"))
        .unwrap_or_default()
}

impl Project {
    /// Read, substitute and check the config against the resolved settings. Nothing is asked
    /// here: `initializeCommand` is confirmed where it is about to run
    /// (`approval::confirm_host_command`).
    pub(crate) fn load(
        located: &Located,
        settings: UpSettings,
        user: UserConfig,
    ) -> Result<Project> {
        let Located {
            workspace,
            config_file,
            devcontainer_id,
            ..
        } = located.clone();
        refuse_yolos_own_folders(&workspace, &config_file)?;
        let raw = parse::parse_file(&config_file)?;
        for warning in &raw.warnings {
            eprintln!(
                "{} {}: {warning}",
                console::style("warning:").yellow(),
                config_file.display()
            );
        }
        let raw_json = parse::raw_value(&config_file).unwrap_or_default();
        let (config, container_folder, withheld) =
            substituted(&raw, &workspace, &devcontainer_id, &user.pass_env);
        let source = Source {
            located: located.clone(),
            raw,
            withheld,
            config,
            raw_json,
            container_folder,
            metadata: Vec::new(),
            substituted: Vec::new(),
        };
        let spec = evaluate(&source, &settings, &user)?;
        for note in &spec.notes {
            eprintln!("{} {note}", console::style("note:").yellow());
        }
        Ok(Project {
            spec,
            user,
            settings,
            source,
        })
    }

    /// This project evaluated again with image metadata `entries` (the image's
    /// `devcontainer.metadata` label, then the Features', in order) merged before
    /// devcontainer.json's own properties (`policy::metadata`). Replaces the entries of an
    /// earlier call. The entries are substituted like devcontainer.json; every request they make
    /// meets the policy, so this fails as `load` does, with the entry named.
    pub(crate) fn with_metadata(&self, entries: Vec<(Origin, Entry)>) -> Result<Project> {
        let src = &self.source;
        let workspace = src.located.workspace.display().to_string();
        let env = |name: &str| local_env(name, &self.user.pass_env);
        let context = substitute::Context {
            local_workspace_folder: &workspace,
            container_workspace_folder: &src.container_folder,
            devcontainer_id: &src.located.devcontainer_id,
            local_env: &env,
        };
        let substituted = entries
            .iter()
            .map(|(origin, entry)| (origin.clone(), substitute::substitute(entry, &context)))
            .collect();
        let source = Source {
            metadata: entries,
            substituted,
            ..src.clone()
        };
        let spec = evaluate(&source, &self.settings, &self.user)?;
        Ok(Project {
            spec,
            user: self.user.clone(),
            settings: self.settings.clone(),
            source,
        })
    }

    /// The workspace and config file it was loaded from (its `Session`'s key).
    pub(crate) fn located(&self) -> &Located {
        &self.source.located
    }

    /// devcontainer.json as read and substituted (its `features`, for `bring_up::features`).
    pub(crate) fn config(&self) -> &DevContainer {
        &self.source.config
    }

    /// The metadata entries this project was evaluated with (as given to `with_metadata`).
    pub(crate) fn metadata(&self) -> &[(Origin, Entry)] {
        &self.source.metadata
    }

    /// The user commands run as in the container (`None`: the container's default user).
    pub(crate) fn remote_user(&self) -> Option<String> {
        self.spec
            .remote_user
            .clone()
            .or_else(|| self.spec.container_user.clone())
    }
}

/// config -> policy -> RunSpec, with the checks only the host can make, and the label.
fn evaluate(source: &Source, settings: &UpSettings, user: &UserConfig) -> Result<RunSpec> {
    let Located {
        workspace,
        config_file,
        devcontainer_id,
        ..
    } = &source.located;
    let agent_volumes = agents::all(user)
        .iter()
        .map(|a| {
            (
                names::state_volume(&a.name, devcontainer_id),
                format!("{AGENT_STATE_ROOT}/{}", a.name),
            )
        })
        .collect();
    let policy_flags = policy::Flags {
        grants: settings.grants.clone(),
        trust_host_commands: settings.trust_host_commands,
        cpus: settings.cpus,
        memory: settings.memory_bytes,
        pids: settings.pids,
        allow: settings.allow.clone(),
    };
    let facts = crate::policy_facts::for_evaluation(
        &source.config,
        &source.substituted,
        workspace,
        config_file,
        &settings.user.read_only,
    );
    let mut spec = policy::evaluate(&policy::Input {
        config: &source.config,
        config_file,
        workspace,
        devcontainer_id,
        user: &settings.user,
        flags: &policy_flags,
        host_ids: host_ids(),
        agent_volumes,
        metadata: &source.substituted,
        facts: &facts,
    })
    .map_err(|e| point_at_pass_env(e, &source.raw, &source.withheld))?;
    check_after_policy(&mut spec, &settings.grants)
        .map_err(|e| point_at_pass_env(e, &source.raw, &source.withheld))?;
    crate::env_file::apply(&mut spec, &settings.grants)?;
    if let Some(ca) = &settings.extra_ca {
        apply_extra_ca(&mut spec, ca)?;
    }
    if crate::http_scope::may_inspect(user, &crate::http_scope::repo_http(&source.config)) {
        apply_session_ca(&mut spec, settings.extra_ca.as_ref())?;
    }
    // With an engine on another machine the repository is copied into a volume (`remote`).
    spec.copy = source.located.copy.clone();
    if let Some(why) = source.located.copy_reason()? {
        spec.remote_engine = crate::engine::remote::remote_reason()?.is_some();
        crate::remote::to_volume(&mut spec, workspace, &why)?;
    }
    spec.metadata_label = policy::metadata_label(
        &source.metadata,
        policy::metadata_config_entry(&source.raw_json),
    );
    let text = std::fs::read_to_string(config_file).unwrap_or_default();
    for declined in &mut spec.declined {
        if declined.file == *config_file {
            declined.line = property_line(&text, &declined.property);
        }
        point_declined_at_pass_env(declined, &source.raw, &source.withheld);
    }
    Ok(spec)
}

/// The line of devcontainer.json where `property` (`capAdd[0]`, `hostRequirements.gpu`) is
/// set: that of its top-level key. `None` for a property a metadata entry asked for (its words
/// are not in the file) or a key not found as written.
fn property_line(text: &str, property: &str) -> Option<usize> {
    if property.contains(" (asked by ") {
        return None;
    }
    let key = property
        .split(['[', '.'])
        .next()
        .filter(|k| !k.is_empty())?;
    let quoted = format!("\"{key}\"");
    let mut from = 0;
    while let Some(at) = text[from..].find(&quoted).map(|i| i + from) {
        let after = text[at + quoted.len()..].trim_start();
        if after.starts_with(':') {
            return Some(text[..at].matches('\n').count() + 1);
        }
        from = at + quoted.len();
    }
    None
}

/// A declined host bind built from a variable yolo withheld: the note says what to set, as a
/// refusal of it does (`point_at_pass_env`).
fn point_declined_at_pass_env(
    declined: &mut crate::run_spec::Declined,
    raw: &DevContainer,
    withheld: &[String],
) {
    let Some(grant) = declined.grant.clone() else {
        return;
    };
    let refusal = Error::Refused {
        file: declined.file.clone(),
        property: declined.property.clone(),
        value: declined.value.clone(),
        reason: declined.reason.clone(),
        grant: grant.clone(),
    };
    if let Error::Refused {
        reason,
        grant: hint,
        ..
    } = point_at_pass_env(refusal, raw, withheld)
    {
        if hint != grant {
            declined.reason = reason;
            declined.grant = None;
            declined.hint = Some(hint);
        }
    }
}

/// The user's extra CA certificates in the spec: their files (in yolo's data folder) bound
/// read-only where builds put them, the variables pointing at them, and for a build the files
/// it adds to its context. The user's setting, so it goes past the policy (which only judges
/// the repository's requests); the certificates are public, and visible to the agent.
fn apply_extra_ca(spec: &mut RunSpec, ca: &crate::ca::ExtraCa) -> Result<()> {
    let dir = ca.host_dir();
    ca.write_to(&dir)?;
    spec.mounts.retain(|m| m.target != crate::ca::DIR);
    spec.mounts.push(crate::run_spec::Mount {
        kind: crate::run_spec::MountKind::Bind,
        source: dir.display().to_string(),
        target: crate::ca::DIR.into(),
        read_only: true,
    });
    for (name, value) in crate::ca::env() {
        spec.container_env.insert(name.into(), value);
    }
    spec.extra_ca = ca.fingerprints.clone();
    if let ImageSource::Build(build) = &mut spec.image {
        build.extra_ca = Some(Box::new(crate::run_spec::BuildCa {
            fingerprints: ca.fingerprints.clone(),
            files: ca
                .context_files()
                .iter()
                .map(|(path, text)| (path.clone(), text.to_string()))
                .collect(),
        }));
    }
    policy::seal(spec);
    Ok(())
}

/// A session that may use the guard's HTTP proxy: the agent binds the workspace's CA folder
/// where it trusts the extra CA certificates instead (the same files, plus the session CA's
/// certificate once `up` made it, `http_session`; the files: `http_scope`). Bound, never built into an image: the
/// session CA changes with each session, the folder (and so the container's config) does not.
fn apply_session_ca(spec: &mut RunSpec, extra: Option<&crate::ca::ExtraCa>) -> Result<()> {
    let dir = crate::http_scope::write_ca_files(&spec.devcontainer_id, extra, None)?;
    spec.mounts.retain(|m| m.target != crate::ca::DIR);
    spec.mounts.push(crate::run_spec::Mount {
        kind: crate::run_spec::MountKind::Bind,
        source: dir.display().to_string(),
        target: crate::ca::DIR.into(),
        read_only: true,
    });
    for (name, value) in crate::ca::env() {
        spec.container_env.insert(name.into(), value);
    }
    policy::seal(spec);
    Ok(())
}

impl Project {
    /// The project as a Pod has it (`yolo kube`): without the session CA's folder, which only
    /// a guard with an HTTP proxy fills and which a cluster's nodes do not have (a Pod's guard
    /// runs none: `bring_up::pod` refuses what would need one). The user's extra CA
    /// certificates, which share the mount, stay (and `k8s::render` says what to do instead).
    pub(crate) fn without_session_ca(&mut self) {
        if self.settings.extra_ca.is_some() {
            return;
        }
        let spec = &mut self.spec;
        let before = spec.mounts.len();
        spec.mounts.retain(|m| m.target != crate::ca::DIR);
        if spec.mounts.len() == before {
            return;
        }
        for (name, _) in crate::ca::env() {
            spec.container_env.remove(name);
        }
        policy::seal(spec);
    }
}

/// A workspace holding yolo's own config or data folder (yolo run in `$HOME`) would let the
/// agent rewrite `config.toml` (grant itself anything) or the audit log: refused.
fn refuse_yolos_own_folders(workspace: &Path, config_file: &Path) -> Result<()> {
    let own = [
        ("config", crate::user_config::config_dir()),
        ("data", crate::store::root()),
    ];
    for (what, dir) in own {
        let dir = dir.canonicalize().unwrap_or(dir);
        if dir.starts_with(workspace) {
            return Err(Error::Forbidden {
                file: config_file.to_path_buf(),
                property: "the workspace".into(),
                value: workspace.display().to_string(),
                reason: format!(
                    "it contains yolo's {what} folder {}, which the agent could then rewrite; run yolo in the repository itself, not in a folder above it (or move the folder with YOLO_CONFIG_DIR / YOLO_DATA_DIR)",
                    dir.display()
                ),
            });
        }
    }
    Ok(())
}

/// Host variables any config may read: they say nothing secret. Everything else must be listed
/// in the user's `pass_env`, because the repository (and so the agent) writes devcontainer.json
/// and could otherwise copy `${localEnv:AWS_SECRET_ACCESS_KEY}` into the container.
pub(crate) const SAFE_LOCAL_ENV: &[&str] = &[
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TERM",
    "COLORTERM",
];

/// A host path refused for lack of `host-mount` that was built from a variable yolo withheld
/// (`${localEnv:HOME}/.ssh` became `/.ssh`): the grant named from the empty value would be
/// wrong, so the hint is the `pass_env` entry that makes the path what the repository meant.
fn point_at_pass_env(err: Error, raw: &DevContainer, withheld: &[String]) -> Error {
    if let Error::RefusedMany { refusals, grants } = err {
        // A refusal pointed at `pass_env` takes its grant out of the "all at once" list.
        // The grants are those of the `Refused` entries, in their order; what no grant allows
        // has none.
        let mut kept = Vec::new();
        let mut grants = grants.into_iter();
        let refusals = refusals
            .into_iter()
            .map(|refusal| {
                if !matches!(refusal, Error::Refused { .. }) {
                    return refusal;
                }
                let grant = grants.next();
                let before = refusal.to_string();
                let pointed = point_at_pass_env(refusal, raw, withheld);
                if pointed.to_string() == before {
                    kept.extend(grant);
                }
                pointed
            })
            .collect();
        return Error::RefusedMany {
            refusals,
            grants: kept,
        };
    }
    let Error::Refused {
        file,
        property,
        value,
        reason,
        grant,
    } = err
    else {
        return err;
    };
    let paths = DevContainer {
        mounts: raw.mounts.clone(),
        workspace_mount: raw.workspace_mount.clone(),
        run_args: raw.run_args.clone(),
        build: raw.build.clone(),
        context: raw.context.clone(),
        docker_file: raw.docker_file.clone(),
        ..DevContainer::default()
    };
    let used: Vec<String> = substitute::local_env_names(&paths)
        .into_iter()
        .filter(|n| withheld.contains(n))
        .collect();
    if used.is_empty() || !grant.contains("host-mount") {
        return Error::Refused {
            file,
            property,
            value,
            reason,
            grant,
        };
    }
    let list = used
        .iter()
        .map(|n| format!("\"{}\"", crate::visible::escape_controls(n)))
        .collect::<Vec<_>>()
        .join(", ");
    // The path the repository meant, with the host's values: the grant it will need is said
    // now, not on the next run.
    let then = match meant_host_path(raw, &property) {
        Some(path) => format!(
            ", and grant the path that makes: --grant host-mount={}",
            crate::visible::escape_controls(&path.display().to_string())
        ),
        None => ", then run yolo again to see the host-mount grant the real path needs".into(),
    };
    Error::Refused {
        file,
        property,
        value,
        reason: format!(
            "{reason} (the path is built from the host's {}, which yolo withholds, so it was empty)",
            used.iter()
                .map(|n| crate::visible::escape_controls(n).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        grant: format!(
            "let the config read the variable with pass_env = [{list}] in {}{then}",
            UserConfig::path().display()
        ),
    }
}

/// The host path of the bind `property` (`mounts[0]`, `runArgs[3]`) names, with the
/// `${localEnv:...}` it is built from replaced by the host's values (what it would be once
/// the user passes them); `None` when that cannot be told.
fn meant_host_path(raw: &DevContainer, property: &str) -> Option<PathBuf> {
    use crate::devcontainer::model::MountEntry;
    let index = |name: &str| -> Option<usize> {
        property
            .strip_prefix(name)?
            .strip_prefix('[')?
            .strip_suffix(']')?
            .parse()
            .ok()
    };
    let text = if let Some(i) = index("mounts") {
        match raw.mounts.get(i)? {
            MountEntry::Text(text) => text
                .split(',')
                .find_map(|p| {
                    p.trim()
                        .strip_prefix("source=")
                        .or(p.trim().strip_prefix("src="))
                })?
                .to_string(),
            MountEntry::Object(o) => o.source.clone()?,
        }
    } else {
        let i = index("runArgs")?;
        let arg = raw.run_args.get(i)?;
        let value = match arg.split_once('=') {
            Some((_, v)) if arg.starts_with("--") => v.to_string(),
            _ => raw.run_args.get(i + 1)?.clone(),
        };
        match value.split(',').find_map(|p| {
            p.trim()
                .strip_prefix("source=")
                .or(p.trim().strip_prefix("src="))
        }) {
            Some(source) => source.to_string(),
            None => value.split(':').next()?.to_string(),
        }
    };
    let replaced = substitute_host_env(&text)?;
    crate::paths::normalize_path(Path::new(&replaced))
}

/// `text` with each `${localEnv:NAME[:DEFAULT]}` replaced by the host's value (the default
/// when unset); `None` when one is unset without a default.
fn substitute_host_env(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${localEnv:") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "${localEnv:".len()..];
        let end = after.find('}')?;
        let (name, default) = match after[..end].split_once(':') {
            Some((n, d)) => (n, Some(d)),
            None => (&after[..end], None),
        };
        let value = std::env::var(name).ok().or(default.map(str::to_string))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// Substitute host-side variables. `${containerWorkspaceFolder}` depends on `workspaceFolder`,
/// which may itself use host variables, so that one property is resolved first. Also returns
/// that folder (the metadata entries are substituted with it) and the host variables the config
/// reads that yolo withheld (set on the host, not passed).
fn substituted(
    raw: &DevContainer,
    workspace: &Path,
    devcontainer_id: &str,
    pass_env: &[String],
) -> (DevContainer, String, Vec<String>) {
    let withheld: Vec<String> = substitute::local_env_names(raw)
        .into_iter()
        .filter(|n| !allowed_local_env(n, pass_env) && std::env::var_os(n).is_some())
        .collect();
    if !withheld.is_empty() {
        eprintln!(
            "{} devcontainer.json reads host variables yolo withholds: {} (treated as unset; allow them with pass_env = [..] in {})",
            console::style("note:").yellow(),
            crate::visible::escape_controls(&withheld.join(", ")),
            UserConfig::path().display()
        );
    }
    let env = |name: &str| local_env(name, pass_env);
    let default_folder = policy::default_workspace_target(workspace);
    let workspace = workspace.display().to_string();
    let first = substitute::substitute(
        raw,
        &substitute::Context {
            local_workspace_folder: &workspace,
            container_workspace_folder: &default_folder,
            devcontainer_id,
            local_env: &env,
        },
    );
    let folder = first.workspace_folder.clone().unwrap_or(default_folder);
    let config = substitute::substitute(
        raw,
        &substitute::Context {
            local_workspace_folder: &workspace,
            container_workspace_folder: &folder,
            devcontainer_id,
            local_env: &env,
        },
    );
    (config, folder, withheld)
}

/// A host variable as `${localEnv:..}` sees it: unset unless safe or in the user's `pass_env`.
fn local_env(name: &str, pass_env: &[String]) -> Option<String> {
    if allowed_local_env(name, pass_env) {
        std::env::var(name).ok()
    } else {
        None
    }
}

pub(crate) fn workspace_dir(explicit: Option<&Path>) -> Result<PathBuf> {
    let dir = match explicit {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().map_err(|e| Error::io(".", e))?,
    };
    dir.canonicalize().map_err(|e| {
        Error::NotFound(format!(
            "workspace {}: {e} (pass an existing folder with --workspace)",
            dir.display()
        ))
    })
}

fn host_ids() -> Option<(u32, u32)> {
    // SAFETY: getuid/getgid cannot fail and touch no memory.
    #[cfg(target_os = "linux")]
    return Some(unsafe { (libc::getuid(), libc::getgid()) });
    #[cfg(not(target_os = "linux"))]
    None
}

fn allowed_local_env(name: &str, pass_env: &[String]) -> bool {
    SAFE_LOCAL_ENV.contains(&name) || pass_env.iter().any(|p| p == name)
}

/// Checks the policy cannot make from names alone: where symlinks really lead (the agent can
/// plant them in the workspace). Both the context and the Dockerfile are resolved before anything
/// reads them, and the resolved paths are what the engine reads.
fn check_after_policy(spec: &mut RunSpec, grants: &policy::Grants) -> Result<()> {
    let ImageSource::Build(build) = &mut spec.image else {
        return Ok(());
    };
    let roots: Vec<PathBuf> = [
        Some(spec.workspace.clone()),
        crate::paths::git_root(&spec.workspace),
        spec.config_file.parent().map(Path::to_path_buf),
    ]
    .into_iter()
    .flatten()
    .filter_map(|p| p.canonicalize().ok())
    .collect();
    let inside = |real: &Path| roots.iter().any(|r| real.starts_with(r));
    let config_file = &spec.config_file;
    let real = resolve(config_file, "build.context", &build.context)?;
    if !inside(&real) && !grants.any_host_mount() {
        return Err(Error::Refused {
            file: config_file.clone(),
            property: "build.context".into(),
            value: format!("{} (really {})", build.context.display(), real.display()),
            reason: "it leads outside the repository (through a symlink), and the whole context is sent to Docker".into(),
            grant: "--grant host-mount (after checking the link is yours)".into(),
        });
    }
    build.context = real;

    // The Dockerfile is read by yolo (hash, tar) and its text reaches Docker and its error
    // messages: a link to `~/.ssh/id_rsa` must be refused before anything opens it.
    let dockerfile = build
        .dockerfile_outside
        .clone()
        .unwrap_or_else(|| build.context.join(&build.dockerfile));
    let real = resolve(config_file, "build.dockerfile", &dockerfile)?;
    if !inside(&real) && !grants.host_mount_covers(&real) {
        return Err(Error::Refused {
            file: config_file.clone(),
            property: "build.dockerfile".into(),
            value: format!("{} (really {})", dockerfile.display(), real.display()),
            reason: "it leads outside the repository (through a symlink), and yolo would send that file to Docker".into(),
            grant: format!("--grant host-mount={} (after checking the link is yours)", real.display()),
        });
    }
    if !real.is_file() {
        return Err(Error::Config {
            file: config_file.clone(),
            line: None,
            column: None,
            property: Some("build.dockerfile".into()),
            message: format!("{} is not a file", dockerfile.display()),
        });
    }
    // An unreadable file passes: the build says why it cannot read it.
    if let Ok(text) = crate::digest::read_to_string(&real) {
        let shown = real.display().to_string();
        policy::check_remote_adds(&text, &shown, config_file, "build.dockerfile", grants, true)?;
        // BuildKit syntax yolo cannot lower for the classic builder: refused now, not by the
        // builder's `unknown instruction` halfway through the build.
        if let Err(found) = crate::dockerfile_lower::lower(&text) {
            return Err(Error::Unsupported {
                file: config_file.clone(),
                property: "build.dockerfile".into(),
                message: crate::dockerfile_lower::refusal_message(&shown, &found),
            });
        }
    }
    match real.strip_prefix(&build.context) {
        Ok(rel) if !rel.as_os_str().is_empty() => {
            build.dockerfile = crate::paths::slash_path(rel);
            build.dockerfile_outside = None;
        }
        _ => {
            build.dockerfile = policy::OUTSIDE_DOCKERFILE.into();
            build.dockerfile_outside = Some(real);
        }
    }
    Ok(())
}

/// `path` with every symlink resolved; a missing path is a config error of `property`.
fn resolve(config_file: &Path, property: &str, path: &Path) -> Result<PathBuf> {
    path.canonicalize().map_err(|e| Error::Config {
        file: config_file.to_path_buf(),
        line: None,
        column: None,
        property: Some(property.into()),
        message: format!("{}: {e}", path.display()),
    })
}

/// The agents whose domains the allowlist includes: those named, else the repository's default.
pub(crate) fn with_default_agent(
    project: &Project,
    agents: &[crate::agents::Agent],
) -> Vec<crate::agents::Agent> {
    if !agents.is_empty() {
        return agents.to_vec();
    }
    project
        .spec
        .default_agent
        .as_deref()
        .and_then(|name| crate::agents::resolve(name, &project.user).ok())
        .into_iter()
        .collect()
}
