//! How the shim hands its listener to the supervisor: an abstract Unix stream socket (abstract
//! names belong to the network namespace, which the agent shares with the guard; the guard
//! binds the name before the agent exists, so nobody else can), the peer's pid from
//! `SO_PEERCRED`, and the descriptor passed with `SCM_RIGHTS`. std has no stable API for the
//! last two, hence libc.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};

pub use yolo_protocol::EXEC_SOCKET as SOCKET;
/// What the shim sends with its listener.
pub const HELLO: &[u8] = b"yolo-shim 1\n";
/// What the supervisor answers once the listener is watched.
pub const ACK: &str = "ok";

pub fn bind(name: &str) -> io::Result<UnixListener> {
    UnixListener::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes())?)
}

pub fn connect(name: &str) -> io::Result<UnixStream> {
    UnixStream::connect_addr(&SocketAddr::from_abstract_name(name.as_bytes())?)
}

/// The pid of the process at the other end, as this process's PID namespace numbers it (0 when
/// it lives in a namespace this one cannot see).
pub fn peer_pid(stream: &UnixStream) -> io::Result<i32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.pid)
}

/// Send `bytes` with `fd` attached.
pub fn send_fd(stream: &UnixStream, bytes: &[u8], fd: RawFd) -> io::Result<()> {
    send_fds(stream, bytes, &[fd])
}

/// Send `bytes` with `fds` attached.
pub fn send_fds(stream: &UnixStream, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let size = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(size as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: zeroed msghdr is valid; every pointer set below outlives the sendmsg call, and the
    // control buffer is CMSG_SPACE bytes for `fds`, copied in as bytes (no alignment assumed).
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = space as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr() as *const u8, libc::CMSG_DATA(cmsg), size);
        if libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Receive up to `buf.len()` bytes and at most one descriptor (others are closed).
pub fn recv_fd(stream: &UnixStream, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    // Room for a few descriptors, so extra ones arrive (and are closed) rather than truncate.
    let (n, fds, _) = recv_fds(stream, buf, 4)?;
    Ok((n, fds.into_iter().next()))
}

/// Have the kernel attach the sender's credentials to every message read from `stream`
/// (`SO_PASSCRED`): `recv_fds` then returns the pid of the process that sent those very bytes,
/// which `SO_PEERCRED` (the process that connected) is not when a descriptor of the connection
/// was passed on or taken (`pidfd_getfd`).
pub fn pass_credentials(socket: &impl AsRawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt with a pointer to an int of the size given.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            &on as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Receive up to `buf.len()` bytes and the descriptors sent with them, with room for `room`
/// (more are closed by the kernel, which truncates the control data); and, after
/// `pass_credentials`, the pid of the sender of these bytes (a stream read never joins the
/// bytes of two senders then).
pub fn recv_fds(
    stream: &UnixStream,
    buf: &mut [u8],
    room: usize,
) -> io::Result<(usize, Vec<OwnedFd>, Option<i32>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: pure size computation.
    let space = unsafe {
        libc::CMSG_SPACE((room * std::mem::size_of::<RawFd>()) as u32)
            + libc::CMSG_SPACE(std::mem::size_of::<libc::ucred>() as u32)
    } as usize;
    let mut control = vec![0u8; space];
    let mut fds = Vec::new();
    let mut sender = None;
    // SAFETY: as in `send_fd`; the kernel writes at most `msg_controllen` bytes of control data,
    // and every descriptor it passed is taken into an OwnedFd exactly once.
    let n = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = space as _;
        let n = libc::recvmsg(stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg) as *const RawFd;
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..bytes / std::mem::size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            } else if (*cmsg).cmsg_level == libc::SOL_SOCKET
                && (*cmsg).cmsg_type == libc::SCM_CREDENTIALS
            {
                let cred: libc::ucred =
                    std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::ucred);
                sender = Some(cred.pid);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        n as usize
    };
    Ok((n, fds, sender))
}
