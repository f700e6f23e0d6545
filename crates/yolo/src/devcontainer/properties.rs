//! Warnings about top-level properties of devcontainer.json that nothing reads: a typo
//! (`remotUser`) would otherwise be ignored in silence and the container made without it.
//!
//! The known names are the spec's (the reference CLI's `DevContainerConfig` types and the
//! schema, `$schema` included), whether or not yolo uses them: a config written for VS Code or
//! Codespaces gets no warning for their properties.

use super::metadata::ENTRY_PROPERTIES;
use serde_json::{Map, Value};

/// With the metadata entries' (`ENTRY_PROPERTIES`), every top-level property of the Dev
/// Container spec (image, Dockerfile and Compose configs), the legacy VS Code ones
/// (`extensions`, `settings`, `devPort`) and `$schema`.
const KNOWN: &[&str] = &[
    "$schema",
    "name",
    "image",
    "build",
    "dockerFile",
    "context",
    "dockerComposeFile",
    "service",
    "runServices",
    "workspaceFolder",
    "workspaceMount",
    "appPort",
    "runArgs",
    "initializeCommand",
    "features",
    "overrideFeatureInstallOrder",
    "secrets",
    "extensions",
    "settings",
    "devPort",
];

/// One warning per top-level property no tool reads, with the closest known name when it is
/// near enough to be a typo; and one for a `service` without `dockerComposeFile`, which only a
/// Compose config uses (the reference CLI ignores it too).
pub(crate) fn warnings(object: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    for key in object.keys() {
        if KNOWN.contains(&key.as_str()) || ENTRY_PROPERTIES.contains(&key.as_str()) {
            continue;
        }
        let shown = crate::visible::escape_controls(key);
        match suggestion(key) {
            Some(near) => out.push(format!(
                "unknown property \"{shown}\" is ignored: did you mean {near}?"
            )),
            None => out.push(format!("unknown property \"{shown}\" is ignored")),
        }
    }
    for key in ["service", "runServices"] {
        if object.contains_key(key) && !object.contains_key("dockerComposeFile") {
            out.push(format!(
                "\"{key}\" is ignored: it names Docker Compose services, and this config has no \"dockerComposeFile\""
            ));
        }
    }
    out
}

/// The known name nearest to `key`, when a few edits away (case differences count as none).
fn suggestion(key: &str) -> Option<&'static str> {
    let lower = key.to_lowercase();
    KNOWN
        .iter()
        .chain(&ENTRY_PROPERTIES)
        .map(|k| (strsim::damerau_levenshtein(&lower, &k.to_lowercase()), *k))
        .filter(|(d, k)| *d <= (k.len() / 4).clamp(1, 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn of(value: Value) -> Vec<String> {
        warnings(value.as_object().unwrap())
    }

    #[test]
    fn a_typo_gets_the_nearest_name() {
        assert_eq!(
            of(json!({"image": "x", "remotUser": "dev"})),
            ["unknown property \"remotUser\" is ignored: did you mean remoteUser?"]
        );
        assert_eq!(
            of(json!({"image": "x", "forwardports": [1]})),
            ["unknown property \"forwardports\" is ignored: did you mean forwardPorts?"]
        );
        assert_eq!(
            of(json!({"image": "x", "postCreateComand": "a"})),
            ["unknown property \"postCreateComand\" is ignored: did you mean postCreateCommand?"]
        );
    }

    #[test]
    fn a_name_far_from_any_is_only_named() {
        assert_eq!(
            of(json!({"image": "x", "colour": "blue"})),
            ["unknown property \"colour\" is ignored"]
        );
    }

    #[test]
    fn spec_and_vscode_properties_are_not_warned_about() {
        let config = json!({
            "$schema": "https://x", "image": "x", "portsAttributes": {}, "waitFor": "onCreateCommand",
            "userEnvProbe": "loginShell", "extensions": [], "settings": {}, "secrets": {},
            "otherPortsAttributes": {}, "hostRequirements": {"gpu": "optional"}
        });
        assert!(of(config).is_empty());
    }

    #[test]
    fn a_service_without_compose_is_ignored_with_a_warning() {
        let w = of(json!({"image": "x", "service": "app"}));
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("no \"dockerComposeFile\""), "{w:?}");
        assert!(of(json!({"dockerComposeFile": "c.yml", "service": "app"})).is_empty());
    }
}
