//! A running session's firewall as `yolo allow`, `deny` and `firewall` reach it: requests to
//! its guard over the control protocol (`Engine::control`), the host's record of who asked,
//! the `--json` view, and what a deny could not take away.

use crate::audit::EventKind;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::firewall::allowlist::{Allowlist, Pattern, Ports};
use crate::firewall::control::{Request, Response};
use crate::output;
use crate::project::Located;
use crate::session::{Hold, Session};

/// Ask the workspace's running guard, and record on the host that the user asked.
pub(crate) async fn request(located: &Located, request: &Request) -> Result<Response> {
    let engine = Engine::connect().await?;
    let guard = running_guard(&engine, located).await?;
    let response = engine.control(&guard, request).await?;
    record(located, request).await;
    Ok(response)
}

/// `yolo firewall --json`: the running guard's allowlist, open addresses and counters, with
/// the agent container and the session.
pub(crate) async fn view(located: &Located) -> Result<output::Firewall> {
    let engine = Engine::connect().await?;
    let guard = running_guard(&engine, located).await?;
    let response = engine.control(&guard, &Request::Status).await?;
    let state = Session::at(located.clone(), Hold::Read).await?.state;
    let agent = engine.find(&located.owner()).await?.agent;
    let container = agent.map(|c| state.container_view(&c));
    Ok(output::Firewall::from_response(
        container,
        state.session,
        response,
    ))
}

/// What a `yolo deny` of `patterns` left open, in words for the user: the entries open on
/// every port, whose ports cannot be taken one by one (each with what to run instead); and
/// the names another entry still lets through.
#[derive(Debug, Default)]
pub(crate) struct LeftOpen {
    pub(crate) every_port: Vec<String>,
    pub(crate) by_another_entry: Vec<String>,
}

/// What the deny of `patterns`, answered by `response`, left open.
pub(crate) fn left_open(patterns: &[String], response: &Response) -> LeftOpen {
    let remaining =
        Allowlist::parse(response.patterns.as_deref().unwrap_or_default()).unwrap_or_default();
    // Ports asked of an entry open on every port: the grammar lists the ports an entry opens,
    // never the ones it closes, so that entry stays as it is.
    let every_port = patterns
        .iter()
        .filter_map(|p| match p.parse::<Pattern>().ok()?.ports() {
            Ports::Any => None,
            Ports::Only(closing) => remaining
                .open_on_every_port(p)
                .map(|entry| kept_on_every_port(&entry, closing)),
        })
        .collect();
    let by_another_entry = patterns
        .iter()
        .filter(|p| remaining.open_on_every_port(p).is_none())
        .filter_map(|p| still_allowed(&remaining, p))
        .collect();
    LeftOpen {
        every_port,
        by_another_entry,
    }
}

/// Why `yolo deny NAME:PORTS` left NAME's entry open on every port, and what to run instead.
fn kept_on_every_port(entry: &str, closing: &[u16]) -> String {
    let which = match closing {
        [port] => format!("port {port}"),
        ports => format!("ports {}", join(ports)),
    };
    let example: Vec<u16> = [80, 443, 8080, 8443]
        .into_iter()
        .filter(|p| !closing.contains(p))
        .take(2)
        .collect();
    format!(
        "{entry} is allowed on every port, so {which} cannot be taken away on its own: run \
         `yolo deny {entry}`, then `yolo allow {entry}:PORTS` with the ports you want, e.g. \
         `yolo allow {entry}:{}`",
        join(&example)
    )
}

/// A denied name that another entry (a wildcard, say) still lets through on the denied ports.
fn still_allowed(remaining: &Allowlist, denied: &str) -> Option<String> {
    let Ok(Pattern::Exact { name, ports }) = denied.parse::<Pattern>() else {
        return None;
    };
    let open = match (remaining.lookup(&name)?, &ports) {
        (Ports::Any, _) => "every port".to_string(),
        (Ports::Only(left), Ports::Any) => format!("port {}", join(&left)),
        (Ports::Only(left), Ports::Only(closed)) => {
            let still: Vec<u16> = left.into_iter().filter(|p| closed.contains(p)).collect();
            if still.is_empty() {
                return None;
            }
            format!("port {}", join(&still))
        }
    };
    Some(format!(
        "{name} is still allowed on {open} by another entry; `yolo firewall` lists them"
    ))
}

fn join(ports: &[u16]) -> String {
    ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The host's own record of who asked (the guard records what it did).
async fn record(located: &Located, request: &Request) {
    let (action, patterns) = match request {
        Request::Allow { patterns } => ("allow requested", patterns.clone()),
        Request::Deny { patterns } => ("deny requested", patterns.clone()),
        Request::AllowHttp { rules } => ("allow --http requested", rules.clone()),
        Request::DenyHttp { rules } => ("deny --http requested", rules.clone()),
        Request::Status | Request::ProxySecrets(_) | Request::Pending | Request::Decide { .. } => {
            return
        }
    };
    let session = Session::at(located.clone(), Hold::Read).await;
    let Ok(Ok(Some(writer))) = session.map(|s| s.record()) else {
        return;
    };
    let _ = writer.write(EventKind::Firewall {
        action: action.into(),
        patterns,
    });
}

pub(crate) async fn running_guard(engine: &Engine, located: &Located) -> Result<String> {
    let found = engine.find(&located.owner()).await?;
    match found.guard {
        Some(g) if g.running => Ok(g.id),
        _ => Err(Error::NotRunning(format!(
            "no running firewall for {}; start the session with `yolo up` (with --network none or no session there is no allowlist to change)",
            located.workspace.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Allowlist {
        Allowlist::parse(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn a_port_of_an_entry_open_on_every_port_says_what_to_run() {
        assert_eq!(
            kept_on_every_port("example.test", &[8080]),
            "example.test is allowed on every port, so port 8080 cannot be taken away on its own: \
             run `yolo deny example.test`, then `yolo allow example.test:PORTS` with the ports you \
             want, e.g. `yolo allow example.test:80,443`"
        );
        // The example never offers a port being denied.
        assert!(kept_on_every_port("*.example.test", &[80, 443])
            .contains("so ports 80,443 cannot be taken away on its own: run `yolo deny *.example.test`, then `yolo allow *.example.test:PORTS` with the ports you want, e.g. `yolo allow *.example.test:8080,8443`"));
    }

    #[test]
    fn a_deny_another_entry_undoes_is_pointed_out() {
        let remaining = list(&["api.example.com:80", "*.example.com:443"]);
        assert_eq!(
            still_allowed(&remaining, "api.example.com:443").as_deref(),
            Some("api.example.com is still allowed on port 443 by another entry; `yolo firewall` lists them")
        );
        assert_eq!(still_allowed(&remaining, "api.example.com:8080"), None);
        assert!(
            still_allowed(&remaining, "www.example.com").is_some_and(|w| w.contains("on port 443"))
        );
        assert!(still_allowed(&list(&["*.example.com"]), "a.example.com:22")
            .is_some_and(|w| w.contains("on every port")));
        assert_eq!(still_allowed(&remaining, "other.com"), None);
        assert_eq!(still_allowed(&remaining, "*.example.com"), None);
    }
}
