//! One file per subcommand. Commands compose config, policy, engine, firewall and audit; they
//! hold no Docker or nftables details themselves.

pub(crate) mod approval;
pub(crate) mod audit;
pub(crate) mod completions;
pub(crate) mod compose;
pub(crate) mod doctor;
pub(crate) mod down;
pub(crate) mod exec;
pub(crate) mod features;
pub(crate) mod firewall;
pub(crate) mod hooks;
pub(crate) mod init;
pub(crate) mod metadata;
pub(crate) mod network;
pub(crate) mod output;
pub(crate) mod ports;
pub(crate) mod replay;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod session;
pub(crate) mod status;
pub(crate) mod up;
pub(crate) mod watched;

use crate::cli::{Cli, Command};
use crate::engine::{Engine, Owner};
use crate::error::Result;
use crate::project::Located;
use crate::settings::UpSettings;
use crate::user_config::UserConfig;

/// Run a parsed command line; returns the process exit code.
pub(crate) async fn execute(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Up {
            target,
            flags,
            json,
        } => {
            let (settings, user) = resolve(&flags)?;
            up::execute(&target, settings, user, json).await
        }
        Command::Run {
            target,
            flags,
            agent,
            args,
        } => {
            let (settings, user) = resolve(&flags)?;
            run::execute(&target, settings, user, agent, args).await
        }
        Command::Exec { target, command } => exec::execute(&target, command).await,
        Command::Shell { target } => exec::shell(&target).await,
        Command::Down {
            target,
            remove,
            volumes,
        } => down::execute(&target, remove, volumes).await,
        Command::Status { json } => status::execute(json).await,
        Command::Init {
            target,
            agent,
            force,
        } => init::execute(&target, &agent, force),
        Command::Doctor => doctor::execute().await,
        Command::Audit {
            target,
            session,
            kinds,
            since,
            grep,
            follow,
            json,
            list,
        } => {
            let filter = audit::Filter {
                kinds,
                since,
                grep,
                live: false,
            };
            audit::execute(&target, session, filter, follow, json, list).await
        }
        Command::Replay {
            target,
            session,
            speed,
        } => replay::execute(&target, session, speed),
        Command::Report {
            target,
            session,
            output,
        } => report::execute(&target, session, output),
        Command::Allow { target, patterns } => firewall::allow(&target, patterns).await,
        Command::Deny { target, patterns } => firewall::deny(&target, patterns).await,
        Command::Firewall { target, json } => firewall::show(&target, json).await,
        Command::Completions { shell } => completions::execute(shell),
    }
}

/// The workspace and config file the `--workspace`/`--config` flags point at.
fn locate(target: &crate::cli::Target) -> Result<Located> {
    Located::find(target.workspace.as_deref(), target.config.as_deref())
}

/// The user's config and the flags, resolved before anything runs.
fn resolve(flags: &crate::cli::UpFlags) -> Result<(UpSettings, UserConfig)> {
    let user = UserConfig::load()?;
    let settings = UpSettings::resolve(flags, &user)?;
    Ok((settings, user))
}

/// Connect to Docker, with the error a newcomer can act on.
pub(crate) async fn engine() -> Result<Engine> {
    Engine::connect().await
}

/// Whose containers a located workspace's are, for `Engine::find`.
fn owner(located: &Located) -> Owner {
    Owner {
        workspace: located.workspace.clone(),
        config_file: located.config_file.clone(),
        devcontainer_id: located.devcontainer_id.clone(),
    }
}
