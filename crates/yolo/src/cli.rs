//! clap definitions only: no work is done here.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "yolo",
    version,
    about = "Run coding agents in YOLO mode inside a hardened, firewalled dev container"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Args, Default)]
pub struct Target {
    /// Repository folder (default: the current directory)
    #[arg(long, short = 'w', global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// devcontainer.json to use (default: discovered in the workspace)
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Clone, Args, Default)]
pub struct UpFlags {
    /// Rebuild the image and recreate the container
    #[arg(long)]
    pub rebuild: bool,
    /// Grant something the repository asks for (repeatable): privileged, cap-add[=CAP],
    /// security-opt[=OPT], host-mount[=PATH], host-network, host-pid, host-ipc, host-userns,
    /// host-uts, device, docker-socket, config-change
    #[arg(long = "grant", value_name = "NAME")]
    pub grants: Vec<String>,
    /// Run the repository's initializeCommand on the host without asking
    #[arg(long)]
    pub trust_host_commands: bool,
    /// Accept a changed .devcontainer/ without asking
    #[arg(long)]
    pub accept_config: bool,
    /// CPU limit (cores)
    #[arg(long, value_name = "N")]
    pub cpus: Option<f64>,
    /// Memory limit, e.g. 4g, 512m
    #[arg(long, value_name = "SIZE")]
    pub memory: Option<String>,
    /// Process limit
    #[arg(long, value_name = "N")]
    pub pids: Option<i64>,
    /// Allow a domain, *.domain, CIDR or host:port (repeatable)
    #[arg(long = "allow", value_name = "PATTERN")]
    pub allow: Vec<String>,
    /// Upstream DNS resolver of the firewall guard, ADDR[:PORT]
    #[arg(long, value_name = "ADDR")]
    pub upstream_dns: Option<String>,
    /// Network mode: firewall (default), open (no filtering, audit only), none (no network)
    #[arg(long, value_name = "MODE")]
    pub network: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
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
