//! One NFNL batch under construction: its messages, which of them must be acknowledged, what
//! each one does (for the error that names what the kernel refused), and the named sets it
//! defines. Shared by the translation of objects (`encode`) and of rules (`exprs`).

use super::types::Ty;
use super::wire::*;
use crate::firewall::error::Error;
use serde_json::Value;

/// One NFNL batch under construction, with a description of every message for errors.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) buf: Vec<u8>,
    pub(super) acked: Vec<u32>,
    pub(super) what: Vec<(u32, String)>,
    pub(super) seq: u32,
    /// Batch-local set ids (named and anonymous sets).
    pub(super) set_id: u32,
}

impl Batch {
    pub(super) fn raw(
        &mut self,
        kind: u16,
        flags: u16,
        family: u8,
        res_id: u16,
        attrs: &[u8],
    ) -> u32 {
        push_message(
            &mut self.buf,
            &mut self.seq,
            (kind, flags),
            (family, res_id),
            attrs,
        )
    }

    pub(super) fn msg(&mut self, kind: u16, flags: u16, family: u8, attrs: &[u8], what: String) {
        let seq = self.raw(
            (NFNL_SUBSYS_NFTABLES << 8) | kind,
            NLM_F_REQUEST | NLM_F_ACK | flags,
            family,
            0,
            attrs,
        );
        self.acked.push(seq);
        self.what.push((seq, what));
    }
}

/// The named sets of this batch (and their key layout), for elements and lookups.
#[derive(Default)]
pub(super) struct Sets(pub(super) Vec<(String, u32, Vec<Ty>, u32)>);

impl Sets {
    pub(super) fn get(&self, name: &str) -> Option<&(String, u32, Vec<Ty>, u32)> {
        self.0.iter().find(|(n, ..)| n == name)
    }
}

pub(super) fn family(obj: &Value) -> Result<u8, Error> {
    match obj["family"].as_str() {
        Some("inet") => Ok(NFPROTO_INET),
        Some("netdev") => Ok(NFPROTO_NETDEV),
        other => Err(Error::translate(format!(
            "family {other:?} is not supported"
        ))),
    }
}

pub(super) fn text<'a>(obj: &'a Value, key: &str) -> Result<&'a str, Error> {
    obj[key]
        .as_str()
        .ok_or_else(|| Error::translate(format!("{key} missing in {obj}")))
}
