//! Events as OCSF 1.3 records (<https://schema.ocsf.io>), one JSON object each: the classes a
//! security team's tools index, with yolo's own record kept whole in `unmapped`.
//!
//! | yolo kind | OCSF class | activity |
//! |---|---|---|
//! | `exec`, `command` | Process Activity (1007) | Launch (1) |
//! | `exec_exit` | Process Activity (1007) | Terminate (2) |
//! | `file`, `watched_file` | File System Activity (1001) | Create 1, Update 3, Delete 4, Rename 5 |
//! | `connection`, `blocked` | Network Activity (4001) | Open (1), Refuse (5) |
//! | `dns` | DNS Activity (4003) | Traffic (6): the query and the guard's answer |
//! | `http`, `credential_misuse` | HTTP Activity (4002) | by method (Get 3, Post 6...) |
//! | everything else | Base Event (0) | Other (99) |
//!
//! Written by hand: no maintained Rust crate carries the OCSF schema's types; the records are
//! plain JSON objects of the documented attributes.

use super::Context;
use crate::audit::{Event, EventKind};
use serde_json::{json, Map, Value};

/// The OCSF schema version the records follow.
pub(crate) const OCSF_VERSION: &str = "1.3.0";

/// The OCSF record of `event`.
pub(crate) fn record(context: &Context, event: &Event) -> Value {
    let raw = raw_fields(event);
    let kind = raw["kind"].as_str().unwrap_or_default().to_string();
    let (class_uid, category_uid, activity_id, mut fields) = classify(&event.kind);
    let mut out = Map::new();
    out.insert("time".into(), json!(event.ts.timestamp_millis()));
    out.insert("class_uid".into(), json!(class_uid));
    out.insert("category_uid".into(), json!(category_uid));
    out.insert("activity_id".into(), json!(activity_id));
    out.insert(
        "type_uid".into(),
        json!(i64::from(class_uid) * 100 + i64::from(activity_id)),
    );
    let denied = is_denied(&event.kind);
    out.insert("severity_id".into(), json!(if denied { 3 } else { 1 }));
    out.insert("message".into(), json!(crate::audit::line::describe(event)));
    out.insert(
        "metadata".into(),
        json!({
            "version": OCSF_VERSION,
            "product": {"name": "yolo", "vendor_name": "yolo", "version": env!("CARGO_PKG_VERSION")},
            "log_name": kind,
            "event_code": kind,
        }),
    );
    out.insert(
        "actor".into(),
        json!({"session": {"uid": event.session}, "app_name": "yolo"}),
    );
    out.insert(
        "device".into(),
        json!({"type_id": 6, "name": context.workspace}),
    );
    if let Some(phase) = &event.phase {
        out.insert(
            "observables".into(),
            json!([{"name": "phase", "type_id": 0, "value": phase}]),
        );
    }
    out.append(&mut fields);
    out.insert("unmapped".into(), raw);
    Value::Object(out)
}

/// yolo's record as it is in the log, without the fields every OCSF record has its own of.
fn raw_fields(event: &Event) -> Value {
    let mut raw = serde_json::to_value(event).unwrap_or(Value::Null);
    if let Some(map) = raw.as_object_mut() {
        map.remove("ts");
        map.remove("session");
    }
    raw
}

/// A refusal (`export::is_refusal`), or an exec the supervisor refused: shown with a higher
/// severity.
fn is_denied(kind: &EventKind) -> bool {
    super::is_refusal(kind) || matches!(kind, EventKind::Exec { result, .. } if result == "refused")
}

/// Class, category, activity and the class's own attributes.
fn classify(kind: &EventKind) -> (u32, u32, u32, Map<String, Value>) {
    let mut f = Map::new();
    let (class, category, activity) = match kind {
        EventKind::Exec {
            pid,
            ppid,
            uid,
            path,
            exe,
            argv,
            cwd,
            result,
            sha256,
            ..
        } => {
            let mut file = json!({"path": exe.as_deref().unwrap_or(path), "type_id": 1});
            if let Some(hash) = sha256 {
                file["hashes"] =
                    json!([{"algorithm_id": 3, "algorithm": "SHA-256", "value": hash}]);
            }
            f.insert(
                "process".into(),
                json!({
                    "pid": pid,
                    "cmd_line": crate::audit::line::shell_words(argv),
                    "file": file,
                    "working_directory": cwd,
                    "user": {"uid": uid.to_string()},
                    "parent_process": {"pid": ppid},
                }),
            );
            status(&mut f, result == "ok", result);
            (1007, 1, 1)
        }
        EventKind::Command {
            source,
            name,
            argv,
            user,
            cwd,
            exit_code,
            ..
        } => {
            f.insert(
                "process".into(),
                json!({
                    "name": format!("{source} {name}"),
                    "cmd_line": crate::audit::line::shell_words(argv),
                    "working_directory": cwd,
                    "user": {"name": user},
                }),
            );
            if let Some(code) = exit_code {
                f.insert("exit_code".into(), json!(code));
                status(&mut f, *code == 0, &format!("exit {code}"));
            }
            (1007, 1, 1)
        }
        EventKind::ExecExit {
            pid,
            exit_code,
            signal,
            ..
        } => {
            f.insert("process".into(), json!({"pid": pid}));
            f.insert("exit_code".into(), json!(exit_code));
            if let Some(signal) = signal {
                f.insert("status_detail".into(), json!(signal));
            }
            (1007, 1, 2)
        }
        EventKind::File {
            path,
            change,
            from,
            size,
            count,
            ..
        } => {
            let mut file =
                json!({"path": path, "type_id": if path.ends_with('/') { 2 } else { 1 }});
            if let Some(size) = size {
                file["size"] = json!(size);
            }
            f.insert("file".into(), file);
            if let Some(from) = from {
                f.insert("file_result".into(), json!({"path": path}));
                f.insert("file".into(), json!({"path": from, "type_id": 1}));
            }
            if let Some(count) = count {
                f.insert("count".into(), json!(count));
            }
            (1001, 1, file_activity(change))
        }
        EventKind::WatchedFile {
            path,
            change,
            sha256_after,
            ..
        } => {
            let mut file = json!({"path": path, "type_id": 1});
            if let Some(hash) = sha256_after {
                file["hashes"] =
                    json!([{"algorithm_id": 3, "algorithm": "SHA-256", "value": hash}]);
            }
            f.insert("file".into(), file);
            (1001, 1, file_activity(change))
        }
        EventKind::Connection {
            proto,
            dst,
            port,
            name,
            count,
            ..
        }
        | EventKind::Blocked {
            proto,
            dst,
            port,
            name,
            count,
            ..
        } => {
            let allowed = matches!(kind, EventKind::Connection { .. });
            endpoint(&mut f, proto, dst, *port, name.as_deref(), *count);
            disposition(&mut f, allowed);
            // Open (1), or Refuse (5).
            (4001, 4, if allowed { 1 } else { 5 })
        }
        EventKind::Dns {
            name,
            qtype,
            decision,
            answers,
            rcode,
            count,
            ..
        } => {
            f.insert("query".into(), json!({"hostname": name, "type": qtype}));
            f.insert(
                "answers".into(),
                Value::Array(answers.iter().map(|a| json!({"rdata": a})).collect()),
            );
            if let Some(rcode) = rcode {
                f.insert("rcode".into(), json!(rcode));
            }
            if let Some(count) = count {
                f.insert("count".into(), json!(count));
            }
            disposition(&mut f, decision == "allowed");
            (4003, 4, 6)
        }
        EventKind::Http {
            method,
            host,
            path,
            status,
            bytes_up,
            bytes_down,
            refused,
            count,
            ..
        } => {
            http(&mut f, method, host, path);
            f.insert("http_response".into(), json!({"code": status}));
            f.insert(
                "traffic".into(),
                json!({"bytes_out": bytes_up, "bytes_in": bytes_down}),
            );
            if let Some(count) = count {
                f.insert("count".into(), json!(count));
            }
            disposition(&mut f, !refused);
            (4002, 4, http_activity(method))
        }
        EventKind::CredentialMisuse {
            host, method, path, ..
        } => {
            http(&mut f, method, host, path);
            disposition(&mut f, false);
            (4002, 4, http_activity(method))
        }
        _ => (0, 0, 99),
    };
    (class, category, activity, f)
}

fn status(f: &mut Map<String, Value>, ok: bool, detail: &str) {
    f.insert("status_id".into(), json!(if ok { 1 } else { 2 }));
    if !ok {
        f.insert("status_detail".into(), json!(detail));
    }
}

/// Allowed (1) or blocked (2), as action and disposition.
fn disposition(f: &mut Map<String, Value>, allowed: bool) {
    f.insert("action_id".into(), json!(if allowed { 1 } else { 2 }));
    f.insert("disposition_id".into(), json!(if allowed { 1 } else { 2 }));
}

fn endpoint(
    f: &mut Map<String, Value>,
    proto: &str,
    dst: &str,
    port: Option<u16>,
    name: Option<&str>,
    count: Option<u64>,
) {
    let mut dst_endpoint = json!({"ip": dst});
    if let Some(port) = port {
        dst_endpoint["port"] = json!(port);
    }
    if let Some(name) = name {
        dst_endpoint["hostname"] = json!(name);
    }
    f.insert("dst_endpoint".into(), dst_endpoint);
    f.insert("connection_info".into(), json!({"protocol_name": proto}));
    if let Some(count) = count {
        f.insert("count".into(), json!(count));
    }
}

fn http(f: &mut Map<String, Value>, method: &str, host: &str, path: &str) {
    f.insert(
        "http_request".into(),
        json!({
            "http_method": method,
            "url": {"hostname": host, "path": path, "scheme": "https", "url_string": format!("https://{host}{path}")},
        }),
    );
}

fn file_activity(change: &str) -> u32 {
    match change {
        "created" | "added" => 1,
        "modified" => 3,
        "deleted" | "removed" => 4,
        "renamed" => 5,
        _ => 99,
    }
}

fn http_activity(method: &str) -> u32 {
    match method.to_ascii_uppercase().as_str() {
        "CONNECT" => 1,
        "DELETE" => 2,
        "GET" => 3,
        "HEAD" => 4,
        "OPTIONS" => 5,
        "POST" => 6,
        "PUT" => 7,
        "TRACE" => 8,
        _ => 99,
    }
}
