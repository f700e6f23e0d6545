//! What `yolo watch` shows, built from a session's events as they come: counts, the latest
//! programs, the files changed (sensitive ones kept apart, shown first), and the network and
//! HTTP decisions (refusals kept apart, shown first). Pure: events in, rows out.

use crate::audit::{Event, EventKind};
use std::collections::VecDeque;

/// Rows kept per list (the newest).
const KEEP: usize = 500;

/// One line of a list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub(crate) time: String,
    pub(crate) text: String,
    /// A refusal, a failure or a sensitive path: shown in the warning colour.
    pub(crate) warn: bool,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Counts {
    pub(crate) programs: u64,
    pub(crate) programs_failed: u64,
    pub(crate) files: u64,
    pub(crate) sensitive: u64,
    pub(crate) lookups: u64,
    pub(crate) lookups_refused: u64,
    pub(crate) blocked: u64,
    pub(crate) http: u64,
    pub(crate) http_refused: u64,
    pub(crate) questions: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Model {
    pub(crate) session: String,
    pub(crate) network: String,
    pub(crate) ended: bool,
    pub(crate) counts: Counts,
    pub(crate) programs: VecDeque<Row>,
    pub(crate) sensitive_files: VecDeque<Row>,
    pub(crate) files: VecDeque<Row>,
    pub(crate) refusals: VecDeque<Row>,
    pub(crate) network_log: VecDeque<Row>,
}

fn push(list: &mut VecDeque<Row>, row: Row) {
    list.push_front(row);
    list.truncate(KEEP);
}

impl Model {
    pub(crate) fn new(session: &str) -> Model {
        Model {
            session: session.to_string(),
            ..Default::default()
        }
    }

    /// Take one event in.
    pub(crate) fn apply(&mut self, event: &Event) {
        let time = event
            .ts
            .with_timezone(&chrono::Local)
            .format("%H:%M:%S")
            .to_string();
        let row = |text: String, warn: bool| Row {
            time: time.clone(),
            text: crate::visible::escape_controls(&text),
            warn,
        };
        let count = |c: &Option<u64>| c.unwrap_or(1);
        match &event.kind {
            EventKind::SessionStart { network, .. } => {
                self.network = network.clone();
                self.ended = false;
            }
            EventKind::SessionStop { .. } => self.ended = true,
            EventKind::Exec {
                argv, result, path, ..
            } => {
                self.counts.programs += 1;
                let failed = result != "ok";
                if failed {
                    self.counts.programs_failed += 1;
                }
                let shown = if argv.is_empty() {
                    path.clone()
                } else {
                    crate::audit::line::shell_words(argv)
                };
                let text = if failed {
                    format!("{shown}  ({result})")
                } else {
                    shown
                };
                push(&mut self.programs, row(text, failed));
            }
            EventKind::Command { source, name, .. } => {
                push(&mut self.programs, row(format!("[{source}] {name}"), false));
            }
            EventKind::File {
                path,
                change,
                sensitive,
                count: n,
                ..
            } => {
                self.counts.files += count(n);
                let text = match n {
                    Some(n) if *n > 1 => format!("{change} {path} ({n} changes)"),
                    _ => format!("{change} {path}"),
                };
                if *sensitive {
                    self.counts.sensitive += 1;
                    push(&mut self.sensitive_files, row(text, true));
                } else {
                    push(&mut self.files, row(text, false));
                }
            }
            EventKind::WatchedFile { path, change, .. } => {
                self.counts.sensitive += 1;
                push(
                    &mut self.sensitive_files,
                    row(format!("{change} {path} (the host runs it)"), true),
                );
            }
            EventKind::Dns {
                name,
                decision,
                count: n,
                ..
            } => {
                self.counts.lookups += count(n);
                if decision == "allowed" {
                    push(&mut self.network_log, row(format!("dns {name}"), false));
                } else {
                    self.counts.lookups_refused += count(n);
                    push(
                        &mut self.refusals,
                        row(format!("dns {name} {decision}"), true),
                    );
                }
            }
            EventKind::Blocked {
                proto,
                dst,
                port,
                name,
                count: n,
                ..
            }
            | EventKind::Connection {
                proto,
                dst,
                port,
                name,
                count: n,
                ..
            } => {
                let blocked = matches!(event.kind, EventKind::Blocked { .. });
                let to = crate::audit::line::destination(proto, dst, *port, name);
                if blocked {
                    self.counts.blocked += count(n);
                    push(&mut self.refusals, row(format!("blocked {to}"), true));
                } else {
                    push(
                        &mut self.network_log,
                        row(format!("connection {to}"), false),
                    );
                }
            }
            EventKind::Http {
                method,
                host,
                path,
                status,
                refused,
                count: n,
                ..
            } => {
                self.counts.http += count(n);
                let text = format!("{method} {host}{path} -> {status}");
                if *refused {
                    self.counts.http_refused += count(n);
                    push(
                        &mut self.refusals,
                        row(format!("http {text} refused"), true),
                    );
                } else {
                    push(&mut self.network_log, row(format!("http {text}"), false));
                }
            }
            EventKind::CredentialMisuse {
                credential,
                host,
                method,
                path,
            } => push(
                &mut self.refusals,
                row(
                    format!("credential {credential} sent to {method} {host}{path}"),
                    true,
                ),
            ),
            EventKind::Approval { name, decision, .. } => {
                if decision == "asked" {
                    self.counts.questions += 1;
                }
                push(
                    &mut self.network_log,
                    row(
                        format!("question: dns {name} {decision}"),
                        decision != "allowed",
                    ),
                );
            }
            _ => {}
        }
    }

    /// The header's counts, in one line (80 columns up to four-digit counts): the refusals, not
    /// every lookup.
    pub(crate) fn counts_line(&self) -> String {
        let c = &self.counts;
        format!(
            "programs {} ({} failed)  files {} ({} sensitive)  refused: dns {} blocked {} http {}",
            c.programs,
            c.programs_failed,
            c.files,
            c.sensitive,
            c.lookups_refused,
            c.blocked,
            c.http_refused
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(fields: serde_json::Value) -> Event {
        let mut line = json!({"ts": "2026-11-28T01:02:03Z", "session": "s"});
        line.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        serde_json::from_value(line).unwrap()
    }

    #[test]
    fn refusals_and_sensitive_files_are_kept_apart_and_counted() {
        let mut m = Model::new("s");
        for e in [
            json!({"kind": "session_start", "workspace": "/w", "config_file": "", "config_hash": "",
                   "image": "", "container": "", "limits": null, "grants": [], "network": "firewall"}),
            json!({"kind": "dns", "name": "ok.test", "qtype": "A", "decision": "allowed"}),
            json!({"kind": "dns", "name": "evil.test", "qtype": "A", "decision": "refused", "count": 3}),
            json!({"kind": "blocked", "proto": "tcp", "dst": "192.0.2.1", "port": 443}),
            json!({"kind": "file", "path": "src/a.rs", "change": "modified", "sensitive": false}),
            json!({"kind": "file", "path": ".git/hooks/pre-commit", "change": "created", "sensitive": true}),
            json!({"kind": "exec", "id": 1, "pid": 2, "ppid": 1, "uid": 0, "gid": 0, "path": "/bin/ls",
                   "argv": ["ls", "\u{1b}[2J"], "cwd": "/w", "result": "ok"}),
            json!({"kind": "exec", "id": 2, "pid": 3, "ppid": 1, "uid": 0, "gid": 0, "path": "/nope",
                   "argv": ["/nope"], "cwd": "/w", "result": "ENOENT"}),
            json!({"kind": "http", "method": "POST", "host": "api.test", "path": "/x", "status": 403,
                   "bytes_up": 0, "bytes_down": 0, "duration_ms": 1, "rule": "", "refused": true}),
            json!({"kind": "session_stop", "reason": "down"}),
        ] {
            m.apply(&event(e));
        }
        assert_eq!(m.network, "firewall");
        assert!(m.ended);
        assert_eq!(m.counts.lookups, 4);
        assert_eq!(m.counts.lookups_refused, 3);
        assert_eq!(m.counts.blocked, 1);
        assert_eq!(m.counts.programs_failed, 1);
        assert_eq!(m.refusals.len(), 3);
        assert_eq!(m.refusals[0].text, "http POST api.test/x -> 403 refused");
        assert_eq!(m.refusals[1].text, "blocked tcp 192.0.2.1:443");
        assert_eq!(m.sensitive_files[0].text, "created .git/hooks/pre-commit");
        assert_eq!(m.files.len(), 1);
        // The agent's escape sequences are shown, not sent to the terminal.
        assert!(
            !m.programs[1].text.contains('\u{1b}'),
            "{:?}",
            m.programs[1]
        );
        assert_eq!(
            m.counts_line(),
            "programs 2 (1 failed)  files 2 (1 sensitive)  refused: dns 3 blocked 1 http 1"
        );
    }
}
