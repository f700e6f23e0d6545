//! Talking to the kernel's nftables: apply a batch, verify it, list the table — all over
//! netlink (`netlink`), so the guard image needs no `nft` program. Errors name what the kernel
//! refused.
//!
//! Not here: what the batches contain (that is `ruleset`, pure).

use super::Error;
use nftables::schema::Nftables;
use serde_json::Value;
use std::collections::BTreeMap;
use yolo_protocol::control::{Counter, SetElement};

/// The table the ruleset owns.
pub const TABLE: [&str; 2] = ["inet", "yolo"];

/// Apply `batch` as one atomic netlink transaction. Blocking. (The DNS path's set updates
/// go over netlink too: `setelem`.)
pub fn apply(batch: &Nftables<'_>) -> Result<(), Error> {
    super::netlink::apply(batch)
}

/// Read the kernel's tables back over netlink and compare them with `expected`, applied
/// before (`netlink::verify`).
pub fn verify(expected: &Nftables<'_>) -> Result<(), Error> {
    super::netlink::verify(expected)
}

/// `inet yolo` as `nft -j list table` would print it (for status: elements with expiry,
/// counters), read over netlink.
pub fn list_table_value() -> Result<Value, Error> {
    super::netlink::list_table_value(TABLE[1])
}

/// Set elements and counters from a `nft -j list table` listing. Named counters keep their
/// name; rule counters are named by the rule's comment (or `chain#handle` without one).
pub fn summarize(listing: &Value) -> (Vec<SetElement>, BTreeMap<String, Counter>) {
    let mut elements = Vec::new();
    let mut counters = BTreeMap::new();
    let objects = listing
        .get("nftables")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for object in objects {
        if let Some(set) = object.get("set") {
            let name = set
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            for elem in set
                .get("elem")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[])
            {
                elements.push(element(&name, elem));
            }
        } else if let Some(counter) = object.get("counter") {
            let name = counter
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("counter");
            counters.insert(name.to_string(), counter_of(counter));
        } else if let Some(rule) = object.get("rule") {
            let exprs = rule
                .get("expr")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            // `counter name "x"` in a rule refers to a named counter: listed above.
            if let Some(counter) = exprs
                .iter()
                .filter_map(|e| e.get("counter"))
                .find(|c| c.is_object())
            {
                let name = match rule.get("comment").and_then(Value::as_str) {
                    Some(comment) => comment.to_string(),
                    None => format!(
                        "{}#{}",
                        rule.get("chain").and_then(Value::as_str).unwrap_or("?"),
                        rule.get("handle").and_then(Value::as_u64).unwrap_or(0)
                    ),
                };
                counters.insert(name, counter_of(counter));
            }
        }
    }
    (elements, counters)
}

fn element(set: &str, elem: &Value) -> SetElement {
    // With timeouts an element is `{"elem": {"val": .., "timeout": .., "expires": ..}}`.
    let (val, inner) = match elem.get("elem") {
        Some(inner) => (inner.get("val").unwrap_or(&Value::Null), Some(inner)),
        None => (elem, None),
    };
    let secs = |key| inner.and_then(|i| i.get(key)).and_then(Value::as_u64);
    SetElement {
        set: set.to_string(),
        element: render(val),
        timeout_secs: secs("timeout"),
        expires_secs: secs("expires"),
    }
}

/// nft's JSON for values back to nft's text form.
fn render(val: &Value) -> String {
    match val {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Object(o) => {
            if let Some(parts) = o.get("concat").and_then(Value::as_array) {
                parts.iter().map(render).collect::<Vec<_>>().join(" . ")
            } else if let Some(prefix) = o.get("prefix") {
                format!(
                    "{}/{}",
                    render(prefix.get("addr").unwrap_or(&Value::Null)),
                    prefix.get("len").unwrap_or(&Value::Null)
                )
            } else if let Some(range) = o.get("range").and_then(Value::as_array) {
                range.iter().map(render).collect::<Vec<_>>().join("-")
            } else {
                val.to_string()
            }
        }
        other => other.to_string(),
    }
}

fn counter_of(counter: &Value) -> Counter {
    let n = |key| counter.get(key).and_then(Value::as_u64).unwrap_or(0);
    Counter {
        packets: n("packets"),
        bytes: n("bytes"),
    }
}

/// The elements of the dynamic sets (`allow*`), as the kernel lists them (for the real-kernel
/// tests of what a request or a DNS answer put there).
#[cfg(test)]
pub(crate) fn dynamic_elements() -> Result<Vec<String>, Error> {
    let (elements, _) = summarize(&list_table_value()?);
    Ok(elements
        .into_iter()
        .filter(|e| e.set.starts_with("allow"))
        .map(|e| e.element)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarize_reads_elements_and_counters() {
        let listing = serde_json::json!({"nftables": [
            {"metainfo": {"json_schema_version": 1}},
            {"table": {"family": "inet", "name": "yolo", "handle": 1}},
            {"set": {"family": "inet", "name": "allow4", "table": "yolo", "type": "ipv4_addr",
                     "flags": ["timeout"],
                     "elem": [{"elem": {"val": "192.0.2.1", "timeout": 300, "expires": 290}},
                              {"elem": {"val": {"concat": ["192.0.2.2", 443]}, "timeout": 60, "expires": 5}}]}},
            {"set": {"family": "inet", "name": "net4", "table": "yolo", "type": "ipv4_addr",
                     "flags": ["interval"], "elem": [{"prefix": {"addr": "10.0.0.0", "len": 8}}]}},
            {"counter": {"family": "inet", "name": "blocked", "table": "yolo", "packets": 3, "bytes": 180}},
            {"rule": {"family": "inet", "table": "yolo", "chain": "output", "handle": 9, "comment": "accepted",
                      "expr": [{"counter": {"packets": 10, "bytes": 1000}}, {"accept": null}]}},
            {"rule": {"family": "inet", "table": "yolo", "chain": "output", "handle": 10,
                      "expr": [{"counter": "blocked"}, {"drop": null}]}}
        ]});
        let (elements, counters) = summarize(&listing);
        assert_eq!(elements.len(), 3);
        assert_eq!(elements[0].element, "192.0.2.1");
        assert_eq!(elements[0].expires_secs, Some(290));
        assert_eq!(elements[1].element, "192.0.2.2 . 443");
        assert_eq!(elements[2].element, "10.0.0.0/8");
        assert_eq!(
            counters["blocked"],
            Counter {
                packets: 3,
                bytes: 180
            }
        );
        assert_eq!(counters["accepted"].packets, 10);
        assert_eq!(counters.len(), 2);
    }

    /// `status` must answer whatever nft lists: a part it cannot read is left out (or read with
    /// neutral defaults), and the rest of the listing still comes through.
    #[test]
    fn summarize_tolerates_anything() {
        use serde_json::json;
        let elem = |set: &str, element: &str| SetElement {
            set: set.into(),
            element: element.into(),
            timeout_secs: None,
            expires_secs: None,
        };
        let counter = |packets, bytes| Counter { packets, bytes };
        let good_set = json!({"set": {"name": "allow4", "elem": ["192.0.2.1"]}});
        /// A listing, the elements and the named counters `summarize` must find in it.
        type Case = (Value, Vec<SetElement>, Vec<(&'static str, Counter)>);
        let cases: Vec<Case> = vec![
            (json!(null), vec![], vec![]),
            (json!("nftables"), vec![], vec![]),
            (json!({}), vec![], vec![]),
            (json!({"nftables": 3}), vec![], vec![]),
            (json!({"nftables": {"set": {}}}), vec![], vec![]),
            (json!({"nftables": [1, "x", null, [], {}]}), vec![], vec![]),
            // A set that is not an object, or has no or odd elements: nothing listed.
            (json!({"nftables": [{"set": 1}]}), vec![], vec![]),
            (
                json!({"nftables": [{"set": {"name": "allow4"}}]}),
                vec![],
                vec![],
            ),
            (
                json!({"nftables": [{"set": {"name": "allow4", "elem": 5}}]}),
                vec![],
                vec![],
            ),
            // Elements whose set has no name, or whose values are odd, are still shown.
            (
                json!({"nftables": [{"set": {"name": 7, "elem": ["192.0.2.1"]}}]}),
                vec![elem("", "192.0.2.1")],
                vec![],
            ),
            (
                json!({"nftables": [{"set": {"name": "s", "elem": [true, {"elem": {}}, {"prefix": {}}, {"x": 1}]}}]}),
                vec![
                    elem("s", "true"),
                    elem("s", "null"),
                    elem("s", "null/null"),
                    elem("s", r#"{"x":1}"#),
                ],
                vec![],
            ),
            (
                json!({"nftables": [{"set": {"name": "s", "elem": [{"elem": {"val": "192.0.2.1", "timeout": "x", "expires": -1}}]}}]}),
                vec![elem("s", "192.0.2.1")],
                vec![],
            ),
            // Counters without a name or with odd numbers count as zero under a stand-in name.
            (
                json!({"nftables": [{"counter": {"packets": "3", "bytes": -1}}]}),
                vec![],
                vec![("counter", counter(0, 0))],
            ),
            (
                json!({"nftables": [{"counter": {"name": "blocked", "packets": 3}}]}),
                vec![],
                vec![("blocked", counter(3, 0))],
            ),
            // Rules: only an inline counter object counts; no chain or handle still names it.
            (
                json!({"nftables": [{"rule": {"expr": [{"counter": {"packets": 2, "bytes": 9}}]}}]}),
                vec![],
                vec![("?#0", counter(2, 9))],
            ),
            (
                json!({"nftables": [{"rule": {"expr": "counter"}}, {"rule": 1}, {"rule": {"expr": [{"counter": "blocked"}, 5]}}]}),
                vec![],
                vec![],
            ),
            // Junk around a good entry does not hide it.
            (
                json!({"nftables": [1, {"set": 1}, good_set, {"counter": null}]}),
                vec![elem("allow4", "192.0.2.1")],
                vec![("counter", counter(0, 0))],
            ),
        ];
        for (listing, elements, counters) in cases {
            let counters: BTreeMap<String, Counter> = counters
                .into_iter()
                .map(|(name, c)| (name.to_string(), c))
                .collect();
            assert_eq!(summarize(&listing), (elements, counters), "{listing}");
        }
    }
}
