//! What the crate's tests share: the real-kernel tests' throwaway network namespace, whether it
//! can be had here, and a firewall-mode config.

pub(crate) use crate::firewall::nflog::tests::{can_use_netns, skip};
use crate::firewall::sets;
use yolo_protocol::{GuardConfig, NetworkMode};

/// A firewall-mode config for the real-kernel tests, with `allow` as its allowlist.
pub(crate) fn firewall_config(allow: &[&str]) -> GuardConfig {
    GuardConfig {
        session: "t".into(),
        mode: NetworkMode::Firewall,
        allow: allow.iter().map(|p| p.to_string()).collect(),
        upstream: vec![],
        ttl_floor_secs: 60,
        deny_nxdomain: false,
        published_ports: vec![],
        audit_path: "/dev/null".into(),
        control_socket: "/dev/null".into(),
        host_control_socket: None,
        control_uids: vec![],
        allow_internal_answers: false,
        max_session_log: yolo_protocol::DEFAULT_MAX_SESSION_LOG,
        phase: None,
        exec_audit: None,
        file_watch: None,
        local_names: vec![],
        audit_to_stdout: false,
        gateway: None,
    }
}

/// `f` on a thread inside a throwaway network namespace; `None` (skipped) without root,
/// `nft` or `ip netns`.
pub(crate) fn in_netns<T: Send + 'static>(
    tag: &str,
    f: impl FnOnce() -> std::result::Result<T, String> + Send + 'static,
) -> Option<T> {
    if let Err(why) = can_use_netns() {
        skip(why);
        return None;
    }
    let name = format!("yolo-guardtest-{tag}-{}", std::process::id());
    if !std::process::Command::new("ip")
        .args(["netns", "add", &name])
        .status()
        .is_ok_and(|s| s.success())
    {
        skip("cannot create a network namespace");
        return None;
    }
    let path = format!("/run/netns/{name}");
    let result = std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(&path).map_err(|e| e.to_string())?;
        // SAFETY: a valid netns fd; only this thread (and the nft it forks) moves.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err("setns failed".into());
        }
        f()
    })
    .join();
    let _ = std::process::Command::new("ip")
        .args(["netns", "del", &name])
        .status();
    Some(result.expect("netns thread").expect("real nft path"))
}

/// The elements of the dynamic sets (`allow*`), as the kernel lists them.
pub(crate) fn dynamic_elements() -> std::result::Result<Vec<String>, String> {
    let (elements, _) = sets::summarize(&sets::list_table_value()?);
    Ok(elements
        .into_iter()
        .filter(|e| e.set.starts_with("allow"))
        .map(|e| e.element)
        .collect())
}
