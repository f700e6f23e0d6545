//! A small fake internet for the firewall tests, made of our own containers only: a Docker
//! network labeled with the test's id, three web servers with distinctive bodies, and a dnsmasq
//! name server answering the made-up names `*.allowed.test`, `*.denied.test` and `*.other.test`
//! with those servers' addresses and logging every query it receives. Nothing here sends a
//! packet to a public address or to a private address that is not one of these containers.
//!
//! The helper images are built once per test run with fixed tags, shared by the tests (so no
//! test's cleanup removes them) and labelled [`FIXTURE_LABEL`]: `scripts/test.sh` removes them
//! when the run ends (`scripts/sweep-tests.sh`; `YOLO_KEEP_TEST_IMAGES=1` keeps them for the
//! next run). The containers and the network carry the test's label, so `Test`'s drop removes
//! them.

use super::{docker, Run, Test, LABEL};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// dnsmasq + busybox (httpd): the name server and the web servers.
pub const DNS_IMAGE: &str = "yolo-test-dns:1";
/// The agent's project image: curl, dig, ip, nft, python3.
pub const AGENT_IMAGE: &str = "yolo-test-agent:1";
/// The guard's socket mark (`firewall::GUARD_MARK`, "yolo").
pub const GUARD_MARK: u32 = 0x796f_6c6f;

/// The label of the helper images the tests share (`ensure_image`).
pub const FIXTURE_LABEL: &str = "dev.yolo.test-fixture";

/// Serializes image builds between the tests of this binary (they run on threads).
static BUILD: Mutex<()> = Mutex::new(());

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/net")
        .join(name)
}

/// Build `tag` from tests/fixtures/net/`dockerfile` unless it exists, labelled [`FIXTURE_LABEL`].
pub fn ensure_image(tag: &str, dockerfile: &str) {
    let _lock = BUILD.lock().unwrap_or_else(|p| p.into_inner());
    // One of an earlier harness has no label (the sweep would never remove it): built again,
    // from Docker's cache.
    let format = format!("{{{{index .Config.Labels \"{FIXTURE_LABEL}\"}}}}");
    let labelled = Command::new("docker")
        .args(["image", "inspect", "--format", &format, tag])
        .output()
        .expect("docker CLI");
    if labelled.status.success() {
        if String::from_utf8_lossy(&labelled.stdout).trim() == "1" {
            return;
        }
        // Not left behind untagged: the new build takes the tag and Docker's cache.
        let _ = docker(&["rmi", "--no-prune", tag]);
    }
    let dir = fixture("");
    let file = fixture(dockerfile);
    docker_ok(&[
        "build",
        "-q",
        "--label",
        &format!("{FIXTURE_LABEL}=1"),
        "-t",
        tag,
        "-f",
        file.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
}

/// Run the docker CLI and insist on success; stdout, trimmed.
#[track_caller]
pub fn docker_ok(args: &[&str]) -> String {
    docker_on(None, args)
}

/// The docker CLI against the engine at `host` (`DOCKER_HOST`; None: the default one).
fn cli(host: Option<&str>) -> Command {
    let mut cmd = Command::new("docker");
    if let Some(host) = host {
        cmd.env("DOCKER_HOST", host);
    }
    cmd
}

/// [`docker_ok`] against the engine at `host` (the docker CLI speaks to Podman's API too).
#[track_caller]
pub fn docker_on(host: Option<&str>, args: &[&str]) -> String {
    let mut out = cli(host).args(args).output().expect("docker CLI");
    // The engine lists the host's interfaces to pick a subnet; another test's network going
    // away meanwhile fails the create with "no such network interface". Not this test's fault.
    for wait in 1..=8 {
        if out.status.success()
            || !String::from_utf8_lossy(&out.stderr).contains("no such network interface")
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100 * wait));
        out = cli(host).args(args).output().expect("docker CLI");
    }
    assert!(
        out.status.success(),
        "docker {} failed:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A container of the fake internet.
#[derive(Debug, Clone)]
pub struct Host {
    pub name: String,
    pub ip: String,
}

/// A web server and the body it serves.
#[derive(Debug, Clone)]
pub struct Web {
    pub host: Host,
    pub body: String,
}

pub struct Internet {
    /// The engine it runs on (`DOCKER_HOST`); None: the default one.
    pub docker_host: Option<String>,
    /// The Docker network (the guard joins it through `[firewall] docker_network`).
    pub network: String,
    pub gateway: String,
    pub subnet: String,
    pub dns: Host,
    /// `*.allowed.test` answers this one.
    pub allowed: Web,
    /// `*.denied.test` answers this one.
    pub denied: Web,
    /// `*.other.test` (and `other.test`) answers this one.
    pub other: Web,
}

impl Internet {
    /// Network, three web servers, then the name server (it needs their addresses).
    pub fn new(t: &Test) -> Internet {
        ensure_image(DNS_IMAGE, "dns.Dockerfile");
        ensure_image(AGENT_IMAGE, "agent.Dockerfile");
        Internet::on(t, None, DNS_IMAGE)
    }

    /// The same on the engine at `docker_host` (Podman's socket, say), from `dns_image` there
    /// (the DNS_IMAGE build, copied).
    pub fn on(t: &Test, docker_host: Option<&str>, dns_image: &str) -> Internet {
        let docker_ok = |args: &[&str]| docker_on(docker_host, args);
        let ip_of = |name: &str, network: &str| ip_on(docker_host, name, network);
        let label = format!("{LABEL}={}", t.id);
        let network = format!("yolo-{}-inet", t.id);
        docker_ok(&["network", "create", "--label", &label, &network]);
        let net_info: serde_json::Value =
            serde_json::from_str(&docker_ok(&["network", "inspect", &network])).unwrap();
        let ipam = &net_info[0]["IPAM"]["Config"][0];
        let subnet = ipam["Subnet"].as_str().unwrap_or_default().to_string();
        let gateway = ipam["Gateway"].as_str().unwrap_or_default().to_string();
        let web = |role: &str| {
            let name = format!("yolo-{}-web-{role}", t.id);
            let body = format!("hello from the {role} server {}", t.id);
            docker_ok(&[
                "run",
                "-d",
                "--name",
                &name,
                "--label",
                &label,
                "--network",
                &network,
                "-e",
                &format!("BODY={body}"),
                dns_image,
                "sh",
                "-c",
                // Port 81 too, for the port-restricted allowlist entries.
                "mkdir -p /www && echo \"$BODY\" > /www/index.html && busybox httpd -p 81 -h /www \
                 && exec busybox httpd -f -p 80 -h /www",
            ]);
            Web {
                host: Host {
                    ip: ip_of(&name, &network),
                    name,
                },
                body,
            }
        };
        let allowed = web("allowed");
        let denied = web("denied");
        let other = web("other");
        let name = format!("yolo-{}-dns", t.id);
        docker_ok(&[
            "run",
            "-d",
            "--name",
            &name,
            "--label",
            &label,
            "--network",
            &network,
            dns_image,
            "sh",
            "-c",
            &format!(
                "mkdir -p /etc/hosts.d && exec dnsmasq --keep-in-foreground --user=root \
                 --no-resolv --no-hosts --log-queries --log-facility=- --local-ttl=1 \
                 --hostsdir=/etc/hosts.d --address=/allowed.test/{} --address=/denied.test/{} \
                 --address=/other.test/{}",
                allowed.host.ip, denied.host.ip, other.host.ip
            ),
        ]);
        let dns = Host {
            ip: ip_of(&name, &network),
            name,
        };
        let internet = Internet {
            docker_host: docker_host.map(str::to_string),
            network,
            gateway,
            subnet,
            dns,
            allowed,
            denied,
            other,
        };
        internet.wait_answer("ready.allowed.test", &internet.allowed.host.ip);
        internet
    }

    /// Everything dnsmasq logged (every query it received is a `query[..] NAME from ..` line).
    pub fn dns_log(&self) -> String {
        let out = cli(self.docker_host.as_deref())
            .args(["logs", &self.dns.name])
            .output()
            .expect("docker logs");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// Did the name server receive a query for `name`?
    pub fn dns_saw(&self, name: &str) -> bool {
        self.dns_log()
            .lines()
            .any(|l| l.contains("query[") && l.contains(&format!("] {name} from")))
    }

    /// Make the name server answer `name` with `ip` from now on (a hosts file it watches; hosts
    /// entries win over the wildcard `--address`), and wait until it does.
    pub fn set_answer(&self, name: &str, ip: &str) {
        let file = format!("/etc/hosts.d/{name}");
        docker_on(
            self.docker_host.as_deref(),
            &[
                "exec",
                &self.dns.name,
                "sh",
                "-c",
                &format!("echo '{ip} {name}' > {file}.tmp && mv {file}.tmp {file}"),
            ],
        );
        self.wait_answer(name, ip);
    }

    /// Poll the name server from inside its own container until `name` resolves to `ip`.
    fn wait_answer(&self, name: &str, ip: &str) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let out = cli(self.docker_host.as_deref())
                .args([
                    "exec",
                    &self.dns.name,
                    "busybox",
                    "nslookup",
                    name,
                    "127.0.0.1",
                ])
                .output()
                .expect("docker exec");
            if String::from_utf8_lossy(&out.stdout).contains(&format!("Address: {ip}")) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the test DNS server never answered {name} with {ip}:\n{}",
                self.dns_log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The user config that puts the guard on this network and lets it open our (private)
    /// test servers' addresses.
    pub fn user_config(&self, extra: &str) -> String {
        format!(
            "{}allow_internal_answers = true\n",
            self.strict_config(extra)
        )
    }

    /// The same, with the default DNS-rebinding protection: private answers are not opened.
    pub fn strict_config(&self, extra: &str) -> String {
        format!(
            "{extra}\n[firewall]\ndocker_network = \"{}\"\n",
            self.network
        )
    }

    /// `yolo up` flags: our name server upstream, and `allow` patterns.
    pub fn up_flags(&self, allow: &[&str]) -> Vec<String> {
        let mut flags = vec!["--upstream-dns".to_string(), self.dns.ip.clone()];
        for pattern in allow {
            flags.push("--allow".into());
            flags.push((*pattern).into());
        }
        flags
    }
}

/// The IPv4 address of container `name` on `network`.
pub fn ip_of(name: &str, network: &str) -> String {
    ip_on(None, name, network)
}

/// [`ip_of`] on the engine at `host`.
pub fn ip_on(host: Option<&str>, name: &str, network: &str) -> String {
    let ip = docker_on(
        host,
        &[
            "inspect",
            "--format",
            &format!("{{{{(index .NetworkSettings.Networks \"{network}\").IPAddress}}}}"),
            name,
        ],
    );
    assert!(!ip.is_empty(), "{name} has no address on {network}");
    ip
}

/// A test with its own fake internet and an agent container behind the firewall.
pub struct Session {
    pub t: Test,
    pub net: Internet,
    pub up: serde_json::Value,
}

impl Session {
    /// `{"image": AGENT_IMAGE}` (plus `devcontainer_extra` properties), the internet's user
    /// config, and `yolo up` with `allow` and `up_extra` flags.
    pub fn start(allow: &[&str], up_extra: &[&str]) -> Session {
        Session::start_with("", allow, up_extra)
    }

    pub fn start_with(devcontainer_extra: &str, allow: &[&str], up_extra: &[&str]) -> Session {
        Session::start_full(devcontainer_extra, "", allow, up_extra)
    }

    /// As [`Session::start_with`], with `user_extra` TOML before the `[firewall]` table.
    pub fn start_full(
        devcontainer_extra: &str,
        user_extra: &str,
        allow: &[&str],
        up_extra: &[&str],
    ) -> Session {
        let t = Test::new();
        let net = Internet::new(&t);
        t.devcontainer(&format!(
            r#"{{"image": "{AGENT_IMAGE}"{devcontainer_extra}}}"#
        ));
        t.user_config(&net.user_config(user_extra));
        let mut flags = net.up_flags(allow);
        flags.extend(up_extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = flags.iter().map(String::as_str).collect();
        let (_, up) = t.up(&refs);
        Session { t, net, up }
    }

    /// `yolo exec sh -c SCRIPT` in the agent container.
    pub fn sh(&self, script: &str) -> Run {
        self.t.yolo(&["exec", "sh", "-c", script])
    }

    /// The guard container's id.
    pub fn guard(&self) -> String {
        guard_of(&self.t)
    }

    /// `nft -j list table inet yolo` of the guard's network namespace. The guard image holds no
    /// `nft` (the guard speaks netlink itself), so the host's nft reads it through nsenter.
    pub fn ruleset(&self) -> serde_json::Value {
        let pid = docker_ok(&["inspect", "-f", "{{.State.Pid}}", &self.guard()]);
        let out = std::process::Command::new("nsenter")
            .args([
                "-t", &pid, "-n", "nft", "-j", "list", "table", "inet", "yolo",
            ])
            .output()
            .expect("nsenter");
        assert!(
            out.status.success(),
            "nsenter -t {pid} -n nft -j list table inet yolo: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        serde_json::from_str(&text).expect("nft -j output")
    }

    /// `curl` the URL from the agent: (exit code, body, seconds taken).
    pub fn curl(&self, url: &str) -> (i32, String, f64) {
        let started = Instant::now();
        let run = self.t.yolo(&[
            "exec",
            "curl",
            "-sS",
            "--connect-timeout",
            "5",
            "--max-time",
            "8",
            url,
        ]);
        (
            run.code(),
            format!("{}{}", run.stdout(), run.stderr()),
            started.elapsed().as_secs_f64(),
        )
    }

    /// `dig NAME` through the agent's resolver: the status word (NOERROR, REFUSED..) and the
    /// addresses of the answer; `None` when dig got no answer at all.
    pub fn dig(&self, args: &str) -> Option<(String, Vec<String>)> {
        let run = self.sh(&format!("dig +tries=1 +time=2 {args}"));
        let text = run.stdout();
        let status = text
            .lines()
            .find_map(|l| l.split("status: ").nth(1))
            .map(|s| s.split(',').next().unwrap_or_default().to_string())?;
        let short = self
            .sh(&format!("dig +tries=1 +time=2 +short {args}"))
            .stdout();
        let answers = short
            .lines()
            .filter(|l| l.parse::<std::net::IpAddr>().is_ok())
            .map(str::to_string)
            .collect();
        Some((status, answers))
    }

    /// Poll the audit log (bounded) for an event matching `pred`.
    pub fn wait_event(
        &self,
        timeout: Duration,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> Option<serde_json::Value> {
        wait_event(&self.t, timeout, pred)
    }
}

pub fn guard_of(t: &Test) -> String {
    let ids = docker(&[
        "ps",
        "-aq",
        "--filter",
        &format!("label={LABEL}={}", t.id),
        "--filter",
        "label=dev.yolo.role=guard",
    ]);
    let ids: Vec<&str> = ids.lines().collect();
    assert_eq!(ids.len(), 1, "exactly one guard: {ids:?}");
    ids[0].to_string()
}

/// Poll `t`'s audit log for an event matching `pred` for at most `timeout`.
pub fn wait_event(
    t: &Test,
    timeout: Duration,
    pred: impl Fn(&serde_json::Value) -> bool,
) -> Option<serde_json::Value> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(e) = t.events().into_iter().find(|e| pred(e)) {
            return Some(e);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
