//! Applying the ruleset's typed `nftables` batches (`ruleset::build`, `egress`,
//! `static_networks`, ...) over NETLINK_NETFILTER, without the `nft` program: each batch is
//! translated to nf_tables netlink messages and sent as ONE atomic NFNL batch (begin, messages,
//! end), every message acknowledged; the first refusal fails the whole batch and its error names
//! the object the kernel refused.
//!
//! The translation produces the bytecode `nft -j -f -` produces for the same JSON (dependencies
//! such as `meta nfproto ipv4` before `ip daddr`, registers of concatenations, anonymous sets,
//! interval elements, set user data), so `nft list ruleset` shows the same ruleset either way;
//! the netns test `netlink_apply_lists_like_nft` proves it for several configurations.
//!
//! It covers exactly what the ruleset uses — tables, base chains with hook/priority/policy/device,
//! named sets of ipv4/ipv6 addresses, inet services and their concatenations (timeout and
//! interval flags), named counters, flush of chains and sets, element add/delete (timeouts,
//! prefixes, concatenated prefixes), and rules made of meta / payload / ct state matches, set
//! lookups, anonymous sets, named and anonymous counters, log group/prefix, reject, meta set,
//! accept and drop — and refuses anything else with an error naming it, so a new kind of rule
//! in `ruleset` cannot be silently mistranslated.
//!
//! Written by hand (on top of `setelem`'s NFNL batch): the crates that speak nf_tables over
//! netlink were checked — `rustables` generates bindings with bindgen/libclang and is GPL-3.0,
//! `nftnl` links the C libnftnl, `nf_tables` 0.1 (pure Rust, a first release, a quarter of it
//! documented) builds rules with its own `RuleBuilder`, and `netlink-bindings` offers generated
//! attribute builders — none turns the `nftables` crate's values into messages, which is the
//! part that must match `nft` (and adopting one would make a second description of the
//! ruleset, where `ruleset` must stay the only one).

pub(crate) mod setelem;

use serde_json::Value;
use setelem::{attr, cstr, push_message, send_batch};
use std::net::IpAddr;

const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFT_MSG_NEWTABLE: u16 = 0;
const NFT_MSG_NEWCHAIN: u16 = 3;
const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_DELRULE: u16 = 8;
const NFT_MSG_NEWSET: u16 = 9;
const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_DELSETELEM: u16 = 14;
const NFT_MSG_NEWOBJ: u16 = 18;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_CREATE: u16 = 0x400;
const NLM_F_APPEND: u16 = 0x800;
const NLA_F_NESTED: u16 = 0x8000;
const NFPROTO_INET: u8 = 1;
const NFPROTO_NETDEV: u8 = 5;

// Set flags.
const NFT_SET_ANONYMOUS: u32 = 0x1;
const NFT_SET_CONSTANT: u32 = 0x2;
const NFT_SET_INTERVAL: u32 = 0x4;
const NFT_SET_TIMEOUT: u32 = 0x10;
const NFT_SET_CONCAT: u32 = 0x80;
const NFT_SET_ELEM_INTERVAL_END: u32 = 0x1;

// nft's datatype ids (key types) and how a concatenation combines them.
const TYPE_IPADDR: u32 = 7;
const TYPE_IP6ADDR: u32 = 8;
const TYPE_INET_PROTOCOL: u32 = 12;
const TYPE_INET_SERVICE: u32 = 13;
const TYPE_ICMP6_TYPE: u32 = 29;
const TYPE_BITS: u32 = 6;

// Registers: the verdict, the 16-byte registers and the 4-byte ones.
const REG_VERDICT: u32 = 0;
const REG_1: u32 = 1;
const REG32_00: u32 = 8;

/// What a value on the right of a match is encoded as: it depends on what the left loads.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ty {
    /// Interface index, host order (`meta iif/oif "lo"`).
    Ifindex,
    /// 32-bit host-order integer (`meta mark`, `meta priority`).
    U32,
    /// Ether type, big-endian (`meta protocol arp`).
    EtherType,
    /// IP protocol number (`meta l4proto tcp`).
    L4proto,
    Ipv4,
    Ipv6,
    /// Port, big-endian.
    Service,
    Icmpv6Type,
    CtState,
    /// Interface name, NUL-padded to IFNAMSIZ (`meta iifname "eth0"`).
    Ifname,
    /// Hardware address (`ether saddr`, `arp saddr ether`).
    Ether,
    /// A route's address type, host order (`fib saddr type local`).
    AddrType,
}

impl Ty {
    fn len(self) -> usize {
        match self {
            Ty::Ifindex | Ty::U32 | Ty::Ipv4 | Ty::CtState | Ty::AddrType => 4,
            Ty::EtherType | Ty::Service => 2,
            Ty::L4proto | Ty::Icmpv6Type => 1,
            Ty::Ipv6 | Ty::Ifname => 16,
            Ty::Ether => 6,
        }
    }

    fn set_type(self) -> Result<u32, String> {
        Ok(match self {
            Ty::Ipv4 => TYPE_IPADDR,
            Ty::Ipv6 => TYPE_IP6ADDR,
            Ty::L4proto => TYPE_INET_PROTOCOL,
            Ty::Service => TYPE_INET_SERVICE,
            Ty::Icmpv6Type => TYPE_ICMP6_TYPE,
            other => return Err(format!("no set of {other:?} values is supported")),
        })
    }

    fn of_name(name: &str) -> Result<Ty, String> {
        Ok(match name {
            "ipv4_addr" => Ty::Ipv4,
            "ipv6_addr" => Ty::Ipv6,
            "inet_service" => Ty::Service,
            "inet_proto" => Ty::L4proto,
            other => return Err(format!("set type {other} is not supported")),
        })
    }

    /// The value's bytes, as the kernel compares them.
    fn encode(self, v: &Value) -> Result<Vec<u8>, String> {
        let bad = || format!("value {v} does not fit {self:?}");
        let num = v.as_u64();
        let text = v.as_str();
        Ok(match self {
            Ty::Ifindex => {
                let name = text.ok_or_else(bad)?;
                let c = std::ffi::CString::new(name).map_err(|_| bad())?;
                // SAFETY: a valid NUL-terminated string.
                let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
                if index == 0 {
                    return Err(format!("no interface named {name}"));
                }
                index.to_ne_bytes().to_vec()
            }
            Ty::U32 => (num.ok_or_else(bad)? as u32).to_ne_bytes().to_vec(),
            Ty::AddrType => {
                let kind: u32 = match (text, num) {
                    (Some("unicast"), _) => 1,
                    (Some("local"), _) => 2,
                    (Some("broadcast"), _) => 3,
                    (Some("anycast"), _) => 4,
                    (Some("multicast"), _) => 5,
                    (_, Some(n)) => n as u32,
                    _ => return Err(bad()),
                };
                kind.to_ne_bytes().to_vec()
            }
            Ty::Ifname => {
                let name = text.ok_or_else(bad)?.as_bytes();
                if name.len() >= 16 || name.contains(&0) {
                    return Err(bad());
                }
                let mut bytes = name.to_vec();
                bytes.resize(16, 0);
                bytes
            }
            Ty::Ether => {
                let octets = text
                    .ok_or_else(bad)?
                    .split(':')
                    .map(|o| u8::from_str_radix(o, 16).map_err(|_| bad()))
                    .collect::<Result<Vec<u8>, String>>()?;
                if octets.len() != 6 {
                    return Err(bad());
                }
                octets
            }
            Ty::EtherType => match (text, num) {
                (Some("arp"), _) => 0x0806u16.to_be_bytes().to_vec(),
                (Some("ip"), _) => 0x0800u16.to_be_bytes().to_vec(),
                (Some("ip6"), _) => 0x86ddu16.to_be_bytes().to_vec(),
                (_, Some(n)) => (n as u16).to_be_bytes().to_vec(),
                _ => return Err(bad()),
            },
            Ty::L4proto => vec![match (text, num) {
                (Some("tcp"), _) => 6,
                (Some("udp"), _) => 17,
                (Some("icmp"), _) => 1,
                (Some("ipv6-icmp" | "icmpv6"), _) => 58,
                (_, Some(n)) => n as u8,
                _ => return Err(bad()),
            }],
            Ty::Ipv4 | Ty::Ipv6 => {
                let addr: IpAddr = text.ok_or_else(bad)?.parse().map_err(|_| bad())?;
                match (self, addr) {
                    (Ty::Ipv4, IpAddr::V4(a)) => a.octets().to_vec(),
                    (Ty::Ipv6, IpAddr::V6(a)) => a.octets().to_vec(),
                    _ => return Err(bad()),
                }
            }
            Ty::Service => (num.ok_or_else(bad)? as u16).to_be_bytes().to_vec(),
            Ty::Icmpv6Type => vec![match (text, num) {
                (Some("nd-router-solicit"), _) => 133,
                (Some("nd-router-advert"), _) => 134,
                (Some("nd-neighbor-solicit"), _) => 135,
                (Some("nd-neighbor-advert"), _) => 136,
                (_, Some(n)) => n as u8,
                _ => return Err(bad()),
            }],
            Ty::CtState => {
                let bit = |s: &str| -> Result<u32, String> {
                    Ok(match s {
                        "invalid" => 1,
                        "established" => 2,
                        "related" => 4,
                        "new" => 8,
                        "untracked" => 64,
                        _ => return Err(bad()),
                    })
                };
                let mask = match v {
                    Value::Array(items) => items.iter().try_fold(0, |m, i| {
                        Ok::<_, String>(m | bit(i.as_str().ok_or_else(bad)?)?)
                    })?,
                    _ => bit(text.ok_or_else(bad)?)?,
                };
                mask.to_ne_bytes().to_vec()
            }
        })
    }
}

/// Pad a field of a concatenation to the 4-byte registers it occupies.
fn padded(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.resize((bytes.len() + 3) & !3, 0);
    bytes
}

/// One NFNL batch under construction, with a description of every message for errors.
#[derive(Default)]
struct Batch {
    buf: Vec<u8>,
    acked: Vec<u32>,
    what: Vec<(u32, String)>,
    seq: u32,
    /// Batch-local set ids (named and anonymous sets).
    set_id: u32,
}

impl Batch {
    fn raw(&mut self, kind: u16, flags: u16, family: u8, res_id: u16, attrs: &[u8]) -> u32 {
        push_message(
            &mut self.buf,
            &mut self.seq,
            (kind, flags),
            (family, res_id),
            attrs,
        )
    }

    fn msg(&mut self, kind: u16, flags: u16, family: u8, attrs: &[u8], what: String) {
        let seq = self.raw(
            (NFNL_SUBSYS_NFTABLES << 8) | kind,
            NLM_F_REQUEST | NLM_F_ACK | flags,
            family,
            0,
            attrs,
        );
        self.acked.push(seq);
        self.what.push((seq, what));
    }
}

fn nested(buf: &mut Vec<u8>, kind: u16, f: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    f(&mut inner);
    attr(buf, kind | NLA_F_NESTED, &inner);
}

fn be32(buf: &mut Vec<u8>, kind: u16, v: u32) {
    attr(buf, kind, &v.to_be_bytes());
}

fn string(buf: &mut Vec<u8>, kind: u16, s: &str) {
    attr(buf, kind, &cstr(s));
}

fn data_value(buf: &mut Vec<u8>, kind: u16, bytes: &[u8]) {
    nested(buf, kind, |d| attr(d, 1, bytes)); // NFTA_DATA_VALUE
}

/// Apply `nft` (a batch from `ruleset`) in one atomic netlink transaction. Blocking.
pub fn apply(nft: &nftables::schema::Nftables<'_>) -> Result<(), String> {
    let batch = encode(nft)?;
    if batch.acked.is_empty() {
        return Ok(());
    }
    send_batch(&batch.buf, &batch.acked).map_err(|(seq, e)| {
        let what = seq
            .and_then(|s| batch.what.iter().find(|(q, _)| *q == s))
            .map(|(_, w)| w.as_str());
        match what {
            Some(what) => format!("the kernel refused to {what}: {e}"),
            None => format!("cannot apply the nftables batch over netlink: {e}"),
        }
    })
}

/// The whole batch's messages, begin to end.
fn encode(nft: &nftables::schema::Nftables<'_>) -> Result<Batch, String> {
    let value = serde_json::to_value(nft).map_err(|e| format!("cannot read the batch: {e}"))?;
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
            return Err(format!("cannot translate {object}"));
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
                return Err(format!(
                    "cannot translate `{cmd} {kind}` to netlink: {object}"
                ))
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

fn family(obj: &Value) -> Result<u8, String> {
    match obj["family"].as_str() {
        Some("inet") => Ok(NFPROTO_INET),
        Some("netdev") => Ok(NFPROTO_NETDEV),
        other => Err(format!("family {other:?} is not supported")),
    }
}

fn text<'a>(obj: &'a Value, key: &str) -> Result<&'a str, String> {
    obj[key]
        .as_str()
        .ok_or_else(|| format!("{key} missing in {obj}"))
}

fn add_table(batch: &mut Batch, obj: &Value) -> Result<(), String> {
    let mut a = Vec::new();
    let name = text(obj, "name")?;
    string(&mut a, 1, name); // NFTA_TABLE_NAME
    be32(&mut a, 2, 0); // NFTA_TABLE_FLAGS
    let fam = family(obj)?;
    batch.msg(
        NFT_MSG_NEWTABLE,
        NLM_F_CREATE,
        fam,
        &a,
        format!("add table {name}"),
    );
    Ok(())
}

fn add_chain(batch: &mut Batch, obj: &Value) -> Result<(), String> {
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
            other => return Err(format!("hook {other} is not supported")),
        };
        string(&mut a, 7, obj["type"].as_str().unwrap_or("filter")); // NFTA_CHAIN_TYPE
        let policy = match obj["policy"].as_str() {
            Some("drop") => Some(0),
            Some("accept") => Some(1),
            None => None,
            Some(other) => return Err(format!("policy {other} is not supported")),
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

fn flush_chain(batch: &mut Batch, obj: &Value) -> Result<(), String> {
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

fn flush_set(batch: &mut Batch, obj: &Value) -> Result<(), String> {
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

fn add_counter(batch: &mut Batch, obj: &Value) -> Result<(), String> {
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

/// The named sets of this batch (and their key layout), for elements and lookups.
#[derive(Default)]
struct Sets(Vec<(String, u32, Vec<Ty>, u32)>);

impl Sets {
    fn get(&self, name: &str) -> Option<&(String, u32, Vec<Ty>, u32)> {
        self.0.iter().find(|(n, ..)| n == name)
    }
}

/// The key type of a set in nft's encoding, with the user data `nft` stores with it (the key's
/// byte order and, for a concatenation, its fields), so `nft list` prints it the same.
fn key_type(types: &[Ty]) -> Result<(u32, usize, Vec<u8>), String> {
    let mut id = 0;
    let mut len = 0;
    for t in types {
        id = (id << TYPE_BITS) | t.set_type()?;
        len += (t.len() + 3) & !3;
    }
    let udata = if types.len() == 1 {
        let order: u8 = if matches!(types[0], Ty::L4proto) {
            1
        } else {
            2
        };
        vec![0, 4, order, 0, 0, 0]
    } else {
        vec![0, 4, 0, 0, 0, 0, 3, 8, 0, 4, 13, 0, 0, 0, 1, 0]
    };
    if types.len() == 1 {
        len = types[0].len();
    }
    Ok((id, len, udata))
}

fn add_set(batch: &mut Batch, sets: &mut Sets, obj: &Value) -> Result<(), String> {
    let table = text(obj, "table")?;
    let name = text(obj, "name")?;
    let types = match &obj["type"] {
        Value::String(t) => vec![Ty::of_name(t)?],
        Value::Array(ts) => ts
            .iter()
            .map(|t| Ty::of_name(t.as_str().unwrap_or("?")))
            .collect::<Result<_, _>>()?,
        other => return Err(format!("set {name}: type {other} is not supported")),
    };
    let mut flags = 0;
    for f in obj["flags"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        flags |= match f.as_str() {
            Some("timeout") => NFT_SET_TIMEOUT,
            Some("interval") => NFT_SET_INTERVAL,
            other => return Err(format!("set {name}: flag {other:?} is not supported")),
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
fn element_key(types: &[Ty], v: &Value) -> Result<(Vec<u8>, Option<Vec<u8>>), String> {
    let fields: Vec<&Value> = match &v["concat"] {
        Value::Array(items) => items.iter().collect(),
        _ => vec![v],
    };
    if fields.len() != types.len() {
        return Err(format!("element {v} does not match the set's type"));
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
type PendingElem = (Vec<u8>, Option<Vec<u8>>, u32, Option<u64>);

/// `key + 1`, or None when it overflows (the range reaches the top of the space).
fn successor(key: &[u8]) -> Option<Vec<u8>> {
    let mut next = key.to_vec();
    for byte in next.iter_mut().rev() {
        if *byte == 0xff {
            *byte = 0;
        } else {
            *byte += 1;
            return Some(next);
        }
    }
    None
}

fn elements(batch: &mut Batch, sets: &Sets, obj: &Value, add: bool) -> Result<(), String> {
    let table = text(obj, "table")?;
    let name = text(obj, "name")?;
    let (_, flags, types, set_id) = sets
        .get(name)
        .cloned()
        .map(|(n, f, t, i)| (n, f, t, Some(i)))
        .or_else(|| known_set(name).map(|(f, t)| (name.to_string(), f, t, None)))
        .ok_or_else(|| format!("set {name} is not known to the netlink translator"))?;
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
                data_value(el, 1, key); // NFTA_SET_ELEM_KEY
                if let Some(end) = end {
                    data_value(el, 10, end); // NFTA_SET_ELEM_KEY_END
                }
                if let (true, Some(ms)) = (add, timeout) {
                    attr(el, 4, &ms.to_be_bytes()); // NFTA_SET_ELEM_TIMEOUT
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
fn known_set(name: &str) -> Option<(u32, Vec<Ty>)> {
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
        _ => return None,
    })
}

/// Rule expressions under construction.
struct Exprs<'a> {
    list: Vec<u8>,
    batch: &'a mut Batch,
    table: String,
    family: u8,
    /// The rule already loads `meta iiftype` for a link-layer field (nft does it once).
    link_dependency: bool,
}

impl Exprs<'_> {
    fn expr(&mut self, name: &str, f: impl FnOnce(&mut Vec<u8>)) {
        nested(&mut self.list, 1, |e| {
            string(e, 1, name); // NFTA_EXPR_NAME
            nested(e, 2, f); // NFTA_EXPR_DATA
        });
    }

    fn meta_load(&mut self, key: u32, reg: u32) {
        self.expr("meta", |d| {
            be32(d, 2, key); // NFTA_META_KEY
            be32(d, 1, reg); // NFTA_META_DREG
        });
    }

    fn cmp(&mut self, reg: u32, op: u32, bytes: &[u8]) {
        self.expr("cmp", |d| {
            be32(d, 1, reg); // NFTA_CMP_SREG
            be32(d, 2, op); // NFTA_CMP_OP
            data_value(d, 3, bytes); // NFTA_CMP_DATA
        });
    }

    fn payload(&mut self, base: u32, offset: u32, len: u32, reg: u32) {
        self.expr("payload", |d| {
            be32(d, 1, reg); // NFTA_PAYLOAD_DREG
            be32(d, 2, base); // NFTA_PAYLOAD_BASE
            be32(d, 3, offset); // NFTA_PAYLOAD_OFFSET
            be32(d, 4, len); // NFTA_PAYLOAD_LEN
        });
    }

    fn verdict(&mut self, code: u32) {
        self.expr("immediate", |d| {
            be32(d, 1, REG_VERDICT); // NFTA_IMMEDIATE_DREG
            nested(d, 2, |data| {
                // NFTA_IMMEDIATE_DATA
                nested(data, 2, |v| be32(v, 1, code)); // NFTA_DATA_VERDICT / CODE
            });
        });
    }

    /// Load what `left` names into registers from `reg` on (with nft's protocol
    /// dependencies); returns the types loaded.
    fn load(&mut self, left: &Value, reg: u32) -> Result<Vec<Ty>, String> {
        if let Some(meta) = left.get("meta") {
            let key = meta["key"].as_str().unwrap_or("");
            let (num, ty) = match key {
                "protocol" => (1, Ty::EtherType),
                "priority" => (2, Ty::U32),
                "mark" => (3, Ty::U32),
                "iif" => (4, Ty::Ifindex),
                "oif" => (5, Ty::Ifindex),
                "iifname" => (6, Ty::Ifname),
                "l4proto" => (16, Ty::L4proto),
                other => return Err(format!("meta {other} is not supported")),
            };
            self.meta_load(num, reg);
            return Ok(vec![ty]);
        }
        if let Some(fib) = left.get("fib") {
            let flags = fib["flags"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default();
            if fib["result"] != "type" || flags != [Value::from("saddr")] {
                return Err(format!("fib {fib} is not supported"));
            }
            self.expr("fib", |d| {
                be32(d, 1, reg); // NFTA_FIB_DREG
                be32(d, 2, 3); // NFTA_FIB_RESULT: NFT_FIB_RESULT_ADDRTYPE
                be32(d, 3, 1); // NFTA_FIB_FLAGS: NFTA_FIB_F_SADDR
            });
            return Ok(vec![Ty::AddrType]);
        }
        if let Some(ct) = left.get("ct") {
            if ct["key"] != "state" {
                return Err(format!("ct {} is not supported", ct["key"]));
            }
            self.expr("ct", |d| {
                be32(d, 2, 0); // NFTA_CT_KEY: state
                be32(d, 1, reg); // NFTA_CT_DREG
            });
            return Ok(vec![Ty::CtState]);
        }
        if let Some(p) = left.get("payload") {
            let proto = p["protocol"].as_str().unwrap_or("");
            let field = p["field"].as_str().unwrap_or("");
            let (base, offset, ty) = match (proto, field) {
                ("ip", "saddr") => (1, 12, Ty::Ipv4),
                ("ip", "daddr") => (1, 16, Ty::Ipv4),
                ("ip6", "saddr") => (1, 8, Ty::Ipv6),
                ("ip6", "daddr") => (1, 24, Ty::Ipv6),
                ("th" | "tcp" | "udp", "dport") => (2, 2, Ty::Service),
                ("th" | "tcp" | "udp", "sport") => (2, 0, Ty::Service),
                ("icmpv6", "type") => (2, 0, Ty::Icmpv6Type),
                ("ether", "saddr") => (0, 6, Ty::Ether),
                ("ether", "type") => (0, 12, Ty::EtherType),
                ("arp", "saddr ether") => (1, 8, Ty::Ether),
                ("arp", "saddr ip") => (1, 14, Ty::Ipv4),
                other => return Err(format!("payload {other:?} is not supported")),
            };
            // nft's dependency for a link-layer field in a netdev table: an Ethernet device
            // (`meta iiftype`, ARPHRD_ETHER). The `arp` fields' (`meta protocol arp`) comes
            // from the rule itself.
            if proto == "ether" && self.family == NFPROTO_NETDEV && !self.link_dependency {
                self.meta_load(8, REG_1);
                self.cmp(REG_1, 0, &1u16.to_ne_bytes());
                self.link_dependency = true;
            }
            // The dependencies nft adds in an inet table.
            if self.family == NFPROTO_INET {
                match proto {
                    "ip" => {
                        self.meta_load(15, REG_1);
                        self.cmp(REG_1, 0, &[2]);
                    }
                    "ip6" => {
                        self.meta_load(15, REG_1);
                        self.cmp(REG_1, 0, &[10]);
                    }
                    "tcp" | "udp" => {
                        self.meta_load(16, REG_1);
                        self.cmp(REG_1, 0, &[if proto == "tcp" { 6 } else { 17 }]);
                    }
                    "icmpv6" => {
                        self.meta_load(15, REG_1);
                        self.cmp(REG_1, 0, &[10]);
                        self.meta_load(16, REG_1);
                        self.cmp(REG_1, 0, &[58]);
                    }
                    _ => {}
                }
            }
            self.payload(base, offset, ty.len() as u32, reg);
            return Ok(vec![ty]);
        }
        if let Some(Value::Array(fields)) = left.get("concat") {
            // Protocol dependencies first (nft emits them before the loads), then the
            // fields, each in the register after the previous one's 4-byte words.
            let mut types = Vec::new();
            let mut offset = 0usize;
            for f in fields {
                let r = if offset.is_multiple_of(16) {
                    REG_1 + (offset / 16) as u32 + reg - REG_1
                } else {
                    REG32_00 + (offset / 4) as u32
                };
                let t = self.load(f, r)?;
                offset += (t[0].len() + 3) & !3;
                types.extend(t);
            }
            return Ok(types);
        }
        Err(format!("cannot match on {left}"))
    }

    fn lookup(&mut self, set: &str, id: Option<u32>, reg: u32, invert: bool) {
        self.expr("lookup", |d| {
            be32(d, 2, reg); // NFTA_LOOKUP_SREG
            string(d, 1, set); // NFTA_LOOKUP_SET
            if let Some(id) = id {
                be32(d, 4, id); // NFTA_LOOKUP_SET_ID
            }
            if invert {
                be32(d, 5, 1); // NFTA_LOOKUP_FLAGS: invert
            }
        });
    }

    fn anon_set(&mut self, ty: Ty, items: &[Value]) -> Result<u32, String> {
        self.batch.set_id += 1;
        let id = self.batch.set_id;
        let mut keys = items
            .iter()
            .map(|i| ty.encode(i))
            .collect::<Result<Vec<_>, _>>()?;
        keys.dedup();
        let udata: Vec<u8> = match ty {
            Ty::L4proto => vec![
                0, 4, 1, 0, 0, 0, 3, 14, 0, 4, 9, 0, 0, 0, 1, 6, 0, 4, 16, 0, 0, 0,
            ],
            Ty::Icmpv6Type => vec![
                0, 4, 2, 0, 0, 0, 3, 20, 0, 4, 7, 0, 0, 0, 1, 12, 0, 4, 14, 0, 0, 0, 1, 4, 1, 0, 0,
                0,
            ],
            _ => vec![0, 4, 2, 0, 0, 0],
        };
        let mut a = Vec::new();
        string(&mut a, 1, &self.table);
        string(&mut a, 2, "__set%d");
        be32(&mut a, 3, NFT_SET_ANONYMOUS | NFT_SET_CONSTANT);
        be32(&mut a, 4, ty.set_type()?);
        be32(&mut a, 5, ty.len() as u32);
        be32(&mut a, 10, id);
        nested(&mut a, 9, |desc| be32(desc, 1, keys.len() as u32));
        attr(&mut a, 13, &udata);
        let fam = self.family;
        self.batch.msg(
            NFT_MSG_NEWSET,
            NLM_F_CREATE,
            fam,
            &a,
            "add an anonymous set".into(),
        );
        let mut a = Vec::new();
        string(&mut a, 1, &self.table);
        string(&mut a, 2, "__set%d");
        be32(&mut a, 4, id);
        nested(&mut a, 3, |list| {
            for key in &keys {
                nested(list, 1, |el| data_value(el, 1, key));
            }
        });
        self.batch.msg(
            NFT_MSG_NEWSETELEM,
            NLM_F_CREATE,
            fam,
            &a,
            "add the elements of an anonymous set".into(),
        );
        Ok(id)
    }

    fn statement(&mut self, stmt: &Value, sets: &Sets) -> Result<(), String> {
        let Some((kind, body)) = stmt.as_object().and_then(|o| o.iter().next()) else {
            return Err(format!("cannot translate statement {stmt}"));
        };
        match kind.as_str() {
            "accept" => self.verdict(1),
            "drop" => self.verdict(0),
            "counter" => match body {
                Value::String(name) => {
                    let name = name.clone();
                    self.expr("objref", |d| {
                        be32(d, 1, 1); // NFTA_OBJREF_IMM_TYPE: counter
                        string(d, 2, &name); // NFTA_OBJREF_IMM_NAME
                    });
                }
                _ => self.expr("counter", |_| {}),
            },
            "log" => {
                let prefix = body["prefix"].as_str().map(str::to_string);
                let group = body["group"].as_u64();
                self.expr("log", |d| {
                    if let Some(prefix) = &prefix {
                        string(d, 2, prefix); // NFTA_LOG_PREFIX
                    }
                    if let Some(group) = group {
                        attr(d, 1, &(group as u16).to_be_bytes()); // NFTA_LOG_GROUP
                    }
                });
            }
            "reject" => {
                let (ty, code) = match (body["type"].as_str(), body["expr"].as_str()) {
                    (Some("tcp reset"), _) => (1, None),
                    (Some("icmpx"), Some("admin-prohibited")) => (2, Some(3u8)),
                    (Some("icmpx"), Some("port-unreachable") | None) => (2, Some(1)),
                    other => return Err(format!("reject {other:?} is not supported")),
                };
                self.expr("reject", |d| {
                    be32(d, 1, ty); // NFTA_REJECT_TYPE
                    if let Some(code) = code {
                        attr(d, 2, &[code]); // NFTA_REJECT_ICMP_CODE
                    }
                });
            }
            "mangle" => {
                let key = match body["key"]["meta"]["key"].as_str() {
                    Some("mark") => 3,
                    Some("priority") => 2,
                    other => return Err(format!("meta set {other:?} is not supported")),
                };
                let value = body["value"]
                    .as_u64()
                    .ok_or_else(|| format!("meta set value {} is not a number", body["value"]))?;
                self.expr("immediate", |d| {
                    be32(d, 1, REG_1);
                    data_value(d, 2, &(value as u32).to_ne_bytes());
                });
                self.expr("meta", |d| {
                    be32(d, 2, key);
                    be32(d, 3, REG_1); // NFTA_META_SREG
                });
            }
            "match" => self.matching(body, sets)?,
            other => return Err(format!("statement {other} is not supported")),
        }
        Ok(())
    }

    fn matching(&mut self, m: &Value, sets: &Sets) -> Result<(), String> {
        let op = m["op"].as_str().unwrap_or("==");
        let right = &m["right"];
        // An anonymous set on the right: nft loads the left first, then creates the set.
        if let Some(Value::Array(items)) = right.get("set") {
            let types = self.load(&m["left"], REG_1)?;
            let [ty] = types[..] else {
                return Err("an anonymous set of concatenations is not supported".into());
            };
            if items.len() == 1 {
                let value = ty.encode(&items[0])?;
                self.cmp(REG_1, if op == "!=" { 1 } else { 0 }, &value);
                return Ok(());
            }
            let id = self.anon_set(ty, items)?;
            self.lookup("__set%d", Some(id), REG_1, op == "!=");
            return Ok(());
        }
        if let Some(set) = right.as_str().and_then(|r| r.strip_prefix('@')) {
            self.load(&m["left"], REG_1)?;
            let id = sets.get(set).map(|s| s.3);
            self.lookup(set, id, REG_1, op == "!=");
            return Ok(());
        }
        let types = self.load(&m["left"], REG_1)?;
        let [ty] = types[..] else {
            return Err(format!("cannot compare a concatenation with {right}"));
        };
        if ty == Ty::CtState || op == "in" {
            // `ct state { established, related }`: a bit test, as nft writes it.
            let mask = ty.encode(right)?;
            let len = mask.len() as u32;
            self.expr("bitwise", |d| {
                be32(d, 1, REG_1); // NFTA_BITWISE_SREG
                be32(d, 2, REG_1); // NFTA_BITWISE_DREG
                be32(d, 3, len); // NFTA_BITWISE_LEN
                data_value(d, 4, &mask); // NFTA_BITWISE_MASK
                data_value(d, 5, &vec![0; mask.len()]); // NFTA_BITWISE_XOR
            });
            let zero = vec![0; len as usize];
            self.cmp(REG_1, if op == "!=" { 0 } else { 1 }, &zero);
            return Ok(());
        }
        let value = ty.encode(right)?;
        let op = match op {
            "==" => 0,
            "!=" => 1,
            other => return Err(format!("operator {other} is not supported")),
        };
        self.cmp(REG_1, op, &value);
        Ok(())
    }
}

fn add_rule(batch: &mut Batch, sets: &Sets, obj: &Value) -> Result<(), String> {
    let table = text(obj, "table")?.to_string();
    let chain = text(obj, "chain")?.to_string();
    let family = family(obj)?;
    let mut exprs = Exprs {
        list: Vec::new(),
        batch,
        table: table.clone(),
        family,
        link_dependency: false,
    };
    for stmt in obj["expr"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        exprs
            .statement(stmt, sets)
            .map_err(|e| format!("rule in chain {table} {chain}: {e}"))?;
    }
    let list = exprs.list;
    let mut a = Vec::new();
    string(&mut a, 1, &table); // NFTA_RULE_TABLE
    string(&mut a, 2, &chain); // NFTA_RULE_CHAIN
    attr(&mut a, 4 | NLA_F_NESTED, &list); // NFTA_RULE_EXPRESSIONS
    batch.msg(
        NFT_MSG_NEWRULE,
        NLM_F_CREATE | NLM_F_APPEND,
        family,
        &a,
        format!("add a rule to chain {table} {chain}: {}", obj["expr"]),
    );
    Ok(())
}

// ---- Reading back: dumps over netlink, compared with what was sent. ----

const NFT_MSG_GETCHAIN: u16 = 4;
const NFT_MSG_GETRULE: u16 = 7;
const NFT_MSG_GETSET: u16 = 10;
const NFT_MSG_GETSETELEM: u16 = 13;
const NFT_MSG_GETOBJ: u16 = 19;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;

/// Attributes of a message body: (type without flags, payload).
fn parse(mut buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let len = u16::from_ne_bytes([buf[0], buf[1]]) as usize;
        let kind = u16::from_ne_bytes([buf[2], buf[3]]) & 0x3fff;
        if len < 4 || len > buf.len() {
            break;
        }
        out.push((kind, &buf[4..len]));
        buf = &buf[((len + 3) & !3).min(buf.len())..];
    }
    out
}

fn get<'a>(attrs: &[(u16, &'a [u8])], kind: u16) -> Option<&'a [u8]> {
    attrs.iter().find(|(k, _)| *k == kind).map(|(_, v)| *v)
}

fn get_str(attrs: &[(u16, &[u8])], kind: u16) -> String {
    get(attrs, kind)
        .map(|v| String::from_utf8_lossy(v.split(|b| *b == 0).next().unwrap_or(&[])).into_owned())
        .unwrap_or_default()
}

fn get_be32(attrs: &[(u16, &[u8])], kind: u16) -> Option<u32> {
    get(attrs, kind).and_then(|v| Some(u32::from_be_bytes(v.get(..4)?.try_into().ok()?)))
}

/// The bodies (after the nfgenmsg) of a dump's answers.
fn dump(kind: u16, family: u8, request: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    use netlink_sys::{protocols::NETLINK_NETFILTER, Socket};
    let fail = |e: std::io::Error| format!("cannot read the nftables ruleset over netlink: {e}");
    let mut socket = Socket::new(NETLINK_NETFILTER).map_err(fail)?;
    socket.bind_auto().map_err(fail)?;
    let mut msg = Batch::default();
    msg.raw(
        (NFNL_SUBSYS_NFTABLES << 8) | kind,
        NLM_F_REQUEST | NLM_F_DUMP,
        family,
        0,
        request,
    );
    socket.send(&msg.buf, 0).map_err(fail)?;
    let mut bodies = Vec::new();
    let mut buf = Vec::with_capacity(256 * 1024);
    loop {
        buf.clear();
        let len = socket.recv(&mut buf, 0).map_err(fail)?;
        let mut rest = &buf[..len.min(buf.len())];
        while rest.len() >= 16 {
            let msg_len = u32::from_ne_bytes(rest[0..4].try_into().unwrap()) as usize;
            let typ = u16::from_ne_bytes(rest[4..6].try_into().unwrap());
            if msg_len < 16 || msg_len > rest.len() {
                return Err("a malformed netlink answer".into());
            }
            match typ {
                NLMSG_DONE => return Ok(bodies),
                NLMSG_ERROR => {
                    let errno = i32::from_ne_bytes(rest[16..20].try_into().unwrap());
                    if errno != 0 {
                        return Err(fail(std::io::Error::from_raw_os_error(-errno)));
                    }
                }
                _ if msg_len >= 20 => bodies.push(rest[20..msg_len].to_vec()),
                _ => {}
            }
            rest = &rest[((msg_len + 3) & !3).min(rest.len())..];
        }
    }
}

fn table_request(table: &str) -> Vec<u8> {
    let mut a = Vec::new();
    string(&mut a, 1, table);
    a
}

/// One expression: its name and attributes (nested ones kept whole).
type Expr = (String, Vec<(u16, Vec<u8>)>);

/// A chain's hook number, priority, policy, type and device.
type ChainProps = (Option<u32>, Option<u32>, Option<u32>, String, String);
/// A set element as the kernel holds it: key, key end, flags.
type ElemKey = (Vec<u8>, Vec<u8>, u32);

/// A ruleset in the form both sides are compared in.
#[derive(Debug, Default, PartialEq)]
struct Canon {
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
fn elements_of(list: &[u8]) -> Vec<ElemKey> {
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
fn exprs_of(list: &[u8], anon: &std::collections::BTreeMap<String, Vec<Vec<u8>>>) -> Vec<Expr> {
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
fn flatten(data: &mut [(u16, Vec<u8>)], name: &str) {
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

fn chain_of(attrs: &[(u16, &[u8])]) -> ChainProps {
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
fn expected_canon(batch: &Batch) -> (Canon, std::collections::BTreeSet<(u8, String)>) {
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
fn kernel_canon(
    tables: &std::collections::BTreeSet<(u8, String)>,
    want_elements: &[(String, String)],
) -> Result<Canon, String> {
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
pub fn verify(expected: &nftables::schema::Nftables<'_>) -> Result<(), String> {
    let batch = encode(expected)?;
    let (want, tables) = expected_canon(&batch);
    let refilled: Vec<(String, String)> = want.elements.keys().cloned().collect();
    let have = kernel_canon(&tables, &refilled)?;
    for (key, chain) in &want.chains {
        match have.chains.get(key) {
            None => return Err(format!("chain {} {} is missing", key.0, key.1)),
            Some(c) if c != chain => {
                return Err(format!(
                "chain {} {} is {c:?} (hook, priority, policy, type, device), expected {chain:?}",
                key.0, key.1
            ))
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
            return Err(format!("chain {} {} was not expected", key.0, key.1));
        }
    }
    for (key, props) in &want.sets {
        match have.sets.get(key) {
            Some(p) if p == props => {}
            other => {
                return Err(format!(
                    "set {} {} is {other:?} (flags, key type, key length), expected {props:?}",
                    key.0, key.1
                ))
            }
        }
    }
    for key in &want.counters {
        if !have.counters.contains(key) {
            return Err(format!("counter {} {} is missing", key.0, key.1));
        }
    }
    for (key, rules) in &want.rules {
        let got = have.rules.get(key).map(Vec::as_slice).unwrap_or(&[]);
        if got.len() != rules.len() {
            return Err(format!(
                "chain {} {} has {} rules, expected {}",
                key.0,
                key.1,
                got.len(),
                rules.len()
            ));
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
                return Err(format!(
                    "rule {} of chain {} {} differs from what was applied: [{}] became [{}] {diff}",
                    i + 1,
                    key.0,
                    key.1,
                    names(w),
                    names(g)
                ));
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
            return Err(format!(
                "set {} {} has {} elements, expected {}",
                key.0,
                key.1,
                got.len(),
                elems.len()
            ));
        }
    }
    Ok(())
}

fn get_be64(attrs: &[(u16, &[u8])], kind: u16) -> Option<u64> {
    get(attrs, kind).and_then(|v| Some(u64::from_be_bytes(v.get(..8)?.try_into().ok()?)))
}

/// A key's fields from a set's key type (nft's concatenation of 6-bit type ids).
fn key_types(key_type: u32) -> Vec<Ty> {
    let mut types = Vec::new();
    let mut t = key_type;
    while t != 0 {
        types.push(match t & ((1 << TYPE_BITS) - 1) {
            TYPE_IPADDR => Ty::Ipv4,
            TYPE_IP6ADDR => Ty::Ipv6,
            TYPE_INET_SERVICE => Ty::Service,
            TYPE_INET_PROTOCOL => Ty::L4proto,
            _ => Ty::U32,
        });
        t >>= TYPE_BITS;
    }
    types.reverse();
    types
}

/// One field's value as nft's JSON shows it.
fn render_field(ty: Ty, bytes: &[u8]) -> Value {
    match ty {
        Ty::Ipv4 if bytes.len() >= 4 => {
            Value::from(std::net::Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]).to_string())
        }
        Ty::Ipv6 if bytes.len() >= 16 => {
            let octets: [u8; 16] = bytes[..16].try_into().unwrap();
            Value::from(std::net::Ipv6Addr::from(octets).to_string())
        }
        Ty::Service if bytes.len() >= 2 => Value::from(u16::from_be_bytes([bytes[0], bytes[1]])),
        Ty::L4proto if !bytes.is_empty() => Value::from(bytes[0]),
        _ => Value::from(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

/// `lo..=hi` of one field as an address, a prefix, or a range.
fn render_range(ty: Ty, lo: &[u8], hi: &[u8]) -> Value {
    if lo == hi {
        return render_field(ty, lo);
    }
    let bits = lo.len() * 8;
    let mut len = bits;
    // The longest common prefix, valid if the rest is all zeros in lo and all ones in hi.
    for bit in 0..bits {
        let mask = 0x80 >> (bit % 8);
        if lo[bit / 8] & mask != hi[bit / 8] & mask {
            len = bit;
            break;
        }
    }
    let aligned = (len..bits).all(|bit| {
        let mask = 0x80 >> (bit % 8);
        lo[bit / 8] & mask == 0 && hi[bit / 8] & mask != 0
    });
    if aligned && matches!(ty, Ty::Ipv4 | Ty::Ipv6) {
        serde_json::json!({"prefix": {"addr": render_field(ty, lo), "len": len}})
    } else {
        serde_json::json!({"range": [render_field(ty, lo), render_field(ty, hi)]})
    }
}

/// `key - 1` (the last key of a range whose end element is `key`).
fn predecessor(key: &[u8]) -> Vec<u8> {
    let mut prev = key.to_vec();
    for byte in prev.iter_mut().rev() {
        if *byte == 0 {
            *byte = 0xff;
        } else {
            *byte -= 1;
            break;
        }
    }
    prev
}

/// The elements of one set, rendered as `nft -j list` renders them.
fn render_elements(types: &[Ty], flags: u32, raw: &[Vec<u8>]) -> Vec<Value> {
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

/// `inet <table>`'s sets (with their elements), named counters and rule counters, read over
/// netlink in the shape `nft -j list table` prints (what `sets::summarize` reads).
pub fn list_table_value(table: &str) -> Result<Value, String> {
    let request = table_request(table);
    let mut objects = vec![serde_json::json!({"table": {"family": "inet", "name": table}})];
    for body in dump(NFT_MSG_GETSET, NFPROTO_INET, &request)? {
        let a = parse(&body);
        let flags = get_be32(&a, 3).unwrap_or(0);
        if get_str(&a, 1) != table || flags & NFT_SET_ANONYMOUS != 0 {
            continue;
        }
        let name = get_str(&a, 2);
        let types = key_types(get_be32(&a, 4).unwrap_or(0));
        let mut req = Vec::new();
        string(&mut req, 1, table);
        string(&mut req, 2, &name);
        let mut raw = Vec::new();
        for body in dump(NFT_MSG_GETSETELEM, NFPROTO_INET, &req)? {
            let b = parse(&body);
            if let Some(list) = get(&b, 3) {
                raw.extend(parse(list).into_iter().map(|(_, e)| e.to_vec()));
            }
        }
        let elem = render_elements(&types, flags, &raw);
        let mut set = serde_json::json!({"family": "inet", "table": table, "name": name});
        if !elem.is_empty() {
            set["elem"] = Value::from(elem);
        }
        objects.push(serde_json::json!({ "set": set }));
    }
    for body in dump(NFT_MSG_GETOBJ, NFPROTO_INET, &request)? {
        let a = parse(&body);
        if get_str(&a, 1) != table || get_be32(&a, 3) != Some(1) {
            continue;
        }
        let data = get(&a, 4).map(parse).unwrap_or_default();
        objects.push(serde_json::json!({"counter": {
            "family": "inet", "table": table, "name": get_str(&a, 2),
            "packets": get_be64(&data, 2).unwrap_or(0), "bytes": get_be64(&data, 1).unwrap_or(0),
        }}));
    }
    for body in dump(NFT_MSG_GETRULE, NFPROTO_INET, &request)? {
        let a = parse(&body);
        if get_str(&a, 1) != table {
            continue;
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
        if !expr.is_empty() {
            objects.push(serde_json::json!({"rule": {
                "family": "inet", "table": table, "chain": get_str(&a, 2),
                "handle": get_be64(&a, 3).unwrap_or(0), "expr": expr,
            }}));
        }
    }
    Ok(serde_json::json!({ "nftables": objects }))
}
