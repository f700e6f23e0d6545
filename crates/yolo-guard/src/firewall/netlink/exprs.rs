//! A rule's statements as nf_tables expressions: loads (meta, payload, ct, fib) with the
//! protocol dependencies `nft` adds, comparisons, set lookups (named and anonymous), counters,
//! log, reject, meta set and verdicts, in the bytecode `nft -j -f -` makes for the same JSON.

use super::batch::{family, text, Batch, Sets};
use super::types::Ty;
use super::wire::*;
use crate::firewall::error::Error;
use serde_json::Value;

/// Rule expressions under construction.
pub(super) struct Exprs<'a> {
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
    fn load(&mut self, left: &Value, reg: u32) -> Result<Vec<Ty>, Error> {
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
                other => return Err(Error::translate(format!("meta {other} is not supported"))),
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
                return Err(Error::translate(format!("fib {fib} is not supported")));
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
                return Err(Error::translate(format!(
                    "ct {} is not supported",
                    ct["key"]
                )));
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
                other => {
                    return Err(Error::translate(format!(
                        "payload {other:?} is not supported"
                    )))
                }
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
        Err(Error::translate(format!("cannot match on {left}")))
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

    fn anon_set(&mut self, ty: Ty, items: &[Value]) -> Result<u32, Error> {
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

    fn statement(&mut self, stmt: &Value, sets: &Sets) -> Result<(), Error> {
        let Some((kind, body)) = stmt.as_object().and_then(|o| o.iter().next()) else {
            return Err(Error::translate(format!(
                "cannot translate statement {stmt}"
            )));
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
                    other => {
                        return Err(Error::translate(format!(
                            "reject {other:?} is not supported"
                        )))
                    }
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
                    other => {
                        return Err(Error::translate(format!(
                            "meta set {other:?} is not supported"
                        )))
                    }
                };
                let value = body["value"].as_u64().ok_or_else(|| {
                    Error::translate(format!("meta set value {} is not a number", body["value"]))
                })?;
                self.expr("immediate", |d| {
                    be32(d, 1, REG_1);
                    data_value(d, 2, &(value as u32).to_ne_bytes());
                });
                self.expr("meta", |d| {
                    be32(d, 2, key);
                    be32(d, 3, REG_1); // NFTA_META_SREG
                });
            }
            "redirect" => {
                let port = body["port"]
                    .as_u64()
                    .ok_or_else(|| Error::translate(format!("redirect {body} names no port")))?;
                self.expr("immediate", |d| {
                    be32(d, 1, REG_1);
                    data_value(d, 2, &(port as u16).to_be_bytes());
                });
                // What the kernel lists back: both registers and the flag it sets itself
                // (NF_NAT_RANGE_PROTO_SPECIFIED), so the verification compares like with like.
                self.expr("redir", |d| {
                    be32(d, 1, REG_1); // NFTA_REDIR_REG_PROTO_MIN
                    be32(d, 2, REG_1); // NFTA_REDIR_REG_PROTO_MAX
                    be32(d, 3, 2); // NFTA_REDIR_FLAGS
                });
            }
            "match" => self.matching(body, sets)?,
            other => {
                return Err(Error::translate(format!(
                    "statement {other} is not supported"
                )))
            }
        }
        Ok(())
    }

    fn matching(&mut self, m: &Value, sets: &Sets) -> Result<(), Error> {
        let op = m["op"].as_str().unwrap_or("==");
        let right = &m["right"];
        // An anonymous set on the right: nft loads the left first, then creates the set.
        if let Some(Value::Array(items)) = right.get("set") {
            let types = self.load(&m["left"], REG_1)?;
            let [ty] = types[..] else {
                return Err(Error::translate(
                    "an anonymous set of concatenations is not supported",
                ));
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
            return Err(Error::translate(format!(
                "cannot compare a concatenation with {right}"
            )));
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
            other => {
                return Err(Error::translate(format!(
                    "operator {other} is not supported"
                )))
            }
        };
        self.cmp(REG_1, op, &value);
        Ok(())
    }
}

pub(super) fn add_rule(batch: &mut Batch, sets: &Sets, obj: &Value) -> Result<(), Error> {
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
            .map_err(|e| Error::translate(format!("rule in chain {table} {chain}: {e}")))?;
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
