//! Every agent preset end to end, as a new user on this machine would run it: `yolo init
//! --agent NAME`, `yolo up` (the template's build: apt, then the agent's npm or pip installer,
//! behind the build firewall), `yolo run NAME -- --version` printing the agent's version from
//! inside the firewalled container. This machine intercepts TLS with its own CA, so the tests
//! hand yolo the host's extra certificates (`--extra-ca`), as a user behind such a proxy would;
//! without it npm fails with SELF_SIGNED_CERT_IN_CHAIN.

use crate::support::*;

/// The host's own CA certificates (Debian's folder for them), when it has any.
const HOST_CA: &str = "/usr/local/share/ca-certificates";

/// The build allowlist of this machine: its package registries by address too (here every
/// name resolves to the proxy, an address the guard does not open from a DNS answer).
fn build_allow() -> String {
    use std::net::ToSocketAddrs;
    let mut addrs: Vec<String> = Vec::new();
    for host in [
        "deb.debian.org",
        "registry.npmjs.org",
        "pypi.org",
        "files.pythonhosted.org",
    ] {
        for addr in (host, 443).to_socket_addrs().into_iter().flatten() {
            let ip = format!("\"{}\"", addr.ip());
            if !addrs.contains(&ip) {
                addrs.push(ip);
            }
        }
    }
    format!("[build]\nallow = [{}]\n", addrs.join(", "))
}

/// `yolo init --agent NAME && yolo up && yolo run NAME -- --version`: the version line.
fn preset_runs(agent: &str) -> String {
    let t = Test::new();
    t.user_config(&build_allow());
    t.yolo(&["init", "--agent", agent]).ok();
    let has_ca = std::fs::read_dir(HOST_CA).is_ok_and(|mut d| d.next().is_some());
    let mut up = vec!["up"];
    if has_ca {
        up.extend(["--extra-ca", HOST_CA]);
    }
    let clock = std::time::Instant::now();
    t.yolo(&up).ok();
    eprintln!("{agent}: built and started in {:?}", clock.elapsed());
    let run = t.yolo(&["run", agent, "--", "--version"]).ok();
    let out = run.stdout();
    assert!(
        out.chars().any(|c| c.is_ascii_digit()) && out.contains('.'),
        "{agent} printed no version: {out:?}\n{}",
        run.stderr()
    );
    if has_ca {
        // The certificates the build and the container trust are on the session's record.
        let start = t.first_event("session_start").unwrap();
        assert!(
            start["extra_ca"].as_array().is_some_and(|a| !a.is_empty()),
            "{start}"
        );
    }
    out
}

#[test]
fn claude_is_installed_and_runs() {
    assert!(preset_runs("claude").contains("Claude Code"));
}

#[test]
fn codex_is_installed_and_runs() {
    preset_runs("codex");
}

#[test]
fn gemini_is_installed_and_runs() {
    preset_runs("gemini");
}

#[test]
fn aider_is_installed_and_runs() {
    preset_runs("aider");
}

#[test]
fn opencode_is_installed_and_runs() {
    preset_runs("opencode");
}
