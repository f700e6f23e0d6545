//! Red team of what a repository controls since Features, image metadata and Compose: each test
//! is an attack by the repository (or an image it names) that must fail; it fails itself if the
//! attack works.

use crate::support::*;

fn plain_feature(t: &Test) {
    t.feature("plain", r#"{"id": "plain", "version": "1.0.0"}"#, "true");
}

#[test]
fn a_remote_user_cannot_add_lines_to_the_features_dockerfile() {
    // The remote user is written into the Features' Dockerfile (the RUN that finds its home):
    // a newline in it would end that RUN and start an ADD the daemon fetches on the host.
    let t = Test::new();
    let (port, hits) = host_loopback_server("host-only secret");
    plain_feature(&t);
    let user = format!("root\nADD http://127.0.0.1:{port}/secret /stolen\nRUN true");
    t.devcontainer(
        &serde_json::json!({
            "image": BASE_IMAGE,
            "remoteUser": user,
            "features": {"./plain": {}}
        })
        .to_string(),
    );
    t.yolo(&["up"])
        .fails_with(65)
        .assert_stderr_contains("remoteUser")
        .assert_stderr_contains("not a user name");
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    assert_eq!(t.images().trim(), "", "nothing was built");
}

#[test]
fn a_container_user_cannot_add_lines_to_the_features_dockerfile() {
    let t = Test::new();
    let (port, hits) = host_loopback_server("host-only secret");
    plain_feature(&t);
    let user = format!(
        "root' 2>/dev/null)\"\nADD http://127.0.0.1:{port}/secret /stolen\nRUN echo \"$( true"
    );
    t.devcontainer(
        &serde_json::json!({
            "image": BASE_IMAGE,
            "containerUser": user,
            "features": {"./plain": {}}
        })
        .to_string(),
    );
    t.yolo(&["up"])
        .fails_with(65)
        .assert_stderr_contains("containerUser")
        .assert_stderr_contains("not a user name");
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}

#[test]
fn an_onbuild_add_in_the_base_image_does_not_run_in_the_features_build() {
    // The repository names an image (here built locally; it could come from any registry) whose
    // ONBUILD trigger downloads a URL: the Features' build is FROM it, so the daemon would run
    // the trigger — the download — on the host's network, outside the build firewall.
    let t = Test::new();
    let (port, hits) = host_loopback_server("host-only secret");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Dockerfile"),
        format!(
            "FROM {BASE_IMAGE}\nLABEL {LABEL}={}\nONBUILD ADD http://127.0.0.1:{port}/secret /stolen\n",
            t.id
        ),
    )
    .unwrap();
    let image = format!("yolo-redteam-onbuild-{}", t.id);
    docker(&["build", "-q", "-t", &image, dir.path().to_str().unwrap()]);
    plain_feature(&t);
    t.devcontainer(&format!(
        r#"{{"image": "{image}", "features": {{"./plain": {{}}}}}}"#
    ));
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("ONBUILD triggers of")
        .assert_stderr_contains("ADD http://127.0.0.1:")
        .assert_stderr_contains("--grant remote-add");
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}

const COMPOSE_CONFIG: &str = r#"{
    "dockerComposeFile": "compose.yml",
    "service": "app",
    "workspaceFolder": "/workspaces/repo"
}"#;

/// A host folder outside the repository holding a secret, and a link to it planted in the
/// repository's `.devcontainer/` (as the agent could between two runs).
fn planted_link(t: &Test, name: &str) -> tempfile::TempDir {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "host-only secret\n").unwrap();
    std::os::unix::fs::symlink(
        outside.path(),
        std::path::Path::new(&t.workspace_shown())
            .join(".devcontainer")
            .join(name),
    )
    .unwrap();
    outside
}

fn compose_project(t: &Test, services: &str) {
    t.file(
        ".devcontainer/compose.yml",
        &format!("version: \"3.8\"\nservices:{services}"),
    );
    t.devcontainer(COMPOSE_CONFIG);
}

#[test]
fn a_compose_bind_through_a_link_in_the_repository_needs_host_mount() {
    // `./data` is in the repository by name; it is a link to a host folder, and Docker follows
    // it: the folder would be mounted into the dev service without a grant. Refused under
    // `requests = "refuse"`; by default the bind is declined, never written into the service
    // (compose::the_dev_services_capabilities_are_declined_and_never_reach_the_engine).
    let t = Test::new();
    t.user_config("[policy]\nrequests = \"refuse\"\n");
    compose_project(
        &t,
        r#"
  app:
    image: debian:bookworm-slim
    command: ["sleep", "infinity"]
    volumes:
      - ..:/workspaces/repo
      - ./data:/from-the-host
"#,
    );
    let outside = planted_link(&t, "data");
    let real = outside.path().canonicalize().unwrap();
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("service \"app\": volumes")
        .assert_stderr_contains(&real.display().to_string())
        .assert_stderr_contains("--grant host-mount");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}

#[test]
fn a_compose_bind_of_a_missing_folder_under_a_link_needs_host_mount() {
    // Docker creates a missing bind source: `./data/new` would be made (as root) in the host
    // folder the link leads to, and mounted.
    let t = Test::new();
    compose_project(
        &t,
        r#"
  app:
    image: debian:bookworm-slim
    command: ["sleep", "infinity"]
    volumes:
      - ..:/workspaces/repo
  db:
    image: debian:bookworm-slim
    command: ["sleep", "infinity"]
    volumes:
      - ./data/new:/planted
"#,
    );
    let outside = planted_link(&t, "data");
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("service \"db\": volumes")
        .assert_stderr_contains("--grant host-mount");
    assert!(
        !outside.path().join("new").exists(),
        "Docker made a host folder"
    );
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}

#[test]
fn a_compose_secret_file_through_a_link_needs_host_mount() {
    let t = Test::new();
    compose_project(
        &t,
        r#"
  app:
    image: debian:bookworm-slim
    command: ["sleep", "infinity"]
    volumes:
      - ..:/workspaces/repo
    secrets:
      - token
secrets:
  token:
    file: ./data/secret
"#,
    );
    let _outside = planted_link(&t, "data");
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("secrets \"token\": file")
        .assert_stderr_contains("--grant host-mount");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}

#[test]
fn a_compose_build_context_through_a_link_needs_host_mount() {
    // The whole context is sent to Docker: through a link, a host folder would be copied into
    // the image.
    let t = Test::new();
    compose_project(
        &t,
        r#"
  app:
    build:
      context: ./data
    command: ["sleep", "infinity"]
    volumes:
      - ..:/workspaces/repo
"#,
    );
    let outside = planted_link(&t, "data");
    std::fs::write(
        outside.path().join("Dockerfile"),
        format!(
            "FROM {BASE_IMAGE}\nLABEL {LABEL}={}\nCOPY secret /secret\n",
            t.id
        ),
    )
    .unwrap();
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("build.context")
        .assert_stderr_contains("--grant host-mount");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    assert_eq!(t.images().trim(), "", "nothing was built");
}

#[test]
fn a_sibling_cannot_join_the_dev_services_network_namespace() {
    // The dev service lives in the guard's network namespace, behind its firewall, with
    // NET_RAW dropped (a packet socket goes below the firewall's hooks). A sibling joining it
    // with `network_mode: service:app` would sit behind the same firewall with Docker's
    // default capabilities, NET_RAW among them.
    let t = Test::new();
    compose_project(
        &t,
        r#"
  app:
    image: debian:bookworm-slim
    command: ["sleep", "infinity"]
    volumes:
      - ..:/workspaces/repo
  sib:
    image: debian:bookworm-slim
    command: ["sleep", "infinity"]
    network_mode: "service:app"
"#,
    );
    // Held when written: yolo accepts the file and the sibling gets a namespace of its own
    // (on the project's internal network), not the dev service's. Refusing it would hold too.
    let run = t.yolo(&["up"]);
    if run.code() != 0 {
        run.fails_with(77)
            .assert_stderr_contains("service \"sib\": network_mode");
        return;
    }
    let sib = docker(&[
        "ps",
        "-q",
        "--filter",
        &format!("label={LABEL}={}", t.id),
        "--filter",
        "label=com.docker.compose.service=sib",
    ]);
    let sib_ns = docker(&["exec", sib.trim(), "readlink", "/proc/self/ns/net"]);
    let agent_ns = t
        .yolo(&["exec", "readlink", "/proc/self/ns/net"])
        .ok()
        .stdout();
    assert!(sib_ns.contains("net:["), "{sib_ns}");
    assert_ne!(
        sib_ns.trim(),
        agent_ns.trim(),
        "the sibling shares the guard's network namespace"
    );
}

/// A Compose project whose sibling `sib` is built from the repository's Dockerfile and named
/// `image`.
fn built_sibling(t: &Test, image: &str) {
    t.file(
        ".devcontainer/sib/Dockerfile",
        &format!("FROM {BASE_IMAGE}\nLABEL {LABEL}={}\n", t.id),
    );
    compose_project(
        t,
        &format!(
            r#"
  app:
    image: debian:bookworm-slim
    command: ["sleep", "infinity"]
    volumes:
      - ..:/workspaces/repo
  sib:
    build: ./sib
    image: "{image}"
    command: ["sleep", "infinity"]
"#
        ),
    );
}

#[test]
fn a_compose_build_cannot_take_the_name_of_yolos_guard_image() {
    // Compose tags what it builds with the service's `image`: named `yolo-guard:<version>-
    // <digest>` (public facts of a yolo release), the repository's image would be the firewall
    // of every later `up`. The tag here is the test's own, so a failure harms no other test.
    let t = Test::new();
    let name = format!("yolo-guard:redteam-{}", t.id);
    built_sibling(&t, &name);
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("service \"sib\": image")
        .assert_stderr_contains("yolo's own images");
    assert!(
        docker(&["images", "-q", &name]).trim().is_empty(),
        "the repository's build was tagged {name}"
    );
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}

#[test]
fn a_compose_build_cannot_take_the_name_of_the_guards_base_image() {
    // The guard image is built FROM `guard_base_image` (debian:bookworm-slim by default): a
    // build tagged with that name would be under the next guard. The user's base here is a
    // name of the test's own.
    let t = Test::new();
    let base = format!("redteam-base-{}:1", t.id);
    t.user_config(&format!("guard_base_image = \"{base}\"\n"));
    built_sibling(&t, &base);
    let run = t.yolo(&["up"]);
    let shown = run.describe();
    assert!(
        docker(&["images", "-q", &base]).trim().is_empty(),
        "the repository's build was tagged {base}: {shown}"
    );
    run.fails_with(77)
        .assert_stderr_contains("service \"sib\": image")
        .assert_stderr_contains("names for yolo's guard");
}

#[test]
fn a_siblings_image_labels_do_not_make_it_pass_for_the_dev_container() {
    // A container inherits its image's labels. The Compose file's own reserved labels are
    // dropped; an image the repository builds (or names) carries them too: a sibling with
    // `devcontainer.local_folder=<workspace>` from its image would be what VS Code's attach
    // picks, and `dev.yolo.role=agent` what yolo's own lookups take for the agent.
    let t = Test::new();
    let workspace = t.workspace_shown();
    t.file(
        ".devcontainer/sib/Dockerfile",
        &format!(
            "FROM {BASE_IMAGE}\nLABEL {LABEL}={} devcontainer.local_folder=\"{workspace}\" devcontainer.config_file=\"{workspace}/.devcontainer/devcontainer.json\" dev.yolo.role=agent dev.yolo.exec-audit=shim\n",
            t.id
        ),
    );
    compose_project(
        &t,
        r#"
  app:
    image: debian:bookworm-slim
    command: ["sleep", "infinity"]
    volumes:
      - ..:/workspaces/repo
  sib:
    build: ./sib
    command: ["sleep", "infinity"]
"#,
    );
    t.yolo(&["up"]).ok();
    let sib = docker(&[
        "ps",
        "-q",
        "--filter",
        &format!("label={LABEL}={}", t.id),
        "--filter",
        "label=com.docker.compose.service=sib",
    ]);
    let labels = inspect(sib.trim())["Config"]["Labels"].clone();
    let local = labels["devcontainer.local_folder"]
        .as_str()
        .unwrap_or_default();
    assert_ne!(local, workspace, "{labels}");
    assert_ne!(labels["dev.yolo.role"], "agent", "{labels}");
    assert_ne!(labels["dev.yolo.exec-audit"], "shim", "{labels}");
    // VS Code's attach looks the folder's container up by this label: only the agent.
    let found = docker(&[
        "ps",
        "-q",
        "--filter",
        &format!("label=devcontainer.local_folder={workspace}"),
    ]);
    assert_eq!(found.lines().count(), 1, "{found}");
    // The agent's own `yolo exec` still works (not taken for something else).
    t.yolo(&["exec", "true"]).ok();
}

#[test]
fn a_dotenv_in_the_compose_folder_cannot_point_compose_at_another_engine() {
    // Compose reads `.env` in the project folder (the repository's) and takes DOCKER_HOST from
    // it when yolo's environment has none: the host's Compose would connect wherever the
    // repository says (here a server on the host's loopback that counts connections).
    let t = Test::new();
    let (port, hits) = host_loopback_server("HTTP/1.1 nothing here");
    compose_project(
        &t,
        r#"
  app:
    image: debian:bookworm-slim
    command: ["sleep", "infinity"]
    volumes:
      - ..:/workspaces/repo
"#,
    );
    t.file(
        ".devcontainer/.env",
        &format!("TAG=1\nDOCKER_HOST=tcp://127.0.0.1:{port}\n"),
    );
    let run = t
        .command(&["up"])
        .env_remove("DOCKER_HOST")
        .env_remove("DOCKER_CONTEXT")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let run = Run { output: run };
    assert_eq!(
        hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "Compose connected where .env said: {}",
        run.describe()
    );
    run.fails_with(77)
        .assert_stderr_contains(".env")
        .assert_stderr_contains("DOCKER_HOST");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}

#[test]
fn a_compose_extends_cannot_bring_host_files_in() {
    // `extends` reads another Compose file: one in the repository whose `env_file` is a host
    // file (read by Compose, its lines become the container's environment, and the resolved
    // project no longer names the file), or a host Compose file whose service's environment
    // holds the user's secrets.
    let t = Test::new();
    let outside = tempfile::tempdir().unwrap();
    let secrets = outside.path().canonicalize().unwrap();
    std::fs::write(secrets.join("credentials.env"), "STOLEN=env-file-secret\n").unwrap();
    std::fs::write(
        secrets.join("other-project.yml"),
        "version: \"3.8\"\nservices:\n  web:\n    image: debian:bookworm-slim\n    environment:\n      - OTHER_SECRET=other-project-secret\n",
    )
    .unwrap();
    t.file(
        ".devcontainer/base.yml",
        &format!(
            "version: \"3.8\"\nservices:\n  base:\n    image: debian:bookworm-slim\n    env_file: {}\n",
            secrets.join("credentials.env").display()
        ),
    );
    compose_project(
        &t,
        r#"
  app:
    extends:
      file: base.yml
      service: base
    command: ["sleep", "infinity"]
    volumes:
      - ..:/workspaces/repo
"#,
    );
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("env_file")
        .assert_stderr_contains("--grant host-mount");
    assert!(t.containers().is_empty(), "{:?}", t.containers());

    // A host Compose file extended directly.
    compose_project(
        &t,
        &format!(
            r#"
  app:
    extends:
      file: {}
      service: web
    command: ["sleep", "infinity"]
    volumes:
      - ..:/workspaces/repo
"#,
            secrets.join("other-project.yml").display()
        ),
    );
    t.yolo(&["up", "--accept-config"])
        .fails_with(77)
        .assert_stderr_contains("extends.file")
        .assert_stderr_contains("--grant host-mount");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}
