//! `resolve` end to end: local Features on disk, OCI Features from a real registry (Debian's
//! `docker-registry`, started on 127.0.0.1 by `tests/support/registry.rs`), tarballs from a
//! small HTTP server on loopback.

use super::*;
use serde_json::json;
use std::sync::Mutex;

// Shared with the integration tests, which use all of it; these use part.
#[allow(dead_code)]
#[path = "../../../tests/support/registry.rs"]
mod registry;

/// A repository with a `.devcontainer/devcontainer.json` and a cache dir.
pub(super) struct Repo {
    pub(super) root: tempfile::TempDir,
    pub(super) cache: tempfile::TempDir,
}

impl Repo {
    pub(super) fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join(".devcontainer")).unwrap();
        std::fs::write(root.path().join(".devcontainer/devcontainer.json"), "{}").unwrap();
        Repo {
            root,
            cache: tempfile::tempdir().unwrap(),
        }
    }

    pub(super) fn config(&self) -> PathBuf {
        self.root.path().join(".devcontainer/devcontainer.json")
    }

    pub(super) fn lock_path(&self) -> PathBuf {
        self.root
            .path()
            .join(".devcontainer/devcontainer-lock.json")
    }

    /// A Feature folder `.devcontainer/<name>` with this devcontainer-feature.json.
    pub(super) fn feature(&self, name: &str, json: Value) -> PathBuf {
        let dir = self.root.path().join(".devcontainer").join(name);
        write_feature(&dir, json);
        dir
    }

    pub(super) async fn resolve(&self, features: Value) -> Result<Resolution> {
        self.resolve_with(features, &[], LockMode::Update, None)
            .await
    }

    pub(super) async fn resolve_with(
        &self,
        features: Value,
        override_order: &[String],
        lock: LockMode,
        docker_config: Option<&Path>,
    ) -> Result<Resolution> {
        self.resolve_local(
            features,
            override_order,
            lock,
            docker_config,
            LocalSources::Any,
        )
        .await
    }

    pub(super) async fn resolve_local(
        &self,
        features: Value,
        override_order: &[String],
        lock: LockMode,
        docker_config: Option<&Path>,
        local: LocalSources,
    ) -> Result<Resolution> {
        let config = self.config();
        let request = Request {
            config_file: &config,
            features: &features,
            override_order,
            cache_dir: self.cache.path(),
            lock,
            docker_config,
            local,
        };
        let lines = Mutex::new(Vec::new());
        let result = resolve(&request, &|line| {
            lines.lock().unwrap().push(line.to_string())
        })
        .await;
        eprintln!("progress: {:#?}", lines.lock().unwrap());
        result
    }
}

pub(super) fn write_feature(dir: &Path, json: Value) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("devcontainer-feature.json"), json.to_string()).unwrap();
    std::fs::write(dir.join("install.sh"), "#!/bin/sh\necho installing\n").unwrap();
}

fn keys(resolution: &Resolution) -> Vec<&str> {
    resolution.features.iter().map(|f| f.key.as_str()).collect()
}

fn message(error: Error) -> String {
    error.to_string()
}

#[tokio::test]
async fn local_features_resolve_in_order_with_options() {
    let repo = Repo::new();
    let a = repo.feature(
        "a",
        json!({
            "id": "a", "version": "1.0.0",
            "options": {"flavor": {"type": "string", "default": "plain"},
                        "with-extras": {"type": "boolean", "default": false}},
            "dependsOn": {"./b": {"level": "3"}},
            "containerEnv": {"A_HOME": "/opt/a"},
            "capAdd": ["SYS_PTRACE"]
        }),
    );
    repo.feature(
        "b",
        json!({"id": "b", "version": "2.0.0", "options": {"level": {"type": "string", "default": "1"}}}),
    );
    let c = repo.feature("c", json!({"id": "c", "installsAfter": ["./a"]}));
    let r = repo
        .resolve(json!({"./c": {}, "./a": {"flavor": "spicy"}}))
        .await
        .unwrap();
    assert_eq!(keys(&r), vec!["./b", "./a", "./c"]);
    let (fa, fb) = (&r.features[1], &r.features[0]);
    assert_eq!(fa.id, "a");
    assert_eq!(fa.version, "1.0.0");
    assert_eq!(
        fa.env,
        BTreeMap::from([
            ("FLAVOR".to_string(), "spicy".to_string()),
            ("WITH_EXTRAS".to_string(), "false".to_string())
        ])
    );
    assert_eq!(fb.env["LEVEL"], "3", "dependsOn options apply");
    assert_eq!(fa.metadata.id.as_deref(), Some("./a"));
    assert_eq!(fa.metadata.container_env["A_HOME"], "/opt/a");
    assert_eq!(fa.metadata.cap_add, vec!["SYS_PTRACE"]);
    // A copy in the cache, named by content.
    assert!(
        fa.dir.starts_with(repo.cache.path()),
        "{}",
        fa.dir.display()
    );
    assert!(fa.dir.join("install.sh").is_file());
    assert_eq!(fa.digest, cache::digest_dir(&a).unwrap());
    assert!(
        r.local_dirs.contains(&a) && r.local_dirs.contains(&c),
        "{:?}",
        r.local_dirs
    );
    assert!(r.fetches.is_empty());
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    // Local Features have no lock entries; the reference CLI still writes an empty lock file.
    assert_eq!(
        std::fs::read_to_string(repo.lock_path()).unwrap(),
        "{\n  \"features\": {}\n}\n"
    );
    assert_eq!(r.lock_written, Some(repo.lock_path()));
    let again = repo
        .resolve(json!({"./c": {}, "./a": {"flavor": "spicy"}}))
        .await
        .unwrap();
    assert_eq!(
        again.lock_written, None,
        "unchanged lock file is not rewritten"
    );
    assert_eq!(again.features, r.features);
}

#[tokio::test]
async fn override_order_and_dedupe() {
    let repo = Repo::new();
    for name in ["x", "y", "z"] {
        repo.feature(name, json!({"id": name}));
    }
    repo.feature("w", json!({"id": "w", "dependsOn": {"./x": {}}}));
    let r = repo
        .resolve_with(
            json!({"./x": {}, "./y": {}, "./z": true, "./w": {}}),
            &["./z".to_string(), "./y".to_string()],
            LockMode::Ignore,
            None,
        )
        .await
        .unwrap();
    // z and y first (in that order), x once though w depends on it too.
    assert_eq!(keys(&r), vec!["./z", "./y", "./x", "./w"]);
    assert!(
        !repo.lock_path().exists(),
        "LockMode::Ignore writes nothing"
    );
}

#[tokio::test]
async fn bad_local_features_are_clear_errors() {
    let repo = Repo::new();
    std::fs::create_dir_all(repo.root.path().join("outside")).unwrap();
    let err = message(repo.resolve(json!({"../outside": {}})).await.unwrap_err());
    assert!(
        err.contains("devcontainer.json") && err.contains("leads out"),
        "{err}"
    );

    std::os::unix::fs::symlink(
        repo.root.path().join("outside"),
        repo.root.path().join(".devcontainer/sneaky"),
    )
    .unwrap();
    let err = message(repo.resolve(json!({"./sneaky": {}})).await.unwrap_err());
    eprintln!("ERR: {err}");
    assert!(err.contains("symbolic link"), "{err}");

    let dir = repo.feature("nojson", json!({"id": "x"}));
    std::fs::remove_file(dir.join("devcontainer-feature.json")).unwrap();
    let err = message(repo.resolve(json!({"./nojson": {}})).await.unwrap_err());
    assert!(
        err.contains("\"./nojson\"") && err.contains("no devcontainer-feature.json"),
        "{err}"
    );

    let dir = repo.feature("badjson", json!({}));
    std::fs::write(dir.join("devcontainer-feature.json"), "{ nope").unwrap();
    let err = message(repo.resolve(json!({"./badjson": {}})).await.unwrap_err());
    assert!(
        err.contains("\"./badjson\"") && err.contains("not valid JSON"),
        "{err}"
    );

    repo.feature("noid", json!({"version": "1"}));
    let err = message(repo.resolve(json!({"./noid": {}})).await.unwrap_err());
    eprintln!("ERR: {err}");
    assert!(err.contains("\"id\""), "{err}");

    let dir = repo.feature("noinstall", json!({"id": "noinstall"}));
    std::fs::remove_file(dir.join("install.sh")).unwrap();
    let err = message(repo.resolve(json!({"./noinstall": {}})).await.unwrap_err());
    eprintln!("ERR: {err}");
    assert!(err.contains("no install.sh"), "{err}");

    repo.feature("p", json!({"id": "p", "dependsOn": {"./q": {}}}));
    repo.feature("q", json!({"id": "q", "dependsOn": {"./p": {}}}));
    let err = message(repo.resolve(json!({"./p": {}})).await.unwrap_err());
    assert!(
        err.contains("cycle") && err.contains("./p") && err.contains("./q"),
        "{err}"
    );

    let err = message(repo.resolve(json!({"fish": {}})).await.unwrap_err());
    eprintln!("ERR: {err}");
    assert!(err.contains("legacy"), "{err}");
    let err = message(repo.resolve(json!(["./p"])).await.unwrap_err());
    eprintln!("ERR: {err}");
    assert!(err.contains("must be an object"), "{err}");
    let err = message(
        repo.resolve_with(json!({"./q": {}}), &["/abs".into()], LockMode::Ignore, None)
            .await
            .unwrap_err(),
    );
    eprintln!("ERR: {err}");
    assert!(err.contains("overrideFeatureInstallOrder"), "{err}");
}

#[tokio::test]
async fn unknown_options_warn() {
    let repo = Repo::new();
    repo.feature(
        "o",
        json!({"id": "o", "options": {"version": {"type": "string", "default": "1"}}}),
    );
    let r = repo
        .resolve(json!({"./o": {"verison": "2"}}))
        .await
        .unwrap();
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("Feature \"./o\"") && r.warnings[0].contains("verison"));
    let r = repo.resolve(json!({"./o": "3"})).await.unwrap();
    assert_eq!(r.features[0].env["VERSION"], "3");
}

/// `up` may run resolution on any runtime thread.
#[test]
fn resolve_is_send() {
    fn send<T: Send>(_: T) {}
    let config = PathBuf::from("/x/.devcontainer/devcontainer.json");
    let request = Request {
        config_file: &config,
        features: &Value::Null,
        override_order: &[],
        cache_dir: &config,
        lock: LockMode::Ignore,
        docker_config: None,
        local: LocalSources::Any,
    };
    send(resolve(&request, &|_| {}));
}

#[tokio::test]
async fn false_means_not_installed() {
    let repo = Repo::new();
    repo.feature("on", json!({"id": "on"}));
    repo.feature("off", json!({"id": "off"}));
    let r = repo
        .resolve(json!({"./on": true, "./off": false}))
        .await
        .unwrap();
    assert_eq!(keys(&r), vec!["./on"]);
}

#[tokio::test]
async fn no_features_is_nothing() {
    let repo = Repo::new();
    let r = repo.resolve(Value::Null).await.unwrap();
    assert!(r.features.is_empty());
    let r = repo.resolve(json!({})).await.unwrap();
    assert!(r.features.is_empty());
    assert!(!repo.lock_path().exists());
}

/// A Feature folder outside any repository, to publish.
fn published_feature(json: Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_feature(dir.path(), json);
    dir
}

#[tokio::test]
async fn oci_features_are_fetched_verified_cached_and_locked() {
    let mut registry = registry::Registry::start();
    let hello = published_feature(json!({"id": "hello", "version": "1.0.0",
               "options": {"greeting": {"type": "string", "default": "hi"}},
               "dependsOn": {}, "privileged": true}));
    let published = registry.publish(hello.path(), "hello", &["1", "1.0.0", "latest"]);
    let base = published_feature(json!({"id": "base", "version": "2.1.0"}));
    let base_pub = registry.publish(base.path(), "base", &["2"]);
    // `top` depends on base:2 and is installed after hello.
    let top = published_feature(json!({"id": "top", "version": "0.1.0",
               "dependsOn": {base_pub.reference("2"): {}},
               "installsAfter": [published.repository.clone()]}));
    let top_pub = registry.publish(top.path(), "top", &["1"]);

    let repo = Repo::new();
    let features = json!({
        top_pub.reference("1"): {},
        published.reference("1"): "ignored-no-version-option",
    });
    let r = repo.resolve(features.clone()).await.unwrap();
    assert_eq!(
        keys(&r),
        vec![
            base_pub.reference("2"),
            published.reference("1"),
            top_pub.reference("1")
        ],
        "{}",
        registry.log()
    );
    let h = &r.features[1];
    assert_eq!(h.id, "hello");
    assert_eq!(h.version, "1.0.0");
    assert_eq!(h.digest, published.manifest_digest);
    assert_eq!(
        h.env,
        BTreeMap::from([("GREETING".to_string(), "hi".to_string())])
    );
    assert_eq!(h.metadata.privileged, Some(true));
    assert_eq!(
        h.metadata.id.as_deref(),
        Some(published.reference("1").as_str())
    );
    assert_eq!(
        std::fs::read_to_string(h.dir.join("install.sh")).unwrap(),
        "#!/bin/sh\necho installing\n"
    );
    assert!(h.dir.starts_with(repo.cache.path()));
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    // One fetch event per Feature, from the network.
    assert_eq!(r.fetches.len(), 3);
    assert!(
        r.fetches.iter().all(|f| !f.from_cache && f.bytes > 0),
        "{:?}",
        r.fetches
    );
    let fetch = r
        .fetches
        .iter()
        .find(|f| f.reference == published.reference("1"))
        .unwrap();
    assert_eq!(fetch.digest, published.manifest_digest);

    // The lock file, as the reference CLI writes it.
    let lock_text = std::fs::read_to_string(repo.lock_path()).unwrap();
    let expected = format!(
        r#"{{
  "features": {{
    "{base}": {{
      "version": "2.1.0",
      "resolved": "{base_repo}@{base_digest}",
      "integrity": "{base_digest}"
    }},
    "{hello}": {{
      "version": "1.0.0",
      "resolved": "{hello_repo}@{hello_digest}",
      "integrity": "{hello_digest}"
    }},
    "{top}": {{
      "version": "0.1.0",
      "resolved": "{top_repo}@{top_digest}",
      "integrity": "{top_digest}",
      "dependsOn": [
        "{base}"
      ]
    }}
  }}
}}
"#,
        base = base_pub.reference("2"),
        base_repo = base_pub.repository,
        base_digest = base_pub.manifest_digest,
        hello = published.reference("1"),
        hello_repo = published.repository,
        hello_digest = published.manifest_digest,
        top = top_pub.reference("1"),
        top_repo = top_pub.repository,
        top_digest = top_pub.manifest_digest,
    );
    assert_eq!(lock_text, expected);

    // Pinned by the lock file and cached: no network. Stop the registry and resolve again.
    registry.stop();
    let again = repo.resolve(features.clone()).await.unwrap();
    assert_eq!(again.features, r.features);
    assert!(
        again.fetches.iter().all(|f| f.from_cache && f.bytes == 0),
        "{:?}",
        again.fetches
    );
    assert_eq!(again.lock_written, None);
    // Frozen: the lock file matches, so it passes.
    repo.resolve_with(features.clone(), &[], LockMode::Frozen, None)
        .await
        .unwrap();

    // Without the lock file a tag must be asked for: the stopped registry is an error that
    // says so.
    std::fs::remove_file(repo.lock_path()).unwrap();
    let err = repo.resolve(features).await.unwrap_err();
    assert_eq!(err.code(), 69, "{err}");
    let err = err.to_string();
    eprintln!("ERR: {err}");
    assert!(err.contains("cannot reach the registry"), "{err}");
    assert!(!repo.lock_path().exists(), "nothing half-made");
}

#[tokio::test]
async fn pinned_digests_are_enforced() {
    let registry = registry::Registry::start();
    let dir = published_feature(json!({"id": "pinned", "version": "1.0.0"}));
    let published = registry.publish(dir.path(), "pinned", &["1"]);
    let repo = Repo::new();
    // A reference pinned by digest.
    let by_digest = format!("{}@{}", published.repository, published.manifest_digest);
    let r = repo.resolve(json!({by_digest.clone(): {}})).await.unwrap();
    assert_eq!(r.features[0].digest, published.manifest_digest);

    // A lock file pinning another digest than the tag's: refused, named.
    let other = format!("sha256:{}", "0".repeat(64));
    let lock = json!({"features": {published.reference("1"): {
        "version": "1.0.0",
        "resolved": format!("{}@{other}", published.repository),
        "integrity": other
    }}});
    std::fs::write(repo.lock_path(), lock.to_string()).unwrap();
    let err = repo
        .resolve(json!({published.reference("1"): {}}))
        .await
        .unwrap_err()
        .to_string();
    eprintln!("ERR: {err}");
    assert!(err.contains(&published.reference("1")), "{err}");
    eprintln!("ERR: {err}");
    assert!(
        err.contains("has no manifest sha256:000") && err.contains("delete its"),
        "{err}"
    );
}

#[tokio::test]
async fn corrupted_content_is_refused() {
    let registry = registry::Registry::start();
    let dir = published_feature(json!({"id": "bad", "version": "1.0.0"}));
    let published = registry.publish(dir.path(), "bad", &["1"]);
    registry.corrupt_blob(&published.layer_digest);
    let repo = Repo::new();
    let err = repo
        .resolve(json!({published.reference("1"): {}}))
        .await
        .unwrap_err();
    let text = err.to_string();
    eprintln!("ERR: {text}");
    assert!(text.contains("does not match its digest"), "{text}");
    eprintln!("ERR: {text}");
    assert!(text.contains(&published.reference("1")), "{text}");
    // Nothing of it in the cache.
    let hex = published.layer_digest.strip_prefix("sha256:").unwrap();
    assert!(!repo.cache.path().join("features").join(hex).exists());

    // A manifest that does not match its digest (served by tag, checked against the
    // registry's digest header; served by digest, against the digest asked for).
    let dir = published_feature(json!({"id": "badm", "version": "1.0.0"}));
    let published = registry.publish(dir.path(), "badm", &["1"]);
    registry.corrupt_blob(&published.manifest_digest);
    let by_digest = format!("{}@{}", published.repository, published.manifest_digest);
    let err = repo
        .resolve(json!({by_digest: {}}))
        .await
        .unwrap_err()
        .to_string();
    eprintln!("ERR: {err}");
    assert!(
        err.contains("digest") || err.contains("Digest") || err.contains("manifest"),
        "{err}"
    );
}

#[tokio::test]
async fn registry_credentials_come_from_the_docker_config() {
    let registry = registry::Registry::start_with_auth("yolo", "s3cret");
    let dir = published_feature(json!({"id": "private", "version": "1.0.0"}));
    let published = registry.publish(dir.path(), "private", &["1"]);
    let repo = Repo::new();
    let features = json!({published.reference("1"): {}});
    // No credentials: refused, with what to do.
    let empty = tempfile::tempdir().unwrap();
    let err = repo
        .resolve_with(features.clone(), &[], LockMode::Ignore, Some(empty.path()))
        .await
        .unwrap_err()
        .to_string();
    eprintln!("ERR: {err}");
    assert!(err.contains("docker login"), "{err}");
    // With them (auths, base64), fetched.
    let docker = tempfile::tempdir().unwrap();
    let config = registry.docker_config(docker.path());
    let r = repo
        .resolve_with(features, &[], LockMode::Ignore, Some(&config))
        .await
        .unwrap();
    assert_eq!(r.features[0].digest, published.manifest_digest);
}

#[tokio::test]
async fn tarball_features_are_fetched_over_loopback_and_pinned() {
    let dir = published_feature(json!({"id": "tarred", "version": "3.0.0",
        "options": {"version": {"type": "string", "default": "x"}}}));
    let tgz = registry::gzip(&registry::tar_folder(dir.path()));
    let digest = registry::sha256(&tgz);
    let server = registry::FileServer::start(std::collections::HashMap::from([(
        "/f/devcontainer-feature-tarred.tgz".to_string(),
        tgz,
    )]));
    let url = server.url("/f/devcontainer-feature-tarred.tgz");
    let repo = Repo::new();
    let r = repo.resolve(json!({url.clone(): "7"})).await.unwrap();
    let f = &r.features[0];
    assert_eq!(
        (f.id.as_str(), f.digest.as_str()),
        ("tarred", digest.as_str())
    );
    assert_eq!(f.env["VERSION"], "7");
    assert!(f.dir.join("install.sh").is_file());
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.lock_path()).unwrap()).unwrap();
    assert_eq!(lock["features"][&url]["resolved"], url);
    assert_eq!(lock["features"][&url]["integrity"], digest);
    // Pinned and cached: the server is not asked again.
    let hits = server.hits();
    let again = repo.resolve(json!({url.clone(): "7"})).await.unwrap();
    assert_eq!(again.features, r.features);
    assert_eq!(server.hits(), hits);
    assert!(again.fetches[0].from_cache);
    // A pin that does not match what the server sends: refused.
    let other = Repo::new();
    let wrong = format!("sha256:{}", "1".repeat(64));
    std::fs::write(
        other.lock_path(),
        json!({"features": {url.clone(): {"version": "3.0.0", "resolved": url, "integrity": wrong}}})
            .to_string(),
    )
    .unwrap();
    let err = other
        .resolve(json!({url.clone(): {}}))
        .await
        .unwrap_err()
        .to_string();
    eprintln!("ERR: {err}");
    assert!(err.contains("pins") && err.contains(&wrong), "{err}");
    // 404: named.
    let missing = server.url("/f/devcontainer-feature-missing.tgz");
    let err = other
        .resolve(json!({missing: {}}))
        .await
        .unwrap_err()
        .to_string();
    eprintln!("ERR: {err}");
    assert!(err.contains("404"), "{err}");
}

/// The installsAfter graph of real Features (devcontainers/features: common-utils, git, node,
/// docker-in-docker, github-cli), published to a registry and listed in another order: the
/// reference CLI's order, with and without an override.
#[tokio::test]
async fn real_feature_set_orders_as_the_reference_cli() {
    let registry = registry::Registry::start();
    let ns = format!("{}/{}", registry.host, registry::NAMESPACE);
    let cu = format!("{ns}/common-utils");
    let git = format!("{ns}/git");
    let sets: &[(&str, Vec<String>)] = &[
        ("common-utils", vec![]),
        ("git", vec![cu.clone()]),
        ("node", vec![cu.clone()]),
        ("docker-in-docker", vec![cu.clone()]),
        ("github-cli", vec![cu.clone(), git.clone()]),
    ];
    let mut folders = Vec::new();
    for (id, after) in sets {
        let dir = published_feature(json!({"id": id, "version": "1.0.0", "installsAfter": after,
                   "options": {"version": {"type": "string", "default": "latest"}}}));
        registry.publish(dir.path(), id, &["1"]);
        folders.push(dir);
    }
    let repo = Repo::new();
    let features = json!({
        format!("{ns}/github-cli:1"): {},
        format!("{ns}/node:1"): "18",
        format!("{ns}/docker-in-docker:1"): {},
        format!("{ns}/git:1"): {},
        format!("{ns}/common-utils:1"): {},
    });
    let r = repo.resolve(features.clone()).await.unwrap();
    let expected: Vec<String> = [
        "common-utils",
        "docker-in-docker",
        "git",
        "node",
        "github-cli",
    ]
    .iter()
    .map(|id| format!("{ns}/{id}:1"))
    .collect();
    assert_eq!(keys(&r), expected);
    assert_eq!(r.features[3].env["VERSION"], "18");
    assert_eq!(r.features[0].env["VERSION"], "latest");

    let r = repo
        .resolve_with(features, &[format!("{ns}/node")], LockMode::Update, None)
        .await
        .unwrap();
    let expected: Vec<String> = [
        "common-utils",
        "node",
        "docker-in-docker",
        "git",
        "github-cli",
    ]
    .iter()
    .map(|id| format!("{ns}/{id}:1"))
    .collect();
    assert_eq!(keys(&r), expected);
}

/// `credsStore` and `credHelpers`: yolo runs `docker-credential-<name> get` from PATH. PATH is
/// process-wide, so the resolution runs in a child test process (`credential_helper_child`)
/// whose PATH holds a fake helper; the registry wants the credentials only it knows.
#[test]
fn credential_helpers_are_asked() {
    let registry = registry::Registry::start_with_auth("helper-user", "helper-secret");
    let dir = published_feature(json!({"id": "helped", "version": "1.0.0"}));
    let published = registry.publish(dir.path(), "helped", &["1"]);
    let bin = tempfile::tempdir().unwrap();
    let helper = bin.path().join("docker-credential-yolotest");
    std::fs::write(
        &helper,
        "#!/bin/sh\n[ \"$1\" = get ] || exit 1\nread server\n\
         printf '{\"ServerURL\":\"%s\",\"Username\":\"helper-user\",\"Secret\":\"helper-secret\"}' \"$server\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for config in [
        json!({"credsStore": "yolotest"}),
        json!({"credHelpers": {registry.host.clone(): "yolotest"}}),
    ] {
        let docker = tempfile::tempdir().unwrap();
        std::fs::write(docker.path().join("config.json"), config.to_string()).unwrap();
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "devcontainer::features::tests::credential_helper_child",
                "--nocapture",
            ])
            .env("PATH", &path)
            .env("YOLO_TEST_FEATURE", published.reference("1"))
            .env("YOLO_TEST_DIGEST", &published.manifest_digest)
            .env("YOLO_TEST_DOCKER_CONFIG", docker.path())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "{config}: {text}");
        assert!(text.contains("1 passed"), "{config}: {text}");
    }
}

#[test]
#[ignore = "run by credential_helpers_are_asked, with its PATH"]
fn credential_helper_child() {
    let (Ok(feature), Ok(digest), Ok(docker)) = (
        std::env::var("YOLO_TEST_FEATURE"),
        std::env::var("YOLO_TEST_DIGEST"),
        std::env::var("YOLO_TEST_DOCKER_CONFIG"),
    ) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let repo = Repo::new();
    let r = runtime
        .block_on(repo.resolve_with(
            json!({feature: {}}),
            &[],
            LockMode::Ignore,
            Some(Path::new(&docker)),
        ))
        .unwrap();
    assert_eq!(r.features[0].digest, digest);
}

/// The token flow registries use (401 with `WWW-Authenticate: Bearer realm=...`, credentials
/// traded for a signed token at the realm), against docker-registry's own token auth.
#[tokio::test]
async fn registry_token_auth() {
    let registry = registry::Registry::start_with_token_auth("tok-user", "tok-secret");
    let dir = published_feature(json!({"id": "tokened", "version": "1.0.0"}));
    let published = registry.publish(dir.path(), "tokened", &["1"]);
    let repo = Repo::new();
    let features = json!({published.reference("1"): {}});
    let empty = tempfile::tempdir().unwrap();
    let err = repo
        .resolve_with(features.clone(), &[], LockMode::Ignore, Some(empty.path()))
        .await
        .unwrap_err()
        .to_string();
    eprintln!("ERR: {err}");
    assert!(err.contains("docker login"), "{err}");
    let docker = tempfile::tempdir().unwrap();
    let config = registry.docker_config(docker.path());
    let r = repo
        .resolve_with(features, &[], LockMode::Ignore, Some(&config))
        .await
        .unwrap();
    assert_eq!(r.features[0].digest, published.manifest_digest);
}

#[tokio::test]
async fn features_on_local_hosts_need_the_users_leave_also_through_a_redirect() {
    let dir = published_feature(json!({"id": "tarred", "version": "1.0.0"}));
    let tgz = registry::gzip(&registry::tar_folder(dir.path()));
    let inner = registry::FileServer::start(std::collections::HashMap::from([(
        "/devcontainer-feature-tarred.tgz".to_string(),
        tgz,
    )]));
    let target = inner.url("/devcontainer-feature-tarred.tgz");
    let outer = registry::FileServer::start(std::collections::HashMap::from([(
        "/devcontainer-feature-tarred.tgz".to_string(),
        format!("REDIRECT:{target}").into_bytes(),
    )]));
    let url = outer.url("/devcontainer-feature-tarred.tgz");
    let repo = Repo::new();
    let local = |hosts: &[&str]| LocalSources::Only(hosts.iter().map(|h| h.to_string()).collect());
    // Not allowed at all: refused before any request.
    let err = repo
        .resolve_local(
            json!({url.clone(): {}}),
            &[],
            LockMode::Update,
            None,
            LocalSources::None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), 77, "{err}");
    assert!(
        err.to_string()
            .contains(&format!("--grant local-features={}", outer.addr)),
        "{err}"
    );
    assert_eq!(outer.hits(), 0);
    // The first host allowed, the one it redirects to not: refused at the redirect.
    let err = repo
        .resolve_local(
            json!({url.clone(): {}}),
            &[],
            LockMode::Update,
            None,
            local(&[&outer.addr]),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("redirects to") && err.contains(&inner.addr),
        "{err}"
    );
    assert_eq!(inner.hits(), 0);
    // Both allowed: fetched through the redirect.
    let ok = repo
        .resolve_local(
            json!({url: {}}),
            &[],
            LockMode::Update,
            None,
            local(&[&outer.addr, &inner.addr]),
        )
        .await
        .unwrap();
    assert_eq!(ok.features[0].id, "tarred");
}

#[tokio::test]
async fn a_config_cannot_make_the_host_resolve_features_without_end() {
    // A chain of local Features, each depending on the next: past the bound, a clear error
    // instead of fetching (for OCI references: downloading) one after another.
    let repo = Repo::new();
    let count = super::MAX_FEATURES + 5;
    for i in 0..count {
        let depends = if i + 1 < count {
            json!({format!("./f{}", i + 1): {}})
        } else {
            json!({})
        };
        repo.feature(
            &format!("f{i}"),
            json!({"id": format!("f{i}"), "version": "1.0.0", "dependsOn": depends}),
        );
    }
    let err = message(repo.resolve(json!({"./f0": {}})).await.unwrap_err());
    assert!(err.contains("more than 60 Features"), "{err}");
    // Many at once in the config itself, too.
    let many: serde_json::Map<String, Value> =
        (0..count).map(|i| (format!("./f{i}"), json!({}))).collect();
    let err = message(repo.resolve(Value::Object(many)).await.unwrap_err());
    assert!(err.contains("more than 60 Features"), "{err}");
}
