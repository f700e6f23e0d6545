//! The AF_XDP half of the build's seal (`firewall::seal`). An AF_XDP socket sends frames
//! through `__dev_direct_xmit`, which passes no netdev egress hook, and `NET_RAW` is all it
//! needs: an image build's RUN steps hold it in the guard's namespace, and an attack run sent
//! forged ARP and traffic around the build's firewall that way (Linux 6.18). A queue of an
//! interface takes one AF_XDP socket at a time (a second bind gets `EBUSY`), so before the
//! build starts the guard binds one to every queue of every interface it seals and holds them
//! until it stops: the RUN steps find every queue taken. The sockets never send or receive.
//!
//! Written by hand: this needs four socket options and a bind, not an XDP data path, and no
//! crate in the tree wraps AF_XDP.

use super::Error;
use std::os::fd::{FromRawFd, OwnedFd};

const AF_XDP: libc::c_int = 44;
const SOL_XDP: libc::c_int = 283;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_COPY: u16 = 1 << 1;
/// The smallest UMEM: one page, two chunks.
const UMEM_BYTES: usize = 4096;
const CHUNK: u32 = 2048;
/// More queues than any interface has (the kernel answers `EINVAL` past the last one).
const MAX_QUEUES: u32 = 4096;

/// `struct xdp_umem_reg` (the v2 layout the kernel takes by size).
#[repr(C)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

/// `struct sockaddr_xdp`.
#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// Take every queue of interface `name` with an AF_XDP socket held for the life of the process;
/// how many. Zero without AF_XDP in the kernel (then nothing can send that way either).
pub fn hold_queues(name: &str) -> Result<u32, Error> {
    // A name with a NUL in it names no interface.
    let c_name = std::ffi::CString::new(name)
        .map_err(|_| Error::NoInterface(name.escape_debug().to_string()))?;
    // SAFETY: a valid NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
    if ifindex == 0 {
        return Err(Error::NoInterface(name.to_string()));
    }
    let mut held = 0;
    for queue in 0..MAX_QUEUES {
        match bind_queue(ifindex, queue) {
            Ok(fd) => {
                // Held until the guard stops: dropping it would free the queue.
                std::mem::forget(fd);
                held += 1;
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && queue > 0 => break,
            Err(e) if e.raw_os_error() == Some(libc::EAFNOSUPPORT) && queue == 0 => return Ok(0),
            Err(source) => {
                return Err(Error::XdpQueue {
                    device: name.to_string(),
                    queue,
                    source,
                })
            }
        }
    }
    Ok(held)
}

/// One AF_XDP socket bound to `queue` of interface `ifindex` (copy mode, a TX ring).
pub(crate) fn bind_queue(ifindex: u32, queue: u32) -> std::io::Result<OwnedFd> {
    let last = std::io::Error::last_os_error;
    // SAFETY: plain socket call.
    let raw = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(last());
    }
    // SAFETY: `raw` is a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    // The UMEM's pages are pinned by the kernel at registration and stay mapped, like the
    // socket, for the guard's life.
    // SAFETY: an anonymous private mapping of one page.
    let area = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            UMEM_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if area == libc::MAP_FAILED {
        return Err(last());
    }
    let reg = UmemReg {
        addr: area as u64,
        len: UMEM_BYTES as u64,
        chunk_size: CHUNK,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    let set = |option: libc::c_int, value: *const libc::c_void, len: usize| {
        // SAFETY: `value` points at `len` readable bytes of the type the option takes.
        let r = unsafe { libc::setsockopt(raw, SOL_XDP, option, value, len as libc::socklen_t) };
        if r == 0 {
            Ok(())
        } else {
            Err(last())
        }
    };
    set(
        XDP_UMEM_REG,
        (&reg as *const UmemReg).cast(),
        std::mem::size_of::<UmemReg>(),
    )?;
    let one: libc::c_int = 1;
    let int = (&one as *const libc::c_int).cast();
    for ring in [XDP_UMEM_FILL_RING, XDP_UMEM_COMPLETION_RING, XDP_TX_RING] {
        set(ring, int, std::mem::size_of::<libc::c_int>())?;
    }
    let addr = SockaddrXdp {
        family: AF_XDP as u16,
        flags: XDP_COPY,
        ifindex,
        queue_id: queue,
        shared_umem_fd: 0,
    };
    // SAFETY: `addr` is a sockaddr_xdp of the size given.
    let r = unsafe {
        libc::bind(
            raw,
            (&addr as *const SockaddrXdp).cast(),
            std::mem::size_of::<SockaddrXdp>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(last());
    }
    Ok(fd)
}
