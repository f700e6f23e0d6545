//! The nfnetlink wire format, both ways, with no socket: a message's header and `nfgenmsg`,
//! attributes (nested, big-endian numbers, strings, data values), and an attribute list parsed
//! back. Pure byte work, so it is tested against fixed bytes without root.

pub(crate) const NFNL_SUBSYS_NFTABLES: u16 = 10;
pub(crate) const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
pub(crate) const NFNL_MSG_BATCH_END: u16 = 0x11;
pub(crate) const NFT_MSG_NEWTABLE: u16 = 0;
pub(crate) const NFT_MSG_NEWCHAIN: u16 = 3;
pub(crate) const NFT_MSG_NEWRULE: u16 = 6;
pub(crate) const NFT_MSG_DELRULE: u16 = 8;
pub(crate) const NFT_MSG_NEWSET: u16 = 9;
pub(crate) const NFT_MSG_NEWSETELEM: u16 = 12;
pub(crate) const NFT_MSG_DELSETELEM: u16 = 14;
pub(crate) const NFT_MSG_NEWOBJ: u16 = 18;
pub(crate) const NLM_F_REQUEST: u16 = 0x1;
pub(crate) const NLM_F_ACK: u16 = 0x4;
pub(crate) const NLM_F_CREATE: u16 = 0x400;
pub(crate) const NLM_F_APPEND: u16 = 0x800;
pub(crate) const NLA_F_NESTED: u16 = 0x8000;
pub(crate) const NFPROTO_INET: u8 = 1;
pub(crate) const NFPROTO_NETDEV: u8 = 5;

// Set flags.
pub(crate) const NFT_SET_ANONYMOUS: u32 = 0x1;
pub(crate) const NFT_SET_CONSTANT: u32 = 0x2;
pub(crate) const NFT_SET_INTERVAL: u32 = 0x4;
pub(crate) const NFT_SET_TIMEOUT: u32 = 0x10;
pub(crate) const NFT_SET_CONCAT: u32 = 0x80;
pub(crate) const NFT_SET_ELEM_INTERVAL_END: u32 = 0x1;

// nft's datatype ids (key types) and how a concatenation combines them.
pub(crate) const TYPE_IPADDR: u32 = 7;
pub(crate) const TYPE_IP6ADDR: u32 = 8;
pub(crate) const TYPE_INET_PROTOCOL: u32 = 12;
pub(crate) const TYPE_INET_SERVICE: u32 = 13;
pub(crate) const TYPE_ICMP6_TYPE: u32 = 29;
pub(crate) const TYPE_BITS: u32 = 6;

// Registers: the verdict, the 16-byte registers and the 4-byte ones.
pub(crate) const REG_VERDICT: u32 = 0;
pub(crate) const REG_1: u32 = 1;
pub(crate) const REG32_00: u32 = 8;

// Reading back.
pub(crate) const NFT_MSG_GETCHAIN: u16 = 4;
pub(crate) const NFT_MSG_GETRULE: u16 = 7;
pub(crate) const NFT_MSG_GETSET: u16 = 10;
pub(crate) const NFT_MSG_GETSETELEM: u16 = 13;
pub(crate) const NFT_MSG_GETOBJ: u16 = 19;
pub(crate) const NLM_F_DUMP: u16 = 0x300;
pub(crate) const NLMSG_ERROR: u16 = 2;
pub(crate) const NLMSG_DONE: u16 = 3;

/// One nfnetlink message appended to `buf`: the netlink header (`kind`, `flags`, the batch's
/// next sequence number, taken from `seq` and returned), `struct nfgenmsg` (`family`, version 0,
/// `res_id` big-endian), then `attrs`.
pub(crate) fn push_message(
    buf: &mut Vec<u8>,
    seq: &mut u32,
    (kind, flags): (u16, u16),
    (family, res_id): (u8, u16),
    attrs: &[u8],
) -> u32 {
    *seq += 1;
    let seq = *seq;
    let len = 16 + 4 + attrs.len();
    buf.extend_from_slice(&(len as u32).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(&flags.to_ne_bytes());
    buf.extend_from_slice(&seq.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes());
    buf.push(family);
    buf.push(0);
    buf.extend_from_slice(&res_id.to_be_bytes());
    buf.extend_from_slice(attrs);
    seq
}

/// A netlink attribute (length, type, payload padded to 4 bytes).
pub(crate) fn attr(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    buf.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize((buf.len() + 3) & !3, 0);
}

/// A string attribute's payload: the bytes and a NUL.
pub(crate) fn cstr(s: &str) -> Vec<u8> {
    let mut bytes = s.as_bytes().to_vec();
    bytes.push(0);
    bytes
}

pub(super) fn nested(buf: &mut Vec<u8>, kind: u16, f: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    f(&mut inner);
    attr(buf, kind | NLA_F_NESTED, &inner);
}

pub(super) fn be32(buf: &mut Vec<u8>, kind: u16, v: u32) {
    attr(buf, kind, &v.to_be_bytes());
}

pub(super) fn string(buf: &mut Vec<u8>, kind: u16, s: &str) {
    attr(buf, kind, &cstr(s));
}

pub(super) fn data_value(buf: &mut Vec<u8>, kind: u16, bytes: &[u8]) {
    nested(buf, kind, |d| attr(d, 1, bytes)); // NFTA_DATA_VALUE
}

/// Attributes of a message body: (type without flags, payload).
pub(super) fn parse(mut buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let len = u16::from_ne_bytes([buf[0], buf[1]]) as usize;
        let kind = u16::from_ne_bytes([buf[2], buf[3]]) & 0x3fff;
        if len < 4 || len > buf.len() {
            break;
        }
        out.push((kind, &buf[4..len]));
        buf = &buf[((len + 3) & !3).min(buf.len())..];
    }
    out
}

pub(super) fn get<'a>(attrs: &[(u16, &'a [u8])], kind: u16) -> Option<&'a [u8]> {
    attrs.iter().find(|(k, _)| *k == kind).map(|(_, v)| *v)
}

pub(super) fn get_str(attrs: &[(u16, &[u8])], kind: u16) -> String {
    get(attrs, kind)
        .map(|v| String::from_utf8_lossy(v.split(|b| *b == 0).next().unwrap_or(&[])).into_owned())
        .unwrap_or_default()
}

pub(super) fn get_be32(attrs: &[(u16, &[u8])], kind: u16) -> Option<u32> {
    get(attrs, kind).and_then(|v| Some(u32::from_be_bytes(v.get(..4)?.try_into().ok()?)))
}

pub(super) fn get_be64(attrs: &[(u16, &[u8])], kind: u16) -> Option<u64> {
    get(attrs, kind).and_then(|v| Some(u64::from_be_bytes(v.get(..8)?.try_into().ok()?)))
}

/// The body of a dump request for one table: its name (attribute 1, `NFTA_*_TABLE` for every
/// object kind).
pub(super) fn table_request(table: &str) -> Vec<u8> {
    let mut a = Vec::new();
    string(&mut a, 1, table);
    a
}
