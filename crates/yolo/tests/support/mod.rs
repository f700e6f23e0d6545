//! Test harness: each `Test` is a fresh workspace with its own yolo config and data dirs, and a
//! unique label put on everything yolo creates for it (through `YOLO_LABELS`). Dropping the
//! `Test` removes every container, volume, network and image carrying that label, pass or fail.
//!
//! A test that needs no Docker says so with [`Test::without_docker`]: yolo then points at a
//! socket that does not exist, so it cannot create anything, and the drop asks Docker nothing
//! (such a test passes on a machine without the `docker` CLI or engine).

#![allow(dead_code)]

pub mod https;
pub mod net;
pub mod otlp;
pub mod registry;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const LABEL: &str = "dev.yolo.test";
pub const BASE_IMAGE: &str = "debian:bookworm-slim";
/// What `DOCKER_HOST` is for a test without Docker: a socket path that cannot exist.
pub const NO_DOCKER: &str = "unix:///nonexistent/docker.sock";

pub struct Test {
    pub id: String,
    root: tempfile::TempDir,
    pub workspace: PathBuf,
    pub config_dir: PathBuf,
    pub data_dir: PathBuf,
    extra_env: Vec<(String, String)>,
    /// Whether yolo may reach the real engine (and so whether the drop must clean up).
    uses_docker: bool,
    /// yolo run as this user (uid, gid) from this copy of its binary (`run_as`).
    run_as: Option<(u32, u32, PathBuf)>,
}

pub struct Run {
    pub output: Output,
}

impl Run {
    pub fn code(&self) -> i32 {
        self.output.status.code().unwrap_or(-1)
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    /// The exit code and both streams, for a failed assertion's message.
    pub fn describe(&self) -> String {
        format!(
            "exit code: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code(),
            self.stdout(),
            self.stderr()
        )
    }

    /// Assert success and return self, printing both streams on failure.
    #[track_caller]
    pub fn ok(self) -> Self {
        assert_eq!(self.code(), 0, "expected success\n{}", self.describe());
        self
    }

    /// Assert exit `code` and no panic, printing both streams on failure.
    #[track_caller]
    pub fn fails_with(self, code: i32) -> Self {
        assert_eq!(
            self.code(),
            code,
            "expected exit {code}\n{}",
            self.describe()
        );
        for panic in ["panicked", "RUST_BACKTRACE"] {
            assert!(
                !self.stderr().contains(panic),
                "a panic\n{}",
                self.describe()
            );
        }
        self
    }

    /// Assert the whole stderr.
    #[track_caller]
    pub fn assert_stderr(&self, expected: &str) -> &Self {
        assert_eq!(
            self.stderr(),
            expected,
            "stderr differs\n{}",
            self.describe()
        );
        self
    }

    /// Assert the whole stdout.
    #[track_caller]
    pub fn assert_stdout(&self, expected: &str) -> &Self {
        assert_eq!(
            self.stdout(),
            expected,
            "stdout differs\n{}",
            self.describe()
        );
        self
    }

    #[track_caller]
    pub fn assert_stderr_contains(&self, needle: &str) -> &Self {
        let found = self.stderr().contains(needle);
        assert!(found, "expected {needle:?} in stderr\n{}", self.describe());
        self
    }

    #[track_caller]
    pub fn assert_stdout_contains(&self, needle: &str) -> &Self {
        let found = self.stdout().contains(needle);
        assert!(found, "expected {needle:?} in stdout\n{}", self.describe());
        self
    }

    #[track_caller]
    pub fn assert_stderr_lacks(&self, needle: &str) -> &Self {
        let found = self.stderr().contains(needle);
        assert!(
            !found,
            "unexpected {needle:?} in stderr\n{}",
            self.describe()
        );
        self
    }

    #[track_caller]
    pub fn assert_stdout_lacks(&self, needle: &str) -> &Self {
        let found = self.stdout().contains(needle);
        assert!(
            !found,
            "unexpected {needle:?} in stdout\n{}",
            self.describe()
        );
        self
    }
}

impl Default for Test {
    fn default() -> Self {
        Self::new()
    }
}

impl Test {
    /// A test that may use the real engine. It needs the `docker` CLI to clean up after itself:
    /// without one it fails here rather than leave containers behind.
    #[track_caller]
    pub fn new() -> Test {
        static CLI: std::sync::OnceLock<Result<String, String>> = std::sync::OnceLock::new();
        if let Err(e) = CLI.get_or_init(|| try_docker(&["--version"])) {
            panic!("{e}; this test needs Docker (tests made with Test::without_docker do not)");
        }
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(sweep_dead_runs);
        Test::fresh()
    }

    fn fresh() -> Test {
        let root = tempfile::Builder::new()
            .prefix("yolo-test-")
            .tempdir()
            .expect("temp dir");
        let id = format!("t{}", &uuid_like());
        let workspace = root.path().join("repo");
        let config_dir = root.path().join("config");
        let data_dir = root.path().join("data");
        for d in [&workspace, &config_dir, &data_dir] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        Test {
            id,
            root,
            workspace,
            config_dir,
            data_dir,
            extra_env: vec![],
            uses_docker: true,
            run_as: None,
        }
    }

    /// A test that must not need Docker: yolo gets an unreachable `DOCKER_HOST` (so whatever
    /// it tries with Docker fails with exit 69 instead of creating something), and the drop
    /// skips the cleanup, which needs the `docker` CLI.
    pub fn without_docker() -> Test {
        let mut t = Test::fresh();
        t.uses_docker = false;
        t.env("DOCKER_HOST", NO_DOCKER);
        t
    }

    /// The workspace as yolo names it in messages (symlinks resolved).
    pub fn workspace_shown(&self) -> String {
        self.workspace
            .canonicalize()
            .expect("workspace")
            .display()
            .to_string()
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// Write a file relative to the workspace.
    pub fn file(&self, rel: &str, text: &str) -> &Self {
        let path = self.workspace.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        self
    }

    pub fn devcontainer(&self, json: &str) -> &Self {
        self.file(".devcontainer/devcontainer.json", json)
    }

    /// A local Feature in `.devcontainer/<name>/`: its `devcontainer-feature.json` and an
    /// `install.sh` running `install` under `set -e`. The script names the test, so two tests'
    /// builds never share a cached layer that one of them removes with its images.
    pub fn feature(&self, name: &str, json: &str, install: &str) -> &Self {
        self.file(
            &format!(".devcontainer/{name}/devcontainer-feature.json"),
            json,
        );
        self.file(
            &format!(".devcontainer/{name}/install.sh"),
            &format!("#!/bin/sh\n# test {}\nset -e\n{install}\n", self.id),
        )
    }

    pub fn user_config(&self, toml: &str) -> &Self {
        std::fs::write(self.config_dir.join("config.toml"), toml).unwrap();
        self
    }

    pub fn env(&mut self, key: &str, value: &str) -> &mut Self {
        self.extra_env.push((key.into(), value.into()));
        self
    }

    /// Run yolo as the user `uid`:`gid` from here on (the rootless Podman tests): the test's
    /// folders become that user's, and yolo runs from a copy of its binary in them (the build's
    /// folder may be closed to other users).
    pub fn run_as(&mut self, uid: u32, gid: u32) {
        let exe = self.root.path().join("bin/yolo");
        std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
        std::fs::copy(env!("CARGO_BIN_EXE_yolo"), &exe).expect("copy of yolo");
        let chown = Command::new("chown")
            .arg("-R")
            .arg(format!("{uid}:{gid}"))
            .arg(self.root.path())
            .status()
            .expect("chown");
        assert!(chown.success(), "chown of the test's folders");
        self.run_as = Some((uid, gid, exe));
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = match &self.run_as {
            None => Command::new(env!("CARGO_BIN_EXE_yolo")),
            Some((uid, gid, exe)) => {
                let mut cmd = Command::new("setpriv");
                cmd.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--init-groups")
                    .arg(exe);
                cmd
            }
        };
        cmd.args(args)
            .current_dir(&self.workspace)
            .env("YOLO_CONFIG_DIR", &self.config_dir)
            .env("YOLO_DATA_DIR", &self.data_dir)
            .env("YOLO_LABELS", format!("{LABEL}={}", self.id))
            // No background top-up of spares that could outlive the test's clean-up; the tests
            // of spares turn it on and wait for it.
            .env("YOLO_SPARES", "0")
            .env("NO_COLOR", "1")
            .env_remove("RUST_BACKTRACE");
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Run yolo with no stdin.
    pub fn yolo(&self, args: &[&str]) -> Run {
        let output = self
            .command(args)
            .stdin(Stdio::null())
            .output()
            .expect("run yolo");
        Run { output }
    }

    /// Run yolo with no stdin and at most `bytes` of data memory (`RLIMIT_DATA`: the heap and
    /// every private writable mapping): past it an allocation fails and yolo aborts, so a
    /// command that holds more than that of a log or an archive fails the test.
    pub fn yolo_within(&self, bytes: u64, args: &[&str]) -> Run {
        let mut cmd = self.command(args);
        // SAFETY: between fork and exec only setrlimit, which is async-signal-safe.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                let limit = libc::rlimit {
                    rlim_cur: bytes,
                    rlim_max: bytes,
                };
                if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let output = cmd.stdin(Stdio::null()).output().expect("run yolo");
        Run { output }
    }

    /// Run yolo with `input` on stdin.
    pub fn yolo_stdin(&self, args: &[&str], input: &str) -> Run {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run yolo");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        Run {
            output: child.wait_with_output().unwrap(),
        }
    }

    /// `yolo up --json` and the created container's id.
    pub fn up(&self, extra: &[&str]) -> (Run, serde_json::Value) {
        let mut args = vec!["up", "--json"];
        args.extend_from_slice(extra);
        let run = self.yolo(&args).ok();
        let value: serde_json::Value =
            serde_json::from_str(&run.stdout()).expect("up --json output");
        (run, value)
    }

    /// Containers carrying this test's label.
    pub fn containers(&self) -> Vec<String> {
        docker(&[
            "ps",
            "-aq",
            "--filter",
            &format!("label={LABEL}={}", self.id),
        ])
        .lines()
        .map(str::to_string)
        .collect()
    }

    /// This test's agent (project) containers, without the guards.
    pub fn agents(&self) -> Vec<String> {
        let label = format!("label={LABEL}={}", self.id);
        docker(&[
            "ps",
            "-aq",
            "--filter",
            &label,
            "--filter",
            "label=dev.yolo.role=agent",
        ])
        .lines()
        .map(str::to_string)
        .collect()
    }

    /// This test's networks but the guards' shared one (made once, kept by `down --remove`),
    /// one id a line.
    pub fn project_networks(&self) -> String {
        let all = docker(&[
            "network",
            "ls",
            "-q",
            "--filter",
            &format!("label={LABEL}={}", self.id),
        ]);
        let shared = self.shared_networks();
        all.lines()
            .filter(|id| !shared.iter().any(|s| s == id))
            .map(|id| format!("{id}\n"))
            .collect()
    }

    /// The ids of the network the guards of this test share (docs/architecture.md).
    pub fn shared_networks(&self) -> Vec<String> {
        docker(&[
            "network",
            "ls",
            "-q",
            "--filter",
            &format!("label={LABEL}={}", self.id),
            "--filter",
            "label=dev.yolo.shared=true",
        ])
        .lines()
        .map(str::to_string)
        .collect()
    }

    /// The ids of this test's running guards.
    pub fn guard_ids(&self) -> Vec<String> {
        docker(&[
            "ps",
            "-q",
            "--filter",
            &format!("label={LABEL}={}", self.id),
            "--filter",
            "label=dev.yolo.role=guard",
        ])
        .lines()
        .map(str::to_string)
        .collect()
    }

    /// The ids of the images carrying this test's label.
    pub fn images(&self) -> String {
        docker(&[
            "images",
            "-q",
            "--filter",
            &format!("label={LABEL}={}", self.id),
        ])
    }

    /// The full ids of every image carrying this test's label, the layers under a tagged one
    /// too (`docker images -a`), sorted.
    pub fn layers(&self) -> Vec<String> {
        let mut ids: Vec<String> = docker(&[
            "images",
            "-a",
            "-q",
            "--no-trunc",
            "--filter",
            &format!("label={LABEL}={}", self.id),
        ])
        .lines()
        .map(str::to_string)
        .collect();
        ids.sort();
        ids
    }

    /// The first event of `kind` in this test's sessions.
    pub fn first_event(&self, kind: &str) -> Option<serde_json::Value> {
        self.events().into_iter().find(|e| e["kind"] == kind)
    }

    /// The session log events of this test (all sessions).
    pub fn events(&self) -> Vec<serde_json::Value> {
        let mut out: Vec<serde_json::Value> = vec![];
        let mut paths = vec![];
        for dir in ["sessions", "network"] {
            if let Ok(entries) = std::fs::read_dir(self.data_dir.join(dir)) {
                paths.extend(entries.flatten().map(|e| e.path()));
            }
        }
        {
            for p in paths {
                for line in std::fs::read_to_string(p).unwrap_or_default().lines() {
                    if let Ok(v) = serde_json::from_str(line) {
                        out.push(v);
                    }
                }
            }
        }
        // Host and guard files interleave: order by timestamp (RFC 3339 sorts as text).
        out.sort_by(|a, b| a["ts"].as_str().cmp(&b["ts"].as_str()));
        out
    }
}

impl Drop for Test {
    fn drop(&mut self) {
        if !self.uses_docker {
            return;
        }
        // Never panic here: a panic while a failed test unwinds aborts the whole test binary.
        if let Err(e) = cleanup_label(&format!("{LABEL}={}", self.id)) {
            eprintln!("warning: test {} not cleaned up: {e}", self.id);
        }
    }
}

/// `[build] allow` for Debian's mirror, for tests whose images `apt-get` through yolo's build.
/// Where the mirror answers from a private or documentation address (a proxy, as on the test
/// machines), the guard does not open it (DNS rebinding): the address is listed as a static
/// entry, as a user behind such a mirror would.
pub fn mirror_for_builds() -> String {
    use std::net::ToSocketAddrs;
    let addrs: Vec<String> = ("deb.debian.org", 80)
        .to_socket_addrs()
        .map(|a| a.map(|a| format!("\"{}\"", a.ip())).collect())
        .unwrap_or_default();
    format!("[build]\nallow = [{}]\n", addrs.join(", "))
}

/// Remove everything carrying `label` (containers first: they hold volumes and networks).
pub fn cleanup_label(label: &str) -> Result<(), String> {
    let filter = format!("label={label}");
    let ids = try_docker(&["ps", "-aq", "--filter", &filter])?;
    let ids: Vec<&str> = ids.lines().collect();
    if !ids.is_empty() {
        let mut args = vec!["rm", "-f", "-v"];
        args.extend(ids);
        try_docker(&args)?;
    }
    for (kind, list) in [
        ("volume", vec!["volume", "ls", "-q"]),
        ("network", vec!["network", "ls", "-q"]),
    ] {
        let mut args = list.clone();
        args.extend(["--filter", &filter]);
        let ids = try_docker(&args)?;
        for id in ids.lines() {
            try_docker(&[kind, "rm", id])?;
        }
    }
    // Pruned with their untagged parents: a build cache left behind would let a later run's
    // build skip the RUN steps a test watches (a build-phase lookup, a download).
    let images = try_docker(&["images", "-q", "--filter", &filter])?;
    for id in images.lines() {
        try_docker(&["rmi", "-f", id])?;
    }
    Ok(())
}

/// Run the docker CLI (the real engine) and return stdout, whatever the exit status.
#[track_caller]
/// `docker network inspect NAME`, the one object.
pub fn inspect_network(name: &str) -> serde_json::Value {
    let text = docker(&["network", "inspect", name]);
    serde_json::from_str::<serde_json::Value>(&text).unwrap()[0].clone()
}

pub fn docker(args: &[&str]) -> String {
    try_docker(args).unwrap_or_else(|e| panic!("{e}"))
}

/// [`docker`], with an error instead of a panic when the CLI cannot be run at all.
pub fn try_docker(args: &[&str]) -> Result<String, String> {
    let out = Command::new("docker")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run the docker CLI (docker {}): {e}", args.join(" ")))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn inspect(id: &str) -> serde_json::Value {
    let text = docker(&["inspect", id]);
    let v: serde_json::Value = serde_json::from_str(&text).expect("docker inspect json");
    v[0].clone()
}

/// A test id's unique part: `<pid namespace>n<pid>x<time>` in hex, where the test process
/// runs first ([`test_process_gone`] and `scripts/sweep-tests.sh` read it back).
fn uuid_like() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{:x}n{:x}x{:x}",
        own_pid_namespace().unwrap_or(0),
        std::process::id(),
        nanos & 0xffff_ffff_ffff
    )
}

/// The inode of this process's pid namespace: pids mean something only within it.
fn own_pid_namespace() -> Option<u64> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let link = link.to_str()?;
    link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// Whether the test process that made the test id `t<pid namespace>n<pid>x<time>` is gone.
/// False for what is not such an id, and for a process of another pid namespace (a run in
/// another container on the same engine), which cannot be looked up from here.
pub fn test_process_gone(id: &str) -> bool {
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    let Some((ns, rest)) = id.strip_prefix('t').and_then(|r| r.split_once('n')) else {
        return false;
    };
    let Some((pid, time)) = rest.split_once('x') else {
        return false;
    };
    if !(hex(ns) && hex(pid) && hex(time)) {
        return false;
    }
    let (Ok(ns), Ok(pid)) = (u64::from_str_radix(ns, 16), u32::from_str_radix(pid, 16)) else {
        return false;
    };
    own_pid_namespace() == Some(ns) && !Path::new(&format!("/proc/{pid}")).exists()
}

/// Remove what test processes that are gone left behind. A test's drop removes what it made,
/// pass or fail, but not when its process was killed (a timeout, the end of a session): those
/// leftovers go here, once per test binary, before its first test, through the sweep
/// `scripts/test.sh` runs after `cargo test` (`scripts/sweep-tests.sh`), with the helper images
/// kept. A test process that still runs (another `cargo test` beside this one) keeps its things.
fn sweep_dead_runs() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/sweep-tests.sh");
    let swept = Command::new("bash")
        .arg(&script)
        .env("YOLO_KEEP_TEST_IMAGES", "1")
        .status();
    if !swept.as_ref().is_ok_and(|s| s.success()) {
        eprintln!("warning: {} did not run: {swept:?}", script.display());
    }
}

/// An HTTP server on the host's loopback, in this process, answering every request with `body`
/// and counting the requests: what the Docker daemon (on the host's network) reaches and a
/// build's RUN step (in the guard's namespace) does not. Its port and the request counter.
pub fn host_loopback_server(
    body: &'static str,
) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, hits)
}

/// Start a listener in `t`'s agent container on `port` that says `greeting` to each connection
/// (perl, which `debian:bookworm-slim` has), and return what a connection to `host_port` on the
/// host's loopback reads, trying for 5 s.
pub fn greet_through_port(t: &Test, port: u16, greeting: &str, host_port: u16) -> String {
    use std::io::Read;
    let server = format!(
        "setsid -f perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalPort => {port}, Listen => 5, ReuseAddr => 1) or die; while ($c = $s->accept) {{ print $c \"{greeting}\\n\"; close $c }}' >/dev/null 2>&1"
    );
    t.yolo(&["exec", "sh", "-c", &server]).ok();
    let mut said = String::new();
    for _ in 0..50 {
        said.clear();
        if let Ok(mut conn) = std::net::TcpStream::connect(("127.0.0.1", host_port)) {
            let _ = conn.read_to_string(&mut said);
            if !said.is_empty() {
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    said
}

/// Every file below `dir`.
pub fn files_below(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => stack.push(path),
                Ok(kind) if kind.is_file() => out.push(path),
                _ => {}
            }
        }
    }
    out
}
