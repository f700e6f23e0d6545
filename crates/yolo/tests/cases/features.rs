//! Dev Container Features: installed in a build of their own on top of the base image, behind
//! the build firewall, their requests checked by the policy before anything is built, their
//! entries on the image's `devcontainer.metadata` label.

use crate::support::net::*;
use crate::support::*;
use serde_json::Value;

/// The image of this test's agent container, and its labels.
fn agent_image(t: &Test) -> (String, Value) {
    let agent = t.agents().pop().expect("an agent container");
    let image = inspect(&agent)["Image"].as_str().unwrap().to_string();
    let labels = inspect(&image)["Config"]["Labels"].clone();
    (image, labels)
}

fn hello(t: &Test) {
    t.feature("hello",
        r#"{"id": "hello", "version": "1.0.0",
            "options": {"greeting": {"type": "string", "default": "hi"},
                        "who": {"type": "string", "default": "nobody"}},
            "containerEnv": {"HELLO_HOME": "/opt/hello", "PATH": "/opt/hello/bin:${PATH}"},
            "entrypoint": "/usr/local/share/hello-init.sh",
            "postCreateCommand": "echo feature >> /tmp/hook-order"}"#,
        r#"mkdir -p /opt/hello
echo "$GREETING $WHO user=$_REMOTE_USER home=$_REMOTE_USER_HOME container=$_CONTAINER_USER" > /opt/hello/said
printf '#!/bin/sh\necho started > /tmp/hello-init-ran\n' > /usr/local/share/hello-init.sh
chmod +x /usr/local/share/hello-init.sh"#,
    );
    t.devcontainer(&format!(
        r#"{{"image": "{BASE_IMAGE}", "features": {{"./hello": {{"who": "world"}}}},
            "postCreateCommand": "echo config >> /tmp/hook-order"}}"#
    ));
}

#[test]
fn a_local_feature_is_installed_with_its_options_env_and_entrypoint_and_labelled() {
    let t = Test::new();
    hello(&t);
    t.yolo(&["up"]).ok();

    let said = t.yolo(&["exec", "cat", "/opt/hello/said"]).ok().stdout();
    assert_eq!(said.trim(), "hi world user=root home=/root container=root");
    let env = t
        .yolo(&["exec", "sh", "-c", "echo $HELLO_HOME"])
        .ok()
        .stdout();
    assert_eq!(env.trim(), "/opt/hello");
    // `${PATH}` expands as the image's ENV.
    let path = t.yolo(&["exec", "sh", "-c", "echo $PATH"]).ok().stdout();
    assert!(
        path.starts_with("/opt/hello/bin:") && path.contains(":/usr/bin"),
        "{path}"
    );
    let init = t
        .yolo(&["exec", "cat", "/tmp/hello-init-ran"])
        .ok()
        .stdout();
    assert_eq!(
        init.trim(),
        "started",
        "the Feature's entrypoint did not run"
    );

    let (_, labels) = agent_image(&t);
    let metadata: Value =
        serde_json::from_str(labels["devcontainer.metadata"].as_str().unwrap()).unwrap();
    let entry = metadata
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == "./hello")
        .unwrap_or_else(|| panic!("no entry for the Feature: {metadata}"));
    assert_eq!(entry["entrypoint"], "/usr/local/share/hello-init.sh");
    // Its containerEnv is the image's ENV (as the reference CLI), not a label entry.
    assert!(entry.get("containerEnv").is_none(), "{entry}");
    let (image, _) = agent_image(&t);
    let env = inspect(&image)["Config"]["Env"].to_string();
    assert!(env.contains("HELLO_HOME=/opt/hello"), "{env}");

    let fetch = t
        .events()
        .into_iter()
        .find(|e| e["kind"] == "feature_fetch")
        .unwrap_or_else(|| panic!("no feature_fetch event: {:?}", t.events()));
    assert_eq!(fetch["reference"], "./hello");
    assert!(fetch["digest"].as_str().unwrap().starts_with("sha256:"));
    assert!(fetch["bytes"].as_u64().unwrap() > 0);
}

#[test]
fn a_second_up_with_unchanged_features_builds_nothing() {
    let t = Test::new();
    hello(&t);
    t.yolo(&["up"])
        .ok()
        .assert_stderr_contains("installed 1 Feature(s)");
    let (first, _) = agent_image(&t);
    t.yolo(&["down", "--remove"]).ok();
    assert!(t.agents().is_empty());
    t.yolo(&["up"])
        .ok()
        .assert_stderr_lacks("installed 1 Feature(s)");
    let (second, _) = agent_image(&t);
    assert_eq!(first, second, "the image with Features was built again");
    // A changed install script is a change of the container definition: shown and refused
    // until accepted, then a new build.
    t.yolo(&["down", "--remove"]).ok();
    t.file(
        ".devcontainer/hello/install.sh",
        "#!/bin/sh\nmkdir -p /opt/hello && echo changed > /opt/hello/said\n",
    );
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("hello/install.sh");
    t.yolo(&["up", "--accept-config"])
        .ok()
        .assert_stderr_contains("installed 1 Feature(s)");
    let said = t.yolo(&["exec", "cat", "/opt/hello/said"]).ok().stdout();
    assert_eq!(said.trim(), "changed");
}

#[test]
fn a_feature_asking_for_privileged_is_refused_unless_granted() {
    let t = Test::new();
    t.feature(
        "dind",
        r#"{"id": "dind", "privileged": true}"#,
        "touch /dind-installed",
    );
    t.devcontainer(&format!(
        r#"{{"image": "{BASE_IMAGE}", "features": {{"./dind": {{}}}}}}"#
    ));
    // Refused under `requests = "refuse"` (declined by default: policy::requests_without_a_grant_are_declined_and_never_reach_the_engine).
    t.user_config("[policy]\nrequests = \"refuse\"\n");
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains("Feature \"./dind\"")
        .assert_stderr_contains("--grant privileged");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    assert_eq!(
        t.images().trim(),
        "",
        "an image was built for a refused Feature"
    );

    // Granted, the policy lets it through and the Feature is installed. Some engines (this
    // one, inside a container) cannot start a privileged container at all: then the start
    // fails as Docker says, not as a refusal.
    let granted = t.yolo(&["up", "--grant", "privileged"]);
    granted.assert_stderr_contains("installed 1 Feature(s)");
    if granted.code() == 0 {
        let agent = t.agents().pop().unwrap();
        assert_eq!(inspect(&agent)["HostConfig"]["Privileged"], true);
        t.yolo(&["exec", "test", "-f", "/dind-installed"]).ok();
    } else {
        granted
            .fails_with(69)
            .assert_stderr_contains("starting container");
        assert!(t.containers().is_empty(), "{:?}", t.containers());
    }
}

#[test]
fn a_failing_install_names_the_feature_and_leaves_nothing_running() {
    let t = Test::new();
    t.feature(
        "broken",
        r#"{"id": "broken"}"#,
        "echo about to fail; exit 3",
    );
    t.devcontainer(&format!(
        r#"{{"image": "{BASE_IMAGE}", "features": {{"./broken": {{}}}}}}"#
    ));
    t.yolo(&["up"])
        .fails_with(69)
        .assert_stderr_contains("installing Feature \"./broken\"")
        .assert_stderr_contains("about to fail");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
}

#[test]
fn a_feature_install_reaches_only_allowlisted_names() {
    let t = Test::new();
    let net = Internet::new(&t);
    let fetch =
        |url: &str| format!("curl -sS --connect-timeout 5 --max-time 8 {url} || echo BLOCKED");
    t.feature(
        "fetcher",
        r#"{"id": "fetcher"}"#,
        &format!(
            "({}) > /allowed.txt 2>&1\n({}) > /denied.txt 2>&1",
            fetch("http://www.allowed.test/"),
            fetch("http://www.denied.test/")
        ),
    );
    t.devcontainer(&format!(
        r#"{{"image": "{AGENT_IMAGE}", "features": {{"./fetcher": {{}}}}}}"#
    ));
    t.user_config(&net.user_config(""));
    let mut flags = vec!["up".to_string()];
    flags.extend(net.up_flags(&["*.allowed.test"]));
    let refs: Vec<&str> = flags.iter().map(String::as_str).collect();
    t.yolo(&refs).ok();
    let allowed = t.yolo(&["exec", "cat", "/allowed.txt"]).ok().stdout();
    assert!(allowed.contains(&net.allowed.body), "{allowed}");
    let denied = t.yolo(&["exec", "cat", "/denied.txt"]).ok().stdout();
    assert!(denied.contains("BLOCKED"), "{denied}");
    assert!(!denied.contains(&net.denied.body), "{denied}");
    let refused = t
        .events()
        .into_iter()
        .find(|e| e["kind"] == "dns" && e["name"] == "www.denied.test")
        .unwrap_or_else(|| panic!("no dns event for the denied name: {:?}", t.events()));
    assert_eq!(refused["phase"], "build", "{refused}");
}

#[test]
fn with_network_none_a_feature_installs_offline() {
    let t = Test::new();
    ensure_image(AGENT_IMAGE, "agent.Dockerfile");
    t.feature(
        "probe",
        r#"{"id": "probe"}"#,
        "(ip -o link | grep -v ' lo:' | wc -l) > /links.txt",
    );
    t.devcontainer(&format!(
        r#"{{"image": "{AGENT_IMAGE}", "features": {{"./probe": {{}}}}}}"#
    ));
    t.yolo(&["up", "--network", "none"]).ok();
    let links = t.yolo(&["exec", "cat", "/links.txt"]).ok().stdout();
    assert_eq!(links.trim(), "0", "the install had a network interface");
}

#[test]
fn a_feature_from_an_oci_registry_is_installed_cached_and_not_built_again() {
    use crate::support::registry::Registry;
    let t = Test::new();
    let registry = Registry::start();
    let source = t.root().join("published/hello");
    std::fs::create_dir_all(&source).unwrap();
    std::fs::write(
        source.join("devcontainer-feature.json"),
        r#"{"id": "hello", "version": "1.0.0",
            "options": {"who": {"type": "string", "default": "nobody"}},
            "containerEnv": {"HELLO_FROM": "registry"}}"#,
    )
    .unwrap();
    std::fs::write(
        source.join("install.sh"),
        "#!/bin/sh\nset -e\necho \"hello $WHO\" > /hello-oci.txt\n",
    )
    .unwrap();
    let published = registry.publish(&source, "hello", &["1", "1.0.0", "latest"]);
    let reference = published.reference("1");
    t.devcontainer(&format!(
        r#"{{"image": "{BASE_IMAGE}", "features": {{"{reference}": {{"who": "oci"}}}}}}"#
    ));
    // A registry on this machine is a local address: the repository cannot make the host
    // fetch from one unless the user says so.
    let authority = reference.split('/').next().unwrap().to_string();
    t.yolo(&["up"])
        .fails_with(77)
        .assert_stderr_contains(&format!("--grant local-features={authority}"));
    assert!(t.events().iter().all(|e| e["kind"] != "feature_fetch"));
    t.user_config(&format!("grants = [\"local-features={authority}\"]\n"));
    t.yolo(&["up"])
        .ok()
        .assert_stderr_contains("installed 1 Feature(s)");
    let said = t.yolo(&["exec", "cat", "/hello-oci.txt"]).ok().stdout();
    assert_eq!(said.trim(), "hello oci");
    let env = t
        .yolo(&["exec", "sh", "-c", "echo $HELLO_FROM"])
        .ok()
        .stdout();
    assert_eq!(env.trim(), "registry");
    let (first, labels) = agent_image(&t);
    let metadata = labels["devcontainer.metadata"].as_str().unwrap();
    assert!(
        metadata.contains(&format!("\"id\":\"{reference}\"")),
        "{metadata}"
    );
    let fetches = |t: &Test| -> Vec<Value> {
        t.events()
            .into_iter()
            .filter(|e| e["kind"] == "feature_fetch")
            .collect()
    };
    let first_fetch = fetches(&t);
    assert_eq!(first_fetch.len(), 1, "{first_fetch:?}");
    assert_eq!(first_fetch[0]["reference"], reference.as_str());
    assert_eq!(first_fetch[0]["digest"], published.manifest_digest.as_str());
    assert_eq!(first_fetch[0]["cached"], false);
    assert!(first_fetch[0]["bytes"].as_u64().unwrap() > 0);
    assert!(t
        .workspace
        .join(".devcontainer/devcontainer-lock.json")
        .is_file());

    // Again, from the cache: nothing fetched, nothing built.
    t.yolo(&["down", "--remove"]).ok();
    t.yolo(&["up"])
        .ok()
        .assert_stderr_lacks("installed 1 Feature(s)");
    assert_eq!(agent_image(&t).0, first);
    let again = fetches(&t);
    assert_eq!(again.len(), 2, "{again:?}");
    assert_eq!(again[1]["cached"], true, "{again:?}");
}

#[test]
fn features_install_on_an_image_built_from_a_dockerfile_with_their_links_and_rebuild_installs_again(
) {
    let t = Test::new();
    t.file(
        ".devcontainer/Dockerfile",
        &format!("FROM {BASE_IMAGE}\nRUN echo base > /base.txt\n"),
    );
    // A link inside the Feature's folder is kept (as a link) in the build context.
    t.feature("stamp", r#"{"id": "stamp"}"#, "sh ./stamp-link.sh");
    t.file(
        ".devcontainer/stamp/lib/stamp.sh",
        "cat /base.txt > /stamp.txt; date +%s%N >> /stamp.txt\n",
    );
    std::os::unix::fs::symlink(
        "lib/stamp.sh",
        t.workspace.join(".devcontainer/stamp/stamp-link.sh"),
    )
    .unwrap();
    t.devcontainer(r#"{"build": {"dockerfile": "Dockerfile"}, "features": {"./stamp": {}}}"#);
    t.yolo(&["up"]).ok();
    let first = t.yolo(&["exec", "cat", "/stamp.txt"]).ok().stdout();
    assert!(first.starts_with("base\n"), "{first}");
    // --rebuild runs the install again (without Docker's cache).
    t.yolo(&["up", "--rebuild"])
        .ok()
        .assert_stderr_contains("installed 1 Feature(s)");
    let second = t.yolo(&["exec", "cat", "/stamp.txt"]).ok().stdout();
    assert!(second.starts_with("base\n"), "{second}");
    assert_ne!(first, second, "the install did not run again");
}

#[test]
fn a_feature_cannot_add_dockerfile_instructions_through_its_environment() {
    // Each containerEnv entry is an `ENV` line of the Features' Dockerfile: a name with a
    // newline would add an instruction (here an ADD that the daemon would fetch on the host).
    let t = Test::new();
    t.feature(
        "sneaky",
        r#"{"id": "sneaky", "containerEnv": {"A=\"1\"\nADD http://127.0.0.1:1/secret /x\nENV B": "2"}}"#,
        "true",
    );
    t.devcontainer(&format!(
        r#"{{"image": "{BASE_IMAGE}", "features": {{"./sneaky": {{}}}}}}"#
    ));
    t.yolo(&["up"])
        .fails_with(65)
        .assert_stderr_contains("is not a variable name");
    assert!(t.containers().is_empty(), "{:?}", t.containers());
    assert_eq!(t.images().trim(), "", "nothing was built");
}
