//! The firewall against the kernel, each test in a throwaway network namespace (root, `nft`
//! and `ip netns`; skipped without them, unless `YOLO_REQUIRE_NETNS` is set): the ruleset
//! applied and verified, the DNS path's set updates, the AF_XDP hold, the NFLOG reader.

use super::batches::{Batches, Ruleset};
use super::netlink::setelem;
use super::{nflog, sets, xsk};
use crate::firewall::sets::dynamic_elements;
use crate::testing::{firewall_config, in_netns};
use std::time::Instant;
use yolo_protocol::allowlist::{Allowlist, Ports};
use yolo_protocol::NFLOG_GROUP;

/// The real path against the kernel, in a private network namespace: apply the ruleset,
/// read it back, verify, then add (twice: the refresh) and remove a dynamic element.
#[test]
fn ruleset_applies_verifies_and_updates_in_a_private_namespace() {
    let Some(elements) = in_netns("rules", || {
        let config = firewall_config(&["*.allowed.test", "192.0.2.0/24:443"]);
        let allow = Allowlist::parse(&config.allow).map_err(|e| e.to_string())?;
        let expected = Ruleset.build(&config, &allow);
        sets::apply(&expected)?;
        Ruleset.verify(&expected)?;
        let element = [("198.51.100.7".parse().unwrap(), Ports::Any)];
        sets::apply(&Ruleset.add_addresses(&element, 300))?;
        sets::apply(&Ruleset.add_addresses(&element, 600))?;
        let (after_add, _) = sets::summarize(&sets::list_table_value()?);
        sets::apply(&Ruleset.remove_addresses(&element))?;
        let (after_remove, _) = sets::summarize(&sets::list_table_value()?);
        if after_remove.iter().any(|e| e.element == "198.51.100.7") {
            return Err("the element survived remove_addresses".into());
        }
        Ok(after_add)
    }) else {
        return;
    };
    let added = elements
        .iter()
        .find(|e| e.element == "198.51.100.7")
        .expect("element in a dynamic set");
    assert_eq!(
        added.timeout_secs,
        Some(600),
        "the second add refreshed the timeout"
    );
}

/// In a namespace of its own with a veth pair: every queue held, and another AF_XDP socket
/// (what a RUN step would open) cannot bind any of them.
#[test]
fn held_queues_refuse_another_af_xdp_socket() {
    let Some((held, second)) = in_netns("xsk", || {
        let ip = |args: &[&str]| {
            std::process::Command::new("ip")
                .args(args)
                .status()
                .map_err(|e| e.to_string())
        };
        ip(&["link", "add", "v0", "type", "veth", "peer", "name", "v1"])?;
        ip(&["link", "set", "v0", "up"])?;
        let held = xsk::hold_queues("v0")?;
        // SAFETY: a valid NUL-terminated string.
        let index = unsafe { libc::if_nametoindex(c"v0".as_ptr()) };
        let second: Vec<Option<i32>> = (0..held)
            .map(|q| {
                xsk::bind_queue(index, q)
                    .err()
                    .and_then(|e| e.raw_os_error())
            })
            .collect();
        Ok((held, second))
    }) else {
        return;
    };
    assert!(held >= 1, "{held}");
    assert!(second.iter().all(|e| *e == Some(libc::EBUSY)), "{second:?}");
}

/// The DNS path's netlink batches against the kernel: IPv4, IPv6 and port sets get their
/// elements with the timeout asked, `nft -j list` (what `status` reads) shows them with an
/// expiry, a second add refreshes the timeout, and `remove_addresses` (nft) still removes.
#[test]
fn netlink_set_updates_show_in_the_listing_in_a_private_namespace() {
    let Some((first, refreshed, after_remove)) = in_netns("netlink", || {
        let config = firewall_config(&["*.allowed.test", "svc.test:443,80"]);
        let allow = Allowlist::parse(&config.allow).map_err(|e| e.to_string())?;
        sets::apply(&Ruleset.build(&config, &allow))?;
        let elements = [
            ("198.51.100.7".parse().unwrap(), Ports::Any),
            ("2001:db8::7".parse().unwrap(), Ports::Any),
            ("198.51.100.8".parse().unwrap(), Ports::Only(vec![443, 80])),
            ("2001:db8::8".parse().unwrap(), Ports::Only(vec![22])),
        ];
        setelem::add(&elements, 300, false)?;
        let (first, _) = sets::summarize(&sets::list_table_value()?);
        setelem::add(&elements[..1], 900, true)?;
        let (refreshed, _) = sets::summarize(&sets::list_table_value()?);
        sets::apply(&Ruleset.remove_addresses(&elements))?;
        Ok((first, refreshed, dynamic_elements()?))
    }) else {
        return;
    };
    let mut listed: Vec<_> = first
        .iter()
        .filter(|e| e.set.starts_with("allow"))
        .map(|e| (e.set.as_str(), e.element.as_str(), e.timeout_secs))
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            ("allow4", "198.51.100.7", Some(300)),
            ("allow4_port", "198.51.100.8 . 443", Some(300)),
            ("allow4_port", "198.51.100.8 . 80", Some(300)),
            ("allow6", "2001:db8::7", Some(300)),
            ("allow6_port", "2001:db8::8 . 22", Some(300)),
        ]
    );
    assert!(first
        .iter()
        .filter(|e| e.set.starts_with("allow"))
        .all(|e| e.expires_secs.is_some_and(|s| s <= 300)));
    let again = refreshed
        .iter()
        .find(|e| e.element == "198.51.100.7")
        .expect("refreshed element");
    assert_eq!(again.timeout_secs, Some(900), "the second add refreshed it");
    assert!(after_remove.is_empty(), "{after_remove:?}");
}

/// The ruleset logs every refused packet: 3,000 to one port, then one to another, all
/// reach the NFLOG reader (the kernel's old `limit` before `log` let about 50 through and
/// the distinctive one was lost).
#[test]
fn every_refused_packet_reaches_the_nflog_reader_in_a_private_namespace() {
    let Some((ports, lost)) = in_netns("flood", || {
        let ip = |args: &str| {
            std::process::Command::new("ip")
                .args(args.split(' '))
                .status()
                .map_err(|e| e.to_string())
                .and_then(|s| s.success().then_some(()).ok_or(format!("ip {args}")))
        };
        // A route, so packets reach the output hook: a veth pair inside the throwaway
        // namespace (the ruleset refuses them before they reach even that).
        ip("link set lo up")?;
        ip("link add yolo-a type veth peer name yolo-b")?;
        ip("addr add 10.99.0.1/24 dev yolo-a")?;
        ip("link set yolo-a up")?;
        ip("route add default dev yolo-a")?;
        let config = firewall_config(&["*.allowed.test"]);
        let allow = Allowlist::parse(&config.allow).map_err(|e| e.to_string())?;
        sets::apply(&Ruleset.build(&config, &allow))?;
        let mut reader = nflog::Reader::bind(NFLOG_GROUP).map_err(|e| e.to_string())?;
        reader
            .set_read_timeout(std::time::Duration::from_millis(300))
            .map_err(|e| e.to_string())?;
        let socket = std::net::UdpSocket::bind("0.0.0.0:0").map_err(|e| e.to_string())?;
        for _ in 0..3000 {
            let _ = socket.send_to(b"x", "192.0.2.1:9");
        }
        let _ = socket.send_to(b"x", "192.0.2.1:4242");
        let (mut ports, mut lost) = (Vec::new(), 0);
        // Reads return early on timeouts and ENOBUFS: go on until all are in, or a while.
        let until = Instant::now() + std::time::Duration::from_secs(5);
        while ports.len() + (lost as usize) < 3001 && Instant::now() < until {
            let batch = reader.read().map_err(|e| e.to_string())?;
            lost += batch.lost;
            ports.extend(batch.packets.iter().map(|p| p.port));
        }
        Ok((ports, lost))
    }) else {
        return;
    };
    let to = |port: u16| ports.iter().filter(|p| **p == Some(port)).count();
    assert_eq!((to(9), to(4242), lost), (3000, 1, 0));
}
