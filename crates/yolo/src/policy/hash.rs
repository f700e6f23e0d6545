//! The config hash: one value that changes whenever anything that shapes the container does, so
//! a container built from an older config is known to be stale.

use crate::run_spec::RunSpec;
use sha2::{Digest, Sha256};

/// Hash `spec` and store the hash in it (the engine labels the container with it).
pub(crate) fn seal(spec: &mut RunSpec) {
    spec.config_hash = config_hash(spec);
}

/// sha256 (hex) of the canonical JSON of `spec` without the hash itself, so a changed effective
/// config means a stale container. `grants_used` is sorted so grant order does not matter.
fn config_hash(spec: &RunSpec) -> String {
    let mut canonical = spec.clone();
    canonical.config_hash.clear();
    canonical.grants_used.sort();
    let json = serde_json::to_vec(&canonical).unwrap_or_default();
    hex::encode(Sha256::digest(&json))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use serde_json::json;

    #[test]
    fn config_hash_is_stable_and_sensitive() {
        let config = with_image(json!({"runArgs": ["-e", "A=1"], "forwardPorts": [3000]}));
        let a = ok(config.clone());
        let b = ok(config.clone());
        assert_eq!(a.config_hash, b.config_hash);
        assert_eq!(a.config_hash.len(), 64);
        assert_eq!(config_hash(&a), a.config_hash);
        let changed = ok(with_image(
            json!({"runArgs": ["-e", "A=2"], "forwardPorts": [3000]}),
        ));
        assert_ne!(a.config_hash, changed.config_hash);
        let mut limited = case(config);
        limited.flags.pids = Some(99);
        assert_ne!(limited.run().unwrap().config_hash, a.config_hash);
    }

    #[test]
    fn config_hash_ignores_grant_order() {
        let config = with_image(json!({"privileged": true, "capAdd": ["NET_RAW"]}));
        let a = case(config.clone())
            .grant(&["privileged", "cap-add"])
            .run()
            .unwrap();
        let b = case(config)
            .grant(&["cap-add", "privileged"])
            .run()
            .unwrap();
        assert_eq!(a.config_hash, b.config_hash);
    }
}
