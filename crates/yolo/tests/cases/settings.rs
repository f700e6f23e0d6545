//! Flags and the user's config are resolved before anything runs: a bad flag is a usage error
//! (64), a bad config value a config error (65) naming the file and the key, and neither leaves
//! a session, state file, image, container, volume or network behind.

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

/// Nothing in yolo's data folder: no workspace state (the approval is saved there), no session.
fn no_state(t: &Test) {
    let states: Vec<_> = std::fs::read_dir(t.data_dir.join("workspaces"))
        .map(|dir| dir.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(states.is_empty(), "state files: {states:?}");
    assert!(
        t.events().is_empty(),
        "no session was opened: {:?}",
        t.events()
    );
}

fn nothing_left(t: &Test) {
    no_state(t);
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

const FORMS: &str = "accepted forms: example.com, *.example.com, example.com:443, *.example.com:80,443, 1.2.3.4, 10.0.0.0/8, 10.0.0.0/8:443, 2001:db8::1, 2001:db8::/32, [2001:db8::1]:443, [2001:db8::/32]:443";

/// Bad config.toml values, each with the error after `<config.toml>: `.
fn bad_user_configs() -> Vec<(&'static str, String)> {
    vec![
        (
            "[firewall]\nupstream_dns = \"resolver.example\"\n",
            "\"firewall.upstream_dns\": \"resolver.example\" is not an IP address with an optional port, e.g. 192.0.2.53 or 192.0.2.53:5353".into(),
        ),
        (
            "[firewall]\nallow = [\"example.com\", \"*\"]\n",
            format!("\"firewall.allow\": \"*\": * alone would allow everything; use --network open instead; {FORMS}"),
        ),
        (
            "[firewall]\npresets = [\"npm\", \"nope\"]\n",
            "\"firewall.presets\": unknown firewall preset \"nope\"; available: anthropic, crates, debian, github, go, google-gemini, npm, openai, openrouter, pypi, ubuntu, vscode".into(),
        ),
        (
            "[limits]\nmemory = \"lots\"\n",
            "\"limits.memory\": \"lots\" is not a size like 512m, 4g or 8gb".into(),
        ),
    ]
}

#[test]
fn a_bad_value_in_the_user_config_exits_65_and_leaves_nothing() {
    let t = buildable();
    for (toml, error) in bad_user_configs() {
        t.user_config(toml);
        let expected = format!("yolo: {}/config.toml: {error}\n", t.config_dir.display());
        t.yolo(&["up"]).fails_with(65).assert_stderr(&expected);
        t.yolo(&["run", "claude"])
            .fails_with(65)
            .assert_stderr(&expected);
        nothing_left(&t);
    }
}

/// The config is checked before Docker is asked anything: still 65, not 69.
#[test]
fn a_bad_value_in_the_user_config_is_65_without_docker_too() {
    let t = Test::without_docker();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    for (toml, error) in bad_user_configs() {
        t.user_config(toml);
        t.yolo(&["up"]).fails_with(65).assert_stderr(&format!(
            "yolo: {}/config.toml: {error}\n",
            t.config_dir.display()
        ));
        no_state(&t);
    }
}

/// The repository's own allowlist requests are checked by policy, before Docker is touched.
#[test]
fn a_bad_repository_pattern_or_preset_exits_65_naming_the_property_and_leaves_nothing() {
    let requests = [
        (
            r#"{"allow": ["example.com", "bad pattern"]}"#,
            format!("\"customizations.yolo.firewall.allow[1]\": \"bad pattern\": invalid character ' ' in a domain name; {FORMS}"),
        ),
        (
            r#"{"presets": ["nope"]}"#,
            "\"customizations.yolo.firewall.presets[0]\": unknown firewall preset \"nope\"; available: anthropic, crates, debian, github, go, google-gemini, npm, openai, openrouter, pypi, ubuntu, vscode".into(),
        ),
    ];
    let t = buildable();
    let offline = Test::without_docker();
    offline.file(".devcontainer/Dockerfile", "FROM debian:bookworm-slim\n");
    for (firewall, error) in requests {
        for t in [&t, &offline] {
            t.devcontainer(&format!(
                r#"{{"build": {{"dockerfile": "Dockerfile"}}, "customizations": {{"yolo": {{"firewall": {firewall}}}}}}}"#
            ));
            t.yolo(&["up"]).fails_with(65).assert_stderr(&format!(
                "yolo: {}/.devcontainer/devcontainer.json: {error}\n",
                t.workspace_shown()
            ));
            no_state(t);
        }
        nothing_left(&t);
    }
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
