//! The proxy's transport against real sockets, each test in a throwaway network namespace
//! (root, `nft`, `ip netns`; skipped without them unless `YOLO_REQUIRE_NETNS` is set). The
//! "real host" is a hyper server with a certificate from a test CA of its own, on an address
//! added to the namespace's loopback and put in the inspected set; the guard's own ruleset
//! redirects connections to it on 443 and 80 to the proxy, except the proxy's own marked ones.
//! Clients trust the session CA only.

use super::names::Inspected;
use super::serve::{Exchange, Proxy, Record, Refused};
use super::tls::Upstream;
use super::upstream::HTTP1_PER_CONN;
use crate::firewall::batches::{Batches, Ruleset};
use crate::firewall::{ruleset, sets};
use crate::testing::{firewall_config, in_netns};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use yolo_protocol::allowlist::Allowlist;

/// The inspected host's address, on the namespace's loopback.
const HOST_ADDR: &str = "198.51.100.10";
const HOST: &str = "api.inspected.test";
/// Another inspected name the guard answered with the same address (a CDN's shared front).
const OTHER: &str = "other.inspected.test";
const PROXY_TLS: u16 = ruleset::PROXY_PORT_TLS;
const PROXY_PLAIN: u16 = ruleset::PROXY_PORT_HTTP;
/// The guard's socket mark, which the ruleset neither redirects nor refuses towards
/// inspected addresses on 443 and 80.
const MARK: u32 = yolo_protocol::GUARD_MARK;
type TestBody = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;

pub(crate) struct Ca {
    pub(crate) issuer: Issuer<'static, KeyPair>,
    pub(crate) pem: String,
    pub(crate) key_pem: String,
}

pub(crate) fn ca(name: &str) -> Ca {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let key_pem = key.serialize_pem();
    Ca {
        issuer: Issuer::new(params, key),
        pem: cert.pem(),
        key_pem,
    }
}

/// What the proxy recorded.
#[derive(Default)]
struct Log {
    exchanges: Mutex<Vec<Exchange>>,
    refused: Mutex<Vec<Refused>>,
}

impl Record for Log {
    fn exchange(&self, exchange: Exchange) {
        self.exchanges.lock().unwrap().push(exchange);
    }
    fn refused(&self, refused: Refused) {
        self.refused.lock().unwrap().push(refused);
    }
}

/// The stand-in the test clients hold, and the real value the host must see in its place.
const STAND_IN: &str = "stand-in-0123456789abcdef";
const REAL: &str = "the-real-value";

/// The rules for the transport's tests: the credential `example` for both names, swapped in
/// `x-api-key`; on HOST, every method but DELETE.
fn http_config() -> yolo_protocol::http::HttpConfig {
    serde_json::from_value(serde_json::json!({
        "hosts": [{"host": HOST, "allow": ["GET /**", "POST /**", "PUT /**"]}],
        "credentials": [{"name": "example", "hosts": [HOST, OTHER], "header": "x-api-key",
                         "stand_in": STAND_IN}],
    }))
    .unwrap()
}

/// The session's secrets as `yolo up` sends them.
fn secrets(session_ca: &Ca) -> yolo_protocol::control::ProxySecrets {
    yolo_protocol::control::ProxySecrets {
        ca_cert_pem: session_ca.pem.clone(),
        ca_key_pem: session_ca.key_pem.clone(),
        credentials: vec![("example".into(), REAL.into())],
    }
}

/// The real host: answers `/stream` with a first chunk, then the rest once `gate` opens;
/// `/upgrade` with 101 and an echo of the bytes after it; anything else with what it saw.
async fn host_service(req: Request<Incoming>, gate: Arc<Notify>) -> Response<TestBody> {
    let seen = format!(
        "version={:?} te={} path={} key={} host={}",
        req.version(),
        req.headers()
            .get("te")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-"),
        req.uri().path(),
        req.headers()
            .get("x-api-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-"),
        req.headers()
            .get("host")
            .and_then(|v| v.to_str().ok())
            .or(req.uri().authority().map(|a| a.as_str()))
            .unwrap_or("-"),
    );
    match req.uri().path() {
        "/stream" => {
            let (mut tx, body) = http_body_util::channel::Channel::<Bytes, hyper::Error>::new(4);
            tokio::spawn(async move {
                let _ = tx.send_data(Bytes::from_static(b"first\n")).await;
                gate.notified().await;
                let _ = tx.send_data(Bytes::from_static(b"rest\n")).await;
            });
            Response::new(body.boxed())
        }
        "/upgrade" => {
            let mut req = req;
            let on = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                if let Ok(upgraded) = on.await {
                    let mut io = TokioIo::new(upgraded);
                    let mut buf = [0u8; 64];
                    while let Ok(n) = io.read(&mut buf).await {
                        if n == 0 || io.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                }
            });
            Response::builder()
                .status(StatusCode::SWITCHING_PROTOCOLS)
                .header("connection", "upgrade")
                .header("upgrade", "echo")
                .body(Empty::new().map_err(|never| match never {}).boxed())
                .unwrap()
        }
        // The host ends the connection after this answer (as at its keep-alive timeout).
        "/close" => Response::builder()
            .header("connection", "close")
            .body(
                Full::new(Bytes::from(seen))
                    .map_err(|never| match never {})
                    .boxed(),
            )
            .unwrap(),
        _ => Response::new(
            Full::new(Bytes::from(seen))
                .map_err(|never| match never {})
                .boxed(),
        ),
    }
}

/// Serve the real host on `HOST_ADDR:443` (TLS, a leaf from `host_ca`) and `:80`, counting
/// the connections it accepts in `accepted`.
async fn start_host(host_ca: &Ca, gate: Arc<Notify>, accepted: Arc<AtomicUsize>) {
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec![HOST.to_string(), OTHER.to_string()]).unwrap();
    let cert = params.signed_by(&key, &host_ca.issuer).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
    .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    for (port, tls) in [(443, true), (80, false)] {
        let listener = TcpListener::bind((HOST_ADDR, port)).await.unwrap();
        let acceptor = acceptor.clone();
        let gate = Arc::clone(&gate);
        let accepted = Arc::clone(&accepted);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                accepted.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                let gate = Arc::clone(&gate);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let gate = Arc::clone(&gate);
                        async move { Ok::<_, std::convert::Infallible>(host_service(req, gate).await) }
                    });
                    let builder =
                        hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    if tls {
                        if let Ok(stream) = acceptor.accept(stream).await {
                            let _ = builder
                                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                                .await;
                        }
                    } else {
                        let _ = builder
                            .serve_connection_with_upgrades(TokioIo::new(stream), service)
                            .await;
                    }
                });
            }
        });
    }
}

/// The namespace as the guard makes it: loopback up, the host's address on it, the guard's
/// own ruleset applied (its `redirect` chain sends unmarked TCP to an inspected address on 443
/// and 80 to the proxy's ports) and the host's address in the inspected set, as DNS puts it.
fn network() -> Result<(), crate::testing::Failure> {
    let run = |program: &str, args: &[&str]| -> Result<(), crate::testing::Failure> {
        let status = std::process::Command::new(program).args(args).status()?;
        if !status.success() {
            return Err(format!("{program} {args:?} failed").into());
        }
        Ok(())
    };
    run("ip", &["link", "set", "lo", "up"])?;
    run(
        "ip",
        &["addr", "add", &format!("{HOST_ADDR}/32"), "dev", "lo"],
    )?;
    let config = firewall_config(&[HOST, OTHER]);
    let allow = Allowlist::parse(&config.allow).map_err(|e| e.to_string())?;
    let expected = Ruleset.build(&config, &allow);
    sets::apply(&expected)?;
    Ruleset.verify(&expected)?;
    sets::apply(&ruleset::add_inspected(&[HOST_ADDR.parse().unwrap()], 300))?;
    Ok(())
}

struct Setup {
    proxy: Arc<Proxy>,
    session_ca: Ca,
    log: Arc<Log>,
    gate: Arc<Notify>,
    /// Connections the real host accepted.
    accepted: Arc<AtomicUsize>,
}

/// The network, the real host and the proxy in front of it, trusting `upstream_ca`.
async fn setup(upstream_trusts_host: bool) -> Setup {
    let host_ca = ca("test host CA");
    let gate = Arc::new(Notify::new());
    let accepted = Arc::new(AtomicUsize::new(0));
    start_host(&host_ca, Arc::clone(&gate), Arc::clone(&accepted)).await;
    let session_ca = ca("yolo session CA");
    let trusted = if upstream_trusts_host {
        host_ca.pem.clone()
    } else {
        ca("some other CA").pem
    };
    let names = Arc::new(Inspected::default());
    let addr: IpAddr = HOST_ADDR.parse().unwrap();
    let until = Instant::now() + Duration::from_secs(300);
    names.record(HOST, &[addr], until);
    names.record(OTHER, &[addr], until);
    let log = Arc::new(Log::default());
    let proxy = Arc::new(Proxy::new(
        http_config(),
        Upstream::from_pem(&[trusted.as_bytes()]).unwrap(),
        names,
        log.clone(),
        Some(MARK),
    ));
    proxy.arm(secrets(&session_ca)).unwrap();
    let tls = TcpListener::bind(("127.0.0.1", PROXY_TLS)).await.unwrap();
    let plain = TcpListener::bind(("127.0.0.1", PROXY_PLAIN)).await.unwrap();
    tokio::spawn(Arc::clone(&proxy).serve_tls(tls));
    tokio::spawn(Arc::clone(&proxy).serve_plain(plain));
    Setup {
        proxy,
        session_ca,
        log,
        gate,
        accepted,
    }
}

/// A TLS client trusting only `ca`, connected to `addr` with `sni` and `alpn`.
pub(crate) async fn tls_client(
    ca: &Ca,
    addr: SocketAddr,
    sni: &str,
    alpn: &[&[u8]],
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(
            rustls_pki_types::pem::PemObject::from_pem_slice(ca.pem.as_bytes())
                .map(|c: CertificateDer<'static>| c.to_vec())
                .unwrap(),
        ))
        .unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(sni.to_string()).unwrap(), tcp)
        .await
}

fn host_addr(port: u16) -> SocketAddr {
    SocketAddr::new(HOST_ADDR.parse().unwrap(), port)
}

/// A GET as the agent sends it: with the stand-in of `example`.
fn get(path: &str, host: &str) -> Request<Empty<Bytes>> {
    Request::get(path)
        .header("host", host)
        .header("x-api-key", STAND_IN)
        .body(Empty::new())
        .unwrap()
}

async fn h1_sender<I>(io: I) -> hyper::client::conn::http1::SendRequest<Empty<Bytes>>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .unwrap();
    tokio::spawn(conn.with_upgrades());
    sender
}

/// An agent connection speaking HTTP/2 to the inspected host (through the proxy).
async fn h2_agent<B>(session_ca: &Ca) -> hyper::client::conn::http2::SendRequest<B>
where
    B: hyper::body::Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let tls = tls_client(session_ca, host_addr(443), HOST, &[b"h2"])
        .await
        .unwrap();
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    sender
}

async fn text(response: Response<Incoming>) -> String {
    let body = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&body).into_owned()
}

/// Run `body` in a namespace of its own with a current-thread runtime.
fn in_proxy_netns<T: Send + 'static>(
    tag: &str,
    body: impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = T>>> + Send + 'static,
) -> Option<T> {
    in_netns(tag, move || {
        network()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(runtime
            .block_on(async { tokio::time::timeout(Duration::from_secs(60), body()).await })?)
    })
}

/// A GET through the redirect reaches the real host with the credential's header put in,
/// over HTTP/1.1, and its streamed body comes through chunk by chunk: the first chunk
/// arrives while the host still holds the rest back.
#[test]
fn a_get_is_forwarded_and_its_body_streams() {
    let Some((seen, first, rest, exchanges)) = in_proxy_netns("proxy-get", || {
        Box::pin(async {
            let s = setup(true).await;
            let tls = tls_client(&s.session_ca, host_addr(443), HOST, &[b"http/1.1"])
                .await
                .unwrap();
            let mut sender = h1_sender(tls).await;
            let response = sender
                .send_request(get("/hello?q=secret", HOST))
                .await
                .unwrap();
            let seen = text(response).await;
            let response = sender.send_request(get("/stream", HOST)).await.unwrap();
            let mut body = response.into_body();
            let first = tokio::time::timeout(Duration::from_secs(5), body.frame())
                .await
                .expect("the first chunk must arrive before the host finishes")
                .unwrap()
                .unwrap()
                .into_data()
                .unwrap();
            s.gate.notify_one();
            let rest = body.collect().await.unwrap().to_bytes();
            tokio::time::sleep(Duration::from_millis(50)).await;
            let exchanges = s.log.exchanges.lock().unwrap().clone();
            (seen, first, rest, exchanges)
        })
    }) else {
        return;
    };
    // The agent spoke HTTP/1.1; the proxy's own connection took HTTP/2 where the host offered it.
    assert!(
        seen.ends_with(&format!("path=/hello key=the-real-value host={HOST}")),
        "{seen}"
    );
    assert_eq!(&first[..], b"first\n");
    assert_eq!(&rest[..], b"rest\n");
    let hello = &exchanges[0];
    assert_eq!(
        (
            hello.method.as_str(),
            hello.host.as_str(),
            hello.path.as_str()
        ),
        ("GET", HOST, "/hello"),
        "the query string is cut"
    );
    assert_eq!(hello.status, 200);
    assert_eq!(hello.credential.as_deref(), Some("example"));
    assert_eq!(hello.bytes_down, seen.len() as u64);
    assert_eq!(exchanges[1].bytes_down, 11);
}

/// HTTP/2 through ALPN towards the agent; towards the host HTTP/1.1 (fewer, bigger reads: see
/// `upstream`), unless the request needs HTTP/2: one that asks for trailers (gRPC) goes over
/// HTTP/2 with its `te: trailers`.
#[test]
fn an_http2_agent_is_served_http2_and_the_host_gets_http2_only_when_the_request_needs_it() {
    let Some((alpn, versions, seen)) = in_proxy_netns("proxy-h2", || {
        Box::pin(async {
            let s = setup(true).await;
            let tls = tls_client(&s.session_ca, host_addr(443), HOST, &[b"h2"])
                .await
                .unwrap();
            let alpn = tls.get_ref().1.alpn_protocol().map(|p| p.to_vec());
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .unwrap();
            tokio::spawn(conn);
            let (mut versions, mut seen) = (Vec::new(), Vec::new());
            for te in [None, Some("trailers")] {
                let mut request =
                    Request::get(format!("https://{HOST}/h2")).header("x-api-key", STAND_IN);
                if let Some(te) = te {
                    request = request.header("te", te);
                }
                let request = request.body(Empty::<Bytes>::new()).unwrap();
                let response = sender.send_request(request).await.unwrap();
                versions.push(response.version());
                seen.push(text(response).await);
            }
            (alpn, versions, seen)
        })
    }) else {
        return;
    };
    assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));
    assert_eq!(versions, [Version::HTTP_2, Version::HTTP_2]);
    assert!(
        seen[0].starts_with("version=HTTP/1.1 te=- path=/h2 key=the-real-value"),
        "{seen:?}"
    );
    assert!(
        seen[1].starts_with("version=HTTP/2.0 te=trailers path=/h2 key=the-real-value"),
        "{seen:?}"
    );
}

/// HTTP/2 to HTTP/1.1 smuggling: an HTTP/2 request whose body runs past its content-length
/// with a second request in it, sent at once and (so the request is already on its way to the
/// host) after a pause. The host must never see that second request, which the rules never
/// judged: not on the request's own connection, and not as the answer to the agent's next
/// request on the kept one.
#[test]
fn a_request_smuggled_past_an_http2_content_length_never_reaches_the_host() {
    let Some((answers, paths)) = in_proxy_netns("proxy-h2-smuggle", || {
        Box::pin(async {
            let s = setup(true).await;
            let mut sender = h2_agent(&s.session_ca).await;
            let smuggled = format!(
                "\r\n\r\nGET /smuggled HTTP/1.1\r\nhost: {HOST}\r\nx-api-key: {STAND_IN}\r\n\r\n"
            );
            let mut answers = Vec::new();
            for pause in [None, Some(Duration::from_millis(200))] {
                let (mut tx, body) =
                    http_body_util::channel::Channel::<Bytes, hyper::Error>::new(4);
                let rest = smuggled.clone();
                tokio::spawn(async move {
                    let _ = tx.send_data(Bytes::from_static(b"hello")).await;
                    if let Some(pause) = pause {
                        tokio::time::sleep(pause).await;
                    }
                    let _ = tx.send_data(Bytes::from(rest)).await;
                });
                let request = Request::post(format!("https://{HOST}/first"))
                    .header("x-api-key", STAND_IN)
                    .header("content-length", "5")
                    .body(body)
                    .unwrap();
                answers.push(match sender.send_request(request).await {
                    Ok(response) => text(response).await,
                    Err(e) => format!("refused: {e}"),
                });
                let request = Request::get(format!("https://{HOST}/second"))
                    .header("x-api-key", STAND_IN)
                    .body(http_body_util::channel::Channel::<Bytes, hyper::Error>::new(1).1)
                    .unwrap();
                answers.push(text(sender.send_request(request).await.unwrap()).await);
            }
            // Let the records be written (a body that ends or is dropped).
            tokio::time::sleep(Duration::from_millis(50)).await;
            let paths: Vec<String> = s
                .log
                .exchanges
                .lock()
                .unwrap()
                .iter()
                .map(|e| e.path.clone())
                .collect();
            (answers, paths)
        })
    }) else {
        return;
    };
    // The paused attempt reached the proxy and went on to the host (the test's own client
    // did not stop it): the body past its length is what must not follow it.
    assert!(paths.contains(&"/first".to_string()), "{paths:?}");
    assert!(
        answers.iter().all(|a| !a.contains("smuggled")),
        "{answers:?}"
    );
    assert!(answers[1].contains("path=/second"), "{answers:?}");
    assert!(answers[3].contains("path=/second"), "{answers:?}");
}

/// An HTTP/2 agent's requests at once: HTTP/1.1 connections to the host up to
/// [`HTTP1_PER_CONN`], and the rest share one HTTP/2 connection, never a connection each.
#[test]
fn requests_at_once_open_at_most_the_http1_cap_and_then_share_one_http2_connection() {
    let Some((opened, bodies)) = in_proxy_netns("proxy-h2-many", || {
        Box::pin(async {
            let s = setup(true).await;
            let mut sender = h2_agent(&s.session_ca).await;
            // Each `/stream` answer stays open (its first chunk sent) until the gate opens.
            let mut responses = Vec::new();
            for _ in 0..HTTP1_PER_CONN + 4 {
                let request = Request::get(format!("https://{HOST}/stream"))
                    .header("x-api-key", STAND_IN)
                    .body(Empty::<Bytes>::new())
                    .unwrap();
                responses.push(sender.send_request(request).await.unwrap());
            }
            let opened = s.accepted.load(Ordering::SeqCst);
            // Open the gate for every answer, also one not yet waiting at it.
            let gate = Arc::clone(&s.gate);
            let opener = tokio::spawn(async move {
                loop {
                    gate.notify_waiters();
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            });
            let mut bodies = Vec::new();
            for response in responses {
                bodies.push(text(response).await);
            }
            opener.abort();
            (opened, bodies)
        })
    }) else {
        return;
    };
    assert_eq!(opened, HTTP1_PER_CONN + 1);
    assert!(bodies.iter().all(|b| b == "first\nrest\n"), "{bodies:?}");
}

/// An Upgrade (what WebSocket does) becomes a byte pipe to the host once it said 101.
#[test]
fn an_upgrade_is_passed_through_both_ways() {
    let Some((status, echoed)) = in_proxy_netns("proxy-upgrade", || {
        Box::pin(async {
            let s = setup(true).await;
            let tls = tls_client(&s.session_ca, host_addr(443), HOST, &[b"http/1.1"])
                .await
                .unwrap();
            let mut sender = h1_sender(tls).await;
            let request = Request::get("/upgrade")
                .header("host", HOST)
                .header("connection", "upgrade")
                .header("upgrade", "echo")
                .body(Empty::new())
                .unwrap();
            let response = sender.send_request(request).await.unwrap();
            let status = response.status();
            let mut io = TokioIo::new(hyper::upgrade::on(response).await.unwrap());
            io.write_all(b"ping over the pipe").await.unwrap();
            let mut buf = vec![0u8; 18];
            io.read_exact(&mut buf).await.unwrap();
            (status, buf)
        })
    }) else {
        return;
    };
    assert_eq!(status, StatusCode::SWITCHING_PROTOCOLS);
    assert_eq!(&echoed[..], b"ping over the pipe");
}

/// ATTACK: the host's certificate is not one the guard trusts (here: signed by a CA the
/// guard was not given; in the wild, an interception on the way). The proxy refuses with a
/// 502 that says why, and never forwards without verification.
#[test]
fn an_untrusted_host_certificate_is_refused_with_502() {
    let Some((status, body)) = in_proxy_netns("proxy-untrusted", || {
        Box::pin(async {
            let s = setup(false).await;
            let tls = tls_client(&s.session_ca, host_addr(443), HOST, &[b"http/1.1"])
                .await
                .unwrap();
            let mut sender = h1_sender(tls).await;
            let response = sender.send_request(get("/hello", HOST)).await.unwrap();
            (response.status(), text(response).await)
        })
    }) else {
        return;
    };
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert!(body.contains("not trusted"), "{body}");
    assert!(!body.contains("the-real-value"), "{body}");
}

/// ATTACK: the TLS connection names one host (SNI) and the request another (Host header or
/// HTTP/2 `:authority`), hoping the rules judge the first and the host serves the second.
#[test]
fn a_request_for_another_host_than_the_sni_is_misdirected() {
    let Some((h1, h2, sni_port)) = in_proxy_netns("proxy-sni-host", || {
        Box::pin(async {
            let s = setup(true).await;
            let tls = tls_client(&s.session_ca, host_addr(443), HOST, &[b"http/1.1"])
                .await
                .unwrap();
            let mut sender = h1_sender(tls).await;
            let h1 = sender
                .send_request(get("/x", OTHER))
                .await
                .unwrap()
                .status();
            let mut sender = h2_agent(&s.session_ca).await;
            let request = Request::get(format!("https://{OTHER}/x"))
                .body(Empty::<Bytes>::new())
                .unwrap();
            let h2 = sender.send_request(request).await.unwrap().status();
            let request = Request::get(format!("https://{HOST}:8443/x"))
                .body(Empty::<Bytes>::new())
                .unwrap();
            let port = sender.send_request(request).await.unwrap().status();
            (h1, h2, port)
        })
    }) else {
        return;
    };
    assert_eq!(h1, StatusCode::MISDIRECTED_REQUEST);
    assert_eq!(h2, StatusCode::MISDIRECTED_REQUEST);
    assert_eq!(sni_port, StatusCode::MISDIRECTED_REQUEST);
}

/// ATTACK: connect to the proxy's port directly (no redirect), and to the host's address
/// with an SNI the guard never answered with that address: both are closed before any
/// HTTP, and recorded.
#[test]
fn a_direct_connection_and_an_unbound_sni_are_refused() {
    let Some((direct, unbound, refused)) = in_proxy_netns("proxy-direct", || {
        Box::pin(async {
            let s = setup(true).await;
            let proxy = SocketAddr::from(([127, 0, 0, 1], PROXY_TLS));
            let direct = tls_client(&s.session_ca, proxy, HOST, &[b"http/1.1"]).await;
            let unbound = tls_client(
                &s.session_ca,
                host_addr(443),
                "evil.example",
                &[b"http/1.1"],
            )
            .await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            let refused = s.log.refused.lock().unwrap().clone();
            (direct.is_ok(), unbound.is_ok(), refused)
        })
    }) else {
        return;
    };
    assert!(!direct, "a direct connection got a TLS session");
    assert!(
        !unbound,
        "an SNI not answered with that address got a TLS session"
    );
    assert!(
        refused
            .iter()
            .any(|r| r.reason.contains("direct connection")),
        "{refused:?}"
    );
    assert!(
        refused
            .iter()
            .any(|r| r.name.as_deref() == Some("evil.example")),
        "{refused:?}"
    );
}

/// A ClientHello split over many TCP segments (a trick against proxies that read one
/// packet for the SNI) is read whole; CONNECT is refused; the rules' refusal is a 403 that
/// never reaches the host.
#[test]
fn a_split_client_hello_is_read_whole_and_connect_and_refusals_stay_here() {
    let Some((seen, connect, delete)) = in_proxy_netns("proxy-split", || {
        Box::pin(async {
            let s = setup(true).await;
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(
                    <CertificateDer as rustls_pki_types::pem::PemObject>::from_pem_slice(
                        s.session_ca.pem.as_bytes(),
                    )
                    .unwrap(),
                )
                .unwrap();
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
            let tcp = TcpStream::connect(host_addr(443)).await.unwrap();
            tcp.set_nodelay(true).unwrap();
            let split = Trickle { inner: tcp };
            let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
                .connect(ServerName::try_from(HOST).unwrap(), split)
                .await
                .unwrap();
            let mut sender = h1_sender(tls).await;
            let seen = text(sender.send_request(get("/split", HOST)).await.unwrap()).await;
            let connect = Request::connect(format!("{HOST}:443"))
                .header("host", HOST)
                .body(Empty::new())
                .unwrap();
            let connect = sender.send_request(connect).await.unwrap().status();
            let delete = Request::delete("/thing")
                .header("host", HOST)
                .body(Empty::new())
                .unwrap();
            let delete = sender.send_request(delete).await.unwrap();
            (seen, connect, (delete.status(), text(delete).await))
        })
    }) else {
        return;
    };
    assert!(seen.contains("path=/split"), "{seen}");
    assert_eq!(connect, StatusCode::FORBIDDEN);
    assert_eq!(delete.0, StatusCode::FORBIDDEN);
    assert!(
        delete.1.contains(&format!("rule: http.\"{HOST}\".allow")),
        "{}",
        delete.1
    );
}

/// Port 80: the same path without TLS; the Host header must be a name the guard answered
/// with the original address.
#[test]
fn plain_http_is_forwarded_for_an_answered_host_only() {
    let Some((seen, unbound)) = in_proxy_netns("proxy-plain", || {
        Box::pin(async {
            setup(true).await;
            let tcp = TcpStream::connect(host_addr(80)).await.unwrap();
            let mut sender = h1_sender(tcp).await;
            let seen = text(sender.send_request(get("/plain", HOST)).await.unwrap()).await;
            let unbound = sender
                .send_request(get("/plain", "evil.example"))
                .await
                .unwrap()
                .status();
            (seen, unbound)
        })
    }) else {
        return;
    };
    assert_eq!(
        seen,
        format!("version=HTTP/1.1 te=- path=/plain key=the-real-value host={HOST}")
    );
    assert_eq!(unbound, StatusCode::FORBIDDEN);
}

/// The proxy keeps its connection to the host between one agent connection's requests (a new
/// TLS handshake per request cost ~2 ms each, bench/http.sh), over HTTP/2 (443) and HTTP/1.1
/// (80), and opens a new one when the host closed the kept one; another agent connection
/// never gets the first one's (each is bound to the name and address it was checked for).
#[test]
fn the_host_connection_is_kept_for_the_agent_connections_next_requests() {
    let Some((tls_counts, plain_counts, seen)) = in_proxy_netns("proxy-keep", || {
        Box::pin(async {
            let s = setup(true).await;
            let accepted = || s.accepted.load(Ordering::SeqCst);
            let mut seen = Vec::new();
            let mut tls_counts = Vec::new();
            for _ in 0..2 {
                let tls = tls_client(&s.session_ca, host_addr(443), HOST, &[b"http/1.1"])
                    .await
                    .unwrap();
                let mut sender = h1_sender(tls).await;
                for path in ["/a", "/b", "/c"] {
                    seen.push(text(sender.send_request(get(path, HOST)).await.unwrap()).await);
                    tls_counts.push(accepted());
                }
            }
            // An agent speaking HTTP/2: one host connection for all its requests one by one.
            let mut h2 = h2_agent(&s.session_ca).await;
            for path in ["/a", "/b", "/c"] {
                let request = Request::get(format!("https://{HOST}{path}"))
                    .header("x-api-key", STAND_IN)
                    .body(Empty::<Bytes>::new())
                    .unwrap();
                seen.push(text(h2.send_request(request).await.unwrap()).await);
                tls_counts.push(accepted());
            }
            let before = accepted();
            let tcp = TcpStream::connect(host_addr(80)).await.unwrap();
            let mut sender = h1_sender(tcp).await;
            let mut plain_counts = Vec::new();
            for path in ["/a", "/b", "/close", "/c", "/d"] {
                seen.push(text(sender.send_request(get(path, HOST)).await.unwrap()).await);
                // Let the host's close reach the proxy, as between real requests.
                tokio::time::sleep(Duration::from_millis(20)).await;
                plain_counts.push(accepted() - before);
            }
            (tls_counts, plain_counts, seen)
        })
    }) else {
        return;
    };
    assert!(
        seen.iter().all(|s| s.contains("key=the-real-value")),
        "{seen:?}"
    );
    // One host connection per agent connection: the second agent connection opens its own.
    assert_eq!(tls_counts, [1, 1, 1, 2, 2, 2, 3, 3, 3]);
    assert!(seen[6].starts_with("version=HTTP/1.1"), "{seen:?}");
    // HTTP/1.1: kept until the host closes it after /close, then a new one is kept.
    assert_eq!(plain_counts, [1, 1, 1, 2, 2]);
}

/// A stream that writes at most 7 bytes per call: with TCP_NODELAY each goes out as a
/// segment of its own.
struct Trickle {
    inner: TcpStream,
}

impl tokio::io::AsyncRead for Trickle {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Trickle {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let n = buf.len().min(7);
        std::pin::Pin::new(&mut self.inner).poll_write(cx, &buf[..n])
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Fail closed: until the session's secrets arrive, an inspected connection gets no TLS and no
/// request through, and the refusal says why; once they arrive, the same request passes.
#[test]
fn without_the_sessions_secrets_every_inspected_connection_is_refused() {
    let Some((before, refused, after)) = in_proxy_netns("proxy-unarmed", || {
        Box::pin(async {
            let host_ca = ca("test host CA");
            start_host(&host_ca, Arc::new(Notify::new()), Arc::default()).await;
            let session_ca = ca("yolo session CA");
            let names = Arc::new(Inspected::default());
            let until = Instant::now() + Duration::from_secs(300);
            names.record(HOST, &[HOST_ADDR.parse().unwrap()], until);
            let log = Arc::new(Log::default());
            let proxy = Arc::new(Proxy::new(
                http_config(),
                Upstream::from_pem(&[host_ca.pem.as_bytes()]).unwrap(),
                names,
                log.clone(),
                Some(MARK),
            ));
            let tls = TcpListener::bind(("127.0.0.1", PROXY_TLS)).await.unwrap();
            tokio::spawn(Arc::clone(&proxy).serve_tls(tls));
            let before = tls_client(&session_ca, host_addr(443), HOST, &[b"http/1.1"])
                .await
                .map(|_| ());
            tokio::time::sleep(Duration::from_millis(50)).await;
            let refused = log.refused.lock().unwrap().clone();
            proxy.arm(secrets(&session_ca)).unwrap();
            let tls = tls_client(&session_ca, host_addr(443), HOST, &[b"http/1.1"])
                .await
                .unwrap();
            let mut sender = h1_sender(tls).await;
            let after = text(sender.send_request(get("/armed", HOST)).await.unwrap()).await;
            (before, refused, after)
        })
    }) else {
        return;
    };
    assert!(before.is_err(), "no TLS before the secrets");
    assert!(
        refused
            .iter()
            .any(|r| r.reason.contains("secrets are missing")),
        "{refused:?}"
    );
    assert!(after.contains("path=/armed key=the-real-value"), "{after}");
}

/// ATTACK: held requests the agent gives up on. An HTTP/2 client sends requests the host's
/// rules refuse (held for the user's answer) and resets each stream before any answer, more
/// than the guard lets wait at once. Each reset gives its place back: the question shows
/// nobody waiting, and a request held afterwards is still held (not refused for a full
/// list). A held request the user then allows goes on to the host.
#[test]
fn held_requests_whose_streams_are_reset_hold_nothing() {
    let Some((after_resets, still_held, answered)) = in_proxy_netns("proxy-held-reset", || {
        Box::pin(async {
            let s = setup(true).await;
            let (events, rx) = crate::audit::events::Events::channel();
            std::mem::forget(rx);
            let approvals = Arc::new(crate::ask::Approvals::new(Duration::from_secs(30), events));
            s.proxy.ask_with(Arc::clone(&approvals));
            let mut sender = h2_agent::<Empty<Bytes>>(&s.session_ca).await;
            let delete = |path: &str| {
                Request::delete(format!("https://{HOST}{path}"))
                    .header("x-api-key", STAND_IN)
                    .body(Empty::<Bytes>::new())
                    .unwrap()
            };
            let waiting = |approvals: &crate::ask::Approvals| {
                approvals.list().iter().map(|p| p.waiting).sum::<u32>()
            };
            // Past the total that may wait at once, each reset as soon as it is held.
            for _ in 0..crate::ask::MAX_WAITING + 8 {
                sender.ready().await.unwrap();
                let response = sender.send_request(delete("/gone"));
                let mut response = Box::pin(response);
                let until = Instant::now() + Duration::from_secs(10);
                while waiting(&approvals) == 0 {
                    assert!(Instant::now() < until, "the request was never held");
                    tokio::select! {
                        r = &mut response => panic!("answered before any answer: {r:?}"),
                        _ = tokio::time::sleep(Duration::from_millis(2)) => {}
                    }
                }
                drop(response); // RST_STREAM
                let until = Instant::now() + Duration::from_secs(10);
                while waiting(&approvals) != 0 {
                    assert!(Instant::now() < until, "the reset request still waits");
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            let after_resets = approvals.list();
            // Another request is held, not refused for a full list, and goes on when allowed.
            sender.ready().await.unwrap();
            let response = tokio::spawn(sender.send_request(delete("/kept")));
            let until = Instant::now() + Duration::from_secs(10);
            let id = loop {
                if let Some(p) = approvals.list().iter().find(|p| p.name.ends_with("/kept")) {
                    break p.id;
                }
                assert!(Instant::now() < until, "the next request was not held");
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            let still_held = approvals.list();
            let taken = approvals.take(id).unwrap();
            s.proxy
                .change_rule(HOST, &"DELETE /kept".parse().unwrap(), true)
                .unwrap();
            approvals.answer(taken, true, "test", "session");
            let answered = text(response.await.unwrap().unwrap()).await;
            (after_resets, still_held, answered)
        })
    }) else {
        return;
    };
    assert_eq!(after_resets.len(), 1, "{after_resets:?}");
    assert_eq!(after_resets[0].name, format!("{HOST} DELETE /gone"));
    assert_eq!(after_resets[0].waiting, 0, "{after_resets:?}");
    assert!(still_held.iter().any(|p| p.waiting == 1), "{still_held:?}");
    assert!(answered.contains("path=/kept"), "{answered}");
}
