//! The proxy's connections to the host, for one agent connection: which protocol a request
//! goes over, the connections kept between requests, and a new verified connection when none
//! is free.
//!
//! A request goes to the host over HTTP/1.1 unless it needs HTTP/2, whatever the agent spoke:
//! a download over HTTP/1.1 comes in as few big reads, over HTTP/2 as the host's frames (8 KiB
//! from nginx), and each frame costs the guard a decode, a wake-up and a hand-over. The
//! guard's CPU per GB downloaded fell from 3.4 s to 2.6 s with this (bench/http.sh), which is
//! what lets a download through an inspected host keep up on a 2-core machine. What needs
//! HTTP/2 keeps it: a request that asks for trailers (`te: trailers`, gRPC), a host that
//! speaks only HTTP/2, and requests past [`HTTP1_PER_CONN`] at once on one agent connection,
//! which share one HTTP/2 connection instead of opening one each.

use super::body::ProxyBody;
use super::dial::connect;
use super::tls::{Upstream, ALPN_H2};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Request, Response, Uri, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsConnector;

/// HTTP/1.1 connections one agent connection keeps open for its next requests.
const KEPT_PER_CONN: usize = 4;

/// HTTP/1.1 connections to the host one agent connection may have at once (a browser's six);
/// more requests at once share an HTTP/2 connection.
pub(crate) const HTTP1_PER_CONN: usize = 6;

/// How the request may go to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// An Upgrade (WebSocket): HTTP/1.1 on a connection of its own, which HTTP/2 cannot carry.
    Upgrade,
    /// HTTP/1.1 if a connection is free or may be opened, else the shared HTTP/2 one.
    Http1,
    /// HTTP/2 when the host speaks it: the request needs its trailers.
    Http2,
}

impl Want {
    /// What `headers` of a request that is (`upgrade`) or is not an Upgrade need.
    pub(crate) fn of(headers: &HeaderMap, upgrade: bool) -> Want {
        let trailers = asks_for_trailers(headers);
        let grpc = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().starts_with("application/grpc"));
        if upgrade {
            Want::Upgrade
        } else if trailers || grpc {
            Want::Http2
        } else {
            Want::Http1
        }
    }
}

/// Whether a request's `te` names `trailers`: its client reads trailers (gRPC needs them).
pub(crate) fn asks_for_trailers(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::TE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("trailers"))
}

/// The proxy's connections to one agent connection's destination (for its name), kept alive
/// between that agent connection's requests: a new TCP connection and TLS handshake per
/// request cost about 2 ms of added latency on a kept-alive connection (bench/http.sh). They
/// belong to this agent connection alone and end with it, so a kept connection is always to
/// the address and under the name this connection was checked for; nothing is shared across
/// agent connections.
pub(crate) struct Pool {
    destination: SocketAddr,
    /// `None` on port 80.
    sni: Option<String>,
    /// One HTTP/2 connection, shared by concurrent requests, and up to [`KEPT_PER_CONN`]
    /// HTTP/1.1 ones (taken out while a request is on them).
    kept: Mutex<Vec<Sender>>,
    /// The HTTP/1.1 connections open now, kept or in use.
    http1_open: Arc<AtomicUsize>,
}

impl Pool {
    pub(crate) fn new(destination: SocketAddr, sni: Option<String>) -> Pool {
        Pool {
            destination,
            sni,
            kept: Mutex::new(Vec::new()),
            http1_open: Arc::default(),
        }
    }

    /// A kept connection that can take a request wanting `want` now: an idle HTTP/1.1 one
    /// (taken out until its response came), or the HTTP/2 one (shared) for a request that
    /// wants HTTP/2 or that may not open another HTTP/1.1 connection. Closed ones are dropped.
    pub(crate) fn take(&self, want: Want) -> Option<Sender> {
        if want == Want::Upgrade {
            return None;
        }
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.retain(|s| !s.is_closed());
        let h1 = kept
            .iter()
            .position(|s| matches!(s, Sender::H1 { .. }) && s.is_ready());
        if want == Want::Http1 {
            if let Some(i) = h1 {
                return Some(kept.swap_remove(i));
            }
            if self.http1_open.load(Ordering::Relaxed) < HTTP1_PER_CONN {
                return None;
            }
        }
        let h2 = kept
            .iter()
            .find(|s| matches!(s, Sender::H2(_)) && s.is_ready());
        match h2 {
            Some(Sender::H2(s)) => Some(Sender::H2(s.clone())),
            _ => None,
        }
    }

    /// Keep `sender` for the next requests (an HTTP/1.1 connection becomes ready again when
    /// its response has been read): one HTTP/2 connection, and HTTP/1.1 ones up to
    /// [`KEPT_PER_CONN`].
    pub(crate) fn keep(&self, sender: Sender) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let same = kept
            .iter()
            .filter(|s| matches!(s, Sender::H2(_)) == matches!(sender, Sender::H2(_)))
            .count();
        let room = match sender {
            Sender::H2(_) => 1,
            Sender::H1 { .. } => KEPT_PER_CONN,
        };
        if same < room {
            kept.push(sender);
        }
    }

    /// A new connection to the original address for a request wanting `want`, kept by
    /// [`Pool::keep`]. TLS is verified against the configured roots only; a failure is the
    /// answer, never a fallback. HTTP/1.1 is offered alone when the request wants it and this
    /// agent connection may open another; a host that then refuses for want of HTTP/2 is asked
    /// again offering both.
    pub(crate) async fn connect(
        &self,
        upstream: &Upstream,
        mark: Option<u32>,
        host: &str,
        want: Want,
    ) -> Result<Sender, String> {
        let Some(sni) = &self.sni else {
            let tcp = self.dial(host, mark).await?;
            return self.h1(tcp).await;
        };
        let http1 = match want {
            Want::Upgrade => true,
            Want::Http2 => false,
            Want::Http1 => self.http1_open.load(Ordering::Relaxed) < HTTP1_PER_CONN,
        };
        let first = if http1 {
            &upstream.http1
        } else {
            &upstream.any
        };
        let tls = match self.tls(host, sni, mark, first).await {
            Err(Handshake::NoProtocol(_)) if http1 && want != Want::Upgrade => {
                self.tls(host, sni, mark, &upstream.any).await
            }
            other => other,
        }
        .map_err(Handshake::why)?;
        if tls.get_ref().1.alpn_protocol() == Some(ALPN_H2) {
            let (sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .map_err(|e| format!("yolo: HTTP/2 with {host} failed: {e}\n"))?;
            tokio::spawn(conn);
            return Ok(Sender::H2(sender));
        }
        self.h1(tls).await
    }

    async fn dial(&self, host: &str, mark: Option<u32>) -> Result<tokio::net::TcpStream, String> {
        connect(self.destination, mark)
            .await
            .map_err(|e| format!("yolo: cannot reach {host} at {}: {e}\n", self.destination))
    }

    async fn tls(
        &self,
        host: &str,
        sni: &str,
        mark: Option<u32>,
        config: &Arc<rustls::ClientConfig>,
    ) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, Handshake> {
        let tcp = self.dial(host, mark).await.map_err(Handshake::Other)?;
        let name = rustls_pki_types::ServerName::try_from(sni.to_string())
            .map_err(|e| Handshake::Other(format!("yolo: {sni:?} is not a server name: {e}\n")))?;
        let handshake = TlsConnector::from(Arc::clone(config)).connect(name, tcp);
        match tokio::time::timeout(HANDSHAKE, handshake).await {
            Err(_) => Err(Handshake::Other(format!(
                "yolo: the TLS handshake with {host} timed out\n"
            ))),
            Ok(Ok(tls)) => Ok(tls),
            Ok(Err(e)) => {
                let why = format!(
                    "yolo: refused: the certificate of {host} ({}) is not trusted by the guard: {e}\n",
                    self.destination
                );
                let no_protocol = e.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>())
                    == Some(&rustls::Error::AlertReceived(
                        rustls::AlertDescription::NoApplicationProtocol,
                    ));
                Err(if no_protocol {
                    Handshake::NoProtocol(why)
                } else {
                    Handshake::Other(why)
                })
            }
        }
    }

    async fn h1<I>(&self, io: I) -> Result<Sender, String>
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| format!("yolo: HTTP/1.1 with the host failed: {e}\n"))?;
        // Counted until the connection ends, which may be after its sender was dropped (a
        // response still being read when enough were kept).
        let open = Open::new(&self.http1_open);
        tokio::spawn(async move {
            let _open = open;
            let _ = conn.with_upgrades().await;
        });
        Ok(Sender::H1 { sender })
    }
}

/// How long the TLS handshake with the host may take.
const HANDSHAKE: Duration = Duration::from_secs(15);

/// Why a TLS connection to the host failed: the host wanted a protocol not offered, or
/// anything else. Both carry the message for the agent.
enum Handshake {
    NoProtocol(String),
    Other(String),
}

impl Handshake {
    fn why(self) -> String {
        match self {
            Handshake::NoProtocol(why) | Handshake::Other(why) => why,
        }
    }
}

/// One open HTTP/1.1 connection in its pool's count, for as long as it is open.
struct Open(Arc<AtomicUsize>);

impl Open {
    fn new(count: &Arc<AtomicUsize>) -> Open {
        count.fetch_add(1, Ordering::Relaxed);
        Open(Arc::clone(count))
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection to the host that takes requests.
pub(crate) enum Sender {
    H1 {
        sender: hyper::client::conn::http1::SendRequest<ProxyBody>,
    },
    H2(hyper::client::conn::http2::SendRequest<ProxyBody>),
}

pub(crate) type Sent =
    Result<Response<Incoming>, hyper::client::conn::TrySendError<Request<ProxyBody>>>;

impl Sender {
    fn is_closed(&self) -> bool {
        match self {
            Sender::H1 { sender, .. } => sender.is_closed(),
            Sender::H2(s) => s.is_closed(),
        }
    }

    fn is_ready(&self) -> bool {
        match self {
            Sender::H1 { sender, .. } => sender.is_ready(),
            Sender::H2(s) => s.is_ready(),
        }
    }

    /// Send `req` to `host` over `scheme`, in the form this connection takes; on an error
    /// before it was written, the error gives it back.
    pub(crate) async fn send(&mut self, req: Request<ProxyBody>, host: &str, scheme: &str) -> Sent {
        let req = self.form(req, host, scheme);
        match self {
            Sender::H1 { sender, .. } => sender.try_send_request(req).await,
            Sender::H2(s) => s.try_send_request(req).await,
        }
    }

    /// `req` in the form this connection takes: origin-form and a Host header for HTTP/1.1,
    /// the absolute form for HTTP/2 (hyper writes `:scheme` and `:authority` from it).
    fn form(&self, req: Request<ProxyBody>, host: &str, scheme: &str) -> Request<ProxyBody> {
        let (mut parts, body) = req.into_parts();
        let path_and_query = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        match self {
            Sender::H2(_) => {
                parts.uri = Uri::builder()
                    .scheme(scheme)
                    .authority(host)
                    .path_and_query(path_and_query)
                    .build()
                    .unwrap_or_default();
                parts.version = Version::HTTP_2;
                parts.headers.remove(header::HOST);
            }
            Sender::H1 { .. } => {
                parts.uri = Uri::builder()
                    .path_and_query(path_and_query)
                    .build()
                    .unwrap_or_default();
                parts.version = Version::HTTP_11;
                if let Ok(value) = HeaderValue::from_str(host) {
                    parts.headers.insert(header::HOST, value);
                }
            }
        }
        Request::from_parts(parts, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn a_request_goes_over_http1_unless_it_needs_trailers_or_is_an_upgrade() {
        assert_eq!(Want::of(&headers(&[]), false), Want::Http1);
        assert_eq!(
            Want::of(&headers(&[("accept", "*/*"), ("te", "gzip")]), false),
            Want::Http1
        );
        assert_eq!(
            Want::of(&headers(&[("te", "trailers")]), false),
            Want::Http2
        );
        assert_eq!(
            Want::of(&headers(&[("te", "gzip, Trailers")]), false),
            Want::Http2
        );
        assert_eq!(
            Want::of(
                &headers(&[("content-type", "application/grpc+proto")]),
                false
            ),
            Want::Http2
        );
        assert_eq!(
            Want::of(&headers(&[("te", "trailers")]), true),
            Want::Upgrade
        );
    }
}
