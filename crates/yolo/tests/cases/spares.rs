//! Spare network namespaces (`yolo prepare`, docs/architecture.md "Spare network
//! namespaces"): made ahead on the guards' shared network, joined by a new guard, held to that
//! guard's life, stopped and removed with its session, and no way across for root in an agent.

use crate::support::*;
use serde_json::Value;
use std::time::{Duration, Instant};

/// This test's containers with their names, states and labels, as `docker inspect` says.
fn all(t: &Test) -> Vec<Value> {
    t.containers().iter().map(|id| inspect(id)).collect()
}

fn name(c: &Value) -> String {
    c["Name"]
        .as_str()
        .unwrap()
        .trim_start_matches('/')
        .to_string()
}

/// This test's unclaimed spares, running ones only.
fn spares(t: &Test) -> Vec<Value> {
    all(t)
        .into_iter()
        .filter(|c| name(c).starts_with("yolo-spare-") && c["State"]["Running"] == true)
        .collect()
}

/// The guard of the workspace at `folder` and the holder it joined (the container of its
/// network mode).
fn guard_and_holder(t: &Test, folder: &std::path::Path) -> (Value, Value) {
    let guard = all(t)
        .into_iter()
        .find(|c| {
            c["Config"]["Labels"]["dev.yolo.role"] == "guard"
                && c["Name"]
                    .as_str()
                    .unwrap()
                    .contains(folder.file_name().unwrap().to_str().unwrap())
        })
        .expect("a guard");
    let mode = guard["HostConfig"]["NetworkMode"].as_str().unwrap();
    let holder = mode
        .strip_prefix("container:")
        .unwrap_or_else(|| panic!("the guard joined no spare: {mode}"));
    (guard.clone(), inspect(holder))
}

/// A second project, `other/` beside the test's workspace, whose devcontainer.json is `config`.
fn other_project(t: &Test, config: &str) -> std::path::PathBuf {
    let other = t.root().join("other");
    std::fs::create_dir_all(other.join(".devcontainer")).unwrap();
    std::fs::write(other.join(".devcontainer/devcontainer.json"), config).unwrap();
    other
}

/// yolo with `args` in `folder` (another project than the test's workspace), with no stdin.
fn yolo_in(t: &Test, folder: &std::path::Path, args: &[&str]) -> Run {
    let output = t
        .command(args)
        .current_dir(folder)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    Run { output }
}

fn until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `yolo prepare 2` makes two spares, each a sleeping container with nothing of a session's;
/// `up` joins one (renamed to its guard's holder), the other stays; root in the agent finds
/// no listener on the holder's socket; the guard's end ends the holder; `up` starts both
/// again; `down` stops the holder, `down --remove` removes it, `prepare --remove` the rest.
#[test]
fn a_guard_joins_a_spare_made_ahead_and_holds_it_to_its_life() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "remoteUser": "root"}"#);
    t.yolo(&["prepare", "2"])
        .ok()
        .assert_stderr_contains("2 spare network namespaces ready");
    let made = spares(&t);
    assert_eq!(made.len(), 2);
    // Said, as no session's.
    t.yolo(&["status"])
        .ok()
        .assert_stderr_contains("2 spare network namespaces ready for the next guards");
    for spare in &made {
        let host = &spare["HostConfig"];
        assert_eq!(host["CapDrop"], serde_json::json!(["ALL"]), "{spare}");
        assert!(
            host["CapAdd"].as_array().is_none_or(|a| a.is_empty()),
            "{spare}"
        );
        assert_eq!(host["ReadonlyRootfs"], true);
        assert!(host["Privileged"] == false);
        assert!(spare["Mounts"].as_array().unwrap().is_empty(), "{spare}");
        assert_eq!(
            spare["Config"]["Cmd"],
            serde_json::json!(["/usr/local/bin/yolo-guard", "hold"])
        );
        // No role: nothing that lists a project's containers takes it for one of its own.
        assert!(spare["Config"]["Labels"]["dev.yolo.role"].is_null());
    }

    t.yolo(&["up"]).ok();
    let (guard, holder) = guard_and_holder(&t, &t.workspace);
    assert_eq!(name(&holder), format!("{}-netns", name(&guard)));
    assert!(
        made.iter().any(|s| s["Id"] == holder["Id"]),
        "one of the two"
    );
    assert_eq!(spares(&t).len(), 1, "the other is still a spare");
    // The firewall is the guard's: a name outside the allowlist does not resolve, the guard's
    // resolver is the agent's.
    let probe = t
        .yolo(&[
            "exec",
            "sh",
            "-c",
            "cat /etc/resolv.conf; getent hosts example.com || echo refused",
        ])
        .ok();
    probe.assert_stdout_contains("nameserver 127.0.0.1");
    probe.assert_stdout_contains("refused");
    // ATTACK: root in the agent goes for the holder's socket (the namespace's abstract one),
    // to keep the namespace alive past its guard or to stand in for the guard: no listener.
    let attack = t
        .yolo(&[
            "exec",
            "perl",
            "-MSocket",
            "-e",
            "socket(S, PF_UNIX, SOCK_STREAM, 0) or die; print connect(S, pack_sockaddr_un(\"\\0yolo-netns-holder\")) ? \"connected\\n\" : \"refused: $!\\n\"",
        ])
        .ok();
    attack.assert_stdout_contains("refused: Connection refused");

    // The guard's end ends the holder (and with it the namespace's interface).
    let holder_id = holder["Id"].as_str().unwrap().to_string();
    docker(&["kill", guard["Id"].as_str().unwrap()]);
    until(
        "the holder ended with its guard",
        Duration::from_secs(10),
        || inspect(&holder_id)["State"]["Running"] == false,
    );
    // `up` starts the holder again before its guard.
    t.yolo(&["up"]).ok();
    assert_eq!(inspect(&holder_id)["State"]["Running"], true);
    t.yolo(&["exec", "true"]).ok();

    // The holder stopped from outside takes the network away: the guard ends with it (and
    // the agent with the guard) instead of serving a session gone silently offline; `up`
    // starts all three again.
    docker(&["stop", &holder_id]);
    until(
        "the guard ended with its holder",
        Duration::from_secs(10),
        || inspect(guard["Id"].as_str().unwrap())["State"]["Running"] == false,
    );
    t.yolo(&["up"]).ok();
    t.yolo(&["exec", "true"]).ok();

    // The agent stopped alone: `up` restarts the running guard, whose holder ends with it and
    // is started again, listening, before the guard.
    let agent = all(&t)
        .into_iter()
        .find(|c| c["Config"]["Labels"]["dev.yolo.role"] == "agent")
        .unwrap();
    docker(&["stop", agent["Id"].as_str().unwrap()]);
    t.yolo(&["up"]).ok();
    t.yolo(&["exec", "true"]).ok();

    t.yolo(&["down"]).ok();
    assert_eq!(
        inspect(&holder_id)["State"]["Running"],
        false,
        "stopped by down"
    );
    t.yolo(&["up"]).ok();
    t.yolo(&["exec", "true"]).ok();
    // The last session on the engine taken down: its holder goes, and the spare left for the
    // next one too. Nothing of yolo's is left in Docker.
    t.yolo(&["down", "--remove"])
        .ok()
        .assert_stderr_contains(&format!("{}-netns", name(&guard)))
        .assert_stderr_contains("1 spare network namespace");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    t.yolo(&["prepare", "--remove"])
        .ok()
        .assert_stderr_contains("removed 0 spare");
}

/// With `[firewall] spares` (here through `YOLO_SPARES`), the `up` that makes a guard keeps a
/// spare ready behind it, once it has ended; the next cold `up` (another project's here)
/// joins it. A guard that needs its namespace's own settings (a published port) does not
/// take one. An `up` taken down at once leaves nothing: the `down --remove` of the last
/// session waits for the top-up under way and removes what it made.
#[test]
fn up_keeps_a_spare_ready_for_the_next_guard() {
    let mut t = Test::new();
    t.env("YOLO_SPARES", "1");
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.yolo(&["up"]).ok();
    t.yolo(&["down", "--remove"]).ok();
    assert!(t.containers().is_empty(), "{:?}", t.containers());

    t.yolo(&["up"]).ok();
    let first = all(&t)
        .into_iter()
        .find(|c| c["Config"]["Labels"]["dev.yolo.role"] == "guard")
        .unwrap();
    assert!(
        !first["HostConfig"]["NetworkMode"]
            .as_str()
            .unwrap()
            .starts_with("container:"),
        "no spare was there for the first"
    );
    until(
        "a spare made behind the first up",
        Duration::from_secs(20),
        || spares(&t).len() == 1,
    );
    let other = other_project(&t, r#"{"image": "debian:bookworm-slim"}"#);
    yolo_in(&t, &other, &["up"]).ok();
    let (_, holder) = guard_and_holder(&t, &other);
    assert_eq!(holder["State"]["Running"], true);
    until("the next spare", Duration::from_secs(20), || {
        spares(&t).len() == 1
    });

    // A published port belongs to the namespace's owner: this guard is attached itself, and
    // leaves the spare where it is.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    t.yolo(&["down", "--remove"]).ok();
    assert_eq!(
        spares(&t).len(),
        1,
        "another session is left: the spare stays"
    );
    t.devcontainer(&format!(
        r#"{{"image": "debian:bookworm-slim", "forwardPorts": [{port}]}}"#
    ));
    t.yolo(&["up", "--accept-config"]).ok();
    let guard = all(&t)
        .into_iter()
        .find(|c| c["Config"]["Labels"]["dev.yolo.role"] == "guard" && !name(c).contains("other"))
        .unwrap();
    assert!(!guard["HostConfig"]["NetworkMode"]
        .as_str()
        .unwrap()
        .starts_with("container:"));
    assert_eq!(spares(&t).len(), 1);
    t.yolo(&["down", "--remove"]).ok();
    yolo_in(&t, &other, &["down", "--remove"]).ok();
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}

/// ATTACK: two projects whose guards joined spares on the shared network. Root in one agent,
/// its firewall open, goes for the other's listener and DNS by the other namespace's address,
/// and for the spare still unclaimed; nothing answers. The control: the victim reaches its
/// own listener.
#[test]
fn root_in_an_agent_cannot_reach_another_session_through_the_spares() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "remoteUser": "root"}"#);
    let other = other_project(
        &t,
        r#"{"image": "debian:bookworm-slim", "remoteUser": "root"}"#,
    );
    t.yolo(&["prepare", "3"]).ok();
    t.yolo(&["up"]).ok();
    yolo_in(&t, &other, &["up", "--network", "open"]).ok();
    let (_, victim_holder) = guard_and_holder(&t, &t.workspace);
    let (_, attacker_holder) = guard_and_holder(&t, &other);
    assert_ne!(victim_holder["Id"], attacker_holder["Id"]);
    let ip = |c: &Value| -> String {
        let networks = c["NetworkSettings"]["Networks"].as_object().unwrap();
        networks.values().next().unwrap()["IPAddress"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let victim_ip = ip(&victim_holder);
    let spare_ip = ip(&spares(&t)[0]);
    let victim_agent = all(&t)
        .into_iter()
        .find(|c| {
            c["Config"]["Labels"]["dev.yolo.role"] == "agent"
                && c["HostConfig"]["NetworkMode"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("container:"))
                && !name(c).contains("other")
        })
        .unwrap();
    docker(&[
        "exec",
        "-d",
        victim_agent["Id"].as_str().unwrap(),
        "perl",
        "-MIO::Socket::INET",
        "-e",
        "$s = IO::Socket::INET->new(LocalPort => 7070, Listen => 5, ReuseAddr => 1) or die; while ($c = $s->accept) { print $c \"victim hello\\n\"; close $c }",
    ]);
    let tcp = |ip: &str, p: u16| {
        format!("perl -MIO::Socket::INET -e '$c = IO::Socket::INET->new(PeerAddr => \"{ip}\", PeerPort => {p}, Timeout => 3) or exit 7; print <$c>'")
    };
    let mut said = String::new();
    until(
        "the control: the victim's own listener",
        Duration::from_secs(10),
        || {
            said = t
                .yolo(&["exec", "sh", "-c", &tcp("127.0.0.1", 7070)])
                .stdout();
            said.contains("victim hello")
        },
    );
    let attacker =
        |script: &str| -> String { yolo_in(&t, &other, &["exec", "sh", "-c", script]).stdout() };
    for (what, target, port) in [
        ("the victim's listener", &victim_ip, 7070),
        ("the victim's DNS over TCP", &victim_ip, 53),
        ("the unclaimed spare", &spare_ip, 7070),
    ] {
        let said = attacker(&tcp(target, port));
        assert!(!said.contains("victim hello"), "{what}: {said}");
    }
    let dns = attacker(&format!("perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => \"{victim_ip}\", PeerPort => 53, Proto => \"udp\") or exit 7; $s->send(pack(\"nnnnnn\", 4242, 256, 1, 0, 0, 0) . \"\\7example\\3com\\0\" . pack(\"nn\", 1, 1)); $r = \"\"; eval {{ local $SIG{{ALRM}} = sub {{ die }}; alarm 3; $s->recv($r, 512); alarm 0 }}; print \"answered\" if length $r'"));
    assert!(
        !dns.contains("answered"),
        "the victim's DNS answered: {dns}"
    );
    yolo_in(&t, &other, &["down", "--remove"]).ok();
    t.yolo(&["down", "--remove"]).ok();
    t.yolo(&["prepare", "--remove"]).ok();
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}

/// Bad input is said before anything is made: too many spares, a count that is not one, an
/// environment override that is not a number; and without Docker, the engine's error.
#[test]
fn prepare_refuses_bad_counts_and_says_when_docker_is_not_there() {
    let mut t = Test::without_docker();
    t.yolo(&["prepare", "65"])
        .fails_with(64)
        .assert_stderr_contains("65 spares is more than 64");
    t.yolo(&["prepare", "lots"])
        .fails_with(64)
        .assert_stderr_contains("invalid value 'lots'");
    t.yolo(&["prepare", "2", "--remove"]).fails_with(64);
    t.yolo(&["prepare", "1"]).fails_with(69);
    t.env("YOLO_SPARES", "many");
    t.yolo(&["prepare"])
        .fails_with(65)
        .assert_stderr_contains("YOLO_SPARES");
    // Empty, the environment says nothing: the user's config is read, and refused.
    let mut t = Test::without_docker();
    t.user_config("[firewall]\nspares = 99\n");
    t.env("YOLO_SPARES", "");
    let run = t.yolo(&["up"]);
    assert_eq!(run.code(), 65, "{}", run.describe());
    run.assert_stderr_contains("firewall.spares");
}

/// With `[firewall] docker_network`, the spares are made on that network, once the first `up`
/// has made it; the next guard joins one there.
#[test]
fn spares_go_on_the_network_the_config_names() {
    let t = Test::new();
    let network = format!("yolo-{}-named", t.id);
    t.user_config(&format!("[firewall]\ndocker_network = \"{network}\"\n"));
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.yolo(&["prepare", "1"])
        .fails_with(64)
        .assert_stderr_contains(&format!("the network {network} of your yolo config"));
    t.yolo(&["up"]).ok();
    t.yolo(&["prepare", "1"]).ok();
    let spare = spares(&t).pop().expect("a spare");
    let on: Vec<&String> = spare["NetworkSettings"]["Networks"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(on, vec![&network]);
    let other = other_project(&t, r#"{"image": "debian:bookworm-slim"}"#);
    yolo_in(&t, &other, &["up"]).ok();
    let (_, holder) = guard_and_holder(&t, &other);
    assert_eq!(holder["Id"], spare["Id"]);
    yolo_in(&t, &other, &["exec", "true"]).ok();
    yolo_in(&t, &other, &["down", "--remove"]).ok();
    t.yolo(&["down", "--remove"]).ok();
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}

/// ATTACK: a container that carries a spare's label and name (an image's labels are its
/// author's; a repository names its Compose services) is never taken for one: the next guard
/// does not join it, `prepare --remove` leaves it, `status` does not count it.
#[test]
fn a_container_posing_as_a_spare_is_never_joined() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.yolo(&["up"]).ok();
    t.yolo(&["down", "--remove"]).ok();
    let network = inspect_network(&t.shared_networks()[0])["Name"]
        .as_str()
        .unwrap()
        .to_string();
    let evil = docker(&[
        "run",
        "-d",
        "--name",
        &format!("yolo-spare-{}", t.id),
        "--label",
        &format!("{LABEL}={}", t.id),
        "--label",
        "dev.yolo.managed=true",
        "--label",
        &format!("dev.yolo.spare={network}"),
        "--network",
        &network,
        "debian:bookworm-slim",
        "sleep",
        "infinity",
    ]);
    let evil = evil.trim();
    t.yolo(&["status"])
        .ok()
        .assert_stderr_lacks("spare network namespace");
    t.yolo(&["up"]).ok();
    let guard = all(&t)
        .into_iter()
        .find(|c| c["Config"]["Labels"]["dev.yolo.role"] == "guard")
        .unwrap();
    let mode = guard["HostConfig"]["NetworkMode"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!mode.contains(evil), "{mode}");
    assert!(!mode.starts_with("container:"), "{mode}");
    t.yolo(&["prepare", "--remove"])
        .ok()
        .assert_stderr_contains("removed 0 spare");
    assert_eq!(inspect(evil)["State"]["Running"], true);
    assert_eq!(
        inspect(evil)["Name"].as_str().unwrap(),
        format!("/yolo-spare-{}", t.id),
        "not renamed"
    );
    t.yolo(&["down", "--remove"]).ok();
}
