//! The audit, shipped where a team keeps its logs: OCSF records (`ocsf`) and OpenTelemetry log
//! records (`otlp`), for one session after the fact (`yolo audit --format ocsf|otlp-json`) or
//! as the events happen (`ship`, started by `up` when the user config has `[audit]
//! otlp_endpoint` or `ocsf_file`). See docs/audit-log.md#shipping-the-audit.

pub(crate) mod ocsf;
pub(crate) mod otlp;
pub(crate) mod ship;

use crate::audit::{Event, EventKind};

/// Who the records are about: the resource of OTLP, the device of OCSF.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    pub(crate) workspace: String,
    pub(crate) session: String,
}

/// `yolo audit --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// yolo's own timeline (the default)
    Text,
    /// OCSF 1.3 records, one JSON object per line
    Ocsf,
    /// One OTLP ExportLogsServiceRequest in OTLP's JSON mapping
    OtlpJson,
}

/// The session's events in `format` (not `Text`), as printed: OCSF one record per line, OTLP
/// one request.
pub(crate) fn render(format: Format, context: &Context, events: &[Event]) -> String {
    match format {
        Format::Ocsf => events
            .iter()
            .map(|e| ocsf::record(context, e).to_string() + "\n")
            .collect(),
        Format::OtlpJson | Format::Text => {
            let request = otlp::request(context, events.iter().map(otlp::record).collect());
            serde_json::to_string(&request).unwrap_or_default() + "\n"
        }
    }
}

/// A refusal: a lookup refused, a packet blocked, an HTTP request refused, a credential
/// misused, a process outside the exec audit. OTLP's WARN severity, OCSF's higher one.
pub(crate) fn is_refusal(kind: &EventKind) -> bool {
    match kind {
        EventKind::Dns { decision, .. } => decision != "allowed",
        EventKind::Blocked { .. }
        | EventKind::CredentialMisuse { .. }
        | EventKind::Unsupervised { .. } => true,
        EventKind::Http { refused, .. } => *refused,
        _ => false,
    }
}

/// The workspace a session's log names (its `session_start`), for the records' context.
pub(crate) fn workspace_of(events: &[Event]) -> String {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::SessionStart { workspace, .. } => Some(workspace.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use serde_json::json;

    fn event(fields: serde_json::Value) -> Event {
        let mut line = json!({"ts": "2026-11-28T01:02:03.456Z", "session": "s1"});
        line.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        serde_json::from_value(line).unwrap()
    }

    fn context() -> Context {
        Context {
            workspace: "/home/me/repo".into(),
            session: "s1".into(),
        }
    }

    #[test]
    fn each_kind_lands_in_its_ocsf_class_and_activity() {
        let cases = [
            (
                json!({"kind": "http", "method": "POST", "host": "api.test", "path": "/x", "status": 403,
                       "bytes_up": 1, "bytes_down": 2, "duration_ms": 3, "rule": "", "refused": true}),
                4002,
                6,
            ),
            (
                json!({"kind": "file", "path": "b.txt", "change": "renamed", "from": "a.txt", "sensitive": false}),
                1001,
                5,
            ),
            (
                json!({"kind": "watched_file", "path": "Makefile", "change": "modified", "sha256_after": "ab"}),
                1001,
                3,
            ),
            (
                json!({"kind": "command", "source": "hook", "name": "postCreateCommand", "argv": ["make"],
                       "user": "dev", "cwd": "/w", "started": "2026-11-28T01:02:03Z", "exit_code": 2, "duration_ms": 5}),
                1007,
                1,
            ),
            (
                json!({"kind": "exec_exit", "id": 1, "pid": 7, "exit_code": 0, "duration_ms": 1}),
                1007,
                2,
            ),
            (
                json!({"kind": "connection", "proto": "tcp", "dst": "192.0.2.1", "port": 5432}),
                4001,
                1,
            ),
            (json!({"kind": "notice", "message": "hello"}), 0, 99),
        ];
        for (fields, class, activity) in cases {
            let record = ocsf::record(&context(), &event(fields.clone()));
            assert_eq!(record["class_uid"], class, "{record}");
            assert_eq!(record["activity_id"], activity, "{record}");
            assert_eq!(record["type_uid"], class * 100 + activity, "{record}");
            assert_eq!(record["time"], 1_795_827_723_456_i64, "{record}");
            assert_eq!(record["unmapped"]["kind"], fields["kind"], "{record}");
            assert_eq!(record["device"]["name"], "/home/me/repo");
        }
        let refused = ocsf::record(
            &context(),
            &event(
                json!({"kind": "http", "method": "POST", "host": "api.test", "path": "/x",
                          "status": 403, "bytes_up": 1, "bytes_down": 2, "duration_ms": 3,
                          "rule": "", "refused": true}),
            ),
        );
        assert_eq!(refused["disposition_id"], 2);
        assert_eq!(refused["severity_id"], 3);
        assert_eq!(
            refused["http_request"]["url"]["url_string"],
            "https://api.test/x"
        );
        let renamed = ocsf::record(
            &context(),
            &event(
                json!({"kind": "file", "path": "b.txt", "change": "renamed", "from": "a.txt", "sensitive": false}),
            ),
        );
        assert_eq!(renamed["file"]["path"], "a.txt");
        assert_eq!(renamed["file_result"]["path"], "b.txt");
    }

    #[test]
    fn otlp_json_is_read_back_by_otlps_own_definitions_with_typed_attributes() {
        let events = [
            event(
                json!({"kind": "dns", "name": "x.test", "qtype": "A", "decision": "refused",
                         "answers": ["192.0.2.1"], "count": 3}),
            ),
            event(
                json!({"kind": "exec", "id": 4, "pid": 9, "ppid": 1, "uid": 0, "gid": 0,
                         "path": "/bin/ls", "argv": ["ls", "-l"], "cwd": "/w", "result": "ok",
                         "loader_values": {"LD_PRELOAD": "/x.so"}}),
            ),
        ];
        let text = render(Format::OtlpJson, &context(), &events);
        let request: ExportLogsServiceRequest = serde_json::from_str(&text).expect(&text);
        let records = &request.resource_logs[0].scope_logs[0].log_records;
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].event_name, "yolo.dns");
        assert_eq!(records[0].severity_text, "WARN");
        assert_eq!(records[0].time_unix_nano, 1_795_827_723_456_000_000);
        let attr = |i: usize, key: &str| {
            records[i]
                .attributes
                .iter()
                .find(|a| a.key == key)
                .and_then(|a| a.value.clone())
                .and_then(|v| v.value)
        };
        assert_eq!(attr(0, "count"), Some(Any::IntValue(3)));
        assert!(matches!(attr(0, "answers"), Some(Any::ArrayValue(a)) if a.values.len() == 1));
        assert!(
            matches!(attr(1, "loader_values"), Some(Any::KvlistValue(kv)) if kv.values[0].key == "LD_PRELOAD")
        );
        assert_eq!(records[1].severity_text, "INFO");
        // The protobuf body a collector gets decodes to the same.
        let decoded: ExportLogsServiceRequest =
            prost::Message::decode(otlp::encode(&request).as_slice()).unwrap();
        assert_eq!(decoded, request);
        // OCSF: one line each.
        assert_eq!(render(Format::Ocsf, &context(), &events).lines().count(), 2);
    }
}
