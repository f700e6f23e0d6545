//! The proxy's own connections to the original destination, for the rules' forwarding
//! (`serve`) and the untouched pass-through (`passthrough`) alike: marked so the ruleset lets
//! them out and does not send them back to the proxy.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::net::{TcpSocket, TcpStream};

/// How long the proxy may take to reach the host.
const CONNECT: Duration = Duration::from_secs(15);

/// A TCP connection from the guard to `addr`, with `mark` when the ruleset needs one.
pub(crate) async fn connect(addr: SocketAddr, mark: Option<u32>) -> io::Result<TcpStream> {
    let socket = match addr.ip() {
        IpAddr::V4(_) => TcpSocket::new_v4()?,
        IpAddr::V6(_) => TcpSocket::new_v6()?,
    };
    if let Some(mark) = mark {
        socket2::SockRef::from(&socket).set_mark(mark)?;
    }
    let stream = tokio::time::timeout(CONNECT, socket.connect(addr))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
    stream.set_nodelay(true)?;
    Ok(stream)
}
