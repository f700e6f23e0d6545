//! `yolo prepare [N]`: spare network namespaces made ahead (`engine::spares`), so the next
//! guards join one instead of being attached to the bridge while `up` waits. `up` keeps
//! `[firewall] spares` of them (default 1) in the background after each guard it makes;
//! `yolo prepare 20` before starting twenty sessions at once; `--remove` takes them away.

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::settings::GuardSettings;
use crate::user_config::UserConfig;

/// How long a background top-up waits for the `up` that started it to end before it goes on
/// anyway (a `yolo run` outlives its start by the agent's whole run).
const AFTER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

pub(crate) async fn execute(count: Option<u32>, remove: bool, after: Option<u32>) -> Result<i32> {
    let background = after.is_some();
    // A background top-up takes its lock before anything else, while the `up` that started
    // it still runs: a `down --remove` right after that `up` then waits for it, and removes
    // what it made (`session::teardown`).
    let early = match background {
        true => match crate::lock::try_spare_making()? {
            Some(lock) => Some(lock),
            None => return Ok(0),
        },
        false => None,
    };
    let guard = GuardSettings::resolve(&UserConfig::load()?)?;
    let want = count.unwrap_or(guard.spares);
    let max = crate::engine::spares::MAX_SPARES;
    if want > max {
        return Err(Error::Usage(format!(
            "{want} spares is more than {max}; each is a container kept running"
        )));
    }
    if let Some(reason) = crate::engine::remote::remote_reason()? {
        if background {
            return Ok(0);
        }
        return Err(Error::Usage(format!(
            "spares are made on this machine's engine only, and {reason}; a remote engine's guards are attached as they start"
        )));
    }
    let engine = crate::commands::engine().await?;
    if engine.is_podman() {
        if background {
            return Ok(0);
        }
        return Err(Error::Usage(
            "Podman gives every project's guard a network of its own, so it takes no spares".into(),
        ));
    }
    if remove {
        // On every network: those of a `docker_network` set before too. A claim racing this
        // finds its spare's name gone and takes another, or none.
        let removed = engine.remove_spares().await?;
        eprintln!(
            "{} removed {removed} spare network namespace{}",
            console::style("yolo:").bold(),
            if removed == 1 { "" } else { "s" }
        );
        return Ok(0);
    }
    // Where the guards go: the network they share, or the one the user's config names (made
    // by the first `up`, with the project's labels; a spare does not make it).
    let network = match &guard.docker_network {
        None => {
            let network = crate::bring_up::network::shared_network();
            engine.ensure_shared_network(&network).await?;
            network
        }
        Some(named) => {
            if !engine.network_exists(named).await? {
                if background {
                    return Ok(0);
                }
                return Err(Error::Usage(format!(
                    "the network {named} of your yolo config ([firewall] docker_network) is not there yet; the first `yolo up` makes it"
                )));
            }
            named.clone()
        }
    };
    // One top-up at a time. A background one gives way to another; asked for, this one
    // waits its turn and then makes what is still missing.
    let _making = match early {
        Some(lock) => lock,
        None => loop {
            match crate::lock::try_spare_making()? {
                Some(lock) => break lock,
                None => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            }
        },
    };
    if let Some(pid) = after {
        wait_for_exit(pid).await;
        // An `up` that failed (and undid what it made), or a session already taken down:
        // nothing left for a spare to serve, and nothing is left behind.
        if !engine.sessions_left().await? {
            return Ok(0);
        }
    }
    top_up(&engine, &guard, &network, want, background).await
}

/// Make spares until `want` are ready; said unless `quiet`.
async fn top_up(
    engine: &Engine,
    guard: &GuardSettings,
    network: &str,
    want: u32,
    quiet: bool,
) -> Result<i32> {
    let ready = engine.spares(network).await?.len() as u32;
    let missing = want.saturating_sub(ready);
    if missing > 0 {
        let image = engine
            .ensure_guard_image(&guard.base_image, guard.image.as_deref())
            .await?;
        // Two at a time: each is a container start, and this machine may be starting sessions.
        let mut made = 0;
        while made < missing {
            let batch = (missing - made).min(2);
            let starts = (0..batch).map(|_| engine.make_spare(&image, network));
            for result in futures_util::future::join_all(starts).await {
                result?;
            }
            made += batch;
        }
        // The record of the spares made, kept to those still there (claimed ones included).
        crate::engine::spares::prune_made(&engine.labelled_spares().await?);
    }
    if !quiet {
        eprintln!(
            "{} {} spare network namespace{} ready on {network} (made {missing})",
            console::style("yolo:").bold(),
            ready + missing,
            if ready + missing == 1 { "" } else { "s" }
        );
    }
    Ok(0)
}

/// Until process `pid` has ended, at most `AFTER_WAIT`.
async fn wait_for_exit(pid: u32) {
    let until = std::time::Instant::now() + AFTER_WAIT;
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && std::time::Instant::now() < until
    {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Start a background top-up that waits for this process to end first (`up` calls it after
/// making a guard that could have taken a spare). Detached: no terminal, no output, its own
/// process group, so a Ctrl-C of `up` and a test's wait for `up`'s output do not reach it.
/// Not started when `[firewall] spares` is 0. A failure to start it only costs the next `up`
/// its spare.
pub(crate) fn spawn_top_up(spares: u32) {
    if spares == 0 {
        return;
    }
    use std::os::unix::process::CommandExt;
    let Ok(me) = std::env::current_exe() else {
        return;
    };
    let _ = std::process::Command::new(me)
        .args(["prepare", "--after", &std::process::id().to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .current_dir("/")
        .process_group(0)
        .spawn();
}
