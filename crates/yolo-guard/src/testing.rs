//! What the crate's tests share: the real-kernel tests' throwaway network namespace, whether it
//! can be had here, and the guard configs they start from. It imports nothing of the crate, so
//! the tests of every layer may use it (the firewall's among them).

use std::path::Path;
use std::process::Command;
use yolo_protocol::{GuardConfig, NetworkMode};

/// Set (to anything) where a real-kernel test must run: CI, which runs as root with `nft` and
/// `ip netns`. There a skip would hide a broken firewall, so it fails instead.
const REQUIRE_NETNS: &str = "YOLO_REQUIRE_NETNS";

/// A real-kernel test cannot run here (not root, no `nft`, no `ip netns`): say so on stderr
/// and let the caller return, unless [`REQUIRE_NETNS`] is set, where this fails the test.
pub(crate) fn skip(why: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    if std::env::var_os(REQUIRE_NETNS).is_some() {
        panic!("{test}: the real-kernel test cannot run ({why}) and {REQUIRE_NETNS} is set");
    }
    eprintln!("{test}: skipped: {why}");
}

/// Whether the real-kernel tests can run here: root, and the `nft` program (the tests compare
/// the guard's netlink translation with what `nft` makes).
pub(crate) fn can_use_netns() -> Result<(), &'static str> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root");
    }
    if Command::new("nft").arg("--version").output().is_err() {
        return Err("no nft binary");
    }
    Ok(())
}

/// The config every test starts from, in `mode`: nothing allowed, no upstream, no published
/// port, no audit of execs or files, the logs to `/dev/null`. A test changes what it is about
/// with struct update syntax (`GuardConfig { published_ports, ..guard_config(mode) }`).
pub(crate) fn guard_config(mode: NetworkMode) -> GuardConfig {
    GuardConfig {
        session: "t".into(),
        mode,
        allow: vec![],
        upstream: vec![],
        ttl_floor_secs: 60,
        deny_nxdomain: false,
        ask_timeout_secs: None,
        published_ports: vec![],
        audit_path: "/dev/null".into(),
        control_socket: "/dev/null".into(),
        host_control_socket: None,
        control_uids: vec![],
        allow_internal_answers: false,
        max_session_log: yolo_protocol::DEFAULT_MAX_SESSION_LOG,
        phase: None,
        exec_audit: None,
        file_watch: None,
        local_names: vec![],
        audit_to_stdout: false,
        http: Default::default(),
        http_roots_pem: None,
        relays: Vec::new(),
        gateway: None,
    }
}

/// A firewall-mode config for the real-kernel tests, with `allow` as its allowlist.
pub(crate) fn firewall_config(allow: &[&str]) -> GuardConfig {
    GuardConfig {
        allow: allow.iter().map(|p| p.to_string()).collect(),
        ..guard_config(NetworkMode::Firewall)
    }
}

/// What a real-kernel test's body fails with: any error (a firewall's, an allowlist's, a
/// message of the test's own), shown by the panic that fails the test.
pub(crate) type Failure = Box<dyn std::error::Error + Send + Sync>;

/// `f` on a thread inside a throwaway network namespace; `None` (skipped) without root,
/// `nft` or `ip netns`.
pub(crate) fn in_netns<T: Send + 'static>(
    tag: &str,
    f: impl FnOnce() -> std::result::Result<T, Failure> + Send + 'static,
) -> Option<T> {
    if let Err(why) = can_use_netns() {
        skip(why);
        return None;
    }
    let name = format!("yolo-guardtest-{tag}-{}", std::process::id());
    if !std::process::Command::new("ip")
        .args(["netns", "add", &name])
        .status()
        .is_ok_and(|s| s.success())
    {
        skip("cannot create a network namespace");
        return None;
    }
    let path = format!("/run/netns/{name}");
    let result = std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(&path)?;
        // SAFETY: a valid netns fd; only this thread (and the nft it forks) moves.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err("setns failed".into());
        }
        f()
    })
    .join();
    let _ = std::process::Command::new("ip")
        .args(["netns", "del", &name])
        .status();
    Some(result.expect("netns thread").expect("real nft path"))
}

/// A contributor who runs `cargo test -p yolo-guard` as a normal user gets a passing run: the
/// tests that need root skip and say why (`skip` once called itself there, and the stack
/// overflow aborted the whole binary). As root (CI), this runs this same test binary again as
/// `nobody`, without [`REQUIRE_NETNS`], and checks that it passes and that real-kernel tests
/// did skip; as any other user this run is that run already, so there is nothing to add.
#[test]
fn the_tests_pass_as_a_normal_user_with_the_root_only_ones_skipped() {
    const CHILD: &str = "YOLO_GUARD_TEST_AS_NOBODY";
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || std::env::var_os(CHILD).is_some() {
        eprintln!("not root: this run is the normal user's run");
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let as_nobody = |program: &std::path::Path| {
        let mut command = Command::new("setpriv");
        command
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(program)
            .env_remove(REQUIRE_NETNS)
            .env(CHILD, "1");
        command
    };
    // The binary must be reachable by that user (a target folder under /root is not).
    let reachable = as_nobody(Path::new("test"))
        .arg("-x")
        .arg(&exe)
        .status()
        .is_ok_and(|s| s.success());
    if !reachable {
        skip(&format!(
            "nobody cannot run {} (or no setpriv)",
            exe.display()
        ));
        return;
    }
    let this = "testing::the_tests_pass_as_a_normal_user_with_the_root_only_ones_skipped";
    let output = as_nobody(&exe)
        .args(["--nocapture", "--skip", this])
        // A timing test of the file watcher, whoever runs it: two copies of it at once (this
        // one and the root run's) would only race each other for the CPUs.
        .args(["--skip", "a_burst_of_ten_thousand_files"])
        .output()
        .expect("setpriv runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the tests fail as a normal user ({}):\n{stdout}\n{stderr}",
        output.status
    );
    let skipped = stderr.lines().filter(|l| l.ends_with("skipped: not root"));
    assert!(
        skipped.count() >= 10,
        "the real-kernel tests did not skip as a normal user:\n{stderr}"
    );
}
