//! What the firewall should allow, as requested: the repository's `customizations.yolo.firewall`,
//! then the user's config, then `--allow`. The repository's patterns and preset names are checked
//! here, so a bad one stops `up` before Docker is touched; the user's config and the flags arrive
//! checked (`settings`). The allowlist itself is merged when the guard's config is built.

use super::Eval;
use crate::error::Result;
use crate::firewall::allowlist::Pattern;
use crate::firewall::presets;

impl Eval<'_> {
    pub(super) fn firewall_allow(&self) -> Result<Vec<String>> {
        let repo = self
            .yolo()
            .map(|y| y.firewall.allow.as_slice())
            .unwrap_or_default();
        for (i, pattern) in repo.iter().enumerate() {
            pattern.parse::<Pattern>().map_err(|e| {
                self.config_error(&format!("customizations.yolo.firewall.allow[{i}]"), e)
            })?;
        }
        let user = &self.input.user.allow;
        Ok(dedup([repo, user, &self.input.flags.allow]))
    }

    pub(super) fn firewall_presets(&self) -> Result<Vec<String>> {
        let repo = self
            .yolo()
            .map(|y| y.firewall.presets.as_slice())
            .unwrap_or_default();
        for (i, name) in repo.iter().enumerate() {
            presets::load(name).map_err(|e| {
                self.config_error(&format!("customizations.yolo.firewall.presets[{i}]"), e)
            })?;
        }
        Ok(dedup([repo, &self.input.user.presets]))
    }
}

/// Concatenate lists, dropping repeats, keeping first-seen order.
fn dedup<const N: usize>(lists: [&[String]; N]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in lists.into_iter().flatten() {
        if !out.contains(item) {
            out.push(item.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn firewall_requests_merge_in_order() {
        let mut c = case(with_image(json!({"customizations": {"yolo": {"firewall": {
            "allow": ["a.example", "b.example"], "presets": ["npm"]
        }}}})));
        c.user.allow = vec!["b.example".into(), "c.example".into()];
        c.user.presets = vec!["pypi".into(), "npm".into()];
        c.flags.allow = vec!["d.example".into(), "a.example".into()];
        let spec = c.run().unwrap();
        assert_eq!(
            spec.firewall_allow,
            ["a.example", "b.example", "c.example", "d.example"]
        );
        assert_eq!(spec.firewall_presets, ["npm", "pypi"]);
    }

    #[test]
    fn a_bad_repository_pattern_or_preset_is_a_config_error_naming_it() {
        let firewall = |f: serde_json::Value| {
            case(with_image(
                json!({"customizations": {"yolo": {"firewall": f}}}),
            ))
            .run()
        };
        let (property, message) = config_err(firewall(json!({"allow": ["ok.example", "*"]})));
        assert_eq!(property, "customizations.yolo.firewall.allow[1]");
        assert!(
            message.starts_with("\"*\": * alone would allow everything"),
            "{message}"
        );
        let (property, message) = config_err(firewall(json!({"presets": ["npm", "nope"]})));
        assert_eq!(property, "customizations.yolo.firewall.presets[1]");
        assert!(
            message.starts_with("unknown firewall preset \"nope\"; available: anthropic, "),
            "{message}"
        );
        // Preset names are case-insensitive, as when they are loaded.
        assert!(firewall(json!({"presets": ["NPM"]})).is_ok());
    }
}
