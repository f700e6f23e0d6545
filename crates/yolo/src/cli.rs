//! clap definitions only: no work is done here. Values are parsed (by the parsers in
//! `settings`) but nothing runs and nothing is read from disk.

use crate::firewall::NetworkMode;
use crate::policy::Grant;
use crate::settings;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;

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

#[derive(Debug, Clone, Args, Default)]
pub(crate) struct Target {
    /// Repository folder (default: the current directory)
    #[arg(long, short = 'w', global = true, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    /// devcontainer.json to use (default: discovered in the workspace)
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
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
    /// Accept a changed .devcontainer/ without asking
    #[arg(long)]
    pub(crate) accept_config: bool,
    /// CPU limit in cores, e.g. 2 or 0.5
    #[arg(long, value_name = "N", value_parser = settings::parse_cpus)]
    pub(crate) cpus: Option<f64>,
    /// Memory limit, e.g. 4g, 512m (at least 6m)
    #[arg(long, value_name = "SIZE", value_parser = settings::parse_memory)]
    pub(crate) memory: Option<i64>,
    /// Process limit (at least 1)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..))]
    pub(crate) pids: Option<i64>,
    /// Allow a domain, *.domain, CIDR or host:port (repeatable)
    #[arg(long = "allow", value_name = "PATTERN", value_parser = settings::parse_pattern)]
    pub(crate) allow: Vec<String>,
    /// Upstream DNS resolver of the firewall guard, ADDR[:PORT] (port 53 by default)
    #[arg(long, value_name = "ADDR", value_parser = settings::parse_upstream)]
    pub(crate) upstream_dns: Option<SocketAddr>,
    /// Network mode (default: firewall)
    #[arg(long, value_enum, value_name = "MODE")]
    pub(crate) network: Option<NetworkArg>,
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
}

impl From<NetworkArg> for NetworkMode {
    fn from(arg: NetworkArg) -> NetworkMode {
        match arg {
            NetworkArg::Firewall => NetworkMode::Firewall,
            NetworkArg::Open => NetworkMode::Open,
            NetworkArg::None => NetworkMode::None,
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
        /// Arguments passed to the agent
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Run a command in the container as the remote user, in the workspace folder
    Exec {
        #[command(flatten)]
        target: Target,
        /// The command and its arguments
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Open the remote user's shell in the container
    Shell {
        #[command(flatten)]
        target: Target,
    },
    /// Stop the project container
    Down {
        #[command(flatten)]
        target: Target,
        /// Also remove the container (and yolo's networks)
        #[arg(long)]
        remove: bool,
        /// Also remove the named volumes (with --remove)
        #[arg(long)]
        volumes: bool,
    },
    /// List yolo's containers
    #[command(alias = "ps")]
    Status {
        /// Print as JSON
        #[arg(long)]
        json: bool,
    },
    /// Write a .devcontainer/ for an agent
    Init {
        #[command(flatten)]
        target: Target,
        /// Agent preset the template is for
        #[arg(long, default_value = "claude")]
        agent: String,
        /// Overwrite existing files
        #[arg(long)]
        force: bool,
    },
    /// Check that Docker is usable
    Doctor,
    /// Show a session's audit log
    Audit {
        #[command(flatten)]
        target: Target,
        /// Session id (default: the workspace's latest)
        #[arg(long)]
        session: Option<String>,
        /// Only events of this kind (repeatable)
        #[arg(long = "kind")]
        kinds: Vec<String>,
        /// Keep printing new events
        #[arg(long, short = 'f')]
        follow: bool,
        /// Print raw JSON lines
        #[arg(long)]
        json: bool,
        /// List sessions instead of events
        #[arg(long)]
        list: bool,
    },
    /// Allow domains for a running session, without restart
    Allow {
        #[command(flatten)]
        target: Target,
        #[arg(required = true)]
        patterns: Vec<String>,
    },
    /// Remove domains from a running session's allowlist
    Deny {
        #[command(flatten)]
        target: Target,
        #[arg(required = true)]
        patterns: Vec<String>,
    },
    /// Show the effective allowlist, set contents and counters
    Firewall {
        #[command(flatten)]
        target: Target,
        /// Print as JSON
        #[arg(long)]
        json: bool,
    },
}
