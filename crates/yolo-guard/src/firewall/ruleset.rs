//! The `inet yolo` table as typed `nftables` values. Pure: applying it is the guard's job.
//!
//! Contract:
//! - `build(config: &GuardConfig, allow: &Allowlist) -> Nftables<'static>`: flush-and-create
//!   batch for table `inet yolo`.
//! - (tests only) `verify(expected: &Nftables, listed: &Nftables) -> Result<(), Error>`:
//!   compare what `nft -j list table inet yolo` shows with what was applied; the guard itself
//!   verifies over netlink (`netlink::verify`).
//! - `add_addresses(&[(IpAddr, Ports)], timeout_secs) -> Nftables<'static>`: delete+add of
//!   dynamic set elements in one batch (timeouts refresh on old kernels too).
//! - `remove_addresses(&[(IpAddr, Ports)]) -> Nftables<'static>`.
//! - `static_networks(&Allowlist) -> Nftables<'static>`: refill the static sets.
//!
//! Every batch here is meant for `nft -j -f -` and is safe to apply more than once: nft
//! batches are atomic, and one failing command (deleting something absent) fails them all, so
//! every delete is preceded by an add of the same object.
//!
//! What this ruleset deliberately does not contain: any accept for the host gateway, private
//! ranges, link-local or other containers. Those are reachable only if the user lists them as
//! static networks.

use nftables::batch::Batch;
use nftables::expr::{Elem, Expression, Meta, MetaKey, NamedExpression, Payload, PayloadField};
use nftables::expr::{Fib, FibFlag, FibResult, Prefix, SetItem, CT};
use nftables::schema::{Chain, Counter, Element, FlushObject, NfCmd, NfListObject};
use nftables::schema::{Nftables, Set, SetFlag, SetType, SetTypeValue, Table};
use nftables::stmt::{self, Log, Match, Operator, Reject, RejectType, Statement};
use nftables::types::{NfChainPolicy, NfChainType, NfFamily, NfHook, RejectCode};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use yolo_protocol::allowlist::{Allowlist, IpNet, Ports};
use yolo_protocol::{GuardConfig, NetworkMode, NFLOG_GROUP};

pub const TABLE: &str = "yolo";
pub const CHAIN_OUTPUT: &str = "output";
pub const CHAIN_INPUT: &str = "input";

/// Dynamic sets, filled by the guard from DNS answers; elements carry their own timeout.
pub const SET_ALLOW4: &str = "allow4";
pub const SET_ALLOW6: &str = "allow6";
/// Dynamic `addr . port` sets for names allowed only on some ports.
pub const SET_ALLOW4_PORT: &str = "allow4_port";
pub const SET_ALLOW6_PORT: &str = "allow6_port";
/// Static interval sets from the allowlist's networks, rewritten by every `build`.
pub const SET_NET4: &str = "net4";
pub const SET_NET6: &str = "net6";
pub const SET_NET4_PORT: &str = "net4_port";
pub const SET_NET6_PORT: &str = "net6_port";
pub const STATIC_SETS: [&str; 4] = [SET_NET4, SET_NET6, SET_NET4_PORT, SET_NET6_PORT];
/// The upstream resolvers (`addr . port`) the guard's marked sockets may reach, rewritten by
/// every `build`. Only these: a process that can set the mark too (an image build's RUN step
/// holds NET_RAW, which allows SO_MARK since Linux 5.17) gets no further than the resolver.
pub const SET_UPSTREAM4: &str = "upstream4";
pub const SET_UPSTREAM6: &str = "upstream6";
/// Dynamic sets of inspected addresses (the guard's answers for names with credentials or
/// method/path rules): the agent's TCP to them on 443 and 80 is redirected to the proxy, and
/// nothing else of the agent's reaches them unless an allow entry names that port (those
/// ports go to `allow*_port` as usual).
pub const SET_INSPECT4: &str = "inspect4";
pub const SET_INSPECT6: &str = "inspect6";
/// The `nat` chain that sends the agent's connections to inspected addresses to the proxy.
pub const CHAIN_REDIRECT: &str = "redirect";
/// The proxy's ports in the guard's namespace: what was going to 443 (TLS) and to 80.
pub use yolo_protocol::{PROXY_PORT_HTTP, PROXY_PORT_TLS};
/// The ports the proxy takes over on an inspected address, with the proxy port for each.
pub const INSPECTED_PORTS: [(u16, u16); 2] = [(443, PROXY_PORT_TLS), (80, PROXY_PORT_HTTP)];
const UPSTREAM_SETS: [&str; 2] = [SET_UPSTREAM4, SET_UPSTREAM6];

/// Named counters for `yolo firewall`: new connections let through by the allowlist (and the
/// guard's own upstream DNS), outbound packets refused, and — in `open` mode — packets that
/// would have been refused but were let through.
pub const COUNTER_ACCEPTED: &str = "accepted";
pub const COUNTER_BLOCKED: &str = "blocked";
pub const COUNTER_UNLISTED: &str = "unlisted";

/// NFLOG prefixes, so the guard's reader can tell why a packet was logged.
pub const LOG_PREFIX_BLOCKED: &str = "yolo-blocked";
pub const LOG_PREFIX_DNS_BYPASS: &str = "yolo-dns-bypass";
pub const LOG_PREFIX_UNLISTED: &str = "yolo-unlisted";

/// Docker's embedded DNS. Docker DNATs port 53 to a random port in the nat output hook
/// (priority -100), before this filter chain, so only the address is matched.
pub const DOCKER_DNS: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 11);

/// Largest element timeout we hand to nft; DNS TTLs are at most 2^31-1 anyway.
const MAX_TIMEOUT_SECS: u64 = u32::MAX as u64;

type Stmts = Vec<Statement<'static>>;

/// The whole table as one batch. Re-applying it is idempotent: the table, sets, counters and
/// chains are added (no-op when present), the two chains and the static sets are flushed and
/// refilled; the dynamic sets keep their elements so live connections' addresses survive a
/// reload (`yolo allow` of a CIDR), and counters keep counting.
pub fn build(config: &GuardConfig, allow: &Allowlist) -> Nftables<'static> {
    let mut batch = Batch::new();
    batch.add(NfListObject::Table(Table {
        family: NfFamily::INet,
        name: TABLE.into(),
        handle: None,
    }));
    for set in all_sets() {
        batch.add(NfListObject::Set(Box::new(set)));
    }
    for name in [COUNTER_ACCEPTED, COUNTER_BLOCKED, COUNTER_UNLISTED] {
        batch.add(NfListObject::Counter(Counter {
            family: NfFamily::INet,
            table: TABLE.into(),
            name: name.into(),
            handle: None,
            packets: None,
            bytes: None,
        }));
    }
    let output_policy = match config.mode {
        NetworkMode::Open | NetworkMode::Learn => NfChainPolicy::Accept,
        NetworkMode::Firewall | NetworkMode::None => NfChainPolicy::Drop,
    };
    for (name, hook, policy) in [
        (CHAIN_OUTPUT, NfHook::Output, output_policy),
        (CHAIN_INPUT, NfHook::Input, NfChainPolicy::Drop),
    ] {
        batch.add(NfListObject::Chain(base_chain(name, hook, policy)));
        batch.add_cmd(NfCmd::Flush(FlushObject::Chain(chain_ref(name))));
    }
    // Before the filter chain (dstnat priority): the filter chain then sees the redirected
    // connection going to loopback.
    batch.add(NfListObject::Chain(Chain {
        _type: Some(NfChainType::NAT),
        prio: Some(-100),
        policy: Some(NfChainPolicy::Accept),
        ..base_chain(CHAIN_REDIRECT, NfHook::Output, NfChainPolicy::Accept)
    }));
    batch.add_cmd(NfCmd::Flush(FlushObject::Chain(chain_ref(CHAIN_REDIRECT))));
    flush_static_sets(&mut batch);
    for name in UPSTREAM_SETS {
        batch.add_cmd(NfCmd::Flush(FlushObject::Set(Box::new(set_ref(name)))));
    }
    for expr in output_rules(config.mode) {
        batch.add(rule(CHAIN_OUTPUT, expr));
    }
    for expr in input_rules(config) {
        batch.add(rule(CHAIN_INPUT, expr));
    }
    for expr in redirect_rules(config.mode) {
        batch.add(rule(CHAIN_REDIRECT, expr));
    }
    fill_static_sets(&mut batch, allow);
    for (set, elems) in upstream_elements(&config.upstream) {
        batch.add(element(set, elems));
    }
    batch.to_nftables()
}

/// The upstream resolvers as `addr . port` elements of their family's set.
fn upstream_elements(
    upstream: &[std::net::SocketAddr],
) -> Vec<(&'static str, Vec<Expression<'static>>)> {
    let mut by_set: BTreeMap<&'static str, BTreeSet<std::net::SocketAddr>> = BTreeMap::new();
    for addr in upstream {
        let set = if addr.is_ipv4() {
            SET_UPSTREAM4
        } else {
            SET_UPSTREAM6
        };
        by_set.entry(set).or_default().insert(*addr);
    }
    by_set
        .into_iter()
        .map(|(set, addrs)| {
            let elems = addrs
                .into_iter()
                .map(|a| concat(s(&a.ip().to_string()), a.port()))
                .collect();
            (set, elems)
        })
        .collect()
}

/// The netdev table [`egress`] makes, and the inet chain that stamps what the output chain let
/// through.
pub const TABLE_EGRESS: &str = "yolo_egress";
pub const CHAIN_STAMP: &str = "stamp";

/// What the IP stack's packets carry once the output chain let them through: a mark and a
/// priority drawn at random by the guard (64 bits no one outside it knows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub mark: u32,
    pub priority: u32,
}

/// An interface [`egress`] seals: its name, its own hardware address and IPv4 addresses (what
/// the ARP it sends may claim).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub name: String,
    pub mac: String,
    pub ipv4: Vec<Ipv4Addr>,
}

/// Close the way under the ruleset: a packet socket (`AF_PACKET`, which `NET_RAW` allows, and an
/// image build's RUN steps hold it) sends frames straight to an interface, below the inet output
/// hook. So a later output chain stamps every packet the ruleset let through, and the egress
/// hook of each of `devices` lets out only stamped frames, wiping the stamp on the way so a
/// sniffer on the interface (a classic BPF filter can read an skb's mark and priority) never
/// sees it. `NET_RAW` can set any mark and priority, so the stamp's only strength is that it is
/// unknown: 64 random bits. ARP never passes an inet hook, so it cannot be stamped: it goes out
/// only when it is the interface's own, from its hardware address and claiming one of its IPv4
/// addresses. A forged ARP frame (another address claimed, on a bridge other projects' guards
/// share: docs/architecture.md) stays in.
pub fn egress(devices: &[Device], stamp: Stamp) -> Nftables<'static> {
    let mut batch = Batch::new();
    let stamp_chain = Chain {
        prio: Some(10),
        policy: Some(NfChainPolicy::Accept),
        ..base_chain(CHAIN_STAMP, NfHook::Output, NfChainPolicy::Accept)
    };
    batch.add(NfListObject::Chain(stamp_chain));
    batch.add_cmd(NfCmd::Flush(FlushObject::Chain(chain_ref(CHAIN_STAMP))));
    // Not on loopback: a build step could read the stamp back from a packet it sends itself
    // (SO_RCVMARK, SO_RCVPRIORITY need no privilege) and put it on a raw frame.
    batch.add(rule(
        CHAIN_STAMP,
        vec![
            not(meta(MetaKey::Oif), s("lo")),
            set_meta(MetaKey::Mark, stamp.mark),
            set_meta(MetaKey::Priority, stamp.priority),
        ],
    ));
    batch.add(NfListObject::Table(Table {
        family: NfFamily::NetDev,
        name: TABLE_EGRESS.into(),
        handle: None,
    }));
    for device in devices {
        let dev = &device.name;
        let chain = Chain {
            family: NfFamily::NetDev,
            table: TABLE_EGRESS.into(),
            name: format!("egress_{dev}").into(),
            _type: Some(NfChainType::Filter),
            hook: Some(NfHook::Egress),
            prio: Some(0),
            dev: Some(dev.clone().into()),
            policy: Some(NfChainPolicy::Drop),
            ..Chain::default()
        };
        batch.add(NfListObject::Chain(chain.clone()));
        batch.add_cmd(NfCmd::Flush(FlushObject::Chain(Chain {
            _type: None,
            hook: None,
            prio: None,
            dev: None,
            policy: None,
            ..chain.clone()
        })));
        let egress_rule = |expr: Stmts| {
            NfListObject::Rule(nftables::schema::Rule {
                family: NfFamily::NetDev,
                table: TABLE_EGRESS.into(),
                chain: chain.name.clone(),
                expr: Cow::Owned(expr),
                handle: None,
                index: None,
                comment: None,
            })
        };
        batch.add(egress_rule(vec![
            is(meta(MetaKey::Mark), Expression::Number(stamp.mark)),
            is(meta(MetaKey::Priority), Expression::Number(stamp.priority)),
            set_meta(MetaKey::Mark, 0),
            set_meta(MetaKey::Priority, 0),
            accept(),
        ]));
        // One rule an address. A frame whose lengths are not Ethernet's and IPv4's is one the
        // kernel's ARP ignores.
        for ip in &device.ipv4 {
            batch.add(egress_rule(vec![
                is(meta(MetaKey::Protocol), s("arp")),
                // The frame's own type too: `meta protocol` is what the sending socket said.
                is(payload("ether", "saddr"), s(&device.mac)),
                is(payload("ether", "type"), s("arp")),
                is(payload("arp", "saddr ether"), s(&device.mac)),
                is(payload("arp", "saddr ip"), s(&ip.to_string())),
                accept(),
            ]));
        }
    }
    batch.to_nftables()
}

fn set_meta(key: MetaKey, value: u32) -> Statement<'static> {
    Statement::Mangle(stmt::Mangle {
        key: meta(key),
        value: Expression::Number(value),
    })
}

/// Refill the static network sets from `allow` in one transaction (for `yolo allow/deny` of a
/// network on a running guard: nothing in between sees the sets empty).
pub fn static_networks(allow: &Allowlist) -> Nftables<'static> {
    let mut batch = Batch::new();
    flush_static_sets(&mut batch);
    fill_static_sets(&mut batch, allow);
    batch.to_nftables()
}

fn flush_static_sets(batch: &mut Batch<'static>) {
    for name in STATIC_SETS {
        batch.add_cmd(NfCmd::Flush(FlushObject::Set(Box::new(set_ref(name)))));
    }
}

fn fill_static_sets(batch: &mut Batch<'static>, allow: &Allowlist) {
    for (set, elems) in static_elements(&allow.networks()) {
        batch.add(element(set, elems));
    }
}

fn all_sets() -> Vec<Set<'static>> {
    use SetType::{InetService, Ipv4Addr as V4, Ipv6Addr as V6};
    let dynamic = [SetFlag::Timeout];
    let interval = [SetFlag::Interval];
    vec![
        set_def(SET_ALLOW4, &[V4], &dynamic),
        set_def(SET_ALLOW6, &[V6], &dynamic),
        set_def(SET_ALLOW4_PORT, &[V4, InetService], &dynamic),
        set_def(SET_ALLOW6_PORT, &[V6, InetService], &dynamic),
        set_def(SET_NET4, &[V4], &interval),
        set_def(SET_NET6, &[V6], &interval),
        set_def(SET_NET4_PORT, &[V4, InetService], &interval),
        set_def(SET_NET6_PORT, &[V6, InetService], &interval),
        set_def(SET_UPSTREAM4, &[V4, InetService], &[]),
        set_def(SET_UPSTREAM6, &[V6, InetService], &[]),
        set_def(SET_INSPECT4, &[V4], &dynamic),
        set_def(SET_INSPECT6, &[V6], &dynamic),
    ]
}

fn set_def(name: &'static str, types: &[SetType], flags: &[SetFlag]) -> Set<'static> {
    let set_type = match types {
        [single] => SetTypeValue::Single(*single),
        many => SetTypeValue::Concatenated(Cow::Owned(many.to_vec())),
    };
    Set {
        set_type,
        flags: (!flags.is_empty()).then(|| flags.iter().copied().collect()),
        ..set_ref(name)
    }
}

/// Enough of a set to name it in flush/element commands.
fn set_ref(name: &'static str) -> Set<'static> {
    Set {
        family: NfFamily::INet,
        table: TABLE.into(),
        name: name.into(),
        ..Set::default()
    }
}

fn base_chain(name: &'static str, hook: NfHook, policy: NfChainPolicy) -> Chain<'static> {
    Chain {
        _type: Some(NfChainType::Filter),
        hook: Some(hook),
        prio: Some(0),
        policy: Some(policy),
        ..chain_ref(name)
    }
}

fn chain_ref(name: &'static str) -> Chain<'static> {
    Chain {
        family: NfFamily::INet,
        table: TABLE.into(),
        name: name.into(),
        ..Chain::default()
    }
}

fn rule(chain: &'static str, expr: Stmts) -> NfListObject<'static> {
    NfListObject::Rule(nftables::schema::Rule {
        family: NfFamily::INet,
        table: TABLE.into(),
        chain: chain.into(),
        expr: Cow::Owned(expr),
        handle: None,
        index: None,
        comment: None,
    })
}

/// The mark (SO_MARK) of the guard's own upstream DNS sockets, which the ruleset lets reach the
/// upstream resolvers: drawn at random once per guard process, so a build step that may set any
/// mark (it holds NET_RAW) cannot know it. The unit tests use the fixed `GUARD_MARK`.
pub fn socket_mark() -> u32 {
    if cfg!(test) {
        return yolo_protocol::GUARD_MARK;
    }
    static MARK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *MARK.get_or_init(|| {
        let mut bytes = [0u8; 4];
        let read = std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
        if read.is_err() {
            // The hasher's keys come from the OS's random source as well.
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u32(std::process::id());
            bytes = (h.finish() as u32).to_ne_bytes();
        }
        // Never 0 (every unmarked packet) and never the egress stamp's own use of the field.
        u32::from_ne_bytes(bytes).max(1)
    })
}

fn output_rules(mode: NetworkMode) -> Vec<Stmts> {
    // Docker's DNS would resolve (and so leak) any name; only the guard's marked sockets may
    // use it. In `none` mode nothing may, hence no mark accept there at all.
    let docker_dns = || {
        vec![
            is(meta(MetaKey::Oif), s("lo")),
            is(payload("ip", "daddr"), s(&DOCKER_DNS.to_string())),
            not(meta(MetaKey::Mark), Expression::Number(socket_mark())),
        ]
    };
    let mut rules = vec![
        // A new connection to this namespace from a source that is not one of its addresses:
        // only a raw socket (a RUN step's NET_RAW) writes one. Let through, conntrack would
        // take it for a connection from that address, and the "reply" would leave as
        // established. (The resets and ICMP errors the refusals below send back over
        // loopback carry the refused address as their source too, but are related, not new.)
        new_from_elsewhere(MetaKey::Oif),
        [docker_dns(), log(LOG_PREFIX_DNS_BYPASS)].concat(),
        [docker_dns(), vec![counter(COUNTER_BLOCKED), reject_icmpx()]].concat(),
    ];
    if mode == NetworkMode::None {
        rules.push(vec![is(meta(MetaKey::Oif), s("lo")), accept()]);
        rules.extend(refuse_rest());
        return rules;
    }
    // The guard's marked sockets (its upstream DNS) reach the upstream resolvers and nothing
    // else; marked packets to Docker's DNS pass with loopback below.
    for (ip, set) in [("ip", SET_UPSTREAM4), ("ip6", SET_UPSTREAM6)] {
        rules.push(vec![
            is(meta(MetaKey::Mark), Expression::Number(socket_mark())),
            is(meta(MetaKey::L4proto), anon_set(&["tcp", "udp"])),
            is(
                Expression::Named(NamedExpression::Concat(vec![
                    payload(ip, "daddr"),
                    payload("th", "dport"),
                ])),
                set_lookup(set),
            ),
            counter(COUNTER_ACCEPTED),
            accept(),
        ]);
    }
    // The proxy's own connections (marked like DNS's) to inspected addresses, on the ports it
    // serves; the agent's never get here, the `redirect` chain sent them to loopback.
    let inspected_ports = Expression::Named(NamedExpression::Set(
        INSPECTED_PORTS
            .iter()
            .map(|(p, _)| SetItem::Element(Expression::Number(u32::from(*p))))
            .collect(),
    ));
    for (ip, set) in [("ip", SET_INSPECT4), ("ip6", SET_INSPECT6)] {
        rules.push(vec![
            is(meta(MetaKey::Mark), Expression::Number(socket_mark())),
            is(payload(ip, "daddr"), set_lookup(set)),
            is(payload("tcp", "dport"), inspected_ports.clone()),
            counter(COUNTER_ACCEPTED),
            accept(),
        ]);
    }
    // The agent's connections the `redirect` chain sent to the proxy: their destination is
    // loopback now, but `oif` still names the interface of the original route (the output
    // hook keeps the device it was called with when NAT reroutes), so `oif lo` below misses
    // them. A packet to a loopback address cannot leave the namespace, whichever rule takes it.
    let proxy_ports = Expression::Named(NamedExpression::Set(
        INSPECTED_PORTS
            .iter()
            .map(|(_, p)| SetItem::Element(Expression::Number(u32::from(*p))))
            .collect(),
    ));
    for (ip, loopback) in [("ip", "127.0.0.1"), ("ip6", "::1")] {
        rules.push(vec![
            is(payload(ip, "daddr"), s(loopback)),
            is(payload("tcp", "dport"), proxy_ports.clone()),
            accept(),
        ]);
    }
    rules.extend([
        vec![is(meta(MetaKey::Oif), s("lo")), accept()],
        vec![established(), accept()],
        // IPv6 cannot reach anything, allowed or not, without neighbour discovery (the
        // IPv4 equivalent, ARP, never passes through an inet table).
        vec![
            is(
                payload("icmpv6", "type"),
                anon_set(&[
                    "nd-neighbor-solicit",
                    "nd-neighbor-advert",
                    "nd-router-solicit",
                ]),
            ),
            accept(),
        ],
    ]);
    for (ip, set, port_set) in [
        ("ip", SET_ALLOW4, SET_ALLOW4_PORT),
        ("ip6", SET_ALLOW6, SET_ALLOW6_PORT),
        ("ip", SET_NET4, SET_NET4_PORT),
        ("ip6", SET_NET6, SET_NET6_PORT),
    ] {
        rules.push(vec![
            is(payload(ip, "daddr"), set_lookup(set)),
            counter(COUNTER_ACCEPTED),
            accept(),
        ]);
        // `th dport` reads the same bytes whatever the protocol; pin it to TCP/UDP so an ICMP
        // checksum cannot pose as an allowed port.
        rules.push(vec![
            is(meta(MetaKey::L4proto), anon_set(&["tcp", "udp"])),
            is(
                Expression::Named(NamedExpression::Concat(vec![
                    payload(ip, "daddr"),
                    payload("th", "dport"),
                ])),
                set_lookup(port_set),
            ),
            counter(COUNTER_ACCEPTED),
            accept(),
        ]);
    }
    match mode {
        NetworkMode::Open | NetworkMode::Learn => {
            rules.push(log(LOG_PREFIX_UNLISTED));
            rules.push(vec![counter(COUNTER_UNLISTED), accept()]);
        }
        _ => rules.extend(refuse_rest()),
    }
    rules
}

/// The `redirect` chain: unmarked TCP to an inspected address on 443 or 80 goes to the
/// proxy's port on loopback (`redirect`); the proxy reads where it was going with
/// SO_ORIGINAL_DST. The guard's marked sockets (the proxy's own connections) pass unchanged.
/// Nothing in `none` mode, where nothing is inspected.
fn redirect_rules(mode: NetworkMode) -> Vec<Stmts> {
    if mode == NetworkMode::None {
        return Vec::new();
    }
    let mut rules = Vec::new();
    for (ip, set) in [("ip", SET_INSPECT4), ("ip6", SET_INSPECT6)] {
        for (port, proxy) in INSPECTED_PORTS {
            rules.push(vec![
                not(meta(MetaKey::Mark), Expression::Number(socket_mark())),
                is(payload(ip, "daddr"), set_lookup(set)),
                is(payload("tcp", "dport"), Expression::Number(u32::from(port))),
                Statement::Redirect(Some(stmt::NAT {
                    addr: None,
                    family: None,
                    port: Some(Expression::Number(u32::from(proxy))),
                    flags: None,
                })),
            ]);
        }
    }
    rules
}

/// Log (every packet, in a rule of its own without a verdict), then refuse loudly: a TCP reset
/// or an ICMP error makes tools fail at once instead of hanging until their timeout.
fn refuse_rest() -> Vec<Stmts> {
    vec![
        log(LOG_PREFIX_BLOCKED),
        vec![
            is(meta(MetaKey::L4proto), s("tcp")),
            counter(COUNTER_BLOCKED),
            Statement::Reject(Some(Reject::new(Some(RejectType::TCPReset), None))),
        ],
        vec![counter(COUNTER_BLOCKED), reject_icmpx()],
    ]
}

fn input_rules(config: &GuardConfig) -> Vec<Stmts> {
    let mut rules = vec![
        // A frame a packet socket puts on `lo` with another source would seed a connection
        // whose "reply" leaves as established (see the first output rule).
        new_from_elsewhere(MetaKey::Iif),
        vec![is(meta(MetaKey::Iif), s("lo")), accept()],
        vec![established(), accept()],
    ];
    // With no network there is no way to answer a connection from outside either.
    if config.mode != NetworkMode::None {
        rules.push(vec![
            is(
                payload("icmpv6", "type"),
                anon_set(&[
                    "nd-neighbor-solicit",
                    "nd-neighbor-advert",
                    "nd-router-advert",
                ]),
            ),
            accept(),
        ]);
        let mut ports = config.published_ports.clone();
        ports.sort_unstable();
        ports.dedup();
        if !ports.is_empty() {
            let items = ports
                .iter()
                .map(|p| SetItem::Element(Expression::Number(u32::from(*p))))
                .collect();
            let ports = Expression::Named(NamedExpression::Set(items));
            match &config.gateway {
                // Through Docker's port publishing, connections come from the bridge's own
                // address. Anything else on that bridge (another project's guard, where the
                // guards share one) is refused; other interfaces (a Compose project's
                // networks) keep reaching them.
                Some(gw) => {
                    rules.push(vec![
                        is(meta(MetaKey::Iifname), s(&gw.interface)),
                        is(payload("ip", "saddr"), s(&gw.address.to_string())),
                        is(payload("tcp", "dport"), ports.clone()),
                        accept(),
                    ]);
                    rules.push(vec![
                        not(meta(MetaKey::Iifname), s(&gw.interface)),
                        is(payload("tcp", "dport"), ports),
                        accept(),
                    ]);
                }
                None => rules.push(vec![is(payload("tcp", "dport"), ports), accept()]),
            }
        }
    }
    rules.push(vec![
        Statement::Counter(stmt::Counter::Anonymous(None)),
        drop(),
    ]);
    rules
}

/// Drop a new connection on loopback (`lo` as `key`: the output or the input interface)
/// whose source is not one of the namespace's own addresses.
fn new_from_elsewhere(key: MetaKey) -> Stmts {
    let state = Expression::Named(NamedExpression::CT(CT {
        key: "state".into(),
        family: None,
        dir: None,
    }));
    vec![
        is(meta(key), s("lo")),
        matching(state, Operator::IN, Expression::List(vec![s("new")])),
        not(source_type(), s("local")),
        counter(COUNTER_BLOCKED),
        drop(),
    ]
}

/// What the routing table says the packet's source address is (`fib saddr type`): `local`
/// for the namespace's own addresses.
fn source_type() -> Expression<'static> {
    Expression::Named(NamedExpression::Fib(Fib {
        result: FibResult::Type,
        flags: std::collections::HashSet::from([FibFlag::Saddr]),
    }))
}

fn s(text: &str) -> Expression<'static> {
    Expression::String(Cow::Owned(text.to_string()))
}

fn meta(key: MetaKey) -> Expression<'static> {
    Expression::Named(NamedExpression::Meta(Meta { key }))
}

fn payload(protocol: &'static str, field: &'static str) -> Expression<'static> {
    Expression::Named(NamedExpression::Payload(Payload::PayloadField(
        PayloadField {
            protocol: protocol.into(),
            field: field.into(),
        },
    )))
}

fn set_lookup(name: &str) -> Expression<'static> {
    s(&format!("@{name}"))
}

fn anon_set(items: &[&str]) -> Expression<'static> {
    Expression::Named(NamedExpression::Set(
        items.iter().map(|i| SetItem::Element(s(i))).collect(),
    ))
}

fn matching(
    left: Expression<'static>,
    op: Operator,
    right: Expression<'static>,
) -> Statement<'static> {
    Statement::Match(Match { left, right, op })
}

fn is(left: Expression<'static>, right: Expression<'static>) -> Statement<'static> {
    matching(left, Operator::EQ, right)
}

fn not(left: Expression<'static>, right: Expression<'static>) -> Statement<'static> {
    matching(left, Operator::NEQ, right)
}

fn established() -> Statement<'static> {
    let state = Expression::Named(NamedExpression::CT(CT {
        key: "state".into(),
        family: None,
        dir: None,
    }));
    matching(
        state,
        Operator::IN,
        Expression::List(vec![s("established"), s("related")]),
    )
}

fn counter(name: &'static str) -> Statement<'static> {
    Statement::Counter(stmt::Counter::Named(name.into()))
}

fn accept() -> Statement<'static> {
    Statement::Accept(None)
}

fn drop() -> Statement<'static> {
    Statement::Drop(None)
}

fn reject_icmpx() -> Statement<'static> {
    Statement::Reject(Some(Reject::new(
        Some(RejectType::ICMPX),
        Some(RejectCode::AdminProhibited),
    )))
}

/// A rule body that logs to the guard's NFLOG group; no verdict. Not rate-limited: a limit
/// here would drop distinct attempts along with the flood around them (2,000 connects, then
/// one to another port: the last went unlogged). The guard folds repeats instead (`fold`),
/// and what its socket cannot take is counted (`nflog`).
fn log(prefix: &'static str) -> Stmts {
    vec![Statement::Log(Some(Log {
        prefix: Some(prefix.into()),
        ..Log::new(Some(u32::from(NFLOG_GROUP)))
    }))]
}

/// Static elements per set. Interval sets refuse overlapping elements in one batch, so a
/// network inside another of the same set (and port) is dropped: the wider one covers it.
fn static_elements(networks: &[(IpNet, Ports)]) -> Vec<(&'static str, Vec<Expression<'static>>)> {
    let mut plain: [Vec<IpNet>; 2] = Default::default();
    let mut ported: [BTreeMap<u16, Vec<IpNet>>; 2] = Default::default();
    for (net, ports) in networks {
        let family = usize::from(!net.is_ipv4());
        match ports {
            Ports::Any => plain[family].push(*net),
            Ports::Only(list) => {
                for port in list {
                    ported[family].entry(*port).or_default().push(*net);
                }
            }
        }
    }
    let mut out = Vec::new();
    for (family, (set, port_set)) in [(SET_NET4, SET_NET4_PORT), (SET_NET6, SET_NET6_PORT)]
        .into_iter()
        .enumerate()
    {
        let elems: Vec<_> = widest(&plain[family]).into_iter().map(net_expr).collect();
        if !elems.is_empty() {
            out.push((set, elems));
        }
        let mut port_elems = Vec::new();
        for (port, nets) in &ported[family] {
            for net in widest(nets) {
                port_elems.push(concat(net_expr(net), *port));
            }
        }
        if !port_elems.is_empty() {
            out.push((port_set, port_elems));
        }
    }
    out
}

/// Networks not contained in another one of the list, deduplicated, sorted.
fn widest(nets: &[IpNet]) -> Vec<IpNet> {
    let unique: BTreeSet<IpNet> = nets.iter().copied().collect();
    unique
        .iter()
        .filter(|n| {
            !unique
                .iter()
                .any(|o| o != *n && o.prefix <= n.prefix && o.contains(&n.addr))
        })
        .copied()
        .collect()
}

fn net_expr(net: IpNet) -> Expression<'static> {
    if net.is_host() {
        return s(&net.addr.to_string());
    }
    Expression::Named(NamedExpression::Prefix(Prefix {
        addr: Box::new(s(&net.addr.to_string())),
        len: u32::from(net.prefix),
    }))
}

fn concat(addr: Expression<'static>, port: u16) -> Expression<'static> {
    Expression::Named(NamedExpression::Concat(vec![
        addr,
        Expression::Number(u32::from(port)),
    ]))
}

fn element(set: &'static str, elems: Vec<Expression<'static>>) -> NfListObject<'static> {
    NfListObject::Element(Element {
        family: NfFamily::INet,
        table: TABLE.into(),
        name: set.into(),
        elem: Cow::Owned(elems),
    })
}

/// Dynamic elements for resolved addresses, grouped by set, without duplicates (a duplicate
/// delete in one batch would fail it).
fn dynamic_elements(addrs: &[(IpAddr, Ports)]) -> Vec<(&'static str, Vec<Expression<'static>>)> {
    let mut by_set: BTreeMap<&'static str, BTreeSet<(IpAddr, Option<u16>)>> = BTreeMap::new();
    for (addr, ports) in addrs {
        let v4 = addr.is_ipv4();
        match ports {
            Ports::Any => {
                let set = if v4 { SET_ALLOW4 } else { SET_ALLOW6 };
                by_set.entry(set).or_default().insert((*addr, None));
            }
            Ports::Only(list) => {
                let set = if v4 { SET_ALLOW4_PORT } else { SET_ALLOW6_PORT };
                let entry = by_set.entry(set).or_default();
                entry.extend(list.iter().map(|p| (*addr, Some(*p))));
            }
        }
    }
    by_set
        .into_iter()
        .map(|(set, items)| {
            let elems = items
                .into_iter()
                .map(|(addr, port)| match port {
                    None => s(&addr.to_string()),
                    Some(port) => concat(s(&addr.to_string()), port),
                })
                .collect();
            (set, elems)
        })
        .collect()
}

fn with_timeout(elems: &[Expression<'static>], timeout: u32) -> Vec<Expression<'static>> {
    elems
        .iter()
        .map(|e| {
            Expression::Named(NamedExpression::Elem(Elem {
                val: Box::new(e.clone()),
                timeout: Some(timeout),
                expires: None,
                comment: None,
                counter: None,
            }))
        })
        .collect()
}

/// Allow (or refresh) resolved addresses for `timeout_secs` (clamped to 1..=u32::MAX).
///
/// Per set: add (so the element exists), delete, add with the timeout — all in one atomic
/// batch. Re-adding an existing element does not reset its timeout on most kernels, and
/// deleting an absent one would fail the whole batch; this sequence refreshes in both cases.
/// An empty `addrs` gives an empty batch: skip applying it.
pub fn add_addresses(addrs: &[(IpAddr, Ports)], timeout_secs: u64) -> Nftables<'static> {
    let timeout = timeout_secs.clamp(1, MAX_TIMEOUT_SECS) as u32;
    let mut batch = Batch::new();
    for (set, elems) in dynamic_elements(addrs) {
        let timed = with_timeout(&elems, timeout);
        batch.add(element(set, timed.clone()));
        batch.delete(element(set, elems));
        batch.add(element(set, timed));
    }
    batch.to_nftables()
}

/// Mark resolved addresses of inspected names as inspected for `timeout_secs`: add, delete,
/// add with the timeout, as [`add_addresses`] does (a refresh on every kernel). The proxy's
/// tests use it; the DNS path adds the same elements over netlink (`setelem`).
#[cfg(test)]
pub fn add_inspected(addrs: &[IpAddr], timeout_secs: u64) -> Nftables<'static> {
    let timeout = timeout_secs.clamp(1, MAX_TIMEOUT_SECS) as u32;
    let mut batch = Batch::new();
    for (set, v4) in [(SET_INSPECT4, true), (SET_INSPECT6, false)] {
        let elems: BTreeSet<IpAddr> = addrs
            .iter()
            .filter(|a| a.is_ipv4() == v4)
            .copied()
            .collect();
        if elems.is_empty() {
            continue;
        }
        let elems: Vec<_> = elems.iter().map(|a| s(&a.to_string())).collect();
        let timed = with_timeout(&elems, timeout);
        batch.add(element(set, timed.clone()));
        batch.delete(element(set, elems));
        batch.add(element(set, timed));
    }
    batch.to_nftables()
}

/// Take addresses out of the inspected sets (`yolo deny` of the last inspected name answered
/// with them): their 443 and 80 go where the allow sets say again, no longer to the proxy.
/// Absent elements are fine: each is added first.
pub fn remove_inspected(addrs: &[IpAddr]) -> Nftables<'static> {
    let mut batch = Batch::new();
    for (set, v4) in [(SET_INSPECT4, true), (SET_INSPECT6, false)] {
        let elems: BTreeSet<IpAddr> = addrs
            .iter()
            .filter(|a| a.is_ipv4() == v4)
            .copied()
            .collect();
        if elems.is_empty() {
            continue;
        }
        let elems: Vec<_> = elems.iter().map(|a| s(&a.to_string())).collect();
        batch.add(element(set, with_timeout(&elems, 1)));
        batch.delete(element(set, elems));
    }
    batch.to_nftables()
}

/// Forget resolved addresses (`yolo deny`). Absent elements are fine: each is added first.
/// Established connections are not cut; conntrack keeps them until they close.
pub fn remove_addresses(addrs: &[(IpAddr, Ports)]) -> Nftables<'static> {
    let mut batch = Batch::new();
    for (set, elems) in dynamic_elements(addrs) {
        // With a timeout, so a crash between add and delete can never leave a permanent entry.
        batch.add(element(set, with_timeout(&elems, 1)));
        batch.delete(element(set, elems));
    }
    batch.to_nftables()
}

/// The check of `nft`'s own listing against a batch: the guard verifies over netlink
/// (`netlink::verify`); the real-kernel tests keep this second, independent reading of what the
/// kernel holds through `nft -j list`.
#[cfg(test)]
mod nft_listing {
    use super::*;
    use nftables::schema::NfObject;
    use std::collections::HashSet;

    /// What verification compares: what nft cannot normalize away.
    #[derive(Debug, Default, PartialEq, Eq)]
    struct Summary {
        tables: BTreeSet<String>,
        chains: BTreeMap<String, String>,
        sets: BTreeMap<String, String>,
        counters: BTreeSet<String>,
        rules: BTreeMap<String, Vec<String>>,
        static_elements: BTreeMap<String, usize>,
    }

    /// Checks that the listed table (`nft -j list table inet yolo`, parsed) has what `expected`
    /// (a [`build`] batch) adds: chains with type/hook/priority/policy, sets with types and flags,
    /// the named counters, per chain the same rules in order — each reduced to its verdict, set
    /// references, named counter and log group — and the number of static set elements.
    /// The last output rule being the refusal (or the `open` accept) follows from the rule list.
    pub fn verify(expected: &Nftables, listed: &Nftables) -> Result<(), crate::firewall::Error> {
        let want = summarize(expected);
        let have = summarize(listed);
        let mut problems = Vec::new();
        for table in want.tables.difference(&have.tables) {
            problems.push(format!("table inet {table} is missing"));
        }
        compare(&mut problems, "chain", &want.chains, &have.chains);
        compare(&mut problems, "set", &want.sets, &have.sets);
        for name in want.counters.difference(&have.counters) {
            problems.push(format!("counter {name} is missing"));
        }
        for (chain, rules) in &want.rules {
            let listed = have.rules.get(chain).map(Vec::as_slice).unwrap_or_default();
            if rules.len() != listed.len() {
                problems.push(format!(
                    "chain {chain} has {} rules, expected {}",
                    listed.len(),
                    rules.len()
                ));
            }
            for (i, (w, h)) in rules.iter().zip(listed).enumerate() {
                if w != h {
                    problems.push(format!("chain {chain} rule {i} is [{h}], expected [{w}]"));
                }
            }
        }
        for (set, count) in &want.static_elements {
            let listed = have.static_elements.get(set).copied().unwrap_or(0);
            if listed != *count {
                problems.push(format!("set {set} has {listed} elements, expected {count}"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(crate::firewall::Error::VerifyMismatch(format!(
                "the firewall differs from what was applied: {}",
                problems.join("; ")
            )))
        }
    }

    fn compare(
        problems: &mut Vec<String>,
        kind: &str,
        want: &BTreeMap<String, String>,
        have: &BTreeMap<String, String>,
    ) {
        for (name, w) in want {
            match have.get(name) {
                None => problems.push(format!("{kind} {name} is missing")),
                Some(h) if h != w => problems.push(format!("{kind} {name} is {h}, expected {w}")),
                Some(_) => {}
            }
        }
    }

    /// Works on both a command batch (adds) and a listing (plain objects) of table `inet yolo`.
    fn summarize(nft: &Nftables) -> Summary {
        let mut sum = Summary::default();
        for object in nft.objects.iter() {
            let obj = match object {
                NfObject::CmdObject(NfCmd::Add(obj)) | NfObject::ListObject(obj) => obj,
                _ => continue,
            };
            match obj {
                NfListObject::Table(t) if is_ours(t.family, &t.name) => {
                    sum.tables.insert(t.name.to_string());
                }
                NfListObject::Chain(c) if is_ours(c.family, &c.table) => {
                    let desc = format!(
                        "type {:?} hook {:?} priority {:?} policy {:?}",
                        c._type, c.hook, c.prio, c.policy
                    )
                    .to_lowercase();
                    sum.chains.insert(c.name.to_string(), desc);
                }
                NfListObject::Set(set) if is_ours(set.family, &set.table) => {
                    summarize_set(&mut sum, set);
                }
                NfListObject::Counter(c) if is_ours(c.family, &c.table) => {
                    sum.counters.insert(c.name.to_string());
                }
                NfListObject::Rule(r) if is_ours(r.family, &r.table) => {
                    let rules = sum.rules.entry(r.chain.to_string()).or_default();
                    rules.push(summarize_rule(&r.expr));
                }
                NfListObject::Element(e) if is_ours(e.family, &e.table) && is_static(&e.name) => {
                    *sum.static_elements.entry(e.name.to_string()).or_default() += e.elem.len();
                }
                _ => {}
            }
        }
        sum
    }

    /// A set whose elements `build` writes (and `verify` counts).
    fn is_static(name: &str) -> bool {
        STATIC_SETS.contains(&name) || UPSTREAM_SETS.contains(&name)
    }

    fn is_ours(family: NfFamily, table: &str) -> bool {
        family == NfFamily::INet && table == TABLE
    }

    fn summarize_set(sum: &mut Summary, set: &Set) {
        let types = match &set.set_type {
            SetTypeValue::Single(t) => vec![*t],
            SetTypeValue::Concatenated(ts) => ts.to_vec(),
        };
        let flags: BTreeSet<String> = set
            .flags
            .iter()
            .flat_map(HashSet::iter)
            .map(|f| format!("{f:?}").to_lowercase())
            .collect();
        let desc = format!("type {types:?} flags {flags:?}").to_lowercase();
        sum.sets.insert(set.name.to_string(), desc);
        if is_static(&set.name) {
            let count = set.elem.as_ref().map_or(0, |e| e.len());
            *sum.static_elements.entry(set.name.to_string()).or_default() += count;
        }
    }

    /// A rule reduced to what survives nft's normalization: verdict, `@set` references, named
    /// counter and log group/prefix.
    fn summarize_rule(stmts: &[Statement]) -> String {
        let mut parts = Vec::new();
        let mut sets = BTreeSet::new();
        for st in stmts {
            match st {
                Statement::Match(m) => {
                    for side in [&m.left, &m.right] {
                        if let Ok(value) = serde_json::to_value(side) {
                            collect_set_refs(&value, &mut sets);
                        }
                    }
                }
                Statement::Counter(stmt::Counter::Named(name)) => {
                    parts.push(format!("counter {name}"))
                }
                Statement::Log(Some(l)) => parts.push(format!(
                    "log group {:?} prefix {:?}",
                    l.group,
                    l.prefix.as_deref().unwrap_or("")
                )),
                Statement::Accept(_) => parts.push("accept".into()),
                Statement::Drop(_) => parts.push("drop".into()),
                Statement::Reject(r) => {
                    let r = r.as_ref();
                    let kind = r.and_then(|r| r._type);
                    let code = r.and_then(|r| r.expr);
                    parts.push(format!("reject {kind:?} {code:?}").to_lowercase());
                }
                _ => {}
            }
        }
        sets.into_iter().chain(parts).collect::<Vec<_>>().join(" ")
    }

    fn collect_set_refs(value: &serde_json::Value, out: &mut BTreeSet<String>) {
        match value {
            serde_json::Value::String(s) if s.starts_with('@') => {
                out.insert(s.clone());
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| collect_set_refs(v, out)),
            serde_json::Value::Object(map) => map.values().for_each(|v| collect_set_refs(v, out)),
            _ => {}
        }
    }
}
#[cfg(test)]
pub use nft_listing::verify;

#[cfg(test)]
mod tests {
    use super::*;
    use nftables::schema::NfObject;
    use serde_json::Value;
    use std::io::Write;
    use std::path::PathBuf;
    use std::process::{Command, Stdio};

    fn config(mode: NetworkMode, published_ports: Vec<u16>) -> GuardConfig {
        GuardConfig {
            published_ports,
            ..crate::testing::guard_config(mode)
        }
    }

    fn allowlist() -> Allowlist {
        let patterns: Vec<String> = [
            "api.example.com",
            "*.example.org:443",
            "192.0.2.0/24",
            "192.0.2.128/25",
            "198.51.100.7",
            "203.0.113.0/24:443,8443",
            "203.0.113.0/25:443",
            "2001:db8::/48",
            "[2001:db8:1::5]:22",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        Allowlist::parse(&patterns).unwrap()
    }

    /// The JSON `nft -j -f -` reads (`sets::apply` serializes the same way).
    fn to_json(nft: &Nftables) -> String {
        serde_json::to_string(nft).unwrap()
    }

    fn json(nft: &Nftables) -> Value {
        serde_json::from_str(&to_json(nft)).unwrap()
    }

    /// The commands of a batch as (verb, object kind, object) triples.
    fn commands(nft: &Nftables) -> Vec<(String, String, Value)> {
        let Value::Array(items) = json(nft)["nftables"].clone() else {
            panic!("no nftables array")
        };
        items
            .into_iter()
            .map(|cmd| {
                let (verb, obj) = cmd.as_object().unwrap().iter().next().unwrap();
                let (kind, body) = obj.as_object().unwrap().iter().next().unwrap();
                (verb.clone(), kind.clone(), body.clone())
            })
            .collect()
    }

    fn rules(nft: &Nftables, chain: &str) -> Vec<Value> {
        commands(nft)
            .into_iter()
            .filter(|(v, k, b)| v == "add" && k == "rule" && b["chain"] == chain)
            .map(|(_, _, b)| b["expr"].clone())
            .collect()
    }

    fn strings_in(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|v| strings_in(v, out)),
            Value::Object(m) => m.values().for_each(|v| strings_in(v, out)),
            _ => {}
        }
    }

    fn has(rule: &Value, key: &str) -> bool {
        rule.as_array()
            .unwrap()
            .iter()
            .any(|st| st.get(key).is_some())
    }

    #[test]
    fn firewall_mode_chains_policies_and_order() {
        let nft = build(&config(NetworkMode::Firewall, vec![]), &allowlist());
        let cmds = commands(&nft);
        assert_eq!((cmds[0].0.as_str(), cmds[0].1.as_str()), ("add", "table"));
        let chains: Vec<_> = cmds
            .iter()
            .filter(|c| c.1 == "chain" && c.0 == "add")
            .collect();
        assert_eq!(chains.len(), 3);
        // The proxy's redirect: a nat chain before the filter chains (dstnat priority).
        assert_eq!(chains[2].2["type"], "nat");
        assert_eq!(chains[2].2["hook"], "output");
        assert_eq!(chains[2].2["prio"], -100);
        assert_eq!(chains[0].2["policy"], "drop");
        assert_eq!(chains[0].2["hook"], "output");
        assert_eq!(chains[1].2["policy"], "drop");
        assert_eq!(chains[1].2["hook"], "input");
        // The chains and all static sets are flushed before rules and elements are added.
        let flushed: Vec<_> = cmds
            .iter()
            .filter(|c| c.0 == "flush")
            .map(|c| c.2["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            flushed,
            [
                "output",
                "input",
                "redirect",
                "net4",
                "net6",
                "net4_port",
                "net6_port",
                "upstream4",
                "upstream6"
            ]
        );
        let first_rule = cmds.iter().position(|c| c.1 == "rule").unwrap();
        let last_flush = cmds.iter().rposition(|c| c.0 == "flush").unwrap();
        assert!(last_flush < first_rule);
        assert!(
            !cmds.iter().any(|c| c.0 == "delete"),
            "a delete could fail the batch"
        );

        let out = rules(&nft, "output");
        let last = out.last().unwrap();
        assert_eq!(last[1]["reject"]["type"], "icmpx");
        assert_eq!(last[1]["reject"]["expr"], "admin-prohibited");
        assert_eq!(out[out.len() - 2][2]["reject"]["type"], "tcp reset");
        let log = &out[out.len() - 3];
        assert_eq!(log[0]["log"]["group"], NFLOG_GROUP);
        assert_eq!(
            log.as_array().unwrap().len(),
            1,
            "no rate limit before log: {log}"
        );
        assert!(!has(log, "accept") && !has(log, "reject"));
    }

    #[test]
    fn docker_dns_is_refused_before_anything_is_accepted() {
        for mode in [NetworkMode::Firewall, NetworkMode::Open, NetworkMode::None] {
            let out = rules(&build(&config(mode, vec![]), &allowlist()), "output");
            let first_accept = out.iter().position(|r| has(r, "accept")).unwrap();
            let refusal = out
                .iter()
                .position(|r| r.to_string().contains("127.0.0.11") && has(r, "reject"))
                .unwrap();
            assert!(refusal < first_accept, "{mode:?}");
            let text = out[refusal].to_string();
            assert!(text.contains(r#""op":"!=""#) && text.contains(&socket_mark().to_string()));
        }
    }

    #[test]
    fn no_rule_names_an_address_besides_docker_dns_and_loopback() {
        // Gateways, private ranges, link-local and other containers are reachable only through
        // the allowlist's sets, never through a literal in a rule.
        for mode in [NetworkMode::Firewall, NetworkMode::Open, NetworkMode::None] {
            let nft = build(&config(mode, vec![8080]), &allowlist());
            for chain in ["output", "input"] {
                let mut literals = Vec::new();
                rules(&nft, chain)
                    .iter()
                    .for_each(|r| strings_in(r, &mut literals));
                let addrs: Vec<_> = literals
                    .iter()
                    .filter(|s| s.split('/').next().unwrap().parse::<IpAddr>().is_ok())
                    .collect();
                // Loopback's own addresses (the proxy's redirected connections) lead nowhere
                // outside the namespace.
                assert!(
                    addrs
                        .iter()
                        .all(|a| ["127.0.0.11", "127.0.0.1", "::1"].contains(&a.as_str())),
                    "{mode:?} {addrs:?}"
                );
            }
        }
    }

    #[test]
    fn firewall_mode_accepts_the_sets_with_counters() {
        let out = rules(
            &build(&config(NetworkMode::Firewall, vec![]), &allowlist()),
            "output",
        );
        let mut refs = Vec::new();
        for rule in &out {
            let text = rule.to_string();
            if let Some(set) = ALL_SET_NAMES
                .iter()
                .find(|s| text.contains(&format!("\"@{s}\"")))
            {
                assert!(has(rule, "accept"));
                assert!(text.contains(r#"{"counter":"accepted"}"#));
                refs.push(*set);
                if set.ends_with("_port") {
                    assert!(text.contains(r#""th""#) && text.contains(r#""l4proto""#));
                }
            }
        }
        assert_eq!(refs.len(), 8);
        // The guard's mark opens the upstream resolvers only, never everything.
        let marked: Vec<String> = out
            .iter()
            .filter(|r| r.to_string().contains(r#""mark""#) && has(r, "accept"))
            .map(|r| r.to_string())
            .collect();
        // ... and the proxy's connections to inspected addresses on the ports it serves.
        assert_eq!(marked.len(), 4, "{marked:?}");
        for (rule, set) in marked[2..].iter().zip(["@inspect4", "@inspect6"]) {
            assert!(rule.contains(set) && rule.contains("[443,80]"), "{rule}");
        }
        for (rule, set) in marked.iter().zip(["@upstream4", "@upstream6"]) {
            assert!(rule.contains(r#""op":"==""#), "{rule}");
            assert!(
                rule.contains(set) && rule.contains(r#""l4proto""#),
                "{rule}"
            );
        }
    }

    #[test]
    fn egress_stamps_after_the_ruleset_and_lets_out_only_stamped_frames_and_own_arp() {
        let stamp = Stamp {
            mark: 0x1234_5678,
            priority: 0x9abc_def0,
        };
        let device = |name: &str, ipv4: Vec<Ipv4Addr>| Device {
            name: name.into(),
            mac: "02:42:ac:11:00:02".into(),
            ipv4,
        };
        let nft = egress(
            &[
                device("eth0", vec![Ipv4Addr::new(172, 17, 0, 2)]),
                device("eth1", vec![]),
            ],
            stamp,
        );
        let cmds = commands(&nft);
        let stamp_chain = cmds
            .iter()
            .find(|c| c.1 == "chain" && c.2["name"] == CHAIN_STAMP)
            .unwrap();
        // After the filter chain (priority 0), so only what it accepted is stamped.
        assert_eq!(stamp_chain.2["hook"], "output");
        assert_eq!(stamp_chain.2["prio"], 10);
        assert_eq!(stamp_chain.2["family"], "inet");
        let rules: Vec<&Value> = cmds
            .iter()
            .filter(|c| c.1 == "rule")
            .map(|c| &c.2)
            .collect();
        let stamping = rules.iter().find(|r| r["chain"] == CHAIN_STAMP).unwrap();
        assert_eq!(
            stamping["expr"],
            serde_json::json!([
                // Never on loopback, where a build step could read it back.
                {"match": {"left": {"meta": {"key": "oif"}}, "op": "!=", "right": "lo"}},
                {"mangle": {"key": {"meta": {"key": "mark"}}, "value": 0x1234_5678}},
                {"mangle": {"key": {"meta": {"key": "priority"}}, "value": 0x9abc_def0u32}}
            ])
        );
        for dev in ["eth0", "eth1"] {
            let name = format!("egress_{dev}");
            let position = |verb: &str| {
                cmds.iter()
                    .position(|c| c.0 == verb && c.1 == "chain" && c.2["name"] == name.as_str())
                    .unwrap()
            };
            assert!(position("add") < position("flush"), "{dev}");
            let chain = &cmds[position("add")].2;
            assert_eq!(
                (
                    &chain["family"],
                    &chain["hook"],
                    &chain["dev"],
                    &chain["policy"]
                ),
                (
                    &Value::from("netdev"),
                    &Value::from("egress"),
                    &Value::from(dev),
                    &Value::from("drop")
                )
            );
            let own: Vec<String> = rules
                .iter()
                .filter(|r| r["chain"] == name.as_str())
                .map(|r| r["expr"].to_string())
                .collect();
            // An interface without IPv4 sends no ARP at all.
            assert_eq!(own.len(), if dev == "eth0" { 2 } else { 1 }, "{own:?}");
            // Stamped: the stamp is checked, then wiped before anything past the hook sees it.
            for needed in [
                r#""right":305419896"#,
                r#""right":2596069104"#,
                r#"{"mangle":{"key":{"meta":{"key":"mark"}},"value":0}}"#,
                r#"{"accept":null}"#,
            ] {
                assert!(own[0].contains(needed), "{needed}: {}", own[0]);
            }
            if dev == "eth0" {
                // ARP only as the interface's own: its hardware address, its IPv4 address.
                let arp: Value = serde_json::from_str(&own[1]).unwrap();
                let matched = |protocol: &str, field: &str| {
                    arp.as_array()
                        .unwrap()
                        .iter()
                        .find(|m| {
                            m["match"]["left"]["payload"]
                                == serde_json::json!({"protocol": protocol, "field": field})
                        })
                        .map(|m| (m["match"]["op"].clone(), m["match"]["right"].clone()))
                        .unwrap_or_else(|| panic!("{protocol} {field}: {arp}"))
                };
                let eq = Value::from("==");
                assert_eq!(
                    matched("ether", "saddr"),
                    (eq.clone(), "02:42:ac:11:00:02".into())
                );
                assert_eq!(matched("ether", "type"), (eq.clone(), "arp".into()));
                assert_eq!(
                    matched("arp", "saddr ether"),
                    (eq.clone(), "02:42:ac:11:00:02".into())
                );
                assert_eq!(matched("arp", "saddr ip"), (eq, "172.17.0.2".into()));
                assert!(own[1].ends_with(r#"{"accept":null}]"#), "{}", own[1]);
            }
        }
    }

    #[test]
    fn the_upstream_resolvers_fill_their_sets_by_family() {
        let mut config = config(NetworkMode::Firewall, vec![]);
        config.upstream = vec![
            "192.0.2.53:53".parse().unwrap(),
            "[2001:db8::53]:5353".parse().unwrap(),
            "192.0.2.53:53".parse().unwrap(),
        ];
        let nft = build(&config, &allowlist());
        let elements: BTreeMap<String, Value> = commands(&nft)
            .into_iter()
            .filter(|c| c.1 == "element" && c.2["name"].as_str().unwrap().starts_with("upstream"))
            .map(|c| {
                (
                    c.2["name"].as_str().unwrap().to_string(),
                    c.2["elem"].clone(),
                )
            })
            .collect();
        let concat = |addr: &str, port: u16| serde_json::json!([{"concat": [addr, port]}]);
        assert_eq!(elements["upstream4"], concat("192.0.2.53", 53));
        assert_eq!(elements["upstream6"], concat("2001:db8::53", 5353));
    }

    const ALL_SET_NAMES: [&str; 8] = [
        SET_ALLOW4,
        SET_ALLOW6,
        SET_ALLOW4_PORT,
        SET_ALLOW6_PORT,
        SET_NET4,
        SET_NET6,
        SET_NET4_PORT,
        SET_NET6_PORT,
    ];

    #[test]
    fn open_mode_accepts_and_logs_the_rest() {
        let nft = build(&config(NetworkMode::Open, vec![]), &allowlist());
        let cmds = commands(&nft);
        let output = cmds
            .iter()
            .find(|c| c.1 == "chain" && c.2["name"] == "output")
            .unwrap();
        assert_eq!(output.2["policy"], "accept");
        let out = rules(&nft, "output");
        let last = out.last().unwrap().to_string();
        assert!(last.contains(r#"{"counter":"unlisted"}"#) && last.contains("accept"));
        let log = out[out.len() - 2].to_string();
        assert!(log.contains(LOG_PREFIX_UNLISTED));
        assert!(!out
            .iter()
            .any(|r| has(r, "reject") && !r.to_string().contains("127.0.0.11")));
    }

    #[test]
    fn none_mode_allows_only_loopback() {
        let nft = build(&config(NetworkMode::None, vec![8080]), &allowlist());
        let out = rules(&nft, "output");
        let accepts: Vec<_> = out.iter().filter(|r| has(r, "accept")).collect();
        assert_eq!(accepts.len(), 1);
        assert!(accepts[0].to_string().contains(r#""right":"lo""#));
        assert!(!out.iter().any(|r| r.to_string().contains('@')));
        assert!(!out
            .iter()
            .any(|r| r.to_string().contains(r#""op":"==","right":2037346415"#)));
        assert_eq!(out.last().unwrap()[1]["reject"]["type"], "icmpx");
        let input = rules(&nft, "input");
        assert!(!input.iter().any(|r| r.to_string().contains("8080")));
    }

    #[test]
    fn input_accepts_published_ports_once_and_drops_the_rest() {
        let nft = build(
            &config(NetworkMode::Firewall, vec![8080, 3000, 8080]),
            &allowlist(),
        );
        let input = rules(&nft, "input");
        let ports = input
            .iter()
            .find(|r| r.to_string().contains(r#""tcp""#))
            .unwrap();
        assert_eq!(
            ports[0]["match"]["right"]["set"],
            serde_json::json!([3000, 8080])
        );
        let last = input.last().unwrap();
        assert!(has(last, "drop") && has(last, "counter"));
        let no_ports = build(&config(NetworkMode::Firewall, vec![]), &allowlist());
        assert_eq!(rules(&no_ports, "input").len(), input.len() - 1);
    }

    #[test]
    fn published_ports_are_reached_through_the_gateway_alone_on_its_interface() {
        let mut on_bridge = config(NetworkMode::Firewall, vec![8080]);
        on_bridge.gateway = Some(yolo_protocol::Gateway {
            interface: "eth0".into(),
            address: Ipv4Addr::new(172, 18, 0, 1),
        });
        let input = rules(&build(&on_bridge, &allowlist()), "input");
        let to_ports: Vec<&Value> = input
            .iter()
            .filter(|r| r.to_string().contains(r#""tcp""#))
            .collect();
        assert_eq!(to_ports.len(), 2, "{to_ports:?}");
        let text = |r: &Value| r.to_string();
        // From the bridge's own address on its interface: Docker's port publishing.
        for needed in [
            r#"{"match":{"left":{"meta":{"key":"iifname"}},"op":"==","right":"eth0"}}"#,
            r#"{"match":{"left":{"payload":{"field":"saddr","protocol":"ip"}},"op":"==","right":"172.18.0.1"}}"#,
            r#"{"accept":null}"#,
        ] {
            assert!(
                text(to_ports[0]).contains(needed),
                "{needed}: {}",
                to_ports[0]
            );
        }
        // Any other interface (a Compose project's networks), as before.
        assert!(
            text(to_ports[1]).contains(
                r#"{"match":{"left":{"meta":{"key":"iifname"}},"op":"!=","right":"eth0"}}"#
            ),
            "{}",
            to_ports[1]
        );
        assert!(!text(to_ports[1]).contains("saddr"), "{}", to_ports[1]);
        // Nothing else accepts a new connection to them: the rest is dropped.
        let last = input.last().unwrap();
        assert!(has(last, "drop"));
    }

    #[test]
    fn static_elements_collapse_overlaps_per_set_and_port() {
        let nft = build(&config(NetworkMode::Firewall, vec![]), &allowlist());
        let elements: BTreeMap<String, Value> = commands(&nft)
            .into_iter()
            .filter(|c| c.1 == "element")
            .map(|c| {
                (
                    c.2["name"].as_str().unwrap().to_string(),
                    c.2["elem"].clone(),
                )
            })
            .collect();
        assert_eq!(
            elements["net4"],
            serde_json::json!([{"prefix": {"addr": "192.0.2.0", "len": 24}}, "198.51.100.7"])
        );
        assert_eq!(
            elements["net4_port"],
            serde_json::json!([
                {"concat": [{"prefix": {"addr": "203.0.113.0", "len": 24}}, 443]},
                {"concat": [{"prefix": {"addr": "203.0.113.0", "len": 24}}, 8443]},
            ])
        );
        assert_eq!(
            elements["net6"],
            serde_json::json!([{"prefix": {"addr": "2001:db8::", "len": 48}}])
        );
        assert_eq!(
            elements["net6_port"],
            serde_json::json!([{"concat": ["2001:db8:1::5", 22]}])
        );
        let empty = build(
            &config(NetworkMode::Firewall, vec![]),
            &Allowlist::default(),
        );
        assert!(!commands(&empty).iter().any(|c| c.1 == "element"));
    }

    fn addrs(items: &[(&str, Ports)]) -> Vec<(IpAddr, Ports)> {
        items
            .iter()
            .map(|(a, p)| (a.parse().unwrap(), p.clone()))
            .collect()
    }

    #[test]
    fn add_addresses_adds_deletes_and_re_adds_per_set() {
        let batch = add_addresses(
            &addrs(&[
                ("1.2.3.4", Ports::Any),
                ("1.2.3.4", Ports::Any),
                ("2001:db8::1", Ports::Any),
                ("5.6.7.8", Ports::Only(vec![443, 80])),
                ("5.6.7.8", Ports::Only(vec![443])),
            ]),
            300,
        );
        let cmds = commands(&batch);
        let shape: Vec<_> = cmds
            .iter()
            .map(|(v, _, b)| format!("{v} {}", b["name"].as_str().unwrap()))
            .collect();
        assert_eq!(
            shape,
            [
                "add allow4",
                "delete allow4",
                "add allow4",
                "add allow4_port",
                "delete allow4_port",
                "add allow4_port",
                "add allow6",
                "delete allow6",
                "add allow6",
            ]
        );
        assert_eq!(
            cmds[0].2["elem"],
            serde_json::json!([{"elem": {
                "val": "1.2.3.4", "timeout": 300, "expires": null, "comment": null, "counter": null
            }}])
        );
        assert_eq!(cmds[1].2["elem"], serde_json::json!(["1.2.3.4"]));
        assert_eq!(
            cmds[4].2["elem"],
            serde_json::json!([{"concat": ["5.6.7.8", 80]}, {"concat": ["5.6.7.8", 443]}])
        );
    }

    #[test]
    fn add_addresses_clamps_timeouts_and_skips_nothing_to_do() {
        let zero = commands(&add_addresses(&addrs(&[("1.2.3.4", Ports::Any)]), 0));
        assert_eq!(zero[0].2["elem"][0]["elem"]["timeout"], 1);
        let huge = commands(&add_addresses(&addrs(&[("1.2.3.4", Ports::Any)]), u64::MAX));
        assert_eq!(huge[0].2["elem"][0]["elem"]["timeout"], u32::MAX);
        assert!(add_addresses(&[], 60).objects.is_empty());
    }

    #[test]
    fn remove_addresses_adds_before_deleting() {
        let cmds = commands(&remove_addresses(&addrs(&[(
            "2001:db8::1",
            Ports::Only(vec![22]),
        )])));
        let shape: Vec<_> = cmds
            .iter()
            .map(|(v, k, b)| format!("{v} {k} {}", b["name"]))
            .collect();
        assert_eq!(
            shape,
            [
                r#"add element "allow6_port""#,
                r#"delete element "allow6_port""#
            ]
        );
    }

    #[test]
    fn static_networks_refills_the_four_static_sets_in_one_batch() {
        let allow =
            Allowlist::parse(&["192.0.2.0/24".to_string(), "example.com".to_string()]).unwrap();
        let cmds = commands(&static_networks(&allow));
        let names: Vec<_> = cmds
            .iter()
            .map(|c| (c.0.as_str(), c.2["name"].as_str().unwrap()))
            .collect();
        assert_eq!(
            names,
            [
                ("flush", "net4"),
                ("flush", "net6"),
                ("flush", "net4_port"),
                ("flush", "net6_port"),
                ("add", "net4")
            ]
        );
        assert!(to_json(&static_networks(&allow)).contains("192.0.2.0"));
    }

    #[test]
    fn verify_accepts_the_same_ruleset_and_names_differences() {
        let cfg = config(NetworkMode::Firewall, vec![8080]);
        let expected = build(&cfg, &allowlist());
        verify(&expected, &expected).unwrap();

        let mut fewer = expected.objects.to_vec();
        let last_rule = fewer
            .iter()
            .rposition(|o| matches!(o, NfObject::CmdObject(NfCmd::Add(NfListObject::Rule(_)))))
            .unwrap();
        fewer.remove(last_rule);
        let fewer = Nftables {
            objects: fewer.into(),
        };
        let err = verify(&expected, &fewer).unwrap_err().to_string();
        assert!(err.contains("chain redirect has"), "{err}");

        let open = build(&config(NetworkMode::Open, vec![8080]), &allowlist());
        let err = verify(&expected, &open).unwrap_err().to_string();
        assert!(
            err.contains("chain output is") && err.contains("policy"),
            "{err}"
        );

        let other_allow = build(&cfg, &Allowlist::default());
        let err = verify(&expected, &other_allow).unwrap_err().to_string();
        assert!(err.contains("set net4 has 0 elements, expected 2"), "{err}");

        let empty = Nftables {
            objects: Vec::new().into(),
        };
        let err = verify(&expected, &empty).unwrap_err().to_string();
        assert!(err.contains("table inet yolo is missing"), "{err}");
    }

    /// The whole ruleset against `tests/fixtures/ruleset.json`. A missing or different file
    /// fails the test; after a deliberate change, review the diff and rewrite the file with
    /// `UPDATE_SNAPSHOTS=1 cargo test -p yolo-guard --lib ruleset_matches_snapshot`.
    #[test]
    fn ruleset_matches_snapshot() {
        let nft = build(&config(NetworkMode::Firewall, vec![8080]), &allowlist());
        let actual = serde_json::to_string_pretty(&nft).unwrap() + "\n";
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ruleset.json");
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &actual).unwrap();
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "snapshot {}: {e}; create it with UPDATE_SNAPSHOTS=1 and review it\n{actual}",
                path.display()
            )
        });
        assert!(
            expected == actual,
            "ruleset changed; check it, then rerun with UPDATE_SNAPSHOTS=1 to accept\n{actual}"
        );
    }

    // ---- Real nftables, in a throwaway network namespace. No packet leaves its loopback. ----

    /// A network namespace deleted on drop, even when the test fails.
    struct Netns(String);

    impl Netns {
        fn create() -> Result<Netns, CommandError> {
            static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let name = format!("yolo-fwtest-{}-{n}", std::process::id());
            run("ip", &["netns", "add", &name], None)?;
            Ok(Netns(name))
        }

        fn exec(&self, argv: &[&str], stdin: Option<&str>) -> Result<String, CommandError> {
            let mut args = vec!["netns", "exec", &self.0];
            args.extend_from_slice(argv);
            run("ip", &args, stdin)
        }

        fn apply(&self, nft: &Nftables) -> Result<String, CommandError> {
            self.exec(&["nft", "-j", "-f", "-"], Some(&to_json(nft)))
        }

        fn list(&self, what: &[&str]) -> Value {
            let mut argv = vec!["nft", "-j", "list"];
            argv.extend_from_slice(what);
            serde_json::from_str(&self.exec(&argv, None).unwrap()).unwrap()
        }

        fn listed_table(&self) -> Nftables<'static> {
            let text = self
                .exec(&["nft", "-j", "list", "table", "inet", TABLE], None)
                .unwrap();
            serde_json::from_str(&text).unwrap()
        }

        /// (element, timeout, expires) of a dynamic set, as nft lists them.
        fn elements(&self, set: &str) -> Vec<(String, u64, u64)> {
            let listed = self.list(&["set", "inet", TABLE, set]);
            let elems = listed["nftables"][1]["set"]["elem"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            elems
                .iter()
                .map(|e| {
                    let e = &e["elem"];
                    let timeout = e["timeout"].as_u64().unwrap_or(0);
                    (
                        e["val"].to_string(),
                        timeout,
                        e["expires"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        }
    }

    impl Drop for Netns {
        fn drop(&mut self) {
            let _ = run("ip", &["netns", "del", &self.0], None);
        }
    }

    /// Why a program the real-kernel tests run (`ip`, `nft`) failed.
    #[derive(Debug, thiserror::Error)]
    enum CommandError {
        #[error("{program}: {source}")]
        Spawn {
            program: String,
            source: std::io::Error,
        },
        #[error("{0}")]
        Io(#[from] std::io::Error),
        #[error("{program} {args:?}: {stderr}")]
        Failed {
            program: String,
            args: Vec<String>,
            stderr: String,
        },
    }

    fn run(program: &str, args: &[&str], stdin: Option<&str>) -> Result<String, CommandError> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| CommandError::Spawn {
                program: program.into(),
                source,
            })?;
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(input.as_bytes())?;
        }
        let out = child.wait_with_output()?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(CommandError::Failed {
                program: program.into(),
                args: args.iter().map(|a| a.to_string()).collect(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    }

    fn real_netns_unavailable() -> Option<String> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Some("not root".into());
        }
        for tool in ["nft", "ip"] {
            if run(tool, &["--version"], None).is_err() && run(tool, &["-V"], None).is_err() {
                return Some(format!("{tool} is not installed"));
            }
        }
        None
    }

    fn counter(listed: &Value, name: &str) -> u64 {
        listed["nftables"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|o| {
                let c = o.get("counter")?;
                (c["name"] == name).then(|| c["packets"].as_u64().unwrap_or(0))
            })
            .unwrap()
    }

    #[test]
    fn ruleset_applies_in_real_netns() {
        if let Some(why) = real_netns_unavailable() {
            crate::testing::skip(&why);
            return;
        }
        let ns = Netns::create().unwrap();
        let cfg = config(NetworkMode::Firewall, vec![8080]);
        let expected = build(&cfg, &allowlist());
        ns.apply(&expected).unwrap();
        verify(&expected, &ns.listed_table()).unwrap();

        // The listing parses and the last output rule is the icmpx refusal.
        let listed = ns.list(&["chain", "inet", TABLE, CHAIN_OUTPUT]);
        let last = listed["nftables"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(last["rule"]["expr"][1]["reject"]["type"], "icmpx", "{last}");

        // Refresh: the second add_addresses raises the timeout of existing elements.
        let resolved = addrs(&[
            ("1.2.3.4", Ports::Any),
            ("2001:db8::1", Ports::Any),
            ("5.6.7.8", Ports::Only(vec![443])),
        ]);
        ns.apply(&add_addresses(&resolved, 100)).unwrap();
        assert_eq!(
            ns.elements(SET_ALLOW4),
            [(r#""1.2.3.4""#.into(), 100, ns.elements(SET_ALLOW4)[0].2)]
        );
        std::thread::sleep(std::time::Duration::from_millis(1100));
        ns.apply(&add_addresses(&resolved, 3600)).unwrap();
        for set in [SET_ALLOW4, SET_ALLOW6, SET_ALLOW4_PORT] {
            let elems = ns.elements(set);
            assert_eq!(elems.len(), 1, "{set}: {elems:?}");
            assert_eq!(elems[0].1, 3600, "{set}: {elems:?}");
            assert!(elems[0].2 > 3590, "{set}: timeout not refreshed: {elems:?}");
        }

        // Re-applying the ruleset keeps dynamic elements, does not duplicate static ones, and
        // can switch the mode.
        ns.apply(&expected).unwrap();
        verify(&expected, &ns.listed_table()).unwrap();
        assert_eq!(ns.elements(SET_ALLOW4).len(), 1);
        let open = build(&config(NetworkMode::Open, vec![]), &allowlist());
        ns.apply(&open).unwrap();
        verify(&open, &ns.listed_table()).unwrap();
        assert!(verify(&expected, &ns.listed_table()).is_err());
        ns.apply(&expected).unwrap();
        verify(&expected, &ns.listed_table()).unwrap();

        // Removing present and absent addresses both succeed.
        let gone = addrs(&[("1.2.3.4", Ports::Any), ("9.9.9.9", Ports::Any)]);
        ns.apply(&remove_addresses(&gone)).unwrap();
        assert!(ns.elements(SET_ALLOW4).is_empty());

        // Tampering is noticed.
        ns.exec(&["nft", "flush", "chain", "inet", TABLE, CHAIN_INPUT], None)
            .unwrap();
        assert!(matches!(
            verify(&expected, &ns.listed_table()),
            Err(crate::firewall::Error::VerifyMismatch(what)) if what.contains("chain input")
        ));
    }

    /// Run `f` on a thread that entered `ns`'s network namespace (setns is per thread).
    fn in_netns<T: Send + 'static>(ns: &Netns, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/var/run/netns/{}", ns.0);
        std::thread::spawn(move || {
            let file = std::fs::File::open(&path).unwrap();
            use std::os::fd::AsRawFd;
            // SAFETY: a namespace file opened above; affects this thread only.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .unwrap()
    }

    /// `nft -j list ruleset` without handles (and the metainfo line), for comparison.
    fn listed_ruleset(ns: &Netns) -> Value {
        let mut listed = ns.list(&["ruleset"]);
        fn strip(v: &mut Value) {
            match v {
                Value::Object(map) => {
                    map.remove("handle");
                    map.values_mut().for_each(strip);
                }
                Value::Array(items) => items.iter_mut().for_each(strip),
                _ => {}
            }
        }
        strip(&mut listed);
        if let Some(items) = listed["nftables"].as_array_mut() {
            items.retain(|o| o.get("metainfo").is_none());
        }
        listed
    }

    /// The netlink translation (`netlink`) against `nft -j -f -` of the same typed values: both
    /// namespaces must list the same ruleset, for several configurations and the follow-up
    /// batches (address updates, static network refills).
    #[test]
    fn netlink_apply_lists_like_nft() {
        if let Some(why) = real_netns_unavailable() {
            crate::testing::skip(&why);
            return;
        }
        let ipv6_only = Allowlist::parse(&["[2001:db8::1]:443".to_string()]).unwrap();
        let mut with_upstream = config(NetworkMode::Firewall, vec![8080, 22, 443]);
        with_upstream.upstream = vec![
            "192.0.2.53:53".parse().unwrap(),
            "[2001:db8::53]:53".parse().unwrap(),
        ];
        // Published ports through the gateway on its interface (lo: the namespace's only one).
        with_upstream.gateway = Some(yolo_protocol::Gateway {
            interface: "lo".into(),
            address: Ipv4Addr::new(172, 18, 0, 1),
        });
        let cases: Vec<(&str, Vec<Nftables<'static>>)> = vec![
            (
                "firewall",
                vec![build(
                    &config(NetworkMode::Firewall, vec![8080]),
                    &allowlist(),
                )],
            ),
            (
                "open",
                vec![build(&config(NetworkMode::Open, vec![]), &allowlist())],
            ),
            (
                "none",
                vec![build(
                    &config(NetworkMode::None, vec![]),
                    &Allowlist::default(),
                )],
            ),
            (
                "upstream, ports, ipv6",
                vec![build(&with_upstream, &ipv6_only)],
            ),
            (
                "updates",
                vec![
                    build(&config(NetworkMode::Firewall, vec![]), &allowlist()),
                    add_addresses(
                        &addrs(&[
                            ("1.2.3.4", Ports::Any),
                            ("2001:db8::1", Ports::Any),
                            ("5.6.7.8", Ports::Only(vec![443, 80])),
                            ("2001:db8::2", Ports::Only(vec![22])),
                        ]),
                        3600,
                    ),
                    remove_addresses(&addrs(&[("5.6.7.8", Ports::Only(vec![80]))])),
                    static_networks(&ipv6_only),
                    egress(
                        &[Device {
                            name: "lo".into(),
                            mac: "02:42:ac:11:00:02".into(),
                            ipv4: vec![Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)],
                        }],
                        Stamp {
                            mark: 0x1234,
                            priority: 0x5678,
                        },
                    ),
                ],
            ),
        ];
        for (name, batches) in cases {
            let by_nft = Netns::create().unwrap();
            let by_netlink = Netns::create().unwrap();
            for batch in &batches {
                by_nft.apply(batch).unwrap();
                let batch = batch.clone();
                in_netns(&by_netlink, move || crate::firewall::netlink::apply(&batch))
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            let (a, b) = (listed_ruleset(&by_nft), listed_ruleset(&by_netlink));
            assert!(a["nftables"].as_array().unwrap().len() > 10, "{name}: {a}");
            // Status over netlink reads what nft lists: elements (expiry aside) and counters.
            let by_nft_list =
                crate::firewall::sets::summarize(&by_netlink.list(&["table", "inet", TABLE]));
            let by_netlink_list = in_netns(&by_netlink, || {
                crate::firewall::netlink::list_table_value(TABLE)
            })
            .map(|v| crate::firewall::sets::summarize(&v))
            .unwrap();
            let no_expiry = |(mut e, c): (Vec<yolo_protocol::control::SetElement>, _)| {
                e.iter_mut().for_each(|e| e.expires_secs = None);
                e.sort_by(|a, b| (&a.set, &a.element).cmp(&(&b.set, &b.element)));
                (e, c)
            };
            let (left, right) = (no_expiry(by_nft_list), no_expiry(by_netlink_list));
            assert!(name == "none" || left.0.len() >= 3, "{name}: {left:?}");
            assert!(left.1.len() >= 4, "{name}: {left:?}");
            assert_eq!(left, right, "{name}: status listing");
            if name == "updates" {
                let egress = batches.last().unwrap().clone();
                in_netns(&by_netlink, move || {
                    crate::firewall::netlink::verify(&egress)
                })
                .unwrap_or_else(|e| panic!("{name}: verify egress: {e}"));
            }
            if let [only] = &batches[..] {
                // Read back over netlink: what nft made and what netlink made both pass, and
                // a tampered chain fails.
                for ns in [&by_nft, &by_netlink] {
                    let expected = only.clone();
                    in_netns(ns, move || crate::firewall::netlink::verify(&expected))
                        .unwrap_or_else(|e| panic!("{name}: verify: {e}"));
                }
                by_nft
                    .exec(
                        &[
                            "nft",
                            "delete",
                            "rule",
                            "inet",
                            TABLE,
                            CHAIN_INPUT,
                            "handle",
                            &ns_last_handle(&by_nft),
                        ],
                        None,
                    )
                    .unwrap();
                let expected = only.clone();
                let err = in_netns(&by_nft, move || crate::firewall::netlink::verify(&expected))
                    .unwrap_err();
                assert!(
                    matches!(&err, crate::firewall::Error::VerifyMismatch(what)
                        if what.contains("chain yolo input has")),
                    "{name}: {err:?}"
                );
                let other = build(&config(NetworkMode::Open, vec![1]), &Allowlist::default());
                let err = in_netns(&by_netlink, move || {
                    crate::firewall::netlink::verify(&other)
                })
                .unwrap_err();
                assert!(
                    matches!(err, crate::firewall::Error::VerifyMismatch(_)),
                    "{name}: {err:?}"
                );
            }
            if a != b {
                let a = serde_json::to_string_pretty(&a).unwrap();
                let b = serde_json::to_string_pretty(&b).unwrap();
                let diff: Vec<_> = a
                    .lines()
                    .zip(b.lines())
                    .enumerate()
                    .filter(|(_, (x, y))| x != y)
                    .take(10)
                    .collect();
                panic!("{name}: rulesets differ (nft vs netlink): {diff:#?}\n{b}");
            }
        }
    }

    /// The handle of the last rule of chain input.
    fn ns_last_handle(ns: &Netns) -> String {
        let listed = ns.list(&["chain", "inet", TABLE, CHAIN_INPUT]);
        let rules = listed["nftables"].as_array().unwrap();
        rules.last().unwrap()["rule"]["handle"].to_string()
    }

    /// A batch the kernel refuses fails as a whole, and the error names what was refused.
    #[test]
    fn netlink_apply_is_atomic_and_names_the_refusal() {
        if let Some(why) = real_netns_unavailable() {
            crate::testing::skip(&why);
            return;
        }
        let ns = Netns::create().unwrap();
        // Elements for a set that does not exist, after a table add: nothing may remain.
        let mut batch = Batch::new();
        batch.add(NfListObject::Table(Table {
            family: NfFamily::INet,
            name: TABLE.into(),
            handle: None,
        }));
        batch.add(element(SET_NET4, vec![s("192.0.2.1")]));
        let nft = batch.to_nftables();
        let err = in_netns(&ns, move || crate::firewall::netlink::apply(&nft)).unwrap_err();
        // The kernel's refusal of that one message, named (no such set), not a socket's failure.
        assert!(
            matches!(&err, crate::firewall::Error::KernelRefused { what, .. }
                if what.contains("set yolo net4")),
            "{err:?}"
        );
        assert_eq!(err.errno(), Some(libc::ENOENT), "{err:?}");
        let listed = listed_ruleset(&ns);
        assert_eq!(
            listed["nftables"].as_array().map(Vec::len),
            Some(0),
            "{listed}"
        );
    }

    #[test]
    fn docker_dns_is_refused_in_real_netns_loopback() {
        if let Some(why) = real_netns_unavailable() {
            crate::testing::skip(&why);
            return;
        }
        let ns = Netns::create().unwrap();
        ns.exec(&["ip", "link", "set", "lo", "up"], None).unwrap();
        let expected = build(
            &config(NetworkMode::Firewall, vec![]),
            &Allowlist::default(),
        );
        ns.apply(&expected).unwrap();
        // Only loopback exists in the namespace: 127.0.0.1 is let through (a closed port
        // answers with a reset), 127.0.0.11 is refused by the ruleset and counted.
        let connect = |addr: &str| {
            ns.exec(
                &[
                    "timeout",
                    "5",
                    "bash",
                    "-c",
                    &format!("exec 3<>/dev/tcp/{addr}/53"),
                ],
                None,
            )
        };
        // What bash said of the connection: a program that ran and failed (not one that
        // could not be run).
        let stderr = |result: Result<String, CommandError>| match result {
            Err(CommandError::Failed { stderr, .. }) => stderr,
            other => panic!("expected the connection to fail: {other:?}"),
        };
        let local = stderr(connect("127.0.0.1"));
        assert!(local.contains("refused"), "{local}");
        let before = counter(
            &ns.list(&["counters", "table", "inet", TABLE]),
            COUNTER_BLOCKED,
        );
        let docker = stderr(connect("127.0.0.11"));
        assert!(
            !docker.contains("timed out") && !docker.is_empty(),
            "{docker}"
        );
        let after = counter(
            &ns.list(&["counters", "table", "inet", TABLE]),
            COUNTER_BLOCKED,
        );
        assert!(
            after > before,
            "blocked counter did not move: {before} -> {after}"
        );
    }
}
