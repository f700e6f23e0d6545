//! nft's datatypes as the kernel holds them: how a value of each is laid out in bytes (to
//! encode a match, a set key or an element) and read back (to list elements), a set's key type
//! with the user data `nft` stores beside it, and the neighbours of a key that intervals need.

use super::wire::*;
use crate::firewall::error::Error;
use serde_json::Value;
use std::net::IpAddr;

/// What a value on the right of a match is encoded as: it depends on what the left loads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Ty {
    /// Interface index, host order (`meta iif/oif "lo"`).
    Ifindex,
    /// 32-bit host-order integer (`meta mark`, `meta priority`).
    U32,
    /// Ether type, big-endian (`meta protocol arp`).
    EtherType,
    /// IP protocol number (`meta l4proto tcp`).
    L4proto,
    Ipv4,
    Ipv6,
    /// Port, big-endian.
    Service,
    Icmpv6Type,
    CtState,
    /// Interface name, NUL-padded to IFNAMSIZ (`meta iifname "eth0"`).
    Ifname,
    /// Hardware address (`ether saddr`, `arp saddr ether`).
    Ether,
    /// A route's address type, host order (`fib saddr type local`).
    AddrType,
}

impl Ty {
    pub(super) fn len(self) -> usize {
        match self {
            Ty::Ifindex | Ty::U32 | Ty::Ipv4 | Ty::CtState | Ty::AddrType => 4,
            Ty::EtherType | Ty::Service => 2,
            Ty::L4proto | Ty::Icmpv6Type => 1,
            Ty::Ipv6 | Ty::Ifname => 16,
            Ty::Ether => 6,
        }
    }

    pub(super) fn set_type(self) -> Result<u32, Error> {
        Ok(match self {
            Ty::Ipv4 => TYPE_IPADDR,
            Ty::Ipv6 => TYPE_IP6ADDR,
            Ty::L4proto => TYPE_INET_PROTOCOL,
            Ty::Service => TYPE_INET_SERVICE,
            Ty::Icmpv6Type => TYPE_ICMP6_TYPE,
            other => {
                return Err(Error::translate(format!(
                    "no set of {other:?} values is supported"
                )))
            }
        })
    }

    pub(super) fn of_name(name: &str) -> Result<Ty, Error> {
        Ok(match name {
            "ipv4_addr" => Ty::Ipv4,
            "ipv6_addr" => Ty::Ipv6,
            "inet_service" => Ty::Service,
            "inet_proto" => Ty::L4proto,
            other => {
                return Err(Error::translate(format!(
                    "set type {other} is not supported"
                )))
            }
        })
    }

    /// The value's bytes, as the kernel compares them.
    pub(super) fn encode(self, v: &Value) -> Result<Vec<u8>, Error> {
        let bad = || Error::translate(format!("value {v} does not fit {self:?}"));
        let num = v.as_u64();
        let text = v.as_str();
        Ok(match self {
            Ty::Ifindex => {
                let name = text.ok_or_else(bad)?;
                let c = std::ffi::CString::new(name).map_err(|_| bad())?;
                // SAFETY: a valid NUL-terminated string.
                let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
                if index == 0 {
                    return Err(Error::translate(format!("no interface named {name}")));
                }
                index.to_ne_bytes().to_vec()
            }
            Ty::U32 => (num.ok_or_else(bad)? as u32).to_ne_bytes().to_vec(),
            Ty::AddrType => {
                let kind: u32 = match (text, num) {
                    (Some("unicast"), _) => 1,
                    (Some("local"), _) => 2,
                    (Some("broadcast"), _) => 3,
                    (Some("anycast"), _) => 4,
                    (Some("multicast"), _) => 5,
                    (_, Some(n)) => n as u32,
                    _ => return Err(bad()),
                };
                kind.to_ne_bytes().to_vec()
            }
            Ty::Ifname => {
                let name = text.ok_or_else(bad)?.as_bytes();
                if name.len() >= 16 || name.contains(&0) {
                    return Err(bad());
                }
                let mut bytes = name.to_vec();
                bytes.resize(16, 0);
                bytes
            }
            Ty::Ether => {
                let octets = text
                    .ok_or_else(bad)?
                    .split(':')
                    .map(|o| u8::from_str_radix(o, 16).map_err(|_| bad()))
                    .collect::<Result<Vec<u8>, Error>>()?;
                if octets.len() != 6 {
                    return Err(bad());
                }
                octets
            }
            Ty::EtherType => match (text, num) {
                (Some("arp"), _) => 0x0806u16.to_be_bytes().to_vec(),
                (Some("ip"), _) => 0x0800u16.to_be_bytes().to_vec(),
                (Some("ip6"), _) => 0x86ddu16.to_be_bytes().to_vec(),
                (_, Some(n)) => (n as u16).to_be_bytes().to_vec(),
                _ => return Err(bad()),
            },
            Ty::L4proto => vec![match (text, num) {
                (Some("tcp"), _) => 6,
                (Some("udp"), _) => 17,
                (Some("icmp"), _) => 1,
                (Some("ipv6-icmp" | "icmpv6"), _) => 58,
                (_, Some(n)) => n as u8,
                _ => return Err(bad()),
            }],
            Ty::Ipv4 | Ty::Ipv6 => {
                let addr: IpAddr = text.ok_or_else(bad)?.parse().map_err(|_| bad())?;
                match (self, addr) {
                    (Ty::Ipv4, IpAddr::V4(a)) => a.octets().to_vec(),
                    (Ty::Ipv6, IpAddr::V6(a)) => a.octets().to_vec(),
                    _ => return Err(bad()),
                }
            }
            Ty::Service => (num.ok_or_else(bad)? as u16).to_be_bytes().to_vec(),
            Ty::Icmpv6Type => vec![match (text, num) {
                (Some("nd-router-solicit"), _) => 133,
                (Some("nd-router-advert"), _) => 134,
                (Some("nd-neighbor-solicit"), _) => 135,
                (Some("nd-neighbor-advert"), _) => 136,
                (_, Some(n)) => n as u8,
                _ => return Err(bad()),
            }],
            Ty::CtState => {
                let bit = |s: &str| -> Result<u32, Error> {
                    Ok(match s {
                        "invalid" => 1,
                        "established" => 2,
                        "related" => 4,
                        "new" => 8,
                        "untracked" => 64,
                        _ => return Err(bad()),
                    })
                };
                let mask = match v {
                    Value::Array(items) => items.iter().try_fold(0, |m, i| {
                        Ok::<_, Error>(m | bit(i.as_str().ok_or_else(bad)?)?)
                    })?,
                    _ => bit(text.ok_or_else(bad)?)?,
                };
                mask.to_ne_bytes().to_vec()
            }
        })
    }
}

/// Pad a field of a concatenation to the 4-byte registers it occupies.
pub(super) fn padded(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.resize((bytes.len() + 3) & !3, 0);
    bytes
}

/// The key type of a set in nft's encoding, with the user data `nft` stores with it (the key's
/// byte order and, for a concatenation, its fields), so `nft list` prints it the same.
pub(super) fn key_type(types: &[Ty]) -> Result<(u32, usize, Vec<u8>), Error> {
    let mut id = 0;
    let mut len = 0;
    for t in types {
        id = (id << TYPE_BITS) | t.set_type()?;
        len += (t.len() + 3) & !3;
    }
    let udata = if types.len() == 1 {
        let order: u8 = if matches!(types[0], Ty::L4proto) {
            1
        } else {
            2
        };
        vec![0, 4, order, 0, 0, 0]
    } else {
        vec![0, 4, 0, 0, 0, 0, 3, 8, 0, 4, 13, 0, 0, 0, 1, 0]
    };
    if types.len() == 1 {
        len = types[0].len();
    }
    Ok((id, len, udata))
}

/// `key + 1`, or None when it overflows (the range reaches the top of the space).
pub(super) fn successor(key: &[u8]) -> Option<Vec<u8>> {
    let mut next = key.to_vec();
    for byte in next.iter_mut().rev() {
        if *byte == 0xff {
            *byte = 0;
        } else {
            *byte += 1;
            return Some(next);
        }
    }
    None
}

/// `key - 1` (the last key of a range whose end element is `key`).
pub(super) fn predecessor(key: &[u8]) -> Vec<u8> {
    let mut prev = key.to_vec();
    for byte in prev.iter_mut().rev() {
        if *byte == 0 {
            *byte = 0xff;
        } else {
            *byte -= 1;
            break;
        }
    }
    prev
}

/// A key's fields from a set's key type (nft's concatenation of 6-bit type ids).
pub(super) fn key_types(key_type: u32) -> Vec<Ty> {
    let mut types = Vec::new();
    let mut t = key_type;
    while t != 0 {
        types.push(match t & ((1 << TYPE_BITS) - 1) {
            TYPE_IPADDR => Ty::Ipv4,
            TYPE_IP6ADDR => Ty::Ipv6,
            TYPE_INET_SERVICE => Ty::Service,
            TYPE_INET_PROTOCOL => Ty::L4proto,
            _ => Ty::U32,
        });
        t >>= TYPE_BITS;
    }
    types.reverse();
    types
}

/// One field's value as nft's JSON shows it.
pub(super) fn render_field(ty: Ty, bytes: &[u8]) -> Value {
    match ty {
        Ty::Ipv4 if bytes.len() >= 4 => {
            Value::from(std::net::Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]).to_string())
        }
        Ty::Ipv6 if bytes.len() >= 16 => {
            let octets: [u8; 16] = bytes[..16].try_into().unwrap();
            Value::from(std::net::Ipv6Addr::from(octets).to_string())
        }
        Ty::Service if bytes.len() >= 2 => Value::from(u16::from_be_bytes([bytes[0], bytes[1]])),
        Ty::L4proto if !bytes.is_empty() => Value::from(bytes[0]),
        _ => Value::from(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

/// `lo..=hi` of one field as an address, a prefix, or a range.
pub(super) fn render_range(ty: Ty, lo: &[u8], hi: &[u8]) -> Value {
    if lo == hi {
        return render_field(ty, lo);
    }
    let bits = lo.len() * 8;
    let mut len = bits;
    // The longest common prefix, valid if the rest is all zeros in lo and all ones in hi.
    for bit in 0..bits {
        let mask = 0x80 >> (bit % 8);
        if lo[bit / 8] & mask != hi[bit / 8] & mask {
            len = bit;
            break;
        }
    }
    let aligned = (len..bits).all(|bit| {
        let mask = 0x80 >> (bit % 8);
        lo[bit / 8] & mask == 0 && hi[bit / 8] & mask != 0
    });
    if aligned && matches!(ty, Ty::Ipv4 | Ty::Ipv6) {
        serde_json::json!({"prefix": {"addr": render_field(ty, lo), "len": len}})
    } else {
        serde_json::json!({"range": [render_field(ty, lo), render_field(ty, hi)]})
    }
}
