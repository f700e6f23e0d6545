//! Opening resolved addresses in the dynamic sets over netlink: one NFNL batch (begin,
//! NFT_MSG_NEWSETELEM / NFT_MSG_DELSETELEM per set, end) on a NETLINK_NETFILTER socket, instead
//! of one `nft` process per DNS answer (a fork/exec plus JSON parsing cost about a millisecond
//! per answer). The batch is atomic: the kernel applies all of it or none, and every message is
//! acknowledged, so any error (no table, no set, no CAP_NET_ADMIN) fails the batch and the DNS
//! answer is SERVFAIL, as it was with `nft`.
//!
//! An element the guard has not pushed before is just added: a batch with a delete in it costs
//! the kernel a wait of several milliseconds at commit (measured: ~8 ms against ~30 µs for an
//! add alone), which the first lookup of a new name would pay. An element that may be there
//! already (a refresh) is added with its timeout, deleted and added again, as the `nft` batch
//! (`ruleset::add_addresses`) does: re-adding an existing element does not refresh its timeout
//! on every kernel, and the first add makes the delete never fail on an absent element.
//!
//! Written by hand: the netlink-packet-netfilter crate already in the tree covers NFLOG and
//! conntrack only, and `rustables` (0.9, the Rust nftables-over-netlink crate) generates its
//! bindings with `bindgen` at build time (a libclang build dependency, checked in its
//! Cargo.toml) and is GPL-3.0, for the whole nftables object model where this needs four
//! attributes of one message type. The ruleset itself stays typed `nftables` values, applied and
//! verified over netlink by the rest of `netlink` (which shares this module's wire and socket), and a listing
//! shows these elements with their expiry like any other.

use super::socket::send_batch;
use super::wire::{
    attr, cstr, push_message, NFNL_MSG_BATCH_BEGIN, NFNL_MSG_BATCH_END, NFNL_SUBSYS_NFTABLES,
    NFPROTO_INET, NFT_MSG_DELSETELEM, NFT_MSG_NEWSETELEM, NLA_F_NESTED, NLM_F_ACK, NLM_F_CREATE,
    NLM_F_REQUEST,
};
use crate::firewall::error::Error;
use crate::firewall::ruleset::{
    SET_ALLOW4, SET_ALLOW4_PORT, SET_ALLOW6, SET_ALLOW6_PORT, SET_INSPECT4, SET_INSPECT6, TABLE,
};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use yolo_protocol::allowlist::Ports;

const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_TIMEOUT: u16 = 4;
const NFTA_DATA_VALUE: u16 = 1;

/// Largest timeout, as the `nft` batches clamp it.
const MAX_TIMEOUT_SECS: u64 = u32::MAX as u64;

/// Add `addrs` for `timeout_secs` in one netlink batch; with `refresh` (some may be in the
/// sets already) as add + delete + add. Blocking: from async code use [`add_async`].
#[cfg(test)]
pub fn add(addrs: &[(IpAddr, Ports)], timeout_secs: u64, refresh: bool) -> Result<(), Error> {
    add_with_inspected(addrs, &[], timeout_secs, refresh)
}

/// [`add`], and `inspected` into the inspected sets (`inspect4`/`inspect6`: the addresses of
/// names the proxy inspects), in the same atomic batch.
pub fn add_with_inspected(
    addrs: &[(IpAddr, Ports)],
    inspected: &[IpAddr],
    timeout_secs: u64,
    refresh: bool,
) -> Result<(), Error> {
    match encode_with_inspected(addrs, inspected, timeout_secs, refresh) {
        Some(batch) => batch.send(),
        None => Ok(()),
    }
}

/// The whole batch for [`add`], begin to end; `None` when there is nothing to add.
#[cfg(test)]
pub(super) fn encode(addrs: &[(IpAddr, Ports)], timeout_secs: u64, refresh: bool) -> Option<Batch> {
    encode_with_inspected(addrs, &[], timeout_secs, refresh)
}

fn encode_with_inspected(
    addrs: &[(IpAddr, Ports)],
    inspected: &[IpAddr],
    timeout_secs: u64,
    refresh: bool,
) -> Option<Batch> {
    let mut by_set = keys(addrs);
    for addr in inspected {
        let (set, octets) = match addr {
            IpAddr::V4(a) => (SET_INSPECT4, a.octets().to_vec()),
            IpAddr::V6(a) => (SET_INSPECT6, a.octets().to_vec()),
        };
        by_set.entry(set).or_default().insert(octets);
    }
    if by_set.is_empty() {
        return None;
    }
    let timeout_ms = timeout_secs.clamp(1, MAX_TIMEOUT_SECS) * 1000;
    let mut batch = Batch::default();
    for (set, keys) in &by_set {
        batch.setelem(NFT_MSG_NEWSETELEM, set, keys, Some(timeout_ms));
        if refresh {
            batch.setelem(NFT_MSG_DELSETELEM, set, keys, None);
            batch.setelem(NFT_MSG_NEWSETELEM, set, keys, Some(timeout_ms));
        }
    }
    batch.message(
        NFNL_MSG_BATCH_END,
        NLM_F_REQUEST,
        0,
        NFNL_SUBSYS_NFTABLES,
        &[],
    );
    Some(batch)
}

/// [`add_with_inspected`] off the async runtime's threads.
pub async fn add_async(
    addrs: Vec<(IpAddr, Ports)>,
    inspected: Vec<IpAddr>,
    timeout_secs: u64,
    refresh: bool,
) -> Result<(), Error> {
    tokio::task::spawn_blocking(move || {
        add_with_inspected(&addrs, &inspected, timeout_secs, refresh)
    })
    .await?
}

/// Keys per dynamic set, without duplicates (a duplicate delete in one batch would fail it).
/// The kernel's key layout: each field of a concatenation padded to 4 bytes, port big-endian.
fn keys(addrs: &[(IpAddr, Ports)]) -> BTreeMap<&'static str, BTreeSet<Vec<u8>>> {
    let mut by_set: BTreeMap<&'static str, BTreeSet<Vec<u8>>> = BTreeMap::new();
    for (addr, ports) in addrs {
        let octets = match addr {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        match ports {
            Ports::Any => {
                let set = if addr.is_ipv4() {
                    SET_ALLOW4
                } else {
                    SET_ALLOW6
                };
                by_set.entry(set).or_default().insert(octets);
            }
            Ports::Only(list) => {
                let set = if addr.is_ipv4() {
                    SET_ALLOW4_PORT
                } else {
                    SET_ALLOW6_PORT
                };
                let entry = by_set.entry(set).or_default();
                for port in list {
                    let mut key = octets.clone();
                    key.extend_from_slice(&port.to_be_bytes());
                    key.extend_from_slice(&[0, 0]);
                    entry.insert(key);
                }
            }
        }
    }
    by_set
}

#[derive(Default)]
pub(super) struct Batch {
    pub(super) buf: Vec<u8>,
    /// Sequence numbers of the messages that must be acknowledged.
    acked: Vec<u32>,
    seq: u32,
}

impl Batch {
    fn message(&mut self, kind: u16, flags: u16, family: u8, res_id: u16, attrs: &[u8]) -> u32 {
        push_message(
            &mut self.buf,
            &mut self.seq,
            (kind, flags),
            (family, res_id),
            attrs,
        )
    }

    fn setelem(&mut self, kind: u16, set: &str, keys: &BTreeSet<Vec<u8>>, timeout_ms: Option<u64>) {
        if self.buf.is_empty() {
            self.message(
                NFNL_MSG_BATCH_BEGIN,
                NLM_F_REQUEST,
                0,
                NFNL_SUBSYS_NFTABLES,
                &[],
            );
        }
        let mut elements = Vec::new();
        for key in keys {
            let mut elem = Vec::new();
            // libnftnl's order (timeout, then key), so the bytes are nft's.
            if let Some(ms) = timeout_ms {
                attr(&mut elem, NFTA_SET_ELEM_TIMEOUT, &ms.to_be_bytes());
            }
            attr(&mut elem, NFTA_SET_ELEM_KEY | NLA_F_NESTED, &{
                let mut data = Vec::new();
                attr(&mut data, NFTA_DATA_VALUE, key);
                data
            });
            attr(&mut elements, NFTA_LIST_ELEM | NLA_F_NESTED, &elem);
        }
        let mut attrs = Vec::new();
        attr(&mut attrs, NFTA_SET_ELEM_LIST_TABLE, &cstr(TABLE));
        attr(&mut attrs, NFTA_SET_ELEM_LIST_SET, &cstr(set));
        attr(
            &mut attrs,
            NFTA_SET_ELEM_LIST_ELEMENTS | NLA_F_NESTED,
            &elements,
        );
        let mut flags = NLM_F_REQUEST | NLM_F_ACK;
        if kind == NFT_MSG_NEWSETELEM {
            flags |= NLM_F_CREATE;
        }
        let seq = self.message(
            (NFNL_SUBSYS_NFTABLES << 8) | kind,
            flags,
            NFPROTO_INET,
            0,
            &attrs,
        );
        self.acked.push(seq);
    }

    /// Send the batch (ended by [`encode`]) and wait for every acknowledgement; the first
    /// error wins.
    fn send(self) -> Result<(), Error> {
        // One kind of message per batch: the refusal needs no sequence number to be named.
        send_batch(&self.buf, &self.acked).map_err(|(seq, source)| match seq {
            Some(_) => Error::KernelRefused {
                what: format!("add set elements in table inet {TABLE}"),
                source,
            },
            None => Error::Socket {
                doing: "cannot add set elements in table inet yolo",
                source,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_kernel_layout_and_drop_duplicates() {
        let addrs = vec![
            ("192.0.2.1".parse().unwrap(), Ports::Any),
            ("192.0.2.1".parse().unwrap(), Ports::Any),
            ("192.0.2.2".parse().unwrap(), Ports::Only(vec![443, 80])),
            ("2001:db8::1".parse().unwrap(), Ports::Only(vec![22])),
        ];
        let keys = keys(&addrs);
        assert_eq!(keys[SET_ALLOW4].len(), 1);
        assert!(keys[SET_ALLOW4].contains(&vec![192, 0, 2, 1]));
        assert!(keys[SET_ALLOW4_PORT].contains(&vec![192, 0, 2, 2, 1, 187, 0, 0]));
        assert!(keys[SET_ALLOW4_PORT].contains(&vec![192, 0, 2, 2, 0, 80, 0, 0]));
        let v6 = keys[SET_ALLOW6_PORT].iter().next().unwrap();
        assert_eq!(v6.len(), 20);
        assert_eq!(&v6[16..], &[0, 22, 0, 0]);
        assert!(!keys.contains_key(SET_ALLOW6));
    }
}
