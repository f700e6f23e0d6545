//! The proxy's records as audit events, through the guard's queue (folded under a flood like
//! the network events): each request an `http` event, a stand-in sent where it may not go a
//! `credential_misuse` event as well, and a connection refused before any HTTP (not
//! redirected, an address no inspected name has, an SNI the guard never answered with that
//! address, the session's secrets not there yet) a `blocked` event for its destination and a
//! `guard` event `proxy_refused` that says why.

use super::serve::{Exchange, Record, Refused};
use crate::audit::events::{guard_event, Events};
use yolo_protocol::event::EventKind;

impl Record for Events {
    fn exchange(&self, exchange: Exchange) {
        if let Some(credential) = &exchange.misuse {
            self.emit(EventKind::CredentialMisuse {
                credential: credential.clone(),
                host: exchange.host.clone(),
                method: exchange.method.clone(),
                path: exchange.path.clone(),
            });
        }
        self.emit(http_event(exchange));
    }

    fn refused(&self, refused: Refused) {
        self.emit(guard_event(
            "proxy_refused",
            [
                (
                    "dst",
                    refused
                        .destination
                        .map(|d| d.to_string())
                        .unwrap_or_default()
                        .into(),
                ),
                ("name", refused.name.clone().into()),
                ("reason", refused.reason.clone().into()),
            ],
        ));
        self.emit(EventKind::Blocked {
            proto: "tcp".into(),
            dst: refused
                .destination
                .map(|d| d.ip().to_string())
                .unwrap_or_default(),
            port: refused.destination.map(|d| d.port()),
            name: refused.name,
            sample_of: None,
            count: None,
            first: None,
            last: None,
        });
    }
}

pub(crate) fn http_event(exchange: Exchange) -> EventKind {
    EventKind::Http {
        method: exchange.method,
        host: exchange.host,
        path: exchange.path,
        status: exchange.status,
        bytes_up: exchange.bytes_up,
        bytes_down: exchange.bytes_down,
        duration_ms: exchange.duration_ms,
        rule: exchange.rule,
        credential: exchange.credential,
        refused: exchange.refused,
        count: None,
        first: None,
        last: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misused_stand_in_is_two_records_and_no_value_is_in_either() {
        let (events, rx) = Events::channel();
        events.exchange(Exchange {
            method: "POST".into(),
            host: "elsewhere.test".into(),
            path: "/v1/upload".into(),
            status: 403,
            bytes_up: 0,
            bytes_down: 40,
            duration_ms: 1,
            rule: "credential:anthropic".into(),
            credential: None,
            misuse: Some("anthropic".into()),
            refused: true,
        });
        let kinds: Vec<&str> = rx.try_iter().map(|k| k.name()).collect();
        assert_eq!(kinds, ["credential_misuse", "http"]);
    }
}
