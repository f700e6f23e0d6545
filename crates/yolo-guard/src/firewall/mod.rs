//! The firewall: the `inet yolo` nftables table and everything that changes or reads it.
//!
//! - `ruleset`: the table as typed `nftables` values, pure (the one description of it);
//! - `netlink`: those values sent to the kernel over NETLINK_NETFILTER and read back, and the
//!   DNS path's set-element batches (`netlink::setelem`), without the `nft` program;
//! - `sets`: apply, verify and list as the rest of the guard calls them;
//! - `revoke`: what `yolo deny` takes out of the dynamic sets, pure;
//! - `xsk`: the AF_XDP queues held so an image build cannot send around the ruleset;
//! - `nflog`: the packets the ruleset refused, read back as `blocked` audit events.
//!
//! Not here: when the table is applied (start-up, `run`) or which names DNS opens (`dns`).

pub(crate) mod netlink;
pub(crate) mod nflog;
pub(crate) mod revoke;
pub(crate) mod ruleset;
pub(crate) mod sets;
pub(crate) mod xsk;
