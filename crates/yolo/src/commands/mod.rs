//! One file per subcommand. Commands compose config, policy, engine, firewall and audit; they
//! hold no Docker or nftables details themselves.

pub mod approval;
pub mod audit;
pub mod completions;
pub mod doctor;
pub mod down;
pub mod exec;
pub mod firewall;
pub mod hooks;
pub mod init;
pub mod network;
pub mod output;
pub mod run;
pub mod session;
pub mod status;
pub mod up;

use crate::cli::{Cli, Command};
use crate::engine::{Engine, Owner};
use crate::error::Result;
use crate::project::Located;
use crate::settings::UpSettings;
use crate::user_config::UserConfig;

/// Run a parsed command line; returns the process exit code.
pub async fn execute(cli: Cli) -> Result<i32> {
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
            follow,
            json,
            list,
        } => audit::execute(&target, session, kinds, follow, json, list).await,
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
