//! Install order, as the reference CLI computes it (`containerFeaturesOrder.ts`): rounds. Each
//! round takes every Feature whose `dependsOn` (hard: the exact Feature and options) and
//! `installsAfter` (soft: any Feature of that resource) are already installed, keeps those of the
//! highest `overrideFeatureInstallOrder` priority, and sorts them by a fixed comparison
//! (registry/namespace, id, tag, options, digest). A round with nothing in it is a cycle.
//!
//! One difference: the reference CLI fetches the manifest of every `installsAfter` and
//! `overrideFeatureInstallOrder` entry to learn its `legacyIds`; yolo matches them against the
//! `legacyIds` of the Features actually being installed instead, which needs no network and
//! gives the same answer when the renamed Feature is in the set.
//!
//! Strings compare as JavaScript's `localeCompare` does for the ASCII that references are made
//! of (ICU root collation: punctuation, then digits, then letters; case second), so the order
//! matches the reference CLI's.

use super::reference::{OciRef, Source};
use serde_json::Value;
use std::cmp::Ordering;

/// Where a Feature came from, as far as identity goes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SourceId {
    Oci {
        oci: OciRef,
        manifest_digest: String,
    },
    /// The folder, resolved (absolute).
    Local {
        path: String,
    },
    Tarball {
        url: String,
    },
}

/// A Feature as ordering sees it.
#[derive(Debug, Clone)]
pub(crate) struct Ident {
    /// The key it was referenced by.
    pub(crate) key: String,
    pub(crate) source: SourceId,
    /// The user's (or the depending Feature's) value: an options object, a string or a bool.
    pub(crate) options: Value,
    /// `[currentId or id, ...legacyIds]`.
    pub(crate) aliases: Vec<String>,
}

/// A Feature with its edges.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) ident: Ident,
    pub(crate) depends_on: Vec<Ident>,
    /// Soft dependencies: references (local paths already resolved to absolute).
    pub(crate) installs_after: Vec<Source>,
    pub(crate) priority: usize,
}

/// Install order of `nodes` (indices), with `overrides` (already parsed; local paths resolved)
/// raising priorities. Err names the Features left in a cycle.
pub(crate) fn install_order(
    mut nodes: Vec<Node>,
    overrides: &[Source],
) -> Result<Vec<usize>, String> {
    let count = overrides.len();
    for (i, over) in overrides.iter().enumerate() {
        let priority = count - i;
        for node in nodes.iter_mut() {
            if satisfies_soft(&node.ident, over) {
                node.priority = node.priority.max(priority);
            }
        }
    }
    // Soft dependencies on Features not in the set do not constrain anything.
    let idents: Vec<Ident> = nodes.iter().map(|n| n.ident.clone()).collect();
    for node in nodes.iter_mut() {
        node.installs_after
            .retain(|dep| idents.iter().any(|n| satisfies_soft(n, dep)));
    }

    let mut worklist: Vec<usize> = (0..nodes.len()).collect();
    let mut installed: Vec<usize> = Vec::new();
    while !worklist.is_empty() {
        let ready = |i: &usize| {
            let node = &nodes[*i];
            node.depends_on.iter().all(|dep| {
                installed
                    .iter()
                    .any(|&done| equals(&nodes[done].ident, dep))
            }) && node.installs_after.iter().all(|dep| {
                installed
                    .iter()
                    .any(|&done| satisfies_soft(&nodes[done].ident, dep))
            })
        };
        let mut round: Vec<usize> = worklist.iter().copied().filter(ready).collect();
        if round.is_empty() {
            let left: Vec<&str> = worklist
                .iter()
                .map(|&i| nodes[i].ident.key.as_str())
                .collect();
            return Err(format!(
                "the Features' dependsOn/installsAfter form a cycle; these cannot be ordered: {}",
                left.join(", ")
            ));
        }
        let max = round.iter().map(|&i| nodes[i].priority).max().unwrap_or(0);
        round.retain(|&i| nodes[i].priority == max);
        worklist.retain(|&w| {
            !round
                .iter()
                .any(|&r| equals(&nodes[r].ident, &nodes[w].ident))
        });
        round.sort_by(|&a, &b| compare(&nodes[a].ident, &nodes[b].ident));
        installed.extend(round);
    }
    Ok(installed)
}

/// Same Feature with the same options: one install.
pub(crate) fn equals(a: &Ident, b: &Ident) -> bool {
    std::mem::discriminant(&a.source) == std::mem::discriminant(&b.source)
        && compare(a, b) == Ordering::Equal
}

/// Does the installed `node` satisfy a soft dependency on `dep`?
fn satisfies_soft(node: &Ident, dep: &Source) -> bool {
    match (&node.source, dep) {
        (SourceId::Oci { oci, .. }, Source::Oci(dep)) => {
            let resource = dep.resource();
            oci.resource() == resource
                || node
                    .aliases
                    .iter()
                    .any(|alias| format!("{}/{alias}", oci.prefix()) == resource)
        }
        (SourceId::Local { path }, Source::Local { path: dep }) => path == dep,
        (SourceId::Tarball { url }, Source::Tarball { url: dep, .. }) => url == dep,
        _ => false,
    }
}

/// The reference CLI's `compareTo`.
pub(crate) fn compare(a: &Ident, b: &Ident) -> Ordering {
    match (&a.source, &b.source) {
        (
            SourceId::Oci {
                oci: ra,
                manifest_digest: da,
            },
            SourceId::Oci {
                oci: rb,
                manifest_digest: db,
            },
        ) => {
            if da == db && compare_options(&a.options, &b.options) == Ordering::Equal {
                return Ordering::Equal;
            }
            let resource = compare_resource(ra, &a.aliases, rb, &b.aliases);
            if resource != Ordering::Equal {
                return resource;
            }
            if let (Some(ta), Some(tb)) = (&ra.tag, &rb.tag) {
                if ta != tb {
                    return locale_compare(ta, tb);
                }
            }
            compare_options(&a.options, &b.options).then_with(|| locale_compare(da, db))
        }
        (SourceId::Local { path: pa }, SourceId::Local { path: pb }) => {
            locale_compare(pa, pb).then_with(|| compare_options(&a.options, &b.options))
        }
        (SourceId::Tarball { url: ua }, SourceId::Tarball { url: ub }) => {
            locale_compare(ua, ub).then_with(|| compare_options(&a.options, &b.options))
        }
        _ => locale_compare(&a.key, &b.key),
    }
}

fn compare_resource(
    a: &OciRef,
    a_aliases: &[String],
    b: &OciRef,
    b_aliases: &[String],
) -> Ordering {
    let (pa, pb) = (a.prefix(), b.prefix());
    if pa != pb {
        return locale_compare(&pa, &pb);
    }
    let a_ids = if a_aliases.is_empty() {
        std::slice::from_ref(&a.id)
    } else {
        a_aliases
    };
    let b_ids = if b_aliases.is_empty() {
        std::slice::from_ref(&b.id)
    } else {
        b_aliases
    };
    if a_ids.iter().any(|x| b_ids.contains(x)) {
        Ordering::Equal
    } else {
        locale_compare(&a.id, &b.id)
    }
}

/// The reference CLI's `optionsCompareTo`.
fn compare_options(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::String(a), Value::String(b)) => locale_compare(a, b),
        (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
        (Value::Object(a), Value::Object(b)) => {
            if a.len() != b.len() {
                return a.len().cmp(&b.len());
            }
            let mut ak: Vec<&String> = a.keys().collect();
            let mut bk: Vec<&String> = b.keys().collect();
            ak.sort_by(|x, y| x.encode_utf16().cmp(y.encode_utf16()));
            bk.sort_by(|x, y| x.encode_utf16().cmp(y.encode_utf16()));
            for (ka, kb) in ak.iter().zip(bk.iter()) {
                if ka != kb {
                    return locale_compare(ka, kb);
                }
                let v = match (&a[*ka], &b[*kb]) {
                    (Value::String(x), Value::String(y)) => locale_compare(x, y),
                    (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
                    _ => Ordering::Equal,
                };
                if v != Ordering::Equal {
                    return v;
                }
            }
            Ordering::Equal
        }
        _ => locale_compare(js_type(a), js_type(b)),
    }
}

fn js_type(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::Null => "undefined",
        _ => "object",
    }
}

/// ICU root collation for ASCII, as JavaScript's `a.localeCompare(b)`: characters compare by
/// class (spaces, punctuation and symbols in CLDR order, digits, letters), case-insensitively;
/// then lower case sorts before upper case; anything else by code point.
pub(crate) fn locale_compare(a: &str, b: &str) -> Ordering {
    let primary = |s: &str| -> Vec<u32> { s.chars().map(primary_weight).collect() };
    primary(a)
        .cmp(&primary(b))
        .then_with(|| {
            let tertiary = |s: &str| -> Vec<u8> {
                s.chars()
                    .map(|c| u8::from(c.is_ascii_uppercase()))
                    .collect()
            };
            tertiary(a).cmp(&tertiary(b))
        })
        .then_with(|| a.cmp(b))
}

fn primary_weight(c: char) -> u32 {
    const PUNCT: &str = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";
    if let Some(i) = PUNCT.find(c) {
        return 1 + i as u32;
    }
    if c.is_ascii_digit() {
        return 100 + (c as u32 - '0' as u32);
    }
    if c.is_ascii_alphabetic() {
        return 200 + (c.to_ascii_lowercase() as u32 - 'a' as u32);
    }
    1000 + c as u32
}

#[cfg(test)]
mod tests {
    use super::super::reference::parse;
    use super::*;
    use serde_json::json;

    fn oci(key: &str) -> Node {
        let Source::Oci(r) = parse(key).unwrap() else {
            panic!()
        };
        Node {
            ident: Ident {
                key: key.into(),
                source: SourceId::Oci {
                    oci: r.clone(),
                    manifest_digest: format!("sha256:{}", r.id),
                },
                options: json!({}),
                aliases: vec![r.id.clone()],
            },
            depends_on: vec![],
            installs_after: vec![],
            priority: 0,
        }
    }

    fn after(mut node: Node, keys: &[&str]) -> Node {
        node.installs_after = keys.iter().map(|k| parse(k).unwrap()).collect();
        node
    }

    fn keys(nodes: &[Node], order: &[usize]) -> Vec<String> {
        order.iter().map(|&i| nodes[i].ident.key.clone()).collect()
    }

    const F: &str = "ghcr.io/devcontainers/features";

    /// The installsAfter of the real Features (devcontainers/features): common-utils none;
    /// git, node, github-cli and docker-in-docker after common-utils; github-cli also after git.
    fn real_set() -> Vec<Node> {
        let cu = format!("{F}/common-utils");
        let git = format!("{F}/git");
        vec![
            after(oci(&format!("{F}/node:1")), &[&cu]),
            after(oci(&format!("{F}/docker-in-docker:2")), &[&cu]),
            after(oci(&format!("{F}/github-cli:1")), &[&cu, &git]),
            oci(&format!("{F}/common-utils:2")),
            after(oci(&format!("{F}/git:1")), &[&cu]),
        ]
    }

    #[test]
    fn real_features_come_out_as_in_the_reference_cli() {
        let nodes = real_set();
        let order = install_order(nodes.clone(), &[]).unwrap();
        assert_eq!(
            keys(&nodes, &order),
            vec![
                format!("{F}/common-utils:2"),
                format!("{F}/docker-in-docker:2"),
                format!("{F}/git:1"),
                format!("{F}/node:1"),
                format!("{F}/github-cli:1"),
            ]
        );
    }

    #[test]
    fn override_order_takes_priority() {
        let nodes = real_set();
        let overrides = vec![parse(&format!("{F}/node")).unwrap()];
        let order = install_order(nodes.clone(), &overrides).unwrap();
        // node's own installsAfter (common-utils) still holds; it jumps ahead of the rest.
        assert_eq!(
            keys(&nodes, &order),
            vec![
                format!("{F}/common-utils:2"),
                format!("{F}/node:1"),
                format!("{F}/docker-in-docker:2"),
                format!("{F}/git:1"),
                format!("{F}/github-cli:1"),
            ]
        );
    }

    #[test]
    fn depends_on_is_hard_and_cycles_are_errors() {
        let mut a = oci("ghcr.io/x/f/a:1");
        let b = oci("ghcr.io/x/f/b:1");
        a.depends_on.push(b.ident.clone());
        let nodes = vec![a.clone(), b.clone()];
        let order = install_order(nodes.clone(), &[]).unwrap();
        assert_eq!(
            keys(&nodes, &order),
            vec!["ghcr.io/x/f/b:1", "ghcr.io/x/f/a:1"]
        );

        let mut b2 = b.clone();
        b2.depends_on.push(a.ident.clone());
        let err = install_order(vec![a, b2], &[]).unwrap_err();
        assert!(err.contains("cycle"), "{err}");
        assert!(err.contains("ghcr.io/x/f/a:1"), "{err}");
    }

    #[test]
    fn soft_dependencies_outside_the_set_are_dropped() {
        let nodes = vec![after(oci("ghcr.io/x/f/a:1"), &["ghcr.io/x/f/missing"])];
        assert_eq!(install_order(nodes, &[]).unwrap(), vec![0]);
    }

    #[test]
    fn legacy_ids_satisfy_soft_dependencies() {
        let mut renamed = oci("ghcr.io/x/f/nodejs:1");
        renamed.ident.aliases = vec!["nodejs".into(), "node".into()];
        let nodes = vec![
            after(oci("ghcr.io/x/f/a:1"), &["ghcr.io/x/f/node"]),
            renamed,
        ];
        let order = install_order(nodes.clone(), &[]).unwrap();
        assert_eq!(
            keys(&nodes, &order),
            vec!["ghcr.io/x/f/nodejs:1", "ghcr.io/x/f/a:1"]
        );
    }

    #[test]
    fn options_and_locale_compare() {
        assert_eq!(
            compare_options(&json!({"a": "1"}), &json!({"a": "1"})),
            Ordering::Equal
        );
        assert_eq!(
            compare_options(&json!({}), &json!({"a": "1"})),
            Ordering::Less
        );
        assert_eq!(compare_options(&json!(false), &json!(true)), Ordering::Less);
        assert_eq!(locale_compare("a", "B"), Ordering::Less);
        assert_eq!(locale_compare("a", "A"), Ordering::Less);
        assert_eq!(locale_compare("git", "github-cli"), Ordering::Less);
        assert_eq!(locale_compare("a-b", "a.b"), Ordering::Less);
        assert_eq!(locale_compare("a_b", "a-b"), Ordering::Less);
        assert_eq!(locale_compare("1", "a"), Ordering::Less);
        assert_eq!(locale_compare("latest", "1"), Ordering::Greater);
    }
}
