//! Allowlist patterns: exact domains, `*.domain` wildcards, CIDRs, `host:port`. Pure.
//!
//! Contract (filled in by the firewall work):
//! - `Allowlist::parse(&[String]) -> Result<Allowlist, String>`: a clear message naming the bad
//!   pattern and the accepted forms.
//! - `Allowlist::lookup(&self, name) -> Option<Ports>`: `None` = denied; matching is
//!   case-insensitive, ignores a trailing dot; `*.example.com` matches `a.example.com` and
//!   `a.b.example.com` but not `example.com`.
//! - `Allowlist::networks(&self) -> Vec<(IpNet, Ports)>`: static CIDR entries.
//! - `Allowlist::extend` / `Allowlist::remove` for `yolo allow` / `yolo deny`.
