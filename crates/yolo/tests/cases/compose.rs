//! Compose configs (`dockerComposeFile` + `service`) against the real engine and the real
//! `docker-compose`: the dev service behind the guard, its siblings on internal networks and
//! reachable by name, the policy over every service, `runServices`, `down`, and the errors.

use crate::support::*;

/// A sibling that answers one line on TCP 7000 to whoever connects (perl is in the slim image;
/// `$$` is Compose's escape for `$`).
const DB: &str = r#"
  db:
    image: debian:bookworm-slim
    command: ["perl", "-MIO::Socket::INET", "-e", "my $$s = IO::Socket::INET->new(LocalPort => 7000, Listen => 5, ReuseAddr => 1) or die; while (my $$c = $$s->accept) { print $$c qq(hello from db\n); close $$c }"]
"#;

const APP: &str = r#"
  app:
    image: debian:bookworm-slim
    command: ["sleep", "infinity"]
    volumes:
      - ..:/workspaces/repo
"#;

/// The dev service built by Compose from `.devcontainer/Dockerfile`.
const BUILT_APP: &str = r#"
  app:
    build:
      context: .
    command: ["sleep", "infinity"]
    volumes:
      - ..:/workspaces/repo
"#;

const CONFIG: &str = r#"{
    "dockerComposeFile": "compose.yml",
    "service": "app",
    "workspaceFolder": "/workspaces/repo"
}"#;

fn project(t: &Test, services: &str, config: &str) {
    t.file(
        ".devcontainer/compose.yml",
        &format!("version: \"3.8\"\nservices:{services}"),
    );
    t.devcontainer(config);
}

/// The containers of this test's Compose project with their service and state.
fn services(t: &Test) -> Vec<(String, String)> {
    let out = docker(&[
        "ps",
        "-a",
        "--filter",
        &format!("label={LABEL}={}", t.id),
        "--filter",
        "label=com.docker.compose.service",
        "--format",
        "{{.Label \"com.docker.compose.service\"}} {{.State}}",
    ]);
    let mut list: Vec<(String, String)> = out
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(s, st)| (s.to_string(), st.to_string()))
        .collect();
    list.sort();
    list
}

/// What the dev service reads from `db:7000`, retried while the sibling starts.
fn reach_db(t: &Test) -> String {
    let script = "exec 3<>/dev/tcp/db/7000 && head -n1 <&3";
    let mut reached = String::new();
    for _ in 0..20 {
        reached = t.yolo(&["exec", "--", "bash", "-c", script]).stdout();
        if reached.contains("hello from db") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    reached
}

#[test]
fn the_dev_service_runs_behind_the_guard_and_reaches_its_sibling_by_name() {
    let t = Test::new();
    project(&t, &format!("{APP}{DB}"), CONFIG);
    let (_, up) = t.up(&[]);
    let id = up["container"]["id"]
        .as_str()
        .expect("container id")
        .to_string();

    // In the guard's namespaces, hardened, labelled for VS Code.
    let dev = inspect(&id);
    let guard = inspect(&net::guard_of(&t));
    let guard_id = guard["Id"].as_str().unwrap();
    assert_eq!(
        dev["HostConfig"]["NetworkMode"],
        format!("container:{guard_id}")
    );
    assert_eq!(
        dev["HostConfig"]["PidMode"],
        format!("container:{guard_id}")
    );
    assert_eq!(dev["HostConfig"]["CapDrop"], serde_json::json!(["ALL"]));
    let security = dev["HostConfig"]["SecurityOpt"].to_string();
    assert!(security.contains("no-new-privileges"), "{security}");
    assert!(dev["HostConfig"]["PidsLimit"].as_i64().unwrap_or(0) > 0);
    let labels = &dev["Config"]["Labels"];
    assert_eq!(labels["com.docker.compose.service"], "app");
    assert_eq!(labels["dev.yolo.role"], "agent");
    assert_eq!(
        labels["devcontainer.local_folder"].as_str(),
        Some(t.workspace_shown().as_str())
    );
    assert!(labels["devcontainer.config_file"].is_string());
    // Its command starts through the exec audit's shim.
    assert_eq!(labels["dev.yolo.exec-audit"], "shim");
    assert_eq!(
        dev["Config"]["Entrypoint"][0], "/.yolo/shim",
        "{}",
        dev["Config"]
    );

    // `yolo exec` runs in the dev service at workspaceFolder, where the repository is.
    t.file("hello.txt", "from the host\n");
    let run = t
        .yolo(&["exec", "--", "sh", "-c", "pwd; cat hello.txt"])
        .ok();
    assert_eq!(run.stdout(), "/workspaces/repo\nfrom the host\n");
    // ... and is on record.
    net::wait_event(&t, std::time::Duration::from_secs(10), |e| {
        e["kind"] == "exec" && e["argv"] == serde_json::json!(["cat", "hello.txt"])
    })
    .expect("the exec is recorded");

    // The workspace's read-only paths are bound over the Compose file's bind of it.
    t.yolo(&["exec", "--", "touch", ".devcontainer/planted"])
        .fails_with(1)
        .assert_stderr_contains("Read-only file system");

    // The sibling by its service name, through the guard's DNS and firewall.
    assert_eq!(reach_db(&t), "hello from db\n");
    // The name went through the guard's DNS (answered by Docker's); a name the allowlist
    // lacks is refused there.
    let dns = |name: &'static str| {
        net::wait_event(&t, std::time::Duration::from_secs(10), move |e| {
            e["kind"] == "dns" && e["name"] == name
        })
        .unwrap_or_else(|| panic!("no dns event for {name}"))
    };
    assert_eq!(dns("db")["decision"], "allowed");
    t.yolo(&[
        "exec",
        "--",
        "bash",
        "-c",
        "exec 3<>/dev/tcp/example.com/80",
    ])
    .fails_with(1);
    assert_eq!(dns("example.com")["decision"], "refused");

    // The sibling's networks have no way out; the guard is attached to them.
    let db = docker(&[
        "ps",
        "-q",
        "--filter",
        &format!("label={LABEL}={}", t.id),
        "--filter",
        "label=com.docker.compose.service=db",
    ]);
    let db = inspect(db.trim());
    let networks = db["NetworkSettings"]["Networks"].as_object().unwrap();
    assert!(!networks.is_empty());
    for name in networks.keys() {
        let net = inspect(name);
        assert_eq!(net["Internal"], true, "{name} must be internal");
        assert!(
            guard["NetworkSettings"]["Networks"].get(name).is_some()
                || inspect(guard_id)["NetworkSettings"]["Networks"]
                    .get(name)
                    .is_some(),
            "the guard is on {name}"
        );
    }
    // `yolo status` shows the other services with the agent's container.
    let name = up["container"]["name"].as_str().unwrap();
    t.yolo(&["status"])
        .ok()
        .assert_stdout_contains(&format!("compose services: {name}_db_1 running"));

    // yolo's project file is in its data folder, not in the repository.
    let written = t.data_dir.join("compose").read_dir().unwrap().count();
    assert_eq!(written, 1);

    // `yolo down` stops all of it.
    t.yolo(&["down"]).ok();
    for (service, state) in services(&t) {
        assert_eq!(state, "exited", "{service} stopped");
    }
    // A second `up` starts it all again, in the guard's new namespace.
    let (_, again) = t.up(&[]);
    assert_eq!(again["action"], "started");
    assert_eq!(reach_db(&t), "hello from db\n");
    let (_, reused) = t.up(&[]);
    assert_eq!(reused["action"], "running");

    // `down --remove` takes the project away, networks included.
    t.yolo(&["down", "--remove"]).ok();
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    let nets = t.project_networks();
    assert_eq!(nets.trim(), "", "networks left");
}

/// A sibling's `privileged` (and capabilities, security options) without a grant is declined:
/// the project starts, that container unprivileged, and `up` names it with the grant. Under
/// `requests = "refuse"` it stops `up`, as do a sibling's host binds and host network always.
#[test]
fn a_privileged_sibling_is_declined_without_a_grant_and_refused_on_request() {
    let t = Test::new();
    let db = "\n  db:\n    image: debian:bookworm-slim\n    command: sleep infinity\n    privileged: true\n    cap_add: [SYS_ADMIN]\n";
    project(&t, &format!("{APP}{db}"), CONFIG);
    let (_, up) = t.up(&[]);
    let declined = up["declined"].to_string();
    assert!(declined.contains("privileged"), "{declined}");
    assert!(declined.contains("cap-add=SYS_ADMIN"), "{declined}");
    let host_config = inspect(&service_container(&t, "db"))["HostConfig"].clone();
    assert_eq!(host_config["Privileged"], false, "{host_config}");
    assert!(
        !host_config["CapAdd"].to_string().contains("SYS_ADMIN"),
        "{host_config}"
    );
    t.yolo(&["down", "--remove"]).ok();
    t.user_config("[policy]\nrequests = \"refuse\"\n");
    t.yolo(&["up", "--accept-config"])
        .fails_with(77)
        .assert_stderr_contains("service \"db\": privileged")
        .assert_stderr_contains("--grant privileged");
    assert!(t.containers().is_empty(), "nothing was created");
    let host = "\n  db:\n    image: debian:bookworm-slim\n    volumes:\n      - /etc:/host-etc\n";
    project(&t, &format!("{APP}{host}"), CONFIG);
    // A changed Compose file is a changed container definition: shown, to be accepted.
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("changed since you last approved it")
        .assert_stderr_contains("+      - /etc:/host-etc");
    t.yolo(&["up", "--accept-config"])
        .fails_with(77)
        .assert_stderr_contains("service \"db\": volumes")
        .assert_stderr_contains("--grant host-mount=/etc");
    let net = "\n  db:\n    image: debian:bookworm-slim\n    network_mode: host\n";
    project(&t, &format!("{APP}{net}"), CONFIG);
    t.yolo(&["up", "--accept-config"])
        .fails_with(77)
        .assert_stderr_contains("service \"db\": network_mode");
    assert!(t.containers().is_empty(), "nothing was created");
}

#[test]
fn a_sibling_granted_egress_gets_a_network_out_the_guard_stays_off() {
    let t = Test::new();
    project(&t, &format!("{APP}{DB}"), CONFIG);
    t.up(&["--grant", "compose-egress=db"]);
    let db = docker(&[
        "ps",
        "-q",
        "--filter",
        &format!("label={LABEL}={}", t.id),
        "--filter",
        "label=com.docker.compose.service=db",
    ]);
    let db = inspect(db.trim());
    let networks: Vec<String> = db["NetworkSettings"]["Networks"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let open: Vec<&String> = networks
        .iter()
        .filter(|n| inspect(n)["Internal"] == false)
        .collect();
    assert_eq!(open.len(), 1, "one network with egress: {networks:?}");
    assert!(open[0].ends_with("_yolo-egress"), "{open:?}");
    let guard = inspect(&net::guard_of(&t));
    assert!(guard["NetworkSettings"]["Networks"].get(open[0]).is_none());
    // Without the grant the same project has none.
    t.yolo(&["down", "--remove"]).ok();
    t.up(&[]);
    let db = docker(&[
        "ps",
        "-q",
        "--filter",
        &format!("label={LABEL}={}", t.id),
        "--filter",
        "label=com.docker.compose.service=db",
    ]);
    let networks = inspect(db.trim())["NetworkSettings"]["Networks"].clone();
    for name in networks.as_object().unwrap().keys() {
        assert_eq!(inspect(name)["Internal"], true, "{name}");
    }
}

#[test]
fn a_service_built_by_compose_builds_behind_the_guard_and_carries_the_labels() {
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        "FROM debian:bookworm-slim\nRUN getent hosts www.denied.test || echo built > /built\n",
    );
    project(&t, &format!("{BUILT_APP}{DB}"), CONFIG);
    t.up(&[]);
    t.yolo(&["exec", "--", "cat", "/built"])
        .ok()
        .assert_stdout("built\n");
    // Its RUN step asked the guard, started for the build, which refused the name.
    let refused = net::wait_event(&t, std::time::Duration::from_secs(10), |e| {
        e["kind"] == "dns" && e["name"] == "www.denied.test"
    })
    .expect("the build's lookup went through the guard");
    assert_eq!(refused["decision"], "refused");
    assert_eq!(refused["phase"], "build");
    // The image carries the test's label (the drop removes it).
    let images = docker(&[
        "images",
        "--format",
        "{{.Repository}}",
        "--filter",
        &format!("label={LABEL}={}", t.id),
        "--filter",
        "label=dev.yolo.id",
    ]);
    let name = format!(
        "{}_app\n",
        inspect(&net::guard_of(&t))["Name"]
            .as_str()
            .unwrap()
            .trim_start_matches('/')
            .trim_end_matches("-guard")
    );
    assert_eq!(images, name);
}

/// `forwardPorts` naming a sibling (`"db:7000"`, as VS Code forwards it) is forwarded through
/// the guard: published on the host's 127.0.0.1 and relayed by the guard to the sibling, whose
/// lookup is in the audit log like the agent's. A name that is no service of the project is
/// noted, not forwarded; `portsAttributes` naming a sibling is accepted.
#[test]
fn a_siblings_port_is_forwarded_through_the_guard() {
    let t = Test::new();
    let config = r#"{
        "dockerComposeFile": "compose.yml",
        "service": "app",
        "workspaceFolder": "/workspaces/repo",
        "forwardPorts": ["db:7000", "nosuch:7001"],
        "portsAttributes": {"db:7000": {"label": "the database"}}
    }"#;
    project(&t, &format!("{APP}{DB}"), config);
    let (run, up) = t.up(&[]);
    assert!(
        up["declined"].as_array().is_none_or(|d| d.is_empty()),
        "{up}"
    );
    run.assert_stderr_contains(
        "forwardPorts[1]: port 7001 of nosuch is not forwarded: the Compose project has no such service",
    );
    // The host port Docker bound for 7000 (another when 7000 was busy on this host).
    let rows: serde_json::Value =
        serde_json::from_str(&t.yolo(&["status", "--json"]).ok().stdout()).unwrap();
    let host = rows
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["ports"].as_array().cloned().unwrap_or_default())
        .find(|p| p["container"] == 7000)
        .and_then(|p| p["host"].as_u64())
        .unwrap_or_else(|| panic!("port 7000 published: {rows}"));
    let mut said = String::new();
    for _ in 0..50 {
        said.clear();
        if let Ok(mut conn) = std::net::TcpStream::connect(("127.0.0.1", host as u16)) {
            let _ = std::io::Read::read_to_string(&mut conn, &mut said);
            if !said.is_empty() {
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(said, "hello from db\n");
    // The relay looked db up through the guard's DNS, as the agent would.
    assert!(
        t.events()
            .iter()
            .any(|e| e["kind"] == "dns" && e["name"].as_str().is_some_and(|n| n.starts_with("db"))),
        "no lookup of db in the log"
    );
    assert!(reach_db(&t).contains("hello from db"));
}

/// The dev service's own `cap_add`/`security_opt`/`privileged` (VS Code's debugging pair,
/// common in Compose templates) and its binds of host paths outside the repository (the Docker
/// socket, `~/.ssh`) no longer stop `up`: declined, and the container really runs without them
/// (yolo writes the dev service's hardening and volumes itself).
#[test]
fn the_dev_services_capabilities_are_declined_and_never_reach_the_engine() {
    let t = Test::new();
    // Its binds of the Docker socket and of a host folder outside the repository too.
    let app = format!(
        "{APP}      - /var/run/docker.sock:/var/run/docker.sock\n      - /etc:/host-etc:ro\n    cap_add: [SYS_PTRACE]\n    security_opt: [\"seccomp:unconfined\"]\n    privileged: true\n"
    );
    project(&t, &format!("{app}{DB}"), CONFIG);
    let (_, up) = t.up(&[]);
    let declined: Vec<String> = up["declined"]
        .as_array()
        .expect("declined list")
        .iter()
        .map(|d| d["property"].as_str().unwrap_or_default().to_string())
        .collect();
    for property in ["privileged", "cap_add", "security_opt", "volumes"] {
        assert!(
            declined.contains(&format!("service \"app\": {property}")),
            "{property}: {declined:?}"
        );
    }
    let dev = inspect(up["container"]["id"].as_str().expect("container id"));
    let host = &dev["HostConfig"];
    assert_eq!(host["Privileged"], false);
    assert!(!host["CapAdd"].to_string().contains("SYS_PTRACE"), "{host}");
    assert!(
        !host["SecurityOpt"].to_string().contains("unconfined"),
        "{host}"
    );
    assert!(
        host["SecurityOpt"]
            .to_string()
            .contains("no-new-privileges"),
        "{host}"
    );
    // And from inside: no CAP_SYS_PTRACE (bit 19) in the bounding set.
    let status = t
        .yolo(&["exec", "--", "grep", "CapBnd", "/proc/self/status"])
        .ok()
        .stdout();
    let bits = u64::from_str_radix(status.split_whitespace().last().unwrap_or("0"), 16).unwrap();
    assert_eq!(bits & (1 << 19), 0, "{status}");
    let mounts = dev["Mounts"].to_string();
    assert!(!mounts.contains("docker.sock"), "{mounts}");
    assert!(!mounts.contains("/host-etc"), "{mounts}");
    t.yolo(&["exec", "--", "test", "-e", "/var/run/docker.sock"])
        .fails_with(1);
    // The repository's own bind stays.
    t.yolo(&["exec", "--", "test", "-d", "/workspaces/repo/.devcontainer"])
        .ok();
    assert!(reach_db(&t).contains("hello from db"));
}

#[test]
fn run_services_limits_what_starts() {
    let t = Test::new();
    let extra =
        "\n  extra:\n    image: debian:bookworm-slim\n    command: [\"sleep\", \"infinity\"]\n";
    let config = r#"{
        "dockerComposeFile": ["compose.yml"],
        "service": "app",
        "runServices": ["db"],
        "workspaceFolder": "/workspaces/repo",
        "postCreateCommand": "touch /tmp/created"
    }"#;
    project(&t, &format!("{APP}{DB}{extra}"), config);
    t.up(&[]);
    // The lifecycle hooks run in the dev service.
    t.yolo(&["exec", "--", "test", "-e", "/tmp/created"]).ok();
    let running: Vec<String> = services(&t)
        .into_iter()
        .filter(|(_, state)| state == "running")
        .map(|(s, _)| s)
        .collect();
    assert_eq!(running, ["app", "db"]);
}

/// Compose files that initializeCommand writes (here from a template, as generators do) are
/// read after it ran, as the reference CLI reads them: missing before the first `up`, stale
/// before the next one. The first use approves what it generated; after that, what the command
/// writes can follow from files the agent writes (`mark` here), so a change is shown and asked.
#[test]
fn compose_files_written_by_initialize_command_are_read_after_it() {
    let t = Test::new();
    let template =
        format!("version: \"3.8\"\nservices:{APP}    environment:\n      MARK: @MARK@\n");
    t.file(".devcontainer/compose.template", &template);
    t.file(
        "gen.sh",
        "sed \"s/@MARK@/$(cat mark)/\" .devcontainer/compose.template > .devcontainer/compose.yml\n",
    );
    t.file("mark", "first");
    t.devcontainer(
        r#"{
        "initializeCommand": "sh gen.sh",
        "dockerComposeFile": "compose.yml",
        "service": "app",
        "workspaceFolder": "/workspaces/repo"
    }"#,
    );
    t.up(&["--trust-host-commands"]);
    let mark = |t: &Test| t.yolo(&["exec", "--", "printenv", "MARK"]).ok().stdout();
    assert_eq!(mark(&t).trim(), "first");
    // Run again unchanged: nothing to ask.
    t.yolo(&["down"]).ok();
    t.up(&["--trust-host-commands"]);
    // The file from the last run is there, stale: the new one is what starts, once approved.
    t.file("mark", "second");
    t.yolo(&["down"]).ok();
    t.yolo(&["up", "--trust-host-commands"])
        .fails_with(77)
        .assert_stderr_contains("+      MARK: second");
    t.up(&["--trust-host-commands", "--accept-config"]);
    assert_eq!(mark(&t).trim(), "second");
}

#[test]
fn an_invalid_compose_file_is_a_clear_error_and_leaves_nothing() {
    let t = Test::new();
    t.file(
        ".devcontainer/compose.yml",
        "services:\n  app:\n    image: [unclosed\n",
    );
    t.devcontainer(CONFIG);
    t.yolo(&["up"])
        .fails_with(65)
        .assert_stderr_contains("compose.yml")
        .assert_stderr_contains("cannot read the Compose files");
    assert!(t.containers().is_empty());
    // A service the files do not define.
    project(&t, DB, CONFIG);
    t.yolo(&["up", "--accept-config"])
        .fails_with(65)
        .assert_stderr_contains("no service \"app\"");
    assert!(t.containers().is_empty());
}

#[test]
fn a_dev_service_image_that_cannot_be_pulled_is_a_clear_error_and_leaves_nothing() {
    let t = Test::new();
    // A registry on loopback where nothing listens: the pull fails at once, and no packet
    // leaves the machine.
    let app = r#"
  app:
    image: 127.0.0.1:1/yolo-missing:1
    command: ["sleep", "infinity"]
    volumes:
      - ..:/workspaces/repo
"#;
    project(&t, &format!("{app}{DB}"), CONFIG);
    let run = t.yolo(&["up"]).fails_with(69);
    run.assert_stderr_contains("pull app failed")
        .assert_stderr_contains(
            "127.0.0.1:1/yolo-missing:1 of the service \"app\" is not on the engine",
        )
        .assert_stderr_lacks("is external, skipping");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    assert!(services(&t).is_empty(), "{:?}", services(&t));
}

#[test]
fn without_compose_installed_the_error_says_how_to_install_it() {
    let mut t = Test::new();
    project(&t, &format!("{APP}{DB}"), CONFIG);
    let empty = t.root().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    t.env("PATH", empty.to_str().unwrap());
    t.yolo(&["up"])
        .fails_with(69)
        .assert_stderr_contains("neither `docker compose` nor `docker-compose` is installed");
    assert!(t.containers().is_empty());
}

#[test]
fn shutdown_action_none_leaves_the_other_services_running() {
    let t = Test::new();
    let config = r#"{
        "dockerComposeFile": "compose.yml",
        "service": "app",
        "shutdownAction": "none",
        "workspaceFolder": "/workspaces/repo"
    }"#;
    project(&t, &format!("{APP}{DB}"), config);
    t.up(&[]);
    t.yolo(&["down"])
        .ok()
        .assert_stderr_contains("keep running (shutdownAction \"none\")");
    assert_eq!(
        services(&t),
        [
            ("app".to_string(), "exited".to_string()),
            ("db".to_string(), "running".to_string())
        ]
    );
}

#[test]
fn a_start_that_fails_half_way_leaves_nothing() {
    let t = Test::new();
    let config = r#"{
        "dockerComposeFile": "compose.yml",
        "service": "app",
        "containerUser": "nosuchuser",
        "workspaceFolder": "/workspaces/repo"
    }"#;
    project(&t, &format!("{APP}{DB}"), config);
    t.yolo(&["up"])
        .fails_with(69)
        .assert_stderr_contains("nosuchuser")
        .assert_stderr_contains("undid what this `yolo up` had made");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    let nets = t.project_networks();
    assert_eq!(nets.trim(), "", "networks left");
}

/// The Compose files are the repository's, and Compose reads host files and variables for them:
/// a host variable in `${..}` and an `env_file` outside the repository would copy host secrets
/// into the container. The variable reads as unset (unless in `pass_env`), the file is
/// refused unless granted.
#[test]
fn compose_files_cannot_copy_host_variables_or_files_into_the_container() {
    let t = Test::new();
    let outside = tempfile::tempdir().unwrap();
    let secret_file = outside.path().join("credentials.env");
    std::fs::write(&secret_file, "STOLEN_FILE=file-secret\n").unwrap();
    let app = format!(
        "{APP}    environment:\n      - STOLEN_VAR=${{YOLO_TEST_HOST_SECRET}}\n      - PASSED=${{YOLO_TEST_PASSED}}\n"
    );
    project(&t, &app, CONFIG);
    t.user_config("pass_env = [\"YOLO_TEST_PASSED\"]\n");
    let run = |args: &[&str]| {
        let output = t
            .command(args)
            .env("YOLO_TEST_HOST_SECRET", "var-secret")
            .env("YOLO_TEST_PASSED", "passed-value")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        Run { output }
    };
    run(&["up"]).ok();
    let env = run(&["exec", "--", "env"]).ok().stdout();
    assert!(
        !env.contains("var-secret"),
        "a host variable leaked:\n{env}"
    );
    assert!(
        env.contains("PASSED=passed-value"),
        "pass_env is honoured:\n{env}"
    );
    run(&["down", "--remove"]).ok();

    let app = format!("{APP}    env_file: {}\n", secret_file.display());
    project(&t, &app, CONFIG);
    run(&["up", "--accept-config"])
        .fails_with(77)
        .assert_stderr_contains("service \"app\": env_file")
        .assert_stderr_contains(&format!("--grant host-mount={}", secret_file.display()));
    assert!(t.containers().is_empty(), "nothing was created");
    // A file in the repository is the repository's own.
    t.file(".devcontainer/app.env", "FROM_REPO=yes\n");
    project(&t, &format!("{APP}    env_file: app.env\n"), CONFIG);
    run(&["up", "--accept-config"]).ok();
    let env = run(&["exec", "--", "env"]).ok().stdout();
    assert!(env.contains("FROM_REPO=yes"), "{env}");
}

#[test]
fn the_dev_services_image_label_and_features_shape_it_as_for_an_image_config() {
    let t = Test::new();
    // The service's own image (built by Compose) says its user, env and a hook in its label.
    // Its own first layer (the test's id): no cached layer shared with another test's build.
    let label = r#"[{"remoteUser": "dev", "containerEnv": {"FROM_LABEL": "yes"}, "postCreateCommand": "echo image >> /tmp/order", "forwardPorts": [18462]}]"#;
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM debian:bookworm-slim\nLABEL yolo.test={}\nRUN useradd --create-home --uid 1000 dev\nLABEL devcontainer.metadata='{label}'\n",
            t.id
        ),
    );
    t.feature(
        "hello",
        r#"{"id": "hello", "options": {"who": {"type": "string", "default": "nobody"}},
            "containerEnv": {"HELLO_HOME": "/opt/hello"},
            "entrypoint": "/usr/local/share/hello-init.sh",
            "postCreateCommand": "echo feature >> /tmp/order"}"#,
        r#"mkdir -p /opt/hello
echo "$WHO user=$_REMOTE_USER" > /opt/hello/said
printf '#!/bin/sh\necho started > /tmp/hello-init-ran\n' > /usr/local/share/hello-init.sh
chmod +x /usr/local/share/hello-init.sh"#,
    );
    project(
        &t,
        &format!("{BUILT_APP}{DB}"),
        r#"{
    "dockerComposeFile": "compose.yml",
    "service": "app",
    "workspaceFolder": "/workspaces/repo",
    "features": {"./hello": {"who": "world"}},
    "postCreateCommand": "echo config >> /tmp/order"
}"#,
    );
    let (_, up) = t.up(&[]);
    assert_eq!(up["container"]["remote_user"], "dev", "{up}");
    let script =
        "whoami; echo $FROM_LABEL $HELLO_HOME; cat /opt/hello/said /tmp/hello-init-ran /tmp/order";
    t.yolo(&["exec", "--", "sh", "-c", script])
        .ok()
        .assert_stdout("dev\nyes /opt/hello\nworld user=dev\nstarted\nimage\nfeature\nconfig\n");
    // Still behind the guard, its sibling by name, and its programs recorded by the exec audit.
    assert!(reach_db(&t).contains("hello from db"));
    let id = up["container"]["id"].as_str().unwrap().to_string();
    let c = inspect(&id);
    assert!(
        c["HostConfig"]["NetworkMode"]
            .as_str()
            .unwrap()
            .starts_with("container:"),
        "{}",
        c["HostConfig"]
    );
    assert_eq!(c["Config"]["Labels"]["dev.yolo.exec-audit"], "shim");
    // The port the label forwards is published by the guard, made again once the label was
    // read (Docker fixes a container's ports when it is made).
    let guard = inspect(&net::guard_of(&t));
    let bindings = &guard["HostConfig"]["PortBindings"]["18462/tcp"][0];
    assert_eq!(bindings["HostIp"], "127.0.0.1", "{}", guard["HostConfig"]);
    let ran = net::wait_event(&t, std::time::Duration::from_secs(10), |e| {
        e["kind"] == "exec" && e["argv"].to_string().contains("hello-init.sh")
    });
    assert!(ran.is_some(), "the Feature's entrypoint ran unrecorded");
    // The container carries the merged metadata (the image's entry, the Feature's, the
    // config's), so VS Code sees what yolo applied.
    let merged: serde_json::Value = serde_json::from_str(
        c["Config"]["Labels"]["devcontainer.metadata"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let merged = merged.as_array().unwrap();
    assert_eq!(merged.len(), 3, "{merged:?}");
    assert_eq!(merged[0]["remoteUser"], "dev");
    assert_eq!(merged[1]["id"], "./hello");
    // The image with the Features is made once: a second start builds nothing and finds the
    // config unchanged.
    t.yolo(&["down", "--remove"]).ok();
    let again = t.yolo(&["up", "--json"]).ok();
    again.assert_stderr_lacks("installed 1 Feature(s)");
    t.yolo(&["exec", "--", "cat", "/opt/hello/said"])
        .ok()
        .assert_stdout("world user=dev\n");
    let reused = t.yolo(&["up", "--json"]).ok();
    let reused: serde_json::Value = serde_json::from_str(&reused.stdout()).unwrap();
    assert_eq!(reused["action"], "running", "{reused}");
    assert_eq!(reused["stale"], false, "{reused}");
}

#[test]
fn a_feature_of_the_dev_service_asking_for_privileged_is_refused_by_name() {
    let t = Test::new();
    // Declining is the default (issue 26); under `requests = "refuse"` the request stops `up`.
    t.user_config("[policy]\nrequests = \"refuse\"\n");
    t.feature(
        "dind",
        r#"{"id": "dind", "privileged": true}"#,
        "touch /dind-installed",
    );
    project(
        &t,
        &format!("{APP}{DB}"),
        r#"{"dockerComposeFile": "compose.yml", "service": "app",
            "workspaceFolder": "/workspaces/repo", "features": {"./dind": {}}}"#,
    );
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("Feature \"./dind\"")
        .assert_stderr_contains("--grant privileged");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    assert!(services(&t).is_empty(), "{:?}", services(&t));
}

#[test]
fn a_sibling_cannot_pass_for_the_agent_or_the_dev_container() {
    let t = Test::new();
    let workspace = t.workspace.canonicalize().unwrap().display().to_string();
    let impostor = format!(
        r#"
  impostor:
    image: debian:bookworm-slim
    command: ["sleep", "infinity"]
    labels:
      dev.yolo.role: agent
      dev.yolo.managed: "true"
      devcontainer.local_folder: "{workspace}"
"#
    );
    project(&t, &format!("{APP}{impostor}"), CONFIG);
    let (_, up) = t.up(&[]);
    let id = up["container"]["id"].as_str().unwrap().to_string();
    // yolo's commands reach the dev service, and the impostor carries none of the labels.
    t.yolo(&["exec", "--", "sh", "-c", "echo $HOSTNAME"]).ok();
    let agents = t.agents();
    assert_eq!(agents.len(), 1, "{agents:?}");
    assert!(
        id.starts_with(agents[0].as_str()) || agents[0].starts_with(&id),
        "{agents:?} {id}"
    );
    let impostor = docker(&[
        "ps",
        "-q",
        "--filter",
        &format!("label={LABEL}={}", t.id),
        "--filter",
        "label=com.docker.compose.service=impostor",
    ]);
    let labels = &inspect(impostor.trim())["Config"]["Labels"];
    assert_eq!(labels["dev.yolo.role"], "service", "{labels}");
    // Set empty by yolo (a container's label replaces its image's): no folder claimed.
    assert!(
        labels
            .get("devcontainer.local_folder")
            .is_none_or(|v| v.as_str() == Some("")),
        "{labels}"
    );
}

/// A sibling that only waits: what an agent that got code into a sibling, or the repository's
/// own image, runs as root with whatever yolo gives the service.
const PROBE: &str = r#"
  probe:
    image: debian:bookworm-slim
    command: ["sleep", "infinity"]
"#;

/// The container of `service` in `t`'s Compose project.
fn service_container(t: &Test, service: &str) -> String {
    docker(&[
        "ps",
        "-aq",
        "--filter",
        &format!("label={LABEL}={}", t.id),
        "--filter",
        &format!("label=com.docker.compose.service={service}"),
    ])
    .trim()
    .to_string()
}

/// The gateway addresses Docker gives the networks of a container.
fn gateways(container: &str) -> Vec<(String, String)> {
    let networks = inspect(container)["NetworkSettings"]["Networks"].clone();
    let mut out = Vec::new();
    for name in networks.as_object().unwrap().keys() {
        for config in inspect_network(name)["IPAM"]["Config"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            if let Some(gateway) = config["Gateway"].as_str().filter(|g| !g.is_empty()) {
                out.push((name.clone(), gateway.to_string()));
            }
        }
    }
    out
}

/// A UDP datagram forged as root in a container: an Ethernet frame to the broadcast address
/// from a packet socket, carrying IPv4 to `$ARGV[0]` port `$ARGV[1]` from `$ARGV[2]`. It needs
/// no route and no ARP answer: the host's bridge takes a broadcast frame in, and the host
/// delivers it if the address is one of its own, on whatever interface.
const FORGE_UDP: &str = r#"
use Socket;
my ($dst, $port, $src) = @ARGV;
sub slurp { open(my $f, '<', $_[0]) or die "$_[0]: $!\n"; my $v = <$f>; chomp $v; $v }
my $index = slurp('/sys/class/net/eth0/ifindex');
my $mac = pack('H12', join('', split(/:/, slurp('/sys/class/net/eth0/address'))));
socket(my $s, 17, 3, 0) or die "packet socket: $!\n";
my $payload = "forged\n";
my $udp = pack('nnnn', 40000, $port, 8 + length($payload), 0) . $payload;
my $ip = pack('CCnnnCCna4a4', 0x45, 0, 20 + length($udp), 1, 0, 64, 17, 0, inet_aton($src), inet_aton($dst));
my $sum = 0; $sum += $_ for unpack('n*', $ip);
$sum = ($sum & 0xffff) + ($sum >> 16) while $sum >> 16;
substr($ip, 10, 2) = pack('n', ~$sum & 0xffff);
my $frame = ("\xff" x 6) . $mac . pack('n', 0x0800) . $ip . $udp;
my $to = pack('SnLSCCa8', 17, 0x0800, $index, 1, 0, 6, "\xff" x 6);
for (1..3) { send($s, $frame, 0, $to) or die "send: $!\n"; select(undef, undef, undef, 0.2) }
print "sent\n";
"#;

/// Attack: a sibling (root in its container, with what yolo leaves it) tries the host's own
/// services: a TCP listener on all of the host's addresses, through the gateway address of
/// its own networks and of the guard's network (the host holds both on Docker's bridges), and
/// a UDP listener through a forged frame. Docker's `internal` networks leave the host an
/// address on them, and the host's INPUT is not Docker's to filter: before the wall, the
/// sibling reached the listener through its own gateway.
#[test]
fn a_sibling_cannot_reach_the_host() {
    use std::io::Write;
    let t = Test::new();
    // Listening on every address of the host, so whichever address the host holds on the
    // project's networks answers; only the project's containers connect.
    let tcp = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in tcp.incoming().flatten() {
            let _ = stream.write_all(b"host here\n");
        }
    });
    let udp = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    udp.set_read_timeout(Some(std::time::Duration::from_secs(3)))
        .unwrap();

    project(&t, &format!("{APP}{DB}{PROBE}"), CONFIG);
    t.up(&[]);
    let probe = service_container(&t, "probe");
    let own = gateways(&probe);
    assert!(!own.is_empty(), "the probe has a network");
    let guard_net: Vec<(String, String)> = gateways(&net::guard_of(&t))
        .into_iter()
        .filter(|(n, _)| !own.iter().any(|(o, _)| o == n))
        .collect();
    assert!(!guard_net.is_empty(), "the guard has a network of its own");
    // The sibling still reaches its sibling by name: the wall is around the project.
    let script =
        "for i in $(seq 20); do exec 3<>/dev/tcp/db/7000 && head -n1 <&3 && exit; sleep 0.5; done";
    let reached = docker(&["exec", &probe, "bash", "-c", script]);
    assert_eq!(reached, "hello from db\n");

    for (network, gateway) in own.iter().chain(&guard_net) {
        let connect =
            format!("timeout 5 bash -c 'exec 3<>/dev/tcp/{gateway}/{tcp_port} && head -n1 <&3'");
        let answer = try_docker(&["exec", &probe, "bash", "-c", &connect]);
        assert!(
            !answer.as_deref().unwrap_or_default().contains("host here"),
            "the sibling reached the host at {gateway} (the gateway of {network}): {answer:?}"
        );
    }
    let own_ip = inspect(&probe)["NetworkSettings"]["Networks"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|n| n["IPAddress"].as_str())
        .next()
        .unwrap()
        .to_string();
    for (_, gateway) in own.iter().chain(&guard_net) {
        let _ = try_docker(&[
            "exec",
            &probe,
            "perl",
            "-e",
            FORGE_UDP,
            gateway,
            &udp_port.to_string(),
            &own_ip,
        ]);
    }
    let mut buf = [0u8; 64];
    let got = udp.recv_from(&mut buf);
    assert!(
        got.is_err(),
        "a forged datagram from the sibling reached the host: {got:?}"
    );
}

/// Attack: a repository's Compose file names another yolo project's internal network, with
/// `name:` (Compose joins a network that exists under that name) or as `external`; its
/// sibling would sit next to the other project's services. `name:` is declined (the network is
/// the project's own, under Compose's own name for it), or refused under `requests =
/// "refuse"`; the others are refused before anything is made. A network made outside the
/// project under the very name Compose gives the project's own is found by its labels after
/// Compose created the containers, and the start is undone.
#[test]
fn a_network_of_another_project_is_never_joined() {
    let other = Test::new();
    project(&other, &format!("{APP}{DB}"), CONFIG);
    other.up(&[]);
    let theirs = inspect(&service_container(&other, "db"))["NetworkSettings"]["Networks"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();

    let t = Test::new();
    let probe = format!("{PROBE}    networks: [shared]\n");
    let compose = |spelling: &str| {
        format!("version: \"3.8\"\nservices:{APP}{probe}networks:\n  shared:\n{spelling}")
    };
    // Declined by default: the project starts, the probe on a network of its own.
    t.file(
        ".devcontainer/compose.yml",
        &compose(&format!("    name: {theirs}\n")),
    );
    t.devcontainer(CONFIG);
    let (_, up) = t.up(&["--accept-config"]);
    let declined = up["declined"].to_string();
    assert!(
        declined.contains("network \\\"shared\\\": name"),
        "{declined}"
    );
    let probe_networks: Vec<String> = inspect(&service_container(&t, "probe"))["NetworkSettings"]
        ["Networks"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert!(!probe_networks.contains(&theirs), "{probe_networks:?}");
    assert!(
        probe_networks.iter().any(|n| n.ends_with("_shared")),
        "{probe_networks:?}"
    );
    t.yolo(&["down", "--remove"]).ok();
    // Refused under `requests = "refuse"`, as the other spellings always are.
    t.user_config("[policy]\nrequests = \"refuse\"\n");
    for (spelling, property) in [
        (format!("    name: {theirs}\n"), "network \"shared\": name"),
        (
            format!("    external: true\n    name: {theirs}\n"),
            "network \"shared\": external",
        ),
        (
            "    driver_opts:\n      com.docker.network.bridge.name: docker0\n".to_string(),
            "network \"shared\": driver_opts.com.docker.network.bridge.name",
        ),
    ] {
        t.file(".devcontainer/compose.yml", &compose(&spelling));
        t.devcontainer(CONFIG);
        t.yolo(&["up", "--accept-config"])
            .fails_with(77)
            .assert_stderr_contains(property);
        assert!(t.containers().is_empty(), "{:?}", t.containers());
        assert!(services(&t).is_empty(), "{:?}", services(&t));
    }
    // The other project's network still holds only its own.
    let members = inspect_network(&theirs)["Containers"].clone();
    assert!(
        members
            .as_object()
            .unwrap()
            .values()
            .all(|m| !m["Name"].as_str().unwrap_or_default().contains("probe")),
        "{members}"
    );

    // A network planted under the name Compose gives this project's default network, made
    // as yolo makes them but not by this project: joined by Compose, caught by its labels.
    project(&t, &format!("{APP}{PROBE}"), CONFIG);
    let (_, up) = t.up(&["--accept-config"]);
    let project_name = up["container"]["name"].as_str().unwrap().to_string();
    t.yolo(&["down", "--remove"]).ok();
    let planted = format!("{project_name}_default");
    docker(&[
        "network",
        "create",
        "--internal",
        "--label",
        &format!("{LABEL}={}", t.id),
        "-o",
        "com.docker.network.bridge.inhibit_ipv4=true",
        &planted,
    ]);
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("service \"probe\": networks")
        .assert_stderr_contains(&planted)
        .assert_stderr_contains("not one this project made");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    let _ = try_docker(&["network", "rm", &planted]);
}

/// A workspace folder whose name has a dot and capitals (`My.App`): Compose drops the dot
/// from the project name (`yolo-myapp-…`, not the container's `yolo-my.app-…`), and yolo
/// finds everything under Compose's spelling: the guard joins the project's network, the
/// agent reaches the sibling `db` by name, and `down --remove` leaves nothing behind (the
/// `_default` network was left, and listed by `yolo status` as a leftover).
#[test]
fn a_dotted_upper_case_workspace_folder_finds_the_project_compose_made() {
    let mut t = Test::new();
    t.workspace = t.root().join("My.App");
    std::fs::create_dir_all(&t.workspace).unwrap();
    project(&t, &format!("{APP}{DB}"), CONFIG);
    let (_, up) = t.up(&[]);
    let name = up["container"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("yolo-my.app-"), "{name}");
    let compose_name = name.replace('.', "");

    // Compose's own name for the project, and its default network, which the guard is on.
    let db = inspect(&service_container(&t, "db"));
    assert_eq!(
        db["Config"]["Labels"]["com.docker.compose.project"], compose_name,
        "{}",
        db["Config"]["Labels"]
    );
    let default = format!("{compose_name}_default");
    assert!(
        db["NetworkSettings"]["Networks"].get(&default).is_some(),
        "{}",
        db["NetworkSettings"]["Networks"]
    );
    let guard = inspect(&net::guard_of(&t));
    assert!(
        guard["NetworkSettings"]["Networks"].get(&default).is_some(),
        "the guard joins {default}: {}",
        guard["NetworkSettings"]["Networks"]
    );
    assert_eq!(reach_db(&t), "hello from db\n");

    t.yolo(&["down", "--remove"]).ok();
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    assert_eq!(t.project_networks().trim(), "", "networks left");
    // (`yolo status` lists every workspace's: other tests' may be there.)
    t.yolo(&["status"])
        .ok()
        .assert_stdout_lacks(&compose_name)
        .assert_stdout_lacks(&name);
}

/// The reference CLI's `compose-Dockerfile-without-features`: a non-root dev service built by
/// Compose whose hook writes a file directly in `/` through sudo. The dev service's `/proc` is
/// read-only as a single container's is (yolo makes Compose's container again with it), so
/// the shim needs no Landlock there and the write works; the agent still cannot open another
/// process's memory for writing; a second `up` keeps the container.
#[test]
fn a_dev_services_proc_is_read_only_so_a_hooks_sudo_may_write_at_the_top() {
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        &format!(
            "FROM {BASE_IMAGE}\nLABEL yolo.test={}\nRUN useradd --create-home --uid 1000 dev\n",
            t.id
        ),
    );
    let config = r#"{
        "dockerComposeFile": "compose.yml",
        "service": "app",
        "workspaceFolder": "/workspaces/repo",
        "remoteUser": "dev",
        "postCreateCommand": "echo top | sudo tee /postCreateCommand.txt"
    }"#;
    project(&t, &format!("{BUILT_APP}{DB}"), config);
    t.up(&[]);
    let id = t
        .yolo(&["exec", "--", "cat", "/postCreateCommand.txt"])
        .ok();
    assert_eq!(id.stdout(), "top\n");
    t.yolo(&[
        "exec",
        "--",
        "sh",
        "-c",
        "grep -c ' /proc proc ro' /proc/mounts",
    ])
    .ok()
    .assert_stdout("1\n");
    t.yolo(&["exec", "--", "sh", "-c", "exec 3>/proc/1/mem"])
        .fails_with(2);
    let before = t.containers();
    t.up(&[]);
    assert_eq!(t.containers(), before);
    assert!(reach_db(&t).contains("hello from db"));
}
