//! `yolo status` (`ps`): yolo's containers.

use super::output::{self, Container, Limits, Network};
use crate::engine::Role;
use crate::error::Result;
use crate::firewall::mode_name;
use crate::state::WorkspaceState;

pub(crate) async fn execute(json: bool) -> Result<i32> {
    let engine = super::engine().await?;
    let mut rows = Vec::new();
    let all = engine.list_managed().await?;
    for c in all.iter().filter(|c| c.role == Role::Agent) {
        let mode = c.network.map(mode_name).unwrap_or_default();
        let guard = all
            .iter()
            .find(|g| g.role == Role::Guard && g.devcontainer_id == c.devcontainer_id);
        // Another data dir's workspace, or an unreadable file: shown without what yolo saved.
        let state = c
            .devcontainer_id
            .as_deref()
            .and_then(|id| WorkspaceState::load(id).ok())
            .unwrap_or_default();
        let details = engine.inspect(&c.id).await.ok();
        let mut network = Network::of(mode, guard);
        if json {
            // A `docker exec` per guard: only for scripts, the table does not show it.
            network = network.ask_allowlist(&engine, guard).await;
        }
        rows.push(output::Status {
            container: Container::from_found(c, state.exec.as_ref()),
            session: state.session,
            status: c.status.clone(),
            limits: Limits {
                cpus: details.as_ref().and_then(|d| d.cpus),
                memory_bytes: details.as_ref().and_then(|d| d.memory_bytes),
                pids: details.as_ref().and_then(|d| d.pids),
            },
            network,
        });
    }
    if json {
        output::print(&rows);
        return Ok(0);
    }
    if rows.is_empty() {
        eprintln!("no yolo containers (start one with `yolo up` in a repository)");
        return Ok(0);
    }
    println!(
        "{:<32} {:<9} {:<18} {:<22} {:<20} WORKSPACE",
        "CONTAINER", "STATE", "NETWORK", "LIMITS", "UPTIME"
    );
    for r in rows {
        let limits = format!(
            "{}cpu {} {}pids",
            r.limits.cpus.map(|c| format!("{c}")).unwrap_or("-".into()),
            r.limits.memory_bytes.map(human_bytes).unwrap_or("-".into()),
            r.limits.pids.map(|p| p.to_string()).unwrap_or("-".into())
        );
        let guard = r.network.guard.as_deref().unwrap_or("");
        let network = match guard {
            "" | "running" => r.network.mode.clone(),
            guard => format!("{} (guard {guard})", r.network.mode),
        };
        let c = &r.container;
        println!(
            "{:<32} {:<9} {:<18} {:<22} {:<20} {}",
            c.name, c.state, network, limits, r.status, c.workspace
        );
        if c.state == "running" && !guard.is_empty() && guard != "running" {
            eprintln!(
                "  warning: {}'s firewall guard is {guard}: the container is offline (fail closed); `yolo up` restores it",
                c.name
            );
        }
    }
    Ok(0)
}

fn human_bytes(b: i64) -> String {
    const GIB: i64 = 1 << 30;
    const MIB: i64 = 1 << 20;
    if b % GIB == 0 {
        format!("{}GiB", b / GIB)
    } else {
        format!("{}MiB", b / MIB)
    }
}
