//! `yolo allow`, `yolo deny` and `yolo firewall`: change or show a running session's allowlist
//! through the guard's control socket, without restarting anything.

use super::network;
use crate::audit::{self, EventKind};
use crate::cli::Target;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::firewall::allowlist::Allowlist;
use crate::firewall::control::{Request, Response};
use crate::project::Located;
use crate::state::WorkspaceState;
use std::collections::BTreeMap;

pub async fn allow(target: &Target, patterns: Vec<String>) -> Result<i32> {
    // Checked here too, so a typo gets the pattern help before any Docker work.
    Allowlist::parse(&patterns).map_err(Error::other)?;
    request(
        target,
        &Request::Allow {
            patterns: patterns.clone(),
        },
    )
    .await?;
    eprintln!(
        "yolo: allowed {} (effective now, no restart)",
        patterns.join(" ")
    );
    Ok(0)
}

pub async fn deny(target: &Target, patterns: Vec<String>) -> Result<i32> {
    let response = request(
        target,
        &Request::Deny {
            patterns: patterns.clone(),
        },
    )
    .await?;
    if response.removed.is_empty() {
        return Err(Error::other(format!(
            "none of {} is in the allowlist; `yolo firewall` shows it",
            patterns.join(" ")
        )));
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
    Ok(0)
}

pub async fn show(target: &Target, json: bool) -> Result<i32> {
    let response = request(target, &Request::Status).await?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&response).unwrap_or_default()
        );
        return Ok(0);
    }
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

async fn request(target: &Target, request: &Request) -> Result<Response> {
    let located = Located::find(target)?;
    let engine = super::engine().await?;
    let guard = running_guard(&engine, &located).await?;
    let response = network::control(&engine, &guard, request).await?;
    record(&located, request);
    Ok(response)
}

/// The host's own record of who asked (the guard records what it did).
fn record(located: &Located, request: &Request) {
    let Ok(state) = WorkspaceState::load(&located.devcontainer_id) else {
        return;
    };
    let Some(session) = state.session else { return };
    let (action, patterns) = match request {
        Request::Allow { patterns } => ("allow requested", patterns.clone()),
        Request::Deny { patterns } => ("deny requested", patterns.clone()),
        Request::Status => return,
    };
    if let Ok(writer) = audit::Writer::open(&audit::session_path(&session), &session) {
        let _ = writer.write(EventKind::Firewall {
            action: action.into(),
            patterns,
        });
    }
}

async fn running_guard(engine: &Engine, located: &Located) -> Result<String> {
    let found = engine.find(&super::owner(located)).await?;
    match found.guard {
        Some(g) if g.running => Ok(g.id),
        _ => Err(Error::other(format!(
            "no running firewall for {}; start the session with `yolo up` (with --network none or no session there is no allowlist to change)",
            located.workspace.display()
        ))),
    }
}

/// The one-screen summary printed after `yolo run`: what the agent reached and what it did not.
pub fn summary(session: &str, since: chrono::DateTime<chrono::Utc>) -> String {
    let mut tail = audit::reader::Tail::new(audit::session_files(session));
    let mut contacted: BTreeMap<String, usize> = BTreeMap::new();
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    let mut blocked: BTreeMap<String, usize> = BTreeMap::new();
    for event in tail.poll().into_iter().filter(|e| e.ts >= since) {
        match event.kind {
            EventKind::Dns { name, decision, .. } if decision == "allowed" => {
                *contacted.entry(name).or_default() += 1
            }
            EventKind::Dns { name, decision, .. } if decision == "refused" => {
                *refused.entry(name).or_default() += 1
            }
            EventKind::Blocked {
                proto,
                dst,
                port,
                name,
            } => {
                let key = format!(
                    "{proto} {dst}{}{}",
                    port.map(|p| format!(":{p}")).unwrap_or_default(),
                    name.map(|n| format!(" ({n})")).unwrap_or_default()
                );
                *blocked.entry(key).or_default() += 1
            }
            _ => {}
        }
    }
    let mut out = String::from("network summary for this run:\n");
    for (title, map) in [
        ("domains resolved (allowed)", &contacted),
        ("domains refused", &refused),
        ("connections blocked", &blocked),
    ] {
        out.push_str(&format!("  {title}: {}\n", map.len()));
        let mut items: Vec<_> = map.iter().collect();
        items.sort_by(|a, b| b.1.cmp(a.1));
        for (k, n) in items.iter().take(8) {
            out.push_str(&format!("    {k} ({n}x)\n"));
        }
        if items.len() > 8 {
            out.push_str(&format!(
                "    ... and {} more (`yolo audit`)\n",
                items.len() - 8
            ));
        }
    }
    out
}
