//! Dropped packets, as the ruleset logs them to an NFLOG group: read them from netlink and turn
//! each into a `blocked` audit event naming the destination and the name that last resolved to
//! it. Requests are built with `netlink-packet-netfilter`; received messages are parsed here by
//! hand with bounds checks everywhere, since the kernel hands us (a prefix of) arbitrary packets.
//!
//! Not here: folding repeats (`events` and `fold` do that). The ruleset logs every refused
//! packet, so every distinct attempt reaches this reader; the kernel's only bound is this
//! socket's buffer, and what it drops shows as a sequence gap, reported as `nflog_dropped`.

use crate::audit::events::{guard_event, Events};
use netlink_packet_netfilter::nflog::{
    config_request, ConfigCmd, ConfigFlags, ConfigMode, ConfigNla, Timeout,
};
use netlink_packet_netfilter::NetfilterProtoFamily;
use netlink_sys::{constants::NETLINK_NETFILTER, Socket};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use yolo_protocol::event::EventKind;

/// Bytes of each packet copied to us: IPv6 + a few extension headers + the L4 ports.
const COPY_RANGE: u32 = 256;
const NLMSG_ERROR: u16 = 2;
const NLMSG_HDRLEN: usize = 16;
const NFGENMSG_LEN: usize = 4;
/// NFNL_SUBSYS_ULOG << 8 | NFULNL_MSG_PACKET.
const NFULNL_PACKET: u16 = 4 << 8;
const NFULA_PAYLOAD: u16 = libc::NFULA_PAYLOAD as u16;
const NFULA_PREFIX: u16 = libc::NFULA_PREFIX as u16;
const NFULA_SEQ: u16 = libc::NFULA_SEQ as u16;

/// What a dropped packet tells: where it was going.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    pub proto: String,
    pub dst: IpAddr,
    pub port: Option<u16>,
    /// The log rule's prefix (`yolo-blocked`, `yolo-dns-bypass`, `yolo-unlisted`).
    pub prefix: String,
}

/// The destination of an IPv4 or IPv6 packet (prefix), or `None` when it is not one.
pub fn parse_packet(p: &[u8]) -> Option<Packet> {
    let (dst, proto, l4) = match p.first()? >> 4 {
        4 => {
            let ihl = usize::from(p.first()? & 0x0f) * 4;
            let dst: [u8; 4] = p.get(16..20)?.try_into().ok()?;
            // Only the first fragment carries the L4 header.
            let frag_offset = u16::from_be_bytes([*p.get(6)?, *p.get(7)?]) & 0x1fff;
            let l4 = if ihl >= 20 && frag_offset == 0 {
                p.get(ihl..)
            } else {
                None
            };
            (IpAddr::V4(Ipv4Addr::from(dst)), *p.get(9)?, l4)
        }
        6 => {
            let dst: [u8; 16] = p.get(24..40)?.try_into().ok()?;
            let (proto, l4) = skip_ipv6_extensions(*p.get(6)?, p.get(40..)?);
            (IpAddr::V6(Ipv6Addr::from(dst)), proto, l4)
        }
        _ => return None,
    };
    let port = match proto {
        6 | 17 | 132 | 136 => l4.and_then(|h| Some(u16::from_be_bytes([*h.get(2)?, *h.get(3)?]))),
        _ => None,
    };
    Some(Packet {
        proto: proto_name(proto, dst.is_ipv6()),
        dst,
        port,
        prefix: String::new(),
    })
}

/// Follow the IPv6 extension header chain to the upper-layer protocol.
fn skip_ipv6_extensions(mut next: u8, mut rest: &[u8]) -> (u8, Option<&[u8]>) {
    for _ in 0..8 {
        let len = match next {
            0 | 43 | 60 => match rest.get(1) {
                Some(l) => (usize::from(*l) + 1) * 8,
                None => return (next, None),
            },
            // Fragment header: the L4 header is only in the first fragment.
            44 => {
                let first = rest
                    .get(2..4)
                    .is_some_and(|o| u16::from_be_bytes([o[0], o[1]]) & 0xfff8 == 0);
                if !first {
                    return (rest.first().copied().unwrap_or(59), None);
                }
                8
            }
            _ => return (next, Some(rest)),
        };
        let Some(after) = rest.get(len..) else {
            return (next, None);
        };
        next = rest.first().copied().unwrap_or(59);
        rest = after;
    }
    (next, None)
}

fn proto_name(proto: u8, v6: bool) -> String {
    match (proto, v6) {
        (6, _) => "tcp".into(),
        (17, _) => "udp".into(),
        (1, false) => "icmp".into(),
        (58, true) => "icmpv6".into(),
        (132, _) => "sctp".into(),
        (136, _) => "udplite".into(),
        (n, _) => format!("ip-proto-{n}"),
    }
}

/// One NFLOG packet message: its sequence number (for loss counting) and payload.
#[derive(Debug, Default, PartialEq)]
pub struct Logged {
    pub seq: Option<u32>,
    pub packet: Option<Packet>,
}

/// All NFLOG packet messages in one netlink datagram; anything else is skipped.
pub fn parse_datagram(buf: &[u8]) -> Vec<Logged> {
    let mut out = Vec::new();
    let mut rest = buf;
    while rest.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let kind = u16::from_ne_bytes([rest[4], rest[5]]);
        if len < NLMSG_HDRLEN || len > rest.len() {
            break;
        }
        if kind == NFULNL_PACKET {
            if let Some(attrs) = rest.get(NLMSG_HDRLEN + NFGENMSG_LEN..len) {
                out.push(parse_attributes(attrs));
            }
        }
        rest = rest.get(align4(len)..).unwrap_or(&[]);
    }
    out
}

fn parse_attributes(mut attrs: &[u8]) -> Logged {
    let mut logged = Logged::default();
    let mut prefix = String::new();
    while attrs.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([attrs[0], attrs[1]]));
        let kind = u16::from_ne_bytes([attrs[2], attrs[3]]) & 0x3fff;
        let Some(value) = attrs.get(4..len.max(4)) else {
            break;
        };
        if len < 4 {
            break;
        }
        match kind {
            NFULA_PAYLOAD => logged.packet = parse_packet(value),
            NFULA_PREFIX => {
                let text = value.split(|b| *b == 0).next().unwrap_or_default();
                prefix = String::from_utf8_lossy(text).into_owned();
            }
            NFULA_SEQ if value.len() >= 4 => {
                logged.seq = Some(u32::from_be_bytes([value[0], value[1], value[2], value[3]]))
            }
            _ => {}
        }
        attrs = attrs.get(align4(len)..).unwrap_or(&[]);
    }
    if let Some(packet) = &mut logged.packet {
        packet.prefix = prefix;
    }
    logged
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// The NFLOG socket's receive buffer: about 10,000 logged packets waiting to be read.
const RX_BUF: usize = 8 << 20;

fn force_rx_buf(socket: &Socket, bytes: usize) {
    use std::os::fd::AsRawFd;
    if !force_receive_buffer(socket.as_raw_fd(), bytes) {
        let _ = socket.set_rx_buf_sz(bytes);
    }
}

/// `SO_RCVBUFFORCE` (past `net.core.rmem_max`; needs NET_ADMIN, which the guard has) on any
/// socket; false when refused, for the caller to fall back to `SO_RCVBUF`.
pub(crate) fn force_receive_buffer(fd: std::os::fd::RawFd, bytes: usize) -> bool {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: `fd` is the caller's open socket; a c_int option value of the right size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

/// A netlink socket bound to one NFLOG group.
pub struct Reader {
    socket: Socket,
    buf: Vec<u8>,
    last_seq: Option<u32>,
}

/// What one read returned: packets, and how many were lost before them (sequence gaps).
#[derive(Debug, Default)]
pub struct Batch {
    pub packets: Vec<Packet>,
    pub lost: u64,
}

impl Reader {
    /// Bind `group` in the current network namespace (needs NET_ADMIN). Fails with EBUSY when
    /// another process already holds the group.
    pub fn bind(group: u16) -> io::Result<Reader> {
        let mut socket = Socket::new(NETLINK_NETFILTER)?;
        socket.bind_auto()?;
        // Room for bursts; overflow shows up as ENOBUFS and sequence gaps, both reported.
        // FORCE (NET_ADMIN) goes past net.core.rmem_max, which is often only 208 KiB.
        force_rx_buf(&socket, RX_BUF);
        let reader = Reader {
            socket,
            buf: vec![0; 1 << 16],
            last_seq: None,
        };
        let nlas: Vec<ConfigNla> = vec![
            ConfigCmd::Bind.into(),
            ConfigFlags::SEQ.into(),
            ConfigMode::new_packet(COPY_RANGE).into(),
            // Deliver within 50 ms instead of the default second: the log is read live.
            Timeout::new(5).into(),
            ConfigNla::QThresh(16),
        ];
        reader.request(group, nlas)?;
        Ok(reader)
    }

    fn request(&self, group: u16, nlas: Vec<ConfigNla>) -> io::Result<()> {
        let message = config_request(NetfilterProtoFamily::Unspec, group, nlas);
        let mut buf = vec![0; message.header.length as usize];
        message.serialize(&mut buf);
        self.socket.send(&buf, 0)?;
        let mut ack = vec![0u8; 4096];
        let len = self.socket.recv(&mut &mut ack[..], 0)?;
        ack_result(&ack[..len])
    }

    /// Let [`Reader::read`] return an empty batch after `timeout` without a message.
    pub fn set_read_timeout(&self, timeout: std::time::Duration) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let tv = libc::timeval {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_usec: timeout.subsec_micros() as libc::suseconds_t,
        };
        // SAFETY: a valid socket and a timeval of the right size.
        let rc = unsafe {
            libc::setsockopt(
                self.socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Read one datagram. ENOBUFS (the kernel dropped messages for us) is not an error: the
    /// sequence gap on the next packet counts what was lost.
    pub fn read(&mut self) -> io::Result<Batch> {
        let len = match self.socket.recv(&mut &mut self.buf[..], 0) {
            Ok(len) => len,
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => return Ok(Batch::default()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(Batch::default())
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(Batch::default()),
            Err(e) => return Err(e),
        };
        let mut batch = Batch::default();
        for logged in parse_datagram(&self.buf[..len]) {
            if let Some(seq) = logged.seq {
                if let Some(last) = self.last_seq {
                    batch.lost += u64::from(seq.wrapping_sub(last).saturating_sub(1));
                }
                self.last_seq = Some(seq);
            }
            batch.packets.extend(logged.packet);
        }
        Ok(batch)
    }
}

/// The error code of a netlink ACK (`NLMSG_ERROR` with 0 = success).
fn ack_result(buf: &[u8]) -> io::Result<()> {
    let kind = buf.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let code = buf
        .get(16..20)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    match (kind, code) {
        (Some(NLMSG_ERROR), Some(0)) => Ok(()),
        (Some(NLMSG_ERROR), Some(code)) => Err(io::Error::from_raw_os_error(-code)),
        _ => Err(io::Error::other(
            "unexpected netlink answer to the NFLOG bind request",
        )),
    }
}

/// The audit event for a dropped packet.
/// `blocked` for packets the ruleset rejected; `connection` for the ones open mode let through
/// (logged with the `yolo-unlisted` prefix).
pub fn blocked_event(packet: Packet, name: Option<String>) -> EventKind {
    let (proto, dst, port) = (packet.proto, packet.dst.to_string(), packet.port);
    if packet.prefix == super::ruleset::LOG_PREFIX_UNLISTED {
        return EventKind::Connection {
            proto,
            dst,
            port,
            name,
            count: None,
            first: None,
            last: None,
        };
    }
    EventKind::Blocked {
        proto,
        dst,
        port,
        name,
        sample_of: None,
        count: None,
        first: None,
        last: None,
    }
}

/// How often lost log messages are reported: a flood overrunning the buffer makes one line a
/// second, not one per read.
const LOST_REPORT: std::time::Duration = std::time::Duration::from_secs(1);

/// Read `reader` on a thread of its own until the process ends, auditing every packet.
pub fn spawn(
    mut reader: Reader,
    events: Arc<Events>,
    name_of: impl Fn(&IpAddr) -> Option<String> + Send + 'static,
) -> io::Result<std::thread::JoinHandle<()>> {
    // Reads wake up at least this often, so lost messages are reported after a flood too.
    let _ = reader.set_read_timeout(LOST_REPORT);
    let mut lost = 0u64;
    let mut reported = std::time::Instant::now();
    std::thread::Builder::new()
        .name("yolo-nflog".into())
        .spawn(move || loop {
            match reader.read() {
                Ok(batch) => {
                    lost += batch.lost;
                    if lost > 0 && reported.elapsed() >= LOST_REPORT {
                        events.emit(guard_event("nflog_dropped", [("count", lost.into())]));
                        lost = 0;
                        reported = std::time::Instant::now();
                    }
                    for packet in batch.packets {
                        let name = name_of(&packet.dst);
                        events.emit(blocked_event(packet, name));
                    }
                }
                Err(e) => {
                    events.emit(guard_event(
                        "nflog_failed",
                        [("error", e.to_string().into())],
                    ));
                    return;
                }
            }
        })
}

#[cfg(test)]
#[path = "nflog_tests.rs"]
mod tests;
