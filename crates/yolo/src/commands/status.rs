//! `yolo status` (`ps`): yolo's containers.

use super::output::{self, Container, Limits, Network};
use crate::engine::labels;
use crate::error::Result;
use crate::state::WorkspaceState;
use bollard::models::ContainerSummary;

pub async fn execute(json: bool) -> Result<i32> {
    let engine = super::engine().await?;
    let mut rows = Vec::new();
    let all = engine.list_managed().await?;
    let label = |c: &ContainerSummary, key: &str| {
        c.labels
            .as_ref()
            .and_then(|l| l.get(key))
            .cloned()
            .unwrap_or_default()
    };
    for c in all.iter().filter(|c| label(c, labels::ROLE) == "agent") {
        let mode = label(c, labels::NETWORK);
        let guard = all.iter().find(|g| {
            label(g, labels::ROLE) == "guard" && label(g, labels::ID) == label(c, labels::ID)
        });
        // Another data dir's workspace, or an unreadable file: shown without what yolo saved.
        let state = WorkspaceState::load(&label(c, labels::ID)).unwrap_or_default();
        let host = engine
            .inspect(c.id.as_deref().unwrap_or_default())
            .await
            .ok()
            .and_then(|i| i.host_config);
        let mut network = Network::of(&mode, guard);
        if json {
            // A `docker exec` per guard: only for scripts, the table does not show it.
            network = network.ask_allowlist(&engine, guard).await;
        }
        rows.push(output::Status {
            container: Container::from_summary(c, state.exec.as_ref()),
            session: state.session,
            status: c.status.clone().unwrap_or_default(),
            limits: Limits {
                cpus: host
                    .as_ref()
                    .and_then(|h| h.nano_cpus)
                    .map(|n| n as f64 / 1e9),
                memory_bytes: host.as_ref().and_then(|h| h.memory),
                pids: host.as_ref().and_then(|h| h.pids_limit),
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
