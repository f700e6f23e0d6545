//! Events as OpenTelemetry log records (the logs signal, OTLP): one record per event, named
//! `yolo.<kind>` (`event_name`), its body the timeline's one-line text, every field of the
//! event an attribute of the same name (lists as arrays, objects as key-value lists). The
//! resource names yolo (`service.name`, `service.version`), the workspace (`yolo.workspace`) and
//! the session (`yolo.session`). The messages are OTLP's own (`opentelemetry-proto`): encoded
//! as protobuf for OTLP/HTTP (`encode`), or in OTLP's JSON mapping (`--format otlp-json`).

use super::Context;
use crate::audit::Event;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value, AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList,
};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use serde_json::Value;

/// OTLP severity numbers (`SeverityNumber`).
const INFO: i32 = 9;
const WARN: i32 = 13;

/// The export request for `records` of one session.
pub(crate) fn request(context: &Context, records: Vec<LogRecord>) -> ExportLogsServiceRequest {
    let attribute = |key: &str, value: &str| pair(key.into(), string(value));
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource {
                attributes: vec![
                    attribute("service.name", "yolo"),
                    attribute("service.version", env!("CARGO_PKG_VERSION")),
                    attribute("yolo.workspace", &context.workspace),
                    attribute("yolo.session", &context.session),
                ],
                ..Default::default()
            }),
            scope_logs: vec![ScopeLogs {
                scope: Some(InstrumentationScope {
                    name: "yolo.audit".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                log_records: records,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// The log record of `event`.
pub(crate) fn record(event: &Event) -> LogRecord {
    let raw = serde_json::to_value(event).unwrap_or(Value::Null);
    let kind = raw["kind"].as_str().unwrap_or_default().to_string();
    let attributes = raw
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| !matches!(key.as_str(), "ts" | "session"))
        .filter(|(_, value)| !value.is_null())
        .map(|(key, value)| pair(key.clone(), any(value)))
        .collect();
    let warn = super::is_refusal(&event.kind);
    let nanos =
        |t: chrono::DateTime<chrono::Utc>| t.timestamp_nanos_opt().unwrap_or(0).max(0) as u64;
    LogRecord {
        time_unix_nano: nanos(event.ts),
        observed_time_unix_nano: nanos(chrono::Utc::now()),
        severity_number: if warn { WARN } else { INFO },
        severity_text: if warn { "WARN" } else { "INFO" }.into(),
        body: Some(string(&crate::audit::line::describe(event))),
        attributes,
        event_name: format!("yolo.{kind}"),
        ..Default::default()
    }
}

fn pair(key: String, value: AnyValue) -> KeyValue {
    KeyValue {
        key,
        value: Some(value),
        ..Default::default()
    }
}

fn string(text: &str) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(text.to_string())),
    }
}

/// A JSON value as an OTLP value: numbers as integers where they are, objects as key-value
/// lists.
fn any(value: &Value) -> AnyValue {
    let value = match value {
        Value::Null => None,
        Value::Bool(b) => Some(any_value::Value::BoolValue(*b)),
        Value::Number(n) => Some(match n.as_i64() {
            Some(i) => any_value::Value::IntValue(i),
            None => any_value::Value::DoubleValue(n.as_f64().unwrap_or(0.0)),
        }),
        Value::String(s) => Some(any_value::Value::StringValue(s.clone())),
        Value::Array(items) => Some(any_value::Value::ArrayValue(ArrayValue {
            values: items.iter().map(any).collect(),
        })),
        Value::Object(map) => Some(any_value::Value::KvlistValue(KeyValueList {
            values: map.iter().map(|(k, v)| pair(k.clone(), any(v))).collect(),
        })),
    };
    AnyValue { value }
}

/// The request as OTLP/HTTP's protobuf body.
pub(crate) fn encode(request: &ExportLogsServiceRequest) -> Vec<u8> {
    prost::Message::encode_to_vec(request)
}
