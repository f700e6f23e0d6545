//! The guard once its ruleset holds: DNS, the control sockets, the NFLOG reader, the file
//! watcher and, last, the exec supervisor the agent's shims wait for; then "ready", and serving
//! until a stop from outside the namespace.

use super::guard::Guard;
use super::requests::Control;
use super::{Cause, StartError};
use crate::audit::events::{guard_event, Events};
use crate::audit::writer::Writer;
use crate::dns::{DnsOptions, Forwarder, Listeners};
use crate::firewall::batches::Batches;
use crate::firewall::nflog;
use crate::firewall::ruleset::{PROXY_PORT_HTTP, PROXY_PORT_TLS};
use crate::proxy::serve::Proxy;
use crate::{control, exec, files, init};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use yolo_protocol::{
    GuardConfig, DNS_LISTEN, DNS_LISTEN_V6, GUARD_READY_FILE, GUARD_READY_LINE, NFLOG_GROUP,
};

pub(super) async fn serve<B: Batches>(
    config: GuardConfig,
    guard: Arc<Guard<B>>,
    upstream: Vec<SocketAddr>,
    started: Instant,
    verify_ms: u64,
) -> Result<(), StartError> {
    let parse = |s: &str| {
        s.parse::<SocketAddr>()
            .map_err(|e| StartError::step("bad listen address", e))
    };
    let listeners = Listeners::bind(parse(DNS_LISTEN)?, &[parse(DNS_LISTEN_V6)?])
        .await
        .map_err(|e| StartError::step(format!("cannot listen for DNS on {DNS_LISTEN}"), e))?;
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
    // `[firewall] on_refused = "ask"`: refused names held for the user's answer (only where
    // names are refused at all).
    let approvals = config
        .ask_timeout_secs
        .filter(|_| config.mode == yolo_protocol::NetworkMode::Firewall)
        .map(|secs| {
            Arc::new(crate::ask::Approvals::new(
                std::time::Duration::from_secs(secs),
                Arc::clone(&guard.events),
            ))
        });
    let mut forwarder = Forwarder::new(
        options,
        Arc::clone(&guard),
        Arc::clone(&guard.resolved),
        Arc::clone(&guard.events),
    );
    if let Some(approvals) = &approvals {
        forwarder = forwarder.with_approvals(Arc::clone(approvals));
        if let Some(proxy) = &guard.proxy {
            proxy.ask_with(Arc::clone(approvals));
        }
    }
    let forwarder = Arc::new(forwarder);
    let _dns = forwarder.serve(listeners);
    let _relays = super::relay::spawn(&config.relays, parse(DNS_LISTEN)?, &guard.events).await;
    let _proxy = match &guard.proxy {
        Some(proxy) => Some(start_proxy(proxy, &guard.events)?),
        None => None,
    };
    let _trim = tokio::spawn(return_free_memory());
    let _control = control::serve(
        &config.control_socket,
        Arc::new(Control(guard.clone(), approvals.clone())),
    )
    .map_err(|e| {
        StartError::step(
            format!(
                "cannot bind the control socket {}",
                config.control_socket.display()
            ),
            e,
        )
    })?;
    // Not fatal: the host falls back to the socket above (through `docker exec`).
    let _host_control = config.host_control_socket.as_ref().and_then(|path| {
        let handler = Arc::new(Control(guard.clone(), approvals.clone()));
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
            .map_err(|e| StartError::step("cannot start the exec supervisor", e))?,
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
            ("proxy", guard.proxy.is_some().into()),
            ("pid", std::process::id().into()),
        ],
    ));
    write_ready_file()
        .map_err(|e| StartError::step(format!("cannot write {GUARD_READY_FILE}"), Cause::Io(e)))?;
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
    let _ = stopped.close();
    Ok(())
}

/// The proxy's threads: one agent download is two connections (the host's and the agent's),
/// each decrypted or encrypted by its own task, and on two threads those run side by side
/// instead of taking turns on the guard's one (bench/http.sh: the download rate through an
/// inspected host). DNS and the rest of the guard stay on their one thread.
const PROXY_THREADS: usize = 2;

/// The proxy's listeners, where the ruleset's `redirect` chain sends the agent's connections to
/// inspected addresses: on IPv4 loopback (fatal if it fails) and IPv6 loopback (not fatal: a
/// namespace without IPv6 has no IPv6 connection to redirect, and one that could not be served
/// is refused, as the redirect leads nowhere), served on a runtime of the proxy's own
/// ([`PROXY_THREADS`]). The proxy stops when the returned value drops.
fn start_proxy(proxy: &Arc<Proxy>, events: &Arc<Events>) -> Result<ProxyRuntime, StartError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(PROXY_THREADS)
        .max_blocking_threads(2)
        .thread_name("yolo-proxy")
        .enable_all()
        .build()
        .map_err(|e| StartError::step("cannot start the proxy's runtime", Cause::Io(e)))?;
    let mut running = ProxyRuntime {
        runtime: Some(runtime),
        tasks: Vec::new(),
    };
    for (port, tls) in [(PROXY_PORT_TLS, true), (PROXY_PORT_HTTP, false)] {
        for addr in [
            IpAddr::from(Ipv4Addr::LOCALHOST),
            IpAddr::from(Ipv6Addr::LOCALHOST),
        ] {
            let bound = std::net::TcpListener::bind((addr, port)).and_then(|listener| {
                listener.set_nonblocking(true)?;
                Ok(listener)
            });
            let listener = match bound {
                Ok(listener) => listener,
                Err(e) if addr.is_ipv4() => {
                    return Err(StartError::step(
                        format!("cannot listen for the HTTP proxy on {addr}:{port}"),
                        Cause::Io(e),
                    ))
                }
                Err(e) => {
                    events.emit(guard_event(
                        "proxy_ipv6_unavailable",
                        [("port", port.into()), ("error", e.to_string().into())],
                    ));
                    continue;
                }
            };
            let runtime = running.runtime.as_ref().expect("set above");
            let listener = {
                let _inside = runtime.enter();
                TcpListener::from_std(listener).map_err(|e| {
                    StartError::step(
                        format!("cannot listen for the HTTP proxy on {addr}:{port}"),
                        Cause::Io(e),
                    )
                })?
            };
            let proxy = Arc::clone(proxy);
            let task = if tls {
                runtime.spawn(proxy.serve_tls(listener))
            } else {
                runtime.spawn(proxy.serve_plain(listener))
            };
            running.tasks.push(AbortOnDrop(task));
        }
    }
    Ok(running)
}

/// The proxy's runtime and its listeners' tasks: dropped, the listeners stop and the runtime's
/// threads end in the background (a runtime dropped inside another's task would panic).
struct ProxyRuntime {
    runtime: Option<tokio::runtime::Runtime>,
    tasks: Vec<AbortOnDrop>,
}

impl Drop for ProxyRuntime {
    fn drop(&mut self) {
        self.tasks.clear();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A spawned task that ends with its handle.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
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
                        ("signal", init::signals::signal_name(signal).into()),
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
