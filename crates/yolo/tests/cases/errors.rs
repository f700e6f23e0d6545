//! Bad input gets a clear, actionable error and a non-zero exit: never a panic or a Debug dump.
//! None of these needs Docker: every error here is found before yolo would talk to it.

use crate::support::*;

#[test]
fn malformed_json_names_file_line_and_column() {
    let t = Test::without_docker();
    t.devcontainer("{\n  \"image\": \"debian:bookworm-slim\"\n  \"name\": \"x\"\n}\n");
    t.yolo(&["up"]).fails_with(65).assert_stderr(&format!(
        "yolo: {}/.devcontainer/devcontainer.json:3:3: expected `,` or `}}`; is a comma missing before this?\n",
        t.workspace_shown()
    ));
}

#[test]
fn a_wrong_type_names_the_property() {
    let t = Test::without_docker();
    t.devcontainer(
        "{\n  \"image\": \"debian:bookworm-slim\",\n  \"runArgs\": \"--privileged\"\n}\n",
    );
    t.yolo(&["up"]).fails_with(65).assert_stderr(&format!(
        "yolo: {}/.devcontainer/devcontainer.json:3:14: \"runArgs\": invalid type: string \"--privileged\", expected an array\n",
        t.workspace_shown()
    ));
}

#[test]
fn features_that_are_not_an_object_are_refused_and_a_compose_config_is_checked_first() {
    let t = Test::without_docker();
    let file = format!("{}/.devcontainer/devcontainer.json", t.workspace_shown());
    // Features are supported; only a `features` that is not an object is refused.
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "features": ["node"]}"#);
    t.yolo(&["up"])
        .fails_with(65)
        .assert_stderr_contains(&file)
        .assert_stderr_contains("features")
        .assert_stderr_contains("expected an object mapping each Feature to its options");

    // A Compose config is checked before Docker (or Compose) is asked anything.
    t.devcontainer(r#"{"dockerComposeFile": "compose.yml", "service": "app"}"#);
    t.yolo(&["up"]).fails_with(65).assert_stderr(&format!(
        "yolo: {file}: \"workspaceFolder\": a Compose config needs \"workspaceFolder\": the folder in the dev service where the Compose file mounts the repository (e.g. \"/workspaces/${{localWorkspaceFolderBasename}}\")\n"
    ));
    // A stray `service` is ignored with a warning, as the reference CLI does: what stops this
    // `up` is the missing Docker, not the config.
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "service": "app"}"#);
    t.yolo(&["up"])
        .fails_with(69)
        .assert_stderr_contains("\"service\" is ignored");
}

#[test]
fn no_config_points_to_init_and_several_ask_for_config() {
    let t = Test::without_docker();
    t.yolo(&["up"]).fails_with(66).assert_stderr(&format!(
        "yolo: no devcontainer.json found in {}: looked for .devcontainer/devcontainer.json, .devcontainer.json and .devcontainer/<folder>/devcontainer.json. Create one with `yolo init`, or pass --config <path>\n",
        t.workspace_shown()
    ));

    t.file(
        ".devcontainer/a/devcontainer.json",
        r#"{"image": "debian:bookworm-slim"}"#,
    );
    t.file(
        ".devcontainer/b/devcontainer.json",
        r#"{"image": "debian:bookworm-slim"}"#,
    );
    t.yolo(&["up"])
        .fails_with(66)
        .assert_stderr_contains("--config")
        .assert_stderr_contains("a/devcontainer.json")
        .assert_stderr_contains("b/devcontainer.json");
}

#[test]
fn docker_not_running_is_a_clear_error() {
    let t = Test::without_docker();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.yolo(&["up"]).fails_with(69).assert_stderr(
        "yolo: docker: connecting to the Docker Engine at unix:///nonexistent/docker.sock (DOCKER_HOST) failed: Socket not found: /nonexistent/docker.sock\n  \
         hint: is Docker running? Start it (e.g. `sudo systemctl start docker`), check DOCKER_HOST, then run `yolo doctor`\n",
    );
    let doctor = t.yolo(&["doctor"]);
    assert_eq!(doctor.code(), 1, "{}", doctor.describe());
    doctor
        .assert_stdout_contains("✗ Docker Engine: docker: connecting to the Docker Engine at unix:///nonexistent/docker.sock (DOCKER_HOST) failed");
}

#[test]
fn a_bad_user_config_names_the_file() {
    let t = Test::without_docker();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.user_config("grants = \"privileged\"\n");
    // The rest of the message is the toml crate's, with a caret under the value.
    t.yolo(&["up"])
        .fails_with(65)
        .assert_stderr_contains(&format!(
            "yolo: {}/config.toml: TOML parse error at line 1, column 10\n",
            t.config_dir.display()
        ))
        .assert_stderr_contains("invalid type: string \"privileged\", expected a sequence");
}

#[test]
fn init_writes_a_config_and_refuses_to_overwrite() {
    let t = Test::without_docker();
    t.yolo(&["init", "--agent", "claude"]).ok();
    let text =
        std::fs::read_to_string(t.workspace.join(".devcontainer/devcontainer.json")).unwrap();
    assert!(text.contains("\"agent\": \"claude\""), "{text}");
    // Both set, so VS Code mounts the repository where yolo does.
    assert!(
        text.contains("\"workspaceFolder\": \"/workspace\""),
        "{text}"
    );
    assert!(
        text.contains(
            "\"workspaceMount\": \"source=${localWorkspaceFolder},target=/workspace,type=bind\""
        ),
        "{text}"
    );
    let dockerfile = std::fs::read_to_string(t.workspace.join(".devcontainer/Dockerfile")).unwrap();
    assert!(dockerfile.contains("claude-code"), "{dockerfile}");
    t.yolo(&["init", "--agent", "claude"])
        .fails_with(73)
        .assert_stderr_contains("--force");
    t.yolo(&["init", "--agent", "codex", "--force"]).ok();
    t.yolo(&["init", "--agent", "nope"])
        .fails_with(64)
        .assert_stderr_contains("claude, codex");
}
