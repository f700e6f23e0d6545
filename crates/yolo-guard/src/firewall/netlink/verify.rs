//! The ruleset read back over netlink and compared with what was sent: both sides are brought
//! to one canonical form (chains with their hooks, named sets, rules as expression lists with
//! anonymous sets inlined, the elements of sets the batch fills, counters), so a difference
//! names the object. Tables the batch creates are owned whole: anything else in them fails.

use super::batch::Batch;
use super::encode::encode;
use super::socket::dump;
use super::wire::*;
use crate::firewall::error::Error;

/// One expression: its name and attributes (nested ones kept whole).
pub(super) type Expr = (String, Vec<(u16, Vec<u8>)>);

/// A chain's hook number, priority, policy, type and device.
pub(super) type ChainProps = (Option<u32>, Option<u32>, Option<u32>, String, String);

/// A set element as the kernel holds it: key, key end, flags.
pub(super) type ElemKey = (Vec<u8>, Vec<u8>, u32);

/// A ruleset in the form both sides are compared in.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Canon {
    /// (table, chain) -> hook number, priority, policy, type, device.
    chains: std::collections::BTreeMap<(String, String), ChainProps>,
    /// (table, set) -> flags, key type, key length (named sets only).
    sets: std::collections::BTreeMap<(String, String), (u32, u32, u32)>,
    /// (table, chain) -> rules.
    rules: std::collections::BTreeMap<(String, String), Vec<Vec<Expr>>>,
    /// (table, set) -> sorted element keys (key, key end, flags), for sets whose contents the
    /// batch defines (flushed and refilled).
    elements: std::collections::BTreeMap<(String, String), Vec<ElemKey>>,
    counters: std::collections::BTreeSet<(String, String)>,
    /// Tables the batch creates (and so owns whole).
    created: std::collections::BTreeSet<String>,
}

/// Elements of a NFTA_SET_ELEM_LIST_ELEMENTS attribute: (key, key end, flags).
pub(super) fn elements_of(list: &[u8]) -> Vec<ElemKey> {
    parse(list)
        .into_iter()
        .map(|(_, el)| {
            let el = parse(el);
            let value = |kind| {
                get(&el, kind)
                    .and_then(|d| get(&parse(d), 1).map(<[u8]>::to_vec))
                    .unwrap_or_default()
            };
            let flags = get_be32(&el, 3).unwrap_or(0);
            (value(1), value(10), flags)
        })
        .collect()
}

/// Expressions of a rule, with anonymous set lookups replaced by the sets' elements and set
/// ids dropped (they are batch-local).
pub(super) fn exprs_of(
    list: &[u8],
    anon: &std::collections::BTreeMap<String, Vec<Vec<u8>>>,
) -> Vec<Expr> {
    parse(list)
        .into_iter()
        .map(|(_, e)| {
            let e = parse(e);
            let name = get_str(&e, 1);
            let mut data: Vec<(u16, Vec<u8>)> = get(&e, 2)
                .map(|d| parse(d).into_iter().map(|(k, v)| (k, v.to_vec())).collect())
                .unwrap_or_default();
            if name == "lookup" {
                let id = data.iter().find(|(k, _)| *k == 4).map(|(_, v)| v.clone());
                data.retain(|(k, _)| *k != 4);
                for (k, v) in data.iter_mut() {
                    let set = String::from_utf8_lossy(v.split(|b| *b == 0).next().unwrap_or(&[]))
                        .into_owned();
                    if *k == 1 && set.starts_with("__set") {
                        let key = match (&id, set.as_str()) {
                            (Some(id), "__set%d") => format!("id:{id:?}"),
                            _ => set,
                        };
                        let keys = anon.get(&key).cloned().unwrap_or_default();
                        *v = keys.concat();
                    }
                }
            }
            flatten(&mut data, &name);
            data.sort();
            (name, data)
        })
        .collect()
}

/// Nested data attributes (cmp, immediate, bitwise) as their innermost values, whatever the
/// nesting flags: the kernel dumps them without NLA_F_NESTED.
pub(super) fn flatten(data: &mut [(u16, Vec<u8>)], name: &str) {
    let nested_kinds: &[u16] = match name {
        "cmp" => &[3],
        "immediate" => &[2],
        "bitwise" => &[4, 5],
        _ => &[],
    };
    for (k, v) in data.iter_mut() {
        if nested_kinds.contains(k) {
            let inner = parse(v);
            let flat: Vec<u8> = inner
                .iter()
                .flat_map(|(ik, iv)| {
                    let mut out = ik.to_be_bytes().to_vec();
                    if *ik == 2 {
                        // A verdict: its code.
                        out.extend(parse(iv).iter().flat_map(|(_, c)| c.to_vec()));
                    } else {
                        out.extend_from_slice(iv);
                    }
                    out
                })
                .collect();
            *v = flat;
        }
    }
}

pub(super) fn chain_of(attrs: &[(u16, &[u8])]) -> ChainProps {
    let hook = get(attrs, 4).map(parse).unwrap_or_default();
    let dev = match get(&hook, 3) {
        Some(_) => get_str(&hook, 3),
        None => get(&hook, 4)
            .map(|devs| {
                parse(devs)
                    .first()
                    .map(|(_, d)| {
                        String::from_utf8_lossy(d.split(|b| *b == 0).next().unwrap_or(&[]))
                            .into_owned()
                    })
                    .unwrap_or_default()
            })
            .unwrap_or_default(),
    };
    (
        get_be32(&hook, 1),
        get_be32(&hook, 2),
        get_be32(attrs, 5),
        get_str(attrs, 7),
        dev,
    )
}

/// What a batch defines, in comparable form.
pub(super) fn expected_canon(batch: &Batch) -> (Canon, std::collections::BTreeSet<(u8, String)>) {
    let mut canon = Canon::default();
    let mut tables = std::collections::BTreeSet::new();
    let mut anon: std::collections::BTreeMap<String, Vec<Vec<u8>>> = Default::default();
    let mut rest = &batch.buf[..];
    while rest.len() >= 20 {
        let len = u32::from_ne_bytes(rest[0..4].try_into().unwrap()) as usize;
        let typ = u16::from_ne_bytes(rest[4..6].try_into().unwrap());
        let family = rest[16];
        let body = &rest[20..len];
        rest = &rest[((len + 3) & !3).min(rest.len())..];
        if typ >> 8 != NFNL_SUBSYS_NFTABLES {
            continue;
        }
        let a = parse(body);
        let table = get_str(&a, 1);
        match typ & 0xff {
            NFT_MSG_NEWTABLE => {
                canon.created.insert(table.clone());
                tables.insert((family, table));
            }
            NFT_MSG_NEWCHAIN => {
                tables.insert((family, table.clone()));
                canon
                    .chains
                    .insert((table.clone(), get_str(&a, 3)), chain_of(&a));
                canon.rules.entry((table, get_str(&a, 3))).or_default();
            }
            NFT_MSG_DELRULE => {
                canon.rules.insert((table, get_str(&a, 2)), Vec::new());
            }
            NFT_MSG_NEWSET => {
                let name = get_str(&a, 2);
                if name != "__set%d" {
                    let props = (
                        get_be32(&a, 3).unwrap_or(0),
                        get_be32(&a, 4).unwrap_or(0),
                        get_be32(&a, 5).unwrap_or(0),
                    );
                    canon.sets.insert((table, name), props);
                }
            }
            NFT_MSG_NEWOBJ => {
                canon.counters.insert((table, get_str(&a, 2)));
            }
            NFT_MSG_DELSETELEM | NFT_MSG_NEWSETELEM => {
                let set = get_str(&a, 2);
                let elems = get(&a, 3).map(elements_of);
                if set == "__set%d" {
                    let id = get(&a, 4).map(<[u8]>::to_vec).unwrap_or_default();
                    let mut keys: Vec<Vec<u8>> =
                        elems.unwrap_or_default().into_iter().map(|e| e.0).collect();
                    keys.sort();
                    anon.insert(format!("id:{id:?}"), keys);
                    continue;
                }
                let key = (table, set);
                match (typ & 0xff, elems) {
                    (NFT_MSG_DELSETELEM, None) => {
                        canon.elements.insert(key, Vec::new());
                    }
                    (NFT_MSG_NEWSETELEM, Some(elems)) => {
                        if let Some(list) = canon.elements.get_mut(&key) {
                            list.extend(elems);
                            list.sort();
                            list.dedup();
                        }
                    }
                    (_, Some(elems)) => {
                        if let Some(list) = canon.elements.get_mut(&key) {
                            list.retain(|e| !elems.contains(e));
                        }
                    }
                    _ => {}
                }
            }
            NFT_MSG_NEWRULE => {
                let exprs = get(&a, 4).map(|l| exprs_of(l, &anon)).unwrap_or_default();
                canon
                    .rules
                    .entry((table, get_str(&a, 2)))
                    .or_default()
                    .push(exprs);
            }
            _ => {}
        }
    }
    (canon, tables)
}

/// What the kernel holds in `tables`, in comparable form.
pub(super) fn kernel_canon(
    tables: &std::collections::BTreeSet<(u8, String)>,
    want_elements: &[(String, String)],
) -> Result<Canon, Error> {
    let mut canon = Canon::default();
    for (family, table) in tables {
        let request = table_request(table);
        let mut anon: std::collections::BTreeMap<String, Vec<Vec<u8>>> = Default::default();
        for body in dump(NFT_MSG_GETCHAIN, *family, &request)? {
            let a = parse(&body);
            if get_str(&a, 1) != *table {
                continue;
            }
            canon
                .chains
                .insert((table.clone(), get_str(&a, 3)), chain_of(&a));
        }
        for body in dump(NFT_MSG_GETSET, *family, &request)? {
            let a = parse(&body);
            if get_str(&a, 1) != *table {
                continue;
            }
            let name = get_str(&a, 2);
            let flags = get_be32(&a, 3).unwrap_or(0);
            let wanted = want_elements.contains(&(table.clone(), name.clone()));
            if flags & NFT_SET_ANONYMOUS != 0 || wanted {
                let mut req = Vec::new();
                string(&mut req, 1, table);
                string(&mut req, 2, &name);
                let mut elems = Vec::new();
                for body in dump(NFT_MSG_GETSETELEM, *family, &req)? {
                    let b = parse(&body);
                    if let Some(list) = get(&b, 3) {
                        elems.extend(elements_of(list));
                    }
                }
                elems.sort();
                if flags & NFT_SET_ANONYMOUS != 0 {
                    anon.insert(name, elems.into_iter().map(|e| e.0).collect());
                    continue;
                }
                canon.elements.insert((table.clone(), name.clone()), elems);
            }
            if flags & NFT_SET_ANONYMOUS == 0 {
                let props = (
                    flags,
                    get_be32(&a, 4).unwrap_or(0),
                    get_be32(&a, 5).unwrap_or(0),
                );
                canon.sets.insert((table.clone(), name), props);
            }
        }
        for body in dump(NFT_MSG_GETRULE, *family, &request)? {
            let a = parse(&body);
            if get_str(&a, 1) != *table {
                continue;
            }
            let exprs = get(&a, 4).map(|l| exprs_of(l, &anon)).unwrap_or_default();
            canon
                .rules
                .entry((table.clone(), get_str(&a, 2)))
                .or_default()
                .push(exprs);
        }
        for body in dump(NFT_MSG_GETOBJ, *family, &request)? {
            let a = parse(&body);
            if get_str(&a, 1) == *table && get_be32(&a, 3) == Some(1) {
                canon.counters.insert((table.clone(), get_str(&a, 2)));
            }
        }
    }
    Ok(canon)
}

/// Read back what `expected` (a batch from `ruleset::build` or `egress`, applied before) made
/// and compare it with the kernel's tables over netlink: the same chains with the same hooks
/// and policies, the same named sets and counters, each chain's rules expression by expression
/// (every attribute that was sent, anonymous sets by their elements), and the elements of the
/// sets the batch refills. Any difference is an error naming it: the guard fails closed.
pub fn verify(expected: &nftables::schema::Nftables<'_>) -> Result<(), Error> {
    let batch = encode(expected)?;
    let (want, tables) = expected_canon(&batch);
    let refilled: Vec<(String, String)> = want.elements.keys().cloned().collect();
    let have = kernel_canon(&tables, &refilled)?;
    for (key, chain) in &want.chains {
        match have.chains.get(key) {
            None => {
                return Err(Error::VerifyMismatch(format!(
                    "chain {} {} is missing",
                    key.0, key.1
                )))
            }
            Some(c) if c != chain => {
                return Err(Error::VerifyMismatch(format!(
                "chain {} {} is {c:?} (hook, priority, policy, type, device), expected {chain:?}",
                key.0, key.1
            )))
            }
            _ => {}
        }
    }
    // Nothing else may hook into a table the batch owns (the egress stamp chain only marks
    // what the output chain let through).
    for key in have.chains.keys() {
        if want.created.contains(&key.0)
            && !want.chains.contains_key(key)
            && key.1 != crate::firewall::ruleset::CHAIN_STAMP
        {
            return Err(Error::VerifyMismatch(format!(
                "chain {} {} was not expected",
                key.0, key.1
            )));
        }
    }
    for (key, props) in &want.sets {
        match have.sets.get(key) {
            Some(p) if p == props => {}
            other => {
                return Err(Error::VerifyMismatch(format!(
                    "set {} {} is {other:?} (flags, key type, key length), expected {props:?}",
                    key.0, key.1
                )))
            }
        }
    }
    for key in &want.counters {
        if !have.counters.contains(key) {
            return Err(Error::VerifyMismatch(format!(
                "counter {} {} is missing",
                key.0, key.1
            )));
        }
    }
    for (key, rules) in &want.rules {
        let got = have.rules.get(key).map(Vec::as_slice).unwrap_or(&[]);
        if got.len() != rules.len() {
            return Err(Error::VerifyMismatch(format!(
                "chain {} {} has {} rules, expected {}",
                key.0,
                key.1,
                got.len(),
                rules.len()
            )));
        }
        for (i, (w, g)) in rules.iter().zip(got).enumerate() {
            let same = w.len() == g.len()
                && w.iter().zip(g).all(|((wn, wd), (gn, gd))| {
                    wn == gn && wd.iter().all(|attr| gd.contains(attr))
                });
            if !same {
                let names = |r: &[Expr]| {
                    r.iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                let diff = w
                    .iter()
                    .zip(g)
                    .find(|((wn, wd), (gn, gd))| wn != gn || !wd.iter().all(|a| gd.contains(a)))
                    .map(|(w, g)| format!("{w:?} became {g:?}"))
                    .unwrap_or_default();
                return Err(Error::VerifyMismatch(format!(
                    "rule {} of chain {} {} differs from what was applied: [{}] became [{}] {diff}",
                    i + 1,
                    key.0,
                    key.1,
                    names(w),
                    names(g)
                )));
            }
        }
    }
    // The end element that closes the gap below an interval set's first range is implicit in
    // the kernel's dump.
    let explicit = |elems: &[ElemKey]| -> Vec<ElemKey> {
        elems
            .iter()
            .filter(|(k, _, f)| !(*f == NFT_SET_ELEM_INTERVAL_END && k.iter().all(|b| *b == 0)))
            .cloned()
            .collect()
    };
    for (key, elems) in &want.elements {
        let got = explicit(have.elements.get(key).map(Vec::as_slice).unwrap_or(&[]));
        let elems = explicit(elems);
        if got != elems {
            return Err(Error::VerifyMismatch(format!(
                "set {} {} has {} elements, expected {}",
                key.0,
                key.1,
                got.len(),
                elems.len()
            )));
        }
    }
    Ok(())
}
