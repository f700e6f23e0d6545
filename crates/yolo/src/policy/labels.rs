//! Container and image labels: the ones yolo sets so it (and VS Code) can find the container
//! again, and the check that keeps a repository's own labels out of those namespaces.

use super::Eval;
use crate::error::Result;
use std::collections::BTreeMap;

impl Eval<'_> {
    pub(super) fn base_labels(&self) -> BTreeMap<String, String> {
        let workspace = self.workspace_str();
        let mut labels = BTreeMap::new();
        labels.insert("devcontainer.local_folder".into(), workspace.clone());
        labels.insert(
            "devcontainer.config_file".into(),
            self.input.config_file.to_string_lossy().into_owned(),
        );
        labels.insert("dev.yolo.managed".into(), "true".into());
        labels.insert("dev.yolo.id".into(), self.input.devcontainer_id.into());
        labels.insert("dev.yolo.workspace".into(), workspace);
        labels
    }

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
    use super::super::hash::CONFIG_HASH_LABEL;
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn labels_let_vs_code_find_the_container() {
        let spec = ok(with_image(json!({})));
        assert_eq!(spec.labels["devcontainer.local_folder"], WS);
        assert_eq!(spec.labels["devcontainer.config_file"], CFG);
        assert_eq!(spec.labels["dev.yolo.managed"], "true");
        assert_eq!(spec.labels["dev.yolo.id"], ID);
        assert_eq!(spec.labels["dev.yolo.workspace"], WS);
        assert_eq!(spec.labels[CONFIG_HASH_LABEL], spec.config_hash);
    }
}
