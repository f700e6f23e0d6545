//! The guard's only exchanges with the kernel's nf_tables: a batch sent and every message
//! acknowledged (`send_batch`), and a dump request read to its end (`dump`).

use super::wire::*;
use crate::firewall::error::Error;
use netlink_sys::{protocols::NETLINK_NETFILTER, Socket};
use std::collections::BTreeSet;
use std::os::fd::AsRawFd;

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

/// The bodies (after the nfgenmsg) of a dump's answers.
pub(super) fn dump(kind: u16, family: u8, request: &[u8]) -> Result<Vec<Vec<u8>>, Error> {
    let fail = |source| Error::Socket {
        doing: "cannot read the nftables ruleset",
        source,
    };
    let mut socket = Socket::new(NETLINK_NETFILTER).map_err(fail)?;
    socket.bind_auto().map_err(fail)?;
    let mut msg = Vec::new();
    push_message(
        &mut msg,
        &mut 0,
        (
            (NFNL_SUBSYS_NFTABLES << 8) | kind,
            NLM_F_REQUEST | NLM_F_DUMP,
        ),
        (family, 0),
        request,
    );
    socket.send(&msg, 0).map_err(fail)?;
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
                return Err(Error::Malformed);
            }
            match typ {
                NLMSG_DONE => return Ok(bodies),
                NLMSG_ERROR => {
                    let errno = i32::from_ne_bytes(rest[16..20].try_into().unwrap());
                    if errno != 0 {
                        return Err(Error::KernelRefused {
                            what: "list the nftables ruleset".into(),
                            source: std::io::Error::from_raw_os_error(-errno),
                        });
                    }
                }
                _ if msg_len >= 20 => bodies.push(rest[20..msg_len].to_vec()),
                _ => {}
            }
            rest = &rest[((msg_len + 3) & !3).min(rest.len())..];
        }
    }
}
