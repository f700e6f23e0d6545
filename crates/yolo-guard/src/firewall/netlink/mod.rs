//! Applying the ruleset's typed `nftables` batches (`ruleset::build`, `egress`,
//! `static_networks`, ...) over NETLINK_NETFILTER, without the `nft` program: each batch is
//! translated to nf_tables netlink messages and sent as ONE atomic NFNL batch (begin, messages,
//! end), every message acknowledged; the first refusal fails the whole batch and its error names
//! the object the kernel refused.
//!
//! The translation produces the bytecode `nft -j -f -` produces for the same JSON (dependencies
//! such as `meta nfproto ipv4` before `ip daddr`, registers of concatenations, anonymous sets,
//! interval elements, set user data), so `nft list ruleset` shows the same ruleset either way;
//! the netns test `netlink_apply_lists_like_nft` proves it for several configurations.
//!
//! It covers exactly what the ruleset uses — tables, base chains with hook/priority/policy/device,
//! named sets of ipv4/ipv6 addresses, inet services and their concatenations (timeout and
//! interval flags), named counters, flush of chains and sets, element add/delete (timeouts,
//! prefixes, concatenated prefixes), and rules made of meta / payload / ct state matches, set
//! lookups, anonymous sets, named and anonymous counters, log group/prefix, reject, meta set,
//! accept and drop — and refuses anything else with an error naming it, so a new kind of rule
//! in `ruleset` cannot be silently mistranslated.
//!
//! Written by hand (on the NFNL batch `setelem` uses too): the crates that speak nf_tables over
//! netlink were checked — `rustables` generates bindings with bindgen/libclang and is GPL-3.0,
//! `nftnl` links the C libnftnl, `nf_tables` 0.1 (pure Rust, a first release, a quarter of it
//! documented) builds rules with its own `RuleBuilder`, and `netlink-bindings` offers generated
//! attribute builders — none turns the `nftables` crate's values into messages, which is the
//! part that must match `nft` (and adopting one would make a second description of the
//! ruleset, where `ruleset` must stay the only one).
//!
//! - `wire`: the message and attribute format, both ways (pure);
//! - `types`: nft's datatypes as bytes, both ways (pure);
//! - `batch`, `encode`, `exprs`: the translation of a typed batch (pure) and [`apply`];
//! - `socket`: the exchanges with the kernel (send a batch, read a dump);
//! - `verify`: the table read back and compared; `list`: the table as `nft -j list` shows it;
//! - `setelem`: the DNS path's element batches, built on the same wire.

mod batch;
mod encode;
mod exprs;
mod list;
pub(crate) mod setelem;
mod socket;
mod types;
mod verify;
mod wire;

#[cfg(test)]
mod fixture_tests;

pub(crate) use encode::apply;
pub(crate) use list::list_table_value;
pub(crate) use verify::verify;
