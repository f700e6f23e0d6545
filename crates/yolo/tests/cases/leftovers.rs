//! Nothing half-made, no two of anything: a failed `up` rolls back what it made, `down
//! --remove` removes every leftover by its labels, `status` shows them, one `up` at a time per
//! workspace, and Ctrl-C stops what yolo started in the container.

use crate::support::*;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const IMAGE: &str = r#"{"image": "debian:bookworm-slim"}"#;

/// Containers of this test with `role`.
fn with_role(t: &Test, role: &str) -> Vec<String> {
    docker(&[
        "ps",
        "-aq",
        "--filter",
        &format!("label={LABEL}={}", t.id),
        "--filter",
        &format!("label=dev.yolo.role={role}"),
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

/// Networks called exactly `name`.
fn networks_named(name: &str) -> Vec<String> {
    docker(&["network", "ls", "-q", "--filter", &format!("name=^{name}$")])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Whether a process whose command line is `cmd` runs in `container` (`docker top` asks the
/// host's ps, so the image needs none).
fn runs(container: &str, cmd: &str) -> bool {
    docker(&["top", container])
        .lines()
        .any(|l| l.ends_with(cmd))
}

/// Wait until `check` holds (or fail after `secs`).
#[track_caller]
fn wait_until(secs: u64, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn spawn(t: &Test, args: &[&str]) -> Child {
    t.command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run yolo")
}

fn signal(child: &Child, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

/// The child's end, or a failure if it takes more than `secs`.
#[track_caller]
fn finish(child: Child, secs: u64) -> Run {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = rx
        .recv_timeout(Duration::from_secs(secs))
        .expect("yolo did not end")
        .expect("yolo's output");
    Run { output }
}

/// The agent container's name, from a first `up` that is then removed.
fn agent_name(t: &Test) -> String {
    let (_, out) = t.up(&[]);
    t.yolo(&["down", "--remove"]).ok();
    out["container"]["name"].as_str().unwrap().to_string()
}

#[test]
fn a_failed_up_removes_the_guard_it_made_and_keeps_the_shared_network() {
    let t = Test::new();
    t.devcontainer(IMAGE);
    let name = agent_name(&t);
    // A container yolo does not know holds the agent's name: the guard is made, then creating
    // the agent fails.
    docker(&[
        "create",
        "--name",
        &name,
        "--label",
        &format!("{LABEL}={}", t.id),
        BASE_IMAGE,
        "true",
    ]);
    let failed = t.yolo(&["up"]).fails_with(69);
    failed
        .assert_stderr_contains(&format!("creating container {name}"))
        .assert_stderr_contains(&format!(
            "undid what this `yolo up` had made: {name}-guard\n"
        ));
    assert!(with_role(&t, "guard").is_empty(), "{}", failed.describe());
    assert!(t.project_networks().trim().is_empty());
    // The guards' network is every project's: it stays.
    assert_eq!(t.shared_networks().len(), 1);
    assert_eq!(t.containers().len(), 1, "only the container that was there");

    docker(&["rm", "-f", &name]);
    let (_, out) = t.up(&[]);
    assert_eq!(out["action"], "created");
    assert_eq!(with_role(&t, "guard").len(), 1);
    assert_eq!(t.shared_networks().len(), 1);
}

#[test]
fn an_agent_that_cannot_start_is_removed_with_its_guard() {
    let t = Test::new();
    // Docker creates the container and refuses to start it: the device is not there.
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "runArgs": ["--device", "/dev/yolo-test-nonexistent"]}"#,
    );
    let failed = t.yolo(&["up", "--grant", "device"]).fails_with(69);
    failed
        .assert_stderr_contains("starting container")
        .assert_stderr_contains("undid what this `yolo up` had made: yolo-repo-");
    assert!(t.containers().is_empty(), "{}", failed.describe());
    assert!(
        t.project_networks().trim().is_empty(),
        "{}",
        failed.describe()
    );
}

#[test]
fn status_shows_leftovers_and_down_remove_takes_them_all_without_yolos_state() {
    let t = Test::new();
    t.devcontainer(IMAGE);
    let (_, out) = t.up(&[]);
    let name = out["container"]["name"].as_str().unwrap().to_string();
    let id = inspect(&name)["Config"]["Labels"]["dev.yolo.id"]
        .as_str()
        .unwrap()
        .to_string();
    // What a killed `up` left: a guard without its agent (and its network).
    docker(&["rm", "-f", &name]);
    let status = t.yolo(&["status"]).ok();
    status
        .assert_stdout_contains(&format!("{name}-guard"))
        .assert_stdout_contains("a firewall guard without its agent container")
        .assert_stderr_contains("`yolo down --remove` in their workspace removes them");
    // And a second guard for the workspace.
    docker(&[
        "create",
        "--name",
        &format!("{name}-guard-2"),
        "--label",
        "dev.yolo.managed=true",
        "--label",
        &format!("dev.yolo.id={id}"),
        "--label",
        "dev.yolo.role=guard",
        "--label",
        &format!("{LABEL}={}", t.id),
        BASE_IMAGE,
        "true",
    ]);
    let json: serde_json::Value =
        serde_json::from_str(&t.yolo(&["status", "--json"]).ok().stdout()).unwrap();
    let row = json
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["leftovers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l["name"] == format!("{name}-guard"))
        })
        .unwrap_or_else(|| panic!("a row with our leftovers: {json:#}"));
    assert_eq!(row["container"], serde_json::Value::Null, "{row:#}");
    let problems: Vec<(&str, &str)> = row["leftovers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["kind"].as_str().unwrap(), l["problem"].as_str().unwrap()))
        .collect();
    let two = "one of 2 firewall guards for one workspace";
    assert_eq!(problems, [("guard", two), ("guard", two)], "{row:#}");

    // yolo's state lost too: the labels are enough.
    std::fs::remove_dir_all(t.data_dir.join("workspaces")).unwrap();
    t.yolo(&["down", "--remove"]).ok();
    assert!(t.containers().is_empty());
    assert!(networks_named(&format!("{name}-net")).is_empty());
    t.yolo(&["status"]).ok().assert_stdout_lacks(&name);
    t.up(&[]);
}

/// A second network named like `name` with yolo's labels for workspace `id`, made the way two
/// `up`s at once used to: through the API, which (unlike the docker CLI) does not refuse a name
/// already taken.
#[cfg(unix)]
fn duplicate_network(t: &Test, name: &str, id: Option<&str>) {
    use std::io::{Read, Write};
    let socket = std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(str::to_string))
        .unwrap_or_else(|| "/var/run/docker.sock".into());
    let mut labels = serde_json::json!({LABEL: t.id});
    if let Some(id) = id {
        labels["dev.yolo.managed"] = "true".into();
        labels["dev.yolo.id"] = id.into();
    }
    let body = serde_json::json!({
        "Name": name,
        "CheckDuplicate": false,
        "Options": {"com.docker.network.bridge.enable_icc": "false"},
        "Labels": labels,
    })
    .to_string();
    let mut stream = std::os::unix::net::UnixStream::connect(&socket).expect("the docker socket");
    write!(
        stream,
        "POST /v1.41/networks/create HTTP/1.0\r\nHost: docker\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.0 201"), "{answer}");
}

#[cfg(unix)]
#[test]
fn two_networks_left_with_one_name_are_shown_and_down_remove_takes_them() {
    let t = Test::new();
    t.devcontainer(IMAGE);
    let (_, out) = t.up(&[]);
    let name = out["container"]["name"].as_str().unwrap().to_string();
    let id = inspect(&name)["Config"]["Labels"]["dev.yolo.id"]
        .as_str()
        .unwrap()
        .to_string();
    // A project network as older yolos made them, twice.
    let network = format!("{name}-net");
    duplicate_network(&t, &network, Some(&id));
    duplicate_network(&t, &network, Some(&id));
    assert_eq!(networks_named(&network).len(), 2);
    t.yolo(&["status"])
        .ok()
        .assert_stdout_contains(&format!("one of 2 networks named {network}"));
    t.yolo(&["down", "--remove"]).ok();
    assert!(networks_named(&network).is_empty());
    let (_, again) = t.up(&[]);
    assert_eq!(again["action"], "created");
}

#[cfg(unix)]
#[test]
fn a_shared_network_name_taken_by_another_network_is_refused() {
    let t = Test::new();
    t.devcontainer(IMAGE);
    t.up(&[]);
    let shared = t.shared_networks();
    assert_eq!(shared.len(), 1);
    let name = inspect_network(&shared[0])["Name"]
        .as_str()
        .unwrap()
        .to_string();
    t.yolo(&["down", "--remove"]).ok();
    docker(&["network", "rm", &name]);
    // Someone else's network of that name, whose containers may talk to each other.
    docker(&[
        "network",
        "create",
        "--label",
        &format!("{LABEL}={}", t.id),
        &name,
    ]);
    t.yolo(&["up"])
        .fails_with(69)
        .assert_stderr_contains(&format!("the network {name} is not one yolo made"))
        .assert_stderr_contains("enable_icc not set");
    assert!(t.containers().is_empty());
    docker(&["network", "rm", &name]);
    // One with inter-container communication off but internal: no way out for the guards.
    docker(&[
        "network",
        "create",
        "--internal",
        "--opt",
        "com.docker.network.bridge.enable_icc=false",
        "--label",
        &format!("{LABEL}={}", t.id),
        &name,
    ]);
    t.yolo(&["up"])
        .fails_with(69)
        .assert_stderr_contains("internal true");
    assert!(t.containers().is_empty());
    docker(&["network", "rm", &name]);
    // Two of that name (Docker's API lets a name be taken twice): neither is guessed at.
    duplicate_network(&t, &name, None);
    duplicate_network(&t, &name, None);
    t.yolo(&["up"])
        .fails_with(69)
        .assert_stderr_contains("is ambiguous")
        .assert_stderr_contains(&format!("more than one network is named {name}"));
    assert!(t.containers().is_empty());
}

#[test]
fn two_ups_at_once_make_one_of_everything_and_one_waits() {
    let t = Test::new();
    // A slow hook keeps the first `up` busy; it counts its runs in the workspace.
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "postCreateCommand": "echo run >> /workspaces/repo/hook-runs; sleep 3"}"#,
    );
    let ups = [spawn(&t, &["up", "--json"]), spawn(&t, &["up", "--json"])];
    let runs: Vec<Run> = ups.into_iter().map(|up| finish(up, 180).ok()).collect();
    let waited = runs
        .iter()
        .filter(|r| {
            r.stderr()
                .contains("yolo: waiting for another yolo up on this workspace (pid ")
        })
        .count();
    assert_eq!(waited, 1, "{}\n{}", runs[0].describe(), runs[1].describe());
    let ids: Vec<serde_json::Value> = runs
        .iter()
        .map(|r| serde_json::from_str::<serde_json::Value>(&r.stdout()).unwrap())
        .map(|v| v["container"]["id"].clone())
        .collect();
    assert_eq!(ids[0], ids[1], "one agent container");
    assert_eq!(t.agents().len(), 1);
    assert_eq!(with_role(&t, "guard").len(), 1);
    assert_eq!(t.shared_networks().len(), 1);
    let hook_runs = std::fs::read_to_string(t.workspace.join("hook-runs")).unwrap();
    assert_eq!(hook_runs, "run\n", "postCreateCommand ran once");
    let (_, again) = t.up(&[]);
    assert_eq!(again["action"], "running");
}

#[test]
fn ctrl_c_during_up_stops_the_hook_in_the_container() {
    let t = Test::new();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "postCreateCommand": "[ -e /workspaces/repo/quick ] || sleep 1001"}"#,
    );
    let up = spawn(&t, &["up"]);
    wait_until(120, "the hook to run", || {
        t.agents().first().is_some_and(|a| runs(a, "sleep 1001"))
    });
    signal(&up, "INT");
    let run = finish(up, 30).fails_with(130);
    run.assert_stderr_contains(
        "yolo: interrupted (SIGINT); stopped postCreateCommand in the container\n",
    );
    let agent = t.agents()[0].clone();
    assert!(!runs(&agent, "sleep 1001"), "{}", docker(&["top", &agent]));

    // The next up runs the unfinished hook again: one copy, not a second beside the first.
    t.file("quick", "");
    t.yolo(&["up"]).ok();
    assert!(!runs(&agent, "sleep 1001"), "{}", docker(&["top", &agent]));
}

#[test]
fn ctrl_c_or_sigterm_on_exec_without_a_tty_stops_the_command() {
    let t = Test::new();
    t.devcontainer(IMAGE);
    let (_, out) = t.up(&[]);
    let agent = out["container"]["id"].as_str().unwrap().to_string();
    for (signal_name, code, cmd) in [("INT", 130, "sleep 1002"), ("TERM", 143, "sleep 1003")] {
        let args: Vec<&str> = ["exec", "--"].into_iter().chain(cmd.split(' ')).collect();
        let exec = spawn(&t, &args);
        wait_until(30, cmd, || runs(&agent, cmd));
        signal(&exec, signal_name);
        finish(exec, 30)
            .fails_with(code)
            .assert_stderr_contains(&format!("stopped `{cmd}` in the container"));
        assert!(!runs(&agent, cmd), "{}", docker(&["top", &agent]));
    }
}

#[test]
fn ctrl_c_while_up_builds_the_image_leaves_nothing_behind_and_closes_the_session() {
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        &format!("FROM debian:bookworm-slim\nRUN echo {} && sleep 60\n", t.id),
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    let up = spawn(&t, &["up"]);
    wait_until(120, "the image build", || {
        docker(&["ps", "--no-trunc", "--format", "{{.Command}}"]).contains(&t.id)
    });
    signal(&up, "INT");
    finish(up, 40)
        .fails_with(130)
        .assert_stderr_contains("yolo: interrupted (SIGINT)");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    let networks = t.project_networks();
    assert!(networks.trim().is_empty(), "{networks}");
    let stop = t
        .events()
        .into_iter()
        .find(|e| e["kind"] == "session_stop")
        .expect("the session this up opened is closed");
    assert_eq!(stop["reason"], "yolo up failed: interrupted (SIGINT)");
}

#[test]
fn down_waits_for_the_up_that_holds_the_workspace() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "postCreateCommand": "sleep 4"}"#);
    let up = spawn(&t, &["up"]);
    wait_until(120, "the hook to run", || {
        t.agents().first().is_some_and(|a| runs(a, "sleep 4"))
    });
    let down = t.yolo(&["down"]).ok();
    down.assert_stderr_contains("yolo: waiting for another yolo up on this workspace (pid ");
    finish(up, 60).ok();
    // down came second: what up started, down stopped.
    let agent = t.agents()[0].clone();
    assert_eq!(inspect(&agent)["State"]["Running"], false);
}
