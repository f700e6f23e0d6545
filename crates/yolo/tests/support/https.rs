//! A test HTTPS server for the guard's HTTP proxy (issue 25), on the fake internet of
//! [`super::net`]: python3's http.server behind ssl, with a certificate of a CA the test makes
//! ([`TestCa`]: given to yolo as `extra_ca`, or kept from it to play a CA the agent made), on
//! ports 443 and 8443, recording each request it receives as a `REQ {json}` line of its
//! `docker logs` ([`HttpsServer::received`]). Its container carries the test's label.

use super::net::{ensure_image, ip_of, Internet};
use super::{docker, Test, LABEL};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use std::path::Path;
use std::time::{Duration, Instant};

/// The server's image (python3 with its ssl and http.server modules).
pub const HTTPS_IMAGE: &str = "yolo-test-https:1";

/// A CA of the test's own.
pub struct TestCa {
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl TestCa {
    pub fn new(common_name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        TestCa {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// Its certificate in `dir/name`; the path.
    pub fn write(&self, dir: &Path, name: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, &self.pem).unwrap();
        path
    }

    /// A leaf for `names`: (certificate, key), both PEM.
    fn leaf(&self, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let leaf = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        (leaf.pem(), key.serialize_pem())
    }
}

/// The server: HTTPS on 443 and 8443, each request's method, host, path, port and `x-api-key`
/// printed as a `REQ {json}` line, answered 200 with `served PATH`.
const SERVER: &str = r#"
import http.server, json, ssl, threading
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self):
        n = int(self.headers.get("content-length") or 0)
        if n:
            self.rfile.read(n)
        seen = {"method": self.command, "host": self.headers.get("host"), "path": self.path,
                "port": self.server.server_address[1], "key": self.headers.get("x-api-key")}
        print("REQ " + json.dumps(seen), flush=True)
        body = ("served " + self.path + "\n").encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = answer
    def log_message(self, *args):
        pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("/certs/server.pem", "/certs/server.key")
servers = []
for port in (443, 8443):
    server = http.server.ThreadingHTTPServer(("0.0.0.0", port), H)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    servers.append(server)
print("READY", flush=True)
threading.Thread(target=servers[1].serve_forever, daemon=True).start()
servers[0].serve_forever()
"#;

pub struct HttpsServer {
    /// The container's name.
    pub name: String,
    pub ip: String,
    /// Its certificate and key, bound into the container.
    _certs: tempfile::TempDir,
}

impl HttpsServer {
    /// A server on `net` for `names`, its certificate signed by `ca`; `role` names the
    /// container. Returns once it listens; the name server does not answer its names yet
    /// (`net.set_answer`).
    pub fn start(t: &Test, net: &Internet, role: &str, ca: &TestCa, names: &[&str]) -> Self {
        ensure_image(HTTPS_IMAGE, "https.Dockerfile");
        let certs = tempfile::tempdir().unwrap();
        let (cert, key) = ca.leaf(names);
        std::fs::write(certs.path().join("server.pem"), cert).unwrap();
        std::fs::write(certs.path().join("server.key"), key).unwrap();
        let name = format!("yolo-{}-{role}", t.id);
        docker(&[
            "run",
            "-d",
            "--name",
            &name,
            "--label",
            &format!("{LABEL}={}", t.id),
            "--network",
            &net.network,
            "-v",
            &format!("{}:/certs:ro", certs.path().display()),
            HTTPS_IMAGE,
            "python3",
            "-c",
            SERVER,
        ]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !docker(&["logs", &name]).contains("READY") {
            assert!(
                Instant::now() < deadline,
                "the test HTTPS server {name} never listened: {}",
                docker(&["logs", &name])
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let ip = ip_of(&name, &net.network);
        HttpsServer {
            name,
            ip,
            _certs: certs,
        }
    }

    /// The requests the server received, in order.
    pub fn received(&self) -> Vec<serde_json::Value> {
        docker(&["logs", &self.name])
            .lines()
            .filter_map(|l| l.strip_prefix("REQ "))
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// The value of `name=` in an agent's output.
pub fn field<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= in the agent's output:\n{out}"))
        .trim()
}
