//! The seam between the running guard and the ruleset: the batches it applies come through
//! [`Batches`], so the guard's runtime can be driven in tests by batches of their own, and
//! [`Ruleset`] is the production one (`ruleset`, pure).

use super::{ruleset, sets, Error};
use nftables::schema::Nftables;
use std::net::IpAddr;
use yolo_protocol::allowlist::{Allowlist, Ports};
use yolo_protocol::GuardConfig;

/// The nft batches the guard applies. `ruleset` provides them; the trait keeps the
/// guard's runtime testable and independent of how the ruleset is built.
pub trait Batches: Send + Sync + 'static {
    fn build(&self, config: &GuardConfig, allow: &Allowlist) -> Nftables<'static>;
    /// Compare what the kernel holds with `expected`, applied before.
    fn verify(&self, expected: &Nftables<'static>) -> Result<(), Error>;
    fn add_addresses(&self, elements: &[(IpAddr, Ports)], timeout_secs: u64) -> Nftables<'static>;
    fn remove_addresses(&self, elements: &[(IpAddr, Ports)]) -> Nftables<'static>;
}

/// The production batches: `ruleset`.
pub struct Ruleset;

impl Batches for Ruleset {
    fn build(&self, config: &GuardConfig, allow: &Allowlist) -> Nftables<'static> {
        ruleset::build(config, allow)
    }
    fn verify(&self, expected: &Nftables<'static>) -> Result<(), Error> {
        sets::verify(expected)
    }
    fn add_addresses(&self, elements: &[(IpAddr, Ports)], timeout_secs: u64) -> Nftables<'static> {
        ruleset::add_addresses(elements, timeout_secs)
    }
    fn remove_addresses(&self, elements: &[(IpAddr, Ports)]) -> Nftables<'static> {
        ruleset::remove_addresses(elements)
    }
}
