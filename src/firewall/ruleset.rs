//! The `inet yolo` table as typed `nftables` values. Pure: applying it is the guard's job.
//!
//! Contract (filled in by the firewall work):
//! - `build(config: &GuardConfig, allow: &Allowlist) -> Nftables<'static>`: flush-and-create
//!   batch for table `inet yolo`.
//! - `verify(expected: &Nftables, listed: &Nftables) -> Result<(), String>`: compare what
//!   `nft -j list table inet yolo` shows with what was applied.
//! - `add_addresses(&[(IpAddr, Ports)], timeout_secs) -> Nftables<'static>`: delete+add of
//!   dynamic set elements in one batch (timeouts refresh on old kernels too).
//! - `remove_addresses(&[(IpAddr, Ports)]) -> Nftables<'static>`.
