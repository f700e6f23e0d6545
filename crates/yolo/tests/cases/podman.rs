//! Podman (docs/podman.md): yolo against Podman's Docker-compatible API, rootful and rootless,
//! with the firewall and exec-audit attacks run as root in the agent container, a detached run
//! followed with `ps`/`logs`/`audit`, and `down --remove` leaving nothing.
//!
//! Each test starts its own `podman system service` on a socket in its folder and points yolo at
//! it with `DOCKER_HOST`, as a user would. Podman runs with its own containers.conf
//! (`default_ulimits = []`: this sandbox cannot raise rlimits) through CONTAINERS_CONF. It cannot
//! pull: the images are copied from Docker under names unique to the test and removed with
//! everything labelled for the test when it ends, pass or fail. The rootless tests run Podman and
//! yolo as the user `yolo-rootless`, which `scripts/test-deps.sh` makes (with subordinate ids, a
//! runtime folder as logind would mount it, and `/dev/net/tun` open as Debian ships it).

use crate::support::net::{docker_ok, ensure_image, Internet, AGENT_IMAGE, DNS_IMAGE};
use crate::support::*;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One Podman test at a time: Podman's store takes one writer at a time, and the rootless ones
/// share one user.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

const ROOTLESS_USER: &str = "yolo-rootless";

/// The rootless user's uid and gid, and what its Podman needs, checked.
fn rootless_user() -> (u32, u32) {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id")
            .args([flag, ROOTLESS_USER])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    let (Some(uid), Some(gid)) = (id("-u"), id("-g")) else {
        panic!(
            "no user {ROOTLESS_USER}: run scripts/test-deps.sh (it makes the rootless Podman user)"
        );
    };
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    assert!(
        mounts
            .lines()
            .any(|l| l.split(' ').nth(4) == Some(&format!("/run/user/{uid}"))),
        "/run/user/{uid} is not mounted: run scripts/test-deps.sh"
    );
    (uid, gid)
}

/// A Podman service of this test's, and what the test made in it.
struct Podman {
    _one: std::sync::MutexGuard<'static, ()>,
    /// (uid, gid) of the rootless user; None: rootful.
    user: Option<(u32, u32)>,
    conf: PathBuf,
    socket: PathBuf,
    service: Child,
    label: String,
    images: Vec<String>,
}

impl Podman {
    fn start(t: &Test, rootless: bool) -> Podman {
        let one = ONE.lock().unwrap_or_else(|p| p.into_inner());
        let user = rootless.then(rootless_user);
        let dir = t.root().join("podman");
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("containers.conf");
        std::fs::write(&conf, "[containers]\ndefault_ulimits = []\n").unwrap();
        if let Some((uid, gid)) = user {
            let chown = Command::new("chown")
                .arg("-R")
                .arg(format!("{uid}:{gid}"))
                .arg(t.root())
                .status()
                .unwrap();
            assert!(chown.success());
        }
        let socket = dir.join("podman.sock");
        let service_log = dir.join("service.log");
        let mut podman = Podman {
            _one: one,
            user,
            conf,
            socket: socket.clone(),
            // Replaced below; a placeholder that is already gone.
            service: Command::new("true").spawn().unwrap(),
            label: format!("{LABEL}={}", t.id),
            images: Vec::new(),
        };
        let _ = podman.service.wait();
        let version = podman.cli().arg("--version").output().expect("podman");
        assert!(
            version.status.success(),
            "podman is missing: run scripts/test-deps.sh"
        );
        // Its own process group: rootless Podman re-executes itself in a user namespace, and
        // that child outlives a kill of the first process; the drop kills the whole group.
        podman.service = podman
            .cli()
            .args(["system", "service", "--time=0"])
            .arg(format!("unix://{}", socket.display()))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&service_log).unwrap())
            .process_group(0)
            .spawn()
            .expect("podman system service");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            // A service that ended will never listen: say what it printed.
            let ended = podman.service.try_wait().ok().flatten();
            assert!(
                ended.is_none() && Instant::now() < deadline,
                "podman never listened on {socket:?} ({}):\n{}",
                ended.map_or("still running".to_string(), |s| s.to_string()),
                std::fs::read_to_string(&service_log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        podman.sweep_dead_runs();
        podman
    }

    fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The podman CLI, as the rootless user when there is one (`setpriv` execs it: the child
    /// is Podman itself, so killing it stops the service).
    fn cli(&self) -> Command {
        let mut cmd = match self.user {
            None => Command::new("podman"),
            Some((uid, gid)) => {
                let mut cmd = Command::new("setpriv");
                cmd.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--init-groups")
                    .arg("podman")
                    .env("HOME", format!("/home/{ROOTLESS_USER}"))
                    .env("XDG_RUNTIME_DIR", format!("/run/user/{uid}"));
                cmd
            }
        };
        cmd.env("CONTAINERS_CONF", &self.conf);
        cmd
    }

    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        let out = self.cli().args(args).output().expect("podman CLI");
        assert!(
            out.status.success(),
            "podman {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Copy Docker's `image` into this Podman as `localhost/<test id>-<role>:1`.
    fn load(&mut self, t: &Test, image: &str, role: &str) -> String {
        let name = format!("localhost/{}-{role}:1", t.id.to_lowercase());
        self.images.push(name.clone());
        docker_ok(&["tag", image, &name]);
        let mut last = String::new();
        // Tried again: a parallel test's Podman (kube) may hold the store for a moment.
        for _ in 0..3 {
            let mut save = Command::new("docker")
                .args(["save", &name])
                .stdout(Stdio::piped())
                .spawn()
                .expect("docker save");
            let loaded = self
                .cli()
                .args(["load", "-q"])
                .stdin(save.stdout.take().unwrap())
                .output()
                .expect("podman load");
            let _ = save.wait();
            if loaded.status.success() {
                let _ = docker(&["rmi", &name]);
                return name;
            }
            last = String::from_utf8_lossy(&loaded.stderr).into_owned();
            std::thread::sleep(Duration::from_secs(1));
        }
        let _ = docker(&["rmi", &name]);
        panic!("loading {image} into podman: {last}");
    }

    /// What yolo made of `kind` for the test (not the fake internet's).
    fn made(&self, list: &[&str]) -> Vec<String> {
        self.listed(list, &["--filter", "label=dev.yolo.managed=true"])
    }

    fn listed(&self, list: &[&str], filters: &[&str]) -> Vec<String> {
        self.listed_by(&self.label, list, filters)
    }

    /// Ids of what carries `label`, of `kind` (`ps -a`, `volume ls`, `network ls`, `images`).
    fn listed_by(&self, label: &str, list: &[&str], filters: &[&str]) -> Vec<String> {
        let filter = format!("label={label}");
        // Never panics: the drop lists through here.
        let Ok(out) = self
            .cli()
            .args(list)
            .args(["-q", "--filter", &filter])
            .args(filters)
            .output()
        else {
            return Vec::new();
        };
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn agent(&self) -> String {
        let filter = format!("label={}", self.label);
        self.ok(&[
            "ps",
            "-q",
            "--filter",
            &filter,
            "--filter",
            "label=dev.yolo.role=agent",
        ])
    }
}

impl Podman {
    /// Remove what carries `label` and the images `images`. Never panics.
    fn remove(&self, label: &str, images: &[String]) {
        let ids = self.listed_by(label, &["ps", "-a"], &[]);
        if !ids.is_empty() {
            let _ = self
                .cli()
                .args(["rm", "-f", "-v", "--depend"])
                .args(&ids)
                .output();
        }
        for kind in ["volume", "network"] {
            for id in self.listed_by(label, &[kind, "ls"], &[]) {
                let _ = self.cli().args([kind, "rm", "-f", &id]).output();
            }
        }
        let labelled = self.listed_by(label, &["images"], &[]);
        let _ = self.cli().args(["rmi", "-f"]).args(&labelled).output();
        let _ = self.cli().args(["rmi", "-f"]).args(images).output();
    }

    /// What killed runs of these tests left in this Podman (a test's drop removes its own, but
    /// not when its process was killed): the support's `sweep_dead_runs`, for Podman's store.
    fn sweep_dead_runs(&self) {
        let mut ids = std::collections::BTreeSet::new();
        for (list, key) in [
            (["ps", "-a"], "Labels"),
            (["volume", "ls"], "Labels"),
            (["network", "ls"], "labels"),
        ] {
            let Ok(out) = self
                .cli()
                .args(list)
                .args(["--filter", &format!("label={LABEL}"), "--format", "json"])
                .output()
            else {
                continue;
            };
            let listed: Vec<serde_json::Value> =
                serde_json::from_slice(&out.stdout).unwrap_or_default();
            ids.extend(
                listed
                    .iter()
                    .filter_map(|o| o[key][LABEL].as_str().map(str::to_string)),
            );
        }
        // What `load` copied in: `localhost/<test id>-<role>:1`.
        let names = self
            .cli()
            .args(["images", "--format", "{{.Repository}}:{{.Tag}}"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let mut images: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for name in names.lines() {
            let Some((id, role)) = name
                .strip_prefix("localhost/")
                .and_then(|n| n.split_once('-'))
            else {
                continue;
            };
            // Only the names `load` gives (a test id, a role, tag 1), never another image.
            let role_ok = role
                .strip_suffix(":1")
                .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_lowercase()));
            if role_ok && test_process_gone(id) {
                ids.insert(id.to_string());
                images
                    .entry(id.to_string())
                    .or_default()
                    .push(name.to_string());
            }
        }
        for id in ids.into_iter().filter(|id| test_process_gone(id)) {
            let names = images.remove(&id).unwrap_or_default();
            self.remove(&format!("{LABEL}={id}"), &names);
        }
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        // Never panic here: a panic while a failed test unwinds aborts the test binary.
        self.remove(&self.label, &self.images);
        if let Ok(group) = i32::try_from(self.service.id()) {
            // SAFETY: a signal to the service's own process group (made at spawn).
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
        let _ = self.service.kill();
        let _ = self.service.wait();
    }
}

fn text(o: &Run) -> String {
    format!("{}{}", o.stdout(), o.stderr())
}

/// A detached agent's job: what it ran ends up in its log and the session's record. Its own
/// allowlist (`domains`) opens the name it fetches.
const WORKER: &str = r#"[agents.worker]
command = ["sh", "-c", "echo worker-start:$1; curl -sS -m 5 http://www.allowed.test/; echo worker-end", "worker"]
domains = ["www.allowed.test"]
"#;

/// The firewall and the exec audit hold against root in the agent container, a detached run is
/// listed, followed and audited, and `down --remove` leaves nothing in Podman.
fn keeps_every_protection(t: &Test, podman: &Podman, net: &Internet) {
    let mut flags = vec!["up", "--json"];
    let up_flags = net.up_flags(&["*.allowed.test"]);
    flags.extend(up_flags.iter().map(String::as_str));
    t.yolo(&flags).ok();
    let agent = podman.agent();
    assert!(!agent.is_empty(), "no agent container in podman");
    // The guard owns the network and PID namespaces; the agent joins both.
    let modes = podman.ok(&[
        "inspect",
        "-f",
        "{{.HostConfig.NetworkMode}} {{.HostConfig.PidMode}}",
        &agent,
    ]);
    let (network, pid) = modes.split_once(' ').unwrap();
    assert!(network.starts_with("container:"), "{modes}");
    assert_eq!(network, pid, "{modes}");
    let sh = |script: &str| t.yolo(&["exec", "--", "sh", "-c", script]);
    let init = sh("tr '\\0' ' ' < /proc/1/cmdline").ok();
    assert!(init.stdout().contains("yolo-guard run"), "{}", text(&init));

    // The allowlist: the allowed name answers, the other is refused, its address dropped.
    let allowed = sh("curl -sS -m 5 http://www.allowed.test/").ok();
    assert_eq!(allowed.stdout().trim(), net.allowed.body);
    let denied = sh("curl -sS -m 5 http://www.denied.test/");
    assert_ne!(denied.code(), 0, "{}", text(&denied));
    assert!(
        text(&denied).contains("Could not resolve host"),
        "{}",
        text(&denied)
    );
    let direct = sh(&format!("curl -sS -m 5 http://{}/", net.denied.host.ip));
    assert_ne!(direct.code(), 0, "{}", text(&direct));
    assert!(
        !text(&direct).contains(&net.denied.body),
        "{}",
        text(&direct)
    );
    // Root in the agent holds neither NET_ADMIN nor NET_RAW, and cannot touch the shim.
    let flush = sh("nft flush ruleset");
    assert_ne!(flush.code(), 0, "{}", text(&flush));
    assert!(
        text(&flush).contains("Operation not permitted"),
        "{}",
        text(&flush)
    );
    let raw = sh(
        "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)'",
    );
    assert_ne!(raw.code(), 0, "{}", text(&raw));
    assert!(text(&raw).contains("PermissionError"), "{}", text(&raw));
    let write = sh("echo x >> /.yolo/shim");
    assert_ne!(write.code(), 0, "{}", text(&write));
    // One agent process cannot open another's memory for writing (issue 23, item 5: the
    // argv rewrite after the exec stop). Podman's /proc is writable (yolo mounts it read-only
    // on Docker only), so what refuses it here is the shim's Landlock ruleset.
    // Root first plants what once made the ruleset fail as a whole (a link at / to a
    // namespace file): the next exec's shim must confine all the same.
    sh("ln -s /proc/self/ns/net /yolo-planted-ns && ln -s /proc /yolo-planted-proc").ok();
    let mem = sh("sleep 30 & v=$!; (exec 3<>/proc/$v/mem) && echo mem:opened; (exec 3<>/yolo-planted-proc/$v/mem) && echo mem:opened; kill $v");
    assert!(!mem.stdout().contains("mem:opened"), "{}", text(&mem));
    assert!(text(&mem).contains("Permission denied"), "{}", text(&mem));
    // Killing the guard (PID 1 of the shared namespace) is refused by the kernel.
    let kill = sh("kill -9 1; sleep 1; tr '\\0' ' ' < /proc/1/cmdline");
    assert!(kill.stdout().contains("yolo-guard run"), "{}", text(&kill));
    // After all that, the firewall still holds.
    let again = sh(&format!("curl -sS -m 5 http://{}/", net.denied.host.ip));
    assert!(!text(&again).contains(&net.denied.body), "{}", text(&again));

    // The exec audit recorded what root ran, with its arguments.
    let audit = t.yolo(&["audit", "--json", "--kind", "exec"]).ok().stdout();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("nft") && l.contains("flush")),
        "no exec of nft flush in the audit:\n{audit}"
    );

    // A detached run: listed, its log followed, its exit recorded, its execs audited.
    let id = t.yolo(&["run", "--detach", "worker", "--", "job"]).ok();
    let id = id.stdout().trim().to_string();
    t.yolo(&["logs", &id, "-f"])
        .ok()
        .assert_stdout_contains("worker-start:job")
        .assert_stdout_contains(&net.allowed.body)
        .assert_stdout_contains("worker-end");
    let runs: Vec<serde_json::Value> =
        serde_json::from_str(&t.yolo(&["ps", "--all", "--json"]).ok().stdout()).unwrap();
    let run = runs
        .iter()
        .find(|r| r["id"] == id.as_str())
        .expect("the run in ps");
    assert_eq!(run["exit_code"], 0, "{run}");
    let audit = t.yolo(&["audit", "--json", "--kind", "exec"]).ok().stdout();
    assert!(
        audit.lines().any(|l| l.contains("worker-start")),
        "the detached run's execs are not in the audit:\n{audit}"
    );

    t.yolo(&["down", "--remove"]).ok();
    assert_eq!(podman.made(&["ps", "-a"]), Vec::<String>::new());
    assert_eq!(podman.made(&["network", "ls"]), Vec::<String>::new());
}

/// A test with the agent image and a fake internet in Podman, yolo pointed at it.
fn podman_test(rootless: bool) -> (Test, Podman, Internet) {
    ensure_image(DNS_IMAGE, "dns.Dockerfile");
    ensure_image(AGENT_IMAGE, "agent.Dockerfile");
    let mut t = Test::new();
    let mut podman = Podman::start(&t, rootless);
    let agent = podman.load(&t, AGENT_IMAGE, "agent");
    let dns = podman.load(&t, DNS_IMAGE, "dns");
    let net = Internet::on(&t, Some(&podman.host()), &dns);
    t.devcontainer(&format!(r#"{{"image": "{agent}"}}"#));
    t.env("DOCKER_HOST", &podman.host());
    if let Some((uid, gid)) = podman.user {
        t.run_as(uid, gid);
        t.env("HOME", &format!("/home/{ROOTLESS_USER}"));
        t.env("XDG_RUNTIME_DIR", &format!("/run/user/{uid}"));
    }
    (t, podman, net)
}

#[test]
fn rootful_podman_keeps_every_protection_and_the_limits() {
    let (t, podman, net) = podman_test(false);
    t.user_config(&format!("{}\n{WORKER}", net.user_config("")));
    // The limits hold: read back by yolo (the up succeeds with them required) and in force.
    t.yolo(
        &["up"]
            .iter()
            .copied()
            .chain(net.up_flags(&[]).iter().map(String::as_str))
            .collect::<Vec<_>>(),
    )
    .ok();
    let pids = t
        .yolo(&[
            "exec",
            "--",
            "sh",
            "-c",
            "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max",
        ])
        .ok();
    assert_ne!(pids.stdout().trim(), "max", "no process limit in force");
    assert!(
        pids.stdout().trim().parse::<u64>().is_ok(),
        "{}",
        text(&pids)
    );
    keeps_every_protection(&t, &podman, &net);
}

#[test]
fn rootless_podman_keeps_every_protection_and_refuses_dropped_limits() {
    let (t, podman, net) = podman_test(true);
    let (uid, _) = podman.user.unwrap();
    t.user_config(&format!("{}\n{WORKER}", net.user_config("")));
    let mut up = vec!["up"];
    let flags = net.up_flags(&["*.allowed.test"]);
    up.extend(flags.iter().map(String::as_str));
    // Rootless Podman without the cgroup controllers (cgroup v1, or v2 without delegation)
    // drops the limits without an error: refused, nothing left; with them, nothing to refuse.
    let controllers = podman.ok(&["info", "--format", "{{.Host.CgroupControllers}}"]);
    let drops = !["cpu", "memory", "pids"]
        .iter()
        .all(|c| controllers.split([' ', '[', ']']).any(|w| w == *c));
    if drops {
        // The guard is made first, and refused by name.
        let refused = t.yolo(&up).fails_with(69);
        refused.assert_stderr_contains("-guard without its CPU, memory and process limits");
        refused.assert_stderr_contains("required = false");
        assert_eq!(podman.made(&["ps", "-a"]), Vec::<String>::new());
        assert_eq!(podman.made(&["network", "ls"]), Vec::<String>::new());
        // Without a guard (`--network none`), the agent's own check refuses it.
        let alone = t.yolo(&["up", "--network", "none"]).fails_with(69);
        alone.assert_stderr_contains("without its CPU, memory and process limits");
        alone.assert_stderr_lacks("-guard");
        assert_eq!(podman.made(&["ps", "-a"]), Vec::<String>::new());
        // Told to, it runs without them, and says so.
        t.user_config(&format!(
            "{}\n{WORKER}",
            net.user_config("[limits]\nrequired = false\n")
        ));
        t.yolo(&up)
            .ok()
            .assert_stderr_contains("running without (`[limits] required = false`)");
    } else {
        t.yolo(&up).ok();
    }
    // Root in the container is the user on the host: what the agent writes is the user's.
    t.yolo(&["exec", "--", "touch", "made-by-the-agent"]).ok();
    use std::os::unix::fs::MetadataExt;
    let made = std::fs::metadata(t.workspace.join("made-by-the-agent")).unwrap();
    assert_eq!(made.uid(), uid, "the agent's file is not the user's");
    keeps_every_protection(&t, &podman, &net);
    // A non-root remote user cannot be the user on the host here: its uid is left alone and
    // the setup says what works instead.
    let agent = podman.images[0].clone();
    t.devcontainer(&format!(
        r#"{{"image": "{agent}", "remoteUser": "nobody"}}"#
    ));
    let mut up = up.clone();
    up.push("--accept-config");
    let made = t.yolo(&up).ok();
    for said in [
        "the engine maps your user to root in this container",
        "\"remoteUser\": \"root\"",
    ] {
        assert!(text(&made).contains(said), "{}", made.describe());
    }
    t.yolo(&["down", "--remove"]).ok();
}
