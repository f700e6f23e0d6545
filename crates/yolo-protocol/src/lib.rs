//! What the yolo CLI on the host and the guard in its container share: the guard's config, the
//! control requests and responses, the audit event schema, the allowlist grammar and the HTTP
//! proxy's rules (`http`).
//!
//! No I/O here (no sockets, no files, no Docker): both sides build on these values, and either
//! can change how it talks without the other noticing, as long as these types stay.

pub mod allowlist;
pub mod chain;
pub mod control;
pub mod event;
pub mod http;

use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// NFLOG group the ruleset logs dropped packets to.
pub const NFLOG_GROUP: u16 = 7;
/// The guard's socket mark in its own unit tests (a fixed ruleset snapshot). A running guard
/// draws its mark at random each start (`yolo_guard::ruleset::socket_mark`): a build step holds
/// NET_RAW, which lets it set any mark (Linux 5.17+), so a known mark would be a pass.
pub const GUARD_MARK: u32 = 0x796f6c6f; // "yolo"

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    /// Domain allowlist (default).
    #[default]
    Firewall,
    /// No filtering; DNS and connections are still logged.
    Open,
    /// No network at all but loopback.
    None,
    /// Open like [`NetworkMode::Open`], to learn the allowlist: every name is recorded, and
    /// `yolo firewall suggest` turns the session's log into the smallest allowlist.
    Learn,
}

impl NetworkMode {
    /// Nothing is filtered: `open`, and `learn`.
    pub fn is_open(self) -> bool {
        matches!(self, NetworkMode::Open | NetworkMode::Learn)
    }
}

/// Everything the guard needs, written by the host CLI as JSON into the guard container.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GuardConfig {
    pub session: String,
    pub mode: NetworkMode,
    /// Allowlist patterns: `example.com`, `*.example.com`, CIDRs, `host:port`, `cidr:port`.
    pub allow: Vec<String>,
    /// Upstream resolvers; empty = the nameservers in the guard's /etc/resolv.conf.
    pub upstream: Vec<SocketAddr>,
    /// Minimum lifetime of an allowed address, seconds.
    pub ttl_floor_secs: u64,
    /// Answer denied names NXDOMAIN instead of REFUSED.
    pub deny_nxdomain: bool,
    /// `[firewall] on_refused = "ask"`: a lookup of a name outside the allowlist is held this
    /// many seconds for the user's answer (`yolo approvals`); `None`: refused at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_timeout_secs: Option<u64>,
    /// Ports published on the host (input accepted).
    pub published_ports: Vec<u16>,
    /// Where to append audit events (bind-mounted session log).
    pub audit_path: PathBuf,
    /// Unix socket for `yolo allow/deny/firewall` inside the guard (reached with docker exec,
    /// the fallback: see `host_control_socket`).
    pub control_socket: PathBuf,
    /// The same requests on a socket in a folder bound from the host (the log folder): the
    /// host connects to it directly, so no process is started in the PID namespace the agent
    /// shares (which its root could stop or kill). Anyone may connect (the guard's root cannot
    /// chown it to the host's user); only peers whose uid is root or in `control_uids` are
    /// served. `None`: a remote engine, or a Pod, whose host cannot reach such a folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_control_socket: Option<PathBuf>,
    /// Users, besides root, `host_control_socket` serves: the host user's uid as the guard sees
    /// it (under rootless Podman the host user is root in the guard's user namespace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub control_uids: Vec<u32>,
    /// Open private, loopback and link-local answers of allowed names too. Off by default: a
    /// name pointing at the host or its other containers is DNS rebinding. The user turns it
    /// on for internal services (and the tests, whose servers live on a Docker bridge).
    #[serde(default)]
    pub allow_internal_answers: bool,
    /// The size the guard lets its session log (`audit_path`) reach; past it, one `suppressed`
    /// record per kind counts what was not written. A config without it gets the default.
    #[serde(default = "default_max_session_log")]
    pub max_session_log: u64,
    /// What the namespace serves while this config is in force: `Some("build")` while an image
    /// build's RUN steps share it (the allowlist then holds the build's additions too); every
    /// event the guard writes carries it. `None`: the agent's own session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The exec supervisor: record every program the agent's processes start. `None`: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_audit: Option<ExecAudit>,
    /// The workspace file watcher. `None`: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_watch: Option<FileWatch>,
    /// Names Docker's embedded DNS ([`DOCKER_DNS`]) answers rather than `upstream`: the sibling
    /// services of a Compose project, on the project networks the guard is attached to. Each
    /// must also be in `allow` (the guard never forwards a name the allowlist refuses).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_names: Vec<String>,
    /// Write every audit event (network, exec, file) to the guard's stdout as JSON lines
    /// instead of the files named above: in a Kubernetes Pod (`yolo kube`), where there is no
    /// host folder to bind and the container's log is what the cluster keeps. Off (the files)
    /// for Docker.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub audit_to_stdout: bool,
    /// The guard's HTTP proxy: the hosts it inspects, their method and path rules, the
    /// credentials it swaps in. A config without it inspects nothing.
    #[serde(default, skip_serializing_if = "http::HttpConfig::is_empty")]
    pub http: http::HttpConfig,
    /// The certificates the proxy trusts on its own connections to the inspected hosts, as
    /// one PEM text: the host's trusted roots plus the user's `extra_ca`, which the CLI reads
    /// and puts here (in the config rather than a file, so the guard needs no further mount
    /// and a restarted guard has them at once; they are public). Only these: the agent's trust
    /// store plays no part, and a host whose certificate they do not verify is refused.
    /// `None` with a non-empty `http`: the guard does not start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_roots_pem: Option<String>,
    /// Ports of a Compose sibling forwarded through the guard (`forwardPorts: ["db:5432"]`):
    /// the guard listens on `listen` in the namespace it shares with the agent (published on
    /// the host like the container's own ports, and in `published_ports`) and relays each
    /// connection to the sibling, looked up through its own DNS as the agent's names are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relays: Vec<Relay>,
    /// The namespace's default route, which the guard reads at its start (never from the
    /// file): on its interface, published ports are accepted from the gateway alone, so another
    /// container on the same bridge (another project's guard, where the guards share one:
    /// docs/architecture.md) cannot reach them by address.
    #[serde(skip)]
    pub gateway: Option<Gateway>,
}

/// One forward of a sibling's port (`GuardConfig::relays`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relay {
    pub listen: u16,
    pub host: String,
    pub port: u16,
}

/// A default route: the interface and its IPv4 gateway (`GuardConfig::gateway`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gateway {
    pub interface: String,
    pub address: std::net::Ipv4Addr,
}

impl Gateway {
    /// The IPv4 default route in the text of `/proc/net/route`, as the kernel picks it: of
    /// the routes up with a gateway and no destination, the lowest metric. Hexadecimal
    /// fields in the host's byte order.
    pub fn from_proc_net_route(text: &str) -> Option<Gateway> {
        const UP_WITH_GATEWAY: u32 = 0x1 | 0x2; // RTF_UP | RTF_GATEWAY
        text.lines()
            .skip(1)
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let hex = |i: usize| u32::from_str_radix(fields.get(i)?, 16).ok();
                let (destination, gateway, flags, mask) = (hex(1)?, hex(2)?, hex(3)?, hex(7)?);
                let metric: u32 = fields.get(6)?.parse().ok()?;
                let default = destination == 0 && mask == 0 && gateway != 0;
                (default && flags & UP_WITH_GATEWAY == UP_WITH_GATEWAY).then(|| {
                    let gateway = Gateway {
                        interface: fields[0].to_string(),
                        address: std::net::Ipv4Addr::from(gateway.to_ne_bytes()),
                    };
                    (metric, gateway)
                })
            })
            .min_by_key(|(metric, _)| *metric)
            .map(|(_, gateway)| gateway)
    }
}

/// Set to `1` in a guard container's environment when it is on the bridge other projects'
/// guards share (docs/architecture.md, "One network for all guards"): fixed when the container
/// is made, like the network. With it, a build phase whose frames cannot be sealed fails.
pub const SHARED_BRIDGE_ENV: &str = "YOLO_SHARED_BRIDGE";

/// In the guard's environment, `1`: its network namespace is a spare's, made ahead and held by
/// `yolo-guard hold` (the CLI's `engine::spares`). The guard then connects to the holder's
/// socket ([`NETNS_HOLDER_SOCKET`]) before anything else and keeps the connection for its
/// whole life; the holder exits when it closes, and Docker takes the namespace's interface
/// away with it. So the agent never keeps a network its guard no longer serves, as when the
/// guard owns the namespace itself.
pub const NETNS_HOLDER_ENV: &str = "YOLO_NETNS_HOLDER";

/// The abstract Unix socket (its name without the leading NUL) a spare's holder listens on,
/// in the namespace it holds, for its one guard.
pub const NETNS_HOLDER_SOCKET: &str = "yolo-netns-holder";

/// Where the guard writes its events when [`GuardConfig::audit_to_stdout`] is set.
pub const STDOUT_PATH: &str = "/dev/stdout";

/// Docker's embedded DNS server, in every container on a user-defined network: it answers the
/// names of the containers on the same networks (a Compose project's service names).
pub const DOCKER_DNS: &str = "127.0.0.11:53";

/// Where and how the guard records the agent's execs (`GuardConfig::exec_audit`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExecAudit {
    /// The JSONL file for `exec`, `exec_exit` and `unsupervised` events (bind-mounted).
    pub log_path: PathBuf,
    /// Past this size, execs are refused (fail closed) rather than run unrecorded.
    pub max_bytes: u64,
    /// An exec by a thread another process traces (the agent's debugger) cannot be confirmed:
    /// its tracer or another thread can change its argv after it was read. `false` (the
    /// default): it is refused (EPERM); `true`: it runs, recorded `unconfirmed`.
    #[serde(default)]
    pub allow_traced: bool,
}

/// What the guard's file watcher watches (`GuardConfig::file_watch`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileWatch {
    /// The workspace, mounted read-only in the guard.
    pub root: PathBuf,
    /// The JSONL file for `file` events (bind-mounted).
    pub log_path: PathBuf,
    /// Globs (relative to the workspace, `/`-separated, matched ignoring case) of paths the host
    /// executes or reads as configuration: a change to one is `sensitive` and never folded.
    pub sensitive: Vec<String>,
    /// The size the file log may reach; past it, `suppressed` records count what was not written.
    pub max_bytes: u64,
}

/// The folders `globs` reach into: every leading part of a glob that is not wildcards alone
/// (`.git/hooks/**` gives `.git` and `.git/hooks`). A link put there changes what the host reads
/// below it, so the CLI's look and the guard's file watcher both track them as sensitive.
pub fn folder_patterns(globs: &[String]) -> Vec<String> {
    let mut folders = Vec::new();
    for g in globs {
        let parts: Vec<&str> = g.split('/').collect();
        for end in 1..parts.len() {
            let head = &parts[..end];
            if head.iter().all(|c| c.chars().all(|ch| ch == '*')) {
                continue;
            }
            let folder = head.join("/");
            if !folders.contains(&folder) {
                folders.push(folder);
            }
        }
    }
    folders
}

/// The abstract Unix socket (`@yolo-exec`) where the guard's exec supervisor takes the seccomp
/// listeners of the agent's shims. Abstract names belong to the network namespace, which the
/// agent shares with the guard; the guard binds it before the agent exists.
pub const EXEC_SOCKET: &str = "yolo-exec";
/// Where the shim (the `yolo-guard` binary, run as `shim`) is mounted read-only in the agent.
pub const SHIM_PATH: &str = "/.yolo/shim";
/// The default cap of a session's exec log, in bytes (`[audit] max_exec_log`).
pub const DEFAULT_MAX_EXEC_LOG: u64 = 1 << 30;

/// The default cap of a session's guard log, in bytes (`[audit] max_session_log`).
pub const DEFAULT_MAX_SESSION_LOG: u64 = 16 << 20;

fn default_max_session_log() -> u64 {
    DEFAULT_MAX_SESSION_LOG
}

/// [`GuardConfig::phase`] while an image build uses the guard's namespace.
pub const PHASE_BUILD: &str = "build";

/// Where the guard listens for DNS (the agent's resolver); also `[::1]:53` when IPv6 exists.
pub const DNS_LISTEN: &str = "127.0.0.1:53";
/// Where the guard's HTTP proxy listens for the agent's redirected TLS and plain HTTP.
pub const PROXY_PORT_TLS: u16 = 3443;
pub const PROXY_PORT_HTTP: u16 = 3080;
/// The ports the guard itself listens on in the namespace it shares with the agent: DNS and
/// the proxy. A relay (`Relay::listen`) never takes one.
pub const GUARD_PORTS: [u16; 3] = [53, PROXY_PORT_TLS, PROXY_PORT_HTTP];
pub const DNS_LISTEN_V6: &str = "[::1]:53";
/// Created by the guard once the ruleset is verified and DNS answers (for a look by hand:
/// `docker exec <guard> test -e /run/yolo/ready`); the host waits for [`GUARD_READY_LINE`].
pub const GUARD_READY_FILE: &str = "/run/yolo/ready";
/// The line the guard prints on stdout at the same moment (for `docker logs` watchers).
/// Followed by a space and the session id of the config the guard started with.
pub const GUARD_READY_LINE: &str = "yolo-guard ready";
/// Default control socket inside the guard container; `yolo-guard ctl` uses it unless
/// `YOLO_GUARD_CONTROL` names another. Put this path in `GuardConfig.control_socket`.
pub const GUARD_CONTROL_SOCKET: &str = "/run/yolo/control.sock";

/// `yolo-guard ctl --from-env`: the request is in [`CTL_REQUEST_ENV`], not in the argv. The host
/// sends the session's secrets this way when it must go through `docker exec`: the agent shares
/// the guard's PID namespace and reads every process's argv (`/proc/PID/cmdline`), but not the
/// environment of a process holding capabilities it lacks.
pub const CTL_FROM_ENV: &str = "--from-env";

/// See [`CTL_FROM_ENV`].
pub const CTL_REQUEST_ENV: &str = "YOLO_GUARD_CTL_REQUEST";

/// The nameservers of a resolv.conf. In a container on a user network that is Docker's embedded
/// DNS, 127.0.0.11, which the ruleset lets only guard-marked packets reach.
pub fn resolv_conf_nameservers(text: &str) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("nameserver"))
                .then(|| words.next())
                .flatten()
        })
        .filter_map(|addr| addr.split('%').next()?.parse::<IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, 53))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_route_is_read_from_proc_net_route() {
        let text =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
eth1\t0000A8C0\t00000000\t0001\t0\t0\t0\t00F0FFFF\t0\t0\t0\n\
eth0\t00000000\t010012AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
eth0\t000012AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n";
        let expected = if cfg!(target_endian = "little") {
            Some(Gateway {
                interface: "eth0".into(),
                address: std::net::Ipv4Addr::new(172, 18, 0, 1),
            })
        } else {
            Gateway::from_proc_net_route(text)
        };
        assert_eq!(Gateway::from_proc_net_route(text), expected);
        // Of two default routes, the lower metric; one that is down does not count.
        let two = format!(
            "{text}eth1\t00000000\t0100A8C0\t0003\t0\t0\t5\t00000000\t0\t0\t0\n\
eth2\t00000000\t0200A8C0\t0002\t0\t0\t0\t00000000\t0\t0\t0\n"
        );
        let picked = Gateway::from_proc_net_route(&two).unwrap();
        assert_eq!(picked.interface, "eth0");
        let lower = two.replace("0003\t0\t0\t5\t", "0003\t0\t0\t0\t");
        let lower = lower.replace(
            "eth0\t00000000\t010012AC\t0003\t0\t0\t0",
            "eth0\t00000000\t010012AC\t0003\t0\t0\t9",
        );
        assert_eq!(
            Gateway::from_proc_net_route(&lower).unwrap().interface,
            "eth1"
        );
        // No default route (a guard with no network): none.
        let lines: Vec<&str> = text.lines().filter(|l| !l.contains("010012AC")).collect();
        assert_eq!(Gateway::from_proc_net_route(&lines.join("\n")), None);
        assert_eq!(Gateway::from_proc_net_route(""), None);
    }

    /// A config written by an older CLI (no cap) still starts the guard, with the default cap.
    #[test]
    fn a_config_without_a_log_cap_gets_the_default() {
        let json = r#"{"session":"s","mode":"firewall","allow":[],"upstream":[],"ttl_floor_secs":60,
            "deny_nxdomain":false,"published_ports":[],"audit_path":"/var/log/yolo/s.jsonl",
            "control_socket":"/run/yolo/control.sock"}"#;
        let config: GuardConfig = serde_json::from_str(json).unwrap();
        assert_eq!(config.max_session_log, DEFAULT_MAX_SESSION_LOG);
        assert_eq!(DEFAULT_MAX_SESSION_LOG, 16 * 1024 * 1024);
    }

    #[test]
    fn resolv_conf_parsing_keeps_dockers_embedded_dns() {
        let text = "# generated\nnameserver 127.0.0.11\noptions ndots:0\nnameserver fe80::1%eth0\nnameserver bogus\n";
        let servers = resolv_conf_nameservers(text);
        assert_eq!(
            servers,
            vec![
                "127.0.0.11:53".parse().unwrap(),
                "[fe80::1]:53".parse().unwrap()
            ]
        );
    }
}
