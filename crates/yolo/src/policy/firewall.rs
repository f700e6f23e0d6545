//! What the firewall should allow, as requested: the repository's `customizations.yolo.firewall`,
//! then the user's config, then `--allow`. Only merged here; the patterns are parsed (and a bad
//! one refused) when the guard's allowlist is built.

use super::Eval;

impl Eval<'_> {
    pub(super) fn firewall_allow(&self) -> Vec<String> {
        let repo = self
            .yolo()
            .map(|y| y.firewall.allow.as_slice())
            .unwrap_or_default();
        let user = &self.input.user.firewall.allow;
        dedup([repo, user.as_slice(), self.input.flags.allow.as_slice()])
    }

    pub(super) fn firewall_presets(&self) -> Vec<String> {
        let repo = self
            .yolo()
            .map(|y| y.firewall.presets.as_slice())
            .unwrap_or_default();
        dedup([repo, self.input.user.firewall.presets.as_slice()])
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
        c.user.firewall.allow = vec!["b.example".into(), "c.example".into()];
        c.user.firewall.presets = vec!["pypi".into(), "npm".into()];
        c.flags.allow = vec!["d.example".into(), "a.example".into()];
        let spec = c.run().unwrap();
        assert_eq!(
            spec.firewall_allow,
            ["a.example", "b.example", "c.example", "d.example"]
        );
        assert_eq!(spec.firewall_presets, ["npm", "pypi"]);
    }
}
