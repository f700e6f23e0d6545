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
//! verified over netlink by `nfnl` (which shares this module's batch sending), and a listing
//! shows these elements with their expiry like any other.

use crate::firewall::ruleset::{SET_ALLOW4, SET_ALLOW4_PORT, SET_ALLOW6, SET_ALLOW6_PORT, TABLE};
use netlink_sys::{protocols::NETLINK_NETFILTER, Socket};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use yolo_protocol::allowlist::Ports;

const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_DELSETELEM: u16 = 14;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_CREATE: u16 = 0x400;
const NLA_F_NESTED: u16 = 0x8000;
const NFPROTO_INET: u8 = 1;
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
pub fn add(addrs: &[(IpAddr, Ports)], timeout_secs: u64, refresh: bool) -> Result<(), String> {
    let by_set = keys(addrs);
    if by_set.is_empty() {
        return Ok(());
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
    batch.send()
}

/// [`add`] off the async runtime's threads.
pub async fn add_async(
    addrs: Vec<(IpAddr, Ports)>,
    timeout_secs: u64,
    refresh: bool,
) -> Result<(), String> {
    tokio::task::spawn_blocking(move || add(&addrs, timeout_secs, refresh))
        .await
        .map_err(|e| format!("netlink task failed: {e}"))?
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
struct Batch {
    buf: Vec<u8>,
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
            attr(&mut elem, NFTA_SET_ELEM_KEY | NLA_F_NESTED, &{
                let mut data = Vec::new();
                attr(&mut data, NFTA_DATA_VALUE, key);
                data
            });
            if let Some(ms) = timeout_ms {
                attr(&mut elem, NFTA_SET_ELEM_TIMEOUT, &ms.to_be_bytes());
            }
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

    /// Send the batch and wait for every acknowledgement; the first error wins.
    fn send(mut self) -> Result<(), String> {
        self.message(
            NFNL_MSG_BATCH_END,
            NLM_F_REQUEST,
            0,
            NFNL_SUBSYS_NFTABLES,
            &[],
        );
        send_batch(&self.buf, &self.acked).map_err(|(_, e)| {
            format!("cannot add set elements in table inet {TABLE} over netlink: {e}")
        })
    }
}

/// Send a whole NFNL batch (`buf`, begin to end) on a new NETLINK_NETFILTER socket and wait
/// for the acknowledgement of every sequence number in `acked`. The first error wins and comes
/// with the sequence number of the message the kernel refused (None: the socket failed).
pub(crate) fn send_batch(buf: &[u8], acked: &[u32]) -> Result<(), (Option<u32>, std::io::Error)> {
    let fail = |e: std::io::Error| (None, e);
    let mut socket = Socket::new(NETLINK_NETFILTER).map_err(fail)?;
    socket.bind_auto().map_err(fail)?;
    // A kernel that never answers must not hang the caller forever.
    let limit = libc::timeval {
        tv_sec: 2,
        tv_usec: 0,
    };
    // SAFETY: a valid socket and a timeval of the size passed.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&limit as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
    }
    socket.send(buf, 0).map_err(fail)?;
    let mut first_error = None;
    let mut pending: BTreeSet<u32> = acked.iter().copied().collect();
    let mut rbuf = Vec::with_capacity(64 * 1024);
    while !pending.is_empty() {
        rbuf.clear();
        let len = socket.recv(&mut rbuf, 0).map_err(fail)?;
        let mut rest = &rbuf[..len.min(rbuf.len())];
        while rest.len() >= 16 {
            let msg_len = u32::from_ne_bytes(rest[0..4].try_into().unwrap()) as usize;
            let kind = u16::from_ne_bytes(rest[4..6].try_into().unwrap());
            let seq = u32::from_ne_bytes(rest[8..12].try_into().unwrap());
            if msg_len < 16 || msg_len > rest.len() {
                break;
            }
            if kind == NLMSG_ERROR && msg_len >= 20 {
                let errno = i32::from_ne_bytes(rest[16..20].try_into().unwrap());
                if errno != 0 && first_error.is_none() {
                    first_error = Some((Some(seq), std::io::Error::from_raw_os_error(-errno)));
                }
                pending.remove(&seq);
            }
            rest = &rest[((msg_len + 3) & !3).min(rest.len())..];
        }
        // A failed batch is aborted as a whole; its error names the cause.
        if first_error.is_some() {
            break;
        }
    }
    match first_error {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// One nfnetlink message appended to `buf`: the netlink header (`kind`, `flags`, the batch's
/// next sequence number, taken from `seq` and returned), `struct nfgenmsg` (`family`, version 0,
/// `res_id` big-endian), then `attrs`.
pub(crate) fn push_message(
    buf: &mut Vec<u8>,
    seq: &mut u32,
    (kind, flags): (u16, u16),
    (family, res_id): (u8, u16),
    attrs: &[u8],
) -> u32 {
    *seq += 1;
    let seq = *seq;
    let len = 16 + 4 + attrs.len();
    buf.extend_from_slice(&(len as u32).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(&flags.to_ne_bytes());
    buf.extend_from_slice(&seq.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes());
    buf.push(family);
    buf.push(0);
    buf.extend_from_slice(&res_id.to_be_bytes());
    buf.extend_from_slice(attrs);
    seq
}

/// A netlink attribute (length, type, payload padded to 4 bytes).
pub(crate) fn attr(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    buf.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize((buf.len() + 3) & !3, 0);
}

pub(crate) fn cstr(s: &str) -> Vec<u8> {
    let mut bytes = s.as_bytes().to_vec();
    bytes.push(0);
    bytes
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
