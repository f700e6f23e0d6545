//! `yolo kube` (issue 11, Kubernetes): the YAML it prints, the errors for what cannot be a Pod,
//! and the same YAML run by `podman kube play` (same Pod semantics: shared network and PID
//! namespaces, per-container capabilities), with the firewall and exec-audit attacks run as
//! root in the agent container, and the audit read back by `yolo audit --kube` from the guard's
//! log.
//!
//! Podman runs with its own containers.conf (`default_ulimits = []`: this sandbox cannot raise
//! rlimits) through CONTAINERS_CONF, never the machine's; it cannot pull, so the images are
//! copied from Docker under names unique to the test, and removed with the Pod and the volume
//! when the test ends, pass or fail.

use crate::support::net::{docker_ok, ensure_image, ip_of, Internet, AGENT_IMAGE};
use crate::support::*;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// One Pod at a time in this binary: Podman 4.3 makes each `emptyDir` a volume named as the
/// Pod names it (`shim`, `workspace`), which two Pods at once would share.
static ONE_POD: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A Podman sandbox for one test: its config, and what it made.
struct Podman {
    _one: std::sync::MutexGuard<'static, ()>,
    conf: PathBuf,
    yaml: PathBuf,
    pod: String,
    volume: String,
    images: Vec<String>,
}

impl Podman {
    fn new(t: &Test) -> Podman {
        let conf = t.workspace.parent().unwrap().join("containers.conf");
        std::fs::write(&conf, "[containers]\ndefault_ulimits = []\n").unwrap();
        let podman = Podman {
            _one: ONE_POD.lock().unwrap_or_else(|p| p.into_inner()),
            yaml: t.workspace.parent().unwrap().join("pod.yaml"),
            conf,
            pod: format!("yolo-kube-{}", t.id.to_lowercase()),
            volume: format!("yolo-kube-{}-ws", t.id.to_lowercase()),
            images: Vec::new(),
        };
        let version = podman.run(&["--version"]);
        assert!(
            version.status.success(),
            "podman is missing: run scripts/test-deps.sh"
        );
        podman
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("podman")
            .args(args)
            .env("CONTAINERS_CONF", &self.conf)
            .output()
            .expect("podman CLI")
    }

    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "podman {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Copy Docker's `image` into Podman as `localhost/<pod>:<role>` (a name no other test uses).
    fn load(&mut self, image: &str, role: &str) -> String {
        let name = format!("localhost/{}:{role}", self.pod);
        self.images.push(name.clone());
        docker_ok(&["tag", image, &name]);
        // Tried again: Podman's store takes one writer at a time, and a parallel test's load
        // or clean-up can make one fail.
        let mut saved = None;
        for _ in 0..3 {
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "docker save {name} | CONTAINERS_CONF={} podman load -q",
                    self.conf.display()
                ))
                .output()
                .expect("docker save | podman load");
            let ok = out.status.success();
            saved = Some(out);
            if ok {
                break;
            }
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
        let saved = saved.expect("tried");
        let _ = docker(&["rmi", &name]);
        assert!(
            saved.status.success(),
            "loading {image} into podman: {}",
            String::from_utf8_lossy(&saved.stderr)
        );
        name
    }

    /// Both containers' output, `podman logs` of `<pod>-<container>`.
    fn logs(&self, container: &str) -> String {
        let out = self.run(&["logs", &format!("{}-{container}", self.pod)]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// Run `script` as root in the agent container, through the exec audit's shim as a
    /// `kubectl exec` through it would.
    fn attack(&self, script: &str) -> std::process::Output {
        self.run(&[
            "exec",
            &format!("{}-agent", self.pod),
            "/.yolo/shim",
            "shim",
            "--pod",
            "/bin/sh",
            "-c",
            script,
        ])
    }

    /// Until `container`'s log holds `text` (60 s at most).
    #[track_caller]
    fn wait_log(&self, container: &str, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.logs(container).contains(text) {
            assert!(
                Instant::now() < deadline,
                "{container} never printed {text:?}:\nguard: {}\nagent: {}",
                self.logs("guard"),
                self.logs("agent")
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let yaml = self.yaml.display().to_string();
        if self.yaml.exists() {
            let _ = self.run(&["kube", "down", &yaml]);
        }
        let _ = self.run(&["pod", "rm", "-f", &self.pod]);
        // `kube play` keeps a ConfigMap's content in a volume named after it.
        for volume in [&self.volume, &format!("{}-guard", self.pod)] {
            let _ = self.run(&["volume", "rm", "-f", volume]);
        }
        for image in &self.images {
            let _ = self.run(&["rmi", "-f", image]);
        }
    }
}

/// The guard image this yolo uses (its tag in the YAML), made in Docker if it is not there yet.
fn guard_image(t: &Test) -> String {
    let yaml = t
        .yolo(&["kube", "--upstream-dns", "192.0.2.53", "--pvc", "x"])
        .ok()
        .stdout();
    let pod = yaml_docs(&yaml).pop().unwrap();
    let image = pod["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
        .to_string();
    // `try_docker` returns stdout whatever the exit status: a missing image lists no Id.
    let present = try_docker(&["image", "inspect", &image]).is_ok_and(|o| o.contains("\"Id\""));
    if !present {
        t.up(&[]);
        t.yolo(&["down", "--remove"]).ok();
    }
    image
}

fn yaml_docs(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).expect("a YAML document"))
        .collect()
}

fn out(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_pod_under_podman_kube_play_keeps_the_firewall_and_records_every_exec() {
    let t = Test::new();
    t.devcontainer(&format!(r#"{{"image": "{AGENT_IMAGE}"}}"#));
    let net = Internet::new(&t);
    t.user_config(&net.user_config(""));
    let guard = guard_image(&t);
    let mut podman = Podman::new(&t);
    let guard = podman.load(&guard, "guard");
    let agent = podman.load(AGENT_IMAGE, "agent");
    podman.ok(&[
        "volume",
        "create",
        "--label",
        &format!("{LABEL}={}", t.id),
        &podman.volume,
    ]);
    let marker = format!("kube-marker-{}", t.id);
    let mut args = vec![
        "kube".to_string(),
        "--image".into(),
        agent,
        "--guard-image".into(),
        guard,
        "--pvc".into(),
        podman.volume.clone(),
        "--name".into(),
        podman.pod.clone(),
    ];
    args.extend(net.up_flags(&["*.allowed.test"]));
    args.extend(
        ["--", "/bin/sh", "-c"]
            .iter()
            .map(|s| s.to_string())
            .chain([format!("/bin/echo {marker}; exec /bin/sleep 600")]),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let yaml = t.yolo(&args).ok().stdout();
    std::fs::write(&podman.yaml, &yaml).unwrap();
    podman.ok(&["kube", "play", &podman.yaml.display().to_string()]);
    podman.wait_log("guard", "yolo-guard ready");
    podman.wait_log("agent", &marker);

    // The allowlist: the allowed name answers, the other name is refused, its address dropped.
    let allowed = podman.attack("curl -sS -m 5 http://www.allowed.test/");
    assert_eq!(
        String::from_utf8_lossy(&allowed.stdout).trim(),
        net.allowed.body,
        "{}",
        out(&allowed)
    );
    let denied = podman.attack("curl -sS -m 5 http://www.denied.test/");
    assert!(!denied.status.success(), "{}", out(&denied));
    assert!(
        out(&denied).contains("Could not resolve host"),
        "{}",
        out(&denied)
    );
    let direct = podman.attack(&format!("curl -sS -m 5 http://{}/", net.denied.host.ip));
    assert!(!direct.status.success(), "{}", out(&direct));
    assert!(!out(&direct).contains(&net.denied.body), "{}", out(&direct));

    // Root in the agent's container holds neither NET_ADMIN nor NET_RAW.
    let flush = podman.attack("nft flush ruleset");
    assert!(!flush.status.success(), "{}", out(&flush));
    assert!(
        out(&flush).contains("Operation not permitted"),
        "{}",
        out(&flush)
    );
    let list = podman.attack("nft list ruleset");
    assert!(!list.status.success(), "{}", out(&list));
    let raw = podman.attack(
        "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)'",
    );
    assert!(!raw.status.success(), "{}", out(&raw));
    assert!(out(&raw).contains("PermissionError"), "{}", out(&raw));
    // The shim is read-only for root in the agent.
    let write = podman.attack("echo x >> /.yolo/shim");
    assert!(!write.status.success(), "{}", out(&write));
    assert!(
        out(&write).contains("Read-only file system"),
        "{}",
        out(&write)
    );
    // The ruleset is whole after the attempts: the guard still reads its table, and the
    // denied address is still dropped.
    // The guard image holds no nft: the host's reads the guard's network namespace.
    let pid = podman.ok(&[
        "inspect",
        "-f",
        "{{.State.Pid}}",
        &format!("{}-guard", podman.pod),
    ]);
    let listed = Command::new("nsenter")
        .args([
            "-t",
            pid.trim(),
            "-n",
            "nft",
            "list",
            "table",
            "inet",
            "yolo",
        ])
        .output()
        .expect("nsenter");
    let table = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(table.contains("policy drop"), "{table}");
    let again = podman.attack(&format!("curl -sS -m 5 http://{}/", net.denied.host.ip));
    assert!(!again.status.success(), "{}", out(&again));

    // The audit: read from the guard's stdout by the function `yolo audit --kube` uses.
    let log = podman.logs("guard");
    let events: Vec<Value> = t
        .yolo_stdin(
            &["audit", "--kube", &podman.pod, "--kube-log", "-", "--json"],
            &log,
        )
        .ok()
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON event"))
        .collect();
    let argv_of = |e: &Value| -> Vec<String> {
        e["argv"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let execs: Vec<Vec<String>> = events
        .iter()
        .filter(|e| e["kind"] == "exec")
        .map(argv_of)
        .collect();
    assert!(
        execs.contains(&vec!["/bin/echo".to_string(), marker.clone()]),
        "the Pod's own command: {execs:?}"
    );
    assert!(
        execs.contains(&vec!["nft".to_string(), "flush".into(), "ruleset".into()]),
        "the attack: {execs:?}"
    );
    assert!(
        execs.iter().any(|a| a.first().is_some_and(|p| p == "curl")),
        "{execs:?}"
    );
    let dns = |name: &str, decision: &str| {
        events
            .iter()
            .any(|e| e["kind"] == "dns" && e["name"] == name && e["decision"] == decision)
    };
    assert!(dns("www.allowed.test", "allowed"), "{log}");
    assert!(dns("www.denied.test", "refused"), "{log}");
    assert!(
        events.iter().any(|e| e["kind"] == "blocked"
            && e["dst"] == net.denied.host.ip.as_str()
            && e["port"] == 80),
        "{log}"
    );
    // Without --json, the same events as lines.
    t.yolo_stdin(
        &[
            "audit",
            "--kube",
            &podman.pod,
            "--kube-log",
            "-",
            "--kind",
            "exec",
        ],
        &log,
    )
    .ok()
    .assert_stdout_contains(&marker);
}

/// A git server of our own (`git daemon` on the test's network) serving `repo` with a commit
/// on branch `feature`; its address.
fn git_server(t: &Test, net: &Internet) -> String {
    ensure_image(GIT_IMAGE, "git.Dockerfile");
    let name = format!("yolo-{}-git", t.id);
    docker_ok(&[
        "run",
        "-d",
        "--name",
        &name,
        "--label",
        &format!("{LABEL}={}", t.id),
        "--network",
        &net.network,
        GIT_IMAGE,
        "sh",
        "-c",
        "set -e; git init -q -b feature /srv/repo && cd /srv/repo \
         && echo 'cloned into the pod' > hello.txt && git add hello.txt \
         && git -c user.name=t -c user.email=t@t commit -q -m one \
         && exec git daemon --export-all --base-path=/srv --reuseaddr /srv",
    ]);
    ip_of(&name, &net.network)
}

/// git, for the clone's init container and the git server.
const GIT_IMAGE: &str = "yolo-test-git:1";

/// The default workspace: an init container clones the repository's branch before the guard
/// starts; the agent works in the clone.
#[test]
fn a_pod_clones_its_workspace_from_the_branch_before_the_guard_starts() {
    let t = Test::new();
    t.devcontainer(&format!(r#"{{"image": "{AGENT_IMAGE}"}}"#));
    // A git repository here too, so the policy protects its `.git` paths as `yolo up` would.
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&t.workspace)
        .output()
        .unwrap();
    assert!(git.status.success(), "{}", out(&git));
    let net = Internet::new(&t);
    t.user_config(&net.user_config(""));
    let server = git_server(&t, &net);
    let guard = guard_image(&t);
    let mut podman = Podman::new(&t);
    let guard = podman.load(&guard, "guard");
    let agent = podman.load(AGENT_IMAGE, "agent");
    let git_image = podman.load(GIT_IMAGE, "git");
    let repo = format!("git://{server}/repo");
    let mut args = vec![
        "kube",
        "--image",
        &agent,
        "--guard-image",
        &guard,
        "--git-image",
        &git_image,
        "--repo",
        &repo,
        "--branch",
        "feature",
        "--name",
        &podman.pod,
    ];
    let flags = net.up_flags(&[]);
    args.extend(flags.iter().map(String::as_str));
    let yaml = t.yolo(&args).ok().stdout();
    std::fs::write(&podman.yaml, &yaml).unwrap();
    podman.ok(&["kube", "play", &podman.yaml.display().to_string()]);
    podman.wait_log("guard", "yolo-guard ready");
    podman.wait_log("agent", "Container started");

    // The branch's files, writable by the agent. (The read-only `subPath` views of `.git/hooks`
    // and the rest are checked in `k8s::render`'s unit tests only: Podman 4.3 ignores `subPath`
    // on volumes and mounts the whole volume at each of those paths.)
    let folder = "/workspaces/repo";
    let read = podman.attack(&format!(
        "cat {folder}/hello.txt && echo more >> {folder}/hello.txt && echo written"
    ));
    assert!(read.status.success(), "{}", out(&read));
    assert!(out(&read).contains("cloned into the pod"), "{}", out(&read));
    assert!(out(&read).contains("written"), "{}", out(&read));
}

/// The limit docs/kubernetes.md states: in a Pod the guard is not PID 1, so root in the agent
/// can kill it. It must fail closed: the agent's supervised processes can exec nothing more,
/// names no longer resolve, and the ruleset (the network namespace's, not the guard's) still
/// drops what it dropped.
#[test]
fn root_killing_the_guard_of_a_pod_leaves_the_agent_closed_in() {
    let t = Test::new();
    t.devcontainer(&format!(r#"{{"image": "{AGENT_IMAGE}"}}"#));
    let net = Internet::new(&t);
    t.user_config(&net.user_config(""));
    let guard = guard_image(&t);
    let mut podman = Podman::new(&t);
    let guard = podman.load(&guard, "guard");
    let agent = podman.load(AGENT_IMAGE, "agent");
    podman.ok(&[
        "volume",
        "create",
        "--label",
        &format!("{LABEL}={}", t.id),
        &podman.volume,
    ]);
    let mut args = vec![
        "kube",
        "--image",
        &agent,
        "--guard-image",
        &guard,
        "--pvc",
        &podman.volume,
        "--name",
        &podman.pod,
    ];
    let flags = net.up_flags(&["*.allowed.test"]);
    args.extend(flags.iter().map(String::as_str));
    let yaml = t.yolo(&args).ok().stdout();
    std::fs::write(&podman.yaml, &yaml).unwrap();
    podman.ok(&["kube", "play", &podman.yaml.display().to_string()]);
    podman.wait_log("guard", "yolo-guard ready");
    podman.wait_log("agent", "Container started");

    // Kill the guard, then try to run a program from the same (supervised) shell.
    let kill = podman.attack(
        "for p in /proc/[0-9]*; do \
           [ \"$(cat $p/comm 2>/dev/null)\" = yolo-guard ] && kill -9 ${p#/proc/} && echo killed; \
         done; sleep 2; /bin/echo STILL-EXECS",
    );
    let said = out(&kill);
    assert!(
        said.contains("killed"),
        "the attack did not find the guard: {said}"
    );
    assert!(
        !said.contains("STILL-EXECS"),
        "a supervised shell still execs: {said}"
    );
    // From outside the supervised tree (podman exec without the shim): no names resolve, and
    // the dropped address stays dropped.
    let name = podman.run(&[
        "exec",
        &format!("{}-agent", podman.pod),
        "curl",
        "-sS",
        "-m",
        "5",
        "http://www.allowed.test/",
    ]);
    assert!(!name.status.success(), "{}", out(&name));
    // The agent's container runs on: the failure is the closed network's, not a gone container.
    assert!(
        out(&name).contains("Could not resolve host"),
        "{}",
        out(&name)
    );
    let direct = podman.run(&[
        "exec",
        &format!("{}-agent", podman.pod),
        "curl",
        "-sS",
        "-m",
        "5",
        &format!("http://{}/", net.denied.host.ip),
    ]);
    assert!(!direct.status.success(), "{}", out(&direct));
    assert!(!out(&direct).contains(&net.denied.body), "{}", out(&direct));
    assert!(
        out(&direct).contains("Failed to connect") || out(&direct).contains("timed out"),
        "{}",
        out(&direct)
    );
}

#[test]
fn the_yaml_goes_to_stdout_and_what_cannot_be_a_pod_is_refused() {
    let mut t = Test::without_docker();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let yaml = t
        .yolo(&[
            "kube",
            "--upstream-dns",
            "192.0.2.53",
            "--pvc",
            "ws",
            "--allow",
            "example.com",
        ])
        .ok()
        .stdout();
    let docs = yaml_docs(&yaml);
    assert_eq!(docs.len(), 2, "{yaml}");
    assert_eq!(docs[0]["kind"], "ConfigMap");
    assert_eq!(docs[1]["kind"], "Pod");
    let config: Value =
        serde_json::from_str(docs[0]["data"]["guard.json"].as_str().unwrap()).unwrap();
    assert_eq!(config["audit_to_stdout"], true);
    assert_eq!(config["allow"], serde_json::json!(["example.com"]));
    assert_eq!(config["upstream"], serde_json::json!(["192.0.2.53:53"]));

    // Bad flags: exit 64 before anything.
    t.yolo(&[
        "kube",
        "--upstream-dns",
        "192.0.2.53",
        "--pvc",
        "ws",
        "--repo",
        "https://x/y",
    ])
    .fails_with(64)
    .assert_stderr_contains("--repo");
    t.yolo(&[
        "kube",
        "--upstream-dns",
        "192.0.2.53",
        "--name",
        "Bad_Name",
        "--pvc",
        "ws",
    ])
    .fails_with(64)
    .assert_stderr_contains("is not a Kubernetes name");
    for (flag, why) in [
        ("--rebuild", "builds nothing"),
        ("--pids=5", "podPidsLimit"),
    ] {
        t.yolo(&["kube", "--upstream-dns", "192.0.2.53", "--pvc", "ws", flag])
            .fails_with(64)
            .assert_stderr_contains(why);
    }
    t.yolo(&["kube", "--pvc", "ws"])
        .fails_with(64)
        .assert_stderr_contains("--upstream-dns");
    t.yolo(&["kube", "--upstream-dns", "192.0.2.53"])
        .fails_with(64)
        .assert_stderr_contains("no `origin` remote");

    // No cluster to apply to: 69, with what to do.
    let home = t.workspace.parent().unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    t.env("HOME", home.to_str().unwrap());
    t.env("KUBECONFIG", home.join("missing").to_str().unwrap());
    t.yolo(&[
        "kube",
        "--apply",
        "--upstream-dns",
        "192.0.2.53",
        "--pvc",
        "ws",
    ])
    .fails_with(69)
    .assert_stderr_contains("no Kubernetes cluster to apply to")
    .assert_stderr_contains("KUBECONFIG");
    t.yolo(&["audit", "--kube", "some-pod"])
        .fails_with(69)
        .assert_stderr_contains("no Kubernetes cluster to read the guard's log from");
    // A Pod applied earlier is a run: `ps` lists it with what the cluster could not say, and
    // `logs` (read from the cluster) says why it cannot.
    let runs = t.data_dir.join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    std::fs::write(
        runs.join("20261122T000000-0000kube.json"),
        serde_json::json!({
            "id": "20261122T000000-0000kube",
            "workspace": t.workspace,
            "agent": "kube",
            "argv": ["sleep", "600"],
            "container": "yolo-pod-1",
            "session": "s1",
            "network": "firewall",
            "detached": true,
            "started": "2026-11-22T00:00:00Z",
            "kube": {"namespace": "agents", "pod": "yolo-pod-1"}
        })
        .to_string(),
    )
    .unwrap();
    let listed = t.yolo(&["ps", "--all", "--json"]).ok().stdout();
    let listed: Vec<serde_json::Value> = serde_json::from_str(&listed).unwrap();
    let pod = listed
        .iter()
        .find(|r| r["id"] == "20261122T000000-0000kube")
        .expect("the Pod's run listed");
    assert!(
        pod["state"]
            .as_str()
            .unwrap()
            .starts_with("unknown: no Kubernetes cluster to ask about Pod yolo-pod-1"),
        "{pod}"
    );
    assert_eq!(
        pod["log"],
        serde_json::Value::Null,
        "a Pod's log is in its cluster"
    );
    t.yolo(&["ps", "--all"])
        .ok()
        .assert_stdout_contains("pod")
        .assert_stdout_contains("yolo-pod-1");
    t.yolo(&["logs", "20261122T000000-0000kube"])
        .fails_with(69)
        .assert_stderr_contains("no Kubernetes cluster to ask about Pod yolo-pod-1")
        .assert_stderr_contains("KUBECONFIG");

    // A host folder is on no node of a cluster; a host namespace is not the Pod's to give.
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "mounts": ["source=/tmp,target=/host-tmp,type=bind"], "runArgs": ["--pid", "host"]}"#,
    );
    let refuse = |grant: &str, says: &str| {
        t.yolo(&[
            "kube",
            "--upstream-dns",
            "192.0.2.53",
            "--pvc",
            "ws",
            "--grant",
            "host-mount",
            "--grant",
            grant,
        ])
        .fails_with(64)
        .assert_stderr_contains(says);
    };
    refuse("host-pid", "--pid host has no Pod equivalent");
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "mounts": ["source=/tmp,target=/host-tmp,type=bind"]}"#,
    );
    refuse("host-pid", "cannot be part of a Pod");

    // A build on this machine cannot be pulled by a cluster: push it and say where.
    t.file(".devcontainer/Dockerfile", "FROM debian:bookworm-slim\n");
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t.yolo(&["kube", "--upstream-dns", "192.0.2.53", "--pvc", "ws"])
        .fails_with(65)
        .assert_stderr_contains("\"build\"")
        .assert_stderr_contains("--image");
    t.yolo(&[
        "kube",
        "--upstream-dns",
        "192.0.2.53",
        "--pvc",
        "ws",
        "--image",
        "registry.example/app:1",
    ])
    .ok()
    .assert_stdout_contains("image: registry.example/app:1");

    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "features": {"ghcr.io/devcontainers/features/node:1": {}}}"#,
    );
    t.yolo(&["kube", "--upstream-dns", "192.0.2.53", "--pvc", "ws"])
        .fails_with(65)
        .assert_stderr_contains("\"features\"")
        .assert_stderr_contains("--image");

    // Compose is several containers, not one Pod.
    t.file(
        ".devcontainer/compose.yml",
        "services:\n  dev:\n    image: debian:bookworm-slim\n",
    );
    t.devcontainer(
        r#"{"dockerComposeFile": "compose.yml", "service": "dev", "workspaceFolder": "/w"}"#,
    );
    t.yolo(&["kube", "--upstream-dns", "192.0.2.53", "--pvc", "ws"])
        .fails_with(65)
        .assert_stderr_contains("dockerComposeFile");
}

/// The workspace's `origin` and branch become the clone's, and a host folder cannot be mounted.
#[test]
fn the_pod_clones_the_repository_s_remote_and_branch() {
    let t = Test::without_docker();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(&t.workspace)
            .output()
            .unwrap();
        assert!(status.status.success(), "git {args:?}: {}", out(&status));
    };
    git(&["init", "-q", "-b", "feature-x"]);
    git(&[
        "remote",
        "add",
        "origin",
        "https://git.example/team/repo.git",
    ]);
    let yaml = t
        .yolo(&["kube", "--upstream-dns", "192.0.2.53"])
        .ok()
        .stdout();
    let pod = yaml_docs(&yaml).pop().unwrap();
    let clone = pod["spec"]["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "clone")
        .unwrap_or_else(|| panic!("{yaml}"))
        .clone();
    let command: Vec<&str> = clone["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        &command[..6],
        [
            "git",
            "clone",
            "--no-recurse-submodules",
            "--branch",
            "feature-x",
            "--"
        ]
    );
    assert_eq!(command[6], "https://git.example/team/repo.git");
}

/// ATTACK (a hostile repository): `yolo kube` has no HTTP proxy in its Pod, so it must never
/// write a key into the Pod. A repository that asks for the host's key in `containerEnv`
/// (`${localEnv:ANTHROPIC_API_KEY}`, which the user passes) is refused with exit 65 before any
/// YAML, the key nowhere in the output; credentials or HTTP rules in the user's config are refused the same way (they
/// could not apply in the Pod). The agent preset's variable set on the host alone is no key in
/// the Pod: yolo kube hands the agent no host variable.
#[test]
fn yolo_kube_refuses_credentials_and_never_writes_a_key_into_the_pod() {
    let mut t = Test::without_docker();
    let key = format!("sk-ant-api03-{}-realkey0123456789", t.id);
    t.env("ANTHROPIC_API_KEY", &key);
    let kube = ["kube", "--upstream-dns", "192.0.2.53", "--pvc", "ws"];
    // The preset's variable on the host: a Pod without it.
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let yaml = t.yolo(&kube).ok().stdout();
    assert!(!yaml.contains(&key), "the key went into the Pod:\n{yaml}");
    // The repository asks for it by name (yolo withholds the host's variable from a repository
    // unless you pass it: you did here).
    t.user_config("pass_env = [\"ANTHROPIC_API_KEY\"]\n");
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "containerEnv": {"MY_KEY": "${localEnv:ANTHROPIC_API_KEY}"}}"#,
    );
    let refused = t.yolo(&kube).fails_with(65);
    refused
        .assert_stderr_contains("containerEnv.MY_KEY")
        .assert_stderr_contains("into the Pod");
    assert!(!refused.stdout().contains(&key), "{}", refused.describe());
    assert!(!refused.stderr().contains(&key), "{}", refused.describe());
    // The user's credentials: refused, saying why.
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.user_config(
        "[credentials.example]\nhosts = [\"api.example.test\"]\nheader = \"x-api-key\"\nfrom_env = \"ANTHROPIC_API_KEY\"\nagent_env = \"EXAMPLE_KEY\"\n",
    );
    t.yolo(&kube)
        .fails_with(65)
        .assert_stderr_contains("[credentials.example]")
        .assert_stderr_contains("yolo kube does not support credentials");
}
