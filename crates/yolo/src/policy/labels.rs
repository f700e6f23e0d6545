//! The repository's own container and image labels (`--label` in `runArgs` and
//! `build.options`), kept out of the namespaces yolo and VS Code use. yolo's own labels are
//! added by `engine::labels`, the one place that builds every label set.

use super::Eval;
use crate::error::Result;

impl Eval<'_> {
    /// The repository may not pose as yolo or move where tools think the container belongs.
    pub(super) fn check_label_key(&self, property: &str, key: &str) -> Result<()> {
        if key.is_empty() {
            return Err(self.config_error(property, "a label needs a name"));
        }
        if key.starts_with("devcontainer.") || key.starts_with("dev.yolo.") {
            return Err(self.config_error(
                property,
                format!("the label \"{key}\" is reserved: yolo sets devcontainer.* and dev.yolo.* labels itself"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn the_spec_carries_only_the_repositorys_labels() {
        let spec = ok(with_image(json!({"runArgs": ["--label", "team=core"]})));
        assert_eq!(
            spec.labels,
            std::collections::BTreeMap::from([("team".to_string(), "core".to_string())])
        );
    }
}
