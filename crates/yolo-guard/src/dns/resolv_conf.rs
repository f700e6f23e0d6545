//! The guard and /etc/resolv.conf: where the upstream servers come from when the config names
//! none, and the file made to name the guard itself once they are read.

use std::net::SocketAddr;

/// The nameservers /etc/resolv.conf names (the engine's), read before
/// [`point_resolver_at_guard`] rewrites it.
pub(crate) fn nameservers() -> Vec<SocketAddr> {
    let text = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    yolo_protocol::resolv_conf_nameservers(&text)
}

/// The agent container shares the guard's /etc/resolv.conf (Docker gives a container that joins
/// another's network namespace that container's file), so after reading the upstream servers
/// from it, the guard makes it name itself. Docker's search/options lines are kept.
pub(crate) fn point_resolver_at_guard() -> std::io::Result<()> {
    let path = "/etc/resolv.conf";
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let mut text = String::from(
        "# written by yolo-guard: every query goes through the allowlist\nnameserver 127.0.0.1\n",
    );
    for line in old
        .lines()
        .filter(|l| l.starts_with("search") || l.starts_with("options"))
    {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(path, text)
}
