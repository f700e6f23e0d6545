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

/// The properties a metadata entry holds: the ones of devcontainer.json that the reference CLI
/// copies into the label (`pickConfigProperties`).
pub(crate) const ENTRY_PROPERTIES: [&str; 24] = [
    "onCreateCommand",
    "updateContentCommand",
    "postCreateCommand",
    "postStartCommand",
    "postAttachCommand",
    "waitFor",
    "customizations",
    "mounts",
    "containerEnv",
    "containerUser",
    "init",
    "privileged",
    "capAdd",
    "securityOpt",
    "remoteUser",
    "userEnvProbe",
    "remoteEnv",
    "overrideCommand",
    "portsAttributes",
    "otherPortsAttributes",
    "forwardPorts",
    "shutdownAction",
    "updateRemoteUserUID",
    "hostRequirements",
];

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

/// The `devcontainer.metadata` label key, on images and on yolo's agent container.
pub(crate) const LABEL: &str = "devcontainer.metadata";

/// The entries of `image`'s `devcontainer.metadata` label (`text`), each with its origin, and a
/// warning per part that could not be read. As the reference CLI: a JSON array of entries or a
/// single object. Unlike it, one malformed entry costs only itself, not the whole label.
pub(crate) fn parse_label(image: &str, text: &str) -> (Vec<(Origin, Entry)>, Vec<String>) {
    let shown = crate::visible::escape_controls(image);
    let value: serde_json::Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            let warning = format!(
                "the devcontainer.metadata label of image {shown} is not valid JSON ({e}); its settings are ignored"
            );
            return (Vec::new(), vec![warning]);
        }
    };
    let values = match value {
        serde_json::Value::Array(values) => values,
        object @ serde_json::Value::Object(_) => vec![object],
        _ => {
            let warning = format!(
                "the devcontainer.metadata label of image {shown} is neither an array of entries nor an object; its settings are ignored"
            );
            return (Vec::new(), vec![warning]);
        }
    };
    let (mut entries, mut warnings) = (Vec::new(), Vec::new());
    for (index, value) in values.into_iter().enumerate() {
        match serde_json::from_value::<Entry>(value) {
            Ok(entry) => entries.push((
                Origin::Image {
                    image: image.to_string(),
                    index,
                },
                entry,
            )),
            Err(e) => warnings.push(format!(
                "entry {index} of the devcontainer.metadata label of image {shown} is malformed ({}); that entry is ignored",
                crate::visible::escape_controls(&e.to_string())
            )),
        }
    }
    (entries, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deeply_nested_or_huge_label_is_a_warning_not_a_crash() {
        // An image the repository builds sets the label: 100 000 levels of nesting would
        // overflow a recursive parser's stack; serde_json stops at 128 with an error.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let (entries, warnings) = parse_label("img:1", &deep);
        assert!(entries.is_empty());
        assert!(warnings[0].contains("not valid JSON"), "{warnings:?}");
        let deep_in_entry = format!(
            "[{{\"customizations\": {}1{}}}]",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let (entries, warnings) = parse_label("img:1", &deep_in_entry);
        assert!(entries.is_empty() && warnings.len() == 1, "{warnings:?}");
        // Many entries: each is read once, no quadratic work.
        let many = format!("[{}]", vec![r#"{"remoteUser": "a"}"#; 20_000].join(","));
        let (entries, _) = parse_label("img:1", &many);
        assert_eq!(entries.len(), 20_000);
    }

    #[test]
    fn a_label_is_an_array_or_one_object() {
        let (entries, warnings) = parse_label(
            "img:1",
            r#"[{"remoteUser": "dev"}, {"id": "f", "privileged": true}]"#,
        );
        assert!(warnings.is_empty());
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].1.remote_user.as_deref(), Some("dev"));
        assert_eq!(
            entries[1].0,
            Origin::Image {
                image: "img:1".into(),
                index: 1
            }
        );
        let (entries, _) = parse_label("img:1", r#"{"containerEnv": {"A": "1"}}"#);
        assert_eq!(entries[0].1.container_env["A"], "1");
    }

    #[test]
    fn a_malformed_label_warns_naming_the_image() {
        let (entries, warnings) = parse_label("img:1", "[{not json");
        assert!(entries.is_empty());
        assert!(warnings[0].contains("image img:1"), "{warnings:?}");
        let (entries, warnings) = parse_label("img:1", "42");
        assert!(entries.is_empty() && warnings.len() == 1);
        let (entries, warnings) =
            parse_label("img:1", r#"[{"remoteUser": 5}, {"remoteUser": "dev"}]"#);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].1.remote_user.as_deref(), Some("dev"));
        assert!(warnings[0].starts_with("entry 0 of"), "{warnings:?}");
    }

    #[test]
    fn origins_name_the_image_entry_or_the_feature() {
        let image = Origin::Image {
            image: "img:1".into(),
            index: 0,
        };
        assert_eq!(
            image.to_string(),
            "the devcontainer.metadata label of image img:1 (entry 0)"
        );
        let feature = Origin::Feature {
            id: "ghcr.io/devcontainers/features/docker-in-docker:2".into(),
        };
        assert_eq!(
            feature.to_string(),
            "Feature \"ghcr.io/devcontainers/features/docker-in-docker:2\""
        );
    }
}
