//! The running guard's state, shared by DNS and the control socket: the live allowlist, the
//! batches that enforce it, what DNS taught the guard, and the HTTP proxy. As DNS's [`Policy`]
//! it decides what a name may reach and opens the answer's addresses in the dynamic sets: an
//! inspected name's (one the proxy takes: a credential's host, one with method/path rules, any
//! with `inspect_all`) go to the inspected sets, whose 443 and 80 the ruleset sends to the
//! proxy, and to the allow sets only with the ports an allow entry names (`host:22`), never
//! with all ports.

use crate::audit::events::{guard_event, Events};
use crate::dns::names::Resolved;
use crate::dns::{BoxFuture, Policy};
use crate::firewall;
use crate::firewall::batches::Batches;
use crate::firewall::netlink::setelem;
use crate::proxy::names::Inspected;
use crate::proxy::serve::Proxy;
use std::net::IpAddr;
use std::sync::{Arc, RwLock};
use std::time::Instant;
use yolo_protocol::allowlist::{is_internal_address, Allowlist, Ports};
use yolo_protocol::NetworkMode;

/// The running guard's state, shared by DNS and the control socket.
pub(crate) struct Guard<B> {
    pub(crate) mode: NetworkMode,
    pub(crate) allow_internal_answers: bool,
    pub(crate) allowlist: RwLock<Allowlist>,
    pub(crate) batches: Arc<B>,
    pub(crate) resolved: Arc<Resolved<Grant>>,
    pub(crate) events: Arc<Events>,
    /// The HTTP proxy, when the config inspects anything (`GuardConfig::http`).
    pub(crate) proxy: Option<Arc<Proxy>>,
    /// Which inspected names DNS answered with which addresses (the proxy's binding check).
    pub(crate) inspected: Arc<Inspected>,
}

/// What an allowed name's answer opens.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Grant {
    /// The ports in the allow sets; `None`: none (an inspected name without an allow entry
    /// that names ports).
    pub(crate) ports: Option<Ports>,
    /// The addresses go to the inspected sets: 443 and 80 to the proxy.
    pub(crate) inspect: bool,
}

impl Grant {
    /// All that `ports` opens, for a name the proxy does not inspect.
    pub(crate) fn open(ports: Ports) -> Grant {
        Grant {
            ports: Some(ports),
            inspect: false,
        }
    }
}

impl<B: Batches> Policy for Guard<B> {
    type Grant = Grant;

    fn decide(&self, name: &str) -> Option<Grant> {
        let ports = self.ports(name)?;
        if !self.inspects(name) {
            return Some(Grant::open(ports));
        }
        Some(Grant {
            // All ports would let the agent past the proxy on any port but 443 and 80; the
            // ports an entry names (`host:22`) stay open as the user asked.
            ports: match ports {
                Ports::Any => None,
                only => Some(only),
            },
            inspect: true,
        })
    }

    fn answered(&self, name: &str, addrs: &[IpAddr], expires: Instant) {
        if self.inspects(name) {
            self.inspected.record(name, addrs, expires);
        } else if self.proxy.is_some() {
            // An address it shares with an inspected name sends its 443 and 80 to the proxy,
            // which passes them through for a name the guard answered with it.
            if let Some(ports) = self.ports(name) {
                self.inspected.record_passed(name, ports, addrs, expires);
            }
        }
    }

    fn entry(&self, name: &str) -> Option<String> {
        self.allowlist
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .entry(name)
    }

    type Error = firewall::Error;

    /// The forwarder's side of [`Guard::open`].
    fn allow(
        &self,
        elements: Vec<(IpAddr, Grant)>,
        timeout_secs: u64,
    ) -> BoxFuture<std::result::Result<(), firewall::Error>> {
        self.open(elements, timeout_secs)
    }
}

impl<B: Batches> Guard<B> {
    /// The ports the allowlist gives `name` (`None`: refused), whether or not it is inspected.
    pub(crate) fn ports(&self, name: &str) -> Option<Ports> {
        match self.mode {
            NetworkMode::Firewall => self
                .allowlist
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .lookup(name),
            NetworkMode::Open | NetworkMode::Learn => Some(Ports::Any),
            NetworkMode::None => None,
        }
    }

    /// Whether the proxy takes `name`'s connections (none without a proxy).
    pub(crate) fn inspects(&self, name: &str) -> bool {
        self.proxy
            .as_ref()
            .is_some_and(|proxy| proxy.config.inspects(name))
    }

    /// Make `elements` (an allowed name's answer) reachable for `timeout_secs`, but for the
    /// internal addresses: the allow sets in `firewall` mode (`open` lets everything out
    /// anyway), the inspected sets in both.
    pub(crate) fn open(
        &self,
        elements: Vec<(IpAddr, Grant)>,
        timeout_secs: u64,
    ) -> BoxFuture<std::result::Result<(), firewall::Error>> {
        if self.mode == NetworkMode::None {
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
        let inspected: Vec<IpAddr> = elements
            .iter()
            .filter(|(_, g)| g.inspect)
            .map(|(a, _)| *a)
            .collect();
        let allowed: Vec<(IpAddr, Ports)> = elements
            .into_iter()
            .filter(|_| self.mode == NetworkMode::Firewall)
            .filter_map(|(a, g)| Some((a, g.ports?)))
            .collect();
        Box::pin(setelem::add_async(
            allowed,
            inspected,
            timeout_secs,
            refresh,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firewall::batches::Ruleset;
    use crate::testing::in_netns;

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
                proxy: None,
                inspected: Arc::default(),
            };
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .map_err(|e| e.to_string())?;
            let elements = vec![("198.51.100.7".parse().unwrap(), Grant::open(Ports::Any))];
            Ok(runtime.block_on(guard.open(elements, 60)))
        }) else {
            return;
        };
        // The kernel's refusal (no such table), not a socket that failed.
        let error = result.expect_err("no table: the update must fail");
        assert!(
            matches!(&error, firewall::Error::KernelRefused { .. }),
            "{error:?}"
        );
        assert_eq!(error.errno(), Some(libc::ENOENT), "{error:?}");
        assert!(error.to_string().contains("set elements"), "{error}");
    }
}
