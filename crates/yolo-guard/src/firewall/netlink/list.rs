//! The table listed over netlink in the JSON shape `nft -j list table` prints (sets with their
//! elements, expiries and timeouts; counters; rules), for `status` and `deny`.

use super::socket::dump;
use super::types::{key_types, predecessor, render_range, Ty};
use super::wire::*;
use crate::firewall::error::Error;
use serde_json::Value;

/// The elements of one set, rendered as `nft -j list` renders them.
pub(super) fn render_elements(types: &[Ty], flags: u32, raw: &[Vec<u8>]) -> Vec<Value> {
    let mut out = Vec::new();
    let fields = |key: &[u8]| -> Vec<Vec<u8>> {
        let mut off = 0;
        types
            .iter()
            .map(|t| {
                let f = key.get(off..off + t.len()).unwrap_or(&[]).to_vec();
                off += if types.len() > 1 {
                    (t.len() + 3) & !3
                } else {
                    t.len()
                };
                f
            })
            .collect()
    };
    if flags & NFT_SET_INTERVAL != 0 && types.len() == 1 {
        // Ranges as start elements and the end elements after them.
        let mut points: Vec<(Vec<u8>, bool)> = raw
            .iter()
            .filter_map(|e| {
                let el = parse(e);
                let key = get(&el, 1)
                    .and_then(|d| get(&parse(d), 1))
                    .map(<[u8]>::to_vec)?;
                let end = get_be32(&el, 3).unwrap_or(0) & NFT_SET_ELEM_INTERVAL_END != 0;
                Some((key, end))
            })
            .collect();
        points.sort();
        for (i, (start, is_end)) in points.iter().enumerate() {
            if *is_end {
                continue;
            }
            let last = points[i + 1..]
                .iter()
                .find(|(_, e)| *e)
                .map(|(k, _)| predecessor(k))
                .unwrap_or_else(|| vec![0xff; start.len()]);
            out.push(render_range(types[0], start, &last));
        }
        return out;
    }
    for e in raw {
        let el = parse(e);
        let value = |kind| {
            get(&el, kind)
                .and_then(|d| get(&parse(d), 1))
                .map(<[u8]>::to_vec)
        };
        let Some(key) = value(1) else { continue };
        let end = value(10).unwrap_or_else(|| key.clone());
        let (lo, hi) = (fields(&key), fields(&end));
        let parts: Vec<Value> = types
            .iter()
            .zip(lo.iter().zip(&hi))
            .map(|(t, (l, h))| render_range(*t, l, h))
            .collect();
        let val = if parts.len() == 1 {
            parts.into_iter().next().unwrap()
        } else {
            serde_json::json!({ "concat": parts })
        };
        let timeout = get_be64(&el, 4);
        let expires = get_be64(&el, 5);
        out.push(match (timeout, expires) {
            (None, None) => val,
            _ => {
                let mut inner = serde_json::Map::new();
                inner.insert("val".into(), val);
                if let Some(t) = timeout {
                    inner.insert("timeout".into(), Value::from(t / 1000));
                }
                if let Some(x) = expires {
                    inner.insert("expires".into(), Value::from(x / 1000));
                }
                serde_json::json!({ "elem": inner })
            }
        });
    }
    out
}

/// The table `table` (family inet: sets with their elements, named counters, rules with
/// counters) read over netlink in the shape `nft -j list table` prints (what
/// `sets::summarize` reads).
pub fn list_table_value(table: &str) -> Result<Value, Error> {
    let request = table_request(table);
    let mut objects = vec![serde_json::json!({"table": {"family": "inet", "name": table}})];
    for body in dump(NFT_MSG_GETSET, NFPROTO_INET, &request)? {
        let Some(name) = named_set(table, &body) else {
            continue;
        };
        let mut req = Vec::new();
        string(&mut req, 1, table);
        string(&mut req, 2, &name);
        let elements = dump(NFT_MSG_GETSETELEM, NFPROTO_INET, &req)?;
        objects.push(set_value(table, &body, &elements));
    }
    for body in dump(NFT_MSG_GETOBJ, NFPROTO_INET, &request)? {
        objects.extend(counter_value(table, &body));
    }
    for body in dump(NFT_MSG_GETRULE, NFPROTO_INET, &request)? {
        objects.extend(rule_value(table, &body));
    }
    Ok(serde_json::json!({ "nftables": objects }))
}

/// The name of the set a GETSET answer describes, if it is a named set of `table`.
pub(super) fn named_set(table: &str, body: &[u8]) -> Option<String> {
    let a = parse(body);
    let flags = get_be32(&a, 3).unwrap_or(0);
    (get_str(&a, 1) == table && flags & NFT_SET_ANONYMOUS == 0).then(|| get_str(&a, 2))
}

/// `{"set": ...}` from a GETSET answer and the GETSETELEM answers for that set.
pub(super) fn set_value(table: &str, body: &[u8], elements: &[Vec<u8>]) -> Value {
    let a = parse(body);
    let flags = get_be32(&a, 3).unwrap_or(0);
    let types = key_types(get_be32(&a, 4).unwrap_or(0));
    let mut raw = Vec::new();
    for body in elements {
        let b = parse(body);
        if let Some(list) = get(&b, 3) {
            raw.extend(parse(list).into_iter().map(|(_, e)| e.to_vec()));
        }
    }
    let elem = render_elements(&types, flags, &raw);
    let mut set = serde_json::json!({"family": "inet", "table": table, "name": get_str(&a, 2)});
    if !elem.is_empty() {
        set["elem"] = Value::from(elem);
    }
    serde_json::json!({ "set": set })
}

/// `{"counter": ...}` from a GETOBJ answer, if it is a named counter of `table`.
pub(super) fn counter_value(table: &str, body: &[u8]) -> Option<Value> {
    let a = parse(body);
    if get_str(&a, 1) != table || get_be32(&a, 3) != Some(1) {
        return None;
    }
    let data = get(&a, 4).map(parse).unwrap_or_default();
    Some(serde_json::json!({"counter": {
        "family": "inet", "table": table, "name": get_str(&a, 2),
        "packets": get_be64(&data, 2).unwrap_or(0), "bytes": get_be64(&data, 1).unwrap_or(0),
    }}))
}

/// `{"rule": ...}` from a GETRULE answer, with its anonymous counters only (all `status`
/// reads of a rule), if it is a rule of `table` that has one.
pub(super) fn rule_value(table: &str, body: &[u8]) -> Option<Value> {
    let a = parse(body);
    if get_str(&a, 1) != table {
        return None;
    }
    let mut expr = Vec::new();
    for (_, e) in get(&a, 4).map(parse).unwrap_or_default() {
        let e = parse(e);
        if get_str(&e, 1) == "counter" {
            let d = get(&e, 2).map(parse).unwrap_or_default();
            expr.push(serde_json::json!({"counter": {
                "packets": get_be64(&d, 2).unwrap_or(0), "bytes": get_be64(&d, 1).unwrap_or(0),
            }}));
        }
    }
    (!expr.is_empty()).then(|| {
        serde_json::json!({"rule": {
            "family": "inet", "table": table, "chain": get_str(&a, 2),
            "handle": get_be64(&a, 3).unwrap_or(0), "expr": expr,
        }})
    })
}
