//! A real OCI registry for tests: Debian's `docker-registry` (the CNCF distribution registry,
//! installed by `scripts/docker-up.sh`), started on 127.0.0.1 at a free port with its
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
//! With `Registry::start_with_auth(user, password)` (HTTP Basic, htpasswd) or
//! `Registry::start_with_token_auth(user, password)` (the Bearer token flow, with a token server
//! of its own) pulls need credentials: write them with `registry.docker_config(dir)` and point
//! `DOCKER_CONFIG` at `dir` (for `yolo up`: `Test::env("DOCKER_CONFIG", dir)`).
//! `registry.stop()` stops it early (a test that the cache needs no network);
//! `registry.corrupt_blob(digest)` makes it serve bytes that do not match their digest.
//! `FileServer::start(files)` serves tarball Features over plain http on 127.0.0.1.

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
    /// With token auth: the token server the registry sends clients to.
    token_server: Option<TokenServer>,
}

/// How the registry wants clients to authenticate.
enum Auth {
    None,
    /// HTTP Basic against an htpasswd file.
    Basic,
    /// The Docker token flow: 401 with `WWW-Authenticate: Bearer realm=...`, a token server
    /// that trades Basic credentials for a signed JWT (RS256, key made with the openssl CLI).
    Token,
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
        Self::launch(None, Auth::None)
    }

    /// A registry that wants HTTP Basic credentials (htpasswd) for everything.
    pub fn start_with_auth(user: &str, password: &str) -> Self {
        Self::launch(Some((user.to_string(), password.to_string())), Auth::Basic)
    }

    /// A registry that wants a Bearer token for everything, from its token server, which
    /// gives one for these credentials (as Docker Hub, ghcr.io and most registries do).
    pub fn start_with_token_auth(user: &str, password: &str) -> Self {
        Self::launch(Some((user.to_string(), password.to_string())), Auth::Token)
    }

    fn launch(credentials: Option<(String, String)>, mode: Auth) -> Self {
        let binary = "/usr/bin/docker-registry";
        assert!(
            Path::new(binary).exists(),
            "{binary} is missing: run scripts/docker-up.sh (Debian package docker-registry)"
        );
        let mut dir = tempfile::tempdir().unwrap();
        let mut auth = String::new();
        let mut token_server = None;
        match (&mode, &credentials) {
            (Auth::Basic, Some((user, password))) => {
                let hash = bcrypt::hash(password, 4).unwrap();
                let htpasswd = dir.path().join("htpasswd");
                std::fs::write(&htpasswd, format!("{user}:{hash}\n")).unwrap();
                auth = format!(
                    "auth:\n  htpasswd:\n    realm: yolo-test\n    path: {}\n",
                    htpasswd.display()
                );
            }
            (Auth::Token, Some((user, password))) => {
                let server = TokenServer::start(dir.path(), user, password);
                auth = format!(
                    "auth:\n  token:\n    realm: http://{}/token\n    service: {TOKEN_SERVICE}\n    \
                     issuer: {TOKEN_ISSUER}\n    rootcertbundle: {}\n",
                    server.addr,
                    server.cert.display()
                );
                token_server = Some(server);
            }
            _ => {}
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
                token_server: token_server.take(),
            };
            if registry.wait_ready() {
                return registry;
            }
            registry.stop();
            token_server = registry.token_server.take();
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

    /// One HTTP/1.1 request to the registry, with its credentials if it has any (Basic, or a
    /// token from the token server when the registry asks for one).
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
        let basic = self
            .credentials
            .as_ref()
            .map(|(user, password)| base64_encode(format!("{user}:{password}").as_bytes()));
        if let (Some(basic), None) = (&basic, &self.token_server) {
            all.push(("Authorization".into(), format!("Basic {basic}")));
        }
        let response = http_request(&self.host, method, path, &all, body)?;
        let challenge = response
            .1
            .get("www-authenticate")
            .cloned()
            .unwrap_or_default();
        let (Some(basic), Some(server), 401) = (&basic, &self.token_server, response.0) else {
            return Ok(response);
        };
        let param = |name: &str| {
            challenge
                .split(&format!("{name}=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or("")
                .to_string()
        };
        let query = format!(
            "/token?service={}&scope={}",
            param("service"),
            param("scope")
        );
        let auth = vec![("Authorization".to_string(), format!("Basic {basic}"))];
        let (status, _, token) = http_request(&server.addr, "GET", &query, &auth, &[])?;
        assert_eq!(status, 200, "token: {}", String::from_utf8_lossy(&token));
        let token: serde_json::Value = serde_json::from_slice(&token).unwrap();
        all.push((
            "Authorization".into(),
            format!("Bearer {}", token["token"].as_str().unwrap()),
        ));
        http_request(&self.host, method, path, &all, body)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

pub const TOKEN_SERVICE: &str = "yolo-test-registry";
pub const TOKEN_ISSUER: &str = "yolo-test-issuer";

/// The token server of a registry with token auth: `GET /token?service=..&scope=..` with the
/// right Basic credentials gives `{"token": <JWT>}` granting pull and push on the scope's
/// repository; anything else a 401. The JWT is signed RS256 by the openssl CLI with a key
/// made at start, whose self-signed certificate the registry trusts (`rootcertbundle`); its
/// `kid` is libtrust's key id, which is how the registry finds the key.
struct TokenServer {
    addr: String,
    cert: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TokenServer {
    fn start(dir: &Path, user: &str, password: &str) -> Self {
        let key = dir.join("token.key");
        let cert = dir.join("token.crt");
        let status = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            ])
            .arg("/CN=yolo-test-token")
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("the openssl CLI (Debian package openssl) makes the token signing key");
        assert!(status.success(), "openssl req failed");
        let spki = Command::new("openssl")
            .args(["pkey", "-pubout", "-outform", "DER", "-in"])
            .arg(&key)
            .output()
            .unwrap()
            .stdout;
        let kid = libtrust_key_id(&spki);
        let expected = format!(
            "Basic {}",
            base64_encode(format!("{user}:{password}").as_bytes())
        );
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                let request = read_head(&mut stream);
                let target = request.split_whitespace().nth(1).unwrap_or("").to_string();
                let authorized = request.lines().any(|l| {
                    l.to_ascii_lowercase().starts_with("authorization:")
                        && l[14..].trim() == expected
                });
                let (status, body) = if authorized {
                    let scope = query_param(&target, "scope");
                    let repository = scope.split(':').nth(1).unwrap_or("").to_string();
                    let token = sign_token(&key, &kid, &repository);
                    (
                        "200 OK",
                        serde_json::json!({"token": token, "access_token": token}).to_string(),
                    )
                } else {
                    (
                        "401 Unauthorized",
                        r#"{"details":"wrong or missing credentials"}"#.to_string(),
                    )
                };
                let _ = stream.write_all(
                    format!(
                        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                );
            }
        });
        TokenServer {
            addr,
            cert,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn read_head(stream: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// `name`'s value in the query of `target`, percent-decoded.
fn query_param(target: &str, name: &str) -> String {
    let query = target.split_once('?').map(|(_, q)| q).unwrap_or("");
    let raw = query
        .split('&')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or("");
    let bytes = raw.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&raw[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// libtrust's key id: the sha256 of the DER public key, its first 30 bytes in base32, in
/// groups of four joined by ':'.
fn libtrust_key_id(spki_der: &[u8]) -> String {
    let hash = Sha256::digest(spki_der);
    let encoded = base32_encode(&hash[..30]);
    encoded
        .as_bytes()
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(":")
}

fn base32_encode(bytes: &[u8]) -> String {
    const TABLE: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::new();
    let mut buffer: u64 = 0;
    let mut bits = 0;
    for &b in bytes {
        buffer = (buffer << 8) | u64::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(TABLE[((buffer >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(TABLE[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

fn base64url(bytes: &[u8]) -> String {
    base64_encode(bytes)
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_")
}

/// A JWT granting pull and push on `repository`, signed RS256 with `key` by the openssl CLI.
fn sign_token(key: &Path, kid: &str, repository: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = serde_json::json!({"typ": "JWT", "alg": "RS256", "kid": kid});
    let claims = serde_json::json!({
        "iss": TOKEN_ISSUER, "sub": "test", "aud": TOKEN_SERVICE,
        "exp": now + 600, "nbf": now - 60, "iat": now - 60,
        "jti": format!("{now}-{repository}"),
        "access": [{"type": "repository", "name": repository, "actions": ["pull", "push"]}]
    });
    let input = format!(
        "{}.{}",
        base64url(header.to_string().as_bytes()),
        base64url(claims.to_string().as_bytes())
    );
    let mut child = Command::new("openssl")
        .args(["dgst", "-sha256", "-sign"])
        .arg(key)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let signature = child.wait_with_output().unwrap().stdout;
    format!("{input}.{}", base64url(&signature))
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
                    // `REDIRECT:<url>`: a 302 to it.
                    Some(body) if body.starts_with(b"REDIRECT:") => format!(
                        "HTTP/1.1 302 Found\r\nLocation: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        String::from_utf8_lossy(&body[9..])
                    )
                    .into_bytes(),
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

/// One HTTP/1.1 request, tried again (up to three times) when the connection fails before any
/// answer: on a loaded machine (the whole suite at once) the registry, a Go server started a
/// moment ago, now and then resets or closes a connection before it answers.
fn http_request(
    host: &str,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> std::io::Result<(u16, HashMap<String, String>, Vec<u8>)> {
    let mut last = None;
    for attempt in 0..3 {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(200 * attempt));
        }
        match http_request_once(host, method, path, headers, body) {
            Ok(response) => return Ok(response),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no attempt")))
}

fn http_request_once(
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
