//! Flags are resolved before anything runs: a bad value is a usage error (64) that leaves no
//! session, image, container, volume or network behind.

use crate::support::*;

/// A project whose `up` would build an image, open a session and create containers.
fn buildable() -> Test {
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        "FROM debian:bookworm-slim\nRUN echo built > /built\n",
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t
}

fn nothing_left(t: &Test) {
    assert!(
        t.containers().is_empty(),
        "containers: {:?}",
        t.containers()
    );
    let label = format!("label={LABEL}={}", t.id);
    for list in [
        &["images", "-q", "--filter", &label][..],
        &["volume", "ls", "-q", "--filter", &label],
        &["network", "ls", "-q", "--filter", &label],
    ] {
        assert_eq!(docker(list).trim(), "", "docker {list:?}");
    }
    assert!(
        t.events().is_empty(),
        "no session was opened: {:?}",
        t.events()
    );
    t.yolo(&["audit", "--list"]).assert_stdout_lacks("open");
}

#[test]
fn bad_flag_values_exit_64_and_leave_nothing() {
    let t = buildable();
    for (args, named) in [
        (&["--upstream-dns", "nope"][..], "--upstream-dns"),
        (&["--network", "bridge"], "--network"),
        (&["--grant", "everything"], "--grant"),
        (&["--memory", "lots"], "--memory"),
        (&["--pids", "0"], "--pids"),
        (&["--allow", "*"], "--allow"),
    ] {
        let mut argv = vec!["up"];
        argv.extend_from_slice(args);
        let run = t.yolo(&argv).fails_with(64);
        let stderr = run.stderr();
        assert!(stderr.contains(named), "{args:?} names its flag: {stderr}");
        assert!(
            stderr.contains(args[1]),
            "{args:?} shows the value: {stderr}"
        );
        nothing_left(&t);
    }
    // `run` shares the flags.
    t.yolo(&["run", "claude", "--network", "bridge"])
        .fails_with(64);
    nothing_left(&t);
}

#[test]
fn a_bad_value_in_the_user_config_exits_65_and_leaves_nothing() {
    let t = buildable();
    t.user_config("[firewall]\nupstream_dns = \"resolver.example\"\n");
    t.yolo(&["up"])
        .fails_with(65)
        .assert_stderr_contains("config.toml")
        .assert_stderr_contains(
            "\"firewall.upstream_dns\": \"resolver.example\" is not an IP address",
        );
    nothing_left(&t);
}

#[test]
fn unknown_subcommands_and_flags_are_usage_errors_and_help_is_success() {
    let t = Test::new();
    t.yolo(&["launch"]).fails_with(64);
    t.yolo(&["up", "--no-such-flag"]).fails_with(64);
    t.yolo(&[]).fails_with(64);
    // The whole grant list is in the help, and host-network is not offered.
    t.yolo(&["up", "--help"])
        .ok()
        .assert_stdout_contains("--grant")
        .assert_stdout_contains("initialize-command")
        .assert_stdout_lacks("host-network");
    t.yolo(&["--version"]).ok();
}
