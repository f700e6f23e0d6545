//! Builds behind the firewall: a Dockerfile's RUN steps share the guard's network namespace
//! (the project's allowlist plus `[build]`), or have no network with `--network none`; never
//! the engine's default bridge. Each RUN step writes what it reached into the image, which the
//! test reads back from the agent container.

use crate::support::net::*;
use crate::support::*;
use serde_json::Value;
use std::time::Duration;

const EVENT_WAIT: Duration = Duration::from_secs(8);

/// A web server on Docker's default bridge, where a build runs when nothing says otherwise:
/// what a build that is not behind the guard reaches. Its address and body.
fn server_on_the_default_bridge(t: &Test) -> (String, String) {
    ensure_image(DNS_IMAGE, "dns.Dockerfile");
    let name = format!("yolo-{}-bridge-web", t.id);
    let body = format!("the default bridge server {}", t.id);
    docker_ok(&[
        "run",
        "-d",
        "--name",
        &name,
        "--label",
        &format!("{LABEL}={}", t.id),
        "-e",
        &format!("BODY={body}"),
        DNS_IMAGE,
        "sh",
        "-c",
        "mkdir -p /www && echo \"$BODY\" > /www/index.html && exec busybox httpd -f -p 80 -h /www",
    ]);
    (ip_of(&name, "bridge"), body)
}

/// A Dockerfile from the agent test image whose RUN step writes `script`'s output to `file`.
fn dockerfile(t: &Test, steps: &[(&str, &str)]) {
    let mut text = format!("FROM {AGENT_IMAGE}\n");
    for (file, script) in steps {
        text.push_str(&format!(
            "RUN ({script}) > {file} 2>&1; status=$?; cat {file}; exit $status\n"
        ));
    }
    t.file(".devcontainer/Dockerfile", &text);
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
}

/// `curl` from a RUN step: the body, else BLOCKED.
fn fetch(url: &str) -> String {
    format!("curl -sS --connect-timeout 5 --max-time 8 {url} || echo BLOCKED")
}

fn read(t: &Test, file: &str) -> String {
    t.yolo(&["exec", "cat", file]).ok().stdout()
}

fn up(t: &Test, net: &Internet, allow: &[&str], extra: &[&str]) -> Run {
    let mut flags = vec!["up".to_string()];
    flags.extend(net.up_flags(allow));
    flags.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = flags.iter().map(String::as_str).collect();
    t.yolo(&refs)
}

#[test]
fn a_build_step_cannot_reach_a_server_the_firewall_denies_and_the_attempt_is_audited() {
    let t = Test::new();
    let net = Internet::new(&t);
    let (ip, body) = server_on_the_default_bridge(&t);
    // RUN steps hold NET_RAW (the builder's default), which lets them set the guard's socket
    // mark (Linux >= 5.17): marked, they must still reach nothing but the upstream resolver,
    // not even a server on the guard's own bridge.
    let denied = &net.denied.host.ip;
    let marked = format!(
        "python3 -c 'import socket; s = socket.socket(); s.setsockopt(1, 36, {GUARD_MARK}); \
         s.settimeout(5); r = s.connect_ex((\"{denied}\", 80)); \
         print(\"BLOCKED\", r) if r else (s.sendall(b\"GET / HTTP/1.0\\r\\n\\r\\n\"), \
         print(s.recv(4096)))'"
    );
    // And the upstream resolver itself, asked for a name off the allowlist with that mark: an
    // answer would be a channel out through DNS.
    let resolver = &net.dns.ip;
    let marked_dns = format!(
        r#"python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.setsockopt(1, 36, {GUARD_MARK}); s.settimeout(3); s.sendto(bytes.fromhex("12340100000100000000000006736563726574076578616d706c650000010001"), ("{resolver}", 53)); s.recv(512)' && echo ANSWER || echo BLOCKED"#
    );
    dockerfile(
        &t,
        &[
            ("/build-net.txt", &fetch(&format!("http://{ip}/"))),
            ("/build-marked.txt", &marked),
            ("/build-marked-dns.txt", &marked_dns),
        ],
    );
    t.user_config(&net.user_config(""));
    up(&t, &net, &["*.allowed.test"], &[]).ok();

    let nothing = String::from("ANSWER");
    for (file, body) in [
        ("/build-net.txt", &body),
        ("/build-marked.txt", &net.denied.body),
        ("/build-marked-dns.txt", &nothing),
    ] {
        let seen = read(&t, file);
        assert!(
            seen.contains("BLOCKED"),
            "{file}: the build got through: {seen}"
        );
        assert!(!seen.contains(body.as_str()), "{seen}");
    }
    assert_blocked_in_the_build(&t, &ip);
}

/// The session log has the refused connection to `ip`:80, marked as the build's.
fn assert_blocked_in_the_build(t: &Test, ip: &str) {
    let blocked = wait_event(t, EVENT_WAIT, |e| {
        e["kind"] == "blocked" && e["dst"] == ip && e["port"] == 80
    });
    let blocked = blocked.unwrap_or_else(|| panic!("no blocked event for {ip}: {:?}", t.events()));
    assert_eq!(blocked["phase"], "build", "{blocked}");
}

#[test]
fn a_build_resolves_the_allowlist_and_its_own_names_and_the_agent_inherits_none_of_its_own() {
    let t = Test::new();
    let net = Internet::new(&t);
    dockerfile(
        &t,
        &[
            ("/project.txt", &fetch("http://www.allowed.test/")),
            ("/build-only.txt", &fetch("http://www.other.test/")),
            ("/denied.txt", &fetch("http://www.denied.test/")),
        ],
    );
    t.user_config(&net.user_config("[build]\npresets = []\nallow = [\"*.other.test\"]\n"));
    up(&t, &net, &["*.allowed.test"], &[]).ok();

    assert!(read(&t, "/project.txt").contains(&net.allowed.body));
    assert!(read(&t, "/build-only.txt").contains(&net.other.body));
    let denied = read(&t, "/denied.txt");
    assert!(!denied.contains(&net.denied.body), "{denied}");
    let is_dns = |e: &Value, name: &str, decision: &str| {
        e["kind"] == "dns" && e["name"] == name && e["decision"] == decision
    };
    let events = t.events();
    let notice = events.iter().find(|e| e["kind"] == "notice").unwrap();
    assert!(
        notice["message"]
            .as_str()
            .unwrap()
            .ends_with("its RUN steps may reach: *.other.test"),
        "{notice}"
    );
    let other = events
        .iter()
        .find(|e| is_dns(e, "www.other.test", "allowed"));
    assert_eq!(other.map(|e| &e["phase"]), Some(&Value::from("build")));
    let refused = events
        .iter()
        .find(|e| is_dns(e, "www.denied.test", "refused"));
    assert_eq!(refused.map(|e| &e["phase"]), Some(&Value::from("build")));

    // The agent: the project's allowlist, not the build's additions, by name or by address.
    let agent = |script: &str| t.yolo(&["exec", "sh", "-c", script]);
    let by_name = agent(&fetch("http://www.other.test/")).stdout();
    assert!(by_name.contains("BLOCKED"), "{by_name}");
    let by_address = agent(&fetch(&format!("http://{}/", net.other.host.ip))).stdout();
    assert!(by_address.contains("BLOCKED"), "{by_address}");
    let allowed = agent(&fetch("http://www.allowed.test/")).stdout();
    assert!(allowed.contains(&net.allowed.body), "{allowed}");
    // The agent's own events carry no phase.
    let later = t.events();
    let refused = later
        .iter()
        .rev()
        .find(|e| is_dns(e, "www.other.test", "refused"))
        .unwrap_or_else(|| panic!("the agent's lookup was not refused: {later:?}"));
    assert_eq!(refused.get("phase"), None, "{refused}");

    // A reused container, or one started again with its image, builds nothing.
    up(&t, &net, &["*.allowed.test"], &[]).ok();
    t.yolo(&["down"]).ok();
    up(&t, &net, &["*.allowed.test"], &[]).ok();
    let builds = t.events().iter().filter(|e| e["kind"] == "notice").count();
    assert_eq!(builds, 1);
}

/// A Dockerfile whose RUN steps list their network links and fetch the default-bridge server.
fn probe_network(t: &Test) -> (String, String) {
    let (ip, body) = server_on_the_default_bridge(t);
    dockerfile(
        t,
        &[
            ("/links.txt", "ip -o link | cut -d: -f2"),
            ("/build-net.txt", &fetch(&format!("http://{ip}/"))),
        ],
    );
    (ip, body)
}

#[track_caller]
fn assert_built_offline(t: &Test, body: &str) {
    let links = read(t, "/links.txt");
    assert_eq!(
        links.split_whitespace().collect::<Vec<_>>(),
        ["lo"],
        "{links}"
    );
    let seen = read(t, "/build-net.txt");
    assert!(seen.contains("BLOCKED") && !seen.contains(body), "{seen}");
}

#[test]
fn with_network_none_a_build_has_no_network() {
    let t = Test::new();
    ensure_image(AGENT_IMAGE, "agent.Dockerfile");
    let (_, body) = probe_network(&t);
    t.yolo(&["up", "--network", "none"]).ok();
    assert_built_offline(&t, &body);
}

#[test]
fn build_network_none_builds_offline_and_leaves_the_agent_its_firewall() {
    let t = Test::new();
    let net = Internet::new(&t);
    let (_, body) = probe_network(&t);
    t.user_config(&net.user_config("[build]\nnetwork = \"none\"\n"));
    up(&t, &net, &["*.allowed.test"], &[]).ok();
    assert_built_offline(&t, &body);
    let allowed = t
        .yolo(&["exec", "sh", "-c", &fetch("http://www.allowed.test/")])
        .stdout();
    assert!(allowed.contains(&net.allowed.body), "{allowed}");
    assert!(t.events().iter().all(|e| e.get("phase").is_none()));
}

#[test]
fn a_failed_build_leaves_no_guard_behind() {
    let t = Test::new();
    let net = Internet::new(&t);
    dockerfile(&t, &[("/x.txt", "echo about to fail; exit 3")]);
    t.user_config(&net.user_config(""));
    up(&t, &net, &[], &[])
        .fails_with(69)
        .assert_stderr_contains("about to fail");
    let guards = docker(&[
        "ps",
        "-aq",
        "--filter",
        &format!("label={LABEL}={}", t.id),
        "--filter",
        "label=dev.yolo.role",
    ]);
    assert_eq!(
        guards.trim(),
        "",
        "yolo containers left after a failed build"
    );
}

#[test]
fn a_build_step_cannot_send_raw_frames_past_the_firewall() {
    let t = Test::new();
    let net = Internet::new(&t);
    let frames = RawFrames::new(&t, &net);
    t.file(
        ".devcontainer/Dockerfile",
        &format!("FROM {AGENT_IMAGE}\n{}", frames.steps),
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t.user_config(&net.user_config(""));
    up(&t, &net, &["*.allowed.test"], &[]).ok();
    frames.assert_stayed_in(&t);
    // The agent's own namespace is a new one: its traffic is not stamped or sealed, and works.
    let allowed = t
        .yolo(&["exec", "sh", "-c", &fetch("http://www.allowed.test/")])
        .stdout();
    assert!(allowed.contains(&net.allowed.body), "{allowed}");
}

/// A Compose service's image is built the same way: docker-compose runs its RUN steps in the
/// guard's namespace (`network: container:<guard>`), with Docker's default capabilities. A
/// server the firewall refuses stays out of reach, raw frames stay in, and the attempt is
/// logged as the build's.
#[test]
fn a_compose_build_step_cannot_reach_a_refused_server_or_send_raw_frames() {
    let t = Test::new();
    let net = Internet::new(&t);
    let (server, body) = server_on_the_default_bridge(&t);
    let frames = RawFrames::new(&t, &net);
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {AGENT_IMAGE}\nRUN ({}) > /build-net.txt 2>&1; cat /build-net.txt\n{}",
            fetch(&format!("http://{server}/")),
            frames.steps
        ),
    );
    t.file(
        ".devcontainer/compose.yml",
        "services:\n  app:\n    build:\n      context: .\n    command: [\"sleep\", \"infinity\"]\n    volumes:\n      - ..:/workspaces/repo\n",
    );
    t.devcontainer(
        r#"{"dockerComposeFile": "compose.yml", "service": "app", "workspaceFolder": "/workspaces/repo"}"#,
    );
    t.user_config(&net.user_config(""));
    up(&t, &net, &["*.allowed.test"], &[]).ok();

    let fetched = read(&t, "/build-net.txt");
    assert!(
        fetched.contains("BLOCKED") && !fetched.contains(&body),
        "the Compose build reached {server}: {fetched}"
    );
    assert_blocked_in_the_build(&t, &server);
    frames.assert_stayed_in(&t);
}

/// The raw-frame attack of a build: a UDP listener on the test network, and Dockerfile lines
/// (`steps`) with which a RUN step sends it a datagram as raw frames every way
/// `fixtures/builds/raw_frame.py` knows, saying what it tried in `/raw.txt`.
struct RawFrames {
    listener: String,
    payload: String,
    steps: String,
}

impl RawFrames {
    fn new(t: &Test, net: &Internet) -> RawFrames {
        let (listener, ip, mac) = udp_listener(t, net);
        let payload = format!("raw-frame-{}", t.id);
        t.file(
            ".devcontainer/raw_frame.py",
            include_str!("../fixtures/builds/raw_frame.py"),
        );
        let steps = format!(
            "COPY raw_frame.py /raw_frame.py\n\
             RUN python3 /raw_frame.py {ip} {mac} {payload} > /raw.txt 2>&1; cat /raw.txt\n"
        );
        RawFrames {
            listener,
            payload,
            steps,
        }
    }

    /// Every way was tried (sent, or refused by the egress hook's drop), and nothing arrived.
    fn assert_stayed_in(&self, t: &Test) {
        let tried = read(t, "/raw.txt");
        for how in ["plain", "stamped", "qdisc-bypass"] {
            assert!(tried.contains(&format!("{how} ")), "{how}: {tried}");
        }
        std::thread::sleep(Duration::from_secs(1));
        let received = docker_logs(&self.listener);
        assert!(
            !received.contains(&self.payload),
            "a frame got out of the build: {received}\nthe build said: {tried}"
        );
    }
}

/// A RUN step holds NET_RAW in the guard's namespace, on a bridge other containers (on the
/// shared network, other projects' guards) are on. Forged ARP (another address claimed at its
/// own or a made-up hardware address) must stay in: it would take that address's traffic.
/// The control sends the same frames from a plain container, and the target learns them.
#[test]
fn a_build_step_cannot_send_forged_arp_past_the_firewall() {
    let t = Test::new();
    let net = Internet::new(&t);
    let (target, ip, mac) = on_the_bridge(&t, &net, "arp-target", &["sleep", "1000"]);
    // Two addresses of the subnet no container has.
    let base: std::net::Ipv4Addr = net.subnet.split('/').next().unwrap().parse().unwrap();
    let unused = |n: u32| std::net::Ipv4Addr::from(u32::from(base) + n).to_string();
    let (control_ip, attack_ip) = (unused(250), unused(251));
    let learned = |claimed: &str| -> Vec<String> {
        let table = docker_ok(&["exec", &target, "cat", "/proc/net/arp"]);
        table
            .lines()
            .filter(|l| l.split_whitespace().next() == Some(claimed))
            .filter(|l| !l.contains("00:00:00:00:00:00"))
            .map(String::from)
            .collect()
    };
    let script = include_str!("../fixtures/builds/arp_frame.py");

    // The control: the same frames from a container of its own with NET_RAW get through.
    let control = in_a_plain_container(
        &t,
        &net,
        None,
        &["python3", "-c", script, &ip, &mac, &control_ip],
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !learned(&control_ip).is_empty(),
        "the control's forged ARP was not learned, so this test could not tell: {control}"
    );

    // The same through AF_XDP, whose frames leave below the egress hook: the control first.
    let xdp = build_static(&t, "xdp_frame");
    let (xdp_control_ip, xdp_attack_ip) = (unused(252), unused(253));
    let control = in_a_plain_container(
        &t,
        &net,
        Some(&xdp),
        &["eth0", &arp_request_hex(&ip, &mac, &xdp_control_ip)],
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !learned(&xdp_control_ip).is_empty(),
        "the AF_XDP control was not learned, so this test could not tell: {control}"
    );

    t.file(".devcontainer/arp_frame.py", script);
    std::fs::copy(&xdp, t.workspace.join(".devcontainer/xdp_frame")).unwrap();
    let xdp_frame = arp_request_hex(&ip, &mac, &xdp_attack_ip);
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {AGENT_IMAGE}\nCOPY arp_frame.py /arp_frame.py\nCOPY xdp_frame /xdp_frame\n\
             RUN (python3 /arp_frame.py {ip} {mac} {attack_ip}; /xdp_frame eth0 {xdp_frame}) \
             > /arp.txt 2>&1; cat /arp.txt\n"
        ),
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t.user_config(&net.user_config(""));
    up(&t, &net, &["*.allowed.test"], &[]).ok();
    let tried = read(&t, "/arp.txt");
    // Every way was tried (sent, or refused by the egress hook's drop).
    for how in [
        "own-mac plain",
        "own-mac qdisc-bypass",
        "made-up-mac plain",
        "made-up-mac qdisc-bypass",
    ] {
        assert!(tried.contains(how), "{how}: {tried}");
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(tried.contains("xdp "), "{tried}");
    let got_out = [learned(&attack_ip), learned(&xdp_attack_ip)].concat();
    assert!(
        got_out.is_empty(),
        "forged ARP got out of the build: {got_out:?}\nthe build said: {tried}"
    );
}

/// A C fixture (fixtures/builds/NAME.c), built static for the test images.
fn build_static(t: &Test, name: &str) -> std::path::PathBuf {
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/builds/{name}.c"));
    let out = t.root().join(format!("{name}.bin"));
    let built = std::process::Command::new("cc")
        .args(["-O", "-static", "-o"])
        .arg(&out)
        .arg(&source)
        .output()
        .expect("cc");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    out
}

/// An ARP request to `target_ip` at `target_mac` whose sender (Ethernet and ARP) is a made-up
/// hardware address claiming `claimed_ip`, as hex.
fn arp_request_hex(target_ip: &str, target_mac: &str, claimed_ip: &str) -> String {
    let mac = |m: &str| m.replace(':', "");
    let ip = |a: &str| {
        let a: std::net::Ipv4Addr = a.parse().unwrap();
        a.octets()
            .iter()
            .map(|o| format!("{o:02x}"))
            .collect::<String>()
    };
    let made_up = "02dead00bee2";
    format!(
        "{}{made_up}0806\
         0001080006040001{made_up}{}000000000000{}",
        mac(target_mac),
        ip(claimed_ip),
        ip(target_ip)
    )
}

/// A RUN step (NET_RAW) sends a packet "from" an address the firewall refuses to the guard's
/// own address, through a raw socket and as a frame on `lo`, so that conntrack would take a
/// plain UDP datagram back to it for the reply of an established connection (an attack run
/// opened a two-way channel that way). Both seeds are dropped and nothing reaches the
/// listener; the control, the same program in a plain container, does reach it.
#[test]
fn a_build_step_cannot_seed_conntrack_to_reach_a_refused_address() {
    let t = Test::new();
    let net = Internet::new(&t);
    let (name, ip, _) = udp_listener(&t, &net);
    let seed = build_static(&t, "ct_seed");
    let control = format!("control-{}", t.id);
    let said = in_a_plain_container(
        &t,
        &net,
        Some(&seed),
        &[&ip, "9999", "41000", "raw", &control],
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        docker_logs(&name).contains(&control),
        "the control did not arrive, so this test could not tell: {said}"
    );

    std::fs::create_dir_all(t.workspace.join(".devcontainer")).unwrap();
    std::fs::copy(&seed, t.workspace.join(".devcontainer/ct_seed")).unwrap();
    let leak = format!("leak-{}", t.id);
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {AGENT_IMAGE}\nCOPY ct_seed /ct_seed\n\
             RUN (/ct_seed {ip} 9999 41001 raw {leak}-raw; /ct_seed {ip} 9999 41002 lo {leak}-lo) \
             > /seed.txt 2>&1; cat /seed.txt\n"
        ),
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t.user_config(&net.user_config(""));
    up(&t, &net, &["*.allowed.test"], &[]).ok();
    let tried = read(&t, "/seed.txt");
    assert!(tried.contains("raw ") && tried.contains("lo "), "{tried}");
    std::thread::sleep(Duration::from_secs(1));
    let received = docker_logs(&name);
    assert!(
        !received.contains(&leak),
        "a datagram got out: {received}\nthe build said: {tried}"
    );
}

/// A UDP listener on the test network (port 9999) printing every datagram it receives: its
/// name, address and hardware address.
fn udp_listener(t: &Test, net: &Internet) -> (String, String, String) {
    on_the_bridge(
        t,
        net,
        "udp",
        &[
            "python3",
            "-u",
            "-c",
            "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             s.bind(('0.0.0.0', 9999))\nwhile True:\n    print(s.recvfrom(512)[0].decode())",
        ],
    )
}

/// The controls of the frame tests: `args` run as root with NET_RAW in a plain container on
/// the test network (no guard), the program `binary` (mounted at /fixture) or, without one,
/// `args` as they are; what it printed.
fn in_a_plain_container(
    t: &Test,
    net: &Internet,
    binary: Option<&std::path::Path>,
    args: &[&str],
) -> String {
    let label = format!("{LABEL}={}", t.id);
    let mount = binary.map(|b| format!("{}:/fixture:ro", b.display()));
    let mut cmd = vec![
        "run",
        "--rm",
        "--label",
        &label,
        "--network",
        &net.network,
        "--cap-add",
        "NET_RAW",
    ];
    if let Some(mount) = &mount {
        cmd.extend(["-v", mount.as_str(), AGENT_IMAGE, "/fixture"]);
    } else {
        cmd.push(AGENT_IMAGE);
    }
    cmd.extend(args);
    docker(&cmd)
}

/// A container of this test running `cmd` on the test network: its name, address and
/// hardware address there.
fn on_the_bridge(t: &Test, net: &Internet, tag: &str, cmd: &[&str]) -> (String, String, String) {
    let name = format!("yolo-{}-{tag}", t.id);
    let label = format!("{LABEL}={}", t.id);
    let mut args = vec![
        "run",
        "-d",
        "--name",
        &name,
        "--label",
        &label,
        "--network",
        &net.network,
        AGENT_IMAGE,
    ];
    args.extend(cmd);
    docker_ok(&args);
    let ip = ip_of(&name, &net.network);
    let mac = docker_ok(&[
        "inspect",
        "--format",
        &format!(
            "{{{{(index .NetworkSettings.Networks \"{}\").MacAddress}}}}",
            net.network
        ),
        &name,
    ]);
    let mac = mac.trim().to_string();
    (name, ip, mac)
}

fn docker_logs(name: &str) -> String {
    let out = std::process::Command::new("docker")
        .args(["logs", name])
        .output()
        .expect("docker logs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn an_add_from_a_url_which_the_daemon_fetches_outside_the_firewall_needs_a_grant() {
    // The repository's Dockerfile asks the Docker daemon to download a URL: the daemon does it
    // on the host's network, where the host's own services (here one on loopback; in a cloud,
    // the metadata service and its credentials) answer.
    let t = Test::new();
    let (port, _) = host_loopback_server("host-only secret");
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BASE_IMAGE}\nLABEL yolo.test={}\nADD http://127.0.0.1:{port}/secret /from-the-host\n",
            t.id
        ),
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("Dockerfile:3: ADD http://127.0.0.1:")
        .assert_stderr_contains("outside yolo's build firewall")
        .assert_stderr_contains("--grant remote-add");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    // Granted, it is what the user asked for: the daemon fetches it (which is why it is refused
    // without the grant).
    t.yolo(&["up", "--grant", "remote-add"]).ok();
    t.yolo(&["exec", "cat", "/from-the-host"])
        .ok()
        .assert_stdout("host-only secret");
}

#[test]
fn a_compose_services_add_from_a_url_needs_the_grant_too() {
    let t = Test::new();
    let (port, _) = host_loopback_server("host-only secret");
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BASE_IMAGE}\nADD [\"http://127.0.0.1:{port}/secret\", \"/from-the-host\"]\n"
        ),
    );
    t.file(
        ".devcontainer/compose.yml",
        "services:\n  app:\n    build: .\n    command: [\"sleep\", \"infinity\"]\n    volumes:\n      - ..:/workspaces/repo\n",
    );
    t.devcontainer(
        r#"{"dockerComposeFile": "compose.yml", "service": "app", "workspaceFolder": "/workspaces/repo"}"#,
    );
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("services.app.build")
        .assert_stderr_contains("--grant remote-add");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

#[test]
fn a_dockerfile_with_buildkit_syntax_is_lowered_and_its_heredoc_steps_stay_behind_the_firewall() {
    // Under the classic builder this Dockerfile fails with `unknown instruction`; yolo lowers
    // it. The heredoc RUN is a lowered step: it must be behind the guard like any other.
    let t = Test::new();
    let net = Internet::new(&t);
    let (bridge_ip, bridge_body) = server_on_the_default_bridge(&t);
    let served = format!("{}\n", net.allowed.body);
    let text = format!(
        "# syntax=docker/dockerfile:1.7\n\
         FROM {AGENT_IMAGE}\n\
         RUN <<EOF\n\
         set -e\n\
         ({allowed}) > /allowed.txt 2>&1\n\
         ({denied}) > /denied.txt 2>&1\n\
         ({bridge}) > /bridge.txt 2>&1\n\
         echo 'it''s 100% \\ \"here\"' > /quoted.txt\n\
         EOF\n\
         RUN <<-'EOT' bash\n\
         \tif [[ -n \"$BASH_VERSION\" ]]; then echo bash > /shell.txt; fi\n\
         \tEOT\n\
         RUN --mount=type=cache,target=/root/.cache --mount=type=bind,source=tool.sh,target=/tmp/mounted.sh \\\n\
         \x20   cp /tmp/mounted.sh /mounted.txt\n\
         COPY --link --chmod=750 tool.sh /usr/local/bin/tool\n\
         COPY <<'EOF' /etc/greeting\n\
         hello $USER\n\
         EOF\n\
         ADD --checksum=sha256:{sum} http://www.allowed.test/ /downloads/\n",
        allowed = fetch("http://www.allowed.test/"),
        denied = fetch("http://www.denied.test/"),
        bridge = fetch(&format!("http://{bridge_ip}/")),
        sum = sha256_hex(&served),
    );
    t.file(".devcontainer/Dockerfile", &text);
    t.file(".devcontainer/tool.sh", "#!/bin/sh\necho tool\n");
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t.user_config(&net.user_config(""));
    let run = up(&t, &net, &["*.allowed.test"], &[]).ok();
    run.assert_stderr_contains("`# syntax=docker/dockerfile:1.7` ignored")
        .assert_stderr_contains("`RUN --mount=type=cache` dropped");

    assert!(read(&t, "/allowed.txt").contains(&net.allowed.body));
    for (file, body) in [
        ("/denied.txt", &net.denied.body),
        ("/bridge.txt", &bridge_body),
    ] {
        let seen = read(&t, file);
        assert!(
            seen.contains("BLOCKED") && !seen.contains(body.as_str()),
            "{file}: the lowered step got through: {seen}"
        );
    }
    assert_blocked_in_the_build(&t, &bridge_ip);
    assert_eq!(read(&t, "/quoted.txt"), "its 100% \\ \"here\"\n");
    assert_eq!(read(&t, "/shell.txt"), "bash\n");
    assert_eq!(read(&t, "/mounted.txt"), "#!/bin/sh\necho tool\n");
    assert_eq!(read(&t, "/etc/greeting"), "hello $USER\n");
    t.yolo(&["exec", "tool"]).ok().assert_stdout("tool\n");
    let mode = t
        .yolo(&["exec", "stat", "-c", "%a", "/usr/local/bin/tool"])
        .ok();
    mode.assert_stdout("750\n");
    assert_eq!(read(&t, "/downloads/download"), served);
}

#[test]
fn an_add_checksum_is_downloaded_behind_the_firewall_not_by_the_daemon() {
    // Lowered, `ADD --checksum` needs no `remote-add` grant because a RUN step downloads it in
    // the guard's namespace: the host's loopback service that the daemon would reach is out of
    // its reach (before the lowering the daemon fetched any ADD URL, hence the grant).
    let t = Test::new();
    ensure_image(AGENT_IMAGE, "agent.Dockerfile");
    let secret = "host-only secret";
    let (port, _) = host_loopback_server(secret);
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {AGENT_IMAGE}\nADD --checksum=sha256:{} http://127.0.0.1:{port}/secret /from-the-host\n",
            sha256_hex(secret)
        ),
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    let run = t.yolo(&["up"]);
    assert_ne!(run.code(), 0, "{}", run.describe());
    assert_ne!(
        run.code(),
        77,
        "refused instead of lowered: {}",
        run.describe()
    );
    run.assert_stderr_contains("curl");
    assert!(!run.stdout().contains(secret) && !run.stderr().contains(secret));
    assert!(t.agents().is_empty(), "{:?}", t.agents());
}

#[test]
fn buildkit_syntax_yolo_cannot_lower_is_refused_before_the_build_with_its_lines() {
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BASE_IMAGE}\nRUN --mount=type=secret,id=npm,required=true cat /run/secrets/npm\nCOPY --chmod=u+x a /a\n"
        ),
    );
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}}"#);
    t.yolo(&["up"])
        .fails_with(65)
        .assert_stderr_contains("BuildKit features that yolo cannot run behind its build firewall")
        .assert_stderr_contains("Dockerfile:2: `RUN --mount=type=secret,required=true`")
        .assert_stderr_contains("Dockerfile:3: `COPY --chmod=u+x`")
        .assert_stderr_contains("docker buildx build")
        .assert_stderr_lacks("fix the Dockerfile");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}

#[test]
fn a_compose_services_buildkit_dockerfile_is_named_before_anything_starts() {
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        &format!("FROM {BASE_IMAGE}\nRUN <<EOF\necho hi\nEOF\n"),
    );
    t.file(
        ".devcontainer/compose.yml",
        "services:\n  app:\n    build: .\n    command: [\"sleep\", \"infinity\"]\n    volumes:\n      - ..:/workspaces/repo\n",
    );
    t.devcontainer(
        r#"{"dockerComposeFile": "compose.yml", "service": "app", "workspaceFolder": "/workspaces/repo"}"#,
    );
    t.yolo(&["up"])
        .fails_with(65)
        .assert_stderr_contains("services.app.build")
        .assert_stderr_contains("Dockerfile:2")
        .assert_stderr_contains("uses BuildKit syntax")
        .assert_stderr_lacks("fix the Dockerfile");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}
