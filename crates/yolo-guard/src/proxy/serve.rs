//! The proxy's transport: accept what the `nat` redirect sends to the proxy's ports, check
//! where the connection was going, terminate TLS with a leaf for the SNI name, serve HTTP/1.1
//! and HTTP/2 with hyper, and forward each request the rules let through over the proxy's own
//! connection to the original address. Bodies stream both ways frame by frame; an Upgrade
//! (WebSocket) becomes two byte pipes joined once both sides said 101.
//!
//! Request smuggling is left to hyper's parser, which is strict: a request with both
//! Content-Length and Transfer-Encoding, or two differing Content-Lengths, is rejected before
//! it reaches this code, and the upstream request is written anew by hyper from the parsed
//! head (never the agent's bytes), so the host sees exactly what the rules judged.

use super::names::{normalize, Inspected};
use super::tls::{SessionCa, Upstream, ALPN_H2};
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_rustls::{LazyConfigAcceptor, TlsConnector};

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub(crate) type ProxyBody = BoxBody<Bytes, BoxError>;

/// How long a client may take to send its ClientHello, and the proxy to reach the host.
const HANDSHAKE: Duration = Duration::from_secs(15);

/// What the rules say of one request (the transport's view of `rules::Decision`).
#[derive(Debug, Clone)]
pub(crate) enum Verdict {
    /// Forward, with `set` headers put in place (a credential's real value), crediting `rule`.
    Forward {
        rule: String,
        set: Vec<(HeaderName, HeaderValue)>,
        credential: Option<String>,
    },
    /// Answer `status` with `body` and forward nothing.
    Refuse {
        status: StatusCode,
        rule: String,
        body: String,
        /// A credential's stand-in sent where it does not belong (`credential_misuse`).
        misuse: Option<String>,
    },
}

/// The head of a request as the rules see it: the host is the SNI name (or the Host header on
/// port 80), checked against the original address before the rules are asked.
#[derive(Debug, Clone)]
pub(crate) struct Head<'a> {
    pub(crate) method: &'a Method,
    pub(crate) host: &'a str,
    pub(crate) path: &'a str,
    pub(crate) headers: &'a HeaderMap,
}

/// The rules, as the transport asks them.
pub(crate) trait Rules: Send + Sync + 'static {
    fn decide(&self, head: &Head<'_>) -> Verdict;
}

/// One request's record, for the audit log (`http` events): written when its response body
/// ends or is dropped.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Exchange {
    pub(crate) method: String,
    pub(crate) host: String,
    /// Without the query string.
    pub(crate) path: String,
    pub(crate) status: u16,
    pub(crate) bytes_up: u64,
    pub(crate) bytes_down: u64,
    pub(crate) duration_ms: u64,
    pub(crate) rule: String,
    pub(crate) credential: Option<String>,
    /// The stand-in's credential when it was sent where it may not go.
    pub(crate) misuse: Option<String>,
}

/// A connection the proxy refused before any HTTP: why, and where it was going.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refused {
    pub(crate) destination: Option<SocketAddr>,
    pub(crate) name: Option<String>,
    pub(crate) reason: String,
}

/// Where the proxy's records go (the guard's audit events; a channel in tests).
pub(crate) trait Record: Send + Sync + 'static {
    fn exchange(&self, exchange: Exchange);
    fn refused(&self, refused: Refused);
}

pub(crate) struct Proxy {
    pub(crate) ca: SessionCa,
    pub(crate) upstream: Upstream,
    pub(crate) names: Arc<Inspected>,
    pub(crate) rules: Arc<dyn Rules>,
    pub(crate) record: Arc<dyn Record>,
    /// SO_MARK of the proxy's upstream sockets: the ruleset lets them out and does not
    /// redirect them back.
    pub(crate) mark: Option<u32>,
}

impl Proxy {
    /// Serve TLS (what was going to port 443) on `listener` until the task is dropped.
    pub(crate) async fn serve_tls(self: Arc<Self>, listener: TcpListener) {
        self.serve(listener, true).await
    }

    /// Serve plain HTTP (port 80) on `listener`.
    pub(crate) async fn serve_plain(self: Arc<Self>, listener: TcpListener) {
        self.serve(listener, false).await
    }

    async fn serve(self: Arc<Self>, listener: TcpListener, tls: bool) {
        let local = listener.local_addr().ok();
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                // EMFILE and the like: wait instead of spinning.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let proxy = Arc::clone(&self);
            tokio::spawn(async move {
                if let Err(refused) = proxy.connection(stream, local, tls).await {
                    proxy.record.refused(refused);
                }
            });
        }
    }

    async fn connection(
        self: &Arc<Self>,
        stream: TcpStream,
        local: Option<SocketAddr>,
        tls: bool,
    ) -> Result<(), Refused> {
        let _ = stream.set_nodelay(true);
        let destination = self.destination(&stream, local)?;
        let refuse = |name: Option<&str>, reason: String| Refused {
            destination: Some(destination),
            name: name.map(str::to_string),
            reason,
        };
        if !tls {
            let conn = Arc::new(Conn {
                proxy: Arc::clone(self),
                destination,
                sni: None,
            });
            serve_http(TokioIo::new(stream), conn).await;
            return Ok(());
        }
        let acceptor = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream);
        let start = tokio::time::timeout(HANDSHAKE, acceptor)
            .await
            .map_err(|_| refuse(None, "no ClientHello in time".into()))?
            .map_err(|e| refuse(None, format!("not a TLS ClientHello: {e}")))?;
        let Some(sni) = start.client_hello().server_name().map(normalize) else {
            return Err(refuse(
                None,
                "a ClientHello without a server name (SNI)".into(),
            ));
        };
        if !self.names.answered(&sni, destination.ip()) {
            return Err(refuse(
                Some(&sni),
                format!(
                    "the guard did not answer {sni} with {}: the server name and the address name different hosts",
                    destination.ip()
                ),
            ));
        }
        let config = self
            .ca
            .server_config(&sni)
            .map_err(|e| refuse(Some(&sni), e))?;
        let tls = tokio::time::timeout(HANDSHAKE, start.into_stream(config))
            .await
            .map_err(|_| refuse(Some(&sni), "TLS handshake timed out".into()))?
            .map_err(|e| refuse(Some(&sni), format!("TLS handshake failed: {e}")))?;
        let conn = Arc::new(Conn {
            proxy: Arc::clone(self),
            destination,
            sni: Some(sni),
        });
        serve_http(TokioIo::new(tls), conn).await;
        Ok(())
    }

    /// Where the agent's connection was going before the redirect. Refused: a connection
    /// that was not redirected (to the proxy's own address: conntrack shows no other
    /// destination) and one to an address no inspected name was answered with.
    fn destination(
        &self,
        stream: &TcpStream,
        local: Option<SocketAddr>,
    ) -> Result<SocketAddr, Refused> {
        let socket = socket2::SockRef::from(stream);
        let original = if stream.local_addr().is_ok_and(|a| a.is_ipv4()) {
            socket.original_dst_v4()
        } else {
            socket.original_dst_v6()
        };
        let original = original.ok().and_then(|a| a.as_socket()).ok_or(Refused {
            destination: None,
            name: None,
            reason: "no original destination: the connection was not redirected".into(),
        })?;
        let local = stream.local_addr().ok().or(local);
        if Some(original) == local {
            return Err(Refused {
                destination: Some(original),
                name: None,
                reason: "a direct connection to the proxy, not a redirected one".into(),
            });
        }
        if !self.names.is_inspected(original.ip()) {
            return Err(Refused {
                destination: Some(original),
                name: None,
                reason: format!("{} is not an inspected address", original.ip()),
            });
        }
        Ok(original)
    }
}

async fn serve_http<I>(io: TokioIo<I>, conn: Arc<Conn>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let conn = Arc::clone(&conn);
        async move { Ok::<_, std::convert::Infallible>(conn.handle(req).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let _ = builder.serve_connection_with_upgrades(io, service).await;
}

/// One agent connection: where it was going, under which name, and the proxy's connections
/// to that place.
struct Conn {
    proxy: Arc<Proxy>,
    destination: SocketAddr,
    /// `None` on port 80.
    sni: Option<String>,
}

impl Conn {
    async fn handle(&self, mut req: Request<Incoming>) -> Response<ProxyBody> {
        let started = Instant::now();
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let mut exchange = Exchange {
            method: method.to_string(),
            host: self.sni.clone().unwrap_or_default(),
            path: path.clone(),
            status: 0,
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
            rule: String::new(),
            credential: None,
            misuse: None,
        };
        let host = match self.host(&req) {
            Ok(host) => host,
            Err((status, why)) => {
                exchange.rule = "host".into();
                return self.answer(exchange, status, why, started);
            }
        };
        exchange.host = host.clone();
        if method == Method::CONNECT {
            exchange.rule = "connect".into();
            return self.answer(
                exchange,
                StatusCode::FORBIDDEN,
                "yolo: CONNECT is refused: the guard's proxy forwards requests, not tunnels\n"
                    .into(),
                started,
            );
        }
        let verdict = self.proxy.rules.decide(&Head {
            method: &method,
            host: &host,
            path: &path,
            headers: req.headers(),
        });
        let set = match verdict {
            Verdict::Refuse {
                status,
                rule,
                body,
                misuse,
            } => {
                exchange.rule = rule;
                exchange.misuse = misuse;
                return self.answer(exchange, status, body, started);
            }
            Verdict::Forward {
                rule,
                set,
                credential,
            } => {
                exchange.rule = rule;
                exchange.credential = credential;
                set
            }
        };
        let upgrade =
            req.version() == Version::HTTP_11 && req.headers().contains_key(header::UPGRADE);
        let downstream_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
        let (mut parts, body) = req.into_parts();
        strip_hop_by_hop(&mut parts.headers, upgrade);
        for (name, value) in set {
            parts.headers.insert(name, value);
        }
        let tally = Arc::new(Tally::default());
        let body = Counted {
            inner: body,
            count: Arc::clone(&tally),
            up: true,
        }
        .map_err(BoxError::from)
        .boxed();
        let sender = match self.sender(&host, upgrade).await {
            Ok(sender) => sender,
            Err(why) => {
                return self.answer(exchange, StatusCode::BAD_GATEWAY, why, started);
            }
        };
        // The host's form of the target: origin-form for HTTP/1.1, absolute for HTTP/2
        // (hyper writes `:scheme` and `:authority` from it).
        let path_and_query = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let scheme = if self.sni.is_some() { "https" } else { "http" };
        parts.uri = match &sender {
            Sender::H2(_) => Uri::builder()
                .scheme(scheme)
                .authority(host.as_str())
                .path_and_query(path_and_query)
                .build(),
            Sender::H1(_) => Uri::builder().path_and_query(path_and_query).build(),
        }
        .unwrap_or_default();
        match &sender {
            Sender::H2(_) => {
                parts.version = Version::HTTP_2;
                parts.headers.remove(header::HOST);
            }
            Sender::H1(_) => {
                parts.version = Version::HTTP_11;
                if let Ok(value) = HeaderValue::from_str(&host) {
                    parts.headers.insert(header::HOST, value);
                }
            }
        }
        let upstream_req = Request::from_parts(parts, body);
        let response = match sender {
            Sender::H2(mut s) => s.send_request(upstream_req).await,
            Sender::H1(mut s) => s.send_request(upstream_req).await,
        };
        let mut response = match response {
            Ok(response) => response,
            Err(e) => {
                return self.answer(
                    exchange,
                    StatusCode::BAD_GATEWAY,
                    format!("yolo: the request to {host} failed: {e}\n"),
                    started,
                )
            }
        };
        exchange.status = response.status().as_u16();
        if response.status() == StatusCode::SWITCHING_PROTOCOLS {
            if let Some(downstream) = downstream_upgrade {
                let upstream = hyper::upgrade::on(&mut response);
                tokio::spawn(async move {
                    if let (Ok(down), Ok(up)) = tokio::join!(downstream, upstream) {
                        let _ = tokio::io::copy_bidirectional(
                            &mut TokioIo::new(down),
                            &mut TokioIo::new(up),
                        )
                        .await;
                    }
                });
            }
        }
        let (mut parts, body) = response.into_parts();
        strip_hop_by_hop(
            &mut parts.headers,
            parts.status == StatusCode::SWITCHING_PROTOCOLS,
        );
        let body = Counted {
            inner: body,
            count: Arc::clone(&tally),
            up: false,
        };
        let body = Recorded {
            inner: body,
            done: Some(Pending {
                exchange,
                started,
                tally,
                record: Arc::clone(&self.proxy.record),
            }),
        }
        .map_err(BoxError::from)
        .boxed();
        Response::from_parts(parts, body)
    }

    /// The request's host: the SNI name, which `:authority` and the Host header must both
    /// equal when present (else 421: the request names another host than the connection);
    /// on port 80, the Host header, which the guard must have answered with the original
    /// address (else 403).
    fn host(&self, req: &Request<Incoming>) -> Result<String, (StatusCode, String)> {
        let default_port = if self.sni.is_some() { 443 } else { 80 };
        let mut named = Vec::new();
        if let Some(authority) = req.uri().authority() {
            named.push(authority.as_str().to_string());
        }
        for value in req.headers().get_all(header::HOST) {
            let value = value.to_str().map_err(|_| {
                (
                    StatusCode::BAD_REQUEST,
                    "yolo: the Host header is not text\n".to_string(),
                )
            })?;
            named.push(value.to_string());
        }
        let mut hosts = Vec::new();
        for n in &named {
            hosts.push(host_of(n, default_port).ok_or((
                StatusCode::MISDIRECTED_REQUEST,
                format!("yolo: {n:?} names another port than the connection's\n"),
            ))?);
        }
        match &self.sni {
            Some(sni) => {
                if let Some(other) = hosts.iter().find(|h| *h != sni) {
                    return Err((
                        StatusCode::MISDIRECTED_REQUEST,
                        format!("yolo: the request names {other} on a connection to {sni}\n"),
                    ));
                }
                Ok(sni.clone())
            }
            None => {
                let Some(first) = hosts.first() else {
                    return Err((
                        StatusCode::BAD_REQUEST,
                        "yolo: a request without a Host header\n".into(),
                    ));
                };
                if hosts.iter().any(|h| h != first) {
                    return Err((
                        StatusCode::BAD_REQUEST,
                        "yolo: the request names two hosts\n".into(),
                    ));
                }
                if !self.proxy.names.answered(first, self.destination.ip()) {
                    return Err((
                        StatusCode::FORBIDDEN,
                        format!(
                            "yolo: the guard did not answer {first} with {}\n",
                            self.destination.ip()
                        ),
                    ));
                }
                Ok(first.clone())
            }
        }
    }

    /// A response of the proxy's own, recorded at once.
    fn answer(
        &self,
        mut exchange: Exchange,
        status: StatusCode,
        body: String,
        started: Instant,
    ) -> Response<ProxyBody> {
        exchange.status = status.as_u16();
        exchange.duration_ms = started.elapsed().as_millis() as u64;
        self.proxy.record.exchange(exchange);
        let mut response = Response::new(
            Full::new(Bytes::from(body))
                .map_err(|never| match never {})
                .boxed(),
        );
        *response.status_mut() = status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        response
    }

    /// A connection to the original address for this request: a fresh one per request
    /// (hyper's client connections are cheap; the pool would be a second source of truth on
    /// which name a connection was opened for). TLS is verified against the configured roots
    /// only; a failure is the answer, never a fallback.
    async fn sender(&self, host: &str, upgrade: bool) -> Result<Sender, String> {
        let tcp = connect(self.destination, self.proxy.mark)
            .await
            .map_err(|e| format!("yolo: cannot reach {host} at {}: {e}\n", self.destination))?;
        let Some(sni) = &self.sni else {
            return h1(tcp).await;
        };
        let config = if upgrade {
            Arc::clone(&self.proxy.upstream.http1)
        } else {
            Arc::clone(&self.proxy.upstream.any)
        };
        let name = rustls_pki_types::ServerName::try_from(sni.clone())
            .map_err(|e| format!("yolo: {sni:?} is not a server name: {e}\n"))?;
        let tls = tokio::time::timeout(HANDSHAKE, TlsConnector::from(config).connect(name, tcp))
            .await
            .map_err(|_| format!("yolo: the TLS handshake with {host} timed out\n"))?
            .map_err(|e| {
                format!(
                    "yolo: refused: the certificate of {host} ({}) is not trusted by the guard: {e}\n",
                    self.destination
                )
            })?;
        if tls.get_ref().1.alpn_protocol() == Some(ALPN_H2) {
            let (sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .map_err(|e| format!("yolo: HTTP/2 with {host} failed: {e}\n"))?;
            tokio::spawn(conn);
            return Ok(Sender::H2(sender));
        }
        h1(tls).await
    }
}

enum Sender {
    H1(hyper::client::conn::http1::SendRequest<ProxyBody>),
    H2(hyper::client::conn::http2::SendRequest<ProxyBody>),
}

async fn h1<I>(io: I) -> Result<Sender, String>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("yolo: HTTP/1.1 with the host failed: {e}\n"))?;
    tokio::spawn(conn.with_upgrades());
    Ok(Sender::H1(sender))
}

/// A TCP connection from the guard to `addr`, marked so the ruleset lets it out and does not
/// send it back to the proxy.
pub(crate) async fn connect(addr: SocketAddr, mark: Option<u32>) -> io::Result<TcpStream> {
    let socket = match addr.ip() {
        IpAddr::V4(_) => TcpSocket::new_v4()?,
        IpAddr::V6(_) => TcpSocket::new_v6()?,
    };
    if let Some(mark) = mark {
        socket2::SockRef::from(&socket).set_mark(mark)?;
    }
    let stream = tokio::time::timeout(HANDSHAKE, socket.connect(addr))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// `value` (an authority or Host header) as a lowercase name, when its port is
/// `default_port` or absent; `None` for another port.
fn host_of(value: &str, default_port: u16) -> Option<String> {
    let (name, port) = match value.rsplit_once(':') {
        // An IPv6 literal's colons are inside its brackets.
        Some((name, port)) if !port.contains(']') => (name, Some(port)),
        _ => (value, None),
    };
    match port {
        Some(port) if port.parse::<u16>().ok() != Some(default_port) => None,
        _ => Some(normalize(name)),
    }
}

/// Headers of one hop (RFC 9110 7.6.1), which the proxy's own connection replaces; an
/// Upgrade keeps `connection` and `upgrade`, which are the request.
fn strip_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .filter(|n| !(upgrade && *n == header::UPGRADE))
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
    ] {
        headers.remove(name);
    }
    if !upgrade {
        headers.remove(header::CONNECTION);
        headers.remove(header::UPGRADE);
    }
}

/// Bytes each way of one request.
#[derive(Default)]
struct Tally {
    up: AtomicU64,
    down: AtomicU64,
}

/// A body passed through frame by frame, counting its data.
struct Counted<B> {
    inner: B,
    count: Arc<Tally>,
    up: bool,
}

impl<B: Body<Data = Bytes> + Unpin> Body for Counted<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                let counter = if self.up {
                    &self.count.up
                } else {
                    &self.count.down
                };
                counter.fetch_add(data.len() as u64, Ordering::Relaxed);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The response body, which writes the request's record when it ends or is dropped (the
/// client went away mid-stream): bytes and duration are then final.
struct Recorded<B> {
    inner: B,
    done: Option<Pending>,
}

/// A request's record waiting for its response to end.
struct Pending {
    exchange: Exchange,
    started: Instant,
    tally: Arc<Tally>,
    record: Arc<dyn Record>,
}

impl<B> Recorded<B> {
    fn finish(&mut self) {
        if let Some(Pending {
            mut exchange,
            started,
            tally,
            record,
        }) = self.done.take()
        {
            exchange.bytes_up = tally.up.load(Ordering::Relaxed);
            exchange.bytes_down = tally.down.load(Ordering::Relaxed);
            exchange.duration_ms = started.elapsed().as_millis() as u64;
            record.exchange(exchange);
        }
    }
}

impl<B> Drop for Recorded<B> {
    fn drop(&mut self) {
        self.finish();
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for Recorded<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = &polled {
            self.finish();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_names_the_default_port_or_none() {
        assert_eq!(
            host_of("API.example.test", 443).as_deref(),
            Some("api.example.test")
        );
        assert_eq!(
            host_of("api.example.test:443", 443).as_deref(),
            Some("api.example.test")
        );
        assert_eq!(host_of("api.example.test:8443", 443), None);
        assert_eq!(
            host_of("[2001:db8::1]", 443).as_deref(),
            Some("[2001:db8::1]")
        );
    }
}
