//! The allowlist DNS forwarder. The agent's only resolver: an allowed name is forwarded upstream
//! and the addresses in the answer are put into the firewall's sets *before* the answer is
//! returned, so the first connect succeeds; any other name is refused without contacting
//! upstream, so DNS cannot carry data out. Every query is audited.
//!
//! Deliberately not a cache or a recursive resolver: answers are passed through unchanged (but
//! for the id), and what is allowed is decided by a [`Policy`], not here.
//!
//! Upstream queries over UDP leave from a small pool of long-lived sockets per server
//! ([`POOL_SOCKETS`], each bound to its own kernel-chosen random port and connected to the
//! server), not from a fresh socket per query: a socket, its system calls and a new conntrack
//! entry through the ruleset per query were most of the forwarder's cost. An answer is taken
//! only when it comes from the server's address and port (the connected socket), carries the id
//! of a query waiting on that socket (random per query) and repeats its question; anything else
//! is ignored. What the pool gives up against a fresh port per query: a port now serves up to
//! [`ROTATE_AFTER`] queries before a new random one replaces it, so an off-path forger who
//! learnt a pooled port has only the 16-bit id (and the question) left to guess for that
//! socket's lifetime, instead of port and id for each query. The answer must still arrive
//! before upstream's, and what it can do is bounded: only the addresses of a name that is
//! already allowed are opened. TCP (truncated answers, TCP clients) still uses a connection per
//! query.

use super::names::Resolved;
use crate::audit::events::{guard_event, Events};
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::RData;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream, UdpSocket};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use yolo_protocol::event::EventKind;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What the forwarder asks of the rest of the guard.
pub trait Policy: Send + Sync + 'static {
    /// What an allowed name grants its addresses (the ports); compared to skip redundant updates.
    type Grant: Clone + PartialEq + Send + Sync + 'static;
    /// `None`: refuse the name.
    fn decide(&self, name: &str) -> Option<Self::Grant>;
    /// The allowlist entry an allowed name is credited to in its `dns` record (the log's
    /// reserve past its cap is kept per entry); `None`: no entry names it.
    fn entry(&self, _name: &str) -> Option<String> {
        None
    }
    /// The guard answered `name` with `addrs`, valid until `expires` (called for every
    /// answer with addresses, after `allow`, before the answer goes out).
    fn answered(&self, _name: &str, _addrs: &[IpAddr], _expires: Instant) {}
    /// Why `allow` failed (the guard's: the firewall's error); the forwarder logs it in a
    /// `set_update_failed` record and answers SERVFAIL.
    type Error: std::error::Error + Send + 'static;
    /// Make `elements` reachable for `timeout_secs`; the answer waits for this.
    fn allow(
        &self,
        elements: Vec<(IpAddr, Self::Grant)>,
        timeout_secs: u64,
    ) -> BoxFuture<Result<(), Self::Error>>;
}

/// Why no upstream server answered a query: none configured, or the last one tried failed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("no upstream resolver configured")]
    NoneConfigured,
    #[error("{server}: {source}")]
    Failed {
        server: SocketAddr,
        #[source]
        source: io::Error,
    },
}

#[derive(Debug, Clone)]
pub struct DnsOptions {
    pub upstream: Vec<SocketAddr>,
    pub ttl_floor_secs: u64,
    pub deny_nxdomain: bool,
    /// Per upstream server and attempt.
    pub upstream_timeout: Duration,
    /// Queries waiting on upstream at once; beyond it the answer is SERVFAIL at once.
    pub max_in_flight: usize,
    /// Concurrent TCP clients.
    pub max_tcp_clients: usize,
    /// SO_MARK for upstream sockets; the ruleset lets marked packets out.
    pub mark: Option<u32>,
    /// Names (lowercase, no trailing dot) asked of `local_upstream` instead of `upstream`:
    /// a Compose project's sibling services, which only Docker's embedded DNS knows.
    pub local_names: Vec<String>,
    pub local_upstream: Vec<SocketAddr>,
}

impl DnsOptions {
    pub fn new(upstream: Vec<SocketAddr>) -> Self {
        DnsOptions {
            upstream,
            ttl_floor_secs: 60,
            deny_nxdomain: false,
            upstream_timeout: Duration::from_secs(2),
            max_in_flight: 256,
            max_tcp_clients: 128,
            mark: Some(crate::firewall::ruleset::socket_mark()),
            local_names: Vec::new(),
            local_upstream: Vec::new(),
        }
    }
}

/// Sockets bound before the guard says it is ready.
pub struct Listeners {
    pub udp: Vec<UdpSocket>,
    pub tcp: Vec<TcpListener>,
}

/// UDP and TCP on the same address. With port 0 the kernel picks the UDP port, and that port may
/// already be taken for TCP by someone else: pick again a few times before giving up.
async fn bind_pair(addr: SocketAddr) -> io::Result<(UdpSocket, TcpListener)> {
    let tries = if addr.port() == 0 { 16 } else { 1 };
    let mut last = None;
    for _ in 0..tries {
        let udp = UdpSocket::bind(addr).await?;
        grow_receive_buffer(&udp);
        let port = udp.local_addr()?.port();
        match TcpListener::bind(SocketAddr::new(addr.ip(), port)).await {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::from(io::ErrorKind::AddrInUse)))
}

impl Listeners {
    /// Bind UDP and TCP on `primary` (an error is fatal) and on each of `optional` (skipped with a
    /// note when, say, the namespace has no IPv6).
    pub async fn bind(primary: SocketAddr, optional: &[SocketAddr]) -> io::Result<Listeners> {
        let (udp, tcp) = bind_pair(primary).await?;
        let mut listeners = Listeners {
            udp: vec![udp],
            tcp: vec![tcp],
        };
        for addr in optional {
            match (UdpSocket::bind(addr).await, TcpListener::bind(addr).await) {
                (Ok(udp), Ok(tcp)) => {
                    grow_receive_buffer(&udp);
                    listeners.udp.push(udp);
                    listeners.tcp.push(tcp);
                }
                (Err(e), _) | (_, Err(e)) => eprintln!("yolo-guard: not listening on {addr}: {e}"),
            }
        }
        Ok(listeners)
    }

    pub fn udp_addrs(&self) -> Vec<SocketAddr> {
        self.udp
            .iter()
            .filter_map(|s| s.local_addr().ok())
            .collect()
    }
}

/// The forwarder; share it in an `Arc` between the UDP and TCP loops.
pub struct Forwarder<P: Policy> {
    options: DnsOptions,
    policy: Arc<P>,
    resolved: Arc<Resolved<P::Grant>>,
    events: Arc<Events>,
    in_flight: Arc<Semaphore>,
    mark_warned: AtomicBool,
    /// Pooled UDP sockets per upstream server, opened on first use.
    pools: std::sync::Mutex<HashMap<SocketAddr, Arc<UpstreamPool>>>,
    /// `ask`: refused names are held for the user's answer ([`super::ask`]).
    approvals: Option<Arc<crate::ask::Approvals>>,
}

/// What to do with one query after the cheap, synchronous checks.
enum Triage<G> {
    /// Answer (or drop, `None`) right away.
    Reply(Option<Vec<u8>>),
    /// An allowed name: ask upstream.
    Forward(Job<G>),
    /// A name outside the allowlist, held for the user's answer ([`Forwarder::held`]).
    Hold(Hold),
}

struct Hold {
    held: crate::ask::Held,
    query: Vec<u8>,
    name: String,
    qtype: String,
}

struct Job<G> {
    query: Vec<u8>,
    name: String,
    qtype: String,
    grant: G,
    /// The allowlist entry that allowed the name ([`Policy::entry`]).
    entry: Option<String>,
    /// The largest UDP answer the client takes.
    udp_limit: usize,
    _permit: OwnedSemaphorePermit,
}

#[derive(Clone, Copy, PartialEq)]
enum Transport {
    Udp,
    Tcp,
}

impl<P: Policy> Forwarder<P> {
    pub fn new(
        options: DnsOptions,
        policy: Arc<P>,
        resolved: Arc<Resolved<P::Grant>>,
        events: Arc<Events>,
    ) -> Self {
        let in_flight = Arc::new(Semaphore::new(options.max_in_flight));
        Forwarder {
            options,
            policy,
            resolved,
            events,
            in_flight,
            mark_warned: AtomicBool::new(false),
            pools: std::sync::Mutex::new(HashMap::new()),
            approvals: None,
        }
    }

    /// Hold refused names for the user's answer instead of refusing them at once.
    pub fn with_approvals(mut self, approvals: Arc<crate::ask::Approvals>) -> Self {
        self.approvals = Some(approvals);
        self
    }

    /// Serve on `listeners` until the returned tasks are aborted.
    pub fn serve(self: Arc<Self>, listeners: Listeners) -> JoinSet<()> {
        let mut tasks = JoinSet::new();
        for socket in listeners.udp {
            tasks.spawn(Arc::clone(&self).serve_udp(Arc::new(socket)));
        }
        let tcp_clients = Arc::new(Semaphore::new(self.options.max_tcp_clients));
        for listener in listeners.tcp {
            tasks.spawn(Arc::clone(&self).serve_tcp(listener, Arc::clone(&tcp_clients)));
        }
        tasks
    }

    /// Read what waits into the per-sender queues ([`super::fairq`]), answer a round from
    /// them, let the forwarding tasks run, and again. Queries for allowed names have a queue
    /// of their own, served first in each round: a flood of refused (or malformed) queries,
    /// from one socket or many, fills only its own queue, and an allowed lookup is answered
    /// in the next round whatever the flood (which only slows the answers to itself).
    async fn serve_udp(self: Arc<Self>, socket: Arc<UdpSocket>) {
        let mut buf = vec![0u8; 65_535];
        let mut allowed = super::fairq::FairQueue::default();
        let mut others = super::fairq::FairQueue::default();
        let mut dropped_total = 0u64;
        loop {
            if allowed.is_empty() && others.is_empty() && socket.readable().await.is_err() {
                continue;
            }
            for _ in 0..READ_BATCH {
                match socket.try_recv_from(&mut buf) {
                    Ok((len, peer)) => {
                        let packet = &buf[..len];
                        let queue = if self.asks_allowed(packet) {
                            &mut allowed
                        } else {
                            &mut others
                        };
                        queue.push(peer, packet);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // ICMP errors from earlier replies surface here on some kernels; keep serving.
                    Err(_) => continue,
                }
            }
            for queue in [&mut allowed, &mut others] {
                for _ in 0..SERVE_BATCH {
                    let Some((peer, packet)) = queue.pop() else {
                        break;
                    };
                    self.answer_udp(&socket, peer, &packet).await;
                }
            }
            let dropped = allowed.take_dropped() + others.take_dropped();
            if dropped > 0 {
                self.report_dropped(&mut dropped_total, dropped);
            }
            tokio::task::yield_now().await;
        }
    }

    /// Whether `packet` asks for a name the policy allows, read straight from its bytes (no
    /// parse): only which queue it waits in depends on it; `triage` decides what it gets.
    fn asks_allowed(&self, packet: &[u8]) -> bool {
        query_name(packet).is_some_and(|name| self.policy.decide(&name).is_some())
    }

    async fn answer_udp(
        self: &Arc<Self>,
        socket: &Arc<UdpSocket>,
        peer: SocketAddr,
        packet: &[u8],
    ) {
        match self.triage(packet) {
            Triage::Reply(Some(reply)) => {
                let _ = socket.send_to(&reply, peer).await;
            }
            Triage::Reply(None) => {}
            Triage::Forward(job) => {
                let this = Arc::clone(self);
                let socket = Arc::clone(socket);
                tokio::spawn(async move {
                    let reply = this.forward(job, Transport::Udp).await;
                    let _ = socket.send_to(&reply, peer).await;
                });
            }
            Triage::Hold(hold) => {
                let this = Arc::clone(self);
                let socket = Arc::clone(socket);
                tokio::spawn(async move {
                    if let Some(reply) = this.held(hold, Transport::Udp).await {
                        let _ = socket.send_to(&reply, peer).await;
                    }
                });
            }
        }
    }

    /// Wait for the user's answer to a held lookup: allowed, it is triaged again (its name
    /// is in the allowlist now) and forwarded; denied or unanswered by the deadline, refused.
    async fn held(&self, hold: Hold, transport: Transport) -> Option<Vec<u8>> {
        self.approvals.as_ref()?;
        if !hold.held.wait().await {
            return self.refuse(&hold.query, &hold.name, &hold.qtype);
        }
        match self.triage_with(&hold.query, false) {
            Triage::Reply(reply) => reply,
            Triage::Forward(job) => Some(self.forward(job, transport).await),
            // Allowed and then denied again before this ran: refused as it stands.
            Triage::Hold(_) => self.refuse(&hold.query, &hold.name, &hold.qtype),
        }
    }

    /// The refusal of `query`, audited.
    fn refuse(&self, query: &[u8], name: &str, qtype: &str) -> Option<Vec<u8>> {
        let rcode = if self.options.deny_nxdomain {
            ResponseCode::NXDomain
        } else {
            ResponseCode::Refused
        };
        self.audit(name, qtype, "refused", vec![], Some(rcode));
        let id = u16::from_be_bytes([*query.first()?, *query.get(1)?]);
        Some(
            Message::from_vec(query)
                .ok()
                .and_then(|m| refusal(&m, rcode))
                .unwrap_or_else(|| header_only(id, query, rcode)),
        )
    }

    /// Queries dropped unanswered because one sender (or all) had too many waiting: said in
    /// the guard's log the first time, then at each power of two of the total.
    fn report_dropped(&self, total: &mut u64, dropped: u64) {
        let before = *total;
        *total += dropped;
        let crossed = before == 0 || (before.ilog2() != total.ilog2());
        if crossed {
            self.events.emit(guard_event(
                "dns_dropped",
                [
                    (
                        "reason",
                        "too many queries waiting from one sender, or in all".into(),
                    ),
                    ("dropped", (*total).into()),
                ],
            ));
        }
    }

    async fn serve_tcp(self: Arc<Self>, listener: TcpListener, clients: Arc<Semaphore>) {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            // Over the limit the connection is closed at once: the client retries or uses UDP.
            let Ok(permit) = Arc::clone(&clients).try_acquire_owned() else {
                continue;
            };
            let this = Arc::clone(&self);
            tokio::spawn(async move {
                let _ = this.serve_tcp_client(stream).await;
                drop(permit);
            });
        }
    }

    async fn serve_tcp_client(&self, mut stream: TcpStream) -> io::Result<()> {
        const IDLE: Duration = Duration::from_secs(10);
        loop {
            let mut len = [0u8; 2];
            timeout(IDLE, stream.read_exact(&mut len)).await?;
            let len = usize::from(u16::from_be_bytes(len));
            if len == 0 {
                return Ok(());
            }
            let mut query = vec![0u8; len];
            // A client announcing more than it sends is cut off here, not waited on forever.
            timeout(IDLE, stream.read_exact(&mut query)).await?;
            let reply = match self.triage(&query) {
                Triage::Reply(Some(reply)) => reply,
                Triage::Reply(None) => return Ok(()),
                Triage::Forward(job) => self.forward(job, Transport::Tcp).await,
                Triage::Hold(hold) => match self.held(hold, Transport::Tcp).await {
                    Some(reply) => reply,
                    None => return Ok(()),
                },
            };
            let Ok(reply_len) = u16::try_from(reply.len()) else {
                return Ok(());
            };
            let mut framed = Vec::with_capacity(reply.len() + 2);
            framed.extend_from_slice(&reply_len.to_be_bytes());
            framed.extend_from_slice(&reply);
            stream.write_all(&framed).await?;
        }
    }

    fn triage(&self, packet: &[u8]) -> Triage<P::Grant> {
        self.triage_with(packet, true)
    }

    /// [`Forwarder::triage`]; `may_hold`: a refused name may be held for the user's answer.
    fn triage_with(&self, packet: &[u8], may_hold: bool) -> Triage<P::Grant> {
        // Without an id there is nothing to answer; a response (QR set) is never answered, so
        // two servers cannot be made to ping-pong through us.
        if packet.len() < 2 || (packet.len() > 2 && packet[2] & 0x80 != 0) {
            self.malformed("", "");
            return Triage::Reply(None);
        }
        let id = u16::from_be_bytes([packet[0], packet[1]]);
        let message = match Message::from_vec(packet) {
            Ok(message) if message.message_type == MessageType::Query => message,
            _ => {
                self.malformed("", "FORMERR");
                return Triage::Reply(Some(header_only(id, packet, ResponseCode::FormErr)));
            }
        };
        if message.op_code != OpCode::Query {
            self.malformed("", "NOTIMP");
            return Triage::Reply(Some(header_only(id, packet, ResponseCode::NotImp)));
        }
        let [question] = message.queries.as_slice() else {
            self.malformed("", "FORMERR");
            return Triage::Reply(Some(header_only(id, packet, ResponseCode::FormErr)));
        };
        let name = normalize(&question.name().to_ascii());
        let qtype = question.query_type().to_string();
        let Some(grant) = self.policy.decide(&name) else {
            if let Some(approvals) = self.approvals.as_ref().filter(|_| may_hold) {
                if let Some(held) = approvals.ask(&name, &qtype) {
                    return Triage::Hold(Hold {
                        held,
                        query: packet.to_vec(),
                        name,
                        qtype,
                    });
                }
            }
            let rcode = if self.options.deny_nxdomain {
                ResponseCode::NXDomain
            } else {
                ResponseCode::Refused
            };
            self.audit(&name, &qtype, "refused", vec![], Some(rcode));
            return Triage::Reply(Some(
                refusal(&message, rcode).unwrap_or_else(|| header_only(id, packet, rcode)),
            ));
        };
        let Ok(permit) = Arc::clone(&self.in_flight).try_acquire_owned() else {
            self.audit(&name, &qtype, "error", vec![], Some(ResponseCode::ServFail));
            return Triage::Reply(Some(header_only(id, packet, ResponseCode::ServFail)));
        };
        let udp_limit = message
            .edns
            .as_ref()
            .map_or(512, |e| usize::from(e.max_payload()).max(512));
        Triage::Forward(Job {
            query: packet.to_vec(),
            entry: self.policy.entry(&name),
            name,
            qtype,
            grant,
            udp_limit,
            _permit: permit,
        })
    }

    async fn forward(&self, job: Job<P::Grant>, transport: Transport) -> Vec<u8> {
        let client_id = [job.query[0], job.query[1]];
        // Every failure below is audited as an error and answered SERVFAIL.
        let servfail = || {
            self.audit(
                &job.name,
                &job.qtype,
                "error",
                vec![],
                Some(ResponseCode::ServFail),
            );
            header_only(
                u16::from_be_bytes(client_id),
                &job.query,
                ResponseCode::ServFail,
            )
        };
        let servers = if self.options.local_names.contains(&job.name) {
            &self.options.local_upstream
        } else {
            &self.options.upstream
        };
        let (udp_answer, full_answer) = match self.exchange(servers, &job.query, transport).await {
            Ok(answers) => answers,
            Err(e) => {
                self.events.emit(guard_event(
                    "dns_upstream_error",
                    [
                        ("name", job.name.clone().into()),
                        ("error", e.to_string().into()),
                    ],
                ));
                return servfail();
            }
        };
        let Ok(message) = Message::from_vec(&full_answer) else {
            return servfail();
        };
        let (addrs, ttl) = addresses(&message);
        if !addrs.is_empty() {
            let timeout_secs = set_timeout(ttl, self.options.ttl_floor_secs);
            if let Err(e) = self
                .admit(&job.name, &addrs, &job.grant, timeout_secs)
                .await
            {
                self.events.emit(guard_event(
                    "set_update_failed",
                    [
                        ("name", job.name.clone().into()),
                        ("error", e.to_string().into()),
                    ],
                ));
                return servfail();
            }
        }
        let answers = addrs.iter().map(IpAddr::to_string).collect();
        self.events.emit(EventKind::Dns {
            name: job.name.clone(),
            qtype: job.qtype.clone(),
            decision: "allowed".into(),
            answers,
            rcode: Some(rcode_name(message.response_code)),
            entry: job.entry.clone(),
            sample_of: None,
            count: None,
            first: None,
            last: None,
        });
        // A UDP client gets the truncated answer when the full one is too big for it; it retries
        // over TCP, and the addresses are already in the sets either way.
        let mut reply = match udp_answer {
            Some(udp) if transport == Transport::Udp && full_answer.len() > job.udp_limit => udp,
            _ => full_answer,
        };
        reply[..2].copy_from_slice(&client_id);
        reply
    }

    /// Put the addresses that need it into the sets, then remember the name.
    async fn admit(
        &self,
        name: &str,
        addrs: &[IpAddr],
        grant: &P::Grant,
        timeout_secs: u64,
    ) -> Result<(), P::Error> {
        let timeout = Duration::from_secs(timeout_secs);
        let now = Instant::now();
        let wanted: Vec<_> = addrs.iter().map(|a| (*a, grant.clone())).collect();
        let stale = self.resolved.stale(&wanted, timeout, now);
        if !stale.is_empty() {
            self.policy.allow(stale.clone(), timeout_secs).await?;
            self.resolved.pushed(&stale, timeout, now);
        }
        self.resolved.record(name, addrs, now + timeout);
        self.policy.answered(name, addrs, now + timeout);
        Ok(())
    }

    /// Ask the upstream servers in turn. Returns the UDP answer (if UDP was used and it was
    /// truncated) and the full answer, both with the upstream id.
    async fn exchange(
        &self,
        servers: &[SocketAddr],
        query: &[u8],
        transport: Transport,
    ) -> Result<(Option<Vec<u8>>, Vec<u8>), UpstreamError> {
        let mut query = query.to_vec();
        // A fresh id per upstream query: the client's may be predictable.
        let id: u16 = rand_id();
        query[..2].copy_from_slice(&id.to_be_bytes());
        let mut last_error = UpstreamError::NoneConfigured;
        for server in servers {
            let result = match transport {
                Transport::Udp => match self.udp_exchange(*server, &query, id).await {
                    Ok(answer) if answer.get(2).is_some_and(|b| b & 0x02 != 0) => self
                        .tcp_exchange(*server, &query, id)
                        .await
                        .map(|full| (Some(answer), full)),
                    Ok(answer) => Ok((None, answer)),
                    Err(e) => Err(e),
                },
                Transport::Tcp => self
                    .tcp_exchange(*server, &query, id)
                    .await
                    .map(|full| (None, full)),
            };
            match result {
                Ok(answers) => return Ok(answers),
                Err(source) => {
                    last_error = UpstreamError::Failed {
                        server: *server,
                        source,
                    }
                }
            }
        }
        Err(last_error)
    }

    /// One query over a pooled socket to `server` (see [`UpstreamPool`]): the answer whose
    /// source (the connected socket), id and question match, or an error.
    async fn udp_exchange(&self, server: SocketAddr, query: &[u8], id: u16) -> io::Result<Vec<u8>> {
        let question = question_of(query)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad question"))?;
        let socket = self.pool(server).socket(self)?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        // `id` is fresh, but another query on this socket may hold it: then draw again.
        let mut query = query.to_vec();
        let mut tx = Some(tx);
        let mut waiting = None;
        for id in std::iter::once(id).chain(std::iter::repeat_with(rand_id).take(15)) {
            query[..2].copy_from_slice(&id.to_be_bytes());
            waiting = socket.wait_for(id, question, &mut tx);
            if waiting.is_some() {
                break;
            }
        }
        let waiting =
            waiting.ok_or_else(|| io::Error::new(io::ErrorKind::WouldBlock, "no free query id"))?;
        socket.socket.send(&query).await?;
        let answer = tokio::time::timeout(self.options.upstream_timeout, rx)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no answer"))?
            .map_err(|_| io::Error::new(io::ErrorKind::ConnectionRefused, "refused"));
        drop(waiting);
        answer
    }

    fn pool(&self, server: SocketAddr) -> Arc<UpstreamPool> {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(
            pools
                .entry(server)
                .or_insert_with(|| Arc::new(UpstreamPool::new(server))),
        )
    }

    async fn tcp_exchange(&self, server: SocketAddr, query: &[u8], id: u16) -> io::Result<Vec<u8>> {
        let socket = self.upstream_socket(server, socket2::Type::STREAM)?;
        let socket = TcpSocket::from_std_stream(socket.into());
        let exchange = async {
            let mut stream = socket.connect(server).await?;
            let len = u16::try_from(query.len()).map_err(|_| io::Error::other("query too long"))?;
            let mut framed = len.to_be_bytes().to_vec();
            framed.extend_from_slice(query);
            stream.write_all(&framed).await?;
            let mut len = [0u8; 2];
            stream.read_exact(&mut len).await?;
            let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
            stream.read_exact(&mut answer).await?;
            if answer.len() < 12 || answer[..2] != id.to_be_bytes() {
                return Err(io::Error::other("answer does not match the query"));
            }
            Ok(answer)
        };
        timeout(self.options.upstream_timeout, exchange).await
    }

    fn upstream_socket(
        &self,
        server: SocketAddr,
        kind: socket2::Type,
    ) -> io::Result<socket2::Socket> {
        let socket = socket2::Socket::new(socket2::Domain::for_address(server), kind, None)?;
        socket.set_nonblocking(true)?;
        if let Some(mark) = self.options.mark {
            // Without NET_ADMIN (unit tests as a user) the mark cannot be set; in the guard
            // container the ruleset would then drop the query, and the warning says why.
            if let Err(e) = socket.set_mark(mark) {
                if !self.mark_warned.swap(true, Ordering::Relaxed) {
                    eprintln!(
                        "yolo-guard: cannot mark upstream DNS sockets ({e}); continuing unmarked"
                    );
                }
            }
        }
        Ok(socket)
    }

    fn malformed(&self, name: &str, rcode: &str) {
        // A flood of garbage folds into one record per answer code and second.
        self.events.emit(EventKind::Dns {
            name: name.to_string(),
            qtype: String::new(),
            decision: "malformed".into(),
            answers: vec![],
            rcode: (!rcode.is_empty()).then(|| rcode.to_string()),
            entry: None,
            sample_of: None,
            count: None,
            first: None,
            last: None,
        });
    }

    fn audit(
        &self,
        name: &str,
        qtype: &str,
        decision: &str,
        answers: Vec<String>,
        rcode: Option<ResponseCode>,
    ) {
        self.events.emit(EventKind::Dns {
            name: name.to_string(),
            qtype: qtype.to_string(),
            decision: decision.to_string(),
            answers,
            rcode: rcode.map(rcode_name),
            entry: None,
            sample_of: None,
            count: None,
            first: None,
            last: None,
        });
    }
}

/// The DNS listener's kernel receive buffer: room for a few thousand queries that arrive
/// while a round is answered (the default holds a couple of hundred).
const RECEIVE_BUFFER: usize = 4 << 20;

/// Past `net.core.rmem_max` with `SO_RCVBUFFORCE` (the guard has NET_ADMIN), else as far as
/// `SO_RCVBUF` goes.
fn grow_receive_buffer(socket: &UdpSocket) {
    use std::os::fd::AsRawFd;
    if !crate::firewall::nflog::force_receive_buffer(socket.as_raw_fd(), RECEIVE_BUFFER) {
        let _ = socket2::SockRef::from(socket).set_recv_buffer_size(RECEIVE_BUFFER);
    }
}

/// Datagrams read from the kernel per round, and queries answered per round: reading is
/// cheap, so a round reads more than it answers and the kernel's buffer keeps room.
const READ_BATCH: usize = 4096;
const SERVE_BATCH: usize = 32;

async fn timeout<T>(limit: Duration, f: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    tokio::time::timeout(limit, f)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "timed out"))?
}

fn rand_id() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded per process and mixed with a counter: unpredictable enough for a
    // query id on a socket that is already connected to one upstream with a random port.
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish() as u16
}

/// Sockets per upstream server. More spread the queries over more source ports; each is one
/// conntrack entry for its whole life.
const POOL_SOCKETS: usize = 8;
/// Queries one pooled socket carries before a fresh one (a new random port) replaces it.
const ROTATE_AFTER: u32 = 2048;

/// Long-lived UDP sockets connected to one upstream server (see the module doc for what this
/// changes against a fresh socket per query).
struct UpstreamPool {
    server: SocketAddr,
    slots: Vec<std::sync::Mutex<Option<Arc<PooledSocket>>>>,
    next: std::sync::atomic::AtomicUsize,
}

struct PooledSocket {
    socket: UdpSocket,
    /// Queries waiting for their answer, by upstream id: the question they asked and where the
    /// answer goes.
    pending: std::sync::Mutex<Pending>,
    used: std::sync::atomic::AtomicU32,
    /// Replaced in its slot: takes no new queries, and its reader ends once none waits.
    retired: AtomicBool,
}

/// Queries waiting on one socket, by upstream id: the question asked and where the answer goes.
type Pending = HashMap<u16, (Vec<u8>, oneshot::Sender<Vec<u8>>)>;

/// A query's place in `pending`; dropping it (answered, timed out, cancelled) frees the id.
struct Waiting<'a> {
    socket: &'a PooledSocket,
    id: u16,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.socket.lock().remove(&self.id);
    }
}

impl UpstreamPool {
    fn new(server: SocketAddr) -> Self {
        UpstreamPool {
            server,
            slots: (0..POOL_SOCKETS)
                .map(|_| std::sync::Mutex::new(None))
                .collect(),
            next: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The next socket in turn, opened (or replaced, after [`ROTATE_AFTER`] queries) on demand.
    fn socket<P: Policy>(&self, forwarder: &Forwarder<P>) -> io::Result<Arc<PooledSocket>> {
        let slot = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[slot].lock().unwrap_or_else(|p| p.into_inner());
        if let Some(socket) = slot.as_ref() {
            if socket.used.fetch_add(1, Ordering::Relaxed) < ROTATE_AFTER {
                return Ok(Arc::clone(socket));
            }
            socket.retired.store(true, Ordering::Relaxed);
        }
        let socket = forwarder.upstream_socket(self.server, socket2::Type::DGRAM)?;
        let bind: SocketAddr = if self.server.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            ([0u16; 8], 0).into()
        };
        socket.bind(&bind.into())?;
        // Connected: the kernel delivers only datagrams from the server's address and port.
        socket.connect(&self.server.into())?;
        let socket = Arc::new(PooledSocket {
            socket: UdpSocket::from_std(socket.into())?,
            pending: std::sync::Mutex::new(HashMap::new()),
            used: std::sync::atomic::AtomicU32::new(1),
            retired: AtomicBool::new(false),
        });
        tokio::spawn(Arc::clone(&socket).read(forwarder.options.upstream_timeout));
        *slot = Some(Arc::clone(&socket));
        Ok(socket)
    }
}

impl PooledSocket {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait for the answer to `id` asking `question`; `None` when `id` is taken on this socket.
    fn wait_for(
        &self,
        id: u16,
        question: &[u8],
        tx: &mut Option<oneshot::Sender<Vec<u8>>>,
    ) -> Option<Waiting<'_>> {
        let mut pending = self.lock();
        if pending.contains_key(&id) {
            return None;
        }
        pending.insert(id, (question.to_vec(), tx.take()?));
        Some(Waiting { socket: self, id })
    }

    /// Hand each answer to the query with its id and question; ignore anything else (late or
    /// forged datagrams). Ends once retired and nobody waits.
    async fn read(self: Arc<Self>, idle: Duration) {
        // Not zeroed: only what the kernel writes is ever touched (resident).
        let mut buf = Vec::with_capacity(65_535);
        loop {
            buf.clear();
            match tokio::time::timeout(idle, self.socket.recv_buf(&mut buf)).await {
                Ok(Ok(len)) => {
                    let answer = &buf[..len];
                    if len < 12 || answer[2] & 0x80 == 0 {
                        continue;
                    }
                    let id = u16::from_be_bytes([answer[0], answer[1]]);
                    let mut pending = self.lock();
                    let matches = pending
                        .get(&id)
                        .is_some_and(|(question, _)| same_question(question, answer));
                    if matches {
                        if let Some((_, tx)) = pending.remove(&id) {
                            let _ = tx.send(answer.to_vec());
                        }
                    }
                }
                // The server's port is closed (ICMP): fail who waits now, not at the timeout.
                Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    self.lock().clear();
                }
                Ok(Err(_)) | Err(_) => {}
            }
            if self.retired.load(Ordering::Relaxed) && self.lock().is_empty() {
                return;
            }
        }
    }
}

/// The name a plain query (one question, no compression, labels of letters, digits, `-` and
/// `_`) asks, lowercase and without the trailing dot; `None` for anything else, which waits
/// with the refused: a label holding a dot would read as an allowed name here and be refused
/// by `triage`, and so jump the queue.
fn query_name(packet: &[u8]) -> Option<String> {
    if packet.len() < 12 || packet[2] & 0x80 != 0 || packet[4..6] != [0, 1] {
        return None;
    }
    let mut name = String::new();
    let mut at = 12;
    loop {
        let len = usize::from(*packet.get(at)?);
        if len == 0 {
            break;
        }
        if len & 0xc0 != 0 || name.len() + len > 254 {
            return None;
        }
        let label = packet.get(at + 1..at + 1 + len)?;
        if !label
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
        {
            return None;
        }
        if !name.is_empty() {
            name.push('.');
        }
        name.extend(label.iter().map(|b| char::from(b.to_ascii_lowercase())));
        at += 1 + len;
    }
    Some(name)
}

/// The question section of a query (name, type, class), which an answer must repeat.
fn question_of(query: &[u8]) -> Option<&[u8]> {
    let mut at = 12;
    loop {
        let len = usize::from(*query.get(at)?);
        // A compression pointer has no place in a query's only name.
        if len & 0xc0 != 0 {
            return None;
        }
        at += 1 + len;
        if len == 0 {
            break;
        }
    }
    query.get(12..at + 4)
}

/// The answer's question is the query's, the name compared without case (some servers echo
/// it in their own case).
fn same_question(question: &[u8], answer: &[u8]) -> bool {
    let (name, rest) = question.split_at(question.len() - 4);
    u16::from_be_bytes([answer[4], answer[5]]) == 1
        && answer.get(12..12 + question.len()).is_some_and(|echoed| {
            echoed[..name.len()].eq_ignore_ascii_case(name) && echoed[name.len()..] == *rest
        })
}

/// Lowercase, without the trailing dot: the form the allowlist and the audit log use.
fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Every A/AAAA address of the answer section and their largest TTL. Upstream answers a
/// CNAME chain with the chain and the addresses at its end, all in the answer section.
pub fn addresses(message: &Message) -> (Vec<IpAddr>, u32) {
    let mut addrs = Vec::new();
    let mut ttl = 0;
    for record in &message.answers {
        let addr = match &record.data {
            RData::A(a) => IpAddr::V4(a.0),
            RData::AAAA(aaaa) => IpAddr::V6(aaaa.0),
            _ => continue,
        };
        if !addrs.contains(&addr) {
            addrs.push(addr);
        }
        ttl = ttl.max(record.ttl);
    }
    (addrs, ttl)
}

/// How long an allowed address stays in the set: the answer's TTL, but never less than the floor
/// (clients cache longer than they should, and a 0-TTL answer must still be usable).
pub fn set_timeout(ttl: u32, floor_secs: u64) -> u64 {
    u64::from(ttl).max(floor_secs).max(1)
}

/// A REFUSED/NXDOMAIN answer that echoes the question.
fn refusal(query: &Message, rcode: ResponseCode) -> Option<Vec<u8>> {
    let mut reply = Message::response(query.id, query.op_code);
    reply.metadata.recursion_desired = query.recursion_desired;
    reply.metadata.recursion_available = true;
    reply.metadata.response_code = rcode;
    reply.add_queries(query.queries.iter().cloned());
    reply.to_vec().ok()
}

/// A bare header answer for queries that cannot be echoed: id, opcode and RD copied.
fn header_only(id: u16, query: &[u8], rcode: ResponseCode) -> Vec<u8> {
    let flags = query.get(2).copied().unwrap_or(0);
    let mut reply = [0u8; 12];
    reply[..2].copy_from_slice(&id.to_be_bytes());
    reply[2] = 0x80 | (flags & 0x79); // QR, opcode, RD
    reply[3] = 0x80 | (u16::from(rcode) as u8 & 0x0f); // RA, rcode
    reply.to_vec()
}

/// The mnemonic `dig` prints, for the audit log.
fn rcode_name(rcode: ResponseCode) -> String {
    match u16::from(rcode) {
        0 => "NOERROR".into(),
        1 => "FORMERR".into(),
        2 => "SERVFAIL".into(),
        3 => "NXDOMAIN".into(),
        4 => "NOTIMP".into(),
        5 => "REFUSED".into(),
        other => format!("RCODE{other}"),
    }
}

#[cfg(test)]
#[path = "forwarder_tests.rs"]
mod tests;
