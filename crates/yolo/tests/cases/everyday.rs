//! Everyday configs that used to break `up`: more CPUs than the engine has, busy ports,
//! typos, runArgs the corpus uses, a subfolder, a Docker context.

use crate::support::*;

#[test]
fn more_cpus_than_the_engine_has_are_capped_with_a_warning() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "hostRequirements": {"cpus": 64}}"#);
    let (run, out) = t.up(&[]);
    run.assert_stderr_contains("the repository asks for 64 CPUs");
    let c = inspect(out["container"]["id"].as_str().unwrap());
    let cores: i64 = docker(&["info", "--format", "{{.NCPU}}"])
        .trim()
        .parse()
        .unwrap();
    let nano = c["HostConfig"]["NanoCpus"].as_i64().unwrap();
    assert!(
        nano > 0 && nano < cores * 1_000_000_000,
        "{nano} for {cores} cores"
    );
}

#[test]
fn a_misspelt_property_is_named_with_a_suggestion_and_a_stray_service_is_ignored() {
    let t = Test::without_docker();
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "remotUser": "dev", "service": "app", "$schema": "x", "waitFor": "postCreateCommand"}"#,
    );
    let run = t.yolo(&["up"]).fails_with(69); // got past the config, to Docker
    run.assert_stderr_contains(
        "unknown property \"remotUser\" is ignored: did you mean remoteUser?",
    )
    .assert_stderr_contains("\"service\" is ignored")
    .assert_stderr_lacks("$schema")
    .assert_stderr_lacks("waitFor");
}

#[test]
fn a_mount_from_a_withheld_variable_points_at_pass_env_not_at_an_empty_path() {
    let mut t = Test::without_docker();
    let home = t.root().display().to_string();
    t.env("HOME", &home);
    // Refused before Docker (declining, the default, would go on to start the container).
    t.user_config("[policy]\nrequests = \"refuse\"\n");
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "mounts": ["source=${localEnv:HOME}/.ssh,target=/home/dev/.ssh,type=bind"]}"#,
    );
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("pass_env = [\"HOME\"]")
        .assert_stderr_contains("built from the host's HOME")
        .assert_stderr_lacks("host-mount=/.ssh");
    // The legacy spelling `${env:HOME}` is the same variable, and named as such.
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "mounts": ["source=${env:HOME}/.ssh,target=/home/dev/.ssh,type=bind"]}"#,
    );
    t.yolo(&["up", "--accept-config"])
        .fails_with(77)
        .assert_stderr_contains("pass_env = [\"HOME\"]")
        .assert_stderr_contains("built from the host's HOME")
        .assert_stderr_lacks("localEnv");

    // With HOME passed, the hint names the real path.
    t.user_config("pass_env = [\"HOME\"]\n[policy]\nrequests = \"refuse\"\n");
    let ssh = format!("host-mount={}/.ssh", t.root().display());
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains(&ssh)
        .assert_stderr_lacks("pass_env");
}

#[test]
fn up_in_a_subfolder_finds_the_config_at_the_repository_root() {
    let t = Test::new();
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.file(".git/HEAD", "ref: refs/heads/main\n");
    t.file("src/deep/main.rs", "fn main() {}\n");
    let sub = t.workspace.join("src/deep");
    let run = |args: &[&str]| {
        let output = t
            .command(args)
            .current_dir(&sub)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        Run { output }.ok()
    };
    let up = run(&["up", "--json"]);
    let out: serde_json::Value = serde_json::from_str(&up.stdout()).unwrap();
    assert_eq!(out["container"]["workspace"], t.workspace_shown(), "{out}");
    // The whole repository is mounted, and exec from the subfolder reaches the same container.
    let name = t
        .workspace
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let listed = run(&["exec", "ls", &format!("/workspaces/{name}/src/deep")]).stdout();
    assert_eq!(listed.trim(), "main.rs");
    assert_eq!(t.agents().len(), 1);
}

/// A Docker CLI config folder whose current context is `name`, pointing at `host`.
fn docker_config_with_context(t: &Test, name: &str, host: &str) -> std::path::PathBuf {
    use sha2::{Digest, Sha256};
    let dir = t.root().join("docker-config");
    let id: String = Sha256::digest(name.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let meta = dir.join("contexts/meta").join(id);
    std::fs::create_dir_all(&meta).unwrap();
    let json = serde_json::json!({"Name": name, "Metadata": {},
        "Endpoints": {"docker": {"Host": host, "SkipTLSVerify": false}}});
    std::fs::write(meta.join("meta.json"), json.to_string()).unwrap();
    std::fs::write(
        dir.join("config.json"),
        format!(r#"{{"currentContext": "{name}"}}"#),
    )
    .unwrap();
    dir
}

#[test]
fn the_current_docker_context_is_the_engine_yolo_uses() {
    let mut t = Test::new();
    let socket = "unix:///var/run/docker.sock";
    let dir = docker_config_with_context(&t, "yolo-test", socket);
    t.env("DOCKER_CONFIG", dir.to_str().unwrap());
    t.env("DOCKER_HOST", "");
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let (_, out) = t.up(&[]);
    assert!(out["container"]["id"].as_str().is_some(), "{out}");
    assert_eq!(t.agents().len(), 1);
}

#[test]
fn a_context_at_a_missing_socket_is_named_in_the_docker_not_running_error() {
    let mut t = Test::without_docker();
    let dir = docker_config_with_context(&t, "elsewhere", "unix:///nonexistent/ctx.sock");
    t.env("DOCKER_CONFIG", dir.to_str().unwrap());
    t.env("DOCKER_HOST", "");
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    t.yolo(&["up"])
        .fails_with(69)
        .assert_stderr_contains("the Docker context \"elsewhere\"")
        .assert_stderr_contains("unix:///nonexistent/ctx.sock")
        .assert_stderr_contains("is Docker running?");

    // DOCKER_CONTEXT names one that does not exist: said so, not "Docker is down".
    t.env("DOCKER_CONTEXT", "nope");
    t.yolo(&["up"])
        .fails_with(69)
        .assert_stderr_contains("the Docker context \"nope\" does not exist");
}

/// A TCP endpoint on 127.0.0.1 that forwards every connection to the local Docker socket, for
/// `DOCKER_HOST=tcp://...` without exposing the engine beyond loopback. Lives as long as the test.
fn engine_over_tcp() -> u16 {
    use std::os::unix::net::UnixStream;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(engine) = UnixStream::connect("/var/run/docker.sock") else {
                continue;
            };
            let (mut c_in, mut e_out) = (client.try_clone().unwrap(), engine.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c_in, &mut e_out);
                let _ = e_out.shutdown(std::net::Shutdown::Write);
            });
            let (mut e_in, mut c_out) = (engine, client);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut e_in, &mut c_out);
                let _ = c_out.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    port
}

#[test]
fn docker_host_over_tcp_is_honoured() {
    let mut t = Test::new();
    let port = engine_over_tcp();
    t.env("DOCKER_HOST", &format!("tcp://127.0.0.1:{port}"));
    // This engine shares this disk: the local path (binds), not the remote copy (remote.rs).
    t.env("YOLO_REMOTE", "0");
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let (_, out) = t.up(&[]);
    assert!(out["container"]["id"].as_str().is_some(), "{out}");
    // A closed port: the error names DOCKER_HOST and the address.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = format!("tcp://{}", closed.local_addr().unwrap());
    drop(closed);
    t.env("DOCKER_HOST", &addr);
    t.yolo(&["status"])
        .fails_with(69)
        .assert_stderr_contains(&format!("{addr} (DOCKER_HOST)"));
}

#[test]
fn a_busy_forwarded_port_is_published_on_a_free_one_and_shown_in_status() {
    let t = Test::new();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let busy_app = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let app_port = busy_app.local_addr().unwrap().port();
    t.devcontainer(&format!(
        r#"{{"image": "debian:bookworm-slim", "forwardPorts": [{port}], "appPort": ["{app_port}:8080"]}}"#
    ));
    let (run, out) = t.up(&[]);
    run.assert_stderr_contains("yolo: forwarded 8080 -> 127.0.0.1:")
        .assert_stderr_contains(&format!(" ({app_port} was busy)"));
    let id = out["container"]["id"].as_str().unwrap().to_string();
    let line = run
        .stderr()
        .lines()
        .find(|l| l.contains(&format!("({port} was busy)")))
        .unwrap_or_else(|| panic!("no mapping printed\n{}", run.describe()))
        .to_string();
    let host: u16 = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert_eq!(
        line,
        format!("yolo: forwarded {port} -> 127.0.0.1:{host} ({port} was busy)")
    );
    assert_ne!(host, port);

    // `yolo status` and its --json show where the port went.
    let status = t.yolo(&["status"]).ok();
    status.assert_stdout_contains(&format!("forwarded {port} -> 127.0.0.1:{host}"));
    let rows: serde_json::Value =
        serde_json::from_str(&t.yolo(&["status", "--json"]).ok().stdout()).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["container"]["id"] == id.as_str())
        .expect("our row");
    let ports = row["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 2, "{row}");
    assert!(
        ports.contains(
            &serde_json::json!({"container": port, "host": host, "address": "127.0.0.1"})
        ),
        "{row}"
    );

    // A connection to the chosen port reaches a listener in the container.
    let said = greet_through_port(&t, port, "hello from the container", host);
    assert_eq!(said, "hello from the container\n");
    drop((busy, busy_app));
}

#[test]
fn env_file_ulimit_ipc_sysctl_platform_and_name_in_run_args_are_handled() {
    let t = Test::new();
    t.file(
        ".devcontainer/dev.env",
        "# settings\nFROM_FILE=file value\nOVERRIDDEN=from file\nHOME\n",
    );
    t.devcontainer(
        r#"{"image": "debian:bookworm-slim",
            "containerEnv": {"OVERRIDDEN": "from config"},
            "runArgs": ["--env-file", ".devcontainer/dev.env", "--ulimit", "nofile=4096:8192",
                        "--sysctl", "kernel.shmmax=268435456", "--platform", "linux/amd64",
                        "--name", "my-devcontainer"]}"#,
    );
    let (run, out) = t.up(&[]);
    run.assert_stderr_contains("--name my-devcontainer is ignored")
        .assert_stderr_contains("\"HOME\" has no value");
    let c = inspect(out["container"]["id"].as_str().unwrap());
    let env = c["Config"]["Env"].to_string();
    assert!(env.contains("FROM_FILE=file value"), "{env}");
    assert!(env.contains("OVERRIDDEN=from config"), "{env}");
    assert!(!env.contains("HOME=/root\",\"HOME"), "{env}");
    // The limit reaches the engine as given. Inside, only the hard limit is checked: runc
    // 1.1 (Debian's) sets an exec'd process's limits from outside while the Go runtime of its
    // `runc init` raises the soft limit to the hard one, so a `docker exec` sees 4096 or 8192
    // depending on which comes first (a plain `docker exec` can too).
    assert_eq!(
        c["HostConfig"]["Ulimits"],
        serde_json::json!([{"Name": "nofile", "Soft": 4096, "Hard": 8192}])
    );
    let inside = t
        .yolo(&[
            "exec",
            "sh",
            "-c",
            "ulimit -Hn; cat /proc/sys/kernel/shmmax; echo $FROM_FILE",
        ])
        .ok()
        .stdout();
    assert_eq!(inside, "8192\n268435456\nfile value\n");
    assert_eq!(c["Platform"], "linux");

    // The platform reaches Docker: one the local image is not made for is Docker's refusal.
    let other = Test::new();
    other.devcontainer(
        r#"{"image": "debian:bookworm-slim", "runArgs": ["--platform", "linux/arm64"]}"#,
    );
    other
        .yolo(&["up"])
        .fails_with(69)
        .assert_stderr_contains("wanted linux/arm64");
}

#[test]
fn run_args_that_would_reach_past_the_container_are_refused() {
    let t = Test::without_docker();
    let outside = t.root().join("outside.env");
    std::fs::write(&outside, "SECRET=1\n").unwrap();
    std::os::unix::fs::symlink(&outside, t.workspace.join("linked.env")).unwrap();
    // Refused before Docker (declining, the default, would go on to start the container).
    t.user_config("[policy]\nrequests = \"refuse\"\n");
    t.devcontainer(r#"{"image": "debian:bookworm-slim", "runArgs": ["--env-file", "linked.env"]}"#);
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("runArgs[0]")
        .assert_stderr_contains("outside the repository")
        .assert_stderr_contains(&format!(
            "--grant host-mount={}",
            outside.canonicalize().unwrap().display()
        ));

    t.devcontainer(
        r#"{"image": "debian:bookworm-slim", "runArgs": ["--env-file", "../outside.env"]}"#,
    );
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("host-mount");

    t.devcontainer(r#"{"image": "debian:bookworm-slim", "runArgs": ["--sysctl", "net.ipv4.ip_unprivileged_port_start=0"]}"#);
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("firewall guard's network namespace");
}

#[test]
fn a_named_volume_can_be_the_workspace() {
    let t = Test::new();
    let volume = format!("yolo-test-src-{}", t.id);
    t.file("on-the-host.txt", "host\n");
    t.devcontainer(&format!(
        r#"{{"image": "debian:bookworm-slim", "workspaceMount": "source={volume},target=/workspaces/app,type=volume", "workspaceFolder": "/workspaces/app"}}"#
    ));
    let (run, out) = t.up(&[]);
    run.assert_stderr_contains(&format!("workspaceMount is the volume \"{volume}\""));
    let c = inspect(out["container"]["id"].as_str().unwrap());
    let mounts = c["Mounts"].as_array().unwrap();
    let ws: Vec<_> = mounts
        .iter()
        .filter(|m| m["Destination"] == "/workspaces/app")
        .collect();
    assert_eq!(ws.len(), 1, "{mounts:?}");
    assert_eq!(ws[0]["Type"], "volume");
    assert_eq!(ws[0]["Name"], volume.as_str());
    // Commands run in it, it is writable, and the host's repository is not there.
    let inside = t
        .yolo(&["exec", "sh", "-c", "pwd; echo kept > made.txt; ls"])
        .ok()
        .stdout();
    assert_eq!(inside, "/workspaces/app\nmade.txt\n");
    // The volume carries the test's label (made by yolo), so the clean-up takes it.
    let labels = docker(&["volume", "inspect", "--format", "{{json .Labels}}", &volume]);
    assert!(labels.contains(&t.id), "{labels}");
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, made with the openssl
/// CLI in `dir` under docker's names (`ca.pem`, `cert.pem`, `key.pem` are the client's).
fn tls_certificates(dir: &std::path::Path) {
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::fs::write(dir.join("server.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca-key.pem",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=yolo test CA",
    ]);
    for (name, ext) in [("server", "server.ext"), ("client", "client.ext")] {
        let key = format!("{name}-key.pem");
        let csr = format!("{name}.csr");
        let cert = format!("{name}-cert.pem");
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            &format!("/CN={name}"),
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-out",
            &cert,
            "-days",
            "2",
            "-extfile",
            ext,
        ]);
    }
    std::fs::copy(dir.join("client-cert.pem"), dir.join("cert.pem")).unwrap();
    std::fs::copy(dir.join("client-key.pem"), dir.join("key.pem")).unwrap();
}

/// The local engine behind TLS on 127.0.0.1, with client certificates required, as
/// `dockerd --tlsverify` serves it. One thread per connection shuttles bytes both ways.
fn engine_over_tls(dir: &std::path::Path) -> u16 {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::io::{ErrorKind, Read, Write};
    use std::sync::Arc;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(dir.join("ca.pem")).unwrap())
        .unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
        .build()
        .unwrap();
    let config = rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from_pem_file(dir.join("server-cert.pem")).unwrap()],
            PrivateKeyDer::from_pem_file(dir.join("server-key.pem")).unwrap(),
        )
        .unwrap();
    let config = Arc::new(config);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let config = config.clone();
            std::thread::spawn(move || {
                let tick = Some(std::time::Duration::from_millis(10));
                let Ok(mut engine) =
                    std::os::unix::net::UnixStream::connect("/var/run/docker.sock")
                else {
                    return;
                };
                engine.set_read_timeout(tick).unwrap();
                tcp.set_read_timeout(tick).unwrap();
                let mut tls =
                    rustls::StreamOwned::new(rustls::ServerConnection::new(config).unwrap(), tcp);
                let mut buf = vec![0u8; 64 * 1024];
                let idle = |e: &std::io::Error| {
                    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
                };
                let mut client_done = false;
                loop {
                    match tls.read(&mut buf) {
                        _ if client_done => {}
                        // The client is done sending (an exec's stdin): the engine still answers.
                        Ok(0) => {
                            client_done = true;
                            let _ = engine.shutdown(std::net::Shutdown::Write);
                        }
                        Ok(n) => {
                            if engine.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                        Err(e) if idle(&e) => {}
                        Err(_) => return,
                    }
                    match engine.read(&mut buf) {
                        // The engine is done (an exec's stream ends): say so in TLS too.
                        Ok(0) => {
                            tls.conn.send_close_notify();
                            let _ = tls.flush();
                            return;
                        }
                        Ok(n) => {
                            if tls.write_all(&buf[..n]).and_then(|_| tls.flush()).is_err() {
                                return;
                            }
                        }
                        Err(e) if idle(&e) => {}
                        Err(_) => return,
                    }
                }
            });
        }
    });
    port
}

#[test]
fn docker_host_with_tls_verify_uses_the_client_certificates() {
    let mut t = Test::new();
    let certs = t.root().join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    tls_certificates(&certs);
    let port = engine_over_tls(&certs);
    t.env("DOCKER_HOST", &format!("tcp://127.0.0.1:{port}"));
    t.env("DOCKER_TLS_VERIFY", "1");
    // This engine shares this disk: the local path (binds), not the remote copy (remote.rs).
    t.env("YOLO_REMOTE", "0");
    t.env("DOCKER_CERT_PATH", certs.to_str().unwrap());
    t.devcontainer(r#"{"image": "debian:bookworm-slim"}"#);
    let (_, out) = t.up(&[]);
    assert!(out["container"]["id"].as_str().is_some(), "{out}");
    t.yolo(&["exec", "true"]).ok();

    // Without the client certificate the server refuses the handshake.
    let none = t.root().join("no-certs");
    std::fs::create_dir_all(&none).unwrap();
    std::fs::copy(certs.join("ca.pem"), none.join("ca.pem")).unwrap();
    t.env("DOCKER_CERT_PATH", none.to_str().unwrap());
    t.yolo(&["status"])
        .fails_with(69)
        .assert_stderr_contains("(DOCKER_HOST)");
}
