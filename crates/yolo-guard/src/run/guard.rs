//! The running guard's state, shared by DNS and the control socket: the live allowlist, the
//! batches that enforce it, and what DNS taught the guard. As DNS's [`Policy`] it decides what a
//! name may reach and opens the answer's addresses in the dynamic sets.

use crate::audit::events::{guard_event, Events};
use crate::dns::names::Resolved;
use crate::dns::{BoxFuture, Policy};
use crate::firewall;
use crate::firewall::batches::Batches;
use crate::firewall::netlink::setelem;
use std::net::IpAddr;
use std::sync::{Arc, RwLock};
use yolo_protocol::allowlist::{is_internal_address, Allowlist, Ports};
use yolo_protocol::NetworkMode;

/// The running guard's state, shared by DNS and the control socket.
pub(crate) struct Guard<B> {
    pub(crate) mode: NetworkMode,
    pub(crate) allow_internal_answers: bool,
    pub(crate) allowlist: RwLock<Allowlist>,
    pub(crate) batches: Arc<B>,
    pub(crate) resolved: Arc<Resolved<Ports>>,
    pub(crate) events: Arc<Events>,
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

    type Error = firewall::Error;

    /// The forwarder's side of [`Guard::open`].
    fn allow(
        &self,
        elements: Vec<(IpAddr, Ports)>,
        timeout_secs: u64,
    ) -> BoxFuture<std::result::Result<(), firewall::Error>> {
        self.open(elements, timeout_secs)
    }
}

impl<B: Batches> Guard<B> {
    /// Make `elements` (an allowed name's answer) reachable for `timeout_secs`, but for the
    /// internal addresses.
    pub(crate) fn open(
        &self,
        elements: Vec<(IpAddr, Ports)>,
        timeout_secs: u64,
    ) -> BoxFuture<std::result::Result<(), firewall::Error>> {
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
            };
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .map_err(|e| e.to_string())?;
            let elements = vec![("198.51.100.7".parse().unwrap(), Ports::Any)];
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
