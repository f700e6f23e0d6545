//! clap definitions only: no work is done here. Values are parsed (by the parsers in
//! `values`) but nothing runs and nothing is read from disk.

use crate::firewall::NetworkMode;
use crate::policy::Grant;
use crate::values;
use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::Shell;
use std::net::SocketAddr;
use std::path::PathBuf;
use yolo_protocol::event::EventKind;

#[derive(Debug, Parser)]
#[command(
    name = "yolo",
    version,
    about = "Run coding agents in YOLO mode inside a hardened, firewalled dev container"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// `yolo audit`'s subcommands.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum AuditAction {
    /// Check that a session's log files are what their writers wrote: every record in its
    /// file's hash chain, none changed, removed, moved or cut off at the end; names the first
    /// record that is not (exit 1 then)
    Verify {
        /// Session id (default: the workspace's latest; `yolo audit --list` shows them)
        #[arg(value_name = "SESSION")]
        session: Option<String>,
    },
    /// Ship a session's events as they are written to `[audit] otlp_endpoint` and `ocsf_file`
    /// until it stops (`up` starts it in the background)
    #[command(hide = true)]
    Ship {
        /// Session id
        #[arg(value_name = "SESSION")]
        session: String,
    },
}

/// `yolo firewall`'s subcommands.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum FirewallAction {
    /// Print the smallest allowlist that would have let a session do what it did (a
    /// `--network learn` session: everything it used; a firewall session: what it was refused),
    /// presets recognised, names grouped by domain, unusual ports kept
    Suggest {
        /// Session id (default: the workspace's latest; `yolo audit --list` shows them)
        #[arg(value_name = "SESSION")]
        session: Option<String>,
        /// Also save it: `user` adds it to your config's [firewall]; `repo` to
        /// devcontainer.json's customizations.yolo.firewall, for the team to review
        #[arg(long, value_name = "WHERE")]
        write: Option<SuggestTarget>,
        /// Print as JSON
        #[arg(long)]
        json: bool,
    },
}

/// Where `yolo firewall suggest --write` saves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SuggestTarget {
    /// Your user config (config.toml), [firewall] presets and allow
    User,
    /// The repository's devcontainer.json, customizations.yolo.firewall
    Repo,
}

#[derive(Debug, Clone, Args, Default)]
pub(crate) struct Target {
    /// Repository folder (default: the current directory)
    #[arg(long, short = 'w', global = true, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    /// devcontainer.json to use (default: discovered in the workspace)
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// The named session whose agent works on a copy of the repository, brought back as the
    /// branch yolo/NAME (default: the workspace session, on the repository itself; `up` and
    /// `run` with --copy and no NAME make a new session with a generated name)
    #[arg(
        long = "copy",
        global = true,
        value_name = "NAME",
        value_parser = copy_name_or_new,
        num_args = 0..=1,
        default_missing_value = ""
    )]
    pub(crate) copy: Option<String>,
}

/// `--session NAME` of the commands that act on a running session (`exec`, `shell`, `logs`,
/// `allow`, `deny`, `approvals`): the named session, as `--copy NAME`.
#[derive(Debug, Clone, Args, Default)]
pub(crate) struct Named {
    /// The named session (as --copy NAME; default: the workspace session)
    #[arg(long = "session", value_name = "NAME", value_parser = copy_name, conflicts_with = "copy")]
    pub(crate) session: Option<String>,
}

impl Target {
    /// With the named session a command's `NAME` argument gave (`yolo sync NAME`).
    pub(crate) fn with_copy(mut self, name: Option<String>) -> Target {
        self.copy = name.or(self.copy);
        self
    }

    /// `--copy` without a name: a new session is wanted (`up`, `run`).
    pub(crate) fn wants_new_copy(&self) -> bool {
        self.copy.as_deref() == Some("")
    }

    /// The named session `--copy` names, for a command that acts on one: `--copy` without a
    /// name is a usage error here (only `up` and `run` make a new session).
    pub(crate) fn named_copy(&self) -> crate::error::Result<Option<&str>> {
        if self.wants_new_copy() {
            return Err(crate::error::Error::Usage(
                "--copy needs a NAME here (only `up` and `run` make a new session with a generated name); `yolo ps --sessions` lists the sessions".into(),
            ));
        }
        Ok(self.copy.as_deref())
    }
}

/// `--copy NAME`, or `--copy` alone (`""`: a new session, named by `up` or `run`).
fn copy_name_or_new(text: &str) -> Result<String, String> {
    if text.is_empty() {
        Ok(String::new())
    } else {
        copy_name(text)
    }
}

/// A short name for a new session (`--copy` without one): two words and two digits,
/// `quick-otter-42`, from the system's random source.
pub(crate) fn generated_name() -> String {
    const FIRST: [&str; 16] = [
        "amber", "brisk", "calm", "deft", "eager", "fair", "glad", "hardy", "keen", "lucid",
        "merry", "nimble", "plucky", "quick", "sunny", "tidy",
    ];
    const SECOND: [&str; 16] = [
        "badger", "crane", "dingo", "egret", "finch", "gecko", "heron", "ibis", "koala", "lynx",
        "marten", "newt", "otter", "puffin", "raven", "stoat",
    ];
    let mut bytes = [0u8; 3];
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        bytes = [(nanos >> 4) as u8, (nanos >> 12) as u8, (nanos >> 20) as u8];
    }
    format!(
        "{}-{}-{}",
        FIRST[usize::from(bytes[0] % 16)],
        SECOND[usize::from(bytes[1] % 16)],
        bytes[2] % 100
    )
}

/// Whether `text` can be a named session's name ([`copy_name`]).
pub(crate) fn is_copy_name(text: &str) -> bool {
    copy_name(text).is_ok()
}

/// A named session's name: what a branch (`yolo/NAME`) and a container name can both hold.
fn copy_name(text: &str) -> Result<String, String> {
    if crate::values::is_label(text, 40) {
        Ok(text.to_string())
    } else {
        Err(format!(
            "{:?} is not a session name: 1 to 40 lowercase letters, digits and dashes, not starting or ending with a dash (it becomes the branch yolo/NAME)",
            crate::visible::escape_controls(text)
        ))
    }
}

/// The flags of `up` and `run`. Every value is checked by its parser here, so a bad one is a
/// usage error (exit 64) before anything runs; `settings::UpSettings` merges them with the
/// user's config.
#[derive(Debug, Clone, Args, Default)]
pub(crate) struct UpFlags {
    /// Rebuild the image and recreate the container
    #[arg(long)]
    pub(crate) rebuild: bool,
    /// Grant something the repository asks for (repeatable; see --help for the list)
    #[arg(
        long = "grant",
        value_name = "NAME",
        value_parser = clap::value_parser!(Grant),
        long_help = crate::policy::grant_help()
    )]
    pub(crate) grants: Vec<Grant>,
    /// Run the repository's initializeCommand on the host without asking
    #[arg(long)]
    pub(crate) trust_host_commands: bool,
    /// Accept a changed container definition (config, Dockerfile, host scripts) without asking
    #[arg(long)]
    pub(crate) accept_config: bool,
    /// CPU limit in cores, e.g. 2 or 0.5
    #[arg(long, value_name = "N", value_parser = values::parse_cpus)]
    pub(crate) cpus: Option<f64>,
    /// Memory limit, e.g. 4g, 512m (at least 6m)
    #[arg(long, value_name = "SIZE", value_parser = values::parse_memory)]
    pub(crate) memory: Option<i64>,
    /// Process limit (at least 1)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
    pub(crate) pids: Option<i64>,
    /// Allow a domain, *.domain, CIDR or host:port (repeatable)
    #[arg(long = "allow", value_name = "PATTERN", value_parser = values::parse_pattern)]
    pub(crate) allow: Vec<String>,
    /// Upstream DNS resolver of the firewall guard, ADDR[:PORT] (port 53 by default)
    #[arg(long, value_name = "ADDR", value_parser = values::parse_upstream)]
    pub(crate) upstream_dns: Option<SocketAddr>,
    /// Network mode (default: firewall)
    #[arg(long, value_enum, value_name = "MODE")]
    pub(crate) network: Option<NetworkArg>,
    /// Hold a lookup of a name outside the allowlist for your answer instead of refusing it
    /// (`yolo approvals`, `yolo allow --pending ID`); as `[firewall] on_refused = "ask"`
    #[arg(long)]
    pub(crate) ask: bool,
    /// Trust these CA certificates (a PEM file or a folder of .crt/.pem files; repeatable) in
    /// image builds and the container: for a proxy that intercepts TLS
    #[arg(long = "extra-ca", value_name = "PATH")]
    pub(crate) extra_ca: Vec<std::path::PathBuf>,
}

/// The flags of `kube` besides those of `up`: where the Pod's images and workspace come from,
/// and whether to apply it. Checked here (conflicts, shapes), resolved in `commands::kube` and `bring_up::pod`.
#[derive(Debug, Clone, Args, Default)]
pub(crate) struct KubeFlags {
    /// Create (or update) the Pod in the cluster of your kubeconfig instead of printing it
    #[arg(long)]
    pub(crate) apply: bool,
    /// The agent's image, from a registry the cluster pulls from (needed when the config builds one)
    #[arg(long, value_name = "IMAGE")]
    pub(crate) image: Option<String>,
    /// The firewall guard's image, pushed where the cluster pulls from (default: yolo's local tag)
    #[arg(long, value_name = "IMAGE")]
    pub(crate) guard_image: Option<String>,
    /// Mount this PersistentVolumeClaim as the workspace instead of cloning the repository
    #[arg(long, value_name = "NAME", conflicts_with_all = ["repo", "branch", "git_image"], value_parser = values::parse_kube_name)]
    pub(crate) pvc: Option<String>,
    /// Repository URL the Pod clones (default: the workspace's `origin` remote)
    #[arg(long, value_name = "URL")]
    pub(crate) repo: Option<String>,
    /// Branch the Pod clones (default: the workspace's current branch)
    #[arg(long, value_name = "BRANCH")]
    pub(crate) branch: Option<String>,
    /// Image with git for the clone (default: the agent's image)
    #[arg(long, value_name = "IMAGE")]
    pub(crate) git_image: Option<String>,
    /// Namespace (default: your kubeconfig context's)
    #[arg(long, short = 'n', value_name = "NAMESPACE", value_parser = values::parse_kube_name)]
    pub(crate) namespace: Option<String>,
    /// The Pod's name (default: the container name `yolo up` would use)
    #[arg(long, value_name = "NAME", value_parser = values::parse_kube_name)]
    pub(crate) name: Option<String>,
    /// What the agent container runs (default: a keep-alive; `kubectl exec` into it)
    #[arg(last = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

/// `--network`: the user's choice only; a repository cannot pick it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum NetworkArg {
    /// Domain allowlist through the firewall guard
    Firewall,
    /// No filtering; DNS and connections are still audited
    Open,
    /// No network at all but loopback
    None,
    /// Open, to learn the allowlist: every name recorded for `yolo firewall suggest`
    Learn,
}

impl From<NetworkArg> for NetworkMode {
    fn from(arg: NetworkArg) -> NetworkMode {
        match arg {
            NetworkArg::Firewall => NetworkMode::Firewall,
            NetworkArg::Open => NetworkMode::Open,
            NetworkArg::None => NetworkMode::None,
            NetworkArg::Learn => NetworkMode::Learn,
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Build and start the project container (idempotent)
    Up {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        flags: UpFlags,
        /// Print the result as JSON
        #[arg(long)]
        json: bool,
    },
    /// Start the container if needed and run an agent in it, attached to the terminal
    Run {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        flags: UpFlags,
        /// Agent preset: claude, codex, gemini, aider, opencode, or one from your config
        agent: Option<String>,
        /// Run the agent in the background: its output goes to a log on this machine
        /// (`yolo logs`), `yolo ps` lists it; prints the run's id and returns
        #[arg(long, short = 'd')]
        detach: bool,
        /// Arguments passed to the agent
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// List agent runs (`yolo run`, attached or detached) of every workspace: running ones, or
    /// all with --all
    Ps {
        /// Also the runs (with --sessions: the sessions) that ended
        #[arg(long, short = 'a')]
        all: bool,
        /// The sessions (the workspace sessions and the named ones, `--copy NAME`) in place of
        /// the agent runs: repository, branch, state, start and what the agent did
        #[arg(long)]
        sessions: bool,
        /// Print as JSON
        #[arg(long)]
        json: bool,
    },
    /// Print the output of a detached agent run (default: the workspace's latest)
    Logs {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        named: Named,
        /// The run's id, or a unique start of it (`yolo ps --all` lists them)
        run: Option<String>,
        /// Keep printing until the run ends
        #[arg(long, short = 'f')]
        follow: bool,
        /// Print the agent's output as it wrote it (by default control characters are shown
        /// escaped)
        #[arg(long)]
        raw: bool,
    },
    /// Internal: wait for a detached run's agent (started by `yolo run --detach`)
    #[command(hide = true)]
    Keep {
        /// The run's id
        run: String,
    },
    /// Run a command in the container as the remote user, in the workspace folder
    Exec {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        named: Named,
        /// The command and its arguments
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Open the remote user's shell in the container
    Shell {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        named: Named,
    },
    /// Stop the project container
    Down {
        #[command(flatten)]
        target: Target,
        /// The named session (as --copy NAME)
        #[arg(value_name = "NAME", value_parser = copy_name, conflicts_with = "copy")]
        name: Option<String>,
        /// Every session of the repository: the workspace session and the named ones
        #[arg(long, conflicts_with_all = ["name", "copy"])]
        all: bool,
        /// Also remove the container (and yolo's networks)
        #[arg(long)]
        remove: bool,
        /// Also remove the named volumes (with --remove)
        #[arg(long)]
        volumes: bool,
    },
    /// Record the session's whole working tree (tracked and untracked files, not ignored ones)
    /// as a checkpoint to go back to (a commit on a hidden ref: of the repository for a
    /// session on a copy, of yolo's own store for the workspace session)
    Checkpoint {
        #[command(flatten)]
        target: Target,
        /// The named session (as --copy NAME)
        #[arg(value_name = "NAME", value_parser = copy_name, conflicts_with = "copy")]
        name: Option<String>,
    },
    /// List the session's checkpoints with what changed from one to the next
    Checkpoints {
        #[command(flatten)]
        target: Target,
        /// The named session (as --copy NAME)
        #[arg(value_name = "NAME", value_parser = copy_name, conflicts_with = "copy")]
        name: Option<String>,
        /// Print as JSON
        #[arg(long)]
        json: bool,
    },
    /// Put the session's working tree back to a checkpoint (the session stopped first; a
    /// copy is made anew from it, the workspace session's files are written back, ignored
    /// ones and .git untouched)
    Rollback {
        #[command(flatten)]
        target: Target,
        /// The checkpoint: N, or NAME@N for a named session (`yolo checkpoints` lists them)
        #[arg(value_name = "[NAME@]N")]
        checkpoint: String,
        /// Do it without asking (needed without a terminal)
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// What `yolo sync` would bring from a session's copy, against your HEAD: the files
    /// your machine runs (hooks, .envrc, .vscode/, Makefiles...) first, then the diff;
    /// moves no branch
    Diff {
        #[command(flatten)]
        target: Target,
        /// The named session (as --copy NAME)
        #[arg(value_name = "NAME", value_parser = copy_name, conflicts_with = "copy")]
        name: Option<String>,
        /// The changed files only (`git diff --stat`), no patch
        #[arg(long)]
        stat: bool,
    },
    /// Bring the agent's work back from a remote engine's volume as the branch yolo/<name>
    /// (docs/remote.md); never touches your branch or files
    Sync {
        #[command(flatten)]
        target: Target,
        /// The named session (as --copy NAME)
        #[arg(value_name = "NAME", value_parser = copy_name, conflicts_with = "copy")]
        name: Option<String>,
    },
    /// List yolo's containers
    Status {
        /// Print as JSON (shape in docs/json-output.md)
        #[arg(long)]
        json: bool,
    },
    /// Write a .devcontainer/ for an agent, with the toolchains the repository uses
    Init {
        #[command(flatten)]
        target: Target,
        /// Agent the template installs: claude, codex, gemini, aider or opencode
        #[arg(long, default_value = "claude", value_name = "AGENT")]
        agent: String,
        /// Overwrite existing files
        #[arg(long)]
        force: bool,
    },
    /// Check that Docker is usable
    Doctor,
    /// Make spare network namespaces ahead, so the next guards start sooner
    ///
    /// A cold `up` attaches its guard to Docker's bridge while it waits; a guard that joins a
    /// spare made ahead starts in a third of that. `up` keeps `[firewall] spares` of them
    /// (default 1) in the background; `yolo prepare 20` before starting twenty sessions at
    /// once. Each is a container running one sleeping process, no capabilities, nothing
    /// mounted (docs/architecture.md, "Spare network namespaces").
    Prepare {
        /// How many to have ready (default: `[firewall] spares`)
        #[arg(value_name = "N")]
        count: Option<u32>,
        /// Remove the spares instead (those no session has claimed)
        #[arg(long, conflicts_with = "count")]
        remove: bool,
        /// Internal: a background top-up after `up`, once process PID has ended
        #[arg(long, value_name = "PID", hide = true, conflicts_with_all = ["count", "remove"])]
        after: Option<u32>,
    },
    /// Print the session as one Kubernetes Pod (YAML), or create it with --apply
    ///
    /// The same plan as `yolo up`: the guard and the agent as two containers sharing the
    /// Pod's network and process namespaces, the allowlist in a ConfigMap; docs/kubernetes.md
    Kube {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        flags: UpFlags,
        #[command(flatten)]
        kube: KubeFlags,
    },
    /// Show a session's audit log
    Audit {
        #[command(flatten)]
        target: Target,
        /// Read the events of this Pod made by `yolo kube` (its guard's log) instead of a session
        #[arg(long, value_name = "POD", conflicts_with_all = ["session", "list", "follow"], value_parser = values::parse_kube_name)]
        kube: Option<String>,
        /// The Pod's namespace (with --kube; default: your kubeconfig context's)
        #[arg(long, short = 'n', value_name = "NAMESPACE", requires = "kube", value_parser = values::parse_kube_name)]
        namespace: Option<String>,
        /// The guard's log as text from this file (`-`: stdin) instead of the cluster's API
        #[arg(long, value_name = "FILE", requires = "kube", hide = true)]
        kube_log: Option<PathBuf>,
        /// Session id (default: the workspace's latest; `--list` shows them)
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Only events of this kind (repeatable)
        #[arg(long = "kind", value_name = "KIND", value_parser = PossibleValuesParser::new(EventKind::NAMES))]
        kinds: Vec<String>,
        /// Only events from this time on: a time (2026-11-22T10:00:00Z) or an age (90s, 10m, 2h, 1d)
        #[arg(long, value_name = "WHEN", value_parser = values::parse_since)]
        since: Option<chrono::DateTime<chrono::Utc>>,
        /// Only events whose line (with --json, whose JSON) contains TEXT, ignoring case
        #[arg(long, value_name = "TEXT")]
        grep: Option<String>,
        /// Keep printing new events
        #[arg(long, short = 'f')]
        follow: bool,
        /// Print raw JSON lines
        #[arg(long)]
        json: bool,
        /// List sessions instead of events
        #[arg(long)]
        list: bool,
        /// Print the session as OCSF records (one JSON object per line) or as one OpenTelemetry
        /// logs request (OTLP's JSON mapping), for a SIEM or a collector; filters apply
        #[arg(long, value_name = "FORMAT", default_value = "text", conflicts_with_all = ["follow", "json", "list", "kube"])]
        format: crate::audit::export::Format,
        #[command(subcommand)]
        action: Option<AuditAction>,
    },
    /// Play the terminal `yolo run` and `yolo shell` recorded in a session (asciicast v2 files
    /// in the session's folder, which asciinema plays too)
    Replay {
        #[command(flatten)]
        target: Target,
        /// Session id (default: the workspace's latest; `yolo audit --list` shows them)
        #[arg(value_name = "SESSION")]
        session: Option<String>,
        /// Play this many times faster (waits are also cut to 2 s at most)
        #[arg(long, value_name = "N", default_value = "1", value_parser = values::parse_speed)]
        speed: f64,
        /// Write the recording as it is: the escape sequences that reach past the screen
        /// (clipboard, title, hyperlinks, queries), which are shown escaped by default, act on
        /// your terminal
        #[arg(long)]
        raw: bool,
    },
    /// Draw a session as one HTML page (summary, timeline, programs, network, files) that
    /// opens offline; prints the page's path
    Report {
        #[command(flatten)]
        target: Target,
        /// Session id (default: the workspace's latest; `yolo audit --list` shows them)
        #[arg(value_name = "SESSION")]
        session: Option<String>,
        /// Where to write the page (default: report.html in the session's folder)
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Allow domains, addresses or ports for a running session, without restart
    Allow {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        named: Named,
        /// What to allow: example.com, *.example.com (subdomains), example.com:443 or
        /// example.com:80,443 (only those ports), 10.0.0.5, 10.0.0.0/8, 10.0.0.0/8:5432,
        /// [2001:db8::1]:443
        #[arg(required_unless_present_any = ["http", "pending"], value_name = "PATTERN", value_parser = values::parse_pattern)]
        patterns: Vec<String>,
        /// A method and path rule for an inspected host that has rules, in the running
        /// proxy: 'HOST METHOD /path' (what a refused request's 403 body names), e.g.
        /// --http 'api.example.com POST /v1/files'
        #[arg(long, value_name = "'HOST METHOD /path'", value_parser = values::parse_http_rule)]
        http: Vec<String>,
        /// Answer a held question (`yolo approvals` lists them): its name joins this
        /// session's allowlist and the held lookups go through
        #[arg(long, value_name = "ID", conflicts_with_all = ["patterns", "http"])]
        pending: Option<u64>,
        /// With --pending: also save the name, to your config's [firewall] allow (`user`) or
        /// to devcontainer.json's customizations.yolo.firewall (`repo`, for the team to review)
        #[arg(long, value_name = "WHERE", requires = "pending")]
        save: Option<SuggestTarget>,
    },
    /// Remove entries, or ports of entries, from a running session's allowlist
    Deny {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        named: Named,
        /// What to deny, in the forms `allow` takes: example.com removes the name with all its
        /// ports; example.com:443 takes that port out of the entries that list it
        /// (example.com:80,443 keeps 80). An entry allowed on every port cannot lose one: deny
        /// the name, then allow the ports to keep
        #[arg(required_unless_present_any = ["http", "pending"], value_name = "PATTERN", value_parser = values::parse_pattern)]
        patterns: Vec<String>,
        /// Take a method and path rule out of an inspected host's rules in the running proxy:
        /// 'HOST METHOD /path', as `allow --http` takes it
        #[arg(long, value_name = "'HOST METHOD /path'", value_parser = values::parse_http_rule)]
        http: Vec<String>,
        /// Refuse a held question (`yolo approvals` lists them) now
        #[arg(long, value_name = "ID", conflicts_with_all = ["patterns", "http"])]
        pending: Option<u64>,
    },
    /// One live view of a session: the questions waiting for your answer on top (a/s/d keys),
    /// then programs run, files changed and network and HTTP decisions as they happen, with
    /// counts; after the session ended, a browser of its log
    Watch {
        #[command(flatten)]
        target: Target,
        /// Session id (default: the workspace's latest; `yolo audit --list` shows them)
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Print the screen once (80×24) and exit
        #[arg(long)]
        once: bool,
    },
    /// List the questions the firewall holds for your answer (`--ask`, `[firewall] on_refused
    /// = "ask"`): answer with `yolo allow --pending ID` or `yolo deny --pending ID`
    Approvals {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        named: Named,
        /// Print as JSON
        #[arg(long)]
        json: bool,
    },
    /// Show the effective allowlist, set contents and counters
    Firewall {
        #[command(flatten)]
        target: Target,
        /// Print as JSON (shape in docs/json-output.md)
        #[arg(long)]
        json: bool,
        #[command(subcommand)]
        action: Option<FirewallAction>,
    },
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish)
    ///
    /// For example: `yolo completions bash > ~/.local/share/bash-completion/completions/yolo`
    Completions {
        /// The shell to complete for
        #[arg(value_name = "SHELL")]
        shell: Shell,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every argument of every subcommand, positional or flag, as `yolo sub --flag`; clap's own
    /// `--help`/`--version` and its `help` subcommand are skipped.
    fn arguments_without_help(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!("{path} {id}"));
            }
        }
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let path = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() {
                missing.push(format!("{path} (no about)"));
            }
            arguments_without_help(sub, &path, missing);
        }
    }

    /// `--copy` alone (before `--`, another flag or the end) asks for a new session with a
    /// generated name; `--copy NAME` names one; a generated name is a session name.
    #[test]
    fn copy_without_a_name_asks_for_a_new_session() {
        use clap::Parser;
        let copy = |args: &[&str]| match Cli::try_parse_from(args).unwrap().command {
            Command::Run { target, .. } | Command::Up { target, .. } => target.copy,
            _ => panic!("not run or up"),
        };
        assert_eq!(
            copy(&["yolo", "run", "--copy", "--", "claude"]),
            Some("".into())
        );
        assert_eq!(
            copy(&["yolo", "run", "--copy", "-d", "--", "x"]),
            Some("".into())
        );
        assert_eq!(copy(&["yolo", "up", "--copy"]), Some("".into()));
        assert_eq!(
            copy(&["yolo", "up", "--copy", "fix-tests"]),
            Some("fix-tests".into())
        );
        assert_eq!(copy(&["yolo", "up"]), None);
        assert!(Cli::try_parse_from(["yolo", "up", "--copy", "Bad_Name"]).is_err());
        for _ in 0..100 {
            let name = generated_name();
            assert!(is_copy_name(&name), "{name}");
        }
    }

    #[test]
    fn every_argument_has_help_text() {
        let mut cmd = Cli::command();
        cmd.build();
        let mut missing = Vec::new();
        arguments_without_help(&cmd, "yolo", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }

    #[test]
    fn the_definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn allow_and_deny_take_http_rules_as_host_method_path() {
        let parse = |args: &[&str]| Cli::try_parse_from([&["yolo"][..], args].concat());
        for verb in ["allow", "deny"] {
            assert!(parse(&[verb, "--http", "api.example.com POST /v1/files"]).is_ok());
            assert!(parse(&[verb, "a.test", "--http", "a.test GET /**"]).is_ok());
            let err = parse(&[verb, "--http", "api.example.com"]).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
            assert!(err.to_string().contains("HOST METHOD /path"), "{err}");
            assert!(parse(&[verb, "--http", "a.test GET /a/b**"]).is_err());
            // Neither a pattern nor a rule: nothing to do.
            assert!(parse(&[verb]).is_err());
        }
    }

    #[test]
    fn audit_kind_accepts_only_event_kinds() {
        let parse = |kind: &str| Cli::try_parse_from(["yolo", "audit", "--kind", kind]);
        for kind in EventKind::NAMES {
            assert!(parse(kind).is_ok(), "{kind}");
        }
        let err = parse("dnss").unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
        assert!(err.to_string().contains("blocked"), "{err}");
    }
}
