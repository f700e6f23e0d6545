//! `yolo-guard run`: runs inside the guard container, which owns the network namespace the agent
//! joins. Order matters and fails closed: apply and verify the ruleset, listen for DNS, then
//! say "ready" (file [`GUARD_READY_FILE`] and the line [`GUARD_READY_LINE`] on stdout). If any
//! step before that fails the guard exits non-zero and the host never starts the agent.
//!
//! Not here: the contents of the ruleset (`ruleset`, pure) and the allowlist grammar
//! (`yolo_protocol::allowlist`, shared with the CLI). This crate knows nothing of Docker or of
//! the CLI: it reads its config file and serves.

pub mod control;
pub(crate) mod dns;
pub(crate) mod error;
pub(crate) mod events;
pub mod exec;
pub(crate) mod fairq;
pub(crate) mod files;
pub(crate) mod fold;
pub mod init;
pub(crate) mod names;
pub(crate) mod nflog;
pub mod nfnl;
pub(crate) mod revoke;
pub(crate) mod ruleset;
pub(crate) mod setelem;
pub(crate) mod sets;
pub(crate) mod writer;
pub(crate) mod xsk;

/// Events the unit tests of several modules build alike.
#[cfg(test)]
pub(crate) mod test_events {
    use yolo_protocol::event::EventKind;

    /// A first-of-its-key blocked TCP connect to a documentation address.
    pub(crate) fn blocked(port: u16) -> EventKind {
        blocked_times(port, None)
    }

    /// The same destination as a folded record of `count` attempts.
    pub(crate) fn folded(port: u16, count: u64) -> EventKind {
        blocked_times(port, Some(count))
    }

    fn blocked_times(port: u16, count: Option<u64>) -> EventKind {
        EventKind::Blocked {
            proto: "tcp".into(),
            dst: "192.0.2.1".into(),
            port: Some(port),
            name: None,
            sample_of: None,
            count,
            first: None,
            last: None,
        }
    }
}

use crate::writer::Writer;
use control::{Handler, Request, Response};
use dns::{BoxFuture, DnsOptions, Forwarder, Listeners, Policy};
pub use error::{Error, Result};
use events::{guard_event, Events};
use names::Resolved;
use nftables::schema::Nftables;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use yolo_protocol::allowlist::{is_internal_address, Allowlist, Ports};
use yolo_protocol::event::EventKind;
use yolo_protocol::{
    GuardConfig, NetworkMode, DNS_LISTEN, DNS_LISTEN_V6, GUARD_READY_FILE, GUARD_READY_LINE,
    NFLOG_GROUP,
};

/// The nft batches the guard applies. `ruleset` provides them; the trait keeps the
/// guard's runtime testable and independent of how the ruleset is built.
pub trait Batches: Send + Sync + 'static {
    fn build(&self, config: &GuardConfig, allow: &Allowlist) -> Nftables<'static>;
    /// Compare what the kernel holds with `expected`, applied before.
    fn verify(&self, expected: &Nftables<'static>) -> std::result::Result<(), String>;
    fn add_addresses(&self, elements: &[(IpAddr, Ports)], timeout_secs: u64) -> Nftables<'static>;
    fn remove_addresses(&self, elements: &[(IpAddr, Ports)]) -> Nftables<'static>;
}

/// `yolo-guard run --config FILE`.
pub fn run(config_path: &Path) -> Result<()> {
    run_with(config_path, Arc::new(Ruleset))
}

/// The production batches: `ruleset`.
pub struct Ruleset;

impl Batches for Ruleset {
    fn build(&self, config: &GuardConfig, allow: &Allowlist) -> Nftables<'static> {
        ruleset::build(config, allow)
    }
    fn verify(&self, expected: &Nftables<'static>) -> std::result::Result<(), String> {
        sets::verify(expected)
    }
    fn add_addresses(&self, elements: &[(IpAddr, Ports)], timeout_secs: u64) -> Nftables<'static> {
        ruleset::add_addresses(elements, timeout_secs)
    }
    fn remove_addresses(&self, elements: &[(IpAddr, Ports)]) -> Nftables<'static> {
        ruleset::remove_addresses(elements)
    }
}

/// [`run`] with the batches given: read the config, enforce, serve until SIGTERM.
pub fn run_with<B: Batches>(config_path: &Path, batches: Arc<B>) -> Result<()> {
    let started = Instant::now();
    // Before any thread exists: the signal thread takes them (see `init`).
    init::block_signals();
    // Root in the agent shares this PID namespace: no ptrace, no /proc/1/mem, whatever caps.
    // SAFETY: plain prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    let _ = std::fs::remove_file(GUARD_READY_FILE); // a restarted container is not ready yet
    let text = std::fs::read_to_string(config_path).map_err(|e| Error::io(config_path, e))?;
    let config: GuardConfig = serde_json::from_str(&text).map_err(|e| Error::Config {
        file: config_path.to_path_buf(),
        message: e.to_string(),
    })?;
    let config = to_stdout(config);
    let log =
        Writer::open(&config.audit_path, &config.session, None)?.in_phase(config.phase.as_deref());
    let result = enforce_and_serve(config, batches, started);
    if let Err(e) = &result {
        // Written directly: the queue's thread may not get to it before the process exits.
        let _ = log.write(guard_event("failed", [("error", e.to_string().into())]));
    }
    result
}

/// With `audit_to_stdout`, every log the config names is the guard's stdout: the writers
/// append one whole line per `write` there as they do to a file, and the stdout of a Pod's
/// container is what `kubectl logs` (and `yolo audit --kube`) read.
fn to_stdout(mut config: GuardConfig) -> GuardConfig {
    if !config.audit_to_stdout {
        return config;
    }
    let stdout = PathBuf::from(yolo_protocol::STDOUT_PATH);
    config.audit_path = stdout.clone();
    if let Some(exec) = config.exec_audit.as_mut() {
        exec.log_path = stdout.clone();
    }
    if let Some(files) = config.file_watch.as_mut() {
        files.log_path = stdout;
    }
    config
}

fn enforce_and_serve<B: Batches>(
    config: GuardConfig,
    batches: Arc<B>,
    started: Instant,
) -> Result<()> {
    let fail = |what: &str, e: String| {
        Error::other(format!(
            "yolo-guard: {what}: {e}; the agent will not be started"
        ))
    };
    let upstream = if config.upstream.is_empty() {
        let text = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
        yolo_protocol::resolv_conf_nameservers(&text)
    } else {
        config.upstream.clone()
    };
    if upstream.is_empty() && config.mode != NetworkMode::None {
        return Err(fail(
            "no upstream DNS",
            "GuardConfig.upstream is empty and /etc/resolv.conf names no nameserver".into(),
        ));
    }
    // The ruleset lets the guard's marked sockets reach exactly these.
    let config = GuardConfig {
        upstream: upstream.clone(),
        gateway: std::fs::read_to_string("/proc/net/route")
            .ok()
            .and_then(|text| yolo_protocol::Gateway::from_proc_net_route(&text)),
        ..config
    };
    // Without the gateway, published ports would be open to every container of the bridge;
    // on the one other projects' guards share, the guard does not start.
    if shared_bridge()
        && config.mode != NetworkMode::None
        && !config.published_ports.is_empty()
        && config.gateway.is_none()
    {
        return Err(fail(
            "no default route in /proc/net/route",
            "published ports could be reached by other projects on the shared bridge".into(),
        ));
    }
    let allowlist =
        Allowlist::parse(&config.allow).map_err(|e| fail("invalid allowlist", e.to_string()))?;
    let expected = batches.build(&config, &allowlist);
    sets::apply(&expected).map_err(|e| fail("cannot apply the firewall ruleset", e))?;
    batches
        .verify(&expected)
        .map_err(|e| fail("the firewall ruleset does not verify", e))?;
    let verify_ms = started.elapsed().as_millis() as u64;
    // An image build's RUN steps share the namespace in the build phase, holding NET_RAW.
    let building = config.mode == NetworkMode::Firewall && config.phase.is_some();
    let sealed = building.then(seal_egress);
    // AF_XDP sends below the egress hook, on any kernel that has it: every queue taken before
    // the build starts, or no build.
    if building {
        hold_xdp_queues().map_err(|e| {
            fail(
                "cannot take the interfaces' AF_XDP queues before the build",
                format!(
                    "{e}; a guard made by an earlier yolo lacks NET_RAW for it: `yolo up --rebuild` makes it anew"
                ),
            )
        })?;
    }

    if config.mode != NetworkMode::None {
        point_resolver_at_guard()
            .map_err(|e| fail("cannot point /etc/resolv.conf at the guard", e))?;
    }
    let writer = Writer::open(
        &config.audit_path,
        &config.session,
        Some(config.max_session_log),
    )?
    .in_phase(config.phase.as_deref());
    let events = Events::to_writer(writer);
    // One thread: a DNS query is a few microseconds of work, and handing it between workers
    // (wake-ups, cross-thread queues) cost more than it did (docs/performance.md). Set updates
    // go to the blocking pool, which few threads are enough for.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(4)
        .enable_all()
        .build()
        .map_err(|e| fail("cannot start the async runtime", e.to_string()))?;
    let guard = Arc::new(Guard {
        mode: config.mode,
        allow_internal_answers: config.allow_internal_answers,
        allowlist: RwLock::new(allowlist),
        batches,
        resolved: Arc::new(Resolved::default()),
        events: Arc::clone(&events),
    });
    if let Some(Err(e)) = sealed {
        // On a bridge of the project's own, not fatal (an older kernel has no egress hook):
        // ordinary connections, DNS and the mark are still filtered; only frames from packet
        // sockets are not, and no other project is on that segment. The log says so.
        guard.events.emit(guard_event(
            "egress_filter_unavailable",
            [("error", e.clone().into())],
        ));
        // On the bridge other projects' guards share, a RUN step's forged ARP would reach
        // them: the build does not run.
        if shared_bridge() {
            return Err(fail(
                "cannot seal the build's frames on the bridge other projects share",
                format!(
                    "{e}; build with `[build] network = \"none\"`, or on an engine whose kernel has the netdev egress hook (Linux 5.16)"
                ),
            ));
        }
    }
    runtime.block_on(serve(config, guard, upstream, started, verify_ms))
}

/// Every few seconds, give the pages malloc holds free back to the kernel. A burst of queries
/// (tasks, answers, audit records in flight) leaves free chunks scattered through the heap,
/// where glibc's own trimming (only the top of the heap) does not reach; resident memory would
/// stay at the burst's peak.
async fn return_free_memory() {
    let mut every = tokio::time::interval(Duration::from_secs(2));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: malloc_trim only releases free pages; it takes malloc's own lock.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

/// Whether this guard's container was made on the bridge other projects' guards share
/// ([`yolo_protocol::SHARED_BRIDGE_ENV`]).
fn shared_bridge() -> bool {
    std::env::var_os(yolo_protocol::SHARED_BRIDGE_ENV).is_some_and(|v| v == "1")
}

/// [`ruleset::egress`] on every interface of the namespace but loopback, with a fresh stamp.
fn seal_egress() -> std::result::Result<(), String> {
    let addresses = ipv4_addresses()?;
    let mut devices = Vec::new();
    for name in interfaces()? {
        let mac = std::fs::read_to_string(format!("/sys/class/net/{name}/address"))
            .map_err(|e| format!("cannot read the address of {name}: {e}"))?
            .trim()
            .to_string();
        let ipv4 = addresses
            .iter()
            .filter(|(dev, _)| *dev == name)
            .map(|(_, ip)| *ip)
            .collect();
        devices.push(ruleset::Device { name, mac, ipv4 });
    }
    let mut random = [0u8; 8];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").map_err(|e| e.to_string())?,
        &mut random,
    )
    .map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
    let [m0, m1, m2, m3, p0, p1, p2, p3] = random;
    let stamp = ruleset::Stamp {
        // Never 0: that is what every unstamped packet carries.
        mark: u32::from_ne_bytes([m0, m1, m2, m3]).max(1),
        priority: u32::from_ne_bytes([p0, p1, p2, p3]).max(1),
    };
    let egress = ruleset::egress(&devices, stamp);
    sets::apply(&egress)?;
    sets::verify(&egress)
}

/// [`xsk::hold_queues`] on every interface of the namespace but loopback.
fn hold_xdp_queues() -> std::result::Result<(), String> {
    for name in interfaces()? {
        xsk::hold_queues(&name)?;
    }
    Ok(())
}

/// The namespace's interfaces but loopback, sorted.
fn interfaces() -> std::result::Result<Vec<String>, String> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map_err(|e| format!("cannot list the interfaces: {e}"))?
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "lo")
        .collect();
    names.sort();
    Ok(names)
}

/// Every IPv4 address of the namespace's interfaces, with the interface's name (`getifaddrs`;
/// std has no interface list, and one call here is all the guard needs).
fn ipv4_addresses() -> std::result::Result<Vec<(String, std::net::Ipv4Addr)>, String> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list this function frees below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(format!(
            "cannot list the addresses: {}",
            std::io::Error::last_os_error()
        ));
    }
    let mut found = Vec::new();
    let mut at = head;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs returned, not yet freed.
        let entry = unsafe { &*at };
        // SAFETY: ifa_addr, when set, points at a sockaddr whose family says its type.
        if !entry.ifa_addr.is_null()
            && i32::from(unsafe { (*entry.ifa_addr).sa_family }) == libc::AF_INET
        {
            // SAFETY: an AF_INET address is a sockaddr_in; ifa_name is a C string.
            let (addr, name) = unsafe {
                (
                    &*(entry.ifa_addr as *const libc::sockaddr_in),
                    std::ffi::CStr::from_ptr(entry.ifa_name),
                )
            };
            // A labelled address (`eth0:1`) is the interface's own too.
            let name = name.to_string_lossy();
            let device = name.split(':').next().unwrap_or_default();
            found.push((
                device.to_string(),
                std::net::Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr)),
            ));
        }
        at = entry.ifa_next;
    }
    // SAFETY: the list getifaddrs returned, freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(found)
}

async fn serve<B: Batches>(
    config: GuardConfig,
    guard: Arc<Guard<B>>,
    upstream: Vec<SocketAddr>,
    started: Instant,
    verify_ms: u64,
) -> Result<()> {
    let fail = |what: &str, e: String| {
        Error::other(format!(
            "yolo-guard: {what}: {e}; the agent will not be started"
        ))
    };
    let parse = |s: &str| {
        s.parse::<SocketAddr>()
            .map_err(|e| fail("bad listen address", e.to_string()))
    };
    let listeners = Listeners::bind(parse(DNS_LISTEN)?, &[parse(DNS_LISTEN_V6)?])
        .await
        .map_err(|e| {
            fail(
                &format!("cannot listen for DNS on {DNS_LISTEN}"),
                e.to_string(),
            )
        })?;
    let listening = listeners.udp_addrs();
    let mut options = DnsOptions::new(upstream.clone());
    options.ttl_floor_secs = config.ttl_floor_secs;
    options.deny_nxdomain = config.deny_nxdomain;
    if !config.local_names.is_empty() {
        options.local_names = config
            .local_names
            .iter()
            .map(|n| n.trim_end_matches('.').to_ascii_lowercase())
            .collect();
        options.local_upstream = vec![parse(yolo_protocol::DOCKER_DNS)?];
    }
    let forwarder = Arc::new(Forwarder::new(
        options,
        Arc::clone(&guard),
        Arc::clone(&guard.resolved),
        Arc::clone(&guard.events),
    ));
    let _dns = forwarder.serve(listeners);
    let _trim = tokio::spawn(return_free_memory());
    let _control = control::serve(&config.control_socket, Arc::new(Control(guard.clone())))
        .map_err(|e| {
            fail(
                &format!(
                    "cannot bind the control socket {}",
                    config.control_socket.display()
                ),
                e.to_string(),
            )
        })?;
    // Not fatal: the host falls back to the socket above (through `docker exec`).
    let _host_control = config.host_control_socket.as_ref().and_then(|path| {
        let handler = Arc::new(Control(guard.clone()));
        control::serve_host(path, &config.control_uids, handler)
            .map_err(|e| {
                guard.events.emit(guard_event(
                    "host_control_unavailable",
                    [
                        ("path", path.display().to_string().into()),
                        ("error", e.to_string().into()),
                    ],
                ))
            })
            .ok()
    });
    // Not fatal: the ruleset enforces without it; only the `blocked` events are missing.
    let nflog = match nflog::Reader::bind(NFLOG_GROUP) {
        Ok(reader) => {
            let resolved = Arc::clone(&guard.resolved);
            nflog::spawn(reader, Arc::clone(&guard.events), move |addr| {
                resolved.name_of(addr)
            })
            .map_err(|e| e.to_string())
        }
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = &nflog {
        guard.events.emit(guard_event(
            "nflog_unavailable",
            [("error", e.clone().into())],
        ));
    }
    // Not fatal either; dropped at the end of `serve`, which writes what it holds.
    let _files = (config.file_watch.as_ref())
        .and_then(|w| files::spawn(w, &config.session, config.phase.as_deref(), &guard.events));
    // The agent's shims register here, last: the agent's first program (`yolo-guard start`,
    // started by the host while this guard sets up) runs once its shim is registered, so
    // everything above (ruleset, DNS, NFLOG, the file watcher) is in place before it does.
    let exec = match &config.exec_audit {
        Some(audit) => Some(
            exec::supervisor::start(
                exec::supervisor::Options {
                    socket: exec::wire::SOCKET.to_string(),
                    log_path: audit.log_path.clone(),
                    max_bytes: audit.max_bytes,
                    allow_traced: audit.allow_traced,
                    session: config.session.clone(),
                    phase: config.phase.clone(),
                },
                Arc::clone(&guard.events),
            )
            .map_err(|e| fail("cannot start the exec supervisor", e.to_string()))?,
        ),
        None => None,
    };
    let ready_ms = started.elapsed().as_millis() as u64;
    guard.events.emit(guard_event(
        "ready",
        [
            ("verify_ms", verify_ms.into()),
            ("ready_ms", ready_ms.into()),
            (
                "mode",
                serde_json::to_value(config.mode).unwrap_or_default(),
            ),
            (
                "dns",
                listening
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .into(),
            ),
            (
                "upstream",
                upstream
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .into(),
            ),
            ("exec_audit", exec.is_some().into()),
            ("pid", std::process::id().into()),
        ],
    ));
    write_ready_file()
        .map_err(|e| fail(&format!("cannot write {GUARD_READY_FILE}"), e.to_string()))?;
    // With the session: the host waits for this start's line, not an earlier run's.
    println!("{GUARD_READY_LINE} {}", config.session);

    wait_for_termination(Arc::clone(&guard.events)).await;
    if let Some(exec) = &exec {
        exec.stop();
    }
    let _ = std::fs::remove_file(GUARD_READY_FILE);
    if let Some(path) = &config.host_control_socket {
        let _ = std::fs::remove_file(path);
    }
    // `yolo down` gives the guard 5 s after SIGTERM; the last aggregates and counts take far less.
    guard.events.finish(std::time::Duration::from_secs(3));
    // Past the cap too: one line, so the log says the guard stopped rather than died.
    let stopped =
        Writer::open(&config.audit_path, &config.session, None)?.in_phase(config.phase.as_deref());
    let _ = stopped.write(guard_event(
        "stopped",
        [
            ("uptime_ms", (started.elapsed().as_millis() as u64).into()),
            ("folded", guard.events.folded().into()),
        ],
    ));
    Ok(())
}

fn write_ready_file() -> std::io::Result<()> {
    let path = Path::new(GUARD_READY_FILE);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, format!("{}\n", std::process::id()))
}

/// Until SIGTERM or SIGINT from outside the namespace (`init::next_signal`, in a thread of its
/// own, which also reaps orphans). A signal an agent process sends PID 1 is recorded, not obeyed.
async fn wait_for_termination(events: Arc<Events>) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("yolo-signals".into())
        .spawn(move || loop {
            match init::next_signal() {
                init::Received::Stop(_) => {
                    let _ = tx.send(());
                    return;
                }
                init::Received::Ignored { signal, from } => events.emit(guard_event(
                    "signal_ignored",
                    [
                        ("signal", init::signal_name(signal).into()),
                        ("from_pid", from.into()),
                    ],
                )),
                init::Received::Child => {}
            }
        });
    if spawned.is_ok() {
        let _ = rx.await;
    } else {
        std::future::pending::<()>().await;
    }
}

/// The running guard's state, shared by DNS and the control socket.
struct Guard<B> {
    mode: NetworkMode,
    allow_internal_answers: bool,
    allowlist: RwLock<Allowlist>,
    batches: Arc<B>,
    resolved: Arc<Resolved<Ports>>,
    events: Arc<Events>,
}

impl<B: Batches> Policy for Guard<B> {
    type Grant = Ports;

    fn decide(&self, name: &str) -> Option<Ports> {
        match self.mode {
            NetworkMode::Firewall => self
                .allowlist
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .lookup(name),
            NetworkMode::Open => Some(Ports::Any),
            NetworkMode::None => None,
        }
    }

    fn entry(&self, name: &str) -> Option<String> {
        self.allowlist
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .entry(name)
    }

    fn allow(
        &self,
        elements: Vec<(IpAddr, Ports)>,
        timeout_secs: u64,
    ) -> BoxFuture<std::result::Result<(), String>> {
        if self.mode != NetworkMode::Firewall {
            return Box::pin(async { Ok(()) });
        }
        // An allowed name resolving to a private, loopback or link-local address is DNS
        // rebinding towards the host or its containers: answer, but do not open it.
        let (internal, elements): (Vec<_>, Vec<_>) = elements
            .into_iter()
            .partition(|(a, _)| !self.allow_internal_answers && is_internal_address(a));
        if !internal.is_empty() {
            let addrs: Vec<String> = internal.iter().map(|(a, _)| a.to_string()).collect();
            self.events.emit(guard_event(
                "internal_address_not_allowed",
                [("addresses", addrs.into())],
            ));
        }
        if elements.is_empty() {
            return Box::pin(async { Ok(()) });
        }
        // Over netlink, one batch per answer: no `nft` process on the DNS path. Addresses never
        // pushed take the fast add-only batch; a possible refresh takes add + delete + add.
        let refresh = elements.iter().any(|(a, _)| self.resolved.was_pushed(a));
        Box::pin(setelem::add_async(elements, timeout_secs, refresh))
    }
}

/// The control socket's handler: the running guard, shared.
struct Control<B>(Arc<Guard<B>>);

impl<B: Batches> Handler for Control<B> {
    /// On a blocking thread: a request's set changes and listings wait on the kernel (and a
    /// `deny` on its revocations), and DNS runs on the one runtime thread, which must not wait
    /// with them.
    fn handle(&self, request: Request) -> BoxFuture<Response> {
        let guard = Arc::clone(&self.0);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || match request {
                Request::Allow { patterns } => guard.allow_patterns(patterns),
                Request::Deny { patterns } => guard.deny_patterns(patterns),
                Request::Status => guard.status(),
            })
            .await
            .unwrap_or_else(|e| Response::error(format!("the request failed: {e}")))
        })
    }
}

impl<B: Batches> Guard<B> {
    fn patterns(&self) -> Vec<String> {
        self.allowlist
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .patterns()
    }

    fn allow_patterns(&self, patterns: Vec<String>) -> Response {
        let extended = self
            .allowlist
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .extend(&patterns);
        if let Err(e) = extended {
            return Response::error(e.to_string());
        }
        if let Err(e) = self.refresh_networks(&patterns) {
            return Response::error(format!(
                "allowlist changed, but the networks are not open: {e}"
            ));
        }
        self.events.emit(EventKind::Firewall {
            action: "allow".into(),
            patterns,
        });
        Response {
            ok: true,
            patterns: Some(self.patterns()),
            ..Default::default()
        }
    }

    fn deny_patterns(&self, patterns: Vec<String>) -> Response {
        let removed = self
            .allowlist
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&patterns);
        if let Err(e) = self.refresh_networks(&removed) {
            return Response::error(format!(
                "allowlist changed, but the networks stay open: {e}"
            ));
        }
        // Blocking nft from a handler is fine: deny is rare and the caller waits for it.
        let revocation = match self.revoke() {
            Ok(revocation) => revocation,
            Err(e) => {
                return Response::error(format!(
                    "allowlist changed, but the addresses stay open: {e}"
                ))
            }
        };
        self.events.emit(EventKind::Firewall {
            action: "deny".into(),
            patterns: removed.clone(),
        });
        Response {
            ok: true,
            patterns: Some(self.patterns()),
            removed,
            revoked: revocation.closed,
            ..Default::default()
        }
    }

    /// After a deny: take out of the dynamic sets what the allowlist no longer justifies, as
    /// the kernel lists it (a whole address, or only the denied ports of it), and forget the
    /// names that are denied now.
    fn revoke(&self) -> std::result::Result<revoke::Revocation, String> {
        let names = self.resolved.names_by_address();
        let (elements, _) = sets::summarize(&sets::list_table_value()?);
        let listed: Vec<revoke::Listed> =
            elements.iter().filter_map(revoke::Listed::parse).collect();
        let revocation = revoke::revocations(&listed, |addr| {
            let names = names.get(addr)?;
            Some(
                names
                    .iter()
                    .filter_map(|name| self.decide(name))
                    .reduce(|a, b| a.union(&b)),
            )
        });
        if !revocation.remove.is_empty() {
            sets::apply(&self.batches.remove_addresses(&revocation.remove))?;
        }
        for (addr, ports, expires_secs) in &revocation.narrow {
            sets::apply(
                &self
                    .batches
                    .add_addresses(&[(*addr, ports.clone())], *expires_secs),
            )?;
        }
        self.resolved.forget(|name| self.decide(name).is_none());
        self.resolved.unpush(&revocation.addresses());
        Ok(revocation)
    }

    /// Static networks live in their own sets: when `changed` names one, refill them.
    fn refresh_networks(&self, changed: &[String]) -> std::result::Result<(), String> {
        let networks = Allowlist::parse(changed)
            .map(|a| !a.networks().is_empty())
            .unwrap_or(false);
        if !networks {
            return Ok(());
        }
        let allow = self
            .allowlist
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        sets::apply(&ruleset::static_networks(&allow))
    }

    fn status(&self) -> Response {
        let (elements, counters) = match sets::list_table_value() {
            Ok(listing) => sets::summarize(&listing),
            Err(e) => return Response::error(e),
        };
        Response {
            ok: true,
            mode: Some(self.mode),
            patterns: Some(self.patterns()),
            elements,
            counters,
            ..Default::default()
        }
    }
}

/// The agent container shares the guard's /etc/resolv.conf (Docker gives a container that joins
/// another's network namespace that container's file), so after reading the upstream servers
/// from it, the guard makes it name itself. Docker's search/options lines are kept.
fn point_resolver_at_guard() -> std::result::Result<(), String> {
    let path = "/etc/resolv.conf";
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let mut text = String::from(
        "# written by yolo-guard: every query goes through the allowlist\nnameserver 127.0.0.1\n",
    );
    for line in old
        .lines()
        .filter(|l| l.starts_with("search") || l.starts_with("options"))
    {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A firewall-mode config for the real-kernel tests, with `allow` as its allowlist.
    #[test]
    fn audit_to_stdout_sends_every_log_to_stdout_and_the_files_stay_the_default() {
        let mut config = firewall_config(&[]);
        config.audit_path = "/var/log/yolo/s.jsonl".into();
        config.exec_audit = Some(yolo_protocol::ExecAudit {
            allow_traced: false,
            log_path: "/var/log/yolo/s.exec.jsonl".into(),
            max_bytes: 1,
        });
        assert_eq!(to_stdout(config.clone()), config);
        config.audit_to_stdout = true;
        let moved = to_stdout(config);
        assert_eq!(moved.audit_path, PathBuf::from("/dev/stdout"));
        assert_eq!(
            moved.exec_audit.unwrap().log_path,
            PathBuf::from("/dev/stdout")
        );
    }

    fn firewall_config(allow: &[&str]) -> GuardConfig {
        GuardConfig {
            session: "t".into(),
            mode: NetworkMode::Firewall,
            allow: allow.iter().map(|p| p.to_string()).collect(),
            upstream: vec![],
            ttl_floor_secs: 60,
            deny_nxdomain: false,
            published_ports: vec![],
            audit_path: "/dev/null".into(),
            control_socket: "/dev/null".into(),
            host_control_socket: None,
            control_uids: vec![],
            allow_internal_answers: false,
            max_session_log: yolo_protocol::DEFAULT_MAX_SESSION_LOG,
            phase: None,
            exec_audit: None,
            file_watch: None,
            local_names: vec![],
            audit_to_stdout: false,
            gateway: None,
        }
    }

    /// `f` on a thread inside a throwaway network namespace; `None` (skipped) without root,
    /// `nft` or `ip netns`.
    fn in_netns<T: Send + 'static>(
        tag: &str,
        f: impl FnOnce() -> std::result::Result<T, String> + Send + 'static,
    ) -> Option<T> {
        if let Err(why) = nflog::tests::can_use_netns() {
            nflog::tests::skip(why);
            return None;
        }
        let name = format!("yolo-guardtest-{tag}-{}", std::process::id());
        if !std::process::Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .is_ok_and(|s| s.success())
        {
            nflog::tests::skip("cannot create a network namespace");
            return None;
        }
        let path = format!("/run/netns/{name}");
        let result = std::thread::spawn(move || {
            use std::os::fd::AsRawFd;
            let file = std::fs::File::open(&path).map_err(|e| e.to_string())?;
            // SAFETY: a valid netns fd; only this thread (and the nft it forks) moves.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err("setns failed".into());
            }
            f()
        })
        .join();
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &name])
            .status();
        Some(result.expect("netns thread").expect("real nft path"))
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

    fn dynamic_elements() -> std::result::Result<Vec<String>, String> {
        let (elements, _) = sets::summarize(&sets::list_table_value()?);
        Ok(elements
            .into_iter()
            .filter(|e| e.set.starts_with("allow"))
            .map(|e| e.element)
            .collect())
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

    /// Fails closed: without the table (or any kernel error) the netlink batch is an error, so
    /// the guard's `allow` fails and the DNS answer becomes SERVFAIL (see `dns`).
    #[test]
    fn netlink_set_update_fails_closed_without_the_table_in_a_private_namespace() {
        let Some(result) = in_netns("netlink-fail", || {
            let guard = Guard {
                mode: NetworkMode::Firewall,
                // Documentation addresses count as internal: let them through to the kernel.
                allow_internal_answers: true,
                allowlist: RwLock::new(Allowlist::parse(&[]).map_err(|e| e.to_string())?),
                batches: Arc::new(Ruleset),
                resolved: Arc::new(Resolved::default()),
                events: Events::channel().0,
            };
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .map_err(|e| e.to_string())?;
            let elements = vec![("198.51.100.7".parse().unwrap(), Ports::Any)];
            Ok(runtime.block_on(guard.allow(elements, 60)))
        }) else {
            return;
        };
        let error = result.expect_err("no table: the update must fail");
        assert!(error.contains("netlink"), "{error}");
    }

    /// `yolo deny name:port` against the kernel: the port goes, the name's other port and
    /// other names' addresses stay; a whole-name deny then takes the rest.
    #[test]
    fn deny_of_a_port_revokes_only_that_port_in_a_private_namespace() {
        let Some((after_port, after_name, responses)) = in_netns("deny", || {
            let config = firewall_config(&["svc.test:80,8080", "*.wide.test"]);
            let allow = Allowlist::parse(&config.allow).map_err(|e| e.to_string())?;
            sets::apply(&Ruleset.build(&config, &allow))?;
            let guard = Guard {
                mode: NetworkMode::Firewall,
                allow_internal_answers: false,
                allowlist: RwLock::new(allow),
                batches: Arc::new(Ruleset),
                resolved: Arc::new(Resolved::default()),
                events: Events::channel().0,
            };
            let until = Instant::now() + std::time::Duration::from_secs(300);
            let svc: IpAddr = "198.51.100.7".parse().unwrap();
            let wide: IpAddr = "198.51.100.8".parse().unwrap();
            guard.resolved.record("svc.test", &[svc], until);
            guard.resolved.record("x.wide.test", &[wide], until);
            sets::apply(&Ruleset.add_addresses(&[(svc, guard.decide("svc.test").unwrap())], 300))?;
            sets::apply(&Ruleset.add_addresses(&[(wide, Ports::Any)], 300))?;
            let port = guard.deny_patterns(vec!["svc.test:8080".into()]);
            let after_port = dynamic_elements()?;
            let name = guard.deny_patterns(vec!["svc.test".into()]);
            let after_name = dynamic_elements()?;
            Ok((after_port, after_name, [port, name]))
        }) else {
            return;
        };
        let [port, name] = responses;
        assert!(port.ok, "{port:?}");
        assert_eq!(port.removed, ["svc.test:8080"]);
        assert_eq!(port.revoked, ["198.51.100.7:8080"]);
        assert_eq!(
            port.patterns.as_deref(),
            Some(&["svc.test:80".to_string(), "*.wide.test".to_string()][..])
        );
        let mut after_port = after_port;
        after_port.sort();
        assert_eq!(after_port, ["198.51.100.7 . 80", "198.51.100.8"]);
        assert!(name.ok, "{name:?}");
        assert_eq!(name.removed, ["svc.test:80"]);
        assert_eq!(name.revoked, ["198.51.100.7:80"]);
        assert_eq!(after_name, ["198.51.100.8"]);
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
}
