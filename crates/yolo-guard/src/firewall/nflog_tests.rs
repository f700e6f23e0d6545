use super::*;
use crate::testing::{can_use_netns, skip};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::Duration;

fn ipv4_tcp(dst: [u8; 4], port: u16) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x45;
    p[9] = 6;
    p[16..20].copy_from_slice(&dst);
    p[22..24].copy_from_slice(&port.to_be_bytes());
    p
}

#[test]
fn parses_ipv4_tcp_udp_icmp() {
    let p = parse_packet(&ipv4_tcp([192, 0, 2, 7], 443)).unwrap();
    assert_eq!(
        (p.proto.as_str(), p.dst.to_string().as_str(), p.port),
        ("tcp", "192.0.2.7", Some(443))
    );
    let mut udp = ipv4_tcp([192, 0, 2, 7], 53);
    udp[9] = 17;
    assert_eq!(parse_packet(&udp).unwrap().proto, "udp");
    let mut icmp = ipv4_tcp([192, 0, 2, 7], 0);
    icmp[9] = 1;
    assert_eq!(parse_packet(&icmp).unwrap().port, None);
    // A later fragment has no ports.
    let mut frag = ipv4_tcp([192, 0, 2, 7], 443);
    frag[7] = 0x10;
    assert_eq!(parse_packet(&frag).unwrap().port, None);
}

#[test]
fn parses_ipv6_through_extension_headers() {
    let mut p = vec![0u8; 40 + 8 + 8];
    p[0] = 0x60;
    p[6] = 0; // hop-by-hop
    p[24..40].copy_from_slice(&"2001:db8::9".parse::<Ipv6Addr>().unwrap().octets());
    p[40] = 6; // next: tcp
    p[41] = 0; // 8 bytes
    p[48 + 2..48 + 4].copy_from_slice(&8443u16.to_be_bytes());
    let packet = parse_packet(&p).unwrap();
    assert_eq!((packet.proto.as_str(), packet.port), ("tcp", Some(8443)));
    assert_eq!(packet.dst.to_string(), "2001:db8::9");
    // Truncated before the ports: address still known.
    assert_eq!(parse_packet(&p[..50]).unwrap().port, None);
}

#[test]
fn garbage_never_panics() {
    let mut seed = 7u64;
    for len in 0..2000usize {
        let bytes: Vec<u8> = (0..len % 300)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        let _ = parse_packet(&bytes);
        let _ = parse_datagram(&bytes);
        let mut framed = bytes.clone();
        if framed.len() >= 6 {
            let len = framed.len() as u32;
            framed[..4].copy_from_slice(&len.to_ne_bytes());
            framed[4..6].copy_from_slice(&NFULNL_PACKET.to_ne_bytes());
            let _ = parse_datagram(&framed);
        }
    }
}

#[test]
fn datagram_with_sequence_and_payload() {
    let payload = ipv4_tcp([127, 0, 0, 1], 9);
    let mut msg = vec![0u8; NLMSG_HDRLEN + NFGENMSG_LEN];
    let mut attr = |kind: u16, value: &[u8]| {
        msg.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        msg.extend_from_slice(&kind.to_ne_bytes());
        msg.extend_from_slice(value);
        msg.resize(align4(msg.len()), 0);
    };
    attr(NFULA_SEQ, &5u32.to_be_bytes());
    attr(NFULA_PAYLOAD, &payload);
    let len = msg.len() as u32;
    msg[..4].copy_from_slice(&len.to_ne_bytes());
    msg[4..6].copy_from_slice(&NFULNL_PACKET.to_ne_bytes());
    let mut two = msg.clone();
    two.extend_from_slice(&msg);
    let logged = parse_datagram(&two);
    assert_eq!(logged.len(), 2);
    assert_eq!(logged[0].seq, Some(5));
    assert_eq!(logged[0].packet.as_ref().unwrap().port, Some(9));
}

/// A network namespace of our own, deleted on drop.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Option<Netns> {
        let name = format!("yolo-guardtest-{tag}-{}", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .ok()?
            .success();
        ok.then_some(Netns(name))
    }
    fn exec(&self, args: &[&str], stdin: Option<&str>) -> bool {
        use std::io::Write;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.0])
            .args(args)
            .stdin(std::process::Stdio::piped());
        let Ok(mut child) = cmd.spawn() else {
            return false;
        };
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            let _ = pipe.write_all(text.as_bytes());
        }
        child.wait().is_ok_and(|s| s.success())
    }
    /// Run `f` on a thread that has entered the namespace.
    fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{}", self.0);
        std::thread::spawn(move || {
            let file = std::fs::File::open(&path).expect("netns file");
            // SAFETY: a valid netns fd; only this thread changes namespace.
            assert_eq!(
                unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) },
                0,
                "setns"
            );
            f()
        })
        .join()
        .expect("netns thread")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn reads_a_packet_dropped_in_a_private_namespace() {
    if let Err(why) = can_use_netns() {
        skip(why);
        return;
    }
    let Some(ns) = Netns::new("nflog") else {
        skip("cannot create a network namespace");
        return;
    };
    assert!(ns.exec(&["ip", "link", "set", "lo", "up"], None));
    let rules = "table inet t { chain o { type filter hook output priority 0; oif lo tcp dport 9 log prefix \"yolo-test\" group 4242 drop; }; }";
    assert!(ns.exec(&["nft", "-f", "-"], Some(rules)));
    let batch = ns.run(|| {
        let mut reader = Reader::bind(4242).expect("bind NFLOG group");
        reader.set_read_timeout(Duration::from_millis(200)).unwrap();
        // Dropped by the rule: the connect times out, the SYN is logged (perhaps retransmitted).
        let _ = std::net::TcpStream::connect_timeout(
            &"127.0.0.1:9".parse().unwrap(),
            Duration::from_millis(300),
        );
        let mut packets = Vec::new();
        for _ in 0..10 {
            packets.extend(reader.read().expect("read").packets);
            if !packets.is_empty() {
                break;
            }
        }
        packets
    });
    assert!(!batch.is_empty(), "the dropped SYN was logged");
    assert_eq!(
        batch[0],
        Packet {
            proto: "tcp".into(),
            dst: "127.0.0.1".parse().unwrap(),
            port: Some(9),
            prefix: "yolo-test".into(),
        }
    );
}

#[test]
fn open_mode_packets_are_connections_not_blocks() {
    let packet = |prefix: &str| Packet {
        proto: "tcp".into(),
        dst: "192.0.2.1".parse().unwrap(),
        port: Some(443),
        prefix: prefix.into(),
    };
    let unlisted = blocked_event(packet(crate::firewall::ruleset::LOG_PREFIX_UNLISTED), None);
    assert_eq!(unlisted.name(), "connection");
    let blocked = blocked_event(packet(crate::firewall::ruleset::LOG_PREFIX_BLOCKED), None);
    assert_eq!(blocked.name(), "blocked");
    let bypass = blocked_event(
        packet(crate::firewall::ruleset::LOG_PREFIX_DNS_BYPASS),
        None,
    );
    assert_eq!(bypass.name(), "blocked");
}
