//! The real values of the session's credentials, which reach the guard over its control socket
//! and live in its memory only: never written, never logged (a [`Secret::fingerprint`] is), and
//! wiped when dropped.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use zeroize::Zeroizing;

/// One real value.
#[derive(Clone)]
pub(crate) struct Secret(Zeroizing<String>);

impl Secret {
    pub(crate) fn new(value: String) -> Secret {
        Secret(Zeroizing::new(value))
    }

    /// The value itself: only for the header the proxy sends upstream.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// The first 12 hex digits of the value's SHA-256: enough to tell two values apart in a
    /// log, nothing to recover the value from.
    pub(crate) fn fingerprint(&self) -> String {
        let digest = Sha256::digest(self.0.as_bytes());
        digest[..6].iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret(sha256:{})", self.fingerprint())
    }
}

/// The session's real values by credential name.
#[derive(Clone, Default)]
pub(crate) struct Secrets {
    values: BTreeMap<String, Secret>,
}

impl Secrets {
    /// Sets (or replaces: the next `yolo up` reads the value again) the value of `name`.
    pub(crate) fn insert(&mut self, name: &str, value: String) {
        self.values.insert(name.to_string(), Secret::new(value));
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Secret> {
        self.values.get(name)
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.values.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_fingerprint_never_show_the_value() {
        let mut secrets = Secrets::default();
        secrets.insert("anthropic", "sk-ant-api03-realvalue-0123456789".into());
        let shown = format!("{secrets:?}");
        assert!(!shown.contains("realvalue"), "{shown}");
        assert!(shown.contains("anthropic"), "{shown}");
        let secret = secrets.get("anthropic").unwrap();
        assert_eq!(secret.expose(), "sk-ant-api03-realvalue-0123456789");
        // `printf %s VALUE | sha256sum | cut -c1-12`.
        assert_eq!(secret.fingerprint(), "7577ca81759b");
        assert!(shown.contains("Secret(sha256:7577ca81759b)"), "{shown}");
    }
}
