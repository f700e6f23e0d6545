//! Issue 7.2, approval without gaps: each test performs the attack from the repository, as the
//! agent would, and fails if the gap reopens.

use crate::support::*;

/// What the agent plants: a host file (a private key) the Dockerfile is linked to.
const SECRET: &str = "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n";

#[test]
fn a_dockerfile_symlinked_to_a_host_file_is_refused_before_anything_reads_it() {
    let t = Test::new();
    let key = t.root().join("id_rsa");
    std::fs::write(&key, SECRET).unwrap();
    std::fs::create_dir_all(t.workspace.join(".devcontainer")).unwrap();
    std::os::unix::fs::symlink(&key, t.workspace.join(".devcontainer/Dockerfile")).unwrap();
    t.file("app/main.c", "int main(void) { return 0; }\n");
    // Inside the context (Docker reads it from the tar) and outside it (yolo adds it to the tar).
    for config in [
        r#"{"build": {"dockerfile": "Dockerfile"}}"#,
        r#"{"build": {"dockerfile": "Dockerfile", "context": "../app"}}"#,
    ] {
        t.devcontainer(config);
        let run = t.yolo(&["up", "--accept-config"]).fails_with(77);
        run.assert_stderr_contains("\"build.dockerfile\" asks for")
            .assert_stderr_contains("id_rsa")
            .assert_stderr_contains("--grant host-mount=");
        for line in SECRET.lines() {
            run.assert_stderr_lacks(line).assert_stdout_lacks(line);
        }
    }
    assert!(t.containers().is_empty());
    assert!(docker(&[
        "images",
        "-q",
        "--filter",
        &format!("label={LABEL}={}", t.id)
    ])
    .is_empty());
}

#[test]
fn another_workspaces_agent_volume_cannot_be_mounted() {
    let t = Test::new();
    // The agent state of another workspace, as yolo makes it.
    let other = format!("yolo-claude-0ther{}", t.id);
    docker(&[
        "volume",
        "create",
        "--label",
        &format!("{LABEL}={}", t.id),
        "--label",
        "dev.yolo.managed=true",
        "--label",
        "dev.yolo.id=0ther",
        &other,
    ]);
    for mount in [
        format!(r#""mounts": ["source={other},target=/stolen,type=volume"]"#),
        format!(r#""runArgs": ["-v", "{other}:/stolen"]"#),
    ] {
        t.devcontainer(&format!(r#"{{"image": "debian:bookworm-slim", {mount}}}"#));
        t.yolo(&["up", "--accept-config"])
            .fails_with(77)
            .assert_stderr_contains(&format!("the volume \"{other}\""))
            .assert_stderr_contains("rename the volume");
    }
    assert!(t.containers().is_empty());
}
