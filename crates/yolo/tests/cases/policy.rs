//! The repository asks, the user grants: what yolo declines by default (the container starts
//! without it), refuses under `[policy] requests = "refuse"`, and honours with a grant.

use crate::support::*;

/// The user's choice of today's behaviour: a request that needs a grant stops the `up`.
const REFUSE: &str = "[policy]\nrequests = \"refuse\"\n";

fn refused(config: &str, expect: &[&str]) -> Test {
    refused_with(77, config, expect)
}

fn refused_with(code: i32, config: &str, expect: &[&str]) -> Test {
    let t = Test::new();
    t.user_config(REFUSE);
    t.devcontainer(config);
    let run = t.yolo(&["up"]).fails_with(code);
    for e in expect {
        run.assert_stderr_contains(e);
    }
    assert!(t.containers().is_empty(), "nothing was created");
    t
}

#[test]
fn privileged_is_refused_with_the_grant_to_use() {
    refused(
        r#"{"image": "debian:bookworm-slim", "privileged": true}"#,
        &["devcontainer.json", "privileged", "--grant privileged"],
    );
}

#[test]
fn dangerous_run_args_are_refused() {
    refused(
        r#"{"image": "debian:bookworm-slim", "runArgs": ["--privileged"]}"#,
        &["runArgs[0]", "privileged mode", "--grant privileged"],
    );
    refused(
        r#"{"image": "debian:bookworm-slim", "runArgs": ["--network=host"]}"#,
        &["runArgs[0]", "host-network"],
    );
    refused(
        r#"{"image": "debian:bookworm-slim", "runArgs": ["--cap-add", "SYS_ADMIN"]}"#,
        &["runArgs", "cap-add"],
    );
    refused(
        r#"{"image": "debian:bookworm-slim", "runArgs": ["-v", "/etc:/host-etc"]}"#,
        &["runArgs", "/etc", "host-mount"],
    );
    refused(
        r#"{"image": "debian:bookworm-slim", "runArgs": ["--security-opt", "seccomp=unconfined"]}"#,
        &["runArgs", "seccomp=unconfined"],
    );
    refused(
        r#"{"image": "debian:bookworm-slim", "runArgs": ["--pid=host"]}"#,
        &["runArgs[0]", "host-pid"],
    );
    refused(
        r#"{"image": "debian:bookworm-slim", "runArgs": ["--device", "/dev/kvm"]}"#,
        &["runArgs", "device"],
    );
}

#[test]
fn unknown_run_args_are_refused_with_the_accepted_list() {
    // No grant can allow an unknown option: a config error, not a refusal to be granted.
    refused_with(
        65,
        r#"{"image": "debian:bookworm-slim", "runArgs": ["--frobnicate"]}"#,
        &["runArgs[0]", "--frobnicate", "--env"],
    );
}

#[test]
fn host_mounts_cap_add_and_docker_socket_are_refused() {
    refused(
        r#"{"image": "debian:bookworm-slim", "mounts": ["source=/etc,target=/host-etc,type=bind"]}"#,
        &["mounts[0]", "/etc", "host-mount"],
    );
    refused(
        r#"{"image": "debian:bookworm-slim", "mounts": [{"type": "bind", "source": "/var/run/docker.sock", "target": "/var/run/docker.sock"}]}"#,
        &["mounts[0]", "docker"],
    );
    refused(
        r#"{"image": "debian:bookworm-slim", "capAdd": ["SYS_PTRACE"]}"#,
        &["capAdd", "SYS_PTRACE", "cap-add"],
    );
    refused(
        r#"{"image": "debian:bookworm-slim", "securityOpt": ["apparmor=unconfined"]}"#,
        &["securityOpt", "security-opt"],
    );
    refused(
        r#"{"image": "debian:bookworm-slim", "workspaceMount": "source=/,target=/workspace,type=bind"}"#,
        &["workspaceMount"],
    );
}

#[test]
fn initialize_command_is_refused_without_trust_and_runs_on_the_host_with_it() {
    let t = refused(
        r#"{"image": "debian:bookworm-slim", "initializeCommand": "touch host-side-marker"}"#,
        &["initializeCommand", "--trust-host-commands"],
    );
    assert!(!t.workspace.join("host-side-marker").exists());
    t.up(&["--trust-host-commands"]);
    assert!(
        t.workspace.join("host-side-marker").exists(),
        "ran on the host, in the workspace"
    );
    let events = t.events();
    assert!(events
        .iter()
        .any(|e| e["kind"] == "command" && e["source"] == "host"));
}

#[test]
fn initialize_command_is_asked_about_only_when_it_would_run() {
    let t = Test::new();
    t.user_config(REFUSE);
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "initializeCommand": "echo ran >> host-side-runs"}"#,
    );
    let runs = || {
        std::fs::read_to_string(t.workspace.join("host-side-runs"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    // A new start would run it: without trust and with nobody to ask, refused before anything.
    t.yolo(&["up"]).fails_with(77);
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    assert!(t.events().is_empty(), "no session: {:?}", t.events());
    t.up(&["--trust-host-commands"]);
    assert_eq!(runs(), 1);
    // Reusing the running container runs nothing on the host: nothing to ask, nothing refused.
    t.up(&[]);
    assert_eq!(runs(), 1);
}

#[test]
fn a_granted_capability_is_applied_and_recorded() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "capAdd": ["SYS_PTRACE"]}"#);
    let (_, out) = t.up(&["--grant", "cap-add=SYS_PTRACE"]);
    let caps =
        inspect(out["container"]["id"].as_str().unwrap())["HostConfig"]["CapAdd"].to_string();
    assert!(caps.contains("SYS_PTRACE"), "{caps}");
    let start = t
        .events()
        .into_iter()
        .find(|e| e["kind"] == "session_start")
        .unwrap();
    assert!(
        start["grants"].to_string().contains("SYS_PTRACE"),
        "{start}"
    );
}

#[test]
fn safe_run_args_are_applied() {
    let t = Test::new();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "runArgs": ["-e", "FROM_RUNARGS=1", "--label", "team=tools", "--memory=512m", "--hostname", "devbox"]}"#,
    );
    let (_, out) = t.up(&[]);
    let c = inspect(out["container"]["id"].as_str().unwrap());
    assert!(c["Config"]["Env"].to_string().contains("FROM_RUNARGS=1"));
    assert_eq!(c["Config"]["Labels"]["team"], "tools");
    assert_eq!(c["HostConfig"]["Memory"], 512i64 * 1024 * 1024);
    assert_eq!(t.yolo(&["exec", "hostname"]).ok().stdout().trim(), "devbox");
}

#[test]
fn host_variables_reach_the_container_only_when_the_user_passes_them() {
    let mut t = Test::new();
    t.env("YOLO_TEST_SECRET", "s3cret");
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "containerEnv": {"LEAK": "${localEnv:YOLO_TEST_SECRET}"}}"#,
    );
    let (run, out) = t.up(&[]);
    run.assert_stderr_contains("YOLO_TEST_SECRET"); // says what it withheld
    let env = inspect(out["container"]["id"].as_str().unwrap())["Config"]["Env"].to_string();
    assert!(!env.contains("s3cret"), "{env}");

    t.user_config("pass_env = [\"YOLO_TEST_SECRET\"]\n");
    let (_, out) = t.up(&["--rebuild"]);
    let env = inspect(out["container"]["id"].as_str().unwrap())["Config"]["Env"].to_string();
    assert!(env.contains("LEAK=s3cret"), "{env}");
}

#[test]
fn a_build_context_symlinked_out_of_the_repository_is_refused() {
    let t = Test::new();
    let outside = t.root().join("outside-the-repo");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("private.txt"), "host file").unwrap();
    t.file(
        ".devcontainer/Dockerfile",
        "FROM debian:bookworm-slim\nCOPY . /ctx\n",
    );
    std::os::unix::fs::symlink(&outside, t.workspace.join(".devcontainer/ctx")).unwrap();
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile", "context": "ctx"}}"#);
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("build.context")
        .assert_stderr_contains("outside-the-repo");
    assert!(t.containers().is_empty());

    // The user may allow it knowingly.
    t.up(&["--grant", "host-mount"]);
    let out = t.yolo(&["exec", "cat", "/ctx/private.txt"]).ok();
    assert_eq!(out.stdout(), "host file");
}

#[test]
fn the_initialize_command_grant_runs_it_without_a_prompt() {
    let t = Test::new();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "initializeCommand": ["touch", "granted-marker"]}"#,
    );
    t.up(&["--grant", "initialize-command"]);
    assert!(t.workspace.join("granted-marker").exists());
}

#[test]
fn host_networking_cannot_replace_the_firewall_and_cannot_be_granted() {
    let t = refused(
        r#"{"image": "debian:bookworm-slim", "runArgs": ["-e", "A=1", "--net=host"]}"#,
        &[
            "devcontainer.json: \"runArgs[2]\" asks for --network=host: host-network cannot be granted: ",
            "owns the container's network",
            "yolo up --network open",
        ],
    );
    let run = t.yolo(&["up", "--grant", "host-network"]).fails_with(64);
    assert!(
        run.stderr()
            .contains("'--grant <NAME>': host-network cannot be granted: yolo's firewall guard owns the container's network"),
        "{}",
        run.stderr()
    );
    assert!(t.containers().is_empty());
}

/// Everything a repository asks for that only a grant honours, at once: the container starts
/// without any of it (what reaches the engine says so), and `up` names each request once, with
/// its grant, in its output, `--json` and the session record.
#[test]
fn requests_without_a_grant_are_declined_and_never_reach_the_engine() {
    let t = Test::new();
    t.devcontainer(
        r#"{
  "image": "debian:bookworm-slim",
  "privileged": true,
  "capAdd": ["SYS_PTRACE"],
  "securityOpt": ["seccomp=unconfined", "label=disable"],
  "mounts": [
    "source=/etc,target=/host-etc,type=bind",
    "source=/var/run/docker.sock,target=/var/run/docker.sock,type=bind",
    "source=/etc/localtime,target=/etc/localtime,type=bind"
  ],
  "runArgs": ["--network=host", "--device", "/dev/fuse", "--pid=host", "--gpus", "all"],
  "hostRequirements": {"gpu": true}
}"#,
    );
    let (run, up) = t.up(&[]);
    let id = up["container"]["id"].as_str().unwrap().to_string();
    let host = &inspect(&id)["HostConfig"];
    assert_eq!(host["Privileged"], false);
    let caps = host["CapAdd"].to_string();
    assert!(!caps.contains("SYS_PTRACE"), "{caps}");
    let opts = host["SecurityOpt"].to_string();
    assert!(
        !opts.contains("seccomp=unconfined") && !opts.contains("label=disable"),
        "{opts}"
    );
    assert!(
        host["NetworkMode"]
            .as_str()
            .unwrap()
            .starts_with("container:"),
        "{host}"
    );
    assert!(
        host["PidMode"]
            .as_str()
            .unwrap_or("")
            .starts_with("container:"),
        "{host}"
    );
    assert!(
        host["Devices"].as_array().is_none_or(|d| d.is_empty()),
        "{host}"
    );
    assert!(
        host["DeviceRequests"]
            .as_array()
            .is_none_or(|d| d.is_empty()),
        "{host}"
    );
    let mounts = inspect(&id)["Mounts"].to_string();
    assert!(
        !mounts.contains("/host-etc") && !mounts.contains("docker.sock"),
        "{mounts}"
    );
    // The time zone needs no grant, and is read-only.
    let zone = inspect(&id)["Mounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["Destination"] == "/etc/localtime")
        .cloned()
        .expect("the time zone is bound");
    assert_eq!(zone["RW"], false);

    let declined = up["declined"].as_array().unwrap();
    let named: Vec<(&str, Option<&str>)> = declined
        .iter()
        .map(|d| (d["property"].as_str().unwrap(), d["grant"].as_str()))
        .collect();
    for expected in [
        ("privileged", Some("privileged")),
        ("capAdd[0]", Some("cap-add=SYS_PTRACE")),
        ("securityOpt[0]", Some("security-opt=seccomp=unconfined")),
        ("securityOpt[1]", Some("security-opt=label=disable")),
        ("mounts[0]", Some("host-mount=/etc")),
        ("mounts[1]", Some("docker-socket")),
        ("runArgs[0]", None),
        ("runArgs[1]", Some("device")),
        ("runArgs[3]", Some("host-pid")),
        ("runArgs[4]", Some("gpu")),
        ("hostRequirements.gpu", Some("gpu")),
    ] {
        assert!(named.contains(&expected), "{expected:?} in {named:?}");
    }
    assert_eq!(named.len(), 11, "{named:?}");
    assert_eq!(declined[0]["line"], 3, "the line of \"privileged\"");
    assert!(declined[0]["file"]
        .as_str()
        .unwrap()
        .ends_with("devcontainer.json"));
    // One block, before the container is used, with the flags that honour them.
    let err = run.stderr();
    assert_eq!(
        err.matches("11 requests of the repository were declined")
            .count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("devcontainer.json:3: \"privileged\" asks for privileged mode"),
        "{err}"
    );
    assert!(
        err.contains("--grant privileged --grant cap-add=SYS_PTRACE"),
        "{err}"
    );
    assert!(err.contains("[policy] requests = \"refuse\""), "{err}");
    // The session record carries them.
    let notices: Vec<String> = t
        .events()
        .iter()
        .filter(|e| e["kind"] == "notice")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .filter(|m| m.starts_with("declined: "))
        .collect();
    assert_eq!(notices.len(), 11, "{notices:?}");
}

/// GPUs with the `gpu` grant become the engine's device request. This machine has no GPU: the
/// engine itself refuses to start a container that asks for one, which is the proof the
/// request reached it (the request's shape is pinned by `engine::containers`' unit test);
/// without the grant the same config starts.
#[test]
fn a_granted_gpu_reaches_the_engine_as_a_device_request() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "runArgs": ["--gpus", "2"]}"#);
    let run = t.yolo(&["up", "--grant", "gpu=1"]).fails_with(69);
    run.assert_stderr_contains("could not select device driver")
        .assert_stderr_contains("[[gpu]]");
    assert!(t.containers().is_empty(), "rolled back");
    let (_, up) = t.up(&[]);
    assert_eq!(up["declined"][0]["grant"], "gpu");
}

/// A grant on the command line is honoured as before: what was asked reaches the engine, and
/// nothing is declined.
#[test]
fn granted_requests_reach_the_engine() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "capAdd": ["SYS_PTRACE"], "securityOpt": ["label=disable"]}"#);
    let (run, up) = t.up(&["--grant", "cap-add=SYS_PTRACE", "--grant", "security-opt"]);
    let host = &inspect(up["container"]["id"].as_str().unwrap())["HostConfig"];
    assert!(host["CapAdd"].to_string().contains("SYS_PTRACE"), "{host}");
    assert!(
        host["SecurityOpt"].to_string().contains("label=disable"),
        "{host}"
    );
    assert_eq!(up["declined"], serde_json::json!([]));
    run.assert_stderr_lacks("declined");
}

/// Under `requests = "refuse"` a request no grant allows is listed first, in the one list of
/// everything the config needs, and its hint is not itself refused.
#[test]
fn what_no_grant_allows_opens_the_list_of_refusals() {
    let t = Test::new();
    t.user_config(REFUSE);
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "capAdd": ["SYS_PTRACE"], "runArgs": ["--network=host"]}"#);
    let run = t.yolo(&["up"]).fails_with(77);
    let err = run.stderr();
    assert!(
        err.contains("1 request no grant allows, and 1 that needs a grant:"),
        "{err}"
    );
    let host = err.find("--network=host").unwrap();
    let cap = err.find("capability SYS_PTRACE").unwrap();
    assert!(host < cap, "{err}");
    assert!(err.contains("once it is gone"), "{err}");
    assert!(t.containers().is_empty());
}

/// With nobody to ask, `initializeCommand` is declined: it does not run on the host, the
/// container starts, and the note says how to let it run.
#[test]
fn an_initialize_command_nobody_can_approve_is_declined() {
    let t = Test::new();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "initializeCommand": "touch host-side-marker"}"#,
    );
    let (run, up) = t.up(&[]);
    assert!(!t.workspace.join("host-side-marker").exists());
    run.assert_stderr_contains(
        "1 request of the repository was declined; the container runs without it:",
    );
    run.assert_stderr_contains("\"initializeCommand\" asks for `");
    run.assert_stderr_contains("touch host-side-marker`: it runs on your host");
    run.assert_stderr_contains("--trust-host-commands");
    assert_eq!(up["declined"][0]["property"], "initializeCommand");
}
