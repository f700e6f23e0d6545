//! Dev Container Features: find each one the config names (a local folder under
//! `.devcontainer/`, an OCI reference, an HTTPS tarball), fetch it on the host into yolo's
//! cache, order them (`dependsOn`, `installsAfter`, `overrideFeatureInstallOrder`), turn their
//! options into environment variables, and read/write `devcontainer-lock.json`.
//!
//! The result, `Resolved` in install order, is what the image build layers on top of the base
//! image (one `RUN` per Feature, behind the build firewall) and what the policy checks (each
//! Feature's `metadata` entry: privileged, capAdd, mounts... are requests like any other).

pub(crate) mod install;

use super::metadata::Entry;
use std::collections::BTreeMap;
use std::path::PathBuf;

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
    /// sha256 of the fetched content (`sha256:...`): the cache key and the lock file's
    /// `integrity`.
    pub(crate) digest: String,
}
