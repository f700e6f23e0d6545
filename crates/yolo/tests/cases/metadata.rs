//! Image metadata: the `devcontainer.metadata` label of the image (built here from
//! `debian:bookworm-slim`, carrying the test's label so the drop removes it) shapes the
//! container as in VS Code: user, environment, hooks before the config's, requests through the
//! policy; the container carries the merged label; the default workspace folder and the uid
//! update follow the reference CLI.

use crate::support::*;
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Output, Stdio};

/// An image of this test: `debian:bookworm-slim` with a `dev` user (uid 1000) and `label` as
/// its `devcontainer.metadata` label (in a Dockerfile `LABEL`, single-quoted).
fn image_with_label(t: &Test, name: &str, label: &str) -> String {
    let tag = format!("yolo-test-meta-{name}-{}", t.id);
    let dockerfile = format!(
        "FROM {BASE_IMAGE}\nRUN useradd --create-home --uid 1000 dev\nLABEL devcontainer.metadata='{label}'\n"
    );
    let mut build = Command::new("docker")
        // `--no-cache`: layers of its own, so another test's clean-up pruning a shared cached
        // layer cannot fail this build mid-way ("failed to get digest").
        .args(["build", "--no-cache", "-q", "-t", &tag, "--label"])
        .arg(format!("{LABEL}={}", t.id))
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    build
        .stdin
        .take()
        .unwrap()
        .write_all(dockerfile.as_bytes())
        .unwrap();
    let out = build.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    tag
}

/// The gid of the host's `docker` group, and whether `setpriv` can run yolo as another user;
/// `None` (the test is skipped) without either.
fn docker_gid() -> Option<String> {
    let setpriv = Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let gid = std::fs::read_to_string("/etc/group")
        .ok()?
        .lines()
        .find(|l| l.starts_with("docker:"))
        .and_then(|l| l.split(':').nth(2).map(str::to_string));
    if !setpriv || gid.is_none() {
        eprintln!("skipped: needs setpriv and a docker group");
        return None;
    }
    gid
}

/// Hand the test's folders to `uid:gid`, so yolo can run as that user.
fn give_to(t: &Test, uid: u32, gid: u32) {
    let owner = format!("{uid}:{gid}");
    assert!(Command::new("chown")
        .args(["-R", &owner])
        .arg(t.root())
        .status()
        .unwrap()
        .success());
    assert!(Command::new("chmod")
        .arg("755")
        .arg(t.root())
        .status()
        .unwrap()
        .success());
}

/// yolo run as host user `uid:gid` (with the docker group), like a laptop user.
fn yolo_as(t: &Test, uid: u32, gid: u32, docker_gid: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new("setpriv");
    cmd.args([
        &format!("--reuid={uid}"),
        &format!("--regid={gid}"),
        &format!("--groups={docker_gid}"),
        "--",
    ]);
    cmd.arg(env!("CARGO_BIN_EXE_yolo")).args(args);
    for (k, v) in t.command(&[]).get_envs() {
        if let (k, Some(v)) = (k, v) {
            cmd.env(k, v);
        }
    }
    cmd.current_dir(&t.workspace)
        .env("HOME", t.root())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[track_caller]
fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_labels_user_env_and_hooks_shape_the_container_and_its_label() {
    let Some(docker_gid) = docker_gid() else {
        return;
    };
    let t = Test::new();
    let label = r#"[{"remoteUser": "dev", "containerEnv": {"FROM_LABEL": "yes", "BOTH": "label"}, "postCreateCommand": "echo image >> /tmp/order"}]"#;
    let image = image_with_label(&t, "user", label);
    t.devcontainer(&format!(
        r#"{{"image": "{image}", "containerEnv": {{"BOTH": "config"}}, "postCreateCommand": "echo config >> /tmp/order",
            "customizations": {{"vscode": {{"extensions": ["ms-python.python"]}}}}}}"#
    ));
    give_to(&t, 4321, 4321);
    let up = yolo_as(&t, 4321, 4321, &docker_gid, &["up", "--json"]);
    let up: serde_json::Value = serde_json::from_str(&ok(up)).unwrap();
    assert_eq!(up["container"]["remote_user"], "dev");
    assert_eq!(up["container"]["workspace_folder"], "/workspaces/repo");

    let script = "whoami; id -u; echo $FROM_LABEL $BOTH; cat /tmp/order; pwd; touch made-inside";
    let out = ok(yolo_as(
        &t,
        4321,
        4321,
        &docker_gid,
        &["exec", "sh", "-c", script],
    ));
    assert_eq!(
        out,
        "dev\n4321\nyes config\nimage\nconfig\n/workspaces/repo\n"
    );
    let meta = std::fs::metadata(t.workspace.join("made-inside")).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (4321, 4321),
        "files the label's user makes belong to the host user"
    );

    // The container carries the merged metadata: the image's entry, then the config's own.
    let id = up["container"]["id"].as_str().unwrap();
    let labels = &inspect(id)["Config"]["Labels"];
    let merged: serde_json::Value =
        serde_json::from_str(labels["devcontainer.metadata"].as_str().unwrap()).unwrap();
    assert_eq!(
        merged,
        serde_json::json!([
            {"remoteUser": "dev", "containerEnv": {"FROM_LABEL": "yes", "BOTH": "label"},
             "postCreateCommand": "echo image >> /tmp/order"},
            {"containerEnv": {"BOTH": "config"}, "postCreateCommand": "echo config >> /tmp/order",
             "customizations": {"vscode": {"extensions": ["ms-python.python"]}}}
        ])
    );
    let workspace = t.workspace.canonicalize().unwrap().display().to_string();
    assert_eq!(labels["devcontainer.local_folder"], workspace.as_str());

    // The label was read before planning too: the same config, not stale, reused.
    let again = yolo_as(&t, 4321, 4321, &docker_gid, &["up", "--json"]);
    let stderr = String::from_utf8_lossy(&again.stderr).into_owned();
    let again: serde_json::Value = serde_json::from_str(&ok(again)).unwrap();
    assert_eq!(again["action"], "running", "{again}");
    assert_eq!(again["stale"], false, "{again}\n{stderr}");
}

#[test]
fn a_labels_hook_runs_as_its_own_entry_with_the_images_name() {
    let t = Test::new();
    let image = image_with_label(
        &t,
        "hook",
        r#"{"postStartCommand": "echo from-the-image-label"}"#,
    );
    t.devcontainer(&format!(
        r#"{{"image": "{image}", "postStartCommand": "echo from-the-config"}}"#
    ));
    let run = t.yolo(&["up"]).ok();
    let stderr = run.stderr();
    let label_line = format!("[postStartCommand ({image} label[0])] from-the-image-label\n");
    let image_at = stderr
        .find(&label_line)
        .unwrap_or_else(|| panic!("{stderr}"));
    let config_at = stderr
        .find("[postStartCommand] from-the-config\n")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(image_at < config_at, "the image's hook first:\n{stderr}");
}

#[test]
fn a_labels_privileged_or_capability_is_refused_naming_the_image_until_granted() {
    let t = Test::new();
    // Refused under `requests = "refuse"` (declined by default).
    t.user_config("[policy]\nrequests = \"refuse\"\n");
    let image = image_with_label(&t, "priv", r#"[{}, {"privileged": true}]"#);
    t.devcontainer(&format!(r#"{{"image": "{image}"}}"#));
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains(&format!(
            "privileged (asked by the devcontainer.metadata label of image {image} (entry 1))"
        ))
        .assert_stderr_contains("--grant privileged");
    assert!(t.containers().is_empty(), "nothing made");
    // Granted, it reaches the container (a capability: a privileged container cannot start on
    // every engine the tests run on).
    let image = image_with_label(&t, "cap", r#"[{"capAdd": ["SYS_PTRACE"]}]"#);
    t.devcontainer(&format!(r#"{{"image": "{image}"}}"#));
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains(&format!(
            "capAdd[0] (asked by the devcontainer.metadata label of image {image} (entry 0))"
        ))
        .assert_stderr_contains("--grant cap-add=SYS_PTRACE");
    assert!(t.containers().is_empty(), "nothing made");
    let (_, up) = t.up(&["--grant", "cap-add=SYS_PTRACE"]);
    let id = up["container"]["id"].as_str().unwrap();
    let caps = inspect(id)["HostConfig"]["CapAdd"].to_string();
    assert!(caps.contains("SYS_PTRACE"), "{caps}");
}

#[test]
fn a_label_asking_a_host_bind_in_a_built_image_is_refused_and_the_up_undone() {
    // The image is built by this `up` (its label read only afterwards): the refusal comes after
    // the guard and the image were made, and the roll back removes what this `up` made. Under
    // `requests = "refuse"` (declined by default).
    let t = Test::new();
    t.user_config("[policy]\nrequests = \"refuse\"\n");
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BASE_IMAGE}\nLABEL devcontainer.metadata='[{{\"mounts\": [\"source=/etc,target=/host-etc,type=bind\"]}}]'\n"
        ),
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    let run = t.yolo(&["up"]).fails_with(77);
    run.assert_stderr_contains(
        "mounts[0] (asked by the devcontainer.metadata label of image yolo-",
    )
    .assert_stderr_contains("a bind mount of the host's /etc at /host-etc")
    .assert_stderr_contains("--grant host-mount=/etc");
    assert!(t.containers().is_empty(), "undone:\n{}", run.describe());
    // Now the image is there: refused before anything is made; granted, mounted.
    t.yolo(&["up"]).fails_with(77);
    assert!(t.containers().is_empty());
    t.yolo(&["up", "--grant", "host-mount=/etc"]).ok();
    let out = t.yolo(&["exec", "test", "-f", "/host-etc/hostname"]);
    assert_eq!(out.code(), 0, "{}", out.describe());
}

#[test]
fn a_malformed_label_warns_naming_the_image_and_up_still_works() {
    let t = Test::new();
    let image = image_with_label(&t, "bad", "[{not json");
    t.devcontainer(&format!(r#"{{"image": "{image}"}}"#));
    t.yolo(&["up"]).ok().assert_stderr_contains(&format!(
        "warning: the devcontainer.metadata label of image {image} is not valid JSON"
    ));
    let out = t.yolo(&["exec", "pwd"]).ok();
    assert_eq!(out.stdout(), "/workspaces/repo\n");
}

#[test]
fn update_remote_user_uid_keeps_the_users_group_when_the_host_gid_is_taken() {
    let Some(docker_gid) = docker_gid() else {
        return;
    };
    // gid 100 is Debian's `users` group: taken in the image, so `dev` keeps its own group,
    // as the reference CLI's updateUID does; the uid still matches.
    let t = Test::new();
    let image = image_with_label(&t, "gid", r#"[{"remoteUser": "dev"}]"#);
    t.devcontainer(&format!(r#"{{"image": "{image}"}}"#));
    give_to(&t, 4321, 100);
    let up = yolo_as(&t, 4321, 100, &docker_gid, &["up"]);
    let stderr = String::from_utf8_lossy(&up.stderr).into_owned();
    ok(up);
    assert!(
        stderr.contains("gid 100 is taken in the image (users): dev keeps its group (1000)"),
        "{stderr}"
    );
    let out = ok(yolo_as(
        &t,
        4321,
        100,
        &docker_gid,
        &["exec", "sh", "-c", "id -u; id -gn"],
    ));
    assert_eq!(out, "4321\ndev\n");
}

#[test]
fn as_root_on_someone_elses_repository_the_uid_is_left_and_a_note_says_so() {
    // yolo as root (these tests run as root; else skipped) on a repository owned by uid 4321.
    if host_uid() != 0 {
        eprintln!("skipped: needs to run as root");
        return;
    }
    let t = Test::new();
    let image = image_with_label(&t, "root", r#"[{"remoteUser": "dev"}]"#);
    t.devcontainer(&format!(r#"{{"image": "{image}"}}"#));
    assert!(Command::new("chown")
        .args(["4321:4321"])
        .arg(&t.workspace)
        .status()
        .unwrap()
        .success());
    t.yolo(&["up"]).ok().assert_stderr_contains(
        "note: yolo runs as root, so the container user's uid is not matched to yours (as with the reference CLI): files the agent writes in the repository (owned by uid 4321) will belong to dev, whose uid is left as the image has it; run yolo as the repository's owner, not with sudo, and set \"remoteUser\" to a non-root user of the image",
    );
    let out = t.yolo(&["exec", "id", "-u"]).ok();
    assert_eq!(out.stdout(), "1000\n");
}

fn host_uid() -> u32 {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[test]
fn ports_a_built_images_label_forwards_are_published_on_the_first_up() {
    // The image is built by this `up`: its label is read only after the build, once the guard
    // (which publishes the ports) exists already. It is made again with them.
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BASE_IMAGE}\nLABEL devcontainer.metadata='[{{\"forwardPorts\": [18461]}}]'\n"
        ),
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    let (_, up) = t.up(&[]);
    let guard = inspect(&format!(
        "{}-guard",
        up["container"]["name"].as_str().unwrap()
    ));
    let bindings = &guard["HostConfig"]["PortBindings"]["18461/tcp"][0];
    assert_eq!(bindings["HostIp"], "127.0.0.1", "{}", guard["HostConfig"]);
    // The agent joined that guard, and the config is the same on the next `up`.
    let id = up["container"]["id"].as_str().unwrap();
    assert_eq!(
        inspect(id)["HostConfig"]["NetworkMode"],
        format!("container:{}", guard["Id"].as_str().unwrap())
    );
    let (_, again) = t.up(&[]);
    assert_eq!(again["action"], "running", "{again}");
    assert_eq!(again["stale"], false, "{again}");
}
