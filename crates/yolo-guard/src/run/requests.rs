//! What the control socket's requests do to the running guard: `allow` and `deny` change the
//! live allowlist and the kernel's sets with it (a deny revokes what the allowlist no longer
//! justifies), `status` lists the table. The sockets themselves are `control`.

use super::guard::Guard;
use crate::control::{Handler, Request, Response};
use crate::dns::{BoxFuture, Policy};
use crate::firewall::batches::Batches;
use crate::firewall::{revoke, ruleset, sets, Error};
use std::sync::Arc;
use yolo_protocol::allowlist::Allowlist;
use yolo_protocol::event::EventKind;

/// The control socket's handler: the running guard, shared, and its held questions (with
/// `[firewall] on_refused = "ask"`).
pub(crate) struct Control<B>(
    pub(crate) Arc<Guard<B>>,
    pub(crate) Option<Arc<crate::ask::Approvals>>,
);

impl<B: Batches> Handler for Control<B> {
    /// On a blocking thread: a request's set changes and listings wait on the kernel (and a
    /// `deny` on its revocations), and DNS runs on the one runtime thread, which must not wait
    /// with them.
    fn handle(&self, request: Request) -> BoxFuture<Response> {
        let guard = Arc::clone(&self.0);
        let approvals = self.1.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || match request {
                Request::Pending => Response {
                    ok: true,
                    pending: approvals.as_ref().map(|a| a.list()).unwrap_or_default(),
                    ..Default::default()
                },
                Request::Decide { id, allow, by, how } => {
                    decide(&guard, approvals.as_deref(), id, allow, &by, &how)
                }
                Request::Allow { patterns } => guard.allow_patterns(patterns),
                Request::Deny { patterns } => guard.deny_patterns(patterns),
                Request::Status => guard.status(),
                Request::ProxySecrets(secrets) => guard.proxy_secrets(secrets),
                Request::AllowHttp { rules } => guard.http_rules(&rules, true),
                Request::DenyHttp { rules } => guard.http_rules(&rules, false),
            })
            .await
            .unwrap_or_else(|e| Response::error(format!("the request failed: {e}")))
        })
    }
}

/// Answer held question `id`: an allow puts its name in the allowlist first (as `yolo allow`
/// does, in the same `firewall` record), or a held request's rule in its host's rules (as
/// `yolo allow --http`), so the held lookups or requests, decided again, go through.
fn decide<B: Batches>(
    guard: &Guard<B>,
    approvals: Option<&crate::ask::Approvals>,
    id: u64,
    allow: bool,
    by: &str,
    how: &str,
) -> Response {
    let Some(approvals) = approvals else {
        return Response::error(
            "this session does not hold questions (start it with `--ask` or `[firewall] on_refused = \"ask\"`)",
        );
    };
    let gone = || {
        Response::error(format!(
            "no question {id} is waiting (answered, or refused when its time ran out); `yolo approvals` lists those that are"
        ))
    };
    // Off the list first: it cannot time out between the allowlist's change and the answer.
    let Some(taken) = approvals.take(id) else {
        return gone();
    };
    if allow {
        let name = taken.name().to_string();
        let allowed = match taken.what() {
            // The rule that lets exactly the held request through, added as `yolo allow
            // --http` adds it (checked when asked: `ask::http_question`).
            "http" => guard.http_rules(std::slice::from_ref(&name), true),
            // Checked again here: only a plain host name becomes an exact entry.
            _ if yolo_protocol::allowlist::plain_host_name(&name) => {
                guard.allow_patterns(vec![name])
            }
            _ => Response::error(format!("{name:?} is not a plain host name")),
        };
        if !allowed.ok {
            approvals.answer(taken, false, by, "");
            return allowed;
        }
    }
    Response {
        ok: true,
        pending: vec![approvals.answer(taken, allow, by, how)],
        patterns: Some(guard.patterns()),
        ..Default::default()
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

    pub(crate) fn deny_patterns(&self, patterns: Vec<String>) -> Response {
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
    fn revoke(&self) -> Result<revoke::Revocation, Error> {
        let names = self.resolved.names_by_address();
        // Names forgotten under a flood before they expired (`dns::names::SWEEP_AT`): an
        // address no remembered name accounts for may be a denied name's, so it is closed too
        // (the next lookup of a name still allowed opens it again).
        let evicted = self.resolved.evicted();
        let (elements, _) = sets::summarize(&sets::list_table_value()?);
        let listed: Vec<revoke::Listed> =
            elements.iter().filter_map(revoke::Listed::parse).collect();
        let revocation = revoke::revocations(&listed, |addr| {
            let Some(names) = names.get(addr) else {
                return evicted.then_some(None);
            };
            Some(
                names
                    .iter()
                    .filter_map(|name| self.decide(name)?.ports)
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
        // The proxy refuses a denied inspected name's connections from now on (also to an
        // address answered before the deny), and an address no inspected name holds any more
        // leaves the inspected sets: a non-inspected name sharing it is no longer sent to the
        // proxy.
        let released = self.inspected.forget(|name| self.decide(name).is_none());
        if !released.is_empty() {
            sets::apply(&ruleset::remove_inspected(&released))?;
        }
        self.resolved.unpush(&revocation.addresses());
        Ok(revocation)
    }

    /// Static networks live in their own sets: when `changed` names one, refill them.
    fn refresh_networks(&self, changed: &[String]) -> Result<(), Error> {
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

    /// The session's secrets for the proxy: kept in memory, in place of the earlier ones.
    fn proxy_secrets(&self, secrets: yolo_protocol::control::ProxySecrets) -> Response {
        let Some(proxy) = &self.proxy else {
            return Response::error(
                "this guard runs no HTTP proxy (its config inspects no host): nothing to take the secrets",
            );
        };
        let names: Vec<String> = secrets.credentials.iter().map(|(n, _)| n.clone()).collect();
        match proxy.arm(secrets) {
            Ok(()) => {
                self.events.emit(crate::audit::events::guard_event(
                    "proxy_secrets",
                    [("credentials", names.into())],
                ));
                Response {
                    ok: true,
                    ..Default::default()
                }
            }
            Err(e) => Response::error(format!("the proxy's secrets are refused: {e}")),
        }
    }

    /// `yolo allow --http` / `deny --http`: each `HOST METHOD /path` added to (or taken from)
    /// the proxy's rules of that host; the first that cannot be, an error naming it (those
    /// before it are applied).
    fn http_rules(&self, rules: &[String], add: bool) -> Response {
        let Some(proxy) = &self.proxy else {
            return Response::error(
                "this session inspects no HTTP host: give the host rules in your config ([http.\"HOST\"] allow = [...]) and start a new session",
            );
        };
        for text in rules {
            let (host, rule) = match yolo_protocol::http::parse_host_rule(text) {
                Ok(parsed) => parsed,
                Err(e) => return Response::error(e),
            };
            match proxy.change_rule(&host, &rule, add) {
                Ok(section) => self.events.emit(crate::audit::events::guard_event(
                    if add { "http_allow" } else { "http_deny" },
                    [("host", section.into()), ("rule", rule.to_string().into())],
                )),
                Err(e) => return Response::error(e),
            }
        }
        Response {
            ok: true,
            ..Default::default()
        }
    }

    fn status(&self) -> Response {
        let (elements, counters) = match sets::list_table_value() {
            Ok(listing) => sets::summarize(&listing),
            Err(e) => return Response::error(e.to_string()),
        };
        Response {
            ok: true,
            mode: Some(self.mode),
            patterns: Some(self.patterns()),
            elements,
            counters,
            proxy_armed: self.proxy.as_ref().map(|p| p.is_armed()),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::events::Events;
    use crate::dns::names::Resolved;
    use crate::firewall::batches::Ruleset;
    use crate::firewall::sets::dynamic_elements;
    use crate::testing::{firewall_config, in_netns};
    use std::net::IpAddr;
    use std::sync::RwLock;
    use std::time::Instant;
    use yolo_protocol::allowlist::Ports;
    use yolo_protocol::NetworkMode;

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
                proxy: None,
                inspected: Arc::default(),
            };
            let until = Instant::now() + std::time::Duration::from_secs(300);
            let svc: IpAddr = "198.51.100.7".parse().unwrap();
            let wide: IpAddr = "198.51.100.8".parse().unwrap();
            guard.resolved.record("svc.test", &[svc], until);
            guard.resolved.record("x.wide.test", &[wide], until);
            sets::apply(&Ruleset.add_addresses(&[(svc, guard.ports("svc.test").unwrap())], 300))?;
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
}
