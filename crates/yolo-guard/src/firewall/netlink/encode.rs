//! A typed `nftables` batch (from `ruleset`) translated to nf_tables messages: tables, chains,
//! named sets and their elements, counters, flushes; rules are `exprs`. Anything the ruleset
//! does not use is refused with an error naming it. [`apply`] sends the result as one atomic
//! batch.

use super::batch::{family, text, Batch, Sets};
use super::exprs::add_rule;
use super::socket::send_batch;
use super::types::{key_type, padded, successor, Ty};
use super::wire::*;
use crate::firewall::error::Error;
use serde_json::Value;

/// Apply `nft` (a batch from `ruleset`) in one atomic netlink transaction. Blocking.
pub fn apply(nft: &nftables::schema::Nftables<'_>) -> Result<(), Error> {
    let batch = encode(nft)?;
    if batch.acked.is_empty() {
        return Ok(());
    }
    send_batch(&batch.buf, &batch.acked).map_err(|(seq, source)| match seq {
        Some(seq) => Error::KernelRefused {
            what: batch
                .what
                .iter()
                .find(|(q, _)| *q == seq)
                .map_or("apply the nftables batch", |(_, w)| w.as_str())
                .to_string(),
            source,
        },
        None => Error::Socket {
            doing: "cannot apply the nftables batch",
            source,
        },
    })
}

/// The whole batch's messages, begin to end.
pub(super) fn encode(nft: &nftables::schema::Nftables<'_>) -> Result<Batch, Error> {
    let value = serde_json::to_value(nft)
        .map_err(|e| Error::translate(format!("cannot read the batch: {e}")))?;
    let mut batch = Batch::default();
    batch.raw(
        NFNL_MSG_BATCH_BEGIN,
        NLM_F_REQUEST,
        0,
        NFNL_SUBSYS_NFTABLES,
        &[],
    );
    let mut sets = Sets::default();
    let objects = value["nftables"].as_array().cloned().unwrap_or_default();
    for object in &objects {
        let Some((cmd, body)) = object.as_object().and_then(|o| o.iter().next()) else {
            continue;
        };
        let Some((kind, obj)) = body.as_object().and_then(|o| o.iter().next()) else {
            return Err(Error::translate(format!("cannot translate {object}")));
        };
        match (cmd.as_str(), kind.as_str()) {
            ("add", "table") => add_table(&mut batch, obj)?,
            ("add", "chain") => add_chain(&mut batch, obj)?,
            ("add", "set") => add_set(&mut batch, &mut sets, obj)?,
            ("add", "counter") => add_counter(&mut batch, obj)?,
            ("add", "rule") => add_rule(&mut batch, &sets, obj)?,
            ("add", "element") => elements(&mut batch, &sets, obj, true)?,
            ("delete", "element") => elements(&mut batch, &sets, obj, false)?,
            ("flush", "chain") => flush_chain(&mut batch, obj)?,
            ("flush", "set") => flush_set(&mut batch, obj)?,
            _ => {
                return Err(Error::translate(format!(
                    "cannot translate `{cmd} {kind}` to netlink: {object}"
                )))
            }
        }
    }
    batch.raw(
        NFNL_MSG_BATCH_END,
        NLM_F_REQUEST,
        0,
        NFNL_SUBSYS_NFTABLES,
        &[],
    );
    Ok(batch)
}

pub(super) fn add_table(batch: &mut Batch, obj: &Value) -> Result<(), Error> {
    let mut a = Vec::new();
    let name = text(obj, "name")?;
    string(&mut a, 1, name); // NFTA_TABLE_NAME
    be32(&mut a, 2, 0); // NFTA_TABLE_FLAGS
    let fam = family(obj)?;
    // No NLM_F_CREATE, as nft sends it: the kernel creates a missing table either way.
    batch.msg(NFT_MSG_NEWTABLE, 0, fam, &a, format!("add table {name}"));
    Ok(())
}

pub(super) fn add_chain(batch: &mut Batch, obj: &Value) -> Result<(), Error> {
    let mut a = Vec::new();
    let table = text(obj, "table")?;
    let name = text(obj, "name")?;
    string(&mut a, 1, table); // NFTA_CHAIN_TABLE
    string(&mut a, 3, name); // NFTA_CHAIN_NAME
    if let Some(hook) = obj["hook"].as_str() {
        let num = match hook {
            "prerouting" | "ingress" => 0,
            "input" | "egress" => 1,
            "forward" => 2,
            "output" => 3,
            "postrouting" => 4,
            other => return Err(Error::translate(format!("hook {other} is not supported"))),
        };
        string(&mut a, 7, obj["type"].as_str().unwrap_or("filter")); // NFTA_CHAIN_TYPE
        let policy = match obj["policy"].as_str() {
            Some("drop") => Some(0),
            Some("accept") => Some(1),
            None => None,
            Some(other) => {
                return Err(Error::translate(format!("policy {other} is not supported")))
            }
        };
        if let Some(policy) = policy {
            be32(&mut a, 5, policy); // NFTA_CHAIN_POLICY
        }
        let prio = obj["prio"].as_i64().unwrap_or(0) as i32;
        nested(&mut a, 4, |h| {
            // NFTA_CHAIN_HOOK
            be32(h, 1, num);
            be32(h, 2, prio as u32);
            if let Some(dev) = obj["dev"].as_str() {
                string(h, 3, dev);
            }
        });
    }
    let fam = family(obj)?;
    batch.msg(
        NFT_MSG_NEWCHAIN,
        NLM_F_CREATE,
        fam,
        &a,
        format!("add chain {table} {name}"),
    );
    Ok(())
}

pub(super) fn flush_chain(batch: &mut Batch, obj: &Value) -> Result<(), Error> {
    let mut a = Vec::new();
    let table = text(obj, "table")?;
    let name = text(obj, "name")?;
    string(&mut a, 1, table); // NFTA_RULE_TABLE
    string(&mut a, 2, name); // NFTA_RULE_CHAIN
    let fam = family(obj)?;
    batch.msg(
        NFT_MSG_DELRULE,
        0,
        fam,
        &a,
        format!("flush chain {table} {name}"),
    );
    Ok(())
}

pub(super) fn flush_set(batch: &mut Batch, obj: &Value) -> Result<(), Error> {
    let mut a = Vec::new();
    let table = text(obj, "table")?;
    let name = text(obj, "name")?;
    string(&mut a, 2, name); // NFTA_SET_ELEM_LIST_SET
    string(&mut a, 1, table); // NFTA_SET_ELEM_LIST_TABLE
    let fam = family(obj)?;
    batch.msg(
        NFT_MSG_DELSETELEM,
        0,
        fam,
        &a,
        format!("flush set {table} {name}"),
    );
    Ok(())
}

pub(super) fn add_counter(batch: &mut Batch, obj: &Value) -> Result<(), Error> {
    let mut a = Vec::new();
    let table = text(obj, "table")?;
    let name = text(obj, "name")?;
    string(&mut a, 1, table); // NFTA_OBJ_TABLE
    string(&mut a, 2, name); // NFTA_OBJ_NAME
    be32(&mut a, 3, 1); // NFTA_OBJ_TYPE: counter
    nested(&mut a, 4, |d| {
        attr(d, 1, &0u64.to_be_bytes());
        attr(d, 2, &0u64.to_be_bytes());
    });
    let fam = family(obj)?;
    batch.msg(
        NFT_MSG_NEWOBJ,
        NLM_F_CREATE,
        fam,
        &a,
        format!("add counter {table} {name}"),
    );
    Ok(())
}

pub(super) fn add_set(batch: &mut Batch, sets: &mut Sets, obj: &Value) -> Result<(), Error> {
    let table = text(obj, "table")?;
    let name = text(obj, "name")?;
    let types = match &obj["type"] {
        Value::String(t) => vec![Ty::of_name(t)?],
        Value::Array(ts) => ts
            .iter()
            .map(|t| Ty::of_name(t.as_str().unwrap_or("?")))
            .collect::<Result<_, _>>()?,
        other => {
            return Err(Error::translate(format!(
                "set {name}: type {other} is not supported"
            )))
        }
    };
    let mut flags = 0;
    for f in obj["flags"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        flags |= match f.as_str() {
            Some("timeout") => NFT_SET_TIMEOUT,
            Some("interval") => NFT_SET_INTERVAL,
            other => {
                return Err(Error::translate(format!(
                    "set {name}: flag {other:?} is not supported"
                )))
            }
        };
    }
    if types.len() > 1 && flags & NFT_SET_INTERVAL != 0 {
        flags |= NFT_SET_CONCAT;
    }
    let (id, len, udata) = key_type(&types)?;
    batch.set_id += 1;
    let set_id = batch.set_id;
    let mut a = Vec::new();
    string(&mut a, 1, table); // NFTA_SET_TABLE
    string(&mut a, 2, name); // NFTA_SET_NAME
    be32(&mut a, 3, flags); // NFTA_SET_FLAGS
    be32(&mut a, 4, id); // NFTA_SET_KEY_TYPE
    be32(&mut a, 5, len as u32); // NFTA_SET_KEY_LEN
    be32(&mut a, 10, set_id); // NFTA_SET_ID
    if flags & NFT_SET_CONCAT != 0 {
        nested(&mut a, 9, |desc| {
            // NFTA_SET_DESC
            nested(desc, 2, |fields| {
                // NFTA_SET_DESC_CONCAT
                for t in &types {
                    nested(fields, 1, |f| be32(f, 1, t.len() as u32));
                }
            });
        });
    }
    attr(&mut a, 13, &udata); // NFTA_SET_USERDATA
    let fam = family(obj)?;
    batch.msg(
        NFT_MSG_NEWSET,
        NLM_F_CREATE,
        fam,
        &a,
        format!("add set {table} {name}"),
    );
    sets.0.push((name.to_string(), flags, types, set_id));
    Ok(())
}

/// An element's key (and, for a range, its last key) from its JSON.
pub(super) fn element_key(types: &[Ty], v: &Value) -> Result<(Vec<u8>, Option<Vec<u8>>), Error> {
    let fields: Vec<&Value> = match &v["concat"] {
        Value::Array(items) => items.iter().collect(),
        _ => vec![v],
    };
    if fields.len() != types.len() {
        return Err(Error::translate(format!(
            "element {v} does not match the set's type"
        )));
    }
    let mut start = Vec::new();
    let mut end = Vec::new();
    let mut ranged = false;
    for (t, f) in types.iter().zip(fields) {
        let (lo, hi) = match &f["prefix"] {
            Value::Object(p) => {
                ranged = true;
                let addr = t.encode(&p["addr"])?;
                let len = p["len"].as_u64().unwrap_or(0) as usize;
                let mut lo = addr.clone();
                let mut hi = addr;
                for bit in len..lo.len() * 8 {
                    lo[bit / 8] &= !(0x80 >> (bit % 8));
                    hi[bit / 8] |= 0x80 >> (bit % 8);
                }
                (lo, hi)
            }
            _ => {
                let b = t.encode(f)?;
                (b.clone(), b)
            }
        };
        if types.len() > 1 {
            start.extend(padded(lo));
            end.extend(padded(hi));
        } else {
            start = lo;
            end = hi;
        }
    }
    Ok((
        start,
        ranged
            .then_some(end)
            .or(if types.len() == 1 { Some(vec![]) } else { None }),
    ))
}

/// An element to send: key, key end, flags, timeout in ms.
pub(super) type PendingElem = (Vec<u8>, Option<Vec<u8>>, u32, Option<u64>);

pub(super) fn elements(
    batch: &mut Batch,
    sets: &Sets,
    obj: &Value,
    add: bool,
) -> Result<(), Error> {
    let table = text(obj, "table")?;
    let name = text(obj, "name")?;
    let (_, flags, types, set_id) = sets
        .get(name)
        .cloned()
        .map(|(n, f, t, i)| (n, f, t, Some(i)))
        .or_else(|| known_set(name).map(|(f, t)| (name.to_string(), f, t, None)))
        .ok_or_else(|| {
            Error::translate(format!("set {name} is not known to the netlink translator"))
        })?;
    // (key, key_end, flags, timeout ms)
    let mut elems: Vec<PendingElem> = Vec::new();
    let mut intervals: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for e in obj["elem"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let (inner, timeout) = match &e["elem"] {
            Value::Object(el) => (&el["val"], el.get("timeout").and_then(Value::as_u64)),
            _ => (e, None),
        };
        let (key, end) = element_key(&types, inner)?;
        let timeout = timeout.map(|s| s * 1000);
        if flags & NFT_SET_INTERVAL == 0 {
            elems.push((key, None, 0, timeout));
        } else if types.len() > 1 {
            let end = end.unwrap_or_else(|| key.clone());
            elems.push((key, Some(end), 0, timeout));
        } else {
            let end = end.filter(|e| !e.is_empty()).unwrap_or_else(|| key.clone());
            intervals.push((key, end));
        }
    }
    if !intervals.is_empty() {
        // As nft sends a plain interval set: the gap below the first range closed by an end
        // element at zero, then each range as its start and the key after its end.
        intervals.sort();
        let zero = vec![0u8; intervals[0].0.len()];
        if intervals[0].0 != zero {
            elems.push((zero, None, NFT_SET_ELEM_INTERVAL_END, None));
        }
        for (lo, hi) in intervals {
            elems.push((lo, None, 0, None));
            if let Some(next) = successor(&hi) {
                elems.push((next, None, NFT_SET_ELEM_INTERVAL_END, None));
            }
        }
    }
    if elems.is_empty() {
        return Ok(());
    }
    let mut a = Vec::new();
    string(&mut a, 1, table); // NFTA_SET_ELEM_LIST_TABLE
    string(&mut a, 2, name); // NFTA_SET_ELEM_LIST_SET
    if let Some(id) = set_id {
        be32(&mut a, 4, id); // NFTA_SET_ELEM_LIST_SET_ID
    }
    nested(&mut a, 3, |list| {
        for (key, end, eflags, timeout) in &elems {
            nested(list, 1, |el| {
                if *eflags != 0 {
                    be32(el, 3, *eflags); // NFTA_SET_ELEM_FLAGS
                }
                // libnftnl's order (flags, timeout, key, key end), so the bytes are nft's.
                if let (true, Some(ms)) = (add, timeout) {
                    attr(el, 4, &ms.to_be_bytes()); // NFTA_SET_ELEM_TIMEOUT
                }
                data_value(el, 1, key); // NFTA_SET_ELEM_KEY
                if let Some(end) = end {
                    data_value(el, 10, end); // NFTA_SET_ELEM_KEY_END
                }
            });
        }
    });
    let (kind, flag, verb) = if add {
        (NFT_MSG_NEWSETELEM, NLM_F_CREATE, "add")
    } else {
        (NFT_MSG_DELSETELEM, 0, "delete")
    };
    let fam = family(obj)?;
    let what = format!("{verb} {} element(s) of set {table} {name}", elems.len());
    batch.msg(kind, flag, fam, &a, what);
    Ok(())
}

/// Sets that batches without their definition (element updates, refills) refer to.
pub(super) fn known_set(name: &str) -> Option<(u32, Vec<Ty>)> {
    use crate::firewall::ruleset::*;
    let v4p = vec![Ty::Ipv4, Ty::Service];
    let v6p = vec![Ty::Ipv6, Ty::Service];
    Some(match name {
        n if n == SET_ALLOW4 => (NFT_SET_TIMEOUT, vec![Ty::Ipv4]),
        n if n == SET_ALLOW6 => (NFT_SET_TIMEOUT, vec![Ty::Ipv6]),
        n if n == SET_ALLOW4_PORT => (NFT_SET_TIMEOUT, v4p),
        n if n == SET_ALLOW6_PORT => (NFT_SET_TIMEOUT, v6p),
        n if n == SET_NET4 => (NFT_SET_INTERVAL, vec![Ty::Ipv4]),
        n if n == SET_NET6 => (NFT_SET_INTERVAL, vec![Ty::Ipv6]),
        n if n == SET_NET4_PORT => (NFT_SET_INTERVAL | NFT_SET_CONCAT, v4p),
        n if n == SET_NET6_PORT => (NFT_SET_INTERVAL | NFT_SET_CONCAT, v6p),
        n if n == SET_UPSTREAM4 => (0, v4p),
        n if n == SET_UPSTREAM6 => (0, v6p),
        n if n == SET_INSPECT4 => (NFT_SET_TIMEOUT, vec![Ty::Ipv4]),
        n if n == SET_INSPECT6 => (NFT_SET_TIMEOUT, vec![Ty::Ipv6]),
        _ => return None,
    })
}
