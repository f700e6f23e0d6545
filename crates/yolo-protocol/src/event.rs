//! The event schema, documented in docs/audit-log.md. Keep the two in step.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Event {
    pub ts: DateTime<Utc>,
    pub session: String,
    /// `build` for what the guard saw while an image build's RUN steps shared its network
    /// namespace; absent for the agent's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(flatten)]
    pub kind: EventKind,
}

impl Event {
    /// An event of `session` stamped now.
    pub fn now(session: &str, kind: EventKind) -> Event {
        Event {
            ts: Utc::now(),
            session: session.to_string(),
            phase: None,
            kind,
        }
    }

    /// The event stamped with the phase it happened in (see `GuardConfig::phase`).
    pub fn in_phase(mut self, phase: Option<&str>) -> Event {
        self.phase = phase.map(str::to_string);
        self
    }

    /// The event as one JSON line, newline included: what every writer appends with a single
    /// `write` so concurrent writers never tear each other's lines.
    pub fn to_line(&self) -> Vec<u8> {
        // An Event is strings, numbers and JSON values: serializing it cannot fail.
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        line
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    SessionStart {
        workspace: String,
        config_file: String,
        config_hash: String,
        image: String,
        container: String,
        limits: serde_json::Value,
        grants: Vec<String>,
        #[serde(default)]
        network: String,
        #[serde(default)]
        allowlist: Vec<String>,
    },
    SessionStop {
        reason: String,
    },
    /// A command yolo ran in the container or on the host.
    Command {
        /// hook, exec, shell, agent, host, setup
        source: String,
        name: String,
        argv: Vec<String>,
        user: String,
        cwd: String,
        started: DateTime<Utc>,
        exit_code: Option<i64>,
        duration_ms: u64,
    },
    /// A DNS query the guard answered.
    Dns {
        name: String,
        qtype: String,
        /// allowed, refused, malformed, error
        decision: String,
        #[serde(default)]
        answers: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rcode: Option<String>,
    },
    /// A packet the firewall dropped.
    Blocked {
        proto: String,
        dst: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
        /// The name that last resolved to `dst`, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// A connection to a destination outside the allowlist that `--network open` let through.
    Connection {
        proto: String,
        dst: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// The allowlist of a running session changed (`yolo allow` / `yolo deny`).
    Firewall {
        action: String,
        patterns: Vec<String>,
    },
    /// The guard's own life: started (with ruleset verification time), stopped, errors.
    Guard {
        status: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        details: BTreeMap<String, serde_json::Value>,
    },
    /// Something yolo wants on record that fits no other kind (warnings, refusals).
    Notice {
        message: String,
    },
}

impl EventKind {
    /// Every `kind` tag, in schema order: what `yolo audit --kind` accepts.
    pub const NAMES: &'static [&'static str] = &[
        "session_start",
        "session_stop",
        "command",
        "dns",
        "blocked",
        "connection",
        "firewall",
        "guard",
        "notice",
    ];

    /// The `kind` tag, for filtering.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::SessionStart { .. } => "session_start",
            EventKind::SessionStop { .. } => "session_stop",
            EventKind::Command { .. } => "command",
            EventKind::Dns { .. } => "dns",
            EventKind::Blocked { .. } => "blocked",
            EventKind::Connection { .. } => "connection",
            EventKind::Firewall { .. } => "firewall",
            EventKind::Guard { .. } => "guard",
            EventKind::Notice { .. } => "notice",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One event of every kind; `name()`'s exhaustive match makes a new kind fail to compile
    /// until it has a tag, and this test fails until the tag is in `NAMES`.
    fn one_of_each() -> Vec<EventKind> {
        let s = String::new;
        vec![
            EventKind::SessionStart {
                workspace: s(),
                config_file: s(),
                config_hash: s(),
                image: s(),
                container: s(),
                limits: serde_json::Value::Null,
                grants: vec![],
                network: s(),
                allowlist: vec![],
            },
            EventKind::SessionStop { reason: s() },
            EventKind::Command {
                source: s(),
                name: s(),
                argv: vec![],
                user: s(),
                cwd: s(),
                started: Utc::now(),
                exit_code: None,
                duration_ms: 0,
            },
            EventKind::Dns {
                name: s(),
                qtype: s(),
                decision: s(),
                answers: vec![],
                rcode: None,
            },
            EventKind::Blocked {
                proto: s(),
                dst: s(),
                port: None,
                name: None,
            },
            EventKind::Connection {
                proto: s(),
                dst: s(),
                port: None,
                name: None,
            },
            EventKind::Firewall {
                action: s(),
                patterns: vec![],
            },
            EventKind::Guard {
                status: s(),
                details: BTreeMap::new(),
            },
            EventKind::Notice { message: s() },
        ]
    }

    #[test]
    fn names_are_every_kind_tag_as_serialized() {
        let tags: Vec<String> = one_of_each()
            .iter()
            .map(|kind| {
                let json = serde_json::to_value(kind).unwrap();
                assert_eq!(json["kind"], kind.name());
                kind.name().to_string()
            })
            .collect();
        assert_eq!(tags, EventKind::NAMES);
    }
}
