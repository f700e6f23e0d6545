//! Labels: the keys, and the one place that builds the label set of every object yolo creates.
//! `devcontainer.*` are the reference CLI's, so VS Code and `devcontainer exec` find yolo's
//! container; `dev.yolo.*` are yolo's own. Every set ends with `YOLO_LABELS` (tests clean up by
//! it).

use super::types::{Owner, Role};
use crate::firewall::NetworkMode;
use crate::run_spec::{BuildSpec, RunSpec};
use std::collections::BTreeMap;

pub(super) const LOCAL_FOLDER: &str = "devcontainer.local_folder";
pub(super) const CONFIG_FILE: &str = "devcontainer.config_file";
/// The label the reference CLI (and VS Code) reads the image's metadata from.
pub(super) const METADATA: &str = crate::devcontainer::metadata::LABEL;
pub(super) const MANAGED: &str = "dev.yolo.managed";
pub(super) const ID: &str = "dev.yolo.id";
/// On the network the guards of all projects share.
pub(super) const SHARED: &str = "dev.yolo.shared";
pub(super) const CONFIG_HASH: &str = "dev.yolo.config-hash";
/// The network mode the agent container was made for: firewall, open, none.
pub(super) const NETWORK: &str = "dev.yolo.network";
/// `agent` for the project container, `guard` for the firewall guard.
pub(super) const ROLE: &str = "dev.yolo.role";
/// Hash of the build inputs yolo can see cheaply (BuildSpec + Dockerfile), on built images.
pub(super) const BUILD_HASH: &str = "dev.yolo.build-hash";
/// Digest of the inputs of an image with Features (`devcontainer::features::install`).
pub(super) const FEATURES_HASH: &str = "dev.yolo.features-hash";
/// The base image a guard image was built from.
pub(super) const GUARD_BASE: &str = "dev.yolo.guard-base";
/// `shim` on an agent container whose commands start through the exec audit's shim.
pub(super) const EXEC_AUDIT: &str = "dev.yolo.exec-audit";
/// On the agent of a named session (`--copy NAME`): its name (`yolo down --all` finds it).
pub(super) const COPY: &str = "dev.yolo.copy";
/// On the agent of a named session: the repository and config it is a session of, in place of
/// the `devcontainer.*` pair, which it does not carry (VS Code and the reference CLI must find
/// the workspace session's container for the folder, never a copy's).
pub(super) const COPY_OF: &str = "dev.yolo.copy-of";
pub(super) const COPY_CONFIG: &str = "dev.yolo.copy-config";
/// On the dev service of a Compose project: its `shutdownAction` (`yolo down` reads it).
pub(crate) const COMPOSE_SHUTDOWN: &str = "dev.yolo.shutdown-action";
/// On a spare network namespace (`engine::spares`): the network it is on.
pub(super) const SPARE: &str = "dev.yolo.spare";
/// Extra labels for every object yolo creates, `k=v[,k=v]` (tests use it to clean up).
const EXTRA_LABELS_ENV: &str = "YOLO_LABELS";

type Labels = BTreeMap<String, String>;

/// The agent container: the repository's safe `--label`s (from policy), then the project set
/// (`devcontainer.*`, so VS Code finds it; yolo's own), the config hash it was made from, its
/// role and the network mode it is made for. yolo's keys win over the repository's.
pub(super) fn agent(spec: &RunSpec, mode: NetworkMode) -> Labels {
    let owner = Owner::of(spec);
    let mut labels = spec.labels.clone();
    labels.extend(project(&owner));
    let (folder, config) = (
        owner.workspace.display().to_string(),
        owner.config_file.display().to_string(),
    );
    match &spec.copy {
        None => {
            labels.insert(LOCAL_FOLDER.into(), folder);
            labels.insert(CONFIG_FILE.into(), config);
        }
        Some(_) => {
            labels.insert(LOCAL_FOLDER.into(), String::new());
            labels.insert(CONFIG_FILE.into(), String::new());
            labels.insert(COPY_OF.into(), folder);
            labels.insert(COPY_CONFIG.into(), config);
        }
    }
    // The merged metadata, as the reference CLI labels its containers: what VS Code's attach
    // reads for the user, the folder, the environment and its own settings.
    if !spec.metadata_label.is_empty() {
        labels.insert(METADATA.into(), spec.metadata_label.clone());
    }
    labels.insert(CONFIG_HASH.into(), spec.config_hash.clone());
    labels.insert(ROLE.into(), Role::Agent.label().into());
    // Always yolo's value (the image's label is the repository's): empty for the workspace
    // session.
    labels.insert(COPY.into(), spec.copy.clone().unwrap_or_default());
    // A container inherits its image's labels, and the image is the repository's: yolo's keys
    // get a value of yolo's even when off (the caller sets "shim" when the audit is on).
    labels.insert(EXEC_AUDIT.into(), "off".into());
    labels.insert(NETWORK.into(), mode_name(mode).into());
    with_extra(labels)
}

/// The project's network, and the base of its agent's and guard's labels: yolo's own only.
/// The `devcontainer.*` pair goes on the agent alone: VS Code and the reference CLI look a
/// folder's container up by it, and must never pick the guard (NET_ADMIN) to run the
/// repository's hooks in.
pub(super) fn project(owner: &Owner) -> Labels {
    with_extra(BTreeMap::from([
        (MANAGED.to_string(), "true".to_string()),
        (ID.to_string(), owner.devcontainer_id.clone()),
    ]))
}

/// The network every project's guard shares (`Engine::ensure_shared_network`): yolo's, but no
/// project's, so no `down --remove` takes it away; `dev.yolo.shared` tells it from a project's.
pub(super) fn shared_network() -> Labels {
    with_extra(BTreeMap::from([
        (MANAGED.to_string(), "true".to_string()),
        (SHARED.to_string(), "true".to_string()),
    ]))
}

/// A spare network namespace on `network`: yolo's, no project's and no role (nothing that
/// lists a project's containers sees it).
pub(super) fn spare(network: &str) -> Labels {
    with_extra(BTreeMap::from([
        (MANAGED.to_string(), "true".to_string()),
        (SPARE.to_string(), network.to_string()),
    ]))
}

/// The label filters of every spare, claimed or not, on any network (of this `YOLO_LABELS`).
pub(super) fn any_spare() -> Vec<String> {
    let mut filters = vec![SPARE.to_string()];
    filters.extend(extra().into_iter().map(|(k, v)| format!("{k}={v}")));
    filters
}

/// The label filter of the spares on `network`.
pub(super) fn spare_filter(network: &str) -> String {
    format!("{SPARE}={network}")
}

/// A short digest of `YOLO_LABELS` (empty without): the shared network of a labelled run
/// (a test's, a benchmark's) is its own, so its clean-up by label removes it and nobody
/// else's.
pub(crate) fn extra_digest() -> String {
    let extra = extra();
    if extra.is_empty() {
        return String::new();
    }
    let text: Vec<String> = extra.iter().map(|(k, v)| format!("{k}={v}")).collect();
    use sha2::{Digest as _, Sha256};
    hex::encode(Sha256::digest(text.join(",").as_bytes()))[..8].to_string()
}

/// A Compose service other than the dev service. Its image is the repository's and a container
/// inherits its image's labels: the keys by which VS Code's attach finds the folder's dev
/// container and yolo tells how to exec are set empty (a container's label replaces its
/// image's), so no sibling passes for the dev container.
pub(super) fn service(owner: &Owner) -> Labels {
    let mut labels = project(owner);
    labels.insert(ROLE.into(), Role::Service.label().into());
    for key in [LOCAL_FOLDER, CONFIG_FILE, EXEC_AUDIT] {
        labels.insert(key.into(), String::new());
    }
    with_extra(labels)
}

pub(super) fn guard(owner: &Owner) -> Labels {
    let mut labels = project(owner);
    labels.insert(ROLE.into(), Role::Guard.label().into());
    with_extra(labels)
}

/// A named volume of the project, created before the container so it carries these.
pub(super) fn volume(devcontainer_id: &str) -> Labels {
    with_extra(BTreeMap::from([
        (MANAGED.to_string(), "true".to_string()),
        (ID.to_string(), devcontainer_id.to_string()),
    ]))
}

/// An image built from the project's Dockerfile: the repository's `--label`s, then yolo's.
pub(super) fn built_image(build: &BuildSpec, hash: &str, devcontainer_id: &str) -> Labels {
    let mut labels = build.labels.clone();
    labels.extend(volume(devcontainer_id));
    labels.insert(BUILD_HASH.into(), hash.to_string());
    with_extra(labels)
}

/// An image with Features: yolo's, the inputs digest, and the merged `devcontainer.metadata`.
pub(super) fn features_image(devcontainer_id: &str, digest: &str, metadata: &str) -> Labels {
    let mut labels = volume(devcontainer_id);
    labels.insert(FEATURES_HASH.into(), digest.to_string());
    labels.insert(METADATA.into(), metadata.to_string());
    with_extra(labels)
}

pub(super) fn guard_image(base: &str) -> Labels {
    with_extra(BTreeMap::from([
        (GUARD_BASE.to_string(), base.to_string()),
        (MANAGED.to_string(), "true".to_string()),
    ]))
}

/// The labels of [`guard_image`] whatever the base: what an older guard image of this yolo
/// (and these `YOLO_LABELS`) carries too.
pub(super) fn guard_image_marks() -> Labels {
    let mut labels = guard_image("");
    labels.remove(GUARD_BASE);
    labels
}

/// Label filters for the containers of `owner` (agent and guard): the devcontainerId, which
/// the workspace and config paths determine, on yolo's own objects only.
pub(super) fn owned_by(owner: &Owner) -> Vec<String> {
    vec![
        format!("{MANAGED}=true"),
        format!("{ID}={}", owner.devcontainer_id),
    ]
}

pub(super) fn managed() -> Vec<String> {
    vec![format!("{MANAGED}=true")]
}

/// [`managed`], of this `YOLO_LABELS` only (a test's, a benchmark's own objects).
pub(super) fn managed_here() -> Vec<String> {
    let mut filters = managed();
    filters.extend(extra().into_iter().map(|(k, v)| format!("{k}={v}")));
    filters
}

/// The `dev.yolo.network` value of a mode.
fn mode_name(mode: NetworkMode) -> &'static str {
    crate::firewall::mode_name(mode)
}

/// A `dev.yolo.network` value back to its mode.
pub(super) fn network_mode(text: &str) -> Option<NetworkMode> {
    [
        NetworkMode::Firewall,
        NetworkMode::Open,
        NetworkMode::None,
        NetworkMode::Learn,
    ]
    .into_iter()
    .find(|m| mode_name(*m) == text)
}

fn with_extra(mut labels: Labels) -> Labels {
    labels.extend(extra());
    labels
}

/// Labels from `YOLO_LABELS`.
fn extra() -> Vec<(String, String)> {
    std::env::var(EXTRA_LABELS_ENV)
        .unwrap_or_default()
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn owner() -> Owner {
        Owner {
            workspace: PathBuf::from("/home/me/repo"),
            config_file: PathBuf::from("/home/me/repo/.devcontainer/devcontainer.json"),
            devcontainer_id: "0abc".into(),
        }
    }

    #[test]
    fn the_guard_carries_the_project_set_and_its_role() {
        let guard = guard(&owner());
        for (key, value) in [(MANAGED, "true"), (ID, "0abc"), (ROLE, "guard")] {
            assert_eq!(guard.get(key).map(String::as_str), Some(value), "{key}");
        }
        assert!(
            !guard.keys().any(|k| k.starts_with("devcontainer.")),
            "VS Code must never take the guard for the folder's container: {guard:?}"
        );
        let filters = owned_by(&owner());
        assert!(filters.iter().all(|f| {
            let (k, v) = f.split_once('=').unwrap();
            guard.get(k).map(String::as_str) == Some(v)
        }));
    }

    #[test]
    fn network_modes_read_back_from_their_label() {
        for mode in [
            NetworkMode::Firewall,
            NetworkMode::Open,
            NetworkMode::None,
            NetworkMode::Learn,
        ] {
            assert_eq!(network_mode(mode_name(mode)), Some(mode));
        }
        assert_eq!(network_mode("bridge"), None);
    }
}
