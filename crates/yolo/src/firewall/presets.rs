//! Built-in allowlist presets, one file per ecosystem in `firewall/`, embedded at build time.
//!
//! A preset file holds one pattern per line; `#` starts a comment (whole line or trailing).
//! Every entry carries a comment saying why it is needed, so a reviewer can judge each one.

/// Name and contents of every preset, sorted by name.
const PRESETS: &[(&str, &str)] = &[
    (
        "anthropic",
        include_str!("../../../../firewall/anthropic.txt"),
    ),
    ("crates", include_str!("../../../../firewall/crates.txt")),
    ("debian", include_str!("../../../../firewall/debian.txt")),
    ("github", include_str!("../../../../firewall/github.txt")),
    ("go", include_str!("../../../../firewall/go.txt")),
    (
        "google-gemini",
        include_str!("../../../../firewall/google-gemini.txt"),
    ),
    ("npm", include_str!("../../../../firewall/npm.txt")),
    ("openai", include_str!("../../../../firewall/openai.txt")),
    (
        "openrouter",
        include_str!("../../../../firewall/openrouter.txt"),
    ),
    ("pypi", include_str!("../../../../firewall/pypi.txt")),
    ("ubuntu", include_str!("../../../../firewall/ubuntu.txt")),
    ("vscode", include_str!("../../../../firewall/vscode.txt")),
];

pub(crate) fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|(name, _)| *name).collect()
}

/// The patterns of preset `name` (case-insensitive), comments and blank lines removed.
pub(crate) fn load(name: &str) -> Result<Vec<String>, String> {
    let wanted = name.trim().to_ascii_lowercase();
    PRESETS
        .iter()
        .find(|(n, _)| *n == wanted)
        .map(|(_, text)| patterns(text))
        .ok_or_else(|| {
            format!(
                "unknown firewall preset {name:?}; available: {}",
                names().join(", ")
            )
        })
}

fn patterns(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .filter(|line| !line.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firewall::allowlist::{Allowlist, Ports};
    use std::collections::BTreeSet;

    #[test]
    fn every_preset_parses_and_is_not_empty() {
        for name in names() {
            let patterns = load(name).unwrap();
            assert!(!patterns.is_empty(), "{name}");
            let list = Allowlist::parse(&patterns).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                list.patterns().len(),
                patterns.len(),
                "{name} has duplicates"
            );
        }
    }

    #[test]
    fn every_entry_says_why() {
        for (name, text) in PRESETS {
            let mut previous_is_comment = false;
            for line in text.lines().map(str::trim) {
                let is_comment = line.starts_with('#');
                if !is_comment && !line.is_empty() {
                    assert!(
                        line.contains('#') || previous_is_comment,
                        "{name}: {line:?} has no comment explaining why it is needed"
                    );
                }
                previous_is_comment = is_comment || (previous_is_comment && line.is_empty());
            }
        }
    }

    #[test]
    fn every_file_in_firewall_dir_is_embedded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../firewall");
        let on_disk: BTreeSet<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| {
                e.ok()?
                    .file_name()
                    .to_str()?
                    .strip_suffix(".txt")
                    .map(String::from)
            })
            .collect();
        let embedded: BTreeSet<String> = names().into_iter().map(String::from).collect();
        assert_eq!(on_disk, embedded);
        let mut sorted = names();
        sorted.sort_unstable();
        assert_eq!(sorted, names());
    }

    #[test]
    fn unknown_name_lists_the_available_ones() {
        let err = load("anthropicc").unwrap_err();
        assert!(err.contains("\"anthropicc\"") && err.contains("anthropic, crates, debian"));
        assert_eq!(load(" GitHub ").unwrap(), load("github").unwrap());
    }

    #[test]
    fn presets_allow_what_agents_need() {
        let merged: Vec<String> = names().into_iter().flat_map(|n| load(n).unwrap()).collect();
        let all = Allowlist::parse(&merged).unwrap();
        let https = Some(Ports::Only(vec![443]));
        assert_eq!(all.lookup("api.anthropic.com"), https);
        assert_eq!(all.lookup("objects.githubusercontent.com"), https);
        assert_eq!(all.lookup("github.com"), Some(Ports::Only(vec![22, 443])));
        assert_eq!(
            all.lookup("deb.debian.org"),
            Some(Ports::Only(vec![80, 443]))
        );
        assert_eq!(all.lookup("index.crates.io"), https);
        assert_eq!(all.lookup("proxy.golang.org"), https);
        assert_eq!(all.lookup("sum.golang.org"), https);
        assert_eq!(all.lookup("evil.example.com"), None);
        assert!(
            all.networks().is_empty(),
            "presets should use names, not addresses"
        );
    }
}
