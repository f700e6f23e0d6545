//! Dev Container Features for `up`: fetched on the host before any container is made
//! (`fetch`, with progress on stderr; each one recorded in the session's audit log by
//! `record`), their metadata entries checked by the policy with the image's
//! (`with_metadata`), then installed on top of the base image in a build of their own
//! (`install`), behind the same build firewall as a Dockerfile's RUN steps.

use crate::audit::{EventKind, Writer};
use crate::devcontainer::features::{self, install, Resolved};
use crate::devcontainer::metadata::{Entry, Origin};
use crate::engine::{Engine, FeaturesBuild, NetworkAttach};
use crate::error::Result;
use crate::project::Project;
use std::path::PathBuf;

/// The Features of this `up`, fetched, in install order, and what the audit log records of
/// their fetching.
#[derive(Debug, Clone, Default)]
pub(crate) struct Fetched {
    pub(crate) features: Vec<Resolved>,
    /// One per OCI or tarball Feature (a local one is copied, not fetched).
    pub(crate) fetches: Vec<features::FetchEvent>,
}

impl Fetched {
    pub(crate) fn is_empty(&self) -> bool {
        self.features.is_empty()
    }
}

/// Fetch (or find in the cache) every Feature of the config, in install order; none without
/// `features`. Progress and warnings on stderr; `devcontainer-lock.json` read and written as
/// the reference CLI does.
pub(crate) async fn fetch(project: &Project) -> Result<Fetched> {
    let config = project.config();
    let none = serde_json::Value::Null;
    let request = features::Request {
        config_file: &project.spec.config_file,
        features: config.features.as_ref().unwrap_or(&none),
        override_order: config
            .override_feature_install_order
            .as_deref()
            .unwrap_or_default(),
        cache_dir: &features::default_cache_dir(),
        lock: features::LockMode::default(),
        docker_config: None,
        local: match project.settings.grants.local_features() {
            None => features::LocalSources::Any,
            Some(hosts) if hosts.is_empty() => features::LocalSources::None,
            Some(hosts) => features::LocalSources::Only(hosts),
        },
    };
    let progress = |line: &str| {
        eprintln!(
            "{} {}",
            console::style("yolo:").bold(),
            crate::visible::escape_controls(line)
        )
    };
    let resolution = features::resolve(&request, &progress).await?;
    if let Some(lock) = &resolution.lock_written {
        crate::session::approval::note_own_write(project, lock)?;
    }
    for warning in &resolution.warnings {
        eprintln!(
            "{} {}",
            console::style("warning:").yellow().bold(),
            crate::visible::escape_controls(warning)
        );
    }
    Ok(Fetched {
        features: resolution.features,
        fetches: resolution.fetches,
    })
}

/// Each fetch on the session's record.
/// A local Feature is not fetched but copied from the repository: recorded too (not cached,
/// the size of its files).
pub(crate) fn record(writer: &Writer, fetched: &Fetched) -> Result<()> {
    for f in &fetched.fetches {
        writer.write(EventKind::FeatureFetch {
            reference: f.reference.clone(),
            digest: f.digest.clone(),
            cached: f.from_cache,
            bytes: f.bytes,
        })?;
    }
    for local in fetched
        .features
        .iter()
        .filter(|r| !fetched.fetches.iter().any(|f| f.reference == r.key))
    {
        writer.write(EventKind::FeatureFetch {
            reference: local.key.clone(),
            digest: local.digest.clone(),
            cached: false,
            bytes: size_of(&local.dir),
        })?;
    }
    Ok(())
}

/// The size of the files under `dir`.
fn size_of(dir: &std::path::Path) -> u64 {
    ignore::WalkBuilder::new(dir)
        .standard_filters(false)
        .follow_links(false)
        .build()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

/// The Features' metadata entries, in install order, each named by the user's reference.
pub(crate) fn entries(fetched: &Fetched) -> Vec<(Origin, Entry)> {
    fetched
        .features
        .iter()
        .map(|f| {
            (
                Origin::Feature { id: f.key.clone() },
                install::feature_entry(f),
            )
        })
        .collect()
}

/// `project` evaluated with the metadata of `image` (its label, when the image is there) and
/// then the Features'; `None` when that changes nothing. A request a Feature makes that the
/// user did not grant fails here, naming the Feature, before anything is built.
pub(crate) async fn with_metadata(
    engine: &Engine,
    project: &Project,
    image: &str,
    fetched: &Fetched,
) -> Result<Option<Project>> {
    let mut all = super::metadata::of_image(engine, image).await?;
    all.extend(entries(fetched));
    if all == project.metadata() {
        return Ok(None);
    }
    project.with_metadata(all).map(Some)
}

/// The image with the Features installed on `base`; `base` itself without Features. Built
/// with its RUN steps in `network` only, and only when its inputs changed (`rebuild`: always).
pub(crate) async fn install(
    engine: &Engine,
    project: &Project,
    base: &str,
    fetched: &Fetched,
    network: &NetworkAttach,
    rebuild: bool,
) -> Result<String> {
    if fetched.is_empty() {
        return Ok(base.to_string());
    }
    let prepared = prepare(engine, project, base, fetched).await?;
    let (built, tag) = (
        engine
            .build_features(&prepared.build(project, rebuild), network)
            .await?,
        prepared.tag.clone(),
    );
    if built {
        eprintln!(
            "{} installed {} Feature(s) in {tag}",
            console::style("yolo:").bold(),
            fetched.features.len()
        );
    }
    Ok(tag)
}

/// Whether `install` would build (run the install scripts): the image is missing or was built
/// from other inputs, or `rebuild`.
pub(crate) async fn build_needed(
    engine: &Engine,
    project: &Project,
    base: &str,
    fetched: &Fetched,
    rebuild: bool,
) -> Result<bool> {
    if fetched.is_empty() {
        return Ok(false);
    }
    if rebuild {
        return Ok(true);
    }
    let prepared = prepare(engine, project, base, fetched).await?;
    Ok(!engine
        .features_image_current(&prepared.tag, &prepared.digest)
        .await?)
}

/// The context written under yolo's data folder, and what keys it.
struct Prepared {
    tag: String,
    tar: Vec<u8>,
    digest: String,
    label: String,
    dir: PathBuf,
}

impl Prepared {
    fn build<'a>(&'a self, project: &'a Project, rebuild: bool) -> FeaturesBuild<'a> {
        FeaturesBuild {
            tag: &self.tag,
            tar: self.tar.clone(),
            digest: &self.digest,
            metadata: &self.label,
            devcontainer_id: &project.spec.devcontainer_id,
            context: &self.dir,
            no_cache: rebuild,
            extra_ca: !project.spec.extra_ca.is_empty(),
        }
    }
}

async fn prepare(
    engine: &Engine,
    project: &Project,
    base: &str,
    fetched: &Fetched,
) -> Result<Prepared> {
    let spec = &project.spec;
    let facts = engine.base_facts(base).await?;
    // The build `FROM` the base runs its ONBUILD triggers: an `ADD <url>` there is fetched by
    // the daemon on the host's network, as in a Dockerfile.
    let triggers: String = facts
        .on_build
        .iter()
        .map(|t| format!("ONBUILD {t}\n"))
        .collect();
    crate::policy::check_remote_adds(
        &triggers,
        &format!("the ONBUILD triggers of {base}"),
        &spec.config_file,
        "features",
        &project.settings.grants,
        false,
    )?;
    let users = install::Users::new(
        facts.user.as_deref(),
        spec.container_user.as_deref(),
        spec.remote_user.as_deref(),
    );
    let features = &fetched.features;
    let context = install::context(base, features, &users, project.settings.extra_ca.as_ref())?;
    let dir = crate::store::features_build(&spec.devcontainer_id);
    context.write(&dir, features)?;
    let tar = install::tar_dir(&dir)?;
    let label = install::metadata_label(facts.metadata.as_deref(), features);
    let digest = install::inputs_digest(&facts.id, &tar, &label);
    Ok(Prepared {
        tag: features_tag(&spec.devcontainer_id),
        tar,
        digest,
        label,
        dir,
    })
}

/// `yolo-features-<first 12 of the devcontainer id>:latest`, one per project whatever the base.
fn features_tag(devcontainer_id: &str) -> String {
    let id: String = devcontainer_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .take(12)
        .collect();
    format!("yolo-features-{id}:latest")
}
