//! The firewall: the `inet yolo` nftables table and everything that changes or reads it.
//!
//! - `ruleset`: the table as typed `nftables` values, pure (the one description of it);
//! - `netlink`: those values sent to the kernel over NETLINK_NETFILTER and read back, and the
//!   DNS path's set-element batches (`netlink::setelem`), without the `nft` program;
//! - `batches`: the seam through which the running guard gets its batches (`Batches`);
//! - `sets`: apply, verify and list as the rest of the guard calls them;
//! - `revoke`: what `yolo deny` takes out of the dynamic sets, pure;
//! - `seal`: a build's frames stamped at every interface's egress, and (`xsk`) every AF_XDP
//!   queue held, so an image build cannot send around the ruleset;
//! - `nflog`: the packets the ruleset refused, read back as `blocked` audit events;
//! - `error`: what failed, by kind ([`Error`]): not expressible, refused by the kernel, the
//!   socket, a verification's difference, the seal's reads.
//!
//! Not here: when the table is applied (start-up, `run`) or which names DNS opens (`dns`).

pub(crate) mod batches;
pub(crate) mod error;
pub(crate) mod netlink;
pub(crate) mod nflog;
pub(crate) mod revoke;
pub(crate) mod ruleset;
pub(crate) mod seal;
pub(crate) mod sets;
pub(crate) mod xsk;

#[cfg(test)]
mod netns_tests;

pub(crate) use error::Error;
