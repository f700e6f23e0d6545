//! The translation against the bytes `nft` itself sends, so it is checked without root or a
//! kernel. The fixtures were captured once from nftables 1.0.6 in a throwaway network namespace:
//!
//! ```text
//! strace -f -e trace=sendmsg -e write=3 nft -f batch.nft
//! ```
//!
//! and copied as hex; each test names the `nft` input. What differs on purpose is compared
//! apart: the guard asks for an acknowledgement of every message (`NLM_F_ACK`), so an error
//! names the object the kernel refused, and numbers its messages from 1 after the batch's begin.

use super::encode::encode;
use super::list::{counter_value, named_set, rule_value, set_value};
use super::setelem;
use super::wire::NLM_F_ACK;
use serde_json::json;
use yolo_protocol::allowlist::Ports;

/// A netlink message as the tests compare it: type, flags without `NLM_F_ACK`, and everything
/// after the 16-byte header (the nfgenmsg and the attributes). The sequence number and port id
/// are left out: `nft` numbers from 0 and the kernel fills the port.
#[derive(Debug, PartialEq)]
struct Message {
    kind: u16,
    flags: u16,
    body: String,
}

fn messages(buf: &[u8]) -> Vec<Message> {
    let mut out = Vec::new();
    let mut rest = buf;
    while rest.len() >= 16 {
        let len = u32::from_ne_bytes(rest[0..4].try_into().unwrap()) as usize;
        assert!((16..=rest.len()).contains(&len), "message length {len}");
        out.push(Message {
            kind: u16::from_ne_bytes(rest[4..6].try_into().unwrap()),
            flags: u16::from_ne_bytes(rest[6..8].try_into().unwrap()) & !NLM_F_ACK,
            body: hex(&rest[16..len]),
        });
        rest = &rest[((len + 3) & !3).min(rest.len())..];
    }
    assert!(rest.is_empty(), "trailing bytes");
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(lines: &[&str]) -> Vec<u8> {
    let text: String = lines.concat();
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

fn batch(json: serde_json::Value) -> Vec<u8> {
    let nft: nftables::schema::Nftables = serde_json::from_value(json).unwrap();
    encode(&nft).unwrap().buf
}

/// `nft -f` of:
///
/// ```text
/// add table inet yolo
/// add chain inet yolo output { type filter hook output priority 0; policy drop; }
/// add set inet yolo allow4 { type ipv4_addr; flags timeout; }
/// add rule inet yolo output ip daddr @allow4 accept
/// add element inet yolo allow4 { 198.51.100.7 timeout 300s }
/// ```
///
/// 612 bytes: batch begin, NEWTABLE, NEWCHAIN, NEWSET, NEWRULE, NEWSETELEM, batch end.
const NFT_TABLE_CHAIN_SET_RULE_ELEMENT: &[&str] = &[
    "140000001000010000000000000000000000000a28000000000a010001000000000000000100000009000100796f6c6f",
    "00000000080002000000000054000000030a010402000000000000000100000009000100796f6c6f000000000b000300",
    "6f757470757400000b00070066696c746572000008000500000000001400048008000100000000030800020000000000",
    "58000000090a010403000000000000000100000009000100796f6c6f000000000b000200616c6c6f7734000008000300",
    "000000100800040000000007080005000000000408000a00000000010a000d00000402000000000014010000060a010c",
    "04000000000000000100000009000100796f6c6f000000000b0002006f75747075740000e80004802400018009000100",
    "6d6574610000000014000280080002000000000f08000100000000012c00018008000100636d70002000028008000100",
    "0000000108000200000000000c0003800500010002000000340001800c0001007061796c6f6164002400028008000100",
    "00000001080002000000000108000300000000100800040000000004300001800b0001006c6f6f6b7570000020000280",
    "08000200000000010b000100616c6c6f773400000800040000000001300001800e000100696d6d656469617465000000",
    "1c0002800800010000000000100002800c0002800800010000000001540000000c0a0104050000000000000001000000",
    "09000100796f6c6f000000000b000200616c6c6f773400000800040000000001200003801c0001800c00040000000000",
    "000493e00c00018008000100c6336407140000001100010006000000000000000000000a",
];

/// The same objects as typed values (what `nft -j` prints for them) encode to nft's messages:
/// the batch frame, a table, a base chain with hook, priority and policy, a named set with its
/// key type and user data, a rule (meta nfproto dependency, payload load, lookup of the set by
/// its batch id, accept) and an element with its timeout.
#[test]
fn a_table_chain_set_rule_and_element_encode_as_nft_sends_them() {
    let ours = batch(json!({"nftables": [
        {"add": {"table": {"family": "inet", "name": "yolo"}}},
        {"add": {"chain": {"family": "inet", "table": "yolo", "name": "output",
            "type": "filter", "hook": "output", "prio": 0, "policy": "drop"}}},
        {"add": {"set": {"family": "inet", "table": "yolo", "name": "allow4",
            "type": "ipv4_addr", "flags": ["timeout"]}}},
        {"add": {"rule": {"family": "inet", "table": "yolo", "chain": "output", "expr": [
            {"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "daddr"}},
                "right": "@allow4"}},
            {"accept": null}]}}},
        {"add": {"element": {"family": "inet", "table": "yolo", "name": "allow4",
            "elem": [{"elem": {"val": "198.51.100.7", "timeout": 300}}]}}},
    ]}));
    let nft = unhex(NFT_TABLE_CHAIN_SET_RULE_ELEMENT);
    assert_eq!(nft.len(), 612);
    let (ours, nft) = (messages(&ours), messages(&nft));
    assert_eq!(ours.len(), nft.len(), "{ours:#?}");
    let diff: Vec<_> = ours.iter().zip(&nft).filter(|(o, n)| o != n).collect();
    assert!(diff.is_empty(), "{diff:#?}");
}

// The kernel's answers to the dumps of `nft list table inet yolo` (nftables 1.0.6, Linux
// 6.x) after `nft -f` of:
//
//     add table inet yolo
//     add chain inet yolo output { type filter hook output priority 0; policy accept; }
//     add set inet yolo allow4 { type ipv4_addr; flags timeout; }
//     add set inet yolo allow4_port { type ipv4_addr . inet_service; flags timeout; }
//     add counter inet yolo accepted
//     add rule inet yolo output ip daddr @allow4 counter accept
//     add element inet yolo allow4 { 198.51.100.7 timeout 300s }
//     add element inet yolo allow4_port { 198.51.100.8 . 443 timeout 600s }
//
// captured with `strace -e trace=recvmsg -e read=3 nft list table inet yolo`: each constant is
// one message's body after its netlink header and nfgenmsg (what `socket::dump` returns).
// Decoded by hand: allow4 has flags 0x10 (timeout), key type 7 (ipv4_addr), key length 4; its
// element is key c6 33 64 07 (198.51.100.7), timeout 0x493e0 ms (300 s), expiration 0x48838 ms
// (297 s left); allow4_port's key type is 0x1cd (7 << 6 | 13: ipv4_addr . inet_service) and
// its element c6 33 64 08 01 bb 00 00 (198.51.100.8 . 443, the port padded to 4 bytes), timeout
// 0x927c0 ms (600 s), expiration 0x91c18 ms (597 s); the named counter `accepted` is type 1
// with 0 packets and 0 bytes; the rule (handle 5) is meta, cmp, payload, lookup, counter
// (0 packets, 0 bytes), immediate. The dump ends each set's elements with an empty list.
const SET_ALLOW4: &[&str] = &[
    "09000100796f6c6f000000000b000200616c6c6f773400000c0010000000000000000002080003000000001008000400",
    "0000000708000500000000040a000d000004020000000000040009001700130030786666666666666666383235303866",
    "343000000800140000000001",
];
const SET_ALLOW4_PORT: &[&str] = &[
    "09000100796f6c6f0000000010000200616c6c6f77345f706f7274000c00100000000000000000030800030000000010",
    "08000400000001cd080005000000000814000d00000400000000030800040d0000000100040009001700130030786666",
    "666666666666383235303866343000000800140000000001",
];
const ELEMENTS_ALLOW4: &[&str] = &[
    "09000100796f6c6f000000000b000200616c6c6f773400002c000300280001000c00010008000100c63364070c000400",
    "00000000000493e00c0005000000000000048838",
];
const ELEMENTS_ALLOW4_END: &[&str] = &["09000100796f6c6f000000000b000200616c6c6f7734000004000300"];
const ELEMENTS_ALLOW4_PORT: &[&str] = &[
    "09000100796f6c6f0000000010000200616c6c6f77345f706f727400300003002c000100100001000c000100c6336408",
    "01bb00000c00040000000000000927c00c0005000000000000091c18",
];
const ELEMENTS_ALLOW4_PORT_END: &[&str] =
    &["09000100796f6c6f0000000010000200616c6c6f77345f706f72740004000300"];
const COUNTER_ACCEPTED: &[&str] = &[
    "09000100796f6c6f000000000d00020061636365707465640000000008000300000000010c0006000000000000000004",
    "08000500000000001c0004000c00010000000000000000000c0002000000000000000000",
];
const RULE_OUTPUT: &[&str] = &[
    "09000100796f6c6f000000000b0002006f757470757400000c0003000000000000000005140104002400010009000100",
    "6d6574610000000014000200080002000000000f08000100000000012c00010008000100636d70002000020008000100",
    "0000000108000200000000000c0003000500010002000000340001000c0001007061796c6f6164002400020008000100",
    "00000001080002000000000108000300000000100800040000000004300001000b0001006c6f6f6b7570000020000200",
    "0b000100616c6c6f77340000080002000000000108000500000000002c0001000c000100636f756e746572001c000200",
    "0c00010000000000000000000c0002000000000000000000300001000e000100696d6d6564696174650000001c000200",
    "0800010000000000100002000c0002000800010000000001",
];

fn body(lines: &[&str]) -> Vec<u8> {
    unhex(lines)
}

#[test]
fn a_set_and_its_elements_decode_from_the_kernels_answers() {
    let allow4 = body(SET_ALLOW4);
    assert_eq!(named_set("yolo", &allow4).as_deref(), Some("allow4"));
    assert_eq!(named_set("other", &allow4), None, "a set of another table");
    let elements = [body(ELEMENTS_ALLOW4), body(ELEMENTS_ALLOW4_END)];
    assert_eq!(
        set_value("yolo", &allow4, &elements),
        json!({"set": {"family": "inet", "table": "yolo", "name": "allow4", "elem": [
            {"elem": {"val": "198.51.100.7", "timeout": 300, "expires": 297}}]}})
    );
    let port = body(SET_ALLOW4_PORT);
    let elements = [body(ELEMENTS_ALLOW4_PORT), body(ELEMENTS_ALLOW4_PORT_END)];
    assert_eq!(
        set_value("yolo", &port, &elements),
        json!({"set": {"family": "inet", "table": "yolo", "name": "allow4_port", "elem": [
            {"elem": {"val": {"concat": ["198.51.100.8", 443]}, "timeout": 600, "expires": 597}}]}})
    );
    assert_eq!(
        set_value("yolo", &allow4, &[body(ELEMENTS_ALLOW4_END)]),
        json!({"set": {"family": "inet", "table": "yolo", "name": "allow4"}}),
        "an empty set lists no elem"
    );
}

#[test]
fn a_named_counter_and_a_rules_counter_decode_from_the_kernels_answers() {
    assert_eq!(
        counter_value("yolo", &body(COUNTER_ACCEPTED)),
        Some(
            json!({"counter": {"family": "inet", "table": "yolo", "name": "accepted",
            "packets": 0, "bytes": 0}})
        )
    );
    assert_eq!(
        rule_value("yolo", &body(RULE_OUTPUT)),
        Some(
            json!({"rule": {"family": "inet", "table": "yolo", "chain": "output",
            "handle": 5, "expr": [{"counter": {"packets": 0, "bytes": 0}}]}})
        )
    );
    assert_eq!(rule_value("other", &body(RULE_OUTPUT)), None);
}

/// Bytes the kernel never sends (cut short, lengths past the end, zero lengths) decode to
/// nothing rather than panic: a listing is read in the guard, PID 1.
#[test]
fn truncated_answers_decode_without_panicking() {
    for whole in [
        body(SET_ALLOW4),
        body(ELEMENTS_ALLOW4),
        body(COUNTER_ACCEPTED),
        body(RULE_OUTPUT),
    ] {
        for len in 0..whole.len() {
            let cut = &whole[..len];
            let _ = named_set("yolo", cut);
            let _ = set_value("yolo", cut, &[cut.to_vec()]);
            let _ = counter_value("yolo", cut);
            let _ = rule_value("yolo", cut);
        }
    }
}

/// The DNS path's batch for one address against `nft -f` of
/// `add element inet yolo allow4 { 198.51.100.7 timeout 300s }` (the set existing already),
/// captured as above: begin, NEWSETELEM, end. `nft` also names the set by a batch id
/// (`NFTA_SET_ELEM_LIST_SET_ID`, the 8 bytes `08 00 04 00 00 00 00 01`), which only a set
/// created in the same batch needs; the guard's sets exist, so that attribute is taken out
/// of nft's message here.
#[test]
fn the_dns_paths_element_batch_encodes_as_nft_sends_it() {
    let nft = unhex(&[
        "140000001000010000000000000000000000000a",
        "540000000c0a010400000000000000000100000009000100796f6c6f000000000b000200616c6c6f7734000008000400",
        "00000001200003801c0001800c00040000000000000493e00c00018008000100c6336407",
        "140000001100010000000000000000000000000a",
    ]);
    let mut nft = messages(&nft);
    let set_id = "0800040000000001";
    assert!(nft[1].body.contains(set_id));
    nft[1].body = nft[1].body.replacen(set_id, "", 1);
    let ours = setelem::encode(&[("198.51.100.7".parse().unwrap(), Ports::Any)], 300, false)
        .expect("one address");
    assert_eq!(messages(&ours.buf), nft);
}

/// What the translator cannot express is refused by kind (`Translate`) and by name before
/// anything is sent, so a new kind of rule in `ruleset` cannot be mistranslated or be taken for
/// the kernel's refusal.
#[test]
fn what_the_translator_cannot_express_is_refused_as_translate_naming_it() {
    use crate::firewall::Error;
    let table = json!({"add": {"table": {"family": "inet", "name": "t"}}});
    let chain = json!({"add": {"chain": {"family": "inet", "table": "t", "name": "c"}}});
    let cases = [
        // A statement the ruleset never uses.
        (
            json!({"add": {"rule": {"family": "inet", "table": "t", "chain": "c",
                "expr": [{"masquerade": null}]}}}),
            "statement masquerade is not supported",
        ),
        // A set type it has no encoding for.
        (
            json!({"add": {"set": {"family": "inet", "table": "t", "name": "s",
                "type": "ether_addr"}}}),
            "set type ether_addr is not supported",
        ),
        // A value that does not fit its field.
        (
            json!({"add": {"rule": {"family": "inet", "table": "t", "chain": "c",
                "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip",
                "field": "daddr"}}, "right": "not-an-address"}}]}}}),
            "not-an-address",
        ),
        // A family the guard never writes.
        (
            json!({"add": {"table": {"family": "bridge", "name": "b"}}}),
            "family",
        ),
    ];
    for (object, named) in cases {
        let nft: nftables::schema::Nftables =
            serde_json::from_value(json!({"nftables": [table, chain, object]})).unwrap();
        match encode(&nft) {
            Err(Error::Translate(what)) => assert!(what.contains(named), "{what}"),
            Err(other) => panic!("{named}: not a translation error: {other:?}"),
            Ok(_) => panic!("{named}: translated"),
        }
    }
}
