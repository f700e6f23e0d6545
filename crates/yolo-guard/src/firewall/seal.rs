//! The build phase's seal: an image build's RUN steps share the guard's namespace holding
//! NET_RAW, so frames from packet sockets must be stamped and filtered at every interface's
//! egress (`ruleset::egress`), and every AF_XDP queue held (`xsk`), before the build starts.
//! Interface discovery (names, IPv4 addresses) lives here because only the seal needs it.

use super::{ruleset, sets, xsk, Error};

/// [`ruleset::egress`] on every interface of the namespace but loopback, with a fresh stamp.
pub(crate) fn seal_egress() -> Result<(), Error> {
    let addresses = ipv4_addresses()?;
    let mut devices = Vec::new();
    for name in interfaces()? {
        let mac = std::fs::read_to_string(format!("/sys/class/net/{name}/address"))
            .map_err(|source| Error::Host {
                doing: format!("read the address of {name}"),
                source,
            })?
            .trim()
            .to_string();
        let ipv4 = addresses
            .iter()
            .filter(|(dev, _)| *dev == name)
            .map(|(_, ip)| *ip)
            .collect();
        devices.push(ruleset::Device { name, mac, ipv4 });
    }
    let mut random = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut file| std::io::Read::read_exact(&mut file, &mut random))
        .map_err(|source| Error::Host {
            doing: "read /dev/urandom".into(),
            source,
        })?;
    let [m0, m1, m2, m3, p0, p1, p2, p3] = random;
    let stamp = ruleset::Stamp {
        // Never 0: that is what every unstamped packet carries.
        mark: u32::from_ne_bytes([m0, m1, m2, m3]).max(1),
        priority: u32::from_ne_bytes([p0, p1, p2, p3]).max(1),
    };
    let egress = ruleset::egress(&devices, stamp);
    sets::apply(&egress)?;
    sets::verify(&egress)
}

/// [`xsk::hold_queues`] on every interface of the namespace but loopback.
pub(crate) fn hold_xdp_queues() -> Result<(), Error> {
    for name in interfaces()? {
        xsk::hold_queues(&name)?;
    }
    Ok(())
}

/// The namespace's interfaces but loopback, sorted.
fn interfaces() -> Result<Vec<String>, Error> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map_err(|source| Error::Host {
            doing: "list the interfaces".into(),
            source,
        })?
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "lo")
        .collect();
    names.sort();
    Ok(names)
}

/// Every IPv4 address of the namespace's interfaces, with the interface's name (`getifaddrs`;
/// std has no interface list, and one call here is all the guard needs).
fn ipv4_addresses() -> Result<Vec<(String, std::net::Ipv4Addr)>, Error> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list this function frees below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(Error::Host {
            doing: "list the addresses".into(),
            source: std::io::Error::last_os_error(),
        });
    }
    let mut found = Vec::new();
    let mut at = head;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs returned, not yet freed.
        let entry = unsafe { &*at };
        // SAFETY: ifa_addr, when set, points at a sockaddr whose family says its type.
        if !entry.ifa_addr.is_null()
            && i32::from(unsafe { (*entry.ifa_addr).sa_family }) == libc::AF_INET
        {
            // SAFETY: an AF_INET address is a sockaddr_in; ifa_name is a C string.
            let (addr, name) = unsafe {
                (
                    &*(entry.ifa_addr as *const libc::sockaddr_in),
                    std::ffi::CStr::from_ptr(entry.ifa_name),
                )
            };
            // A labelled address (`eth0:1`) is the interface's own too.
            let name = name.to_string_lossy();
            let device = name.split(':').next().unwrap_or_default();
            found.push((
                device.to_string(),
                std::net::Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr)),
            ));
        }
        at = entry.ifa_next;
    }
    // SAFETY: the list getifaddrs returned, freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(found)
}
