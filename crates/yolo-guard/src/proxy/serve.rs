//! The proxy's transport: accept what the `nat` redirect sends to the proxy's ports, check
//! where the connection was going, terminate TLS with a leaf for the SNI name, serve HTTP/1.1
//! and HTTP/2 with hyper, and forward each request the rules let through over the proxy's own
//! connection to the original address. Bodies stream both ways frame by frame; an Upgrade
//! (WebSocket) becomes two byte pipes joined once both sides said 101.
//!
//! Request smuggling is left to hyper's parser, which is strict: two differing
//! Content-Lengths or a malformed header name (`Transfer-Encoding : chunked`) are rejected
//! (400) before they reach this code; a request with both Transfer-Encoding and
//! Content-Length is read by its Transfer-Encoding (RFC 9112 6.3) and its connection closed
//! after the response, so no bytes after it are read as another request. The upstream request
//! is written anew by hyper from the parsed head (never the agent's bytes), so the host sees
//! exactly what the rules judged (tests/cases/http_attacks.rs checks the host's record).

use super::body::{BoxError, Coalesced, Counted, Held, ProxyBody, Tally};
use super::credentials::Secrets;
use super::git;
use super::names::{normalize, Inspected};
use super::passthrough::{plain_host, splice, Replay};
use super::rules::{Decision, Policy, RequestHead, Swap};
use super::tls::{SessionCa, Upstream};
use super::upstream::{asks_for_trailers, Pool, Sender, Want};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::LazyConfigAcceptor;
use yolo_protocol::control::ProxySecrets;
use yolo_protocol::http::{HttpConfig, HttpRule};
use zeroize::Zeroize;

/// How long a client may take to send its ClientHello (reaching the host: `dial`).
const HANDSHAKE: Duration = Duration::from_secs(15);

/// How much of a push's body the proxy holds back to read its commands (up to the flush-pkt
/// that ends them) before anything goes upstream. Real pushes' commands take a few hundred
/// bytes per ref; a request whose commands do not end within this is refused, never
/// forwarded unread.
pub(crate) const PUSH_COMMANDS_CAP: usize = 64 * 1024;

/// Why every inspected connection is refused until `yolo up`/`run` sent the session's secrets.
pub(crate) const NO_SECRETS: &str =
    "the session's secrets are missing: the guard has no session CA or credentials yet (`yolo up` sends them)";

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
    /// The proxy refused it (its own 403), not the host.
    pub(crate) refused: bool,
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

/// What the proxy gets from the session after the start (the `proxysecrets` control
/// request): the CA that signs its leaves, and the rules with the real credential values.
pub(crate) struct Armed {
    pub(crate) ca: SessionCa,
    /// The rules, which `yolo allow --http`/`deny --http` change while the session runs.
    pub(crate) policy: RwLock<Policy>,
}

pub(crate) struct Proxy {
    /// The session's HTTP rules, as the guard's config has them.
    pub(crate) config: HttpConfig,
    /// `None` until the secrets arrive: every inspected connection is refused ([`NO_SECRETS`]).
    pub(crate) armed: RwLock<Option<Arc<Armed>>>,
    /// `(host, rule, added)`: the rules changed while the session runs, in order.
    changes: std::sync::Mutex<Vec<(String, HttpRule, bool)>>,
    pub(crate) upstream: Upstream,
    pub(crate) names: Arc<Inspected>,
    pub(crate) record: Arc<dyn Record>,
    /// SO_MARK of the proxy's upstream sockets: the ruleset lets them out and does not
    /// redirect them back.
    pub(crate) mark: Option<u32>,
    /// With `[firewall] on_refused = "ask"`: where a request the host's rules refuse is held
    /// for the user's answer (`ask`), set once when the guard starts.
    approvals: std::sync::OnceLock<Arc<crate::ask::Approvals>>,
}

impl Proxy {
    /// A proxy for `config` that refuses everything until [`Proxy::arm`].
    pub(crate) fn new(
        config: HttpConfig,
        upstream: Upstream,
        names: Arc<Inspected>,
        record: Arc<dyn Record>,
        mark: Option<u32>,
    ) -> Proxy {
        Proxy {
            config,
            armed: RwLock::new(None),
            changes: Default::default(),
            upstream,
            names,
            record,
            mark,
            approvals: std::sync::OnceLock::new(),
        }
    }

    /// Hold what the hosts' rules refuse for the user's answer (`ask`).
    pub(crate) fn ask_with(&self, approvals: Arc<crate::ask::Approvals>) {
        let _ = self.approvals.set(approvals);
    }

    /// Hold a refused request for the user's answer, when it may be lifted and they are asked;
    /// whether it was allowed (its rule added, by the control request that allowed it).
    async fn allowed_when_asked(
        &self,
        refusal: &super::refusal::Refusal,
        query: Option<&str>,
    ) -> bool {
        let (Some(approvals), Some(rule)) = (self.approvals.get(), refusal.lift.as_deref()) else {
            return false;
        };
        match approvals.ask_http(rule, query) {
            Some(held) => held.wait().await,
            None => false,
        }
    }

    /// Take the session's secrets, in place of any earlier ones (dropped and wiped); the
    /// request's own copies of the key and the values are wiped here as well.
    pub(crate) fn arm(&self, mut secrets: ProxySecrets) -> Result<(), String> {
        let ca = SessionCa::from_pem(&secrets.ca_cert_pem, &secrets.ca_key_pem);
        secrets.ca_key_pem.zeroize();
        let mut values = Secrets::default();
        for (name, value) in &mut secrets.credentials {
            values.insert(name, std::mem::take(value));
            value.zeroize();
        }
        let armed = Armed {
            ca: ca?,
            policy: RwLock::new(self.with_changes(Policy::new(&self.config, &values))),
        };
        *self.armed.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(armed));
        Ok(())
    }

    /// Add (`add`) or take away a rule of `host` while the session runs (`yolo allow --http`,
    /// `deny --http`): in the rules of now, and in those that secrets sent again make. The
    /// section the rule went to, or why not.
    pub(crate) fn change_rule(
        &self,
        host: &str,
        rule: &HttpRule,
        add: bool,
    ) -> Result<String, String> {
        let mut changes = self.changes.lock().unwrap_or_else(|p| p.into_inner());
        // Checked on the config's rules with the earlier changes, which the live ones are.
        let mut check = Policy::new(&self.config, &Secrets::default());
        for (host, rule, add) in changes.iter() {
            let _ = check.change_rule(host, rule, *add);
        }
        let section = check.change_rule(host, rule, add)?;
        changes.push((host.to_string(), rule.clone(), add));
        if let Some(armed) = self.armed() {
            let mut policy = armed.policy.write().unwrap_or_else(|p| p.into_inner());
            let _ = policy.change_rule(host, rule, add);
        }
        Ok(section)
    }

    /// `policy` with the changes made while the session runs.
    fn with_changes(&self, mut policy: Policy) -> Policy {
        for (host, rule, add) in self
            .changes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = policy.change_rule(host, rule, *add);
        }
        policy
    }

    /// Whether it holds the session's secrets (`status` tells the host, which sends them again
    /// to a guard that lost them in a restart).
    pub(crate) fn is_armed(&self) -> bool {
        self.armed().is_some()
    }

    fn armed(&self) -> Option<Arc<Armed>> {
        self.armed.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

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
            let mut io = Replay::recording(stream);
            if let Some(host) = plain_host(&mut io, HANDSHAKE).await {
                if self.pass_through(&host, destination) {
                    let (first, stream) = io.into_parts();
                    let _ = splice(stream, first, destination, self.mark).await;
                    return Ok(());
                }
            }
            io.rewind();
            // Fail closed: without the session's credentials no request could be judged as
            // the user configured them.
            let Some(_armed) = self.armed() else {
                return Err(refuse(None, NO_SECRETS.into()));
            };
            let conn = Arc::new(Conn {
                proxy: Arc::clone(self),
                destination,
                sni: None,
                upstream: Pool::new(destination, None),
            });
            serve_http(TokioIo::new(io), conn).await;
            return Ok(());
        }
        let acceptor = LazyConfigAcceptor::new(
            rustls::server::Acceptor::default(),
            Replay::recording(stream),
        );
        let mut start = tokio::time::timeout(HANDSHAKE, acceptor)
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
            if self.pass_through(&sni, destination) {
                let (first, stream) = start.io.into_parts();
                let _ = splice(stream, first, destination, self.mark).await;
                return Ok(());
            }
            return Err(refuse(
                Some(&sni),
                format!(
                    "the guard did not answer {sni} with {}: the server name and the address name different hosts",
                    destination.ip()
                ),
            ));
        }
        start.io.stop();
        // Fail closed: without the session's CA there is no TLS to offer, and without its
        // credentials no request the rules could judge as the user configured them.
        let Some(armed) = self.armed() else {
            return Err(refuse(Some(&sni), NO_SECRETS.into()));
        };
        let config = armed
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
            upstream: Pool::new(destination, Some(sni.clone())),
            sni: Some(sni),
        });
        serve_http(TokioIo::new(tls), conn).await;
        Ok(())
    }

    /// Whether `name`'s connection to `destination` passes through untouched: the guard
    /// answered it with that address as an allowed name it does not inspect, on that port.
    fn pass_through(&self, name: &str, destination: SocketAddr) -> bool {
        self.names
            .passes(name, destination.ip(), destination.port())
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
    /// The proxy's connections to `destination` (for `sni`), this agent connection's alone.
    upstream: Pool,
}

impl Conn {
    async fn handle(&self, req: Request<Incoming>) -> Response<ProxyBody> {
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
            refused: false,
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
        // The rules of now: secrets sent again apply to the next request.
        let Some(armed) = self.proxy.armed() else {
            exchange.rule = "secrets".into();
            return self.answer(
                exchange,
                StatusCode::FORBIDDEN,
                format!("yolo: refused: {NO_SECRETS}\n"),
                started,
            );
        };
        let decide = |req: &Request<Incoming>| {
            armed
                .policy
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .decide(&RequestHead {
                    host: &host,
                    port: self.destination.port(),
                    method: &method,
                    path_and_query: req.uri().path_and_query().map_or("/", |p| p.as_str()),
                    headers: req.headers(),
                })
        };
        let mut decision = decide(&req);
        // Asked and allowed: decided again, with the rule the answer added.
        if let Decision::Refuse(refusal) = &decision {
            if self
                .proxy
                .allowed_when_asked(refusal, req.uri().query())
                .await
            {
                decision = decide(&req);
            }
        }
        let (swap, push) = match decision {
            Decision::Refuse(refusal) => {
                exchange.rule = refusal.rule.clone();
                exchange.misuse = refusal.misuse.clone();
                return self.answer(exchange, StatusCode::FORBIDDEN, refusal.body(), started);
            }
            Decision::Forward { rule, swap } => {
                exchange.rule = rule;
                (swap, None)
            }
            Decision::CheckPush { rule, swap, push } => {
                exchange.rule = rule;
                (swap, Some(push))
            }
        };
        exchange.credential = swap.as_ref().map(|s| s.credential.clone());
        let (req, held) = match push {
            None => (req, VecDeque::new()),
            Some(push) => match hold_push_commands(req).await {
                Ok((req, held, commands, ended)) => {
                    if let Err(refusal) = git::check_commands(&commands, &push, ended) {
                        exchange.rule = refusal.rule.clone();
                        return self.answer(
                            exchange,
                            StatusCode::FORBIDDEN,
                            refusal.body(),
                            started,
                        );
                    }
                    (req, held)
                }
                Err((status, why)) => {
                    return self.answer(exchange, status, why, started);
                }
            },
        };
        let mut req = req;
        let upgrade =
            req.version() == Version::HTTP_11 && req.headers().contains_key(header::UPGRADE);
        let downstream_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
        let (mut parts, body) = req.into_parts();
        strip_hop_by_hop(&mut parts.headers, upgrade);
        if let Some(Swap { header, value, .. }) = swap {
            // `insert` replaces every copy of the header: the host sees the real value once.
            let mut value = value;
            value.set_sensitive(true);
            parts.headers.insert(header, value);
        }
        let tally = Arc::new(Tally::default());
        let body = Counted {
            inner: Held { held, inner: body },
            count: Arc::clone(&tally),
            up: true,
        }
        .map_err(BoxError::from)
        .boxed();
        // An Upgrade becomes a tunnel of its own: always a new connection, never kept.
        let want = Want::of(&parts.headers, upgrade);
        let kept = self.upstream.take(want);
        let reused = kept.is_some();
        let mut sender = match kept {
            Some(sender) => sender,
            None => match self.connect(&host, want).await {
                Ok(sender) => sender,
                Err(why) => {
                    return self.answer(exchange, StatusCode::BAD_GATEWAY, why, started);
                }
            },
        };
        let scheme = if self.sni.is_some() { "https" } else { "http" };
        let mut response = sender
            .send(Request::from_parts(parts, body), &host, scheme)
            .await;
        // A kept connection the host closed before this request went out (its keep-alive
        // timeout): the request comes back unsent, and goes on a new connection.
        if reused {
            if let Err(back) = &mut response {
                if let Some(req) = back.take_message() {
                    sender = match self.connect(&host, want).await {
                        Ok(sender) => sender,
                        Err(why) => {
                            return self.answer(exchange, StatusCode::BAD_GATEWAY, why, started);
                        }
                    };
                    response = sender.send(req, &host, scheme).await;
                }
            }
        }
        let mut response = match response {
            Ok(response) => {
                if !upgrade {
                    self.upstream.keep(sender);
                }
                response
            }
            Err(e) => {
                return self.answer(
                    exchange,
                    StatusCode::BAD_GATEWAY,
                    format!("yolo: the request to {host} failed: {}\n", e.error()),
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
            inner: Coalesced::new(body),
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
        exchange.refused = status == StatusCode::FORBIDDEN;
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

    /// A new connection to the host for a request wanting `want`.
    async fn connect(&self, host: &str, want: Want) -> Result<Sender, String> {
        self.upstream
            .connect(&self.proxy.upstream, self.proxy.mark, host, want)
            .await
    }
}

/// Reads a push's body up to the end of its commands (the flush-pkt), at most
/// [`PUSH_COMMANDS_CAP`] bytes: the request with the rest of its body, the frames read (to be
/// sent first), their data, which the commands are at the start of, and whether the body ended
/// there. A body that is a flush-pkt so far (git's probe) is read to its end, so that
/// `check_commands` knows whether anything follows it.
async fn hold_push_commands(
    req: Request<Incoming>,
) -> Result<(Request<Incoming>, VecDeque<Frame<Bytes>>, Vec<u8>, bool), (StatusCode, String)> {
    let (parts, mut body) = req.into_parts();
    let mut held = VecDeque::new();
    let mut data = Vec::new();
    let mut ended = false;
    while !git::commands_complete(&data) || (data == b"0000" && !body.is_end_stream()) {
        if data.len() > PUSH_COMMANDS_CAP {
            return Err((
                StatusCode::FORBIDDEN,
                format!(
                    "yolo: refused: the push's commands do not end within {PUSH_COMMANDS_CAP} bytes, which the guard reads before forwarding\n"
                ),
            ));
        }
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(bytes) = frame.data_ref() {
                    data.extend_from_slice(bytes);
                }
                held.push_back(frame);
            }
            // The body ended (check_commands refuses what it cannot read whole).
            None => {
                ended = true;
                break;
            }
            Some(Err(e)) => {
                return Err((
                    StatusCode::BAD_REQUEST,
                    format!("yolo: the push's body could not be read: {e}\n"),
                ))
            }
        }
    }
    let ended = ended || body.is_end_stream();
    Ok((Request::from_parts(parts, body), held, data, ended))
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
    // `te: trailers` says the client reads trailers (gRPC needs it), and is the one value
    // HTTP/2 lets through (RFC 9113 8.2.2): kept as just that.
    let trailers = asks_for_trailers(headers);
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
    if trailers {
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
    if !upgrade {
        headers.remove(header::CONNECTION);
        headers.remove(header::UPGRADE);
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
