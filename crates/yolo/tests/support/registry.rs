//! A real OCI registry for tests: Debian's `docker-registry` (the CNCF distribution registry,
//! installed by `shared/tools/docker-up.sh`), started on 127.0.0.1 at a free port with its
//! storage in a temporary folder, and Features published to it through the OCI distribution
//! API as `devcontainer features publish` does (a tar layer of media type
//! `application/vnd.devcontainers.layer.v1+tar`, a config of media type
//! `application/vnd.devcontainers`, an OCI image manifest with the Feature's metadata).
//! Also a tiny HTTP file server on loopback, for tarball Features.
//!
//! Used by the integration tests (`support::registry`) and, through `#[path]`, by the unit
//! tests of `devcontainer::features`; so it needs nothing but std and the crate's
//! dependencies. Everything stops on drop.
//!
//! ```ignore
//! let registry = Registry::start();
//! let published = registry.publish(&feature_dir, "hello", &["1", "1.0.0", "latest"]);
//! // "features": { published.reference("1"): {} }  →  127.0.0.1:<port>/features/hello:1
//! ```
//! With `Registry::start_with_auth(user, password)` pulls need credentials: write them with
//! `registry.docker_config(dir)` and point `DOCKER_CONFIG` at `dir`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

pub const LAYER_MEDIA_TYPE: &str = "application/vnd.devcontainers.layer.v1+tar";
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.devcontainers";
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The namespace Features are published under: `127.0.0.1:<port>/features/<id>`.
pub const NAMESPACE: &str = "features";

pub struct Registry {
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// `127.0.0.1:<port>`.
    pub host: String,
    credentials: Option<(String, String)>,
}

/// A Feature published: its references and digests.
pub struct Published {
    /// `127.0.0.1:<port>/features/<id>` (add `:<tag>`).
    pub repository: String,
    pub manifest_digest: String,
    pub layer_digest: String,
    pub layer: Vec<u8>,
}

impl Published {
    pub fn reference(&self, tag: &str) -> String {
        format!("{}:{tag}", self.repository)
    }
}

pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

impl Registry {
    /// A registry anyone may pull from and push to.
    pub fn start() -> Self {
        Self::launch(None)
    }

    /// A registry that wants HTTP Basic credentials (htpasswd) for everything.
    pub fn start_with_auth(user: &str, password: &str) -> Self {
        Self::launch(Some((user.to_string(), password.to_string())))
    }

    fn launch(credentials: Option<(String, String)>) -> Self {
        let binary = "/usr/bin/docker-registry";
        assert!(
            Path::new(binary).exists(),
            "{binary} is missing: run shared/tools/docker-up.sh (Debian package docker-registry)"
        );
        let mut dir = tempfile::tempdir().unwrap();
        let mut auth = String::new();
        if let Some((user, password)) = &credentials {
            let hash = bcrypt::hash(password, 4).unwrap();
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, format!("{user}:{hash}\n")).unwrap();
            auth = format!(
                "auth:\n  htpasswd:\n    realm: yolo-test\n    path: {}\n",
                htpasswd.display()
            );
        }
        // A port picked free can be taken before the registry binds it: try a few.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let host = format!("127.0.0.1:{port}");
            let config = dir.path().join("config.yml");
            std::fs::write(
                &config,
                format!(
                    "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n\
                     storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
                     http:\n  addr: {host}\n{auth}",
                    dir.path().join("data").display()
                ),
            )
            .unwrap();
            let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
            let child = Command::new(binary)
                .arg("serve")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("start docker-registry");
            let mut registry = Registry {
                child: Some(child),
                dir,
                host,
                credentials: credentials.clone(),
            };
            if registry.wait_ready() {
                return registry;
            }
            registry.stop();
            dir = std::mem::replace(&mut registry.dir, tempfile::tempdir().unwrap());
        }
        panic!("docker-registry did not start");
    }

    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if child.try_wait().ok().flatten().is_some() {
                    return false; // exited: port taken, or a bad config
                }
            }
            if let Ok((status, _, _)) = self.request("GET", "/v2/", &[], &[]) {
                if status == 200 || status == 401 {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// The registry's own log (for a failed assertion's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Stop the registry (a test of cached resolution). Idempotent.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Publish the Feature folder `folder` (its `devcontainer-feature.json` says `id`) as
    /// `features/<id>` under each of `tags`.
    pub fn publish(&self, folder: &Path, id: &str, tags: &[&str]) -> Published {
        let layer = tar_folder(folder);
        let metadata =
            std::fs::read_to_string(folder.join("devcontainer-feature.json")).unwrap_or_default();
        self.publish_layer(id, tags, layer, &metadata)
    }

    /// Publish `layer` (a tar) as `features/<id>` under each of `tags`.
    pub fn publish_layer(
        &self,
        id: &str,
        tags: &[&str],
        layer: Vec<u8>,
        metadata: &str,
    ) -> Published {
        let repo = format!("{NAMESPACE}/{id}");
        let config = b"{}".to_vec();
        let layer_digest = self.push_blob(&repo, &layer);
        let config_digest = self.push_blob(&repo, &config);
        let mut manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": config_digest, "size": config.len()},
            "layers": [{
                "mediaType": LAYER_MEDIA_TYPE,
                "digest": layer_digest,
                "size": layer.len(),
                "annotations": {"org.opencontainers.image.title": format!("devcontainer-feature-{id}.tgz")}
            }],
            "annotations": {"com.github.package.type": "devcontainer_feature"}
        });
        if !metadata.is_empty() {
            manifest["annotations"]["dev.containers.metadata"] = metadata.into();
        }
        let manifest = serde_json::to_vec(&manifest).unwrap();
        for tag in tags {
            let (status, _, body) = self
                .request(
                    "PUT",
                    &format!("/v2/{repo}/manifests/{tag}"),
                    &[("Content-Type", MANIFEST_MEDIA_TYPE)],
                    &manifest,
                )
                .unwrap();
            assert_eq!(
                status,
                201,
                "manifest PUT: {}",
                String::from_utf8_lossy(&body)
            );
        }
        Published {
            repository: format!("{}/{repo}", self.host),
            manifest_digest: sha256(&manifest),
            layer_digest,
            layer,
        }
    }

    fn push_blob(&self, repo: &str, bytes: &[u8]) -> String {
        let digest = sha256(bytes);
        let (status, headers, body) = self
            .request("POST", &format!("/v2/{repo}/blobs/uploads/"), &[], &[])
            .unwrap();
        assert_eq!(
            status,
            202,
            "upload POST: {}",
            String::from_utf8_lossy(&body)
        );
        let location = headers.get("location").expect("Location").clone();
        let location = match location.find("/v2/") {
            Some(i) => location[i..].to_string(),
            None => location,
        };
        let sep = if location.contains('?') { '&' } else { '?' };
        let (status, _, body) = self
            .request(
                "PUT",
                &format!("{location}{sep}digest={digest}"),
                &[("Content-Type", "application/octet-stream")],
                bytes,
            )
            .unwrap();
        assert_eq!(status, 201, "blob PUT: {}", String::from_utf8_lossy(&body));
        digest
    }

    /// Overwrite the stored bytes of blob `digest` (a layer, or a manifest by its digest), so
    /// the registry serves content that does not match its digest.
    pub fn corrupt_blob(&self, digest: &str) {
        let hex = digest.strip_prefix("sha256:").unwrap();
        let path = self
            .dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data");
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x55;
        std::fs::write(&path, bytes).unwrap();
    }

    /// Write a Docker config folder at `dir` whose `auths` hold this registry's credentials
    /// (base64 `user:password`, as `docker login` writes them); returns `dir`.
    pub fn docker_config(&self, dir: &Path) -> PathBuf {
        let (user, password) = self
            .credentials
            .clone()
            .expect("a registry with credentials");
        std::fs::create_dir_all(dir).unwrap();
        let auth = base64_encode(format!("{user}:{password}").as_bytes());
        let config = serde_json::json!({"auths": {self.host.clone(): {"auth": auth}}});
        std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
        dir.to_path_buf()
    }

    /// One HTTP/1.1 request to the registry, with its credentials if it has any.
    fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<(u16, HashMap<String, String>, Vec<u8>)> {
        let mut all: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if let Some((user, password)) = &self.credentials {
            let auth = base64_encode(format!("{user}:{password}").as_bytes());
            all.push(("Authorization".into(), format!("Basic {auth}")));
        }
        http_request(&self.host, method, path, &all, body)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A tar of `folder` as `./<path>` entries, sorted, modes kept, times zeroed.
pub fn tar_folder(folder: &Path) -> Vec<u8> {
    let mut files = Vec::new();
    collect(folder, Path::new(""), &mut files);
    files.sort();
    let mut builder = tar::Builder::new(Vec::new());
    for rel in files {
        let path = folder.join(&rel);
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        use std::os::unix::fs::PermissionsExt;
        header.set_mode(meta.permissions().mode() & 0o7777);
        let name = Path::new(".").join(&rel);
        if meta.is_dir() {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_size(0);
            builder
                .append_data(&mut header, &name, std::io::empty())
                .unwrap();
        } else {
            let bytes = std::fs::read(&path).unwrap();
            header.set_size(bytes.len() as u64);
            builder.append_data(&mut header, &name, &bytes[..]).unwrap();
        }
    }
    builder.into_inner().unwrap()
}

fn collect(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(root.join(rel)).unwrap() {
        let entry = entry.unwrap();
        let rel = rel.join(entry.file_name());
        out.push(rel.clone());
        if entry.file_type().unwrap().is_dir() {
            collect(root, &rel, out);
        }
    }
}

/// A plain-http server on 127.0.0.1 that serves fixed files by path and counts requests; for
/// tarball Features. Stops on drop.
pub struct FileServer {
    pub addr: String,
    stop: Arc<AtomicBool>,
    hits: Arc<std::sync::atomic::AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FileServer {
    pub fn start(files: HashMap<String, Vec<u8>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (stop2, hits2) = (stop.clone(), hits.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                hits2.fetch_add(1, Ordering::SeqCst);
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&buf);
                let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
                let response = match files.get(&path) {
                    Some(body) => {
                        let mut r = format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                        .into_bytes();
                        r.extend_from_slice(body);
                        r
                    }
                    None => {
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_vec()
                    }
                };
                let _ = stream.write_all(&response);
            }
        });
        FileServer {
            addr,
            stop,
            hits,
            thread: Some(thread),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests served so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// gzip `bytes` (a tarball Feature is a `.tgz`).
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn http_request(
    host: &str,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> std::io::Result<(u16, HashMap<String, String>, Vec<u8>)> {
    let mut stream = TcpStream::connect(host)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no HTTP header"))?;
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no HTTP status"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok((status, headers, response[split + 4..].to_vec()))
}

fn base64_encode(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
