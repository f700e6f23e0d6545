//! The connections the proxy passes through untouched: an allowed host the proxy does not
//! inspect, at an address it shares with an inspected one (a CDN's edge). The inspected sets
//! hold addresses, so that host's 443 and 80 reach the proxy too; when the guard answered the
//! ClientHello's server name (or, on port 80, the Host header) with that address as a name it
//! does not inspect, the proxy splices the connection to the original destination as it came:
//! no TLS termination, no rules, the bytes it read to decide sent first.
//!
//! [`Replay`] is the stream that lets the proxy read the start of a connection to decide and
//! then either hand those bytes on (pass through) or read them again (port 80, inspected).

use super::names::normalize;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// The most of a plain request's head read to find its Host header before deciding; a head
/// that does not end within it goes to the inspected path (hyper answers it).
pub(crate) const PLAIN_HEAD_CAP: usize = 16 * 1024;

/// A stream that records what is read from it until told otherwise.
pub(crate) struct Replay<S> {
    inner: S,
    buf: Vec<u8>,
    /// Read position in `buf` while replaying.
    pos: usize,
    mode: Mode,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Record,
    Replay,
    Pass,
}

impl<S> Replay<S> {
    pub(crate) fn recording(inner: S) -> Replay<S> {
        Replay {
            inner,
            buf: Vec::new(),
            pos: 0,
            mode: Mode::Record,
        }
    }

    /// What was read so far (while recording).
    pub(crate) fn recorded(&self) -> &[u8] {
        &self.buf
    }

    /// Read what was recorded again, then the rest of the stream.
    pub(crate) fn rewind(&mut self) {
        self.mode = Mode::Replay;
        self.pos = 0;
    }

    /// Stop recording: the bytes read were consumed for good.
    pub(crate) fn stop(&mut self) {
        self.mode = Mode::Pass;
        self.buf = Vec::new();
    }

    /// The bytes recorded and not read again, and the stream.
    pub(crate) fn into_parts(mut self) -> (Vec<u8>, S) {
        let rest = self.buf.split_off(self.pos.min(self.buf.len()));
        (rest, self.inner)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replay<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.mode == Mode::Replay {
            if this.pos < this.buf.len() {
                let n = out.remaining().min(this.buf.len() - this.pos);
                out.put_slice(&this.buf[this.pos..this.pos + n]);
                this.pos += n;
                return Poll::Ready(Ok(()));
            }
            this.mode = Mode::Pass;
            this.buf = Vec::new();
            this.pos = 0;
        }
        let before = out.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, out);
        if this.mode == Mode::Record {
            if let Poll::Ready(Ok(())) = &polled {
                this.buf.extend_from_slice(&out.filled()[before..]);
            }
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Replay<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Read a plain request's head (up to [`PLAIN_HEAD_CAP`], for at most `wait`) and return the
/// name its one Host header gives on port 80; `None` when there is no whole head, no Host, two
/// hosts or another port (the inspected path refuses those with its own answers).
pub(crate) async fn plain_host<S: AsyncRead + Unpin>(
    io: &mut Replay<S>,
    wait: Duration,
) -> Option<String> {
    let read_head = async {
        let mut chunk = [0u8; 2048];
        loop {
            if memchr::memmem::find(io.recorded(), b"\r\n\r\n").is_some()
                || io.recorded().len() >= PLAIN_HEAD_CAP
            {
                return;
            }
            match io.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    let _ = tokio::time::timeout(wait, read_head).await;
    let mut headers = [httparse::EMPTY_HEADER; 100];
    let mut request = httparse::Request::new(&mut headers);
    if !request.parse(io.recorded()).ok()?.is_complete() {
        return None;
    }
    let mut hosts = request
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("host"));
    let host = std::str::from_utf8(hosts.next()?.value).ok()?;
    if hosts.next().is_some() {
        return None;
    }
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) if !port.contains(']') => (name, Some(port)),
        _ => (host, None),
    };
    if port.is_some_and(|p| p.parse::<u16>().ok() != Some(80)) {
        return None;
    }
    Some(normalize(name))
}

/// Splice `stream` to `destination` (the proxy's own marked connection), `first` sent ahead of
/// the rest: the bytes read from the agent to decide.
pub(crate) async fn splice(
    mut stream: TcpStream,
    first: Vec<u8>,
    destination: SocketAddr,
    mark: Option<u32>,
) -> io::Result<()> {
    let mut upstream = super::dial::connect(destination, mark).await?;
    upstream.write_all(&first).await?;
    tokio::io::copy_bidirectional(&mut stream, &mut upstream).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_replayed_stream_reads_its_start_again_or_hands_it_on() {
        let (mut client, server) = tokio::io::duplex(1024);
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: CDN.example.test:80\r\n\r\nrest")
            .await
            .unwrap();
        drop(client);
        let mut io = Replay::recording(server);
        let host = plain_host(&mut io, Duration::from_secs(1)).await;
        assert_eq!(host.as_deref(), Some("cdn.example.test"));
        io.rewind();
        let mut all = Vec::new();
        io.read_to_end(&mut all).await.unwrap();
        assert_eq!(
            all,
            b"GET / HTTP/1.1\r\nHost: CDN.example.test:80\r\n\r\nrest"
        );

        let (mut client, server) = tokio::io::duplex(1024);
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n")
            .await
            .unwrap();
        let mut io = Replay::recording(server);
        assert_eq!(plain_host(&mut io, Duration::from_secs(1)).await, None);
        let (first, _) = io.into_parts();
        assert!(first.starts_with(b"GET / HTTP/1.1\r\n"));
    }
}
