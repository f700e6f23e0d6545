//! The spec's "image metadata": what an image (its `devcontainer.metadata` label) and each
//! Feature (its `devcontainer-feature.json`) contribute to the container's configuration.
//!
//! The label holds a JSON array of entries (or one object); the reference CLI writes one entry per
//! Feature (with its `id`) and one for the devcontainer.json it was built from. Merging follows
//! the spec's merge logic (`policy::metadata`): entries in order, devcontainer.json last; flags
//! OR-ed, lists unioned, hooks and entrypoints collected, single values last-wins. Every request
//! an entry makes (privileged, capabilities, security options, mounts) meets the same policy as
//! the repository's own, named by its origin.
//!
//! Pure: no Docker. Unknown properties are kept out (ignored), as in devcontainer.json.

use super::model::{HostRequirements, LifecycleCommand, MountEntry, PortEntry};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One metadata entry. Field names and types as in the reference CLI's `ImageMetadataEntry`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Entry {
    /// Set for a Feature's entry: the Feature as the user referenced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) init: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) privileged: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) cap_add: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) security_opt: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) entrypoint: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) mounts: Vec<MountEntry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) customizations: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) on_create_command: Option<LifecycleCommand>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) update_content_command: Option<LifecycleCommand>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) post_create_command: Option<LifecycleCommand>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) post_start_command: Option<LifecycleCommand>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) post_attach_command: Option<LifecycleCommand>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) wait_for: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) remote_user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) container_user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) user_env_probe: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) remote_env: BTreeMap<String, Option<String>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) container_env: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) override_command: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ports_attributes: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) other_ports_attributes: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) forward_ports: Vec<PortEntry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) shutdown_action: Option<String>,
    #[serde(
        rename = "updateRemoteUserUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) update_remote_user_uid: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) host_requirements: Option<HostRequirements>,
}

/// Where an entry came from, for messages and for the policy's property names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) enum Origin {
    /// Entry `index` of the `devcontainer.metadata` label of `image`.
    Image { image: String, index: usize },
    /// The Feature the user referenced as `id` (its `devcontainer-feature.json`).
    Feature { id: String },
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Image { image, index } => {
                write!(
                    f,
                    "the devcontainer.metadata label of image {image} (entry {index})"
                )
            }
            Origin::Feature { id } => write!(f, "Feature \"{id}\""),
        }
    }
}
