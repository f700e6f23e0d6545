//! `yolo allow`, `yolo deny` and `yolo firewall`: change or show a running session's allowlist
//! through the guard's control socket (`session::firewall`), without restarting anything.

use crate::cli::Target;
use crate::error::{Error, Result};
use crate::firewall::control::Request;
use crate::session::firewall;

/// `yolo allow`: the patterns were checked by clap (`values::parse_pattern`), so a typo is a
/// usage error before any Docker work.
pub(crate) async fn allow(
    target: &Target,
    patterns: Vec<String>,
    http: Vec<String>,
) -> Result<i32> {
    let located = super::locate(target)?;
    if !http.is_empty() {
        firewall::request(
            &located,
            &Request::AllowHttp {
                rules: http.clone(),
            },
        )
        .await?;
        eprintln!(
            "yolo: allowed {} (effective now, no restart; for this session only)",
            http.join(", ")
        );
    }
    if patterns.is_empty() {
        return Ok(0);
    }
    let request = Request::Allow {
        patterns: patterns.clone(),
    };
    firewall::request(&located, &request).await?;
    eprintln!(
        "yolo: allowed {} (effective now, no restart)",
        patterns.join(" ")
    );
    Ok(0)
}

/// `yolo deny`: the patterns were checked by clap, like `allow`'s.
pub(crate) async fn deny(target: &Target, patterns: Vec<String>, http: Vec<String>) -> Result<i32> {
    let located = super::locate(target)?;
    if !http.is_empty() {
        firewall::request(
            &located,
            &Request::DenyHttp {
                rules: http.clone(),
            },
        )
        .await?;
        eprintln!(
            "yolo: denied {} (effective now, no restart; for this session only)",
            http.join(", ")
        );
    }
    if patterns.is_empty() {
        return Ok(0);
    }
    let request = Request::Deny {
        patterns: patterns.clone(),
    };
    let response = firewall::request(&located, &request).await?;
    let left = firewall::left_open(&patterns, &response);
    if response.removed.is_empty() {
        let why = if left.every_port.is_empty() {
            format!(
                "none of {} is in the allowlist; `yolo firewall` shows it",
                patterns.join(" ")
            )
        } else {
            format!("nothing denied: {}", left.every_port.join("; "))
        };
        return Err(Error::Usage(why));
    }
    eprintln!(
        "yolo: denied {}{}",
        response.removed.join(" "),
        if response.revoked.is_empty() {
            String::new()
        } else {
            format!(" (closed {})", response.revoked.join(", "))
        }
    );
    for warning in left.every_port.iter().chain(&left.by_another_entry) {
        eprintln!("{} {warning}", console::style("warning:").yellow().bold());
    }
    Ok(0)
}

/// `yolo firewall [--json]`: the running guard's allowlist, open addresses and counters.
pub(crate) async fn show(target: &Target, json: bool) -> Result<i32> {
    let located = super::locate(target)?;
    if json {
        crate::output::print(&firewall::view(&located).await?);
        return Ok(0);
    }
    let response = firewall::request(&located, &Request::Status).await?;
    let mode = response.mode.map(crate::firewall::mode_name).unwrap_or("?");
    println!("network: {mode}");
    println!("allowlist:");
    for p in response.patterns.iter().flatten() {
        println!("  {p}");
    }
    println!("open addresses:");
    if response.elements.is_empty() {
        println!("  (none yet: addresses open when an allowed name is resolved)");
    }
    for e in &response.elements {
        let expires = e
            .expires_secs
            .map(|s| format!("expires in {s}s"))
            .unwrap_or_else(|| "static".into());
        println!("  {:<40} {:<12} {expires}", e.element, e.set);
    }
    println!("counters:");
    for (name, c) in &response.counters {
        println!(
            "  {name:<24} {:>10} packets {:>12} bytes",
            c.packets, c.bytes
        );
    }
    Ok(0)
}
