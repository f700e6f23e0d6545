//! Forwards of a Compose sibling's port (`forwardPorts: ["db:5432"]`, as VS Code forwards it):
//! the guard listens on the port in the namespace it shares with the agent, where Docker
//! publishes it on the host's 127.0.0.1 like the container's own ports, and relays each
//! connection to the sibling.
//!
//! The sibling is looked up through the guard's own DNS listener, exactly as the agent's
//! lookups are: the name must be one of the session's local names (the siblings, which Docker's
//! DNS answers), the answer opens its address in the firewall's sets and is in the audit log,
//! and the relay's connection then leaves unmarked, judged by the same rules as the agent's. So
//! the relay reaches nothing the agent could not reach itself, and the agent cannot point it
//! anywhere else: its target is fixed in the guard's config. Written by hand: a lookup and
//! `copy_bidirectional` are all it is.

use crate::audit::events::{guard_event, Events};
use crate::dns::forwarder::addresses;
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::task::JoinHandle;
use yolo_protocol::Relay;

/// How long a lookup or a connection to the sibling may take.
const DEADLINE: Duration = Duration::from_secs(10);

/// Listen for each relay (all addresses of the namespace, IPv4) and serve it. A port that
/// cannot be bound is a `relay_unavailable` event, not a failed start: the session works
/// without it. The tasks end when dropped.
pub(super) async fn spawn(relays: &[Relay], dns: SocketAddr, events: &Arc<Events>) -> Relays {
    let mut tasks = Vec::new();
    for relay in relays {
        match TcpListener::bind(("0.0.0.0", relay.listen)).await {
            Ok(listener) => {
                let (relay, events) = (relay.clone(), Arc::clone(events));
                tasks.push(tokio::spawn(serve(listener, relay, dns, events)));
            }
            Err(e) => events.emit(guard_event(
                "relay_unavailable",
                [
                    ("port", relay.listen.into()),
                    ("target", format!("{}:{}", relay.host, relay.port).into()),
                    ("error", e.to_string().into()),
                ],
            )),
        }
    }
    Relays(tasks)
}

/// The relays' tasks, aborted when dropped.
pub(super) struct Relays(Vec<JoinHandle<()>>);

impl Drop for Relays {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

async fn serve(listener: TcpListener, relay: Relay, dns: SocketAddr, events: Arc<Events>) {
    loop {
        let Ok((client, from)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let (relay, events) = (relay.clone(), Arc::clone(&events));
        tokio::spawn(async move {
            if let Err(e) = pass(client, &relay, dns).await {
                events.emit(guard_event(
                    "relay_failed",
                    [
                        ("from", from.to_string().into()),
                        ("target", format!("{}:{}", relay.host, relay.port).into()),
                        ("error", e.to_string().into()),
                    ],
                ));
            }
        });
    }
}

async fn pass(mut client: TcpStream, relay: &Relay, dns: SocketAddr) -> io::Result<()> {
    let addrs = tokio::time::timeout(DEADLINE, lookup(dns, &relay.host))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no answer from the guard's DNS"))??;
    let Some(addr) = addrs.into_iter().find(IpAddr::is_ipv4) else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} has no address (is the service running?)", relay.host),
        ));
    };
    let mut upstream = tokio::time::timeout(
        DEADLINE,
        TcpStream::connect(SocketAddr::new(addr, relay.port)),
    )
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the service did not answer"))??;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// `name`'s IPv4 addresses, asked of the guard's DNS listener as the agent asks.
async fn lookup(dns: SocketAddr, name: &str) -> io::Result<Vec<IpAddr>> {
    fn invalid(e: impl std::fmt::Display) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, e.to_string())
    }
    let question = Query::query(Name::from_ascii(name).map_err(invalid)?, RecordType::A);
    let mut query = Message::query();
    query.metadata.recursion_desired = true;
    // A random id, on a connected socket, and the answer must match both: the agent shares
    // this loopback and could otherwise race in an answer of its own.
    let id = u16::from_ne_bytes(rand_bytes());
    query.metadata.id = id;
    query.add_query(question.clone());
    let socket = UdpSocket::bind("127.0.0.1:0").await?;
    socket.connect(dns).await?;
    socket.send(&query.to_vec().map_err(invalid)?).await?;
    let mut buf = vec![0u8; 4096];
    loop {
        let len = socket.recv(&mut buf).await?;
        let Ok(answer) = Message::from_vec(&buf[..len]) else {
            continue;
        };
        let asked = |q: &Query| {
            q.query_type() == RecordType::A
                && q.name()
                    .to_ascii()
                    .trim_end_matches('.')
                    .eq_ignore_ascii_case(name.trim_end_matches('.'))
        };
        if answer.metadata.id == id && answer.queries.first().is_some_and(asked) {
            return Ok(addresses(&answer).0);
        }
    }
}

/// Two random bytes from the kernel (the query's id).
fn rand_bytes() -> [u8; 2] {
    let mut bytes = [0u8; 2];
    // SAFETY: getrandom into a buffer of the length given.
    unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    bytes
}
