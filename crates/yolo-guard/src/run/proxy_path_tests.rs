//! The proxy as the running guard wires it, against the real kernel: the agent's DNS query for
//! an inspected name goes through the guard's forwarder (to a test upstream resolver), its
//! answer lands in the inspected set and the proxy's name binding (not in the all-ports allow
//! set), the ruleset's redirect sends the agent's TLS to the proxy, and the proxy's rules act
//! on what reaches the real host.
//!
//! Two namespaces: the guard's (the test thread: guard and agent share it, as in a session)
//! and the host's, joined by a veth pair, so the firewall's output chain judges the agent's
//! packets to the host as it does in a session (a host on loopback would be let through by
//! the `lo` rule on every port). The host serves TLS on 443 for both names, with a certificate
//! of its own CA (which the proxy is given as its roots), records what each request carried,
//! and answers on port 8022 with a line.

use super::guard::Guard;
use crate::audit::events::Events;
use crate::dns::forwarder::addresses;
use crate::dns::names::Resolved;
use crate::dns::{DnsOptions, Forwarder, Listeners};
use crate::firewall::batches::{Batches, Ruleset};
use crate::firewall::ruleset::{PROXY_PORT_HTTP, PROXY_PORT_TLS};
use crate::firewall::sets;
use crate::proxy::names::Inspected;
use crate::proxy::proxy_tests::{ca, tls_client, Ca};
use crate::proxy::serve::Proxy;
use crate::proxy::tls::Upstream;
use crate::testing::{firewall_config, in_netns, Failure};
use bytes::Bytes;
use hickory_proto::op::{Message, OpCode, Query};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rcgen::{CertificateParams, KeyPair};
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use yolo_protocol::allowlist::Allowlist;
use yolo_protocol::event::EventKind;
use yolo_protocol::NetworkMode;

/// The API host: a credential's and a forge's (git push to `/o/r`, refs `yolo/**`).
const HOST: &str = "api.wire.test";
const HOST_ADDR: &str = "198.51.100.20";
/// Another inspected host (method rules only), allowed besides on port 8022 by its entry.
const OTHER: &str = "other.wire.test";
const OTHER_ADDR: &str = "198.51.100.21";
/// An allowed host the proxy does not inspect, at HOST's address (a CDN's edge serving both).
const CDN: &str = "cdn.wire.test";
const STAND_IN: &str = "stand-in-wire-0123456789abcdef";
const REAL: &str = "real-value-wire-fedcba9876543210";
const ZERO: &str = "0000000000000000000000000000000000000000";
const ONE: &str = "1111111111111111111111111111111111111111";

/// What the host saw: one line per request (`METHOD path key=.. body=..`).
type Seen = Arc<Mutex<Vec<String>>>;

fn run(program: &str, args: &[&str]) -> Result<(), Failure> {
    let status = std::process::Command::new(program).args(args).status()?;
    if !status.success() {
        return Err(format!("{program} {args:?} failed").into());
    }
    Ok(())
}

/// The host's namespace, joined to this one by a veth pair; deleted on drop.
struct HostNetns(String);

impl HostNetns {
    /// `tag`: the test's own, so that tests running at once get namespaces of their own.
    fn make(tag: &str) -> Result<HostNetns, Failure> {
        let name = format!("yolo-guardtest-{tag}-{}", std::process::id());
        run("ip", &["netns", "add", &name])?;
        let netns = HostNetns(name);
        let n = netns.0.as_str();
        run("ip", &["link", "set", "lo", "up"])?;
        run(
            "ip",
            &[
                "link", "add", "wire-a", "type", "veth", "peer", "name", "wire-b", "netns", n,
            ],
        )?;
        run("ip", &["addr", "add", "198.51.100.1/24", "dev", "wire-a"])?;
        run("ip", &["link", "set", "wire-a", "up"])?;
        for args in [
            &["link", "set", "lo", "up"][..],
            &["addr", "add", &format!("{HOST_ADDR}/24"), "dev", "wire-b"],
            &["addr", "add", &format!("{OTHER_ADDR}/24"), "dev", "wire-b"],
            &["link", "set", "wire-b", "up"],
        ] {
            let mut all = vec!["-n", n];
            all.extend_from_slice(args);
            run("ip", &all)?;
        }
        Ok(netns)
    }

    /// Serve the host in its namespace on a thread of its own until `stop` is sent.
    fn serve(&self, host_ca: &Ca, seen: Seen) -> Result<tokio::sync::oneshot::Sender<()>, Failure> {
        let key = KeyPair::generate()?;
        let cert =
            CertificateParams::new(vec![HOST.to_string(), OTHER.to_string(), CDN.to_string()])?
                .signed_by(&key, &host_ca.issuer)?;
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let path = format!("/run/netns/{}", self.0);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::os::fd::AsRawFd;
            let Ok(file) = std::fs::File::open(&path) else {
                return;
            };
            // SAFETY: a valid netns fd; only this thread moves.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return;
            }
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                let tls = TcpListener::bind(("0.0.0.0", 443)).await.unwrap();
                let line = TcpListener::bind(("0.0.0.0", 8022)).await.unwrap();
                let plain = TcpListener::bind(("0.0.0.0", 80)).await.unwrap();
                let _ = ready_tx.send(());
                let plain_seen = Arc::clone(&seen);
                tokio::spawn(async move {
                    while let Ok((stream, _)) = plain.accept().await {
                        let seen = Arc::clone(&plain_seen);
                        let service = hyper::service::service_fn(move |req| {
                            host_service(req, Arc::clone(&seen))
                        });
                        tokio::spawn(
                            hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service),
                        );
                    }
                });
                tokio::spawn(async move {
                    while let Ok((mut stream, _)) = line.accept().await {
                        let _ = stream.write_all(b"port 8022\n").await;
                    }
                });
                tokio::spawn(async move {
                    while let Ok((stream, _)) = tls.accept().await {
                        let (acceptor, seen) = (acceptor.clone(), Arc::clone(&seen));
                        tokio::spawn(async move {
                            let Ok(stream) = acceptor.accept(stream).await else {
                                return;
                            };
                            let service = hyper::service::service_fn(move |req| {
                                host_service(req, Arc::clone(&seen))
                            });
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        });
                    }
                });
                let _ = stopped.await;
            });
        });
        ready_rx.recv_timeout(Duration::from_secs(10))?;
        Ok(stop)
    }
}

impl Drop for HostNetns {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.0]);
    }
}

async fn host_service(
    req: Request<Incoming>,
    seen: Seen,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let line = format!(
        "{} {} {} key={}",
        req.headers()
            .get("host")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-"),
        req.method(),
        req.uri().path(),
        req.headers()
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-"),
    );
    let body = req.into_body().collect().await?.to_bytes();
    seen.lock()
        .unwrap()
        .push(format!("{line} body={}", String::from_utf8_lossy(&body)));
    Ok(Response::new(Full::new(Bytes::from_static(b"served\n"))))
}

/// The test upstream resolver: HOST and OTHER to their addresses, on loopback.
async fn upstream_dns() -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        while let Ok((len, peer)) = socket.recv_from(&mut buf).await {
            let Ok(query) = Message::from_vec(&buf[..len]) else {
                continue;
            };
            let mut reply = Message::response(query.id, OpCode::Query);
            reply.metadata.recursion_available = true;
            reply.add_queries(query.queries.iter().cloned());
            if let Some(q) = query.queries.first() {
                let ip = match q.name().to_ascii().trim_end_matches('.') {
                    HOST | CDN => Some(HOST_ADDR),
                    OTHER => Some(OTHER_ADDR),
                    _ => None,
                };
                if let (Some(ip), RecordType::A) = (ip, q.query_type()) {
                    let ip: std::net::Ipv4Addr = ip.parse().unwrap();
                    reply.add_answer(Record::from_rdata(q.name().clone(), 60, RData::A(A(ip))));
                }
            }
            let _ = socket.send_to(&reply.to_vec().unwrap(), peer).await;
        }
    });
    addr
}

/// The agent's lookup through the guard's DNS.
async fn resolve(dns: SocketAddr, name: &str) -> Vec<IpAddr> {
    let mut query = Message::query();
    query.metadata.recursion_desired = true;
    query.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.send_to(&query.to_vec().unwrap(), dns).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let len = tokio::time::timeout(Duration::from_secs(5), socket.recv(&mut buf))
        .await
        .expect("the guard answers")
        .unwrap();
    addresses(&Message::from_vec(&buf[..len]).unwrap()).0
}

/// The session's config: HOST with a credential, a push rule and method rules; OTHER with
/// method rules, allowed on 443 and 8022 by its entry.
fn config(dns: SocketAddr) -> yolo_protocol::GuardConfig {
    let mut config = firewall_config(&[HOST, &format!("{OTHER}:443,8022"), CDN]);
    config.upstream = vec![dns];
    config.allow_internal_answers = true;
    config.http = serde_json::from_value(serde_json::json!({
        "hosts": [
            {"host": HOST, "allow": ["GET /**", "POST /**"], "git_push": {"repository": "/o/r"}},
            {"host": OTHER, "allow": ["GET /**"]},
        ],
        "credentials": [{"name": "example", "hosts": [HOST], "header": "x-api-key",
                         "stand_in": STAND_IN}],
    }))
    .unwrap();
    config
}

/// The guard as its control socket sees it.
type TestGuard = Arc<Guard<Ruleset>>;

/// The guard's parts as `run` wires them, serving DNS on loopback; returns its DNS address.
async fn start_guard(
    config: &yolo_protocol::GuardConfig,
    host_ca: &Ca,
    session_ca: &Ca,
    events: Arc<Events>,
) -> Result<(SocketAddr, Vec<tokio::task::JoinHandle<()>>, TestGuard), Failure> {
    let allowlist = Allowlist::parse(&config.allow).map_err(|e| e.to_string())?;
    let expected = Ruleset.build(config, &allowlist);
    sets::apply(&expected)?;
    Ruleset.verify(&expected)?;
    let inspected = Arc::new(Inspected::default());
    let proxy = Arc::new(Proxy::new(
        config.http.clone(),
        Upstream::from_pem(&[host_ca.pem.as_bytes()])?,
        Arc::clone(&inspected),
        Arc::clone(&events) as _,
        Some(yolo_protocol::GUARD_MARK),
    ));
    proxy.arm(yolo_protocol::control::ProxySecrets {
        ca_cert_pem: session_ca.pem.clone(),
        ca_key_pem: session_ca.key_pem.clone(),
        credentials: vec![("example".into(), REAL.into())],
    })?;
    let mut tasks = Vec::new();
    for (port, tls) in [(PROXY_PORT_TLS, true), (PROXY_PORT_HTTP, false)] {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let proxy = Arc::clone(&proxy);
        tasks.push(if tls {
            tokio::spawn(proxy.serve_tls(listener))
        } else {
            tokio::spawn(proxy.serve_plain(listener))
        });
    }
    let guard = Arc::new(Guard {
        mode: NetworkMode::Firewall,
        allow_internal_answers: true,
        allowlist: RwLock::new(allowlist),
        batches: Arc::new(Ruleset),
        resolved: Arc::new(Resolved::default()),
        events: Arc::clone(&events),
        proxy: Some(proxy),
        inspected,
    });
    let forwarder = Arc::new(Forwarder::new(
        DnsOptions::new(config.upstream.clone()),
        Arc::clone(&guard),
        Arc::clone(&guard.resolved),
        events,
    ));
    let listeners = Listeners::bind("127.0.0.1:0".parse()?, &[]).await?;
    let dns = listeners.udp_addrs()[0];
    let serving = forwarder.serve(listeners);
    tasks.push(tokio::spawn(async move {
        let _serving = serving;
        std::future::pending::<()>().await
    }));
    Ok((dns, tasks, guard))
}

/// One request over a fresh TLS connection to `addr` with `sni`, trusting the session CA.
async fn send(
    session_ca: &Ca,
    addr: IpAddr,
    sni: &str,
    request: Request<Full<Bytes>>,
) -> (StatusCode, String) {
    let tls = tls_client(session_ca, SocketAddr::new(addr, 443), sni, &[b"http/1.1"])
        .await
        .unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let response = sender.send_request(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn request(
    method: &str,
    host: &str,
    path: &str,
    key: Option<&str>,
    body: &[u8],
) -> Request<Full<Bytes>> {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header("host", host);
    if let Some(key) = key {
        builder = builder.header("x-api-key", key);
    }
    builder
        .body(Full::new(Bytes::copy_from_slice(body)))
        .unwrap()
}

/// A receive-pack request body: one command for `name`, the flush-pkt, then a pack's bytes.
fn push_body(name: &str) -> Vec<u8> {
    let line = format!("{ZERO} {ONE} {name}\0report-status\n");
    let mut body = format!("{:04x}{line}0000", line.len() + 4).into_bytes();
    body.extend_from_slice(b"PACK-the-pack-follows");
    body
}

/// Whether a TCP connection to `addr` is let through (and gets the host's line).
async fn reaches(addr: SocketAddr) -> bool {
    let Ok(Ok(mut stream)) =
        tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr)).await
    else {
        return false;
    };
    let mut line = String::new();
    matches!(
        tokio::time::timeout(Duration::from_secs(2), stream.read_to_string(&mut line)).await,
        Ok(Ok(_))
    ) && line == "port 8022\n"
}

/// What the test found, for the asserts outside the namespaces.
#[derive(Debug)]
struct Found {
    host_addrs: Vec<IpAddr>,
    other_addrs: Vec<IpAddr>,
    elements: Vec<(String, String)>,
    swapped: (StatusCode, String),
    misuse: (StatusCode, String),
    other_key: (StatusCode, String),
    other_repo: (StatusCode, String),
    to_main: (StatusCode, String),
    to_yolo: (StatusCode, String),
    host_8022: bool,
    other_8022: bool,
    seen: Vec<String>,
    events: Vec<EventKind>,
}

/// The whole path, from the agent's lookup to what the host receives.
#[test]
fn an_inspected_name_goes_from_dns_through_the_redirect_to_the_proxys_rules() {
    let Some(found) = in_netns("wire", || {
        let netns = HostNetns::make("wirehost")?;
        let host_ca = ca("wire host CA");
        let session_ca = ca("wire session CA");
        let seen: Seen = Arc::default();
        let stop = netns.serve(&host_ca, Arc::clone(&seen))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (events, rx) = Events::channel();
        let found = runtime.block_on(async {
            let dns = upstream_dns().await;
            let config = config(dns);
            let (dns, _tasks, _guard) = start_guard(&config, &host_ca, &session_ca, events).await?;
            let host_addrs = resolve(dns, HOST).await;
            let other_addrs = resolve(dns, OTHER).await;
            let (listed, _) = sets::summarize(&sets::list_table_value()?);
            let elements = listed.into_iter().map(|e| (e.set, e.element)).collect();
            let host = host_addrs[0];
            let other = other_addrs[0];
            let swapped = send(
                &session_ca,
                host,
                HOST,
                request("GET", HOST, "/v1/x", Some(STAND_IN), b""),
            )
            .await;
            let misuse = send(
                &session_ca,
                other,
                OTHER,
                request("GET", OTHER, "/leak", Some(STAND_IN), b""),
            )
            .await;
            let other_key = send(
                &session_ca,
                host,
                HOST,
                request(
                    "GET",
                    HOST,
                    "/v1/y",
                    Some("someone-elses-key-0123456789"),
                    b"",
                ),
            )
            .await;
            let pack = "/o/other.git/git-receive-pack";
            let other_repo = send(
                &session_ca,
                host,
                HOST,
                request("POST", HOST, pack, None, &push_body("refs/heads/yolo/x")),
            )
            .await;
            let pack = "/o/r.git/git-receive-pack";
            let to_main = send(
                &session_ca,
                host,
                HOST,
                request("POST", HOST, pack, None, &push_body("refs/heads/main")),
            )
            .await;
            let to_yolo = send(
                &session_ca,
                host,
                HOST,
                request("POST", HOST, pack, None, &push_body("refs/heads/yolo/x")),
            )
            .await;
            let host_8022 = reaches(SocketAddr::new(host, 8022)).await;
            let other_8022 = reaches(SocketAddr::new(other, 8022)).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<_, Failure>(Found {
                host_addrs,
                other_addrs,
                elements,
                swapped,
                misuse,
                other_key,
                other_repo,
                to_main,
                to_yolo,
                host_8022,
                other_8022,
                seen: seen.lock().unwrap().clone(),
                events: Vec::new(),
            })
        })?;
        let _ = stop.send(());
        Ok(Found {
            events: rx.try_iter().collect(),
            ..found
        })
    }) else {
        return;
    };
    let host: IpAddr = HOST_ADDR.parse().unwrap();
    let other: IpAddr = OTHER_ADDR.parse().unwrap();
    assert_eq!(
        (found.host_addrs.as_slice(), found.other_addrs.as_slice()),
        (&[host][..], &[other][..])
    );
    // DNS put both in the inspected set, neither in the all-ports set; OTHER's entry names
    // 8022 (and 443, which the redirect takes before the filter), so those are in the port set.
    let has =
        |set: &str, element: &str| found.elements.iter().any(|(s, e)| s == set && e == element);
    assert!(
        has("inspect4", HOST_ADDR) && has("inspect4", OTHER_ADDR),
        "{:?}",
        found.elements
    );
    assert!(
        !found.elements.iter().any(|(s, _)| s == "allow4"),
        "{:?}",
        found.elements
    );
    assert!(
        has("allow4_port", &format!("{OTHER_ADDR} . 8022")),
        "{:?}",
        found.elements
    );
    // The credential: the host saw the real value; the client only ever sent the stand-in.
    assert_eq!(found.swapped.0, StatusCode::OK, "{:?}", found.swapped);
    let seen = found.seen.join("\n");
    assert!(
        seen.contains(&format!("{HOST} GET /v1/x key={REAL}")),
        "{seen}"
    );
    assert!(
        !seen.contains(STAND_IN),
        "the stand-in never reaches a host: {seen}"
    );
    // The stand-in to another inspected host: 403, and a credential_misuse event.
    assert_eq!(found.misuse.0, StatusCode::FORBIDDEN, "{:?}", found.misuse);
    assert!(
        found.misuse.1.contains("credentials.example"),
        "{}",
        found.misuse.1
    );
    assert!(
        found.events.iter().any(
            |e| matches!(e, EventKind::CredentialMisuse { credential, host, .. }
            if credential == "example" && host == OTHER)
        ),
        "{:?}",
        found.events
    );
    // Someone else's key on the credential's host: 403, never forwarded.
    assert_eq!(
        found.other_key.0,
        StatusCode::FORBIDDEN,
        "{:?}",
        found.other_key
    );
    assert!(!seen.contains("/v1/y"), "{seen}");
    // Pushes: to another repository and to main refused; to yolo/x forwarded whole.
    assert_eq!(
        found.other_repo.0,
        StatusCode::FORBIDDEN,
        "{:?}",
        found.other_repo
    );
    assert!(
        found.other_repo.1.contains("origin"),
        "{}",
        found.other_repo.1
    );
    assert_eq!(
        found.to_main.0,
        StatusCode::FORBIDDEN,
        "{:?}",
        found.to_main
    );
    assert!(
        found.to_main.1.contains("refs/heads/main"),
        "{}",
        found.to_main.1
    );
    assert_eq!(found.to_yolo.0, StatusCode::OK, "{:?}", found.to_yolo);
    let pushes: Vec<&String> = found
        .seen
        .iter()
        .filter(|l| l.contains("git-receive-pack"))
        .collect();
    assert_eq!(pushes.len(), 1, "{pushes:?}");
    assert!(
        pushes[0].contains("refs/heads/yolo/x") && pushes[0].ends_with("0000PACK-the-pack-follows"),
        "{pushes:?}"
    );
    // Another port of an inspected address: refused; the port an entry names: reached.
    assert!(!found.host_8022, "port 8022 of {HOST} must be refused");
    assert!(
        found.other_8022,
        "port 8022 of {OTHER} is named by its allow entry"
    );
}

/// One plain request to `addr`:80 naming `host`: the status and body, `None` when the
/// connection fails.
async fn send_plain(addr: IpAddr, host: &str, path: &str) -> Option<(StatusCode, String)> {
    let tcp = tokio::time::timeout(
        Duration::from_secs(3),
        TcpStream::connect(SocketAddr::new(addr, 80)),
    )
    .await
    .ok()?
    .ok()?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .ok()?;
    tokio::spawn(conn);
    let response = tokio::time::timeout(
        Duration::from_secs(3),
        sender.send_request(request("GET", host, path, None, b"")),
    )
    .await
    .ok()?
    .ok()?;
    let status = response.status();
    let body = response.into_body().collect().await.ok()?.to_bytes();
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

/// One request over TLS to `addr`:443 with `sni`, trusting `ca` only: `None` when the
/// connection or the handshake fails.
async fn send_trusting(
    ca: &Ca,
    addr: IpAddr,
    sni: &str,
    path: &str,
) -> Option<(StatusCode, String)> {
    let tls = tokio::time::timeout(
        Duration::from_secs(3),
        tls_client(ca, SocketAddr::new(addr, 443), sni, &[b"http/1.1"]),
    )
    .await
    .ok()?
    .ok()?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .ok()?;
    tokio::spawn(conn);
    let response = sender
        .send_request(request("GET", sni, path, None, b""))
        .await
        .ok()?;
    let status = response.status();
    let body = response.into_body().collect().await.ok()?.to_bytes();
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

#[derive(Debug)]
struct Shared {
    cdn_addrs: Vec<IpAddr>,
    /// CDN over TLS, trusting the host's own CA: passed through, the host's certificate.
    cdn_tls: Option<(StatusCode, String)>,
    /// CDN over TLS, trusting the session CA: the proxy does not terminate it.
    cdn_tls_session_ca: Option<(StatusCode, String)>,
    cdn_plain: Option<(StatusCode, String)>,
    /// A name the guard never answered, with HOST's address: still refused.
    stranger_tls: Option<(StatusCode, String)>,
    stranger_plain: Option<(StatusCode, String)>,
    /// HOST itself on the shared address: inspected as before.
    host_tls: Option<(StatusCode, String)>,
    /// After `deny OTHER`: its address (answered before the deny) over TLS.
    other_after_deny: Option<(StatusCode, String)>,
    inspect_before: Vec<String>,
    inspect_after: Vec<String>,
    seen: Vec<String>,
}

/// A CDN's edge serving an inspected and a non-inspected host: the inspected set takes the
/// address, so the non-inspected host's 443 and 80 reach the proxy, which passes them through
/// untouched (the host's own certificate, no rules) for the name the guard answered with that
/// address, and refuses any other name. A `deny` of an inspected name takes its addresses out
/// of the inspected sets and the proxy's names at once.
#[test]
fn a_shared_address_passes_a_non_inspected_name_through_and_a_deny_releases_an_address() {
    let Some(found) = in_netns("wire-shared", || {
        let netns = HostNetns::make("sharedhost")?;
        let host_ca = ca("wire host CA");
        let session_ca = ca("wire session CA");
        let seen: Seen = Arc::default();
        let stop = netns.serve(&host_ca, Arc::clone(&seen))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (events, _rx) = Events::channel();
        let found = runtime.block_on(async {
            let dns = upstream_dns().await;
            let config = config(dns);
            let (dns, _tasks, guard) = start_guard(&config, &host_ca, &session_ca, events).await?;
            let host_addrs = resolve(dns, HOST).await;
            let cdn_addrs = resolve(dns, CDN).await;
            let other_addrs = resolve(dns, OTHER).await;
            let inspect_set = || -> Result<Vec<String>, Failure> {
                let (listed, _) = sets::summarize(&sets::list_table_value()?);
                let mut inspect: Vec<String> = listed
                    .into_iter()
                    .filter(|e| e.set == "inspect4")
                    .map(|e| e.element)
                    .collect();
                inspect.sort();
                Ok(inspect)
            };
            let inspect_before = inspect_set()?;
            let shared = host_addrs[0];
            let cdn_tls = send_trusting(&host_ca, shared, CDN, "/cdn-tls").await;
            let cdn_tls_session_ca = send_trusting(&session_ca, shared, CDN, "/cdn-mitm").await;
            let cdn_plain = send_plain(shared, CDN, "/cdn-plain").await;
            let stranger_tls = send_trusting(&host_ca, shared, "evil.wire.test", "/x").await;
            let stranger_plain = send_plain(shared, "evil.wire.test", "/y").await;
            let host_tls = send_trusting(&session_ca, shared, HOST, "/host").await;
            let denied = guard.deny_patterns(vec![format!("{OTHER}:443,8022")]);
            if !denied.ok {
                return Err(format!("deny: {denied:?}").into());
            }
            let other_after_deny =
                send_trusting(&session_ca, other_addrs[0], OTHER, "/after-deny").await;
            let inspect_after = inspect_set()?;
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<_, Failure>(Shared {
                cdn_addrs,
                cdn_tls,
                cdn_tls_session_ca,
                cdn_plain,
                stranger_tls,
                stranger_plain,
                host_tls,
                other_after_deny,
                inspect_before,
                inspect_after,
                seen: seen.lock().unwrap().clone(),
            })
        })?;
        let _ = stop.send(());
        Ok(found)
    }) else {
        return;
    };
    let shared: IpAddr = HOST_ADDR.parse().unwrap();
    assert_eq!(found.cdn_addrs, [shared]);
    let served = |r: &Option<(StatusCode, String)>| matches!(r, Some((StatusCode::OK, body)) if body == "served\n");
    // Passed through: the host's own certificate (the client trusts only the host's CA), and
    // the host saw the request as sent.
    assert!(served(&found.cdn_tls), "{:?}", found.cdn_tls);
    assert!(
        found.cdn_tls_session_ca.is_none(),
        "the proxy must not terminate a non-inspected name's TLS: {:?}",
        found.cdn_tls_session_ca
    );
    assert!(served(&found.cdn_plain), "{:?}", found.cdn_plain);
    let seen = found.seen.join("\n");
    assert!(seen.contains(&format!("{CDN} GET /cdn-tls")), "{seen}");
    assert!(seen.contains(&format!("{CDN} GET /cdn-plain")), "{seen}");
    // A name the guard never answered: refused on both ports, never at the host.
    assert!(!served(&found.stranger_tls), "{:?}", found.stranger_tls);
    assert!(
        matches!(
            &found.stranger_plain,
            None | Some((StatusCode::FORBIDDEN, _))
        ),
        "{:?}",
        found.stranger_plain
    );
    assert!(!seen.contains("evil.wire.test"), "{seen}");
    // The inspected name on the shared address is still the proxy's (session CA, credential).
    assert!(served(&found.host_tls), "{:?}", found.host_tls);
    assert!(seen.contains(&format!("{HOST} GET /host")), "{seen}");
    // The deny: OTHER's address leaves the inspected set, and a new connection to it is
    // refused at once.
    assert!(
        found.inspect_before.contains(&OTHER_ADDR.to_string()),
        "{:?}",
        found.inspect_before
    );
    assert!(
        !found.inspect_after.contains(&OTHER_ADDR.to_string()),
        "a denied inspected name's address must leave the inspected set: {:?}",
        found.inspect_after
    );
    assert!(
        found.inspect_after.contains(&HOST_ADDR.to_string()),
        "{:?}",
        found.inspect_after
    );
    assert!(
        found.other_after_deny.is_none(),
        "{:?}",
        found.other_after_deny
    );
    assert!(!seen.contains("/after-deny"), "{seen}");
}
