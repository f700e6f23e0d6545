//! `--network learn` and `yolo firewall suggest` against the fake internet
//! (tests/support/net.rs): a session that reaches the package indexes pip and npm use, one
//! name of its own and one unusual port gets back the `pypi` and `npm` presets, the name and
//! the port; `--write user` and `--write repo` save it where the next `up` reads it.

use crate::support::net::*;
use crate::support::*;
use serde_json::Value;
use std::time::Duration;

#[test]
fn a_learn_session_is_suggested_its_presets_and_the_one_extra_name() {
    let s = Session::start(&[], &["--network", "learn"]);
    assert_eq!(s.up["network"]["mode"], "learn");
    // The names pip and npm look up, answered by our own web server.
    let web = &s.net.other.host.ip;
    for name in ["pypi.org", "files.pythonhosted.org", "registry.npmjs.org"] {
        s.net.set_answer(name, web);
    }
    // What `pip download` and `npm view` fetch first (over plain HTTP: our server has no TLS),
    // one name of the project's own, and a database port.
    let script = "for u in http://pypi.org/simple/requests/ http://files.pythonhosted.org/packages/x.whl \
                  http://registry.npmjs.org/left-pad http://api.other.test/; do \
                    curl -s -o /dev/null --connect-timeout 5 --max-time 8 $u || exit 1; done; \
                  curl -s --connect-timeout 3 --max-time 4 telnet://db.other.test:5432 </dev/null; true";
    s.sh(script).ok();
    s.wait_event(Duration::from_secs(8), |e| {
        e["kind"] == "connection" && e["name"] == "db.other.test" && e["port"] == 5432
    })
    .expect("the connection to the database port is on record");

    let json: Value =
        serde_json::from_str(&s.t.yolo(&["firewall", "suggest", "--json"]).ok().stdout()).unwrap();
    assert_eq!(json["scope"], "used", "{json}");
    let presets: Vec<&str> = json["presets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["preset"].as_str().unwrap())
        .collect();
    assert_eq!(presets, ["npm", "pypi"], "{json}");
    let allow: Vec<&str> = json["allow"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pattern"].as_str().unwrap())
        .collect();
    assert_eq!(allow, ["api.other.test", "db.other.test:5432"], "{json}");

    // The text is a [firewall] table to paste.
    let text = s.t.yolo(&["firewall", "suggest"]).ok().stdout();
    let table: toml::Value = toml::from_str(&text).expect(&text);
    assert_eq!(
        table["firewall"]["allow"][1].as_str(),
        Some("db.other.test:5432")
    );

    // Saved to the user config, with what was there kept.
    s.t.yolo(&["firewall", "suggest", "--write", "user"]).ok();
    let config = std::fs::read_to_string(s.t.config_dir.join("config.toml")).unwrap();
    let config: toml::Value = toml::from_str(&config).unwrap();
    assert_eq!(
        config["firewall"]["docker_network"].as_str(),
        Some(s.net.network.as_str())
    );
    assert!(config["firewall"]["presets"]
        .as_array()
        .unwrap()
        .contains(&toml::Value::from("pypi")));
    // A second write has nothing to add.
    s.t.yolo(&["firewall", "suggest", "--write", "user"])
        .ok()
        .assert_stderr_contains("already has all of it");

    // Saved for the team: devcontainer.json's customizations, which the next `up` reads
    // (after approval of the changed config).
    s.t.yolo(&["firewall", "suggest", "--write", "repo"])
        .ok()
        .assert_stderr_contains("approve");
    let file = s.t.workspace.join(".devcontainer/devcontainer.json");
    let repo: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(
        repo["customizations"]["yolo"]["firewall"]["allow"],
        serde_json::json!(["api.other.test", "db.other.test:5432"])
    );
}

#[test]
fn suggest_names_a_missing_session_and_a_bad_target() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.yolo(&["firewall", "suggest", "nosuchsession"])
        .fails_with(66)
        .assert_stderr_contains("no audit log for session nosuchsession");
    t.yolo(&["firewall", "suggest", "--write", "team"])
        .fails_with(64)
        .assert_stderr_contains("possible values: user, repo");
}
