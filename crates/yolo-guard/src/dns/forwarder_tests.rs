//! Real sockets on loopback: a tiny upstream that records what it was asked, the forwarder in
//! front of it, and a client.

use super::*;
use hickory_proto::op::{Edns, Query};
use hickory_proto::rr::rdata::{A, AAAA, CNAME};
use hickory_proto::rr::{Name, Record, RecordType};
use std::sync::Mutex;

/// Test upstream: `cname.allowed.test` → CNAME chain with two A and one AAAA; `big.allowed.test`
/// → truncated over UDP, three A over TCP; anything else → one A with TTL 5.
struct Upstream {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
}

fn answer_for(query: &Message, tcp: bool) -> Vec<u8> {
    let mut reply = Message::response(query.id, OpCode::Query);
    reply.metadata.recursion_available = true;
    reply.add_queries(query.queries.iter().cloned());
    let Some(q) = query.queries.first() else {
        return reply.to_vec().unwrap();
    };
    let name = q.name().clone();
    let a = |ip: [u8; 4], ttl| Record::from_rdata(name.clone(), ttl, RData::A(A(ip.into())));
    match name.to_ascii().as_str() {
        "cname.allowed.test." => {
            let edge = Name::from_ascii("edge.cdn.test.").unwrap();
            reply.add_answer(Record::from_rdata(
                name.clone(),
                30,
                RData::CNAME(CNAME(edge.clone())),
            ));
            reply.add_answer(Record::from_rdata(
                edge.clone(),
                30,
                RData::A(A([192, 0, 2, 10].into())),
            ));
            reply.add_answer(Record::from_rdata(
                edge.clone(),
                90,
                RData::A(A([192, 0, 2, 11].into())),
            ));
            let v6: std::net::Ipv6Addr = "2001:db8::10".parse().unwrap();
            reply.add_answer(Record::from_rdata(edge, 30, RData::AAAA(AAAA(v6))));
        }
        "big.allowed.test." if !tcp => reply.metadata.truncation = true,
        "big.allowed.test." => {
            for i in 20..23 {
                reply.add_answer(a([192, 0, 2, i], 5));
            }
        }
        _ => {
            reply.add_answer(a([192, 0, 2, 1], 5));
        }
    }
    reply.to_vec().unwrap()
}

impl Upstream {
    async fn start() -> Upstream {
        // The same port for both, picked again if another test holds it for TCP.
        let (udp, tcp) = bind_pair("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = udp.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = |seen: &Arc<Mutex<Vec<String>>>, m: &Message| {
            if let Some(q) = m.queries.first() {
                seen.lock().unwrap().push(normalize(&q.name().to_ascii()));
            }
        };
        let seen_udp = Arc::clone(&seen);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok((len, peer)) = udp.recv_from(&mut buf).await {
                if let Ok(m) = Message::from_vec(&buf[..len]) {
                    record(&seen_udp, &m);
                    let _ = udp.send_to(&answer_for(&m, false), peer).await;
                }
            }
        });
        let seen_tcp = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = tcp.accept().await {
                let seen = Arc::clone(&seen_tcp);
                tokio::spawn(async move {
                    let mut len = [0u8; 2];
                    while stream.read_exact(&mut len).await.is_ok() {
                        let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
                        if stream.read_exact(&mut q).await.is_err() {
                            return;
                        }
                        let Ok(m) = Message::from_vec(&q) else { return };
                        record(&seen, &m);
                        let a = answer_for(&m, true);
                        let mut framed = (a.len() as u16).to_be_bytes().to_vec();
                        framed.extend_from_slice(&a);
                        let _ = stream.write_all(&framed).await;
                    }
                });
            }
        });
        Upstream { addr, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// Addresses, timeout and when the update finished.
type Updates = Arc<Mutex<Vec<(Vec<IpAddr>, u64, Instant)>>>;

/// Allows exact names and `*.suffix`; records every set update with the time it finished.
#[derive(Default)]
struct TestPolicy {
    patterns: Vec<String>,
    updates: Updates,
    delay: Duration,
    /// Every set update fails (as a failed netlink batch does).
    fail: bool,
}

impl Policy for TestPolicy {
    type Grant = ();
    type Error = io::Error;
    fn decide(&self, name: &str) -> Option<()> {
        self.entry(name).map(|_| ())
    }
    fn entry(&self, name: &str) -> Option<String> {
        self.patterns
            .iter()
            .find(|p| match p.strip_prefix("*.") {
                Some(suffix) => name.ends_with(&format!(".{suffix}")),
                None => *p == name,
            })
            .cloned()
    }
    fn allow(
        &self,
        elements: Vec<(IpAddr, ())>,
        timeout_secs: u64,
    ) -> BoxFuture<Result<(), io::Error>> {
        let addrs = elements.into_iter().map(|(a, _)| a).collect();
        let delay = self.delay;
        let updates = Arc::clone(&self.updates);
        if self.fail {
            return Box::pin(async { Err(io::Error::from_raw_os_error(libc::ENOENT)) });
        }
        // Recorded after the delay, so the timestamp is when the update finished.
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            updates
                .lock()
                .unwrap()
                .push((addrs, timeout_secs, Instant::now()));
            Ok(())
        })
    }
}

struct Harness {
    dns: SocketAddr,
    upstream: Upstream,
    policy: Arc<TestPolicy>,
    events: std::sync::mpsc::Receiver<EventKind>,
    _tasks: JoinSet<()>,
}

async fn harness(
    patterns: &[&str],
    configure: impl FnOnce(&mut DnsOptions, &mut TestPolicy),
) -> Harness {
    let upstream = Upstream::start().await;
    let mut options = DnsOptions::new(vec![upstream.addr]);
    options.ttl_floor_secs = 60;
    let mut policy = TestPolicy {
        patterns: patterns.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    configure(&mut options, &mut policy);
    let policy = Arc::new(policy);
    let (events, rx) = Events::channel();
    let forwarder = Arc::new(Forwarder::new(
        options,
        Arc::clone(&policy),
        Arc::new(Resolved::default()),
        events,
    ));
    let listeners = Listeners::bind("127.0.0.1:0".parse().unwrap(), &[])
        .await
        .unwrap();
    let dns = listeners.udp_addrs()[0];
    let tasks = forwarder.serve(listeners);
    Harness {
        dns,
        upstream,
        policy,
        events: rx,
        _tasks: tasks,
    }
}

fn query(name: &str, qtype: RecordType) -> Message {
    let mut m = Message::query();
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    m
}

async fn ask_udp(dns: SocketAddr, bytes: &[u8]) -> Option<Vec<u8>> {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.send_to(bytes, dns).await.unwrap();
    let mut buf = vec![0u8; 65_535];
    let len = tokio::time::timeout(Duration::from_secs(3), socket.recv(&mut buf))
        .await
        .ok()?
        .ok()?;
    buf.truncate(len);
    Some(buf)
}

async fn resolve(dns: SocketAddr, name: &str) -> Message {
    let q = query(name, RecordType::A);
    let reply = ask_udp(dns, &q.to_vec().unwrap()).await.expect("an answer");
    let reply = Message::from_vec(&reply).unwrap();
    assert_eq!(reply.id, q.id, "the client's id comes back");
    reply
}

async fn ask_tcp(stream: &mut TcpStream, bytes: &[u8]) -> io::Result<Vec<u8>> {
    let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(bytes);
    stream.write_all(&framed).await?;
    let mut len = [0u8; 2];
    timeout(Duration::from_secs(3), stream.read_exact(&mut len)).await?;
    let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut reply).await?;
    Ok(reply)
}

fn dns_events(
    rx: &std::sync::mpsc::Receiver<EventKind>,
) -> Vec<(String, String, Vec<String>, Option<String>)> {
    rx.try_iter()
        .filter_map(|e| match e {
            EventKind::Dns {
                name,
                decision,
                answers,
                rcode,
                ..
            } => Some((name, decision, answers, rcode)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn allowed_name_is_forwarded_and_its_addresses_allowed() {
    let h = harness(&["api.allowed.test"], |_, _| {}).await;
    let reply = resolve(h.dns, "API.allowed.test.").await;
    assert_eq!(reply.response_code, ResponseCode::NoError);
    assert_eq!(
        addresses(&reply).0,
        vec!["192.0.2.1".parse::<IpAddr>().unwrap()]
    );
    assert_eq!(h.upstream.seen(), vec!["api.allowed.test"]);
    let updates = h.policy.updates.lock().unwrap().clone();
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].1, 60, "TTL 5 is raised to the floor");
    let events = dns_events(&h.events);
    assert_eq!(events[0].0, "api.allowed.test");
    assert_eq!(events[0].1, "allowed");
    assert_eq!(events[0].2, vec!["192.0.2.1"]);
    assert_eq!(events[0].3.as_deref(), Some("NOERROR"));
}

#[tokio::test]
async fn wildcard_matches_subdomains_only() {
    let h = harness(&["*.allowed.test"], |_, _| {}).await;
    assert_eq!(
        resolve(h.dns, "a.b.allowed.test.").await.response_code,
        ResponseCode::NoError
    );
    assert_eq!(
        resolve(h.dns, "allowed.test.").await.response_code,
        ResponseCode::Refused
    );
    assert_eq!(h.upstream.seen(), vec!["a.b.allowed.test"]);
}

#[tokio::test]
async fn denied_name_is_refused_without_asking_upstream() {
    let h = harness(&["*.allowed.test"], |_, _| {}).await;
    let reply = resolve(h.dns, "secret-data.denied.test.").await;
    assert_eq!(reply.response_code, ResponseCode::Refused);
    assert_eq!(reply.queries.len(), 1, "the question is echoed");
    assert!(h.upstream.seen().is_empty());
    assert!(h.policy.updates.lock().unwrap().is_empty());
    let events = dns_events(&h.events);
    assert_eq!(
        (events[0].0.as_str(), events[0].1.as_str()),
        ("secret-data.denied.test", "refused")
    );
    assert_eq!(events[0].3.as_deref(), Some("REFUSED"));
}

#[tokio::test]
async fn nxdomain_mode() {
    let h = harness(&[], |o, _| o.deny_nxdomain = true).await;
    assert_eq!(
        resolve(h.dns, "x.denied.test.").await.response_code,
        ResponseCode::NXDomain
    );
    assert!(h.upstream.seen().is_empty());
}

#[tokio::test]
async fn cname_chain_addresses_are_all_allowed_with_the_largest_ttl() {
    let h = harness(&["cname.allowed.test"], |o, _| o.ttl_floor_secs = 10).await;
    let reply = resolve(h.dns, "cname.allowed.test.").await;
    assert_eq!(
        reply.answers.len(),
        4,
        "the answer is passed through unchanged"
    );
    let updates = h.policy.updates.lock().unwrap().clone();
    let want: Vec<IpAddr> = ["192.0.2.10", "192.0.2.11", "2001:db8::10"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(updates[0].0, want);
    assert_eq!(updates[0].1, 90);
}

#[tokio::test]
async fn set_update_finishes_before_the_answer_is_sent() {
    let h = harness(&["api.allowed.test"], |_, p| {
        p.delay = Duration::from_millis(150)
    })
    .await;
    let asked = Instant::now();
    resolve(h.dns, "api.allowed.test.").await;
    let received = Instant::now();
    let updates = h.policy.updates.lock().unwrap().clone();
    assert_eq!(updates.len(), 1);
    assert!(
        updates[0].2 <= received,
        "the set was updated before the client had the answer"
    );
    assert!(received - asked >= Duration::from_millis(150));
}

#[tokio::test]
async fn fresh_addresses_do_not_update_the_sets_again() {
    let h = harness(&["api.allowed.test"], |_, _| {}).await;
    for _ in 0..5 {
        resolve(h.dns, "api.allowed.test.").await;
    }
    assert_eq!(h.upstream.seen().len(), 5);
    assert_eq!(h.policy.updates.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn truncated_udp_answer_is_completed_over_tcp() {
    let h = harness(&["big.allowed.test"], |_, _| {}).await;
    let reply = resolve(h.dns, "big.allowed.test.").await;
    // The full answer fits in 512 bytes, so the client gets it directly.
    assert_eq!(reply.answers.len(), 3);
    let updates = h.policy.updates.lock().unwrap().clone();
    assert_eq!(updates[0].0.len(), 3);
}

#[tokio::test]
async fn tcp_framing_with_several_queries_on_one_connection() {
    let h = harness(&["*.allowed.test"], |_, _| {}).await;
    let mut stream = TcpStream::connect(h.dns).await.unwrap();
    for name in ["a.allowed.test.", "nope.denied.test.", "big.allowed.test."] {
        let q = query(name, RecordType::A);
        let reply =
            Message::from_vec(&ask_tcp(&mut stream, &q.to_vec().unwrap()).await.unwrap()).unwrap();
        assert_eq!(reply.id, q.id);
    }
    assert_eq!(
        h.upstream.seen(),
        vec!["a.allowed.test", "big.allowed.test"]
    );
}

#[tokio::test]
async fn tcp_client_announcing_more_than_it_sends_does_not_block_others() {
    let h = harness(&["api.allowed.test"], |_, _| {}).await;
    let mut liar = TcpStream::connect(h.dns).await.unwrap();
    liar.write_all(&[0xff, 0xff, 1, 2, 3]).await.unwrap();
    let mut honest = TcpStream::connect(h.dns).await.unwrap();
    let q = query("api.allowed.test.", RecordType::A);
    assert!(ask_tcp(&mut honest, &q.to_vec().unwrap()).await.is_ok());
    drop(liar);
}

#[tokio::test]
async fn malformed_queries_get_formerr_or_are_dropped() {
    let h = harness(&["api.allowed.test"], |_, _| {}).await;
    // One byte: no id, dropped.
    assert!(ask_udp(h.dns, &[7]).await.is_none());
    // A truncated header: FORMERR with the id.
    let reply = ask_udp(h.dns, &[0x12, 0x34, 0x01, 0x00, 0x00])
        .await
        .unwrap();
    assert_eq!(&reply[..2], &[0x12, 0x34]);
    assert_eq!(reply[3] & 0x0f, 1);
    // Zero questions.
    let mut empty = Message::query();
    empty.metadata.id = 0x4242;
    let reply =
        Message::from_vec(&ask_udp(h.dns, &empty.to_vec().unwrap()).await.unwrap()).unwrap();
    assert_eq!(
        (reply.id, reply.response_code),
        (0x4242, ResponseCode::FormErr)
    );
    // Two questions.
    let mut two = query("api.allowed.test.", RecordType::A);
    two.add_query(Query::query(
        Name::from_ascii("x.test.").unwrap(),
        RecordType::A,
    ));
    let reply = Message::from_vec(&ask_udp(h.dns, &two.to_vec().unwrap()).await.unwrap()).unwrap();
    assert_eq!(reply.response_code, ResponseCode::FormErr);
    // A response sent to us is not answered.
    let mut response = query("api.allowed.test.", RecordType::A);
    response.metadata.message_type = MessageType::Response;
    assert!(ask_udp(h.dns, &response.to_vec().unwrap()).await.is_none());
    assert!(h.upstream.seen().is_empty());
}

/// A cheap deterministic byte source (no rand dependency).
fn garbage(seed: &mut u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed as u8
        })
        .collect()
}

#[test]
fn triage_never_panics_on_garbage() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let (events, _rx) = Events::channel();
    let policy = Arc::new(TestPolicy {
        patterns: vec!["*.test".into()],
        ..Default::default()
    });
    let f = Forwarder::new(
        DnsOptions::new(vec![]),
        policy,
        Arc::new(Resolved::default()),
        events,
    );
    let mut seed = 0x9e3779b97f4a7c15;
    let valid = query("a.test.", RecordType::A).to_vec().unwrap();
    for i in 0..50_000 {
        let len = (i % 600) as usize;
        let mut packet = garbage(&mut seed, len);
        if i % 3 == 0 {
            // Mutate a valid query: the parser's edge cases live near valid input.
            packet = valid.clone();
            let at = (seed as usize) % packet.len();
            packet[at] ^= garbage(&mut seed, 1)[0] | 1;
            packet.truncate(packet.len() - (seed as usize % 4));
        }
        let _ = f.triage(&packet);
    }
}

#[tokio::test]
async fn a_flood_of_garbage_then_a_valid_query_is_answered() {
    let h = harness(&["api.allowed.test"], |_, _| {}).await;
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut seed = 42;
    for i in 0..10_000 {
        let packet = garbage(&mut seed, 1 + i % 300);
        let _ = socket.send_to(&packet, h.dns).await;
        if i % 500 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let reply = resolve(h.dns, "api.allowed.test.").await;
    assert_eq!(reply.response_code, ResponseCode::NoError);
    let malformed = dns_events(&h.events)
        .iter()
        .filter(|e| e.1 == "malformed")
        .count();
    // Folded: one record per answer code (none, FORMERR, NOTIMP); the repeats wait in the fold.
    assert!(
        malformed <= 3,
        "malformed events are folded, got {malformed}"
    );
}

/// A resolver library's burst on one socket (c-ares sends many lookups at once) is answered in
/// full: the per-sender queue makes it wait its turns, it does not cut it short.
#[tokio::test]
async fn a_burst_of_queries_on_one_socket_is_answered_in_full() {
    let h = harness(&["api.allowed.test"], |_, _| {}).await;
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    const BURST: usize = 600;
    for i in 0..BURST {
        let q = query(&format!("b{i}.denied.test."), RecordType::A);
        socket.send_to(&q.to_vec().unwrap(), h.dns).await.unwrap();
    }
    let mut buf = vec![0u8; 4096];
    let mut answered = 0;
    while answered < BURST {
        match tokio::time::timeout(Duration::from_secs(3), socket.recv(&mut buf)).await {
            Ok(Ok(_)) => answered += 1,
            _ => break,
        }
    }
    assert_eq!(answered, BURST);
}

/// A flood of refused names sent to `dns` as fast as they go, round-robin from `sockets`
/// sockets (each a sender of its own), until `stop`; joined, how many queries it sent.
fn flood_refused(
    dns: SocketAddr,
    sockets: usize,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let sockets: Vec<std::net::UdpSocket> = (0..sockets)
            .map(|_| {
                let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                s.set_nonblocking(true).unwrap();
                s
            })
            .collect();
        let mut sent = 0u64;
        let mut buf = [0u8; 512];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            for socket in &sockets {
                let q = query(&format!("f{sent}.denied.test."), RecordType::A);
                if socket.send_to(&q.to_vec().unwrap(), dns).is_ok() {
                    sent += 1;
                }
                while socket.recv(&mut buf).is_ok() {}
            }
        }
        sent
    })
}

/// Each of `names` asked once of `dns` from a fresh socket, `pause` apart, while a flood from
/// `sockets` senders runs (from 300 ms before the first): how many were answered within 1 s,
/// and how many queries the flood sent.
async fn answered_during_flood(
    dns: SocketAddr,
    sockets: usize,
    names: impl Iterator<Item = String>,
    pause: Duration,
) -> (usize, u64) {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = flood_refused(dns, sockets, Arc::clone(&stop));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut answered = 0;
    for name in names {
        let q = query(&name, RecordType::A);
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        socket.send_to(&q.to_vec().unwrap(), dns).await.unwrap();
        let mut buf = vec![0u8; 4096];
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(1), socket.recv(&mut buf)).await
        {
            answered += 1;
        }
        tokio::time::sleep(pause).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = flood.join().unwrap();
    assert!(sent > 10_000, "the flood sent only {sent}");
    (answered, sent)
}

/// A sender flooding refused names as fast as it can does not keep another sender's query out
/// (the per-sender queue, `super::fairq`): each probe, asked once with a 1 s timeout while the
/// flood runs, is answered.
#[tokio::test]
async fn a_flooding_sender_does_not_keep_another_senders_query_out() {
    let h = harness(&["api.allowed.test"], |_, _| {}).await;
    let probes = std::iter::repeat_n("api.allowed.test.".to_string(), 10);
    let (answered, sent) =
        answered_during_flood(h.dns, 1, probes, Duration::from_millis(100)).await;
    assert_eq!(answered, 10, "probes answered during a flood of {sent}");
}

/// Root in the agent floods refused names from many sockets at once (each a sender of its
/// own, so together they fill the queue's total); allowed lookups asked meanwhile, each once
/// from a fresh socket as a stub resolver does, are all answered: they wait in a queue of
/// their own, which refused queries never fill.
#[tokio::test]
async fn a_refused_flood_from_many_sockets_does_not_keep_an_allowed_lookup_out() {
    let h = harness(&["*.allowed.test"], |_, _| {}).await;
    let probes = (0..20).map(|i| format!("probe-{i}.allowed.test."));
    let (answered, sent) =
        answered_during_flood(h.dns, 16, probes, Duration::from_millis(50)).await;
    assert_eq!(
        answered, 20,
        "allowed lookups answered during a flood of {sent}"
    );
}

#[test]
fn the_queue_a_query_waits_in_is_read_from_its_name() {
    let bytes = |name: &str| query(name, RecordType::A).to_vec().unwrap();
    assert_eq!(
        query_name(&bytes("Probe-1.Allowed.test.")).as_deref(),
        Some("probe-1.allowed.test")
    );
    // A dot inside a label reads as the name it imitates; it waits with the refused.
    let mut dotted = Message::query();
    dotted.add_query(Query::query(
        Name::from_labels(vec![&b"x.allowed"[..], &b"test"[..]]).unwrap(),
        RecordType::A,
    ));
    assert_eq!(query_name(&dotted.to_vec().unwrap()), None);
    assert_eq!(query_name(b"\x00\x01"), None);
    let mut answer = bytes("a.test.");
    answer[2] |= 0x80;
    assert_eq!(query_name(&answer), None);
}

#[tokio::test]
async fn upstream_down_is_servfail() {
    // A port nobody listens on: the connected UDP socket sees ECONNREFUSED or times out.
    let dead = UdpSocket::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let h = harness(&["api.allowed.test"], |o, _| {
        o.upstream = vec![dead];
        o.upstream_timeout = Duration::from_millis(200);
    })
    .await;
    assert_eq!(
        resolve(h.dns, "api.allowed.test.").await.response_code,
        ResponseCode::ServFail
    );
    assert!(h.policy.updates.lock().unwrap().is_empty());
}

/// Fails closed: an answer whose addresses could not be opened is not given, and nothing is
/// remembered as open, so the next query tries the update again.
#[tokio::test]
async fn failed_set_update_is_servfail() {
    let h = harness(&["api.allowed.test"], |_, p| p.fail = true).await;
    for _ in 0..2 {
        let reply = resolve(h.dns, "api.allowed.test.").await;
        assert_eq!(reply.response_code, ResponseCode::ServFail);
        assert!(reply.answers.is_empty());
    }
    assert_eq!(h.upstream.seen().len(), 2, "the second query asked again");
    let events = dns_events(&h.events);
    assert!(
        events
            .iter()
            .all(|(_, d, a, _)| d == "error" && a.is_empty()),
        "{events:?}"
    );
}

#[tokio::test]
async fn edns_udp_limit_is_read_from_the_query() {
    let h = harness(&["api.allowed.test"], |_, _| {}).await;
    let mut q = query("api.allowed.test.", RecordType::A);
    let mut edns = Edns::new();
    edns.set_max_payload(1232);
    q.set_edns(edns);
    let reply = ask_udp(h.dns, &q.to_vec().unwrap()).await.unwrap();
    assert_eq!(
        Message::from_vec(&reply).unwrap().response_code,
        ResponseCode::NoError
    );
}

#[test]
fn ttl_floor_math() {
    assert_eq!(set_timeout(5, 60), 60);
    assert_eq!(set_timeout(3600, 60), 3600);
    assert_eq!(
        set_timeout(0, 0),
        1,
        "an element with timeout 0 would never expire"
    );
}

/// Not a benchmark (timing targets live in benchmarks); prints numbers for a quick look:
/// `cargo test --release -p yolo-guard --lib dns::tests -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn throughput_on_loopback() {
    let h = harness(&["api.allowed.test"], |_, _| {}).await;
    let n = 20_000;
    let clients = 32;
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..clients {
        let dns = h.dns;
        tasks.spawn(async move {
            let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            socket.connect(dns).await.unwrap();
            let q = query("api.allowed.test.", RecordType::A).to_vec().unwrap();
            let mut buf = vec![0u8; 1500];
            let mut latencies = Vec::new();
            for _ in 0..n / clients {
                let t = Instant::now();
                socket.send(&q).await.unwrap();
                socket.recv(&mut buf).await.unwrap();
                latencies.push(t.elapsed());
            }
            latencies
        });
    }
    let mut all = Vec::new();
    while let Some(l) = tasks.join_next().await {
        all.extend(l.unwrap());
    }
    let elapsed = started.elapsed();
    all.sort();
    println!(
        "{} queries in {:?}: {:.0} q/s, p50 {:?}, p99 {:?}",
        all.len(),
        elapsed,
        all.len() as f64 / elapsed.as_secs_f64(),
        all[all.len() / 2],
        all[all.len() * 99 / 100]
    );
}

/// An upstream that answers each query with forgeries first: a perfect answer from another
/// port, one with the wrong id, one with the right id but another question; then the real one.
/// Only the real answer's address may reach the client and the sets.
#[tokio::test]
async fn forged_upstream_answers_are_ignored() {
    let upstream = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = upstream.local_addr().unwrap();
    tokio::spawn(async move {
        let other_port = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut buf = vec![0u8; 4096];
        while let Ok((len, peer)) = upstream.recv_from(&mut buf).await {
            let q = Message::from_vec(&buf[..len]).unwrap();
            let answer = |id: u16, name: &str, ip: [u8; 4]| {
                let mut r = Message::response(id, OpCode::Query);
                let name = Name::from_ascii(name).unwrap();
                r.add_query(Query::query(name.clone(), RecordType::A));
                r.add_answer(Record::from_rdata(name, 5, RData::A(A(ip.into()))));
                r.to_vec().unwrap()
            };
            let asked = q.queries[0].name().to_ascii();
            let forged = [198, 51, 100, 66];
            let _ = other_port
                .send_to(&answer(q.id, &asked, forged), peer)
                .await;
            let _ = upstream
                .send_to(&answer(q.id ^ 1, &asked, forged), peer)
                .await;
            let _ = upstream
                .send_to(&answer(q.id, "evil.allowed.test.", forged), peer)
                .await;
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = upstream
                .send_to(&answer(q.id, &asked, [192, 0, 2, 1]), peer)
                .await;
        }
    });
    let h = harness(&["*.allowed.test"], |o, _| o.upstream = vec![addr]).await;
    for _ in 0..3 {
        let reply = resolve(h.dns, "api.allowed.test.").await;
        assert_eq!(addresses(&reply).0, vec![IpAddr::from([192, 0, 2, 1])]);
    }
    let updates = h.policy.updates.lock().unwrap();
    assert!(!updates.is_empty());
    assert!(updates
        .iter()
        .all(|(addrs, _, _)| addrs == &[IpAddr::from([192, 0, 2, 1])]));
}

/// Upstream queries leave from a few long-lived ports (one conntrack entry each), not from a new
/// one per query; and queries sharing a socket at once are each answered with their own answer.
#[tokio::test]
async fn upstream_sockets_are_pooled() {
    let upstream = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = upstream.local_addr().unwrap();
    let peers = Arc::new(Mutex::new(std::collections::BTreeSet::new()));
    let seen = Arc::clone(&peers);
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        while let Ok((len, peer)) = upstream.recv_from(&mut buf).await {
            seen.lock().unwrap().insert(peer.port());
            let q = Message::from_vec(&buf[..len]).unwrap();
            let _ = upstream.send_to(&answer_for(&q, false), peer).await;
        }
    });
    let h = harness(&["*.allowed.test"], |o, _| o.upstream = vec![addr]).await;
    let mut asked = JoinSet::new();
    for i in 0..200 {
        let dns = h.dns;
        asked.spawn(async move {
            let reply = resolve(dns, &format!("n{i}.allowed.test.")).await;
            assert_eq!(reply.response_code, ResponseCode::NoError);
            assert_eq!(
                normalize(&reply.queries[0].name().to_ascii()),
                format!("n{i}.allowed.test")
            );
        });
    }
    while let Some(done) = asked.join_next().await {
        done.unwrap();
    }
    let ports = peers.lock().unwrap().len();
    assert!(
        (1..=POOL_SOCKETS).contains(&ports),
        "200 queries left from {ports} ports"
    );
}
