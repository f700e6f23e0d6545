//! Spare network namespaces: containers made ahead on the network all guards share, each
//! running `yolo-guard hold` and nothing else, that a new session's guard joins
//! (`--network container:<spare>`) instead of being attached to the bridge itself.
//!
//! Why: attaching a container to a user-defined bridge is the slowest part of a container's
//! start (a veth pair, its address, Docker's embedded DNS and its rules in the namespace),
//! and a cold `up` pays it once, for the guard, before the agent may start (the agent joins the
//! guard's namespace). Joining a namespace that is already there costs a third of it
//! (docs/performance.md). So the attach is done ahead, when nothing waits for it.
//!
//! A spare is no session's: no capabilities, no mounts, no process but `hold`, labelled
//! `dev.yolo.spare=<network>` (and with `YOLO_LABELS`) but with no role, so nothing that lists a
//! project's containers sees it. Its id is recorded in the data folder when it is made: a
//! container that only carries the label and a spare's name (an image's labels are its
//! author's) is never taken for one. A guard claims one by renaming it, under a lock, to
//! `<guard name>-netns`: from then on it is that session's, found by that name, stopped by
//! `down`, started again before its guard and removed with it (`session::teardown`,
//! `bring_up::act`). Until its guard starts in it, nothing but `hold` is in the namespace, which
//! has no rules; the guard's ruleset is in place before the agent joins, as with a guard on the
//! bridge itself.

use super::guard_image::GUARD_BINARY;
use super::hardening::{hardened_host_config, Hardening};
use super::labels;
use super::types::NetworkAttach;
use super::{is_not_found, is_not_modified, message, Engine};
use crate::error::{Error, Result};
use crate::run_spec::Limits;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{
    InspectContainerOptions, RenameContainerOptions, StartContainerOptions,
};

/// A spare's limits: one sleeping process.
const SPARE_LIMITS: Limits = Limits {
    cpus: 0.1,
    memory_bytes: 16 * 1024 * 1024,
    pids: 4,
};

/// How long a claim waits for a spare that is being started when none is ready: about one
/// attach to the bridge, which is what it would cost without.
const COMING_WAIT: std::time::Duration = std::time::Duration::from_millis(300);

/// Spares kept by a user who asks for more than this are refused: each is a container.
pub(crate) const MAX_SPARES: u32 = 64;

/// The name of the network namespace holder a guard named `guard` has claimed.
pub(crate) fn holder_name(guard: &str) -> String {
    format!("{guard}-netns")
}

impl Engine {
    /// Make and start one spare on `network` from the guard image `image`; its id.
    pub(crate) async fn make_spare(&self, image: &str, network: &str) -> Result<String> {
        let name = format!("{SPARE_PREFIX}{}", random_suffix());
        let hardening = Hardening {
            cap_add: vec![],
            security_opt: vec![],
            limits: SPARE_LIMITS,
            init: false,
            network: NetworkAttach::Network(network.to_string()),
            ports: vec![],
        };
        let body = ContainerCreateBody {
            image: Some(image.to_string()),
            cmd: Some(vec![GUARD_BINARY.into(), "hold".into()]),
            entrypoint: Some(vec![]),
            labels: Some(labels::spare(network).into_iter().collect()),
            host_config: Some(bollard::models::HostConfig {
                readonly_rootfs: Some(true),
                ..hardened_host_config(&hardening)
            }),
            ..Default::default()
        };
        let id = self
            .create(&name, None, body)
            .await
            .map_err(|e| Error::docker(format!("creating the spare {name}"), e))?;
        // Recorded before it runs: only a spare this user's yolo made is ever claimed, never a
        // container that merely carries the label and the name (an image's labels are its
        // author's, and a repository names its Compose services).
        if let Err(e) = record_made(&id) {
            let _ = self.remove(&id).await;
            return Err(e);
        }
        if let Err(e) = self.start(&id).await {
            let _ = self.remove(&id).await;
            return Err(e);
        }
        Ok(id)
    }

    /// The running spares on `network` not yet claimed (their names); exited ones are removed
    /// on the way (a spare stops only when something stopped it, and is then of no use), those
    /// being made are left alone (unless made so long ago that their making was cut off).
    pub(crate) async fn spares(&self, network: &str) -> Result<Vec<String>> {
        Ok(self.spares_and_coming(network).await?.0)
    }

    /// [`Engine::spares`], and how many more are being started now.
    async fn spares_and_coming(&self, network: &str) -> Result<(Vec<String>, usize)> {
        let made = made_ids();
        let mut ready = Vec::new();
        let mut coming = 0;
        let now = chrono::Utc::now().timestamp();
        for c in self.unclaimed(vec![labels::spare_filter(network)]).await? {
            if !made.contains(&c.id) {
                continue;
            }
            match c.state.as_str() {
                "running" => ready.push(c.name),
                "created" | "restarting" if now - c.created < STARTING_AT_MOST => coming += 1,
                _ => {
                    let _ = self.remove(&c.id).await;
                }
            }
        }
        Ok((ready, coming))
    }

    /// The containers that look like unclaimed spares under `filters` (a spare's label and
    /// name, any state): only a candidate until its id is found among those made
    /// ([`made_ids`]).
    async fn unclaimed(&self, filters: Vec<String>) -> Result<Vec<Listed>> {
        Ok(self
            .list_labelled(filters)
            .await?
            .into_iter()
            .filter_map(|c| {
                let name = c
                    .names
                    .iter()
                    .flatten()
                    .map(|n| n.trim_start_matches('/'))
                    .find(|n| n.starts_with(SPARE_PREFIX))?
                    .to_string();
                Some(Listed {
                    id: c.id?,
                    name,
                    state: c.state.map(|s| s.to_string()).unwrap_or_default(),
                    created: c.created.unwrap_or_default(),
                })
            })
            .collect())
    }

    /// Remove every unclaimed spare this user's yolo made, on any network, in any state; how
    /// many (`yolo prepare --remove`).
    pub(crate) async fn remove_spares(&self) -> Result<usize> {
        let made = made_ids();
        let mut removed = 0;
        for c in self.unclaimed(labels::any_spare()).await? {
            // By its name as a spare: one a claim renamed meanwhile is a session's now.
            if made.contains(&c.id) {
                self.remove(&c.name).await?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Claim a spare on `network` for the guard named `guard`: renamed to its holder's name,
    /// under this user's lock of spares (two `up`s never claim the same one; two users' yolos are
    /// told apart by the rename, by the spare's own name). Its id, or
    /// None when there is none. A holder of that name left by an earlier start (a killed
    /// `up`) is removed first: its guard is about to be made anew.
    pub(crate) async fn claim_spare(&self, network: &str, guard: &str) -> Result<Option<String>> {
        let _lock = crate::lock::acquire_spare_claim(network).await?;
        // One being started (a top-up right after the last `up`) is most of the way there: a
        // wait for it costs less than the attach it saves, up to a point.
        let until = std::time::Instant::now() + COMING_WAIT;
        let ready = loop {
            let (ready, coming) = self.spares_and_coming(network).await?;
            if !ready.is_empty() || coming == 0 || std::time::Instant::now() >= until {
                break ready;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        if ready.is_empty() {
            return Ok(None);
        }
        let holder = holder_name(guard);
        self.remove_holder(&holder).await?;
        for spare in ready {
            let options = RenameContainerOptions {
                name: holder.clone(),
            };
            // By its name as a spare: of two yolos that list it at once (two users, whose
            // locks are their own), the second finds that name gone and takes the next.
            match self.docker.rename_container(&spare, options).await {
                Ok(()) => {}
                Err(e) if is_not_found(&e) => continue,
                Err(e) => {
                    return Err(Error::docker(
                        format!("claiming the spare {spare}"),
                        message(&e),
                    ))
                }
            }
            let info = self
                .docker
                .inspect_container(&holder, None::<InspectContainerOptions>)
                .await
                .map_err(|e| Error::docker(format!("inspecting {holder}"), message(&e)))?;
            return Ok(info.id);
        }
        Ok(None)
    }

    /// Whether any session's container (an agent, a guard, a Compose service) is left on this
    /// engine, of this `YOLO_LABELS`: with none, the spares serve nobody yet.
    pub(crate) async fn sessions_left(&self) -> Result<bool> {
        let list = self.list_labelled(labels::managed_here()).await?;
        Ok(list.iter().any(|c| {
            c.labels
                .as_ref()
                .is_some_and(|l| l.contains_key(labels::ROLE))
        }))
    }

    /// The ids of every container with a spare's label, claimed or not, in any state.
    pub(crate) async fn labelled_spares(&self) -> Result<std::collections::HashSet<String>> {
        let list = self.list_labelled(labels::any_spare()).await?;
        Ok(list.into_iter().filter_map(|c| c.id).collect())
    }

    /// How many spares are ready, on any network, none claimed yet (`yolo status`).
    pub(crate) async fn spares_anywhere(&self) -> Result<usize> {
        let made = made_ids();
        Ok(self
            .unclaimed(labels::any_spare())
            .await?
            .iter()
            .filter(|c| made.contains(&c.id))
            .count())
    }

    /// Whether the network `name` is there.
    pub(crate) async fn network_exists(&self, name: &str) -> Result<bool> {
        match self
            .docker
            .inspect_network(
                name,
                None::<bollard::query_parameters::InspectNetworkOptions>,
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(Error::docker(
                format!("inspecting network {name}"),
                message(&e),
            )),
        }
    }

    /// Whether container `name` is a network namespace holder (a spare, claimed or not):
    /// yolo touches no other container by a holder's name.
    async fn is_holder(&self, name: &str) -> Result<bool> {
        match self
            .docker
            .inspect_container(name, None::<InspectContainerOptions>)
            .await
        {
            Ok(info) => Ok(info
                .config
                .and_then(|c| c.labels)
                .is_some_and(|l| l.contains_key(labels::SPARE))
                && info.id.is_some_and(|id| made_ids().contains(&id))),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(Error::docker(
                format!("inspecting container {name}"),
                message(&e),
            )),
        }
    }

    /// Remove the holder named `name`, if there is one.
    pub(crate) async fn remove_holder(&self, name: &str) -> Result<bool> {
        if !self.is_holder(name).await? {
            return Ok(false);
        }
        self.remove(name).await?;
        Ok(true)
    }

    /// Stop the holder named `name`, if there is one (after its guard).
    pub(crate) async fn stop_holder(&self, name: &str) -> Result<()> {
        if self.is_holder(name).await? {
            self.stop(name).await?;
        }
        Ok(())
    }

    /// Start the holder named `name` if there is one and it is stopped (before its guard, which
    /// cannot start outside it). Already running or none: nothing to do.
    pub(crate) async fn start_holder(&self, name: &str) -> Result<()> {
        if !self.is_holder(name).await? {
            return Ok(());
        }
        match self
            .docker
            .start_container(name, None::<StartContainerOptions>)
            .await
        {
            Ok(()) => Ok(()),
            // Gone, or running already.
            Err(e) if is_not_found(&e) || is_not_modified(&e) => Ok(()),
            Err(e) => Err(Error::docker(
                format!("starting the network namespace {name}"),
                message(&e),
            )),
        }
    }
}

/// A container listed as a spare candidate.
struct Listed {
    id: String,
    name: String,
    state: String,
    /// Seconds since the epoch.
    created: i64,
}

/// The name every unclaimed spare starts with.
const SPARE_PREFIX: &str = "yolo-spare-";

/// A spare still being started after this many seconds is taken for one whose making was cut
/// off, and removed.
const STARTING_AT_MOST: i64 = 20;

/// Where this user's yolo records the ids of the spares it made: the only ones it claims,
/// stops, starts or removes.
fn made_file() -> std::path::PathBuf {
    crate::store::root().join("spares").join("made")
}

fn record_made(id: &str) -> Result<()> {
    use std::io::Write;
    let path = made_file();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(format!("{id}\n").as_bytes()))
        .map_err(|e| Error::io(&path, e))
}

/// The ids in [`made_file`] (none when it cannot be read).
fn made_ids() -> std::collections::HashSet<String> {
    std::fs::read_to_string(made_file())
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// [`made_file`] kept to the ids of `present` (the spare-labelled containers there now), so it
/// does not grow with every spare ever made. Called by a top-up, which holds the making lock.
pub(crate) fn prune_made(present: &std::collections::HashSet<String>) {
    let kept: Vec<String> = made_ids()
        .into_iter()
        .filter(|id| present.contains(id))
        .collect();
    let text: String = kept.iter().map(|id| format!("{id}\n")).collect();
    let path = made_file();
    let tmp = path.with_extension("tmp");
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, &path);
    }
}

fn random_suffix() -> String {
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes.copy_from_slice(&nanos.to_le_bytes()[..6]);
    });
    hex::encode(bytes)
}
