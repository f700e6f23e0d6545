//! Everyday configs that used to break `up`: more CPUs than the engine has, busy ports,
//! typos, runArgs the corpus uses, a subfolder, a Docker context.

use crate::support::*;

#[test]
fn more_cpus_than_the_engine_has_are_capped_with_a_warning() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "hostRequirements": {"cpus": 64}}"#);
    let (run, out) = t.up(&[]);
    run.assert_stderr_contains("the repository asks for 64 CPUs");
    let c = inspect(out["container"]["id"].as_str().unwrap());
    let cores: i64 = docker(&["info", "--format", "{{.NCPU}}"])
        .trim()
        .parse()
        .unwrap();
    let nano = c["HostConfig"]["NanoCpus"].as_i64().unwrap();
    assert!(
        nano > 0 && nano < cores * 1_000_000_000,
        "{nano} for {cores} cores"
    );
}

#[test]
fn a_misspelt_property_is_named_with_a_suggestion_and_a_stray_service_is_ignored() {
    let t = Test::without_docker();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "remotUser": "dev", "service": "app", "$schema": "x", "waitFor": "postCreateCommand"}"#,
    );
    let run = t.yolo(&["up"]).fails_with(69); // got past the config, to Docker
    run.assert_stderr_contains(
        "unknown property \"remotUser\" is ignored: did you mean remoteUser?",
    )
    .assert_stderr_contains("\"service\" is ignored")
    .assert_stderr_lacks("$schema")
    .assert_stderr_lacks("waitFor");
}

#[test]
fn a_mount_from_a_withheld_variable_points_at_pass_env_not_at_an_empty_path() {
    let mut t = Test::without_docker();
    let home = t.root().display().to_string();
    t.env("HOME", &home);
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "mounts": ["source=${localEnv:HOME}/.ssh,target=/home/dev/.ssh,type=bind"]}"#,
    );
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("pass_env = [\"HOME\"]")
        .assert_stderr_contains("${localEnv:HOME}")
        .assert_stderr_lacks("host-mount=/.ssh");

    // With HOME passed, the hint names the real path.
    t.user_config("pass_env = [\"HOME\"]\n");
    let ssh = format!("host-mount={}/.ssh", t.root().display());
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains(&ssh)
        .assert_stderr_lacks("pass_env");
}

#[test]
fn up_in_a_subfolder_finds_the_config_at_the_repository_root() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.file(".git/HEAD", "ref: refs/heads/main\n");
    t.file("src/deep/main.rs", "fn main() {}\n");
    let sub = t.workspace.join("src/deep");
    let run = |args: &[&str]| {
        let output = t
            .command(args)
            .current_dir(&sub)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        Run { output }.ok()
    };
    let up = run(&["up", "--json"]);
    let out: serde_json::Value = serde_json::from_str(&up.stdout()).unwrap();
    assert_eq!(out["container"]["workspace"], t.workspace_shown(), "{out}");
    // The whole repository is mounted, and exec from the subfolder reaches the same container.
    let listed = run(&["exec", "ls", "/workspace/src/deep"]).stdout();
    assert_eq!(listed.trim(), "main.rs");
    assert_eq!(t.agents().len(), 1);
}
