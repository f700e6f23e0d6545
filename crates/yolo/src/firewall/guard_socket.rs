//! The host's end of the guard's control socket in the log folder (`GuardConfig::
//! host_control_socket`): one request line out, one response line back, each step under a
//! deadline. No Docker here, and no process in the guard's PID namespace (which the agent
//! shares, and whose processes its root may stop or kill): the host connects to a file in its
//! own data folder, which the agent's container does not mount.
//!
//! Not here: the fallback over `docker exec` (`engine::Engine::guard_ctl`) for engines whose
//! host cannot reach that folder's sockets (a remote engine, Docker Desktop's file sharing).

use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// The whole exchange: connect, send, and the guard's answer (a `deny` revokes addresses over
/// netlink and nft: well under a second; the rest is a listing).
pub(crate) const CONTROL_TIMEOUT: Duration = Duration::from_secs(10);

/// The socket's name in the log folder, for guard container `guard`.
pub(crate) fn socket_name(guard: &str) -> String {
    format!("{guard}.control.sock")
}

/// Why a request over the socket did not get an answer.
#[derive(Debug)]
pub(crate) enum Failure {
    /// No guard listens there (no file, a stale one, sockets that do not cross this bind
    /// mount): the caller may try the other way.
    Unreachable,
    /// A guard took the connection and did not answer in time, or broke off.
    NoAnswer(String),
}

/// Send `line` (one JSON request) to the socket at `path`; the answer's line.
/// `line`: the request's JSON with its newline.
pub(crate) async fn ask(path: &Path, line: &[u8], limit: Duration) -> Result<String, Failure> {
    let connect = connect(path);
    let mut stream = match tokio::time::timeout(limit, connect).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(_)) => return Err(Failure::Unreachable),
        Err(_) => {
            return Err(Failure::NoAnswer(format!(
                "it did not take the connection within {}",
                seconds(limit)
            )))
        }
    };
    let exchange = async {
        stream.write_all(line).await?;
        let mut answer = String::new();
        BufReader::new(&mut stream).read_line(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    match tokio::time::timeout(limit, exchange).await {
        Ok(Ok(answer)) if !answer.is_empty() => Ok(answer),
        Ok(Ok(_)) => Err(Failure::NoAnswer(
            "it closed the connection without an answer".into(),
        )),
        Ok(Err(e)) => Err(Failure::NoAnswer(e.to_string())),
        Err(_) => Err(Failure::NoAnswer(format!(
            "it did not answer within {}",
            seconds(limit)
        ))),
    }
}

/// `10 s`, `0.3 s`.
pub(crate) fn seconds(limit: Duration) -> String {
    format!("{} s", limit.as_secs_f64())
}

/// Connect to `path`; a path too long for a socket address (108 bytes) through the folder's
/// descriptor (`/proc/self/fd/N/name`), which is short whatever the data folder's depth.
async fn connect(path: &Path) -> std::io::Result<UnixStream> {
    const SUN_PATH: usize = 107;
    if path.as_os_str().len() <= SUN_PATH {
        return UnixStream::connect(path).await;
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return UnixStream::connect(path).await;
    };
    let dir = std::fs::File::open(dir)?;
    use std::os::fd::AsRawFd;
    let short = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
    let stream = UnixStream::connect(short).await;
    drop(dir);
    stream
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::UnixListener;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A listener that takes the connection and never answers (a stopped guard): the
    /// request ends at the deadline with words that say so; no listener at all is
    /// `Unreachable`, which lets the caller try `docker exec`.
    #[test]
    fn a_guard_that_does_not_answer_is_a_timeout_and_none_is_unreachable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.control.sock");
        runtime().block_on(async {
            match ask(&path, b"{}\n", Duration::from_millis(200)).await {
                Err(Failure::Unreachable) => {}
                other => panic!("{other:?}"),
            }
            let _listener = UnixListener::bind(&path).unwrap();
            let started = std::time::Instant::now();
            match ask(&path, b"{}\n", Duration::from_millis(300)).await {
                Err(Failure::NoAnswer(why)) => {
                    assert_eq!(why, "it did not answer within 0.3 s")
                }
                other => panic!("{other:?}"),
            }
            assert!(started.elapsed() < Duration::from_secs(2));
        });
    }

    /// Deep data folders make socket paths past 108 bytes; they are reached all the same.
    #[test]
    fn a_socket_path_past_the_address_limit_is_reached_through_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("d".repeat(60)).join("e".repeat(60));
        std::fs::create_dir_all(&deep).unwrap();
        let path = deep.join("g.control.sock");
        assert!(path.as_os_str().len() > 108);
        runtime().block_on(async {
            // Bound the same way: the listener's address has the same limit.
            let dir_fd = std::fs::File::open(&deep).unwrap();
            use std::os::fd::AsRawFd;
            let short = format!("/proc/self/fd/{}/g.control.sock", dir_fd.as_raw_fd());
            let listener = UnixListener::bind(&short).unwrap();
            let server = tokio::spawn(async move {
                let (stream, _) = listener.accept().await.unwrap();
                let (read, mut write) = stream.into_split();
                let mut line = String::new();
                BufReader::new(read).read_line(&mut line).await.unwrap();
                write.write_all(b"{\"ok\":true}\n").await.unwrap();
                line
            });
            let answer = ask(&path, b"{\"op\":\"status\"}\n", Duration::from_secs(5))
                .await
                .unwrap();
            assert_eq!(answer, "{\"ok\":true}\n");
            assert_eq!(server.await.unwrap(), "{\"op\":\"status\"}\n");
        });
    }
}
