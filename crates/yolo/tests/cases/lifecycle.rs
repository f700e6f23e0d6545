//! up / reuse / rebuild / down, and what the created container looks like.

use crate::support::*;
use serde_json::Value;

const SIMPLE: &str = r#"{
  // a comment, and a trailing comma below
  "image": "debian:bookworm-slim",
  "containerEnv": { "FROM_CONFIG": "yes" },
  "forwardPorts": [18080],
  "hostRequirements": { "cpus": 1, "memory": "1gb" },
  "customizations": { "yolo": { "limits": { "pids": 256 } }, "vscode": { "extensions": [] } },
}"#;

#[test]
fn up_creates_a_hardened_container_with_only_the_workspace_mounted() {
    let t = Test::new();
    t.devcontainer(SIMPLE);
    let (_, out) = t.up(&[]);
    assert_eq!(out["action"], "created");
    let id = out["container"]["id"].as_str().unwrap();
    let c = inspect(id);
    let host = &c["HostConfig"];

    // Mounts: the workspace bind at /workspaces/repo, paths of the workspace bound read-only over it
    // at their own place (the protected paths), the rest named volumes only.
    let mounts = c["Mounts"].as_array().unwrap();
    let workspace = t.workspace.canonicalize().unwrap().display().to_string();
    let binds: Vec<_> = mounts.iter().filter(|m| m["Type"] == "bind").collect();
    let root: Vec<_> = binds
        .iter()
        .filter(|m| m["Destination"] == "/workspaces/repo")
        .collect();
    assert_eq!(root.len(), 1, "one workspace bind: {mounts:?}");
    assert_eq!(root[0]["Source"], workspace.as_str());
    // Besides, the exec audit's shim: its own folder from yolo's data, read-only, at /.yolo.
    let shim = t.data_dir.join("bin").display().to_string();
    assert_eq!(
        binds
            .iter()
            .filter(|m| m["Destination"] == "/.yolo")
            .count(),
        1,
        "{mounts:?}"
    );
    for bind in &binds {
        let source = bind["Source"].as_str().unwrap();
        if bind["Destination"] == "/.yolo" {
            assert!(source.starts_with(&format!("{shim}/shim-")), "{bind}");
            assert_eq!(bind["RW"], false, "{bind}");
            continue;
        }
        let below = source.strip_prefix(&workspace).unwrap_or_else(|| {
            panic!("a bind from outside the workspace: {bind}");
        });
        assert_eq!(
            bind["Destination"],
            format!("/workspaces/repo{below}"),
            "{bind}"
        );
    }
    assert!(
        binds
            .iter()
            .any(|m| m["Destination"] == "/workspaces/repo/.devcontainer" && m["RW"] == false),
        "{mounts:?}"
    );
    assert!(
        mounts
            .iter()
            .all(|m| m["Type"] == "bind" || m["Type"] == "volume"),
        "{mounts:?}"
    );
    assert!(!mounts
        .iter()
        .any(|m| m["Source"].as_str().unwrap_or("").contains("docker.sock")));

    // Capabilities: all dropped, a small set added back; never NET_ADMIN / NET_RAW / SYS_ADMIN.
    assert_eq!(host["CapDrop"], serde_json::json!(["ALL"]));
    let caps: Vec<&str> = host["CapAdd"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for forbidden in ["NET_ADMIN", "NET_RAW", "SYS_ADMIN", "SYS_PTRACE", "MKNOD"] {
        assert!(
            !caps.iter().any(|c| c.ends_with(forbidden)),
            "{forbidden} in {caps:?}"
        );
    }
    assert_eq!(host["Privileged"], false);
    let secopt = host["SecurityOpt"].to_string();
    assert!(secopt.contains("no-new-privileges"), "{secopt}");
    // No init of Docker's: the agent joins the guard's PID namespace, whose PID 1 (the exec
    // audit's supervisor) reaps.
    assert_eq!(host["Init"], false);
    let pid_mode = host["PidMode"].as_str().unwrap_or_default();
    assert!(
        pid_mode.starts_with(&format!("container:{}", net::guard_of(&t))),
        "{pid_mode}"
    );

    // Limits: hostRequirements and customizations.yolo.limits.
    assert_eq!(host["NanoCpus"], 1_000_000_000i64);
    assert_eq!(host["Memory"], 1024i64 * 1024 * 1024);
    assert_eq!(host["MemorySwap"], host["Memory"]);
    assert_eq!(host["PidsLimit"], 256);

    // Ports: published on 127.0.0.1 only, by the guard that owns the network namespace.
    let guard = inspect(&format!(
        "{}-guard",
        out["container"]["name"].as_str().unwrap()
    ));
    let bindings = &guard["HostConfig"]["PortBindings"]["18080/tcp"][0];
    assert_eq!(bindings["HostIp"], "127.0.0.1");
    assert_eq!(bindings["HostPort"], "18080");

    // Labels the reference CLI and VS Code look for, and yolo's own.
    let labels = &c["Config"]["Labels"];
    assert_eq!(
        labels["devcontainer.local_folder"],
        t.workspace.canonicalize().unwrap().display().to_string()
    );
    assert_eq!(
        labels["devcontainer.config_file"],
        t.workspace
            .join(".devcontainer/devcontainer.json")
            .canonicalize()
            .unwrap()
            .display()
            .to_string()
    );
    assert_eq!(labels["dev.yolo.managed"], "true");
    assert!(labels["dev.yolo.config-hash"].as_str().unwrap().len() >= 32);

    // No host environment leaks in: only the image's and the config's.
    let env = c["Config"]["Env"].to_string();
    assert!(env.contains("FROM_CONFIG=yes"));
    assert!(!env.contains("YOLO_DATA_DIR"), "{env}");
    assert!(!env.contains("CARGO"), "{env}");

    // Inside: the processes see the limits and lack the capabilities.
    let caps = t
        .yolo(&[
            "exec",
            "sh",
            "-c",
            "grep CapEff /proc/self/status; cat /proc/self/status | grep NoNewPrivs",
        ])
        .ok();
    caps.assert_stdout_contains("NoNewPrivs:\t1");
    let eff = caps
        .stdout()
        .lines()
        .find(|l| l.starts_with("CapEff"))
        .unwrap()
        .split_whitespace()
        .last()
        .unwrap()
        .to_string();
    let eff = u64::from_str_radix(&eff, 16).unwrap();
    const CAP_NET_RAW: u64 = 1 << 13;
    const CAP_NET_ADMIN: u64 = 1 << 12;
    const CAP_SYS_ADMIN: u64 = 1 << 21;
    assert_eq!(
        eff & (CAP_NET_RAW | CAP_NET_ADMIN | CAP_SYS_ADMIN),
        0,
        "caps {eff:x}"
    );
}

#[test]
fn up_twice_reuses_the_container_and_starts_a_stopped_one() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let (_, first) = t.up(&[]);
    let (_, second) = t.up(&[]);
    assert_eq!(first["container"]["id"], second["container"]["id"]);
    assert_eq!(second["action"], "running");
    // The first up made the absent read-only folders (.vscode, .idea): not a config change.
    assert_eq!(second["stale"], false, "{second}");
    assert_eq!(t.agents().len(), 1);

    t.yolo(&["down"]).ok();
    let state = inspect(first["container"]["id"].as_str().unwrap());
    assert_eq!(state["State"]["Running"], false);
    let (_, third) = t.up(&[]);
    assert_eq!(third["container"]["id"], first["container"]["id"]);
    assert_eq!(third["action"], "started");
}

#[test]
fn a_changed_config_is_refused_until_accepted_then_flagged_stale_and_rebuild_recreates() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let (_, first) = t.up(&[]);

    t.devcontainer(r#"{"image": "debian:bookworm-slim", "containerEnv": {"NEW": "1"}}"#);
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("changed since you last approved")
        .assert_stderr_contains(
            r#"+{"image": "debian:bookworm-slim", "containerEnv": {"NEW": "1"}}"#,
        )
        .assert_stderr_contains("--accept-config");

    let (run, stale) = t.up(&["--accept-config"]);
    assert_eq!(stale["container"]["id"], first["container"]["id"]);
    assert_eq!(stale["stale"], true);
    let _ = run;

    let (_, rebuilt) = t.up(&["--rebuild"]);
    assert_ne!(rebuilt["container"]["id"], first["container"]["id"]);
    assert_eq!(rebuilt["action"], "created");
    assert_eq!(rebuilt["stale"], false);
    assert_eq!(t.agents().len(), 1, "the old container is gone");
    let env = inspect(rebuilt["container"]["id"].as_str().unwrap())["Config"]["Env"].to_string();
    assert!(env.contains("NEW=1"));
}

/// An agent granted NET_RAW could forge frames on a bridge other projects share: its guard
/// gets a network of the project's own (docs/architecture.md, "One network for all guards"),
/// which `down --remove` deletes.
#[test]
fn an_agent_granted_net_raw_gets_a_bridge_of_its_own() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "capAdd": ["NET_RAW"]}"#);
    t.up(&["--grant", "cap-add=NET_RAW"]);
    let guard = inspect(&t.guard_ids()[0]);
    let networks: Vec<String> = guard["NetworkSettings"]["Networks"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(networks.len(), 1, "{networks:?}");
    assert!(networks[0].ends_with("-net"), "{networks:?}");
    let labels = &inspect_network(&networks[0])["Labels"];
    assert_eq!(labels["dev.yolo.shared"], Value::Null, "{labels}");
    assert_eq!(
        guard["Config"]["Env"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e.as_str().unwrap().starts_with("YOLO_SHARED_BRIDGE"))
            .count(),
        0
    );
    t.yolo(&["down", "--remove"]).ok();
    assert_eq!(
        t.project_networks().trim(),
        "",
        "the project's own network is removed"
    );
}

#[test]
fn down_stops_remove_deletes_and_volumes_go_only_when_asked() {
    let t = Test::new();
    t.devcontainer(&format!(
        r#"{{"image": "debian:bookworm-slim", "mounts": ["source=test-cache-{},target=/cache,type=volume"]}}"#,
        t.id
    ));
    let (_, out) = t.up(&[]);
    let id = out["container"]["id"].as_str().unwrap().to_string();
    let volume = format!("test-cache-{}", t.id);
    assert_eq!(
        docker(&["volume", "ls", "-q", "--filter", &format!("name={volume}")]).trim(),
        volume
    );

    t.yolo(&["down"]).ok();
    assert_eq!(inspect(&id)["State"]["Running"], false);

    // The guard is on the network all projects' guards share: made once, kept by --remove.
    let shared = || t.shared_networks();
    assert_eq!(shared().len(), 1, "the guards' network");
    t.yolo(&["down", "--remove"]).ok();
    assert!(t.containers().is_empty());
    assert_eq!(shared().len(), 1, "--remove keeps the shared network");
    assert_eq!(
        docker(&["volume", "ls", "-q", "--filter", &format!("name={volume}")]).trim(),
        volume,
        "kept"
    );

    t.up(&[]);
    t.yolo(&["down", "--remove", "--volumes"]).ok();
    assert!(
        docker(&["volume", "ls", "-q", "--filter", &format!("name={volume}")])
            .trim()
            .is_empty()
    );
}

#[test]
fn status_lists_the_container_with_limits() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let (_, out) = t.up(&["--memory", "768m", "--cpus", "1.5", "--pids", "300"]);
    let status = t.yolo(&["status", "--json"]).ok();
    let rows: serde_json::Value = serde_json::from_str(&status.stdout()).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["container"]["name"] == out["container"]["name"])
        .expect("our container is listed");
    assert_eq!(row["container"]["state"], "running");
    assert_eq!(row["network"]["mode"], "firewall");
    assert_eq!(row["network"]["guard"], "running");
    assert_eq!(row["limits"]["memory_bytes"], 768i64 * 1024 * 1024);
    assert_eq!(row["limits"]["cpus"], 1.5);
    assert_eq!(row["limits"]["pids"], 300);
    assert_eq!(
        row["container"]["workspace"],
        t.workspace.canonicalize().unwrap().display().to_string()
    );
}

#[test]
fn the_session_log_records_start_commands_and_stop() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "postCreateCommand": "true"}"#);
    t.up(&[]);
    t.yolo(&["exec", "sh", "-c", "exit 4"]).fails_with(4);
    t.yolo(&["down"]).ok();
    let events = t.events();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"session_start"), "{kinds:?}");
    // `down` closes the file's hash chain after the stop (docs/audit-log.md).
    assert_eq!(
        kinds[kinds.len().saturating_sub(2)..],
        ["session_stop", "chain_end"],
        "{kinds:?}"
    );
    let start = &events[0];
    assert_eq!(start["image"], "debian:bookworm-slim");
    assert!(start["config_hash"].as_str().unwrap().len() >= 32);
    assert!(start["limits"]["memory_bytes"].as_i64().unwrap() > 0);
    let exec = events
        .iter()
        .find(|e| e["kind"] == "command" && e["source"] == "exec")
        .expect("exec event");
    assert_eq!(exec["argv"], serde_json::json!(["sh", "-c", "exit 4"]));
    assert_eq!(exec["exit_code"], 4);
    assert_eq!(exec["cwd"], "/workspaces/repo");
    assert!(exec["duration_ms"].is_u64());
    let hook = events
        .iter()
        .find(|e| e["kind"] == "command" && e["source"] == "hook")
        .expect("hook event");
    assert_eq!(hook["name"], "postCreateCommand");
    let session = start["session"].as_str().unwrap();
    assert!(events.iter().all(|e| e["session"] == session));

    // The viewer shows and filters them.
    t.yolo(&["audit", "--kind", "command"])
        .ok()
        .assert_stdout_contains("exit=4")
        .assert_stdout_lacks("session_start");
}

#[test]
fn audit_follow_shows_events_as_they_happen() {
    use std::io::{BufRead, BufReader};
    use std::time::{Duration, Instant};
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.up(&[]);
    t.yolo(&["exec", "echo", "before-follow"]).ok();
    let mut follow = t
        .command(&["audit", "--follow", "--kind", "command"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = follow.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let wait_for = |marker: &str| -> Result<(), Vec<String>> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut lines = vec![];
        while Instant::now() < deadline {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(line) if line.contains(marker) => return Ok(()),
                Ok(line) => lines.push(line),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
        Err(lines)
    };
    // The past event is printed first: from here on the follower is following (a plain dump
    // would have printed it too, then exited and closed its stdout).
    let first = wait_for("before-follow");
    let after_first = follow.try_wait().unwrap();
    let exec = t.yolo(&["exec", "echo", "followed-marker"]);
    let followed = wait_for("followed-marker");
    let _ = follow.kill();
    let _ = follow.wait();
    exec.ok();
    first.expect("the past exec was shown first");
    assert!(
        after_first.is_none(),
        "audit --follow exited: {after_first:?}"
    );
    if let Err(lines) = followed {
        panic!("the exec did not appear in the followed log; it printed: {lines:?}");
    }
}

/// `up`, `status` and `firewall` show the same container, session and network objects with the
/// same fields and values (docs/json-output.md), and none of the guard's protocol envelope.
#[test]
fn up_status_and_firewall_json_share_one_shape() {
    use serde_json::Value;
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "remoteUser": "root"}"#);
    let (_, up) = t.up(&["--allow", "example.com:443"]);
    let status: Value = serde_json::from_str(&t.yolo(&["status", "--json"]).ok().stdout()).unwrap();
    let row = status
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["container"]["id"] == up["container"]["id"])
        .expect("our container in status")
        .clone();
    let firewall: Value =
        serde_json::from_str(&t.yolo(&["firewall", "--json"]).ok().stdout()).unwrap();

    let keys = |v: &Value| -> Vec<String> {
        let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        keys
    };
    let container = [
        "id",
        "image",
        "name",
        "remote_user",
        "state",
        "workspace",
        "workspace_folder",
    ];
    let network = ["allowlist", "guard", "mode"];
    for (command, v) in [("up", &up), ("status", &row), ("firewall", &firewall)] {
        assert_eq!(keys(&v["container"]), container, "{command}: {v:#}");
        assert_eq!(keys(&v["network"]), network, "{command}: {v:#}");
        assert!(v.get("ok").is_none(), "{command}: {v:#}");
        assert_eq!(v["container"], up["container"], "{command}");
        assert_eq!(v["session"], up["session"], "{command}");
        assert_eq!(v["network"], up["network"], "{command}");
    }
    assert_eq!(
        keys(&up),
        [
            "action",
            "container",
            "credentials",
            "declined",
            "network",
            "reason",
            "session",
            "stale"
        ]
    );
    assert_eq!(
        keys(&row),
        [
            "container",
            "leftovers",
            "limits",
            "network",
            "ports",
            "session",
            "status"
        ]
    );
    assert_eq!(
        keys(&firewall),
        [
            "container",
            "counters",
            "network",
            "open_addresses",
            "session"
        ]
    );
    assert_eq!(
        up["container"]["workspace"],
        t.workspace.canonicalize().unwrap().display().to_string()
    );
    assert_eq!(up["container"]["workspace_folder"], "/workspaces/repo");
    assert_eq!(up["container"]["remote_user"], "root");
    assert_eq!(up["container"]["state"], "running");
    assert_eq!(up["network"]["mode"], "firewall");
    assert_eq!(up["network"]["guard"], "running");
    assert!(
        up["network"]["allowlist"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "example.com:443"),
        "{up:#}"
    );
    assert_eq!(keys(&row["limits"]), ["cpus", "memory_bytes", "pids"]);
}

#[test]
fn a_container_whose_guard_is_gone_is_recreated_and_up_says_why() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let (_, first) = t.up(&[]);
    let name = first["container"]["name"].as_str().unwrap().to_string();
    t.yolo(&["down"]).ok();
    let (_, started) = t.up(&[]);
    assert_eq!(
        (&started["action"], &started["reason"]),
        (&"started".into(), &"it was stopped".into())
    );

    // Docker joins a namespace by container id: without its guard the old agent cannot come
    // back, so up makes both anew.
    t.yolo(&["down"]).ok();
    docker(&["rm", "-f", &format!("{name}-guard")]);
    let (_, recreated) = t.up(&[]);
    assert_ne!(recreated["container"]["id"], first["container"]["id"]);
    assert_eq!(
        (&recreated["action"], &recreated["reason"]),
        (&"created".into(), &"its firewall guard was gone".into())
    );
    assert_eq!(t.agents().len(), 1, "the old container is gone");
    let guard = inspect(&format!("{name}-guard"));
    assert_eq!(guard["State"]["Running"], true);
    let agent = inspect(recreated["container"]["id"].as_str().unwrap());
    assert_eq!(
        agent["HostConfig"]["NetworkMode"],
        format!("container:{}", guard["Id"].as_str().unwrap())
    );

    let human = t.yolo(&["up", "--rebuild"]).ok();
    assert!(
        human
            .stderr()
            .contains(&format!("{name} created (debian:bookworm-slim; --rebuild)")),
        "{}",
        human.stderr()
    );
}

/// The engine's cores and whether its storage driver can limit a writable layer, from `docker`.
fn engine_cpus_and_disk_limit() -> (f64, bool) {
    let info = docker(&[
        "info",
        "--format",
        "{{.NCPU}} {{.Driver}} {{json .DriverStatus}}",
    ]);
    let cpus: f64 = info.split_whitespace().next().unwrap().parse().unwrap();
    let disk = info.contains("btrfs")
        || info.contains("zfs")
        || info.contains("devicemapper")
        || (info.contains("overlay2") && info.contains(r#"["Backing Filesystem","xfs"]"#));
    (cpus, disk)
}

#[test]
fn default_and_repository_limits_leave_the_host_a_core_and_the_user_decides() {
    let (host, can_limit_disk) = engine_cpus_and_disk_limit();
    let kept = (host - 1.0).max(0.5);
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let (_, out) = t.up(&[]);
    let id = out["container"]["id"].as_str().unwrap().to_string();
    let host_config = &inspect(&id)["HostConfig"];
    assert_eq!(
        host_config["NanoCpus"].as_f64().unwrap() / 1e9,
        kept.min(2.0),
        "yolo's default of 2 CPUs leaves the host a core"
    );
    // The writable layer is limited exactly where the storage driver can.
    assert_eq!(
        host_config["StorageOpt"]["size"].is_string(),
        can_limit_disk,
        "{host_config}"
    );

    // The repository cannot take every core either; it is told how much it got.
    t.devcontainer(&format!(
        r#"{{"image": "debian:bookworm-slim", "hostRequirements": {{"cpus": {}}}}}"#,
        host as i64 + 2
    ));
    let (run, out) = t.up(&["--rebuild", "--accept-config"]);
    run.assert_stderr_contains("yolo leaves one of the engine's");
    let id = out["container"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        inspect(&id)["HostConfig"]["NanoCpus"].as_f64().unwrap() / 1e9,
        kept
    );

    // The user may give it every core, and no more than the engine has.
    let (_, out) = t.up(&["--rebuild", "--cpus", &format!("{}", host + 3.0)]);
    let id = out["container"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        inspect(&id)["HostConfig"]["NanoCpus"].as_f64().unwrap() / 1e9,
        host
    );
}

#[test]
fn a_bad_disk_limit_is_a_config_error() {
    let t = Test::without_docker();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.user_config("[limits]\ndisk = \"lots\"\n");
    t.yolo(&["up"])
        .fails_with(65)
        .assert_stderr_contains("limits.disk")
        .assert_stderr_contains("is not a size like 20g");
}

#[test]
fn audit_filters_by_time_and_text() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.up(&[]);
    t.yolo(&["exec", "echo", "needle-in-the-log"]).ok();
    let found = t.yolo(&["audit", "--grep", "NEEDLE-in"]).ok().stdout();
    // yolo's own record of the command, and the guard's of the program it started.
    assert_eq!(found.lines().count(), 2, "{found}");
    assert!(
        found.lines().all(|l| l.contains("needle-in-the-log")),
        "{found}"
    );
    assert!(found.lines().any(|l| l.contains(" command ")), "{found}");
    assert!(found.lines().any(|l| l.contains(" exec ")), "{found}");
    assert!(t
        .yolo(&["audit", "--since", "1h"])
        .ok()
        .stdout()
        .contains("session_start"));
    let future = t
        .yolo(&["audit", "--since", "2099-01-01T00:00:00Z"])
        .ok()
        .stdout();
    assert_eq!(future, "", "nothing happened after 2099");
    t.yolo(&["audit", "--since", "yesterday"])
        .fails_with(64)
        .assert_stderr_contains("an age like 10m");
}
