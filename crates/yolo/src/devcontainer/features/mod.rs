//! Dev Container Features: find each one the config names (a local folder under
//! `.devcontainer/`, an OCI reference, an HTTPS tarball), fetch it on the host into yolo's
//! cache, order them (`dependsOn`, `installsAfter`, `overrideFeatureInstallOrder`), turn their
//! options into environment variables, and read/write `devcontainer-lock.json`.
//!
//! The result, `Resolved` in install order, is what the image build layers on top of the base
//! image (one `RUN` per Feature, behind the build firewall) and what the policy checks (each
//! Feature's `metadata` entry: privileged, capAdd, mounts... are requests like any other).

//!
//! Entry point: [`resolve`]. Files: `reference` (what a key names), `local` (a folder under
//! `.devcontainer/`), `oci` (the distribution API, credentials), `tarball` (a `.tgz` URL),
//! `cache` (content-addressed, under yolo's data dir), `options` (`devcontainer-feature.json`,
//! options to environment), `order` (the reference CLI's rounds), `lock`
//! (`devcontainer-lock.json`).

mod cache;
pub(crate) mod install;
mod local;
pub(crate) mod lock;
mod oci;
mod options;
mod order;
mod reference;
mod tarball;
#[cfg(test)]
mod tests;

pub(crate) use lock::LockMode;

use super::metadata::Entry;
use crate::error::{Dependency, Error, Result};
use options::FeatureJson;
use order::{Ident, Node, SourceId};
use reference::Source;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};

/// One Feature, fetched and ready to install.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Resolved {
    /// As the user wrote it in `features` (`ghcr.io/devcontainers/features/node:1`,
    /// `./local-feature`, `https://example.com/f.tgz`), or as a dependency named it.
    pub(crate) key: String,
    /// The `id` of its `devcontainer-feature.json`.
    pub(crate) id: String,
    /// `version` of its `devcontainer-feature.json` (empty when it has none).
    pub(crate) version: String,
    /// The extracted folder: `install.sh`, `devcontainer-feature.json` and the rest. In yolo's
    /// cache (or, for a local Feature, a copy of it), never the repository's files themselves.
    pub(crate) dir: PathBuf,
    /// The options as environment variables for `install.sh` (spec name normalization,
    /// defaults filled in), in a stable order.
    pub(crate) env: BTreeMap<String, String>,
    /// The Feature's contribution to the container (its `containerEnv`, `mounts`, `capAdd`,
    /// `privileged`, `init`, `securityOpt`, `entrypoint`, hooks, `customizations`), with
    /// `id` set to `key`.
    pub(crate) metadata: Entry,
    /// `sha256:...` of the content, what the lock file calls `integrity`: the manifest's digest
    /// (OCI), the tarball's sha256, or for a local Feature the digest of its folder's files
    /// (names, modes, bytes). It changes whenever the content does.
    pub(crate) digest: String,
}

/// What [`resolve`] is asked.
pub(crate) struct Request<'a> {
    /// The devcontainer.json: local Features are relative to its folder, the lock file sits
    /// next to it.
    pub(crate) config_file: &'a Path,
    /// The config's `features` object (`null` or absent: none).
    pub(crate) features: &'a Value,
    /// The config's `overrideFeatureInstallOrder`.
    pub(crate) override_order: &'a [String],
    /// Where fetched Features are kept: [`default_cache_dir`] outside tests.
    pub(crate) cache_dir: &'a Path,
    pub(crate) lock: LockMode,
    /// The Docker config folder registry credentials come from; `None`: `$DOCKER_CONFIG`, else
    /// `~/.docker`, as the docker CLI.
    pub(crate) docker_config: Option<&'a Path>,
    /// Which local hosts (`reference::is_local_host`) Features may be fetched from.
    pub(crate) local: LocalSources,
}

/// Local hosts the user lets Features come from (`--grant local-features[=HOST[:PORT]]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum LocalSources {
    /// None: a Feature on a local host is refused.
    #[default]
    None,
    /// These hosts or `host:port`s.
    Only(Vec<String>),
    Any,
}

impl LocalSources {
    pub(super) fn allow(&self, host: &str, authority: &str) -> bool {
        match self {
            LocalSources::None => false,
            LocalSources::Any => true,
            LocalSources::Only(list) => list
                .iter()
                .any(|a| a.eq_ignore_ascii_case(host) || a.eq_ignore_ascii_case(authority)),
        }
    }
}

/// What [`resolve`] found.
#[derive(Debug, Default)]
pub(crate) struct Resolution {
    /// In install order, dependencies included.
    pub(crate) features: Vec<Resolved>,
    /// One per OCI or tarball Feature, for the audit log (local Features are not fetched).
    pub(crate) fetches: Vec<FetchEvent>,
    /// The repository folders of the local Features (resolved, under `.devcontainer/`): inputs
    /// of the container definition, for the approval to hash. `Resolved::dir` is a copy.
    pub(crate) local_dirs: Vec<PathBuf>,
    /// Things the user should know (an unknown option, a value of the wrong type), each naming
    /// the Feature; the caller prints them.
    pub(crate) warnings: Vec<String>,
    /// The lock file, when this resolution wrote it.
    pub(crate) lock_written: Option<PathBuf>,
}

/// One Feature fetched (or found in the cache), for the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FetchEvent {
    /// As referenced (`ghcr.io/devcontainers/features/node:1`, a tarball URL).
    pub(crate) reference: String,
    /// Manifest digest (OCI) or tarball sha256: what the lock file calls `integrity`.
    pub(crate) digest: String,
    pub(crate) from_cache: bool,
    /// Bytes downloaded (0 from the cache).
    pub(crate) bytes: u64,
}

/// Where Features are cached outside tests: `<data dir>/features`.
pub(crate) fn default_cache_dir() -> PathBuf {
    crate::store::features_cache()
}

/// Find, fetch and order the config's Features.
///
/// Each key of `features` is a local folder (`./name`, under `.devcontainer/`), an OCI
/// reference (any registry; loopback over plain http) or a tarball URL (https; http on
/// loopback). OCI and tarball Features are fetched on the host into the cache (progress lines
/// through `progress`: "fetching ...", "... cached"), pinned and verified by
/// `devcontainer-lock.json` as `request.lock` says, which is then written when it changed (as
/// the reference CLI does). `dependsOn` Features are fetched too (one install per identical
/// Feature and options); the result is in the reference CLI's install order (`dependsOn`,
/// `installsAfter`, `overrideFeatureInstallOrder`), each with its options as environment
/// variables and its `devcontainer-feature.json` as a metadata entry.
///
/// Errors name the config file and the Feature: a bad reference, a local folder outside
/// `.devcontainer/`, a missing or invalid `devcontainer-feature.json` or `install.sh`
/// (exit 65); a registry or server that cannot be reached or refuses, a digest that does not
/// match (69); a cycle, a lock file that cannot be read or written or, frozen, would change
/// (65). Nothing is left half-made: the cache only ever holds complete entries.
pub(crate) async fn resolve(
    request: &Request<'_>,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Resolution> {
    let features = match request.features {
        Value::Null => return Ok(Resolution::default()),
        Value::Object(map) if map.is_empty() => return Ok(Resolution::default()),
        Value::Object(map) => map,
        other => {
            return Err(config_error(
                request.config_file,
                "features",
                format!("must be an object of Feature references, not {other}"),
            ))
        }
    };
    let lock_path = lock::path_for(request.config_file);
    let lockfile = match request.lock {
        LockMode::Ignore => None,
        _ => lock::read(&lock_path).map_err(|m| config_error(&lock_path, "features", m))?,
    };
    let mut resolver = Resolver {
        request,
        cache: cache::Cache::new(request.cache_dir),
        lockfile: lockfile.unwrap_or_default(),
        fetched: HashMap::new(),
        resolution: Resolution::default(),
        progress,
    };
    let items = resolver.collect(features).await?;
    resolver.finish(items, &lock_path)
}

/// A Feature found, before ordering.
struct Item {
    ident: Ident,
    fetched: Fetched,
    depends_on: Vec<(String, Value)>,
}

/// One key fetched.
#[derive(Clone)]
struct Fetched {
    source: SourceId,
    dir: PathBuf,
    digest: String,
    json: FeatureJson,
    entry: Entry,
}

struct Resolver<'r, 'a> {
    request: &'r Request<'a>,
    cache: cache::Cache,
    lockfile: lock::Lockfile,
    fetched: HashMap<String, Fetched>,
    resolution: Resolution,
    progress: &'r (dyn Fn(&str) + Sync),
}

/// The most Features (with their `dependsOn`) one config installs. Each is two layers of the
/// Features image and Docker stops near 125, so no working config comes near; the bound keeps a
/// repository (or a registry serving an endless `dependsOn` chain) from making the host fetch,
/// unpack and cache without end.
pub(crate) const MAX_FEATURES: usize = 60;

impl Resolver<'_, '_> {
    /// Every Feature of the config and its `dependsOn`, once per Feature and options.
    async fn collect(&mut self, features: &serde_json::Map<String, Value>) -> Result<Vec<Item>> {
        let mut pending: VecDeque<(String, Value, String)> = features
            .iter()
            .map(|(k, v)| (k.clone(), v.clone(), k.clone()))
            .collect();
        let mut items: Vec<Item> = Vec::new();
        while let Some((key, options, root)) = pending.pop_front() {
            let fetched = self.fetch(&key, &root).await?;
            let ident = Ident {
                key: key.clone(),
                source: fetched.source.clone(),
                options: options.clone(),
                aliases: aliases(&fetched.json),
            };
            if items.iter().any(|i| order::equals(&i.ident, &ident)) {
                continue;
            }
            let depends_on: Vec<(String, Value)> = fetched
                .json
                .depends_on
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for (dep, value) in &depends_on {
                pending.push_back((dep.clone(), value.clone(), root.clone()));
            }
            items.push(Item {
                ident,
                fetched,
                depends_on,
            });
            if items.len() > MAX_FEATURES {
                return Err(config_error(
                    self.request.config_file,
                    "features",
                    format!(
                        "more than {MAX_FEATURES} Features with their dependsOn (the last was \"{key}\", needed by \"{root}\"); each is a layer of the image, and Docker builds no more than about 120; install fewer Features"
                    ),
                ));
            }
        }
        Ok(items)
    }

    /// Fetch `key` (once per resolution).
    async fn fetch(&mut self, key: &str, root: &str) -> Result<Fetched> {
        if let Some(done) = self.fetched.get(key) {
            return Ok(done.clone());
        }
        let config = self.request.config_file;
        let named = if key == root {
            format!("Feature \"{key}\"")
        } else {
            format!("Feature \"{key}\" (a dependency of \"{root}\")")
        };
        let input = |message: String| config_error(config, "features", message);
        // Old short ids ("node") stand for their replacement, as in the reference CLI; the
        // user's key stays the Feature's name (metadata id, lock file key).
        let target = match reference::legacy_mapping(key) {
            Some((target, warning)) => {
                self.resolution.warnings.push(warning);
                target
            }
            None => key.to_string(),
        };
        let source = reference::parse(&target).map_err(|m| input(format!("{named}: {m}")))?;
        if let Some((host, authority)) = reference::fetched_from(&source) {
            if reference::is_local_host(&host) && !self.request.local.allow(&host, &authority) {
                return Err(Error::Refused {
                    file: config.to_path_buf(),
                    property: "features".into(),
                    value: crate::visible::escape_controls(&named),
                    reason: format!(
                        "yolo fetches Features on your machine, and {authority} is a local address (this machine, or its local network, where a cloud serves its credentials): the repository would make your machine send it requests"
                    ),
                    grant: format!("--grant local-features={authority} (if it is your registry)"),
                });
            }
        }
        let pin = self.lockfile.features.get(key).map(|e| e.integrity.clone());
        let progress = self.progress;
        let (source, dir, digest) = match &source {
            Source::Local { path } => {
                let folder =
                    local::resolve(config, path).map_err(|m| input(format!("{named}: {m}")))?;
                let (dir, digest) = self
                    .cache
                    .put_local(&folder)
                    .map_err(|e| Error::io(&folder, e))?;
                self.resolution.local_dirs.push(folder.clone());
                let source = SourceId::Local {
                    path: folder.to_string_lossy().into_owned(),
                };
                (source, dir, digest)
            }
            Source::Oci(oci) => {
                let got = oci::fetch(
                    oci,
                    pin.as_deref(),
                    &self.cache,
                    self.request.docker_config,
                    progress,
                )
                .await
                .map_err(|m| unavailable(config, &named, m))?;
                self.resolution.fetches.push(FetchEvent {
                    reference: key.to_string(),
                    digest: got.manifest_digest.clone(),
                    from_cache: got.bytes == 0,
                    bytes: got.bytes,
                });
                let source = SourceId::Oci {
                    oci: oci.clone(),
                    manifest_digest: got.manifest_digest.clone(),
                };
                (source, got.dir, got.manifest_digest)
            }
            Source::Tarball { url, .. } => {
                let got = tarball::fetch(
                    url,
                    pin.as_deref(),
                    &self.cache,
                    &self.request.local,
                    progress,
                )
                .await
                .map_err(|m| unavailable(config, &named, m))?;
                self.resolution.fetches.push(FetchEvent {
                    reference: key.to_string(),
                    digest: got.digest.clone(),
                    from_cache: got.bytes == 0,
                    bytes: got.bytes,
                });
                (SourceId::Tarball { url: url.clone() }, got.dir, got.digest)
            }
        };
        let (json, entry) = read_feature(&dir, key).map_err(|m| input(format!("{named}: {m}")))?;
        let fetched = Fetched {
            source,
            dir,
            digest,
            json,
            entry,
        };
        self.fetched.insert(key.to_string(), fetched.clone());
        Ok(fetched)
    }

    /// Order, compute options, write the lock file.
    fn finish(mut self, items: Vec<Item>, lock_path: &Path) -> Result<Resolution> {
        let config = self.request.config_file;
        let nodes: Vec<Node> = items
            .iter()
            .map(|item| Node {
                ident: item.ident.clone(),
                depends_on: item
                    .depends_on
                    .iter()
                    .filter_map(|(key, options)| {
                        let f = self.fetched.get(key)?;
                        Some(Ident {
                            key: key.clone(),
                            source: f.source.clone(),
                            options: options.clone(),
                            aliases: aliases(&f.json),
                        })
                    })
                    .collect(),
                installs_after: item
                    .fetched
                    .json
                    .installs_after
                    .iter()
                    .filter_map(|key| self.soft_reference(key).ok())
                    .collect(),
                priority: 0,
            })
            .collect();
        let overrides = self
            .request
            .override_order
            .iter()
            .map(|key| {
                self.soft_reference(key).map_err(|m| {
                    config_error(
                        config,
                        "overrideFeatureInstallOrder",
                        format!("\"{key}\": {m}"),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let order = order::install_order(nodes, &overrides)
            .map_err(|m| config_error(config, "features", m))?;

        let mut lockfile = lock::Lockfile::default();
        for index in order {
            let item = &items[index];
            let key = &item.ident.key;
            let (env, warnings) = options::option_env(&item.fetched.json, &item.ident.options)
                .map_err(|m| config_error(config, "features", format!("Feature \"{key}\": {m}")))?;
            self.resolution.warnings.extend(
                warnings
                    .into_iter()
                    .map(|w| format!("Feature \"{key}\": {w}")),
            );
            let f = &item.fetched;
            let resolved = match &f.source {
                SourceId::Oci {
                    oci,
                    manifest_digest,
                } => Some(format!("{}/{}@{manifest_digest}", oci.registry, oci.path())),
                SourceId::Tarball { url } => Some(url.clone()),
                SourceId::Local { .. } => None,
            };
            if let Some(resolved) = resolved {
                let deps: Vec<String> = f.json.depends_on.keys().cloned().collect();
                lockfile.features.insert(
                    key.clone(),
                    lock::LockEntry {
                        version: f.json.version.clone(),
                        resolved,
                        integrity: f.digest.clone(),
                        depends_on: (!deps.is_empty()).then_some(deps),
                    },
                );
            }
            // A Feature whose value is false (or "") is fetched and locked but not installed,
            // as in the reference CLI.
            if !truthy(&item.ident.options) {
                continue;
            }
            self.resolution.features.push(Resolved {
                key: key.clone(),
                id: f.json.id.clone(),
                version: f.json.version.clone().unwrap_or_default(),
                dir: f.dir.clone(),
                env,
                metadata: f.entry.clone(),
                digest: f.digest.clone(),
            });
        }
        let wrote = lock::write(lock_path, &lockfile, self.request.lock)
            .map_err(|m| config_error(lock_path, "features", m))?;
        if wrote {
            self.resolution.lock_written = Some(lock_path.to_path_buf());
        }
        Ok(self.resolution)
    }

    /// An `installsAfter` or `overrideFeatureInstallOrder` entry, local paths resolved.
    fn soft_reference(&self, key: &str) -> std::result::Result<Source, String> {
        match reference::parse(key)? {
            Source::Local { path } => {
                let folder = local::resolve(self.request.config_file, &path)?;
                Ok(Source::Local {
                    path: folder.to_string_lossy().into_owned(),
                })
            }
            other => Ok(other),
        }
    }
}

/// JavaScript truthiness, which the reference CLI filters Features by.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::Array(_) | Value::Object(_) => true,
    }
}

fn aliases(json: &FeatureJson) -> Vec<String> {
    let mut out = vec![json.current_id.clone().unwrap_or_else(|| json.id.clone())];
    out.extend(json.legacy_ids.iter().cloned());
    out
}

/// Read and check a Feature folder: `devcontainer-feature.json` valid, `install.sh` present.
fn read_feature(dir: &Path, key: &str) -> std::result::Result<(FeatureJson, Entry), String> {
    let json_path = dir.join("devcontainer-feature.json");
    let text = crate::digest::read_to_string(&json_path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            "it has no devcontainer-feature.json".to_string()
        } else {
            format!("cannot read its devcontainer-feature.json: {e}")
        }
    })?;
    let parsed = options::parse_feature_json(&text, key)?;
    if !dir.join("install.sh").is_file() {
        return Err("it has no install.sh".into());
    }
    Ok(parsed)
}

fn config_error(file: &Path, property: &str, message: String) -> Error {
    Error::Config {
        file: file.to_path_buf(),
        line: None,
        column: None,
        property: Some(property.to_string()),
        message,
    }
}

fn unavailable(config: &Path, named: &str, message: String) -> Error {
    Error::dependency(
        Dependency::Feature,
        format!("{}: \"features\": {named}: {message}", config.display()),
    )
}
