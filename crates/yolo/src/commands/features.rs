//! Dev Container Features for `up`: fetched on the host before any container is made
//! (`fetch`, with progress on stderr; each one recorded in the session's audit log by
//! `record`), their metadata entries checked by the policy with the image's
//! (`with_metadata`), then installed on top of the base image in a build of their own
//! (`install`), behind the same build firewall as a Dockerfile's RUN steps.

use crate::audit::{EventKind, Writer};
use crate::devcontainer::features::{install, Resolved};
use crate::devcontainer::metadata::{Entry, Origin};
use crate::engine::{Engine, FeaturesBuild, NetworkAttach};
use crate::error::{Error, Result};
use crate::project::Project;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// One Feature of this `up`, fetched, and what its audit record says.
#[derive(Debug, Clone)]
pub(crate) struct Fetched {
    pub(crate) feature: Resolved,
    /// It was in yolo's cache already.
    pub(crate) cached: bool,
    /// The size of its files.
    pub(crate) bytes: u64,
}

/// Fetch (or find in the cache) every Feature of the config, in install order; none without
/// `features`. Progress on stderr.
pub(crate) async fn fetch(project: &Project) -> Result<Vec<Fetched>> {
    let has_features = project
        .config()
        .features
        .as_ref()
        .and_then(|f| f.as_object())
        .is_some_and(|m| !m.is_empty());
    if !has_features {
        return Ok(Vec::new());
    }
    let started = SystemTime::now();
    eprintln!(
        "{} fetching the Dev Container Features of {}",
        console::style("yolo:").bold(),
        project.spec.config_file.display()
    );
    let resolved = resolve(project).await?;
    let fetched: Vec<Fetched> = resolved
        .into_iter()
        .map(|feature| {
            let (bytes, newest) = size_and_newest(&feature.dir);
            let cached = newest.is_some_and(|t| t < started);
            Fetched {
                feature,
                cached,
                bytes,
            }
        })
        .collect();
    for f in &fetched {
        eprintln!(
            "{} Feature {} {} ({} bytes{})",
            console::style("yolo:").bold(),
            crate::visible::escape_controls(&f.feature.key),
            f.feature.digest,
            f.bytes,
            if f.cached { ", cached" } else { "" }
        );
    }
    Ok(fetched)
}

/// TEMPORARY until branch `features-fetch` is merged: its `features::resolve` replaces this
/// body (local `./folder` Features only here, options from their defaults and the user's
/// values, no `dependsOn`).
async fn resolve(project: &Project) -> Result<Vec<Resolved>> {
    let config_file = &project.spec.config_file;
    let dir = config_file.parent().unwrap_or(Path::new("."));
    let mut out = Vec::new();
    let features = project.config().features.clone().unwrap_or_default();
    for (key, value) in features.as_object().into_iter().flatten() {
        let unsupported = || Error::Config {
            file: config_file.clone(),
            line: None,
            column: None,
            property: Some(format!("features.{key}")),
            message: "only local Features (\"./folder\") are supported in this build".into(),
        };
        let Some(rel) = key.strip_prefix("./") else {
            return Err(unsupported());
        };
        let folder = dir.join(rel);
        let json_path = folder.join("devcontainer-feature.json");
        let text = std::fs::read_to_string(&json_path).map_err(|e| Error::io(&json_path, e))?;
        let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::Config {
            file: json_path.clone(),
            line: None,
            column: None,
            property: None,
            message: e.to_string(),
        })?;
        let mut metadata: Entry = serde_json::from_value(json.clone()).unwrap_or_default();
        metadata.id = Some(key.clone());
        let mut env = std::collections::BTreeMap::new();
        if let Some(options) = json.get("options").and_then(|o| o.as_object()) {
            for (name, spec) in options {
                let value = value
                    .get(name)
                    .or_else(|| spec.get("default"))
                    .cloned()
                    .unwrap_or_default();
                let text = match value {
                    serde_json::Value::String(s) => s,
                    serde_json::Value::Null => continue,
                    other => other.to_string(),
                };
                let id: String = name
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect();
                env.insert(id.to_uppercase(), text);
            }
        }
        let tar = install::tar_dir(&folder)?;
        out.push(Resolved {
            key: key.clone(),
            id: json["id"].as_str().unwrap_or(rel).to_string(),
            version: json["version"].as_str().unwrap_or_default().to_string(),
            dir: folder,
            env,
            metadata,
            digest: install::inputs_digest("", &tar, ""),
        });
    }
    Ok(out)
}

/// Total size of the files under `dir`, and the newest modification time among them.
fn size_and_newest(dir: &Path) -> (u64, Option<SystemTime>) {
    let mut bytes = 0;
    let mut newest: Option<SystemTime> = None;
    for entry in ignore::WalkBuilder::new(dir)
        .standard_filters(false)
        .follow_links(false)
        .build()
        .flatten()
    {
        if let Ok(meta) = entry.metadata() {
            if meta.is_file() {
                bytes += meta.len();
            }
            if let Ok(t) = meta.modified() {
                newest = Some(newest.map_or(t, |n| n.max(t)));
            }
        }
    }
    (bytes, newest)
}

/// Each fetch on the session's record.
pub(crate) fn record(writer: &Writer, fetched: &[Fetched]) -> Result<()> {
    for f in fetched {
        writer.write(EventKind::FeatureFetch {
            reference: f.feature.key.clone(),
            digest: f.feature.digest.clone(),
            cached: f.cached,
            bytes: f.bytes,
        })?;
    }
    Ok(())
}

/// The Features' metadata entries, in install order, each named by the user's reference.
pub(crate) fn entries(fetched: &[Fetched]) -> Vec<(Origin, Entry)> {
    fetched
        .iter()
        .map(|f| {
            let mut entry = f.feature.metadata.clone();
            entry.id = Some(f.feature.key.clone());
            (
                Origin::Feature {
                    id: f.feature.key.clone(),
                },
                entry,
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
    fetched: &[Fetched],
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
    fetched: &[Fetched],
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
            fetched.len()
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
    fetched: &[Fetched],
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
        }
    }
}

async fn prepare(
    engine: &Engine,
    project: &Project,
    base: &str,
    fetched: &[Fetched],
) -> Result<Prepared> {
    let spec = &project.spec;
    let facts = engine.base_facts(base).await?;
    let users = install::Users::new(
        facts.user.as_deref(),
        spec.container_user.as_deref(),
        spec.remote_user.as_deref(),
    );
    let features: Vec<Resolved> = fetched.iter().map(|f| f.feature.clone()).collect();
    let context = install::context(base, &features, &users);
    let dir = crate::user_config::data_dir()
        .join("features-build")
        .join(&spec.devcontainer_id);
    context.write(&dir, &features)?;
    let tar = install::tar_dir(&dir)?;
    let label = install::metadata_label(facts.metadata.as_deref(), &features);
    let digest = install::inputs_digest(&facts.id, &tar, &label);
    Ok(Prepared {
        tag: features_tag(base, &spec.devcontainer_id),
        tar,
        digest,
        label,
        dir,
    })
}

/// `yolo-features-<first 12 of the devcontainer id>:latest`, one per project whatever the base.
fn features_tag(_base: &str, devcontainer_id: &str) -> String {
    let id: String = devcontainer_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .take(12)
        .collect();
    format!("yolo-features-{id}:latest")
}
