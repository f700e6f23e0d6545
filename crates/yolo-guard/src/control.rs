//! The guard's control sockets: JSON lines over Unix sockets at filesystem paths (not abstract
//! sockets: those belong to the network namespace, which the agent shares). The host connects
//! to the one in the log folder it binds into the guard ([`serve_host`]), so no process of the
//! request runs in the PID namespace the agent shares; where it cannot (a remote engine), it
//! falls back to `docker exec <guard> yolo-guard ctl '<json>'` on the one inside the guard
//! ([`serve`]). The wire types live in `yolo_protocol::control`.
//!
//! Requests: `{"op":"allow","patterns":[..]}`, `{"op":"deny","patterns":[..]}`, `{"op":"status"}`.
//! Responses: `{"ok":true,..}` or `{"ok":false,"error":".."}`, one line each.

use crate::dns::BoxFuture;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
pub use yolo_protocol::control::{Request, Response};
use zeroize::{Zeroize, Zeroizing};

/// Longest request line; anything longer is answered with an error and the connection closed.
const MAX_LINE: usize = 1 << 20;

/// What the server does with a request; the guard implements it.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, request: Request) -> BoxFuture<Response>;
}

/// How long a client may take to send its request line; then it is let go.
const CLIENT_IDLE: Duration = Duration::from_secs(30);

/// Bind `path` (replacing a stale socket from an earlier run), owner-only, and serve until the
/// returned task is aborted.
pub fn serve(
    path: &Path,
    handler: Arc<dyn Handler>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    serve_peers(path, 0o600, None, handler)
}

/// Bind `path` in a folder the host binds into the guard, and serve the peers whose uid is root
/// or one of `uids` (`SO_PEERCRED`). Open to all (0666): the guard's root, without CAP_CHOWN
/// or CAP_FOWNER, cannot give it to the host's user, so the check is the peer's credentials.
pub fn serve_host(
    path: &Path,
    uids: &[u32],
    handler: Arc<dyn Handler>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let mut uids = uids.to_vec();
    uids.push(0);
    serve_peers(path, 0o666, Some(uids), handler)
}

fn serve_peers(
    path: &Path,
    mode: u32,
    uids: Option<Vec<u32>>,
    handler: Arc<dyn Handler>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let uid = stream.peer_cred().map(|c| c.uid()).ok();
            let served = match (&uids, uid) {
                (None, _) => true,
                (Some(uids), Some(uid)) => uids.contains(&uid),
                (Some(_), None) => false,
            };
            if served {
                tokio::spawn(client(stream, Arc::clone(&handler)));
            } else {
                tokio::spawn(refuse(stream, uid));
            }
        }
    }))
}

/// One error line to a peer the socket does not serve, after its request (so that the
/// client, still writing, reads the reason rather than a broken pipe); the request is not read
/// as JSON, let alone run.
async fn refuse(stream: UnixStream, uid: Option<u32>) {
    let mut stream = tokio::io::BufReader::new(stream);
    let mut line = Vec::new();
    let mut limited = (&mut stream).take(MAX_LINE as u64);
    let _ = tokio::time::timeout(CLIENT_IDLE, limited.read_until(b'\n', &mut line)).await;
    let who = uid.map_or("an unknown user".to_string(), |u| format!("uid {u}"));
    let response = Response::error(format!(
        "{} (and root), not {who}",
        yolo_protocol::control::PEER_NOT_SERVED
    ));
    if let Ok(mut out) = serde_json::to_vec(&response) {
        out.push(b'\n');
        let _ = tokio::time::timeout(CLIENT_IDLE, stream.write_all(&out)).await;
    }
}

async fn client(stream: UnixStream, handler: Arc<dyn Handler>) {
    let (mut read, mut write) = stream.into_split();
    let mut lines = LineBuffer::default();
    let mut chunk = Zeroizing::new([0u8; 4096]);
    loop {
        let line = loop {
            if let Some(line) = lines.next_line() {
                break Some(line);
            }
            if lines.len() > MAX_LINE {
                break None;
            }
            let read = tokio::time::timeout(CLIENT_IDLE, read.read(&mut chunk[..])).await;
            match read {
                Ok(Ok(n)) if n > 0 => lines.push(&chunk[..n]),
                _ => return,
            }
        };
        let response = match &line {
            None => Response::error("request too long"),
            Some(line) => match serde_json::from_slice::<Request>(line) {
                Ok(request) => handler.handle(request).await,
                Err(e) => Response::error(format!("bad request: {e}")),
            },
        };
        drop(line);
        let Ok(mut out) = serde_json::to_vec(&response) else {
            return;
        };
        out.push(b'\n');
        let written = tokio::time::timeout(CLIENT_IDLE, write.write_all(&out)).await;
        if !matches!(written, Ok(Ok(()))) || lines.len() > MAX_LINE {
            return;
        }
    }
}

/// The bytes read from a control client and not yet taken as a line. A request may carry the
/// session's secrets (`proxysecrets`), so no copy is left behind: a line taken out is wiped
/// from the buffer, a buffer that grows wipes the allocation it leaves, and the whole buffer is
/// wiped when dropped; the line itself is wiped when the caller drops it.
#[derive(Default)]
struct LineBuffer {
    /// Initialized to its full length (so all of it can be wiped); `used` bytes of it hold data.
    buf: Vec<u8>,
    used: usize,
}

impl LineBuffer {
    fn len(&self) -> usize {
        self.used
    }

    fn push(&mut self, data: &[u8]) {
        let needed = self.used + data.len();
        if needed > self.buf.len() {
            let mut bigger = vec![0u8; needed.max(self.buf.len() * 2).max(4096)];
            bigger[..self.used].copy_from_slice(&self.buf[..self.used]);
            self.buf.zeroize();
            self.buf = bigger;
        }
        self.buf[self.used..needed].copy_from_slice(data);
        self.used = needed;
    }

    /// The first whole line (with its `\n`), taken out of the buffer, if there is one.
    fn next_line(&mut self) -> Option<Zeroizing<Vec<u8>>> {
        let end = memchr::memchr(b'\n', &self.buf[..self.used])? + 1;
        let line = Zeroizing::new(self.buf[..end].to_vec());
        self.buf.copy_within(end..self.used, 0);
        let rest = self.used - end;
        self.buf[rest..self.used].zeroize();
        self.used = rest;
        Some(line)
    }
}

impl Drop for LineBuffer {
    fn drop(&mut self) {
        self.buf.zeroize();
    }
}

/// Why a request got no answer from the guard (an answer that says no is a [`Response`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is not JSON of a request.
    #[error("bad request: {0}")]
    BadRequest(#[source] serde_json::Error),
    /// The socket could not be reached, written or read (the 30 s wait included).
    #[error("guard control socket {}: {source}", socket.display())]
    Socket {
        socket: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// What came back is not a response.
    #[error("unreadable answer from the guard: {source}: {answer}")]
    Unreadable {
        answer: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Send one request to the guard's control socket and wait for the answer.
pub fn request(socket: &Path, req: &Request) -> Result<Response, Error> {
    let fail = |source| Error::Socket {
        socket: socket.to_path_buf(),
        source,
    };
    let mut stream = std::os::unix::net::UnixStream::connect(socket).map_err(fail)?;
    // `deny` runs nft; a few seconds is generous, forever is not.
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(fail)?;
    let line = req.to_line().map_err(Error::BadRequest)?;
    stream.write_all(&line).map_err(fail)?;
    let mut answer = String::new();
    BufReader::new(&stream)
        .read_line(&mut answer)
        .map_err(fail)?;
    serde_json::from_str(&answer).map_err(|source| Error::Unreadable { answer, source })
}

/// `yolo-guard ctl '<json>'` inside the guard container: print the response JSON; exit 0 when
/// it says ok, 1 when the guard refused, 2 when the request could not be made.
///
/// `json_arg` [`yolo_protocol::CTL_FROM_ENV`]: the request is in the environment (the session's
/// secrets, which must not show in an argv the agent can read); the process then makes itself
/// non-dumpable first, so that not even a process of its own uid without its capabilities reads
/// its memory or environment.
pub fn ctl_main(json_arg: &str) -> i32 {
    let socket = std::env::var_os("YOLO_GUARD_CONTROL")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| yolo_protocol::GUARD_CONTROL_SOCKET.into());
    let from_env;
    let json_arg = if json_arg == yolo_protocol::CTL_FROM_ENV {
        // SAFETY: prctl with constant arguments changes only this process's flag.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        from_env =
            Zeroizing::new(std::env::var(yolo_protocol::CTL_REQUEST_ENV).unwrap_or_default());
        std::env::remove_var(yolo_protocol::CTL_REQUEST_ENV);
        from_env.as_str()
    } else {
        json_arg
    };
    let response = serde_json::from_str::<Request>(json_arg)
        .map_err(Error::BadRequest)
        .and_then(|req| request(&socket, &req));
    let (response, code) = match response {
        Ok(r) => {
            let code = if r.ok { 0 } else { 1 };
            (r, code)
        }
        Err(e) => (Response::error(e.to_string()), 2),
    };
    println!(
        "{}",
        serde_json::to_string(&response).unwrap_or_else(|_| "{\"ok\":false}".into())
    );
    code
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use yolo_protocol::NetworkMode;

    struct Echo(Mutex<Vec<Request>>);

    impl Handler for Echo {
        fn handle(&self, request: Request) -> BoxFuture<Response> {
            self.0.lock().unwrap().push(request.clone());
            let response = match request {
                Request::Allow { patterns } => Response {
                    ok: true,
                    patterns: Some(patterns),
                    ..Default::default()
                },
                Request::Deny { .. }
                | Request::ProxySecrets(_)
                | Request::AllowHttp { .. }
                | Request::DenyHttp { .. }
                | Request::Pending
                | Request::Decide { .. } => Response::error("nothing to deny"),
                Request::Status => Response {
                    ok: true,
                    mode: Some(NetworkMode::Firewall),
                    ..Default::default()
                },
            };
            Box::pin(async move { response })
        }
    }

    /// A request's bytes leave no copy in the connection's buffer: not after the line was
    /// taken, not in the allocation a growing buffer left, and the line itself is wiped.
    #[test]
    fn the_line_buffer_is_wiped_of_a_taken_line() {
        let secret = b"sk-ant-REALVALUE-0123456789";
        // Longer than the first allocation, so that the buffer grows (and moves) on the way;
        // the rest after the line is short, so it does not happen to overwrite the secret.
        let mut request = br#"{"op":"proxysecrets","ca_cert_pem":""#.to_vec();
        request.extend_from_slice(&[b'C'; 5000]);
        request.extend_from_slice(br#"","credentials":[["a",""#);
        request.extend_from_slice(secret);
        request.extend_from_slice(b"\"]]}\n{\"op\":\"st");
        let mut lines = LineBuffer::default();
        for piece in request.chunks(700) {
            lines.push(piece);
        }
        let contains = |hay: &[u8]| hay.windows(secret.len()).any(|w| w == secret);
        let line = lines.next_line().expect("a whole line");
        assert!(contains(&line));
        assert!(
            !contains(&lines.buf),
            "the taken line must be wiped from the buffer (all of it, not only the used part)"
        );
        assert!(lines.buf[..lines.used].starts_with(b"{\"op\":\"st"));
        assert!(lines.next_line().is_none());
        // The line wipes itself on drop: Zeroizing, whose wipe is the zeroize crate's.
        let mut line = line;
        line.zeroize();
        assert!(!contains(&line));
    }

    #[test]
    fn wire_format() {
        let allow: Request =
            serde_json::from_str(r#"{"op":"allow","patterns":["a.test"]}"#).unwrap();
        assert_eq!(
            allow,
            Request::Allow {
                patterns: vec!["a.test".into()]
            }
        );
        assert_eq!(
            serde_json::to_string(&Request::Status).unwrap(),
            r#"{"op":"status"}"#
        );
        assert_eq!(
            serde_json::to_string(&Response::error("x")).unwrap(),
            r#"{"ok":false,"error":"x"}"#
        );
    }

    /// The host's socket is open to all but serves only root and the uids named; anyone
    /// else gets an error line, and the guard goes on serving.
    #[test]
    fn the_host_socket_serves_only_the_users_named() {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let _entered = rt.enter();
        // SAFETY: getuid cannot fail.
        let me = unsafe { libc::getuid() };
        let handler = Arc::new(Echo(Mutex::new(vec![])));
        let mine = dir.path().join("mine.sock");
        let _mine = serve_host(&mine, &[me], handler.clone()).unwrap();
        let mode = std::fs::metadata(&mine).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o666);
        assert!(request(&mine, &Request::Status).unwrap().ok);
        // Another user (as root, the tests drop to nobody for it): refused.
        let nobody = if me == 0 { 65534 } else { me };
        let others = dir.path().join("others.sock");
        let _others = serve_host(&others, &[nobody + 1], handler.clone()).unwrap();
        let refused = if me == 0 {
            use std::os::unix::process::CommandExt;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            let script = "import socket,sys\ns=socket.socket(socket.AF_UNIX)\n\
                          s.connect(sys.argv[1]);s.sendall(b'{\"op\":\"status\"}\\n')\n\
                          print(s.makefile().readline(),end='')";
            let Ok(out) = std::process::Command::new("python3")
                .args(["-c", script])
                .arg(&others)
                .uid(nobody)
                .output()
            else {
                return; // no python3 to connect as another user with
            };
            serde_json::from_slice::<Response>(&out.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
        } else {
            request(&others, &Request::Status).unwrap()
        };
        assert!(!refused.ok);
        let error = refused.error.unwrap();
        assert!(error.contains(&format!("not uid {nobody}")), "{error}");
        assert_eq!(
            handler.0.lock().unwrap().len(),
            1,
            "the refused request never ran"
        );
    }

    /// Why a request got no answer, by kind: no guard at the socket, or an answer that is not
    /// a response (a stranger on the socket); both name the socket or the answer.
    #[test]
    fn a_request_without_an_answer_says_why_by_kind() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.sock");
        match request(&missing, &Request::Status) {
            Err(e @ Error::Socket { .. }) => {
                assert!(e.to_string().contains("none.sock"), "{e}");
                let Error::Socket { source, .. } = e else {
                    unreachable!()
                };
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("{other:?}"),
        }
        let stranger = dir.path().join("stranger.sock");
        let listener = std::os::unix::net::UnixListener::bind(&stranger).unwrap();
        let answer = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut line = String::new();
            BufReader::new(&stream).read_line(&mut line).unwrap();
            stream.write_all(b"hello\n").unwrap();
        });
        match request(&stranger, &Request::Status) {
            Err(Error::Unreadable { answer, .. }) => assert_eq!(answer, "hello\n"),
            other => panic!("{other:?}"),
        }
        answer.join().unwrap();
    }

    #[test]
    fn requests_round_trip_over_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/control.sock");
        let rt = tokio::runtime::Runtime::new().unwrap();
        let handler = Arc::new(Echo(Mutex::new(vec![])));
        // serve() spawns, so it needs the runtime entered, not awaited.
        let _entered = rt.enter();
        let _server = serve(&path, handler.clone()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "only the guard's user may talk to it");

        let r = request(
            &path,
            &Request::Allow {
                patterns: vec!["*.x.test".into()],
            },
        )
        .unwrap();
        assert_eq!(r.patterns, Some(vec!["*.x.test".to_string()]));
        let r = request(&path, &Request::Deny { patterns: vec![] }).unwrap();
        assert!(!r.ok);
        assert_eq!(
            request(&path, &Request::Status).unwrap().mode,
            Some(NetworkMode::Firewall)
        );

        // Garbage gets an error line, and the server keeps serving.
        let mut raw = std::os::unix::net::UnixStream::connect(&path).unwrap();
        raw.write_all(b"{not json\n").unwrap();
        let mut line = String::new();
        BufReader::new(&raw).read_line(&mut line).unwrap();
        assert!(line.contains("bad request"), "{line}");
        assert!(request(&path, &Request::Status).unwrap().ok);
        assert_eq!(handler.0.lock().unwrap().len(), 4);

        std::env::set_var("YOLO_GUARD_CONTROL", &path);
        assert_eq!(ctl_main(r#"{"op":"status"}"#), 0);
        assert_eq!(ctl_main(r#"{"op":"deny","patterns":[]}"#), 1);
        assert_eq!(ctl_main("nonsense"), 2);
    }
}
