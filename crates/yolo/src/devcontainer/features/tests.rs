//! `resolve` end to end: local Features on disk, OCI Features from a real registry (Debian's
//! `docker-registry`, started on 127.0.0.1 by `tests/support/registry.rs`), tarballs from a
//! small HTTP server on loopback.

use super::*;
use serde_json::json;
use std::cell::RefCell;

// REGISTRY

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
        let config = self.config();
        let request = Request {
            config_file: &config,
            features: &features,
            override_order,
            cache_dir: self.cache.path(),
            lock,
            docker_config,
        };
        let lines = RefCell::new(Vec::new());
        let result = resolve(&request, &|line| lines.borrow_mut().push(line.to_string())).await;
        eprintln!("progress: {:#?}", lines.borrow());
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
    assert!(err.contains("\"id\""), "{err}");

    let dir = repo.feature("noinstall", json!({"id": "noinstall"}));
    std::fs::remove_file(dir.join("install.sh")).unwrap();
    let err = message(repo.resolve(json!({"./noinstall": {}})).await.unwrap_err());
    assert!(err.contains("no install.sh"), "{err}");

    repo.feature("p", json!({"id": "p", "dependsOn": {"./q": {}}}));
    repo.feature("q", json!({"id": "q", "dependsOn": {"./p": {}}}));
    let err = message(repo.resolve(json!({"./p": {}})).await.unwrap_err());
    assert!(
        err.contains("cycle") && err.contains("./p") && err.contains("./q"),
        "{err}"
    );

    let err = message(repo.resolve(json!({"node": {}})).await.unwrap_err());
    assert!(err.contains("legacy"), "{err}");
    let err = message(repo.resolve(json!(["./p"])).await.unwrap_err());
    assert!(err.contains("must be an object"), "{err}");
    let err = message(
        repo.resolve_with(json!({"./q": {}}), &["/abs".into()], LockMode::Ignore, None)
            .await
            .unwrap_err(),
    );
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

#[tokio::test]
async fn no_features_is_nothing() {
    let repo = Repo::new();
    let r = repo.resolve(Value::Null).await.unwrap();
    assert!(r.features.is_empty());
    let r = repo.resolve(json!({})).await.unwrap();
    assert!(r.features.is_empty());
    assert!(!repo.lock_path().exists());
}
