//! Bad input gets a clear, actionable error and a non-zero exit: never a panic or a Debug dump.

use crate::support::*;

#[test]
fn malformed_json_names_file_line_and_column() {
    let t = Test::new();
    t.devcontainer("{\n  \"image\": \"debian:bookworm-slim\"\n  \"name\": \"x\"\n}\n");
    let run = t.yolo(&["up"]).fails_with(65);
    assert!(
        run.stderr().contains("devcontainer.json:3:"),
        "{}",
        run.stderr()
    );
}

#[test]
fn a_wrong_type_names_the_property() {
    let t = Test::new();
    t.devcontainer(
        "{\n  \"image\": \"debian:bookworm-slim\",\n  \"runArgs\": \"--privileged\"\n}\n",
    );
    let run = t.yolo(&["up"]).fails_with(65);
    assert!(
        run.stderr().contains("devcontainer.json:3:"),
        "{}",
        run.stderr()
    );
    assert!(run.stderr().contains("runArgs"), "{}", run.stderr());
    assert!(
        !run.stderr().contains("Error {"),
        "no Debug output: {}",
        run.stderr()
    );
}

#[test]
fn features_and_compose_are_refused_as_not_yet_supported() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "features": {"ghcr.io/devcontainers/features/node:1": {}}}"#);
    let run = t.yolo(&["up"]).fails_with(65);
    assert!(run.stderr().contains("features"), "{}", run.stderr());
    assert!(
        run.stderr().contains("not supported yet"),
        "{}",
        run.stderr()
    );

    t.devcontainer(r#"{"dockerComposeFile": "compose.yml", "service": "app"}"#);
    let run = t.yolo(&["up"]).fails_with(65);
    assert!(
        run.stderr().contains("dockerComposeFile"),
        "{}",
        run.stderr()
    );
}

#[test]
fn no_config_points_to_init_and_several_ask_for_config() {
    let t = Test::new();
    let run = t.yolo(&["up"]).fails_with(66);
    assert!(run.stderr().contains("yolo init"), "{}", run.stderr());

    t.file(
        ".devcontainer/a/devcontainer.json",
        r#"{"image": "debian:bookworm-slim"}"#,
    );
    t.file(
        ".devcontainer/b/devcontainer.json",
        r#"{"image": "debian:bookworm-slim"}"#,
    );
    let run = t.yolo(&["up"]).fails_with(66);
    assert!(run.stderr().contains("--config"), "{}", run.stderr());
    assert!(
        run.stderr().contains("a/devcontainer.json")
            && run.stderr().contains("b/devcontainer.json")
    );
}

#[test]
fn docker_not_running_is_a_clear_error() {
    let mut t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.env("DOCKER_HOST", "unix:///nonexistent/docker.sock");
    let run = t.yolo(&["up"]).fails_with(69);
    assert!(run.stderr().contains("Docker"), "{}", run.stderr());
    let doctor = t.yolo(&["doctor"]);
    assert_eq!(doctor.code(), 1);
    assert!(doctor.stdout().contains("✗"), "{}", doctor.stdout());
}

#[test]
fn a_bad_user_config_names_the_file() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.user_config("grants = \"privileged\"\n");
    let run = t.yolo(&["up"]).fails_with(65);
    assert!(run.stderr().contains("config.toml"), "{}", run.stderr());
}

#[test]
fn init_writes_a_config_and_refuses_to_overwrite() {
    let t = Test::new();
    t.yolo(&["init", "--agent", "claude"]).ok();
    let text =
        std::fs::read_to_string(t.workspace.join(".devcontainer/devcontainer.json")).unwrap();
    assert!(text.contains("\"agent\": \"claude\""));
    assert!(
        std::fs::read_to_string(t.workspace.join(".devcontainer/Dockerfile"))
            .unwrap()
            .contains("claude-code")
    );
    let run = t.yolo(&["init", "--agent", "claude"]).fails_with(1);
    assert!(run.stderr().contains("--force"));
    t.yolo(&["init", "--agent", "codex", "--force"]).ok();
    let run = t.yolo(&["init", "--agent", "nope"]).fails_with(1);
    assert!(run.stderr().contains("claude, codex"));
}
