//! One file per subcommand: parse, call the layer below, print. The work is in `session/` (one
//! workspace's stored session) and `bring_up/` (the steps of `up`); commands hold no Docker or
//! nftables details themselves.

pub(crate) mod audit;
pub(crate) mod checkpoint;
pub(crate) mod completions;
pub(crate) mod diff;
pub(crate) mod doctor;
pub(crate) mod down;
pub(crate) mod exec;
pub(crate) mod firewall;
pub(crate) mod init;
pub(crate) mod kube;
pub(crate) mod prepare;
pub(crate) mod replay;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod runs;
pub(crate) mod status;
pub(crate) mod sync;
pub(crate) mod up;

use crate::cli::{Cli, Command};
use crate::engine::Engine;
use crate::error::{Error, Result};
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
            let target = new_session(target)?;
            up::execute(&target, settings, user, json).await
        }
        Command::Run {
            target,
            flags,
            agent,
            detach,
            args,
        } => {
            let (settings, user) = resolve(&flags)?;
            let target = new_session(target)?;
            run::execute(&target, settings, user, agent, args, detach).await
        }
        Command::Ps {
            all,
            sessions: true,
            json,
        } => runs::sessions(all, json).await,
        Command::Ps { all, json, .. } => runs::ps(all, json).await,
        Command::Logs {
            target,
            named,
            run,
            follow,
            raw,
        } => {
            let target = target.with_copy(named.session);
            let workspace = match &run {
                Some(_) => None,
                None => Some(locate(&target)?.workspace),
            };
            let of = workspace.as_deref().map(|w| (w, target.copy.as_deref()));
            runs::logs(run.as_deref(), of, follow, raw).await
        }
        Command::Keep { run } => run::keep(&run).await,
        Command::Exec {
            target,
            named,
            command,
        } => exec::execute(&target.with_copy(named.session), command).await,
        Command::Shell { target, named } => exec::shell(&target.with_copy(named.session)).await,
        Command::Down {
            target,
            all: true,
            remove,
            volumes,
            ..
        } => down::execute_all(&target, remove, volumes).await,
        Command::Down {
            target,
            name,
            remove,
            volumes,
            ..
        } => down::execute(&target.with_copy(name), remove, volumes).await,
        Command::Checkpoint { target, name } => checkpoint::execute(&target.with_copy(name)).await,
        Command::Checkpoints { target, name, json } => {
            checkpoint::list(&target.with_copy(name), json)
        }
        Command::Rollback {
            target,
            checkpoint: spec,
            yes,
        } => checkpoint::rollback(&target, &spec, yes).await,
        Command::Diff { target, name, stat } => diff::execute(&target.with_copy(name), stat).await,
        Command::Sync { target, name } => sync::execute(&target.with_copy(name)).await,
        Command::Status { json } => status::execute(json).await,
        Command::Init {
            target,
            agent,
            force,
        } => {
            no_copy(
                &target,
                "init",
                "it writes the repository's own .devcontainer/",
            )?;
            init::execute(&target, &agent, force)
        }
        Command::Doctor => doctor::execute().await,
        Command::Prepare {
            count,
            remove,
            after,
        } => prepare::execute(count, remove, after).await,
        Command::Kube {
            target,
            flags,
            kube,
        } => {
            no_copy(&target, "kube", "a Pod works on the copy its cluster makes")?;
            kube::refuse_up_only(&flags)?;
            let (settings, user) = resolve(&flags)?;
            kube::execute(&target, settings, user, kube).await
        }
        Command::Audit {
            target,
            kube,
            namespace,
            kube_log,
            session,
            kinds,
            since,
            grep,
            follow,
            json,
            list,
            format,
            action,
        } => {
            match action {
                Some(crate::cli::AuditAction::Verify { session }) => {
                    let (target, session) = log_session(target, session);
                    return audit::verify(&target, session).await;
                }
                Some(crate::cli::AuditAction::Ship { session }) => {
                    return audit::ship(&target, session).await
                }
                None => {}
            }
            let (target, session) = log_session(target, session);
            let filter = crate::audit::filter::Filter {
                kinds,
                since,
                grep,
                live: false,
            };
            if format != crate::audit::export::Format::Text {
                return audit::export(&target, session, &filter, format).await;
            }
            match kube {
                Some(pod) => {
                    let log = kube_log.as_deref();
                    kube::audit(&pod, namespace.as_deref(), log, &filter, json).await
                }
                None => audit::execute(&target, session, filter, follow, json, list).await,
            }
        }
        Command::Replay {
            target,
            session,
            speed,
            raw,
        } => {
            let (target, session) = log_session(target, session);
            replay::execute(&target, session, speed, raw).await
        }
        Command::Report {
            target,
            session,
            output,
        } => {
            let (target, session) = log_session(target, session);
            report::execute(&target, session, output).await
        }
        Command::Allow {
            target,
            named,
            pending: Some(id),
            save,
            ..
        } => firewall::decide(&target.with_copy(named.session), id, true, save).await,
        Command::Allow {
            target,
            named,
            patterns,
            http,
            ..
        } => firewall::allow(&target.with_copy(named.session), patterns, http).await,
        Command::Deny {
            target,
            named,
            pending: Some(id),
            ..
        } => firewall::decide(&target.with_copy(named.session), id, false, None).await,
        Command::Deny {
            target,
            named,
            patterns,
            http,
            ..
        } => firewall::deny(&target.with_copy(named.session), patterns, http).await,
        Command::Approvals {
            target,
            named,
            json,
        } => firewall::approvals(&target.with_copy(named.session), json).await,
        Command::Watch {
            target,
            session,
            once,
        } => {
            target.named_copy()?;
            let (target, session) = log_session(target, session);
            crate::watch::run(&target, session, once).await
        }
        Command::Firewall {
            target,
            json,
            action: None,
        } => firewall::show(&target, json).await,
        Command::Firewall {
            target,
            action:
                Some(crate::cli::FirewallAction::Suggest {
                    session,
                    write,
                    json,
                }),
            ..
        } => {
            let (target, session) = log_session(target, session);
            firewall::suggest(&target, session, write, json).await
        }
        Command::Completions { shell } => completions::execute(shell),
    }
}

/// `--session X` (or `SESSION`) of the commands that read a session's log: a log session's id
/// as before, or a named session's name (`--copy NAME`), whose latest log session it then
/// means. An id wins: a name is taken as one only when no log session has it and the
/// repository has a session of that name (else it stays an id, not found). A log session
/// of a named session brings its name along (its events are copied from its volume, its
/// guard is the one asked), unless the command names one itself.
fn log_session(
    target: crate::cli::Target,
    session: Option<String>,
) -> (crate::cli::Target, Option<String>) {
    match session {
        Some(name)
            if crate::cli::is_copy_name(&name)
                && !crate::audit::session_files(&name)
                    .iter()
                    .any(|p| p.exists())
                && !crate::audit::session_dir(&name).exists()
                && is_session(&target, &name) =>
        {
            (target.with_copy(Some(name)), None)
        }
        Some(id) if target.copy.is_none() => {
            let copy = crate::session::state::WorkspaceState::all_with_ids()
                .into_iter()
                .find(|(_, state)| state.sessions.contains(&id))
                .and_then(|(_, state)| state.copy);
            (target.with_copy(copy), Some(id))
        }
        other => (target, other),
    }
}

/// Whether the repository `target` names has a session `name` (yolo has its state).
fn is_session(target: &crate::cli::Target, name: &str) -> bool {
    locate(&target.clone().with_copy(Some(name.to_string())))
        .is_ok_and(|l| crate::store::workspace_state(&l.devcontainer_id).exists())
}

/// `--copy NAME` on a command that has no named sessions: a usage error saying why.
fn no_copy(target: &crate::cli::Target, command: &str, why: &str) -> Result<()> {
    match &target.copy {
        Some(_) => Err(Error::Usage(format!(
            "`yolo {command}` takes no --copy: {why}"
        ))),
        None => Ok(()),
    }
}

/// A named session that must exist already (`down`, `sync`, `diff`): one yolo has no state
/// of is a typo, said as such, and nothing is made for it.
fn known(located: &Located) -> Result<()> {
    match &located.copy {
        Some(name) if !crate::store::workspace_state(&located.devcontainer_id).exists() => {
            Err(Error::NotFound(format!(
                "{} has no session {name}; `yolo ps --sessions --all` lists the sessions",
                located.workspace.display()
            )))
        }
        _ => Ok(()),
    }
}

/// `--copy` without a name (`up`, `run`): a new session, with a generated name no session of
/// the repository has; said on stderr, since every later command names it.
fn new_session(target: crate::cli::Target) -> Result<crate::cli::Target> {
    if !target.wants_new_copy() {
        return Ok(target);
    }
    for _ in 0..64 {
        let name = crate::cli::generated_name();
        if !is_session(&target, &name) {
            eprintln!(
                "{} new session {name} (its work comes back as the branch yolo/{name}; later commands take --session {name} or --copy {name})",
                console::style("yolo:").bold()
            );
            return Ok(target.with_copy(Some(name)));
        }
    }
    Err(Error::Usage(
        "no free session name was found; give one with --copy NAME".into(),
    ))
}

/// The workspace and config file the `--workspace`/`--config` flags point at.
fn locate(target: &crate::cli::Target) -> Result<Located> {
    Ok(
        Located::find(target.workspace.as_deref(), target.config.as_deref())?
            .named(target.named_copy()?),
    )
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

/// `engine()` begun now, in the background, for a command that reads local files first: the
/// engine's `/version` (several ms) overlaps with that work. Await the result where the engine
/// is first needed; a local error returned before then wins, as it would without this.
pub(crate) fn engine_soon() -> impl std::future::Future<Output = Result<Engine>> {
    let task = tokio::spawn(Engine::connect());
    async move {
        task.await.unwrap_or_else(|e| {
            Err(Error::Failed {
                what: crate::error::Failure::Process,
                cause: crate::error::Cause::of("connecting to Docker", e),
            })
        })
    }
}
