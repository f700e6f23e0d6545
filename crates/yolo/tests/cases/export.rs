//! Shipping the audit (issue 27, item 5): `[audit] otlp_endpoint` and `ocsf_file` against a
//! real OTLP/HTTP receiver (tests/support/otlp.rs: the protocol's own protobuf definitions) and
//! a file, in a session that makes every kind of record (programs, a file change, DNS allowed
//! and refused, a blocked connection, HTTP requests allowed and refused through the guard's
//! proxy); `yolo audit --format ocsf|otlp-json` after the fact; a collector that never answers
//! costs no local record.

use crate::support::https::*;
use crate::support::net::*;
use crate::support::otlp::{Collector, Mode};
use crate::support::*;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use serde_json::Value;
use std::time::{Duration, Instant};

const API: &str = "api.allowed.test";

/// The session's id (`yolo audit --list`'s open one).
fn session_of(t: &Test) -> String {
    let list = t.yolo(&["audit", "--list"]).ok().stdout();
    list.lines()
        .find(|l| l.contains("(open)"))
        .and_then(|l| l.split_whitespace().next())
        .expect("an open session")
        .to_string()
}

/// Wait until the shipper says it is done (the session stopped); its `export.json`.
fn wait_done(t: &Test, session: &str, limit: Duration) -> Value {
    let path = t
        .data_dir
        .join("sessions")
        .join(session)
        .join("export.json");
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(text) = std::fs::read_to_string(&path) {
            let status: Value = serde_json::from_str(&text).unwrap();
            if status["done"] == true {
                return status;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the shipper did not finish: {}",
            std::fs::read_to_string(&path).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Every event of the session's files (what the local log holds).
fn local_events(t: &Test, session: &str) -> Vec<Value> {
    let dir = t.data_dir.clone();
    let files = [
        dir.join("sessions").join(format!("{session}.jsonl")),
        dir.join("network").join(format!("{session}.jsonl")),
        dir.join("network").join(format!("{session}.exec.jsonl")),
        dir.join("network").join(format!("{session}.files.jsonl")),
    ];
    files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|text| {
            text.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn attribute<'a>(record: &'a LogRecord, key: &str) -> Option<&'a Any> {
    record
        .attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn text(value: Option<&Any>) -> String {
    match value {
        Some(Any::StringValue(s)) => s.clone(),
        other => format!("{other:?}"),
    }
}

#[test]
fn the_collector_and_the_ocsf_file_see_every_kind_of_event() {
    let t = Test::new();
    let net = Internet::new(&t);
    let ca = TestCa::new("yolo export test server CA");
    let dir = tempfile::tempdir().unwrap();
    let ca_file = ca.write(dir.path(), "ca.pem");
    let server = HttpsServer::start(&t, &net, "https", &ca, &[API]);
    net.set_answer(API, &server.ip);
    let collector = Collector::start(Mode::Answer);
    let ocsf_file = dir.path().join("ocsf.jsonl");
    t.devcontainer(&format!(r#"{{"image": "{AGENT_IMAGE}"}}"#));
    t.user_config(&net.user_config(&format!(
        "extra_ca = [\"{}\"]\n[http.\"{API}\"]\nallow = [\"GET /**\"]\n[audit]\notlp_endpoint = \"{}\"\nocsf_file = \"{}\"\n",
        ca_file.display(),
        collector.endpoint,
        ocsf_file.display()
    )));
    let flags = net.up_flags(&["*.allowed.test"]);
    let refs: Vec<&str> = flags.iter().map(String::as_str).collect();
    t.up(&refs);
    let session = session_of(&t);

    let denied_ip = &net.denied.host.ip;
    let script = format!(
        "curl -s -o /dev/null https://{API}/hello; \
         curl -s -o /dev/null -X POST https://{API}/upload; \
         getent hosts x.denied.test; \
         curl -s -o /dev/null --connect-timeout 2 http://{denied_ip}/; \
         echo hi > exported.txt; echo done"
    );
    let out = t.yolo(&["exec", "sh", "-c", &script]).stdout();
    assert!(out.contains("done"), "{out}");
    // The guard's records of it are written before the session ends.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !local_events(&t, &session)
        .iter()
        .any(|e| e["kind"] == "file" && e["path"] == "exported.txt")
    {
        assert!(Instant::now() < deadline, "no file record");
        std::thread::sleep(Duration::from_millis(200));
    }
    t.yolo(&["down"]).ok();
    let status = wait_done(&t, &session, Duration::from_secs(40));

    // Every local record reached the collector, each once; none dropped or failed.
    let local = local_events(&t, &session);
    let requests = collector.requests();
    assert!(collector.bad().is_empty(), "{:?}", collector.bad());
    let records: Vec<&LogRecord> = requests
        .iter()
        .flat_map(|r| &r.resource_logs)
        .flat_map(|r| &r.scope_logs)
        .flat_map(|s| &s.log_records)
        .collect();
    assert_eq!(records.len(), local.len(), "{status}");
    assert_eq!(status["otlp"]["sent"], local.len(), "{status}");
    assert_eq!(status["otlp"]["dropped"], 0, "{status}");
    assert_eq!(status["otlp"]["failed"], 0, "{status}");

    // The resource names yolo, the workspace and the session.
    let resource = requests[0].resource_logs[0].resource.as_ref().unwrap();
    let resource_attr = |key: &str| {
        text(
            resource
                .attributes
                .iter()
                .find(|a| a.key == key)
                .and_then(|a| a.value.as_ref())
                .and_then(|v| v.value.as_ref()),
        )
    };
    assert_eq!(resource_attr("service.name"), "yolo");
    assert_eq!(resource_attr("yolo.session"), session);
    assert!(
        resource_attr("yolo.workspace")
            .ends_with(t.workspace.file_name().unwrap().to_str().unwrap()),
        "{}",
        resource_attr("yolo.workspace")
    );

    // Every kind the session made, named and with its fields as attributes.
    let named = |name: &str| -> Vec<&&LogRecord> {
        records.iter().filter(|r| r.event_name == name).collect()
    };
    for kind in [
        "yolo.session_start",
        "yolo.session_stop",
        "yolo.exec",
        "yolo.exec_exit",
        "yolo.file",
        "yolo.dns",
        "yolo.blocked",
        "yolo.http",
        "yolo.chain_end",
    ] {
        assert!(!named(kind).is_empty(), "no {kind} record");
    }
    let curl = named("yolo.exec")
        .into_iter()
        .find(|r| matches!(attribute(r, "path"), Some(Any::StringValue(p)) if p.ends_with("curl")))
        .expect("curl's exec");
    assert!(matches!(attribute(curl, "pid"), Some(Any::IntValue(p)) if *p > 0));
    assert!(matches!(attribute(curl, "argv"), Some(Any::ArrayValue(a)) if a.values.len() > 1));
    assert!(curl.time_unix_nano > 0);
    let refused = named("yolo.http")
        .into_iter()
        .find(|r| text(attribute(r, "method")) == "POST")
        .expect("the refused POST");
    assert_eq!(text(attribute(refused, "host")), API);
    assert_eq!(text(attribute(refused, "path")), "/upload");
    assert!(matches!(
        attribute(refused, "refused"),
        Some(Any::BoolValue(true))
    ));
    assert_eq!(refused.severity_text, "WARN");
    let dns = named("yolo.dns")
        .into_iter()
        .find(|r| text(attribute(r, "name")) == "x.denied.test")
        .expect("the refused lookup");
    assert_eq!(text(attribute(dns, "decision")), "refused");

    // The OCSF file: one record per local record, in the classes a SIEM indexes.
    let ocsf: Vec<Value> = std::fs::read_to_string(&ocsf_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(ocsf.len(), local.len());
    let class =
        |uid: u64| -> Vec<&Value> { ocsf.iter().filter(|r| r["class_uid"] == uid).collect() };
    assert!(class(1007).iter().any(|r| r["activity_id"] == 1
        && r["process"]["file"]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("curl"))
        && r["process"]["file"]["hashes"][0]["algorithm_id"] == 3));
    assert!(class(1007)
        .iter()
        .any(|r| r["activity_id"] == 2 && r["exit_code"].is_i64()));
    assert!(class(1001)
        .iter()
        .any(|r| r["file"]["path"] == "exported.txt" && r["activity_id"] == 1));
    assert!(class(4003)
        .iter()
        .any(|r| r["query"]["hostname"] == "x.denied.test" && r["disposition_id"] == 2));
    assert!(class(4001)
        .iter()
        .any(|r| r["dst_endpoint"]["ip"] == denied_ip.as_str() && r["activity_id"] == 5));
    assert!(class(4002)
        .iter()
        .any(|r| r["http_request"]["http_method"] == "GET"
            && r["http_request"]["url"]["hostname"] == API
            && r["http_response"]["code"].is_u64()));
    for r in &ocsf {
        assert_eq!(
            r["type_uid"].as_u64().unwrap(),
            r["class_uid"].as_u64().unwrap() * 100 + r["activity_id"].as_u64().unwrap()
        );
        assert_eq!(r["metadata"]["product"]["name"], "yolo");
        assert_eq!(r["actor"]["session"]["uid"], session.as_str());
    }

    // After the fact: the same, from `yolo audit --format`.
    let after = t
        .yolo(&["audit", "--session", &session, "--format", "ocsf"])
        .ok()
        .stdout();
    assert_eq!(after.lines().count(), local.len());
    let json = t
        .yolo(&[
            "audit",
            "--session",
            &session,
            "--format",
            "otlp-json",
            "--kind",
            "http",
        ])
        .ok()
        .stdout();
    // OTLP's own JSON mapping reads it back.
    let request: ExportLogsServiceRequest = serde_json::from_str(&json).expect(&json);
    let http = &request.resource_logs[0].scope_logs[0].log_records;
    assert!(!http.is_empty() && http.iter().all(|r| r.event_name == "yolo.http"));

    // The live view, after the end: a browser of the log with its counts.
    let screen = t
        .yolo(&["watch", "--once", "--session", &session])
        .ok()
        .stdout();
    assert!(screen.contains("ended (browsing its log)"), "{screen}");
    assert!(screen.contains("blocked 1"), "{screen}");
    assert!(
        screen.contains("the session's guard is not running"),
        "{screen}"
    );
    drop(server);
}

#[test]
fn a_collector_that_never_answers_costs_no_local_record() {
    let t = Test::new();
    let collector = Collector::start(Mode::Hang);
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.user_config(&format!(
        "[audit]\notlp_endpoint = \"{}\"\n",
        collector.endpoint
    ));
    t.up(&[]);
    let session = session_of(&t);
    t.yolo(&[
        "exec",
        "sh",
        "-c",
        "for i in $(seq 200); do /bin/true; done",
    ])
    .ok();
    t.yolo(&["down"]).ok();
    let status = wait_done(&t, &session, Duration::from_secs(60));
    let local = local_events(&t, &session);
    assert!(
        local.iter().filter(|e| e["kind"] == "exec").count() >= 200,
        "the execs are all on record"
    );
    // Nothing reached the collector; what the export lost is counted and said.
    assert_eq!(status["otlp"]["sent"], 0, "{status}");
    let lost =
        status["otlp"]["dropped"].as_u64().unwrap() + status["otlp"]["failed"].as_u64().unwrap();
    assert_eq!(lost as usize, local.len(), "{status}");
    t.yolo(&["audit", "verify", &session])
        .ok()
        .assert_stdout_contains("closed by its writer");
    t.yolo(&["audit", "--session", &session, "--kind", "session_stop"])
        .ok()
        .assert_stderr_contains("OpenTelemetry export");
}

#[test]
fn a_bad_export_setting_is_named_before_anything_runs() {
    let t = Test::without_docker();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.user_config("[audit]\notlp_endpoint = \"ftp://collector:4318\"\n");
    t.yolo(&["up"])
        .fails_with(65)
        .assert_stderr_contains("audit.otlp_endpoint");
    t.user_config("[audit]\nocsf_file = \"relative/ocsf.jsonl\"\n");
    t.yolo(&["up"])
        .fails_with(65)
        .assert_stderr_contains("audit.ocsf_file");
}

/// A shipper killed with records still in its queue (`kill -9`, a shut-down machine) saved
/// only the offsets up to which records were handed on: the next one (the next `up`) sends
/// them again, so the collector gets every record at least once, and none is skipped.
#[test]
fn a_shipper_killed_with_records_queued_leaves_them_to_the_next() {
    let t = Test::new();
    let hang = Collector::start(Mode::Hang);
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.user_config(&format!("[audit]\notlp_endpoint = \"{}\"\n", hang.endpoint));
    t.up(&[]);
    let session = session_of(&t);
    t.yolo(&["exec", "sh", "-c", "for i in $(seq 50); do /bin/true; done"])
        .ok();
    // Read and queued (the collector holds the first batch): the status is written every 2 s.
    let status_path = t
        .data_dir
        .join("sessions")
        .join(&session)
        .join("export.json");
    std::thread::sleep(Duration::from_secs(5));
    assert!(status_path.exists(), "the shipper wrote its status");
    let killed = std::process::Command::new("pkill")
        .args(["-KILL", "-f", &format!("audit ship {session}")])
        .status()
        .unwrap();
    assert!(killed.success(), "the shipper was running");
    let status: Value =
        serde_json::from_str(&std::fs::read_to_string(&status_path).unwrap()).unwrap();
    assert_eq!(status["done"], false, "{status}");
    // The next `up` of the session starts a shipper that goes on from there.
    let collector = Collector::start(Mode::Answer);
    t.user_config(&format!(
        "[audit]\notlp_endpoint = \"{}\"\n",
        collector.endpoint
    ));
    t.up(&[]);
    assert_eq!(session_of(&t), session, "the same session");
    t.yolo(&["down"]).ok();
    let status = wait_done(&t, &session, Duration::from_secs(60));
    let sent: usize = collector
        .requests()
        .iter()
        .flat_map(|r| &r.resource_logs)
        .flat_map(|r| &r.scope_logs)
        .flat_map(|s| &s.log_records)
        .filter(|r| r.event_name == "yolo.exec")
        .count();
    let local = local_events(&t, &session);
    let execs = local.iter().filter(|e| e["kind"] == "exec").count();
    assert!(execs >= 50, "{execs}");
    assert!(
        sent >= execs,
        "every exec reached the collector after the restart: {sent} of {execs} ({status})"
    );
}

/// ATTACK: an `ocsf_file` the user put inside the repository is a file the agent controls. Root
/// in the agent replaces it with a link to a file of the host's user (where appended lines
/// would run, or be read as config), and the next session's shipper starts with the link in
/// place; it never writes there: it refuses any path in the workspace (links resolved), and
/// opens its file without following a link, and the host's file is untouched.
#[test]
fn an_ocsf_file_in_the_workspace_is_never_written_through_the_agents_link() {
    let t = Test::new();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim.rc");
    std::fs::write(&victim, "precious\n").unwrap();
    t.file("logs/.keep", "");
    let ocsf_file = t.workspace.join("logs").join("ocsf.jsonl");
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.user_config(&format!(
        "[audit]\nocsf_file = \"{}\"\n",
        ocsf_file.display()
    ));
    t.up(&[]);
    let first = session_of(&t);
    let plant = format!(
        "rm -f logs/ocsf.jsonl; ln -s {} logs/ocsf.jsonl; for i in 1 2 3; do /bin/true; done",
        victim.display()
    );
    t.yolo(&["exec", "sh", "-c", &plant]).ok();
    // The link is there when the next session's shipper starts.
    t.yolo(&["down"]).ok();
    t.up(&[]);
    let session = session_of(&t);
    assert_ne!(session, first, "a new session");
    t.yolo(&["exec", "sh", "-c", "for i in 1 2 3; do /bin/true; done"])
        .ok();
    // Time for a shipper to write the session's records, then its end.
    std::thread::sleep(Duration::from_secs(3));
    t.yolo(&["down"]).ok();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious\n",
        "the host's file was written through the agent's link"
    );
    let log = std::fs::read_to_string(
        t.data_dir
            .join("sessions")
            .join(&session)
            .join("export.log"),
    )
    .unwrap_or_default();
    assert!(log.contains("inside the workspace"), "{log}");
    assert!(
        !t.data_dir
            .join("sessions")
            .join(&session)
            .join("export.json")
            .exists(),
        "no sink ran"
    );
}
