//! Images: Dockerfile builds with args, target and .dockerignore; missing images.

use crate::support::*;

#[test]
fn builds_a_dockerfile_with_args_target_and_dockerignore() {
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        "FROM debian:bookworm-slim AS base\nARG GREETING=unset\nRUN echo \"$GREETING\" > /greeting\nCOPY . /ctx\n\
         FROM base AS dev\nRUN echo dev > /stage\n\
         FROM base AS prod\nRUN echo prod > /stage\n",
    );
    t.file(".devcontainer/kept.txt", "kept");
    t.file(".devcontainer/secret.key", "do not send");
    t.file(".devcontainer/.dockerignore", "*.key\n");
    t.devcontainer(
        r#"{"build": {"dockerfile": "Dockerfile", "args": {"GREETING": "hello-${localEnv:USER_FOR_TEST:default}"}, "target": "dev"}}"#,
    );
    let (_, out) = t.up(&[]);
    let image = out["container"]["image"].as_str().unwrap();
    assert!(
        image.starts_with("yolo-"),
        "deterministic yolo tag: {image}"
    );
    let got = t
        .yolo(&["exec", "sh", "-c", "cat /greeting /stage; ls /ctx"])
        .ok();
    assert!(
        got.stdout().starts_with("hello-default\ndev\n"),
        "{}",
        got.stdout()
    );
    got.assert_stdout_contains("kept.txt")
        .assert_stdout_lacks("secret.key");

    // Same workspace, same tag: the rebuild reuses it.
    t.yolo(&["down", "--remove"]).ok();
    let (_, again) = t.up(&[]);
    assert_eq!(again["container"]["image"], out["container"]["image"]);
}

#[test]
fn a_failing_build_shows_the_last_lines_of_output() {
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        // The label marks the layers the build makes before it fails (each step's image
        // carries the labels of the steps before it); the clean-up must not need it. The
        // first stage ends before the second fails: its end has no child.
        &format!(
            "FROM {BASE_IMAGE} AS first\nLABEL {LABEL}={id}\nRUN echo first > /first\n\
             FROM {BASE_IMAGE}\nLABEL {LABEL}={id}\nCOPY --from=first /first /first\n\
             RUN echo made > /made\nRUN echo about-to-fail >&2 && exit 9\n",
            id = t.id
        ),
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t.yolo(&["up"])
        .fails_with(69)
        .assert_stderr_contains("about-to-fail")
        .assert_stderr_lacks("\u{1b}") // no terminal colour codes
        .assert_stderr_contains("--rebuild");
    assert!(t.containers().is_empty());
    // Docker keeps a failed build's finished steps as untagged images nothing names: yolo
    // removes them, and never the base they stood on.
    let layers = t.layers();
    assert!(
        layers.is_empty(),
        "the failed build's layers stayed: {layers:?}"
    );
    assert!(!docker(&["images", "-q", BASE_IMAGE]).trim().is_empty());
}

#[test]
fn a_failed_build_keeps_the_layers_an_earlier_build_made() {
    // An earlier build left its first stage in Docker's cache (the end of a stage has no
    // child, and no tag). The failing build takes that stage from the cache: what it removes
    // is what it made, never that.
    let t = Test::new();
    let dockerfile = format!(
        "FROM {BASE_IMAGE} AS first\nLABEL {LABEL}={id}\nRUN echo first > /first\n\
         FROM {BASE_IMAGE}\nLABEL {LABEL}={id} stage=second\nCOPY --from=first /first /first\n\
         RUN echo made > /made\nRUN exit 9\n",
        id = t.id
    );
    t.file(".devcontainer/Dockerfile", &dockerfile);
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    let context = t.workspace.join(".devcontainer");
    docker(&[
        "build",
        "-q",
        "--target",
        "first",
        context.to_str().unwrap(),
    ]);
    let cached = t.layers();
    assert!(!cached.is_empty(), "the first build made nothing");
    t.yolo(&["up"]).fails_with(69);
    assert_eq!(
        t.layers(),
        cached,
        "the failed build removed the cached stage, or left layers of its own"
    );
}

#[test]
fn a_missing_image_that_cannot_be_pulled_is_a_clear_error() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "yolo-test-does-not-exist.invalid/nothing:1"}"#);
    t.yolo(&["up"])
        .fails_with(69)
        .assert_stderr_contains("pulling image yolo-test-does-not-exist.invalid/nothing:1");
    assert!(t.containers().is_empty());
}

#[test]
fn update_remote_user_uid_matches_the_host_user() {
    // Run yolo as a non-root host user (uid 4321) who may use Docker, like a laptop user.
    if !std::process::Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("skipped: setpriv not available");
        return;
    }
    let docker_gid = std::fs::read_to_string("/etc/group")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("docker:"))
        .and_then(|l| l.split(':').nth(2).map(str::to_string));
    let Some(docker_gid) = docker_gid else {
        eprintln!("skipped: no docker group");
        return;
    };
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        "FROM debian:bookworm-slim\nRUN useradd --create-home --uid 1000 dev\n",
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}, "remoteUser": "dev"}"#);
    std::process::Command::new("chown")
        .args(["-R", "4321:4321"])
        .arg(t.root())
        .status()
        .unwrap();
    std::process::Command::new("chmod")
        .args(["755"])
        .arg(t.root())
        .status()
        .unwrap();
    let as_user = |args: &[&str]| {
        let mut cmd = std::process::Command::new("setpriv");
        cmd.args([
            "--reuid=4321",
            "--regid=4321",
            &format!("--groups={docker_gid}"),
            "--",
        ]);
        cmd.arg(env!("CARGO_BIN_EXE_yolo")).args(args);
        let inner = t.command(&[]);
        cmd.current_dir(&t.workspace);
        for (k, v) in inner.get_envs() {
            if let (k, Some(v)) = (k, v) {
                cmd.env(k, v);
            }
        }
        cmd.env("HOME", t.root())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let up = as_user(&["up"]);
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let out = as_user(&["exec", "sh", "-c", "id -u; id -g; touch made-inside"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "4321\n4321\n");
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(t.workspace.join("made-inside")).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (4321, 4321),
        "files made inside belong to the host user"
    );
}
