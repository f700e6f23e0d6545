//! `yolo-guard run`: the guard's start-up, in the order that fails closed. Apply and verify the
//! ruleset, seal a build's frames, point the resolver at the guard, then serve (`serve`: DNS,
//! the control sockets, NFLOG, the file and exec audits) and say "ready" (file
//! [`GUARD_READY_FILE`] and the line [`yolo_protocol::GUARD_READY_LINE`] on stdout). If any step before that
//! fails the guard exits non-zero and the host never starts the agent.
//!
//! - `error`: why the start-up stopped ([`StartError`]): which step, and its cause by kind;
//! - `guard`: the running guard's state, and its DNS policy;
//! - `requests`: what the control requests do to it;
//! - `serve`: everything that runs once the ruleset holds.

mod error;
mod guard;
#[cfg(test)]
mod proxy_path_tests;
mod relay;
mod requests;
mod serve;

pub use error::{Cause, StartError};

use crate::audit::events::{guard_event, Events};
use crate::audit::writer::Writer;
use crate::dns::names::Resolved;
use crate::dns::resolv_conf;
use crate::error::Error;
use crate::firewall::batches::{Batches, Ruleset};
use crate::firewall::{seal, sets};
use crate::init;
use crate::proxy::names::Inspected;
use crate::proxy::serve::{Proxy, Record};
use crate::proxy::tls::Upstream;
use guard::Guard;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Instant;
use yolo_protocol::allowlist::Allowlist;
use yolo_protocol::{GuardConfig, NetworkMode, GUARD_READY_FILE};

/// The soft limit on open files raised to the hard one. The exec digest's queues hold a file
/// (and a pidfd) per queued hash, which an exec flood of new binaries fills; at Docker's
/// default soft limit of 1,024 that would starve DNS sockets, shim registrations and `/proc`
/// reads of descriptors. The hard limit is the engine's (1,048,576 by default).
fn raise_open_files() {
    // SAFETY: rlimit is plain data; get and set with a valid pointer.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// `yolo-guard run --config FILE`.
pub fn run(config_path: &Path) -> Result<(), StartError> {
    run_with(config_path, Arc::new(Ruleset))
}

/// [`run`] with the batches given: read the config, enforce, serve until SIGTERM.
pub fn run_with<B: Batches>(config_path: &Path, batches: Arc<B>) -> Result<(), StartError> {
    let started = Instant::now();
    // Before any thread exists: the signal thread takes them (see `init`).
    init::block_signals();
    // Root in the agent shares this PID namespace: no ptrace, no /proc/1/mem, whatever caps.
    // SAFETY: plain prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    raise_open_files();
    let _ = std::fs::remove_file(GUARD_READY_FILE); // a restarted container is not ready yet
    let text = std::fs::read_to_string(config_path).map_err(|e| Error::io(config_path, e))?;
    let config: GuardConfig = serde_json::from_str(&text).map_err(|e| Error::Config {
        file: config_path.to_path_buf(),
        message: e.to_string(),
    })?;
    let config = to_stdout(config);
    let log =
        Writer::open(&config.audit_path, &config.session, None)?.in_phase(config.phase.as_deref());
    // Held until this function returns or the process ends: the holder goes with the guard.
    let result = hold_namespace().and_then(|holder| {
        if let Some(holder) = &holder {
            watch_holder(holder);
        }
        enforce_and_serve(config, batches, started)
    });
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
) -> Result<(), StartError> {
    let upstream = if config.upstream.is_empty() {
        resolv_conf::nameservers()
    } else {
        config.upstream.clone()
    };
    if upstream.is_empty() && config.mode != NetworkMode::None {
        return Err(StartError::step(
            "no upstream DNS",
            Cause::Refused(
                "GuardConfig.upstream is empty and /etc/resolv.conf names no nameserver",
            ),
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
        return Err(StartError::step(
            "no default route in /proc/net/route",
            Cause::Refused(
                "published ports could be reached by other projects on the shared bridge",
            ),
        ));
    }
    let allowlist =
        Allowlist::parse(&config.allow).map_err(|e| StartError::step("invalid allowlist", e))?;
    let expected = batches.build(&config, &allowlist);
    sets::apply(&expected).map_err(|e| StartError::step("cannot apply the firewall ruleset", e))?;
    batches
        .verify(&expected)
        .map_err(|e| StartError::step("the firewall ruleset does not verify", e))?;
    let verify_ms = started.elapsed().as_millis() as u64;
    // An image build's RUN steps share the namespace in the build phase, holding NET_RAW.
    let building = config.mode == NetworkMode::Firewall && config.phase.is_some();
    let sealed = building.then(seal::seal_egress);
    // AF_XDP sends below the egress hook, on any kernel that has it: every queue taken before
    // the build starts, or no build.
    if building {
        seal::hold_xdp_queues().map_err(|e| {
            StartError::step(
                "cannot take the interfaces' AF_XDP queues before the build",
                e,
            )
            .with_hint(
                "a guard made by an earlier yolo lacks NET_RAW for it: `yolo up --rebuild` makes it anew",
            )
        })?;
    }

    if config.mode != NetworkMode::None {
        resolv_conf::point_resolver_at_guard()
            .map_err(|e| StartError::step("cannot point /etc/resolv.conf at the guard", e))?;
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
        .map_err(|e| StartError::step("cannot start the async runtime", e))?;
    let inspected = Arc::new(Inspected::default());
    let proxy = proxy(&config, &inspected, &events)?;
    let guard = Arc::new(Guard {
        mode: config.mode,
        allow_internal_answers: config.allow_internal_answers,
        allowlist: RwLock::new(allowlist),
        batches,
        resolved: Arc::new(Resolved::default()),
        events: Arc::clone(&events),
        proxy,
        inspected,
    });
    if let Some(Err(e)) = sealed {
        // On a bridge of the project's own, not fatal (an older kernel has no egress hook):
        // ordinary connections, DNS and the mark are still filtered; only frames from packet
        // sockets are not, and no other project is on that segment. The log says so.
        guard.events.emit(guard_event(
            "egress_filter_unavailable",
            [("error", e.to_string().into())],
        ));
        // On the bridge other projects' guards share, a RUN step's forged ARP would reach
        // them: the build does not run.
        if shared_bridge() {
            return Err(StartError::step(
                "cannot seal the build's frames on the bridge other projects share",
                e,
            )
            .with_hint(
                "build with `[build] network = \"none\"`, or on an engine whose kernel has the netdev egress hook (Linux 5.16)",
            ));
        }
    }
    runtime.block_on(serve::serve(config, guard, upstream, started, verify_ms))
}

/// The HTTP proxy when the config inspects anything (and the network is not `none`), with the
/// roots it verifies the hosts against; it refuses every connection until the session's
/// secrets arrive over the control socket. Roots that are missing or hold no certificate stop
/// the start: a proxy that can verify no host would only refuse.
fn proxy(
    config: &GuardConfig,
    inspected: &Arc<Inspected>,
    events: &Arc<Events>,
) -> Result<Option<Arc<Proxy>>, StartError> {
    if config.http.is_empty() || config.mode == NetworkMode::None {
        return Ok(None);
    }
    let Some(roots) = &config.http_roots_pem else {
        return Err(StartError::step(
            "no trusted roots for the HTTP proxy",
            Cause::Refused("GuardConfig.http inspects hosts but http_roots_pem is not set"),
        ));
    };
    let upstream = Upstream::from_pem(&[roots.as_bytes()]).map_err(|e| {
        StartError::step(
            "the HTTP proxy's trusted roots are unusable",
            Cause::Proxy(e),
        )
    })?;
    let record: Arc<dyn Record> = Arc::clone(events) as Arc<dyn Record>;
    Ok(Some(Arc::new(Proxy::new(
        config.http.clone(),
        upstream,
        Arc::clone(inspected),
        record,
        Some(crate::firewall::ruleset::socket_mark()),
    ))))
}

/// With [`yolo_protocol::NETNS_HOLDER_ENV`]: the connection to the holder of this network
/// namespace (a spare the guard joined), which the guard keeps for its life, so the holder, and
/// the namespace's interface with it, end when the guard does. Made before the ruleset and
/// long before the agent joins; the holder may still be starting, so tried for a while. No
/// holder: the guard does not start (the agent would have a network no guard ends with it).
fn hold_namespace() -> Result<Option<std::os::unix::net::UnixStream>, StartError> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixStream};
    if std::env::var_os(yolo_protocol::NETNS_HOLDER_ENV).is_none_or(|v| v != "1") {
        return Ok(None);
    }
    let step = "connecting to the holder of its network namespace";
    let addr = SocketAddr::from_abstract_name(yolo_protocol::NETNS_HOLDER_SOCKET)
        .map_err(|e| StartError::step(step, e))?;
    let until = Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match UnixStream::connect_addr(&addr) {
            Ok(stream) => return Ok(Some(stream)),
            Err(_) if Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Err(e) => {
                return Err(StartError::step(step, e)
                    .with_hint("`yolo down --remove` and `yolo up` make the session anew"))
            }
        }
    }
}

/// The holder's end of the connection closing (it was stopped or killed from outside: the
/// namespace's interface is gone with it) ends the guard, and with it the agent: a session
/// whose network went is started again by `yolo up`, rather than go on silently offline. At
/// once, as a signal from inside the namespace would be ignored; nothing in the agent can
/// reach the holder to bring this about.
fn watch_holder(holder: &std::os::unix::net::UnixStream) {
    use std::io::Read;
    let Ok(mut end) = holder.try_clone() else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("yolo-holder".into())
        .spawn(move || {
            let mut buf = [0u8; 64];
            while matches!(end.read(&mut buf), Ok(n) if n > 0) {}
            let why = "the holder of its network namespace ended, and the network with it";
            eprintln!("{}", crate::error_line(&why));
            std::process::exit(1);
        });
}

/// Whether this guard's container was made on the bridge other projects' guards share
/// ([`yolo_protocol::SHARED_BRIDGE_ENV`]).
fn shared_bridge() -> bool {
    std::env::var_os(yolo_protocol::SHARED_BRIDGE_ENV).is_some_and(|v| v == "1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firewall;
    use crate::testing::firewall_config;
    use nftables::schema::Nftables;
    use std::net::IpAddr;
    use yolo_protocol::allowlist::Ports;

    /// Batches the translator refuses: a ruleset with a statement it has no encoding for.
    struct Untranslatable;

    impl Batches for Untranslatable {
        fn build(&self, _: &GuardConfig, _: &Allowlist) -> Nftables<'static> {
            serde_json::from_value(serde_json::json!({"nftables": [
                {"add": {"table": {"family": "inet", "name": "yolo"}}},
                {"add": {"chain": {"family": "inet", "table": "yolo", "name": "output"}}},
                {"add": {"rule": {"family": "inet", "table": "yolo", "chain": "output",
                    "expr": [{"masquerade": null}]}}}
            ]}))
            .unwrap()
        }
        fn verify(&self, _: &Nftables<'static>) -> std::result::Result<(), firewall::Error> {
            Ok(())
        }
        fn add_addresses(&self, _: &[(IpAddr, Ports)], _: u64) -> Nftables<'static> {
            unreachable!("not started")
        }
        fn remove_addresses(&self, _: &[(IpAddr, Ports)]) -> Nftables<'static> {
            unreachable!("not started")
        }
    }

    fn upstream(mut config: GuardConfig) -> GuardConfig {
        config.upstream = vec!["192.0.2.53:53".parse().unwrap()];
        config
    }

    /// A step that fails stops the start-up with that step and its cause by kind, in the
    /// message the host shows. A ruleset the translator refuses fails before anything is sent
    /// to the kernel, so this runs without root.
    #[test]
    fn a_failed_step_says_which_and_keeps_its_cause_by_kind() {
        let config = upstream(firewall_config(&["example.com"]));
        let error = enforce_and_serve(config, Arc::new(Untranslatable), Instant::now())
            .expect_err("an untranslatable ruleset must not start");
        match &error {
            StartError::NotStarted {
                step,
                cause: Cause::Firewall(firewall::Error::Translate(what)),
                hint: None,
            } => {
                assert_eq!(step, "cannot apply the firewall ruleset");
                assert!(what.contains("masquerade"), "{what}");
            }
            other => panic!("{other:?}"),
        }
        let message = error.to_string();
        assert!(
            message.starts_with("cannot apply the firewall ruleset: rule in chain yolo output: statement masquerade is not supported"),
            "{message}"
        );
        assert!(
            message.ends_with("; the agent will not be started"),
            "{message}"
        );

        let config = upstream(firewall_config(&["bad pattern"]));
        let error = enforce_and_serve(config, Arc::new(Untranslatable), Instant::now())
            .expect_err("an invalid allowlist must not start");
        assert!(
            matches!(
                &error,
                StartError::NotStarted { step, cause: Cause::Allowlist(_), .. } if step == "invalid allowlist"
            ),
            "{error:?}"
        );
    }

    /// A hint goes after the cause and before the verdict, as the messages always read.
    #[test]
    fn a_hint_reads_between_the_cause_and_the_verdict() {
        let error = StartError::step(
            "cannot take the interfaces' AF_XDP queues before the build",
            firewall::Error::XdpQueue {
                device: "eth0".into(),
                queue: 3,
                source: std::io::Error::from_raw_os_error(libc::EPERM),
            },
        )
        .with_hint("`yolo up --rebuild` makes it anew");
        assert_eq!(
            error.to_string(),
            format!(
                "cannot take the interfaces' AF_XDP queues before the build: cannot \
                 hold queue 3 of eth0 (AF_XDP): {}; `yolo up --rebuild` makes it anew; the agent \
                 will not be started",
                std::io::Error::from_raw_os_error(libc::EPERM)
            )
        );
    }

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
}
